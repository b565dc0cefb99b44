/* SPDX-License-Identifier: MIT */
/*
 * The overlap check of cache/blkio/blkio.c's writes at queue depth 128, against a
 * fake session (struct blk_session_ops) that holds commands until told to
 * complete them: a new write is compared with the few writes in flight
 * hashed to its spans, not with all 128; overlapping writes in flight are
 * still found whichever span they share; and what one check costs.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache/blkio/blkio.h"

#define BS 512u
#define NBLOCKS (1u << 22) /* 2 GiB: no data is kept, commands only */
#define MAX_IO (64u * 1024)
#define INFLIGHT 128u
#define CMDS_MAX 256u

/* The fake session: commands kept in order; completed inline unless held. */
static struct {
	pthread_mutex_t lock;
	struct iscsi_cmd cmd[CMDS_MAX];
	bool done[CMDS_MAX];
	unsigned n;
	bool hold;
} fk = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void complete(struct iscsi_cmd *c)
{
	struct iscsi_cmd_result res = {.status = SCSI_STATUS_GOOD, .xfer_len = c->len};
	c->cb(c->arg, &res);
}

static int fake_submit(void *s, const struct iscsi_cmd *cmd)
{
	(void)s;
	if (!fk.hold) {
		struct iscsi_cmd c = *cmd;
		complete(&c);
		return 0;
	}
	pthread_mutex_lock(&fk.lock);
	cr_assert_lt(fk.n, CMDS_MAX);
	fk.cmd[fk.n++] = *cmd;
	pthread_mutex_unlock(&fk.lock);
	return 0;
}

static uint32_t fake_max_cmd_bytes(const void *s)
{
	(void)s;
	return 0;
}

static const struct blk_session_ops fake_ops = {.submit = fake_submit, .max_cmd_bytes = fake_max_cmd_bytes};

static struct buf_pool *pool;
static struct blk_dev dev;
static unsigned ndone;

static void on_done(void *arg, int err, const void *data, size_t len)
{
	(void)arg;
	(void)data;
	(void)len;
	cr_assert_eq(err, 0);
	ndone++;
}

static void open_dev(void)
{
	struct iscsi_lun_info info = {.lun = 1, .lun_field = 0x0001000000000000ull,
				      .cap = {.nblocks = NBLOCKS, .block_size = BS}};
	cr_assert_eq(buf_pool_create(&pool, MAX_IO + 4 * BS, INFLIGHT + 2), 0);
	cr_assert_eq(blk_dev_init_ops(&dev, &fk, &fake_ops, pool, &info, MAX_IO), 0);
}

static void close_dev(void)
{
	fk.hold = false;
	for (unsigned i = 0; i < fk.n; i++)
		if (!fk.done[i]) {
			fk.done[i] = true;
			complete(&fk.cmd[i]);
		}
	fk.n = 0;
	blk_dev_fini(&dev);
	buf_pool_destroy(pool);
}

static void write_at(uint64_t lba, size_t len)
{
	void *payload;
	struct blk_req *r = blk_write_prepare(&dev, lba * BS, len, &payload);
	cr_assert_not_null(r);
	memset(payload, 0x5a, len);
	blk_write_submit(r, on_done, NULL);
}

/* INFLIGHT aligned 4 KiB writes held in flight, spread over the LUN (LBA i * 7919 * 4). */
static void fill_inflight(void)
{
	fk.hold = true;
	for (unsigned i = 0; i < INFLIGHT; i++)
		write_at((uint64_t)i * 7919 * 4, 4096);
	cr_assert_eq(fk.n, INFLIGHT);
}

TestSuite(blkio_overlap, .init = open_dev, .fini = close_dev);

Test(blkio_overlap, a_check_reads_the_buckets_of_its_spans_not_every_write_in_flight)
{
	cr_assert_eq(1u << dev.wshift, 256u, "a span holds a whole request: 64 KiB / 512 + 1 blocks -> 256");
	fill_inflight();
	uint64_t before = dev.overlap_probes;
	fk.hold = false; /* the next writes complete at once */
	for (unsigned i = 0; i < 100; i++)
		write_at(NBLOCKS / 2 + (uint64_t)i * 1024, 4096); /* disjoint from every write in flight */
	uint64_t probes = dev.overlap_probes - before;
	cr_assert_eq(ndone, 100);
	/* A list walk compares each new write with all 128 (12800); the buckets hold about 1 each. */
	cr_assert_leq(probes, 200, "%llu writes in flight compared for 100 checks", (unsigned long long)probes);
}

struct writer {
	uint64_t lba;
	size_t len;
	bool done;
};

static void *write_thread(void *arg)
{
	struct writer *w = arg;
	write_at(w->lba, w->len);
	__atomic_store_n(&w->done, true, __ATOMIC_SEQ_CST);
	return NULL;
}

Test(blkio_overlap, a_write_overlapping_one_in_flight_waits_whichever_span_they_share)
{
	fill_inflight();
	/* Write 3 covers LBAs 95028..95035 (span 371); 64 KiB from 94908 covers spans 370 and 371. */
	uint64_t at = 3ull * 7919 * 4;
	struct writer w = {.lba = at - 120, .len = MAX_IO};
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, write_thread, &w), 0);
	usleep(200 * 1000);
	cr_assert_not(__atomic_load_n(&w.done, __ATOMIC_SEQ_CST), "sent while an overlapping write is in flight");
	cr_assert_eq(fk.n, INFLIGHT);
	pthread_mutex_lock(&fk.lock);
	fk.done[3] = true;
	pthread_mutex_unlock(&fk.lock);
	complete(&fk.cmd[3]);
	for (int i = 0; i < 500 && !__atomic_load_n(&w.done, __ATOMIC_SEQ_CST); i++)
		usleep(10 * 1000);
	cr_assert(__atomic_load_n(&w.done, __ATOMIC_SEQ_CST), "not sent once the overlapping write completed");
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_eq(fk.n, INFLIGHT + 1);
}

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* ns per write (prepare, overlap check, submit, completion) with 0 and with 128 writes in flight. */
static double ns_per_write(void)
{
	enum { K = 20000 };
	double best = 1e18;
	fk.hold = false;
	for (int round = 0; round < 5; round++) {
		double t0 = now_ns();
		for (unsigned i = 0; i < K; i++)
			write_at(NBLOCKS / 2 + (uint64_t)(i % 4096) * 64, 4096);
		double ns = (now_ns() - t0) / K;
		if (ns < best)
			best = ns;
	}
	return best;
}

/* Not a pass/fail timing: the difference is what the check costs with 128 in flight. */
Test(blkio_overlap, cost_of_a_check_with_128_writes_in_flight)
{
	double idle = ns_per_write();
	fill_inflight();
	double busy = ns_per_write();
	fprintf(stderr, "write with 0 in flight: %.1f ns, with %u in flight: %.1f ns (check at QD%u: +%.1f ns; best of 5)\n",
		idle, INFLIGHT, busy, INFLIGHT, busy - idle);
}
