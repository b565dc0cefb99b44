/* SPDX-License-Identifier: MIT */
/*
 * Exercises initiator/ and cache/ against a real target, without FUSE.
 *
 *   target_io info URL                       prints what the LUN (or target) is
 *   target_io verify URL BACKING_FILE SEED   random I/O checked against the backing file
 *   target_io qd1 URL COUNT                  COUNT one-block reads one at a time, with the
 *                                            session's transmit counters over them
 *   target_io qd URL COUNT DEPTH             the same with up to DEPTH reads in flight,
 *                                            all submitted from the main thread
 *
 * TARGET_IO_HEADER_DIGEST / TARGET_IO_DATA_DIGEST (none, crc32c, auto) set
 * the digest offers, over the URL's header_digest / data_digest.
 *
 * verify: writes random data at random (also unaligned, also end-of-device)
 * offsets through the initiator and checks it in the backing file; writes
 * into the backing file and checks it through the initiator; runs a burst
 * of concurrent reads.  Exit 0 when every byte matched.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/blkio/blkio.h"
#include "cache/pool/pool.h"
#include "initiator/util/log.h"
#include "initiator/lun/lun.h"
#include "initiator/net/url.h"

#define MAX_IO (256u * 1024u)

struct waiter {
	pthread_mutex_t m;
	pthread_cond_t cv;
	int pending, err;
	uint8_t *copy_to; /* for reads: where the data goes */
};

static void waiter_init(struct waiter *w)
{
	memset(w, 0, sizeof(*w));
	pthread_mutex_init(&w->m, NULL);
	pthread_cond_init(&w->cv, NULL);
}

static void waiter_wait(struct waiter *w)
{
	pthread_mutex_lock(&w->m);
	while (w->pending)
		pthread_cond_wait(&w->cv, &w->m);
	pthread_mutex_unlock(&w->m);
}

struct read_ctx {
	struct waiter *w;
	uint8_t *dst;
};

static void io_done(void *arg, int err, const void *data, size_t len)
{
	struct read_ctx *r = arg;
	struct waiter *w = r->w;
	if (!err && data && r->dst)
		memcpy(r->dst, data, len);
	pthread_mutex_lock(&w->m);
	if (err && !w->err)
		w->err = err;
	w->pending--;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->m);
}

static int do_read(struct blk_dev *d, uint64_t off, size_t len, uint8_t *dst)
{
	struct waiter w;
	waiter_init(&w);
	struct read_ctx r = {&w, dst};
	w.pending = 1;
	int rc = blk_read(d, off, len, io_done, &r);
	if (rc)
		return rc;
	waiter_wait(&w);
	return w.err;
}

static int do_write(struct blk_dev *d, uint64_t off, size_t len, const uint8_t *src)
{
	struct waiter w;
	waiter_init(&w);
	struct read_ctx r = {&w, NULL};
	void *payload;
	struct blk_req *req = blk_write_prepare(d, off, len, &payload);
	if (!req)
		return -EINVAL;
	memcpy(payload, src, len);
	w.pending = 1;
	blk_write_submit(req, io_done, &r);
	waiter_wait(&w);
	return w.err;
}

static int do_sync(struct blk_dev *d)
{
	struct waiter w;
	waiter_init(&w);
	struct read_ctx r = {&w, NULL};
	w.pending = 1;
	int rc = blk_sync(d, io_done, &r);
	if (rc)
		return rc;
	waiter_wait(&w);
	return w.err;
}

