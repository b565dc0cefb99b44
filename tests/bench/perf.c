/* SPDX-License-Identifier: MIT */
/*
 * iserfuse-perf: load generator on initiator/ and cache/pool only (no
 * FUSE, no blkio), in the spirit of libiscsi's iscsi-perf.
 *
 *   iserfuse-perf [-m QD] [-b BLOCKS] [-r] [-w] [-t SECONDS] [-n COUNT] URL/LUN
 *
 * Keeps QD READ (or, with -w, WRITE) commands of BLOCKS logical blocks
 * outstanding; each completion callback submits the next command from the
 * event thread.  LBAs are sequential, or random with -r (xorshift64, fixed
 * seed per slot, so runs repeat).  Runs for SECONDS (default 10) or, with
 * -n, for exactly COUNT commands (for instruction counts under callgrind).
 * Prints `iops N`, `mbps N` (10^6 bytes per second), `ios N`, `errors N`,
 * `seconds N`.  Exit status 0 when no command failed.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache/pool/pool.h"
#include "initiator/util/log.h"
#include "initiator/iser/iser.h"
#include "initiator/lun/lun.h"
#include "initiator/net/url.h"

struct slot {
	struct iscsi_cmd cmd;
	void *buf;
	uint64_t rng;
};

static struct {
	struct iscsi_session *s;
	struct slot *slots;
	unsigned qd;
	uint32_t blocks, bs;
	uint64_t nblocks;   /* LUN size in blocks */
	bool random, write;
	uint64_t count;     /* 0: run for the time */
	atomic_bool stop;
	atomic_uint_fast64_t issued, completed, errors, next_lba;
	pthread_mutex_t m;
	pthread_cond_t cv;
	unsigned outstanding;
} g = {.m = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static uint64_t xorshift64(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void slot_done(void *arg, const struct iscsi_cmd_result *res);

/* Build and submit the next command on slot sl; false when nothing was submitted. */
static bool slot_submit(struct slot *sl)
{
	if (atomic_load_explicit(&g.stop, memory_order_relaxed))
		return false;
	if (g.count && atomic_fetch_add(&g.issued, 1) >= g.count)
		return false;
	uint64_t span = g.nblocks - g.blocks + 1, lba;
	if (g.random)
		lba = (xorshift64(&sl->rng) % (span / g.blocks)) * g.blocks;
	else
		lba = atomic_fetch_add(&g.next_lba, g.blocks) % (span - span % g.blocks);
	struct iscsi_cmd *c = &sl->cmd;
	c->cdb_len = (uint8_t)(g.write ? scsi_cdb_write(c->cdb, lba, g.blocks, false)
				       : scsi_cdb_read(c->cdb, lba, g.blocks, false));
	if (iscsi_session_submit(g.s, c) != 0) {
		atomic_fetch_add(&g.errors, 1);
		atomic_store(&g.stop, true);
		return false;
	}
	return true;
}

static void slot_finished(void)
{
	pthread_mutex_lock(&g.m);
	if (--g.outstanding == 0)
		pthread_cond_broadcast(&g.cv);
	pthread_mutex_unlock(&g.m);
}

static void slot_done(void *arg, const struct iscsi_cmd_result *res)
{
	struct slot *sl = arg;
	if (iscsi_cmd_result_errno(res) != 0) {
		if (atomic_fetch_add(&g.errors, 1) == 0)
			fprintf(stderr, "iserfuse-perf: command failed: %s\n",
				strerror(-iscsi_cmd_result_errno(res)));
		atomic_store(&g.stop, true);
	} else {
		atomic_fetch_add_explicit(&g.completed, 1, memory_order_relaxed);
	}
	if (!slot_submit(sl))
		slot_finished();
}

static void note_reg(void *pool)
{
	buf_pool_note_registration(pool);
}

static void usage(void)
{
	fprintf(stderr, "usage: iserfuse-perf [-m QD] [-b BLOCKS] [-r] [-w] [-t SECONDS] [-n COUNT] "
			"iscsi://host[:port]/target/lun[?iser]\n");
	exit(2);
}

static unsigned long parse_num(const char *s, unsigned long lo, unsigned long hi)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		usage();
	return v;
}

int main(int argc, char **argv)
{
	unsigned qd = 1;
	unsigned long blocks = 1, secs = 10;
	int opt;
	while ((opt = getopt(argc, argv, "m:b:rwt:n:")) != -1) {
		switch (opt) {
		case 'm': qd = (unsigned)parse_num(optarg, 1, 4096); break;
		case 'b': blocks = parse_num(optarg, 1, 65535); break;
		case 'r': g.random = true; break;
		case 'w': g.write = true; break;
		case 't': secs = parse_num(optarg, 1, 86400); break;
		case 'n': g.count = parse_num(optarg, 1, ~0ul); break;
		default: usage();
		}
	}
	if (optind != argc - 1)
		usage();
	log_set_level(LOG_LVL_WARN);

	struct iscsi_url u;
	char err[256];
	if (iscsi_url_parse(argv[optind], true, &u, err, sizeof(err))) {
		fprintf(stderr, "iserfuse-perf: bad URL: %s\n", err);
		return 1;
	}
	if (u.lun < 0) {
		fprintf(stderr, "iserfuse-perf: the URL names no LUN\n");
		return 1;
	}
	struct iscsi_session_config c = {.transport = &iscsi_tcp_transport, .port = u.port, .queue_depth = qd,
					 .timeout_ms = 10000};
	snprintf(c.host, sizeof(c.host), "%s", u.host);
	snprintf(c.target_name, sizeof(c.target_name), "%s", u.target);
	snprintf(c.initiator_name, sizeof(c.initiator_name), "iqn.2026-11.org.example:iserfuse-perf");
	snprintf(c.chap.user, sizeof(c.chap.user), "%s", u.user);
	snprintf(c.chap.secret, sizeof(c.chap.secret), "%s", u.password);
	iscsi_neg_config_default(&c.neg);
	if ((u.header_digest[0] && iscsi_neg_set_digest(&c.neg, false, u.header_digest)) ||
	    (u.data_digest[0] && iscsi_neg_set_digest(&c.neg, true, u.data_digest))) {
		fprintf(stderr, "iserfuse-perf: bad digest choice\n");
		return 1;
	}
	/* One payload pool, made before the session (iSER registers it at connect):
	 * qd slices of up to 4 KiB blocks, and one for the probe. */
	struct buf_pool *pool;
	struct iscsi_lun_info info;
	size_t slice = (size_t)blocks * 4096 > 65536 ? (size_t)blocks * 4096 : 65536;
	if (buf_pool_create(&pool, slice, qd + 1)) {
		fprintf(stderr, "iserfuse-perf: out of memory\n");
		return 1;
	}
	struct iser_ctx *ictx = NULL;
	if (u.iser) {
		if (iser_ctx_create(&ictx, buf_pool_base(pool), buf_pool_len(pool), qd, note_reg, pool)) {
			fprintf(stderr, "iserfuse-perf: out of memory\n");
			return 1;
		}
		c.transport = &iscsi_iser_transport;
		c.transport_ctx = ictx;
		iser_neg_config(&c.neg);
	}
	iscsi_url_wipe(&u);
	if (iscsi_session_open(&c, &g.s, err, sizeof(err))) {
		fprintf(stderr, "iserfuse-perf: %s\n", err);
		return 1;
	}
	explicit_bzero(&c, sizeof(c));

	void *pbuf = buf_pool_get(pool, NULL);
	int rc = iscsi_lun_probe(g.s, (uint16_t)u.lun, pbuf, 65536, &info);
	buf_pool_put(pool, pbuf);
	if (rc || info.inq.device_type != 0 || info.cap.block_size == 0) {
		fprintf(stderr, "iserfuse-perf: LUN %d: %s\n", u.lun, rc ? strerror(-rc) : "no disk at this LUN");
		iscsi_session_close(g.s, 5000);
		return 1;
	}
	g.bs = info.cap.block_size;
	g.nblocks = info.cap.nblocks;
	g.blocks = (uint32_t)blocks;
	g.qd = qd;
	if (g.nblocks < (uint64_t)g.blocks * 2) {
		fprintf(stderr, "iserfuse-perf: LUN too small\n");
		iscsi_session_close(g.s, 5000);
		return 1;
	}
	if (g.write && info.wp) {
		fprintf(stderr, "iserfuse-perf: LUN is write protected\n");
		iscsi_session_close(g.s, 5000);
		return 1;
	}
	if ((size_t)g.blocks * g.bs > slice || !(g.slots = calloc(qd, sizeof(*g.slots)))) {
		fprintf(stderr, "iserfuse-perf: out of memory\n");
		iscsi_session_close(g.s, 5000);
		return 1;
	}
	for (unsigned i = 0; i < qd; i++) {
		struct slot *sl = &g.slots[i];
		sl->buf = buf_pool_get(pool, NULL);
		memset(sl->buf, 0xa5, (size_t)g.blocks * g.bs);
		sl->rng = 0x9e3779b97f4a7c15ull ^ ((uint64_t)(i + 1) * 0xbf58476d1ce4e5b9ull);
		sl->cmd = (struct iscsi_cmd){.lun = info.lun_field,
					     .dir = g.write ? ISCSI_DIR_WRITE : ISCSI_DIR_READ,
					     .buf = sl->buf,
					     .len = g.blocks * g.bs,
					     .cb = slot_done,
					     .arg = sl};
	}

	double t0 = now_s();
	pthread_mutex_lock(&g.m);
	g.outstanding = qd;
	pthread_mutex_unlock(&g.m);
	for (unsigned i = 0; i < qd; i++)
		if (!slot_submit(&g.slots[i]))
			slot_finished();

	struct timespec deadline;
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += (time_t)secs;
	pthread_mutex_lock(&g.m);
	while (g.outstanding) {
		if (g.count)
			pthread_cond_wait(&g.cv, &g.m);
		else if (pthread_cond_timedwait(&g.cv, &g.m, &deadline) == ETIMEDOUT)
			atomic_store(&g.stop, true);
		if (atomic_load(&g.stop) && !g.count) {
			/* the last commands drain by themselves */
			while (g.outstanding)
				pthread_cond_wait(&g.cv, &g.m);
		}
	}
	pthread_mutex_unlock(&g.m);
	double dt = now_s() - t0;

	uint64_t ios = atomic_load(&g.completed), errors = atomic_load(&g.errors);
	double iops = dt > 0 ? (double)ios / dt : 0;
	printf("iops %.0f\nmbps %.1f\nios %llu\nerrors %llu\nseconds %.3f\n", iops,
	       iops * g.blocks * g.bs / 1e6, (unsigned long long)ios, (unsigned long long)errors, dt);
	fflush(stdout);

	for (unsigned i = 0; i < qd; i++)
		buf_pool_put(pool, g.slots[i].buf);
	iscsi_session_close(g.s, 5000);
	iser_ctx_destroy(ictx);
	buf_pool_destroy(pool);
	free(g.slots);
	return errors ? 1 : 0;
}