static int open_session(const char *text, struct iscsi_url *u, struct iscsi_session **s)
{
	char err[256];
	if (iscsi_url_parse(text, true, u, err, sizeof(err))) {
		fprintf(stderr, "bad URL: %s\n", err);
		return -EINVAL;
	}
	struct iscsi_session_config c = {.transport = &iscsi_tcp_transport, .port = u->port, .queue_depth = 64,
					 .timeout_ms = 10000};
	snprintf(c.host, sizeof(c.host), "%s", u->host);
	snprintf(c.target_name, sizeof(c.target_name), "%s", u->target);
	snprintf(c.initiator_name, sizeof(c.initiator_name), "iqn.2026-11.org.example:target-io");
	iscsi_neg_config_default(&c.neg);
	/* digests: the URL's header_digest/data_digest, then the environment's */
	const char *hd[2] = {u->header_digest, getenv("TARGET_IO_HEADER_DIGEST")};
	const char *dd[2] = {u->data_digest, getenv("TARGET_IO_DATA_DIGEST")};
	for (int i = 0; i < 2; i++) {
		if ((hd[i] && hd[i][0] && iscsi_neg_set_digest(&c.neg, false, hd[i])) ||
		    (dd[i] && dd[i][0] && iscsi_neg_set_digest(&c.neg, true, dd[i]))) {
			fprintf(stderr, "bad digest choice (none, crc32c, auto expected)\n");
			return -EINVAL;
		}
	}
	/* seconds a lost session may take to come back before pending commands fail (default 0) */
	const char *rt = getenv("TARGET_IO_REPLACEMENT_TIMEOUT");
	if (rt && rt[0])
		c.replacement_timeout_ms = atoi(rt) * 1000;
	int rc = iscsi_session_open(&c, s, err, sizeof(err));
	if (rc)
		fprintf(stderr, "%s\n", err);
	return rc;
}

/* A pool of nslices, the probe of u's LUN and its block device on s.  0, or 1 after a line on stderr. */
static int open_lun(struct iscsi_session *s, const struct iscsi_url *u, unsigned nslices, struct buf_pool **pool,
		    struct iscsi_lun_info *info, struct blk_dev *d)
{
	if (buf_pool_create(pool, MAX_IO + 4 * 4096, nslices))
		return 1;
	void *scratch = buf_pool_get(*pool, NULL);
	int rc = iscsi_lun_probe(s, (uint16_t)u->lun, scratch, MAX_IO, info);
	buf_pool_put(*pool, scratch);
	if (rc || blk_dev_init(d, s, *pool, info, MAX_IO)) {
		fprintf(stderr, "probe failed: %s\n", strerror(-rc));
		return 1;
	}
	return 0;
}

static int cmd_info(const char *text)
{
	struct iscsi_url u;
	struct iscsi_session *s;
	struct buf_pool *pool;
	uint16_t luns[256];
	size_t n = 0;
	if (open_session(text, &u, &s) || buf_pool_create(&pool, 65536, 2))
		return 1;
	void *buf = buf_pool_get(pool, NULL);
	int rc = iscsi_report_luns(s, buf, 65536, luns, 256, &n);
	if (rc) {
		fprintf(stderr, "REPORT LUNS: %s\n", strerror(-rc));
		return 1;
	}
	printf("luns ");
	for (size_t i = 0; i < n; i++)
		printf("%s%u", i ? "," : "", luns[i]);
	printf("\n");
	if (u.lun >= 0) {
		struct iscsi_lun_info info;
		rc = iscsi_lun_probe(s, (uint16_t)u.lun, buf, 65536, &info);
		if (rc) {
			fprintf(stderr, "probe: %s\n", strerror(-rc));
			return 1;
		}
		printf("type %u\nvendor %s\nproduct %s\n", info.inq.device_type, info.inq.vendor, info.inq.product);
		if (info.inq.device_type == 0)
			printf("block_size %u\nnblocks %llu\nwp %d\nserial %s\ndevid %s\n", info.cap.block_size,
			       (unsigned long long)info.cap.nblocks, info.wp, info.serial, info.devid);
	}
	const struct iscsi_params *p = iscsi_session_params(s);
	printf("max_xmit_dsl %u\nmax_burst %u\nfirst_burst %u\nimmediate_data %d\ninitial_r2t %d\n", p->max_xmit_dsl,
	       p->max_burst, p->first_burst, p->immediate_data, p->initial_r2t);
	printf("header_digest %d\ndata_digest %d\n", p->header_digest, p->data_digest);
	buf_pool_put(pool, buf);
	iscsi_session_close(s, 5000);
	buf_pool_destroy(pool);
	return 0;
}

static uint64_t rng_state;
static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static void fill_random(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)rnd();
}

static int failures;
static void check(bool ok, const char *what, uint64_t off, size_t len)
{
	if (!ok) {
		failures++;
		fprintf(stderr, "MISMATCH %s at %llu+%zu\n", what, (unsigned long long)off, len);
	}
}

static size_t pick_len(uint32_t bs)
{
	switch (rnd() % 5) {
	case 0: return 1 + rnd() % 16;                   /* tiny */
	case 1: return (1 + rnd() % 8) * bs;             /* aligned */
	case 2: return 1 + rnd() % (3 * bs);             /* around a block */
	case 3: return 1 + rnd() % MAX_IO;               /* anything */
	default: return MAX_IO;                          /* largest */
	}
}

static int cmd_verify(const char *text, const char *backing, const char *seed)
{
	struct iscsi_url u;
	struct iscsi_session *s;
	struct buf_pool *pool;
	struct iscsi_lun_info info;
	struct blk_dev d;
	rng_state = strtoull(seed, NULL, 0) * 0x9e3779b97f4a7c15ull + 1;

	if (open_session(text, &u, &s))
		return 1;
	if (u.lun < 0) {
		fprintf(stderr, "verify needs a URL with /lun\n");
		return 1;
	}
	if (open_lun(s, &u, 48, &pool, &info, &d))
		return 1;
	int rc;
	int fd = open(backing, O_RDWR);
	if (fd < 0) {
		perror(backing);
		return 1;
	}
	uint8_t *a = malloc(MAX_IO), *b = malloc(MAX_IO);
	int ops = 0;

	/* 1. Through the initiator -> found in the backing file (and read back). */
	for (int i = 0; i < 60; i++, ops++) {
		size_t len = pick_len(d.bs);
		uint64_t off;
		if (i % 10 == 9)
			off = blk_dev_size(&d) - len; /* ends exactly at the end of the device */
		else
			off = rnd() % (blk_dev_size(&d) - len + 1);
		fill_random(a, len);
		if ((rc = do_write(&d, off, len, a))) {
			fprintf(stderr, "write %llu+%zu: %s\n", (unsigned long long)off, len, strerror(-rc));
			return 1;
		}
		if ((rc = do_read(&d, off, len, b))) {
			fprintf(stderr, "read %llu+%zu: %s\n", (unsigned long long)off, len, strerror(-rc));
			return 1;
		}
		check(memcmp(a, b, len) == 0, "initiator read-back", off, len);
		if ((rc = do_sync(&d))) {
			fprintf(stderr, "sync: %s\n", strerror(-rc));
			return 1;
		}
		check(pread(fd, b, len, (off_t)off) == (ssize_t)len && memcmp(a, b, len) == 0, "backing file", off, len);
	}
	/* 2. Into the backing file -> read through the initiator. */
	for (int i = 0; i < 30; i++, ops++) {
		size_t len = pick_len(d.bs);
		uint64_t off = rnd() % (blk_dev_size(&d) - len + 1);
		fill_random(a, len);
		if (pwrite(fd, a, len, (off_t)off) != (ssize_t)len || fdatasync(fd)) {
			perror("pwrite");
			return 1;
		}
		if ((rc = do_read(&d, off, len, b))) {
			fprintf(stderr, "read %llu+%zu: %s\n", (unsigned long long)off, len, strerror(-rc));
			return 1;
		}
		check(memcmp(a, b, len) == 0, "initiator read of backing-file data", off, len);
	}
	/* 3. Many reads in flight at once, each checked. */
	enum { NCONC = 40, CHUNK = 8192 };
	uint8_t *many = malloc((size_t)NCONC * CHUNK), *ref = malloc((size_t)NCONC * CHUNK);
	struct read_ctx ctx[NCONC];
	struct waiter w;
	waiter_init(&w);
	uint64_t base = (rnd() % (blk_dev_size(&d) / CHUNK - NCONC)) * CHUNK + 512; /* unaligned for 4K LUNs */
	if (pread(fd, ref, (size_t)NCONC * CHUNK, (off_t)base) != (ssize_t)NCONC * CHUNK)
		return 1;
	w.pending = NCONC;
	for (int i = 0; i < NCONC; i++) {
		ctx[i] = (struct read_ctx){&w, many + (size_t)i * CHUNK};
		if (blk_read(&d, base + (uint64_t)i * CHUNK, CHUNK, io_done, &ctx[i]))
			return 1;
	}
	waiter_wait(&w);
	check(w.err == 0 && memcmp(many, ref, (size_t)NCONC * CHUNK) == 0, "concurrent reads", base,
	      (size_t)NCONC * CHUNK);
	ops += NCONC;

	struct iscsi_session_stats st;
	iscsi_session_get_stats(s, &st);
	printf("ops %d mismatches %d commands %llu max_outstanding %u rmw %llu\n", ops, failures,
	       (unsigned long long)st.commands, st.max_outstanding, (unsigned long long)d.rmw_count);
	iscsi_session_close(s, 5000);
	blk_dev_fini(&d);
	buf_pool_destroy(pool);
	close(fd);
	free(a);
	free(b);
	free(many);
	free(ref);
	return failures ? 1 : 0;
}

/* Wait until fewer than depth reads are in flight, then count one more. */
static void waiter_enter(struct waiter *w, unsigned depth)
{
	pthread_mutex_lock(&w->m);
	while (w->pending >= (int)depth)
		pthread_cond_wait(&w->cv, &w->m);
	w->pending++;
	pthread_mutex_unlock(&w->m);
}

/*
 * qd: COUNT reads of one logical block, submitted from this thread (never
 * from a completion) with up to DEPTH in flight.  Prints the digests
 * negotiated (`header_digest 0|1`, `data_digest 0|1`), `reads N`,
 * `tx_direct N`, `tx_kicks N`, `event_wakeups N` (the session's counters
 * over the reads alone).  Exit 0 when every read succeeded.
 */
static int cmd_qd(const char *text, const char *count, unsigned depth)
{
	struct iscsi_url u;
	struct iscsi_session *s;
	struct buf_pool *pool;
	struct iscsi_lun_info info;
	struct blk_dev d;
	unsigned long n = strtoul(count, NULL, 0);

	if (open_session(text, &u, &s))
		return 1;
	if (u.lun < 0 || n == 0 || depth == 0 || depth > 128) {
		fprintf(stderr, "qd needs a URL with /lun, a COUNT > 0 and a DEPTH of 1 to 128\n");
		return 1;
	}
	if (open_lun(s, &u, depth > 8 ? depth : 8, &pool, &info, &d))
		return 1;
	int rc = 0;
	uint32_t bs = info.cap.block_size;
	uint64_t span = blk_dev_size(&d) / bs;
	struct iscsi_session_stats a, b;
	iscsi_session_get_stats(s, &a);
	struct waiter w;
	waiter_init(&w);
	struct read_ctx r = {&w, NULL};
	unsigned long done = 0;
	for (unsigned long i = 0; i < n; i++) {
		waiter_enter(&w, depth);
		if ((rc = blk_read(&d, (i % span) * bs, bs, io_done, &r))) {
			fprintf(stderr, "read %lu: %s\n", i, strerror(-rc));
			pthread_mutex_lock(&w.m);
			w.pending--;
			pthread_mutex_unlock(&w.m);
			break;
		}
	}
	waiter_wait(&w);
	if (!rc && !w.err)
		done = n;
	else if (w.err)
		fprintf(stderr, "a read failed: %s\n", strerror(-w.err));
	iscsi_session_get_stats(s, &b);
	const struct iscsi_params *p = iscsi_session_params(s);
	printf("header_digest %d\ndata_digest %d\n", p->header_digest, p->data_digest);
	printf("reads %lu\ntx_direct %llu\ntx_kicks %llu\nevent_wakeups %llu\n", done,
	       (unsigned long long)(b.tx_direct - a.tx_direct), (unsigned long long)(b.tx_kicks - a.tx_kicks),
	       (unsigned long long)(b.event_wakeups - a.event_wakeups));
	iscsi_session_close(s, 5000);
	blk_dev_fini(&d);
	buf_pool_destroy(pool);
	return done == n ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (getenv("TARGET_IO_DEBUG"))
		log_set_level(LOG_LVL_DEBUG);
	if (argc == 3 && strcmp(argv[1], "info") == 0)
		return cmd_info(argv[2]);
	if (argc == 5 && strcmp(argv[1], "verify") == 0)
		return cmd_verify(argv[2], argv[3], argv[4]);
	if (argc == 4 && strcmp(argv[1], "qd1") == 0)
		return cmd_qd(argv[2], argv[3], 1);
	if (argc == 5 && strcmp(argv[1], "qd") == 0)
		return cmd_qd(argv[2], argv[3], (unsigned)strtoul(argv[4], NULL, 0));
	fprintf(stderr, "usage: target_io info URL | target_io verify URL BACKING_FILE SEED | target_io qd1 URL COUNT | target_io qd URL COUNT DEPTH\n");
	return 2;
}
