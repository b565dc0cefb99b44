/* SPDX-License-Identifier: MIT */
/*
 * Block I/O (cache/blkio/blkio.c) against a fake session (struct blk_session_ops):
 * the exact SCSI commands sent (opcode, LBA, TRANSFER LENGTH), split at the
 * most blocks one command may move, the read-modify-write of unaligned edge
 * blocks (READ of the head, then the tail, then the WRITE), writes that wait
 * for an overlapping write in flight, retries of BUSY, SYNCHRONIZE CACHE only
 * after a write, and the data that reaches the fake disk.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "cache/blkio/blkio.h"

#define BS 512u
#define NBLOCKS 64u
#define MAX_IO (64u * 1024)
#define LOG_MAX 64

/* One command the fake session received, decoded from its CDB (SBC-3 §5). */
struct sent {
	uint8_t op;
	uint64_t lba;
	uint32_t nblk;      /* TRANSFER LENGTH (NUMBER OF LOGICAL BLOCKS for SYNCHRONIZE CACHE) */
	uint32_t len;       /* Expected Data Transfer Length, bytes */
	enum iscsi_dir dir;
	void *buf;
	iscsi_cmd_cb cb;
	void *arg;
	bool completed;
};

/* The fake session: a RAM disk of NBLOCKS blocks; commands complete inline unless manual. */
struct fake {
	pthread_mutex_t lock;
	struct sent log[LOG_MAX];
	unsigned n;
	bool manual;          /* queue commands until fake_complete */
	unsigned busy_left;   /* answer this many commands with BUSY (SAM status 0x08) first */
	int submit_err;       /* returned by submit when set (cb not called) */
	uint32_t max_cmd_bytes;
	uint8_t disk[NBLOCKS * BS];
};

static struct fake fk;

static uint64_t be(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

static void complete(struct sent *c)
{
	struct iscsi_cmd_result res = {.status = SCSI_STATUS_GOOD, .xfer_len = c->len};
	pthread_mutex_lock(&fk.lock);
	c->completed = true;
	bool busy = fk.busy_left > 0;
	if (busy)
		fk.busy_left--;
	pthread_mutex_unlock(&fk.lock);
	if (busy) {
		res.status = SCSI_STATUS_BUSY;
		res.xfer_len = 0;
	} else if (c->dir == ISCSI_DIR_READ) {
		memcpy(c->buf, fk.disk + c->lba * BS, c->len);
	} else if (c->dir == ISCSI_DIR_WRITE) {
		memcpy(fk.disk + c->lba * BS, c->buf, c->len);
	}
	c->cb(c->arg, &res);
}

static int fake_submit(void *s, const struct iscsi_cmd *cmd)
{
	cr_assert_eq((void *)s, (void *)&fk, "the session given to blk_dev_init_ops");
	if (fk.submit_err)
		return fk.submit_err;
	const uint8_t *cdb = cmd->cdb;
	pthread_mutex_lock(&fk.lock);
	cr_assert_lt(fk.n, LOG_MAX);
	struct sent *c = &fk.log[fk.n++];
	*c = (struct sent){.op = cdb[0], .len = cmd->len, .dir = cmd->dir, .buf = cmd->buf, .cb = cmd->cb,
			   .arg = cmd->arg};
	pthread_mutex_unlock(&fk.lock);
	switch (cdb[0]) {
	case 0x28: /* READ(10) */
	case 0x2a: /* WRITE(10) */
	case 0x35: /* SYNCHRONIZE CACHE(10) */
		c->lba = be(cdb + 2, 4);
		c->nblk = (uint32_t)be(cdb + 7, 2);
		break;
	case 0x88: /* READ(16) */
	case 0x8a: /* WRITE(16) */
	case 0x91: /* SYNCHRONIZE CACHE(16) */
		c->lba = be(cdb + 2, 8);
		c->nblk = (uint32_t)be(cdb + 10, 4);
		break;
	default:
		cr_assert_fail("unexpected opcode 0x%02x", cdb[0]);
	}
	if (c->dir != ISCSI_DIR_NONE)
		cr_assert_eq(c->len, c->nblk * BS, "data length of command %u", fk.n - 1);
	if (!fk.manual)
		complete(c);
	return 0;
}

static uint32_t fake_max_cmd_bytes(const void *s)
{
	(void)s;
	return fk.max_cmd_bytes;
}

static const struct blk_session_ops fake_ops = {.submit = fake_submit, .max_cmd_bytes = fake_max_cmd_bytes};

static unsigned nsent(void)
{
	pthread_mutex_lock(&fk.lock);
	unsigned n = fk.n;
	pthread_mutex_unlock(&fk.lock);
	return n;
}

/* Complete the manual-mode command number i (on this thread, as the event thread would). */
static void fake_complete(unsigned i)
{
	cr_assert_lt(i, nsent());
	cr_assert(!fk.log[i].completed, "command %u completed twice", i);
	complete(&fk.log[i]);
}

static void expect(unsigned i, uint8_t op, uint64_t lba, uint32_t nblk)
{
	cr_assert_lt(i, nsent(), "command %u was sent", i);
	const struct sent *c = &fk.log[i];
	cr_expect_eq(c->op, op, "command %u: opcode 0x%02x, want 0x%02x", i, c->op, op);
	cr_expect_eq(c->lba, lba, "command %u: LBA %llu, want %llu", i, (unsigned long long)c->lba,
		     (unsigned long long)lba);
	cr_expect_eq(c->nblk, nblk, "command %u: %u blocks, want %u", i, c->nblk, nblk);
}

/* What a blk_done_fn reported. */
struct done {
	int calls, err;
	size_t len;
	uint8_t data[MAX_IO];
};

static void on_done(void *arg, int err, const void *data, size_t len)
{
	struct done *d = arg;
	d->calls++;
	d->err = err;
	d->len = len;
	if (data)
		memcpy(d->data, data, len);
}

static struct buf_pool *pool;
static struct blk_dev dev;

/* A LUN of NBLOCKS blocks of BS bytes; max_xfer_len 0: no Block Limits VPD page. */
static void open_dev(uint32_t max_xfer_len, uint32_t max_cmd_bytes)
{
	pthread_mutex_init(&fk.lock, NULL);
	fk.max_cmd_bytes = max_cmd_bytes;
	for (size_t i = 0; i < sizeof(fk.disk); i++)
		fk.disk[i] = (uint8_t)(i * 7 + 3);
	struct iscsi_lun_info info = {.lun = 1, .lun_field = 0x0001000000000000ull,
				      .cap = {.nblocks = NBLOCKS, .block_size = BS}};
	if (max_xfer_len) {
		info.have_block_limits = true;
		info.bl.max_xfer_len = max_xfer_len;
	}
	cr_assert_eq(buf_pool_create(&pool, MAX_IO + 4 * BS, 4), 0);
	cr_assert_eq(blk_dev_init_ops(&dev, &fk, &fake_ops, pool, &info, MAX_IO), 0);
}

static void close_dev(void)
{
	blk_dev_fini(&dev);
	buf_pool_destroy(pool);
}

/* Write len bytes of fill at off, waiting for the completion (inline mode). */
static void write_bytes(uint64_t off, size_t len, uint8_t fill, struct done *d)
{
	void *payload;
	struct blk_req *r = blk_write_prepare(&dev, off, len, &payload);
	cr_assert_not_null(r);
	memset(payload, fill, len);
	blk_write_submit(r, on_done, d);
}

TestSuite(blkio, .fini = close_dev);

Test(blkio, read_is_split_at_the_block_limits_maximum_transfer_length)
{
	open_dev(8, 0);
	cr_assert_eq(dev.max_xfer_blocks, 8);
	static struct done d;
	cr_assert_eq(blk_read(&dev, 3 * BS, 20 * BS, on_done, &d), 0);
	cr_assert_eq(nsent(), 3);
	expect(0, 0x28, 3, 8);
	expect(1, 0x28, 11, 8);
	expect(2, 0x28, 19, 4);
	cr_assert_eq(d.calls, 1);
	cr_assert_eq(d.err, 0);
	cr_assert_eq(d.len, 20 * BS);
	cr_assert_arr_eq(d.data, fk.disk + 3 * BS, 20 * BS);
}

Test(blkio, read_is_split_at_the_transport_limit)
{
	open_dev(0, 6 * BS); /* iSER: max_cmd_bytes below 0xffff blocks */
	cr_assert_eq(dev.max_xfer_blocks, 6);
	static struct done d;
	cr_assert_eq(blk_read(&dev, 0, 13 * BS, on_done, &d), 0);
	cr_assert_eq(nsent(), 3);
	expect(0, 0x28, 0, 6);
	expect(1, 0x28, 6, 6);
	expect(2, 0x28, 12, 1);
	cr_assert_eq(d.err, 0);
	cr_assert_arr_eq(d.data, fk.disk, 13 * BS);
}

Test(blkio, unaligned_read_reads_the_covering_blocks_and_returns_the_bytes_asked)
{
	open_dev(0, 0);
	static struct done d;
	cr_assert_eq(blk_read(&dev, 700, 1000, on_done, &d), 0);
	cr_assert_eq(nsent(), 1);
	expect(0, 0x28, 1, 3); /* bytes 700..1699 lie in blocks 1..3 */
	cr_assert_eq(d.len, 1000);
	cr_assert_arr_eq(d.data, fk.disk + 700, 1000);
}

Test(blkio, aligned_write_is_one_write_without_reads)
{
	open_dev(0, 0);
	static struct done d;
	write_bytes(4 * BS, 2 * BS, 0xab, &d);
	cr_assert_eq(nsent(), 1);
	expect(0, 0x2a, 4, 2);
	cr_assert_eq(d.calls, 1);
	cr_assert_eq(d.err, 0);
	cr_assert_eq(d.len, 2 * BS);
	cr_assert_eq(atomic_load(&dev.rmw_count), 0);
	cr_assert_eq(fk.disk[4 * BS], 0xab);
	cr_assert_eq(fk.disk[6 * BS - 1], 0xab);
}

Test(blkio, a_write_in_a_held_slice_sends_from_its_data_and_returns_the_slice)
{
	open_dev(0, 0);
	static struct done d;
	unsigned idx;
	uint8_t *slice = buf_pool_get(pool, &idx);
	uint8_t *data = slice + 4096;
	memset(data, 0xcd, 4 * BS);
	fk.manual = true;
	struct blk_req *r = blk_write_prepare_in(&dev, 8 * BS, 4 * BS, slice, data);
	cr_assert_not_null(r);
	cr_assert_eq(buf_pool_in_use(pool), 1, "no slice taken for it");
	blk_write_submit(r, on_done, &d);
	cr_assert_eq(nsent(), 1);
	expect(0, 0x2a, 8, 4);
	cr_assert_eq(fk.log[0].buf, data, "the WRITE sends from where the data lies: no copy");
	cr_assert_eq(buf_pool_in_use(pool), 1, "the request holds the slice while in flight");
	fake_complete(0);
	cr_assert_eq(d.calls, 1);
	cr_assert_eq(d.err, 0);
	cr_assert_eq(d.len, 4 * BS);
	cr_assert_eq(buf_pool_in_use(pool), 0, "its end returned the slice");
	cr_assert_eq(fk.disk[8 * BS], 0xcd);
	cr_assert_eq(fk.disk[12 * BS - 1], 0xcd);
	cr_assert_eq(atomic_load(&dev.rmw_count), 0);
}

Test(blkio, a_write_in_a_held_slice_must_be_aligned_and_inside_the_slice)
{
	open_dev(0, 0);
	unsigned idx;
	uint8_t *slice = buf_pool_get(pool, &idx);
	size_t ss = buf_pool_slice_size(pool);
	cr_assert_null(blk_write_prepare_in(&dev, 100, 4 * BS, slice, slice), "unaligned offset");
	cr_assert_null(blk_write_prepare_in(&dev, 0, 4 * BS + 1, slice, slice), "unaligned length");
	cr_assert_null(blk_write_prepare_in(&dev, 0, BS, slice + 4096, slice + 4096), "not a slice's start");
	cr_assert_null(blk_write_prepare_in(&dev, 0, 2 * BS, slice, slice + ss - 3 * BS),
		       "the data would reach the scratch blocks");
	cr_assert_null(blk_write_prepare_in(&dev, NBLOCKS * BS, BS, slice, slice), "past the end");
	struct blk_req *r = blk_write_prepare_in(&dev, 0, BS, slice, slice + ss - 3 * BS);
	cr_assert_not_null(r, "the last block before the scratch blocks");
	blk_write_cancel(r);
	cr_assert_eq(buf_pool_in_use(pool), 0, "cancel returned the slice");
	cr_assert_eq(nsent(), 0, "nothing was sent");
}

Test(blkio, unaligned_write_reads_head_then_tail_then_writes_the_merged_blocks)
{
	open_dev(0, 0);
	uint8_t before[3 * BS];
	memcpy(before, fk.disk, sizeof(before));
	static struct done d;
	write_bytes(100, 1000, 0x5a, &d); /* bytes 100..1099: blocks 0..2, both edges partial */
	cr_assert_eq(nsent(), 3);
	expect(0, 0x28, 0, 1); /* head block */
	expect(1, 0x28, 2, 1); /* tail block */
	expect(2, 0x2a, 0, 3);
	cr_assert_eq(d.err, 0);
	cr_assert_eq(d.len, 1000);
	cr_assert_eq(atomic_load(&dev.rmw_count), 1);
	cr_assert_eq(atomic_load(&dev.rmw_bytes_copied), 100 + (3 * BS - 1100));
	cr_assert_arr_eq(fk.disk, before, 100, "the head block's bytes before the write are kept");
	for (unsigned i = 100; i < 1100; i++)
		cr_assert_eq(fk.disk[i], 0x5a, "byte %u written", i);
	cr_assert_arr_eq(fk.disk + 1100, before + 1100, 3 * BS - 1100, "the tail block's bytes after it are kept");
}

Test(blkio, write_inside_one_block_reads_it_once)
{
	open_dev(0, 0);
	static struct done d;
	write_bytes(BS + 10, 20, 0x11, &d);
	cr_assert_eq(nsent(), 2);
	expect(0, 0x28, 1, 1);
	expect(1, 0x2a, 1, 1);
	cr_assert_eq(atomic_load(&dev.rmw_bytes_copied), BS - 20);
	cr_assert_eq(fk.disk[BS + 9], (uint8_t)((BS + 9) * 7 + 3));
	cr_assert_eq(fk.disk[BS + 10], 0x11);
	cr_assert_eq(fk.disk[BS + 29], 0x11);
	cr_assert_eq(fk.disk[BS + 30], (uint8_t)((BS + 30) * 7 + 3));
}

Test(blkio, write_with_only_the_tail_unaligned_reads_only_the_tail)
{
	open_dev(0, 0);
	static struct done d;
	write_bytes(0, 700, 0x22, &d);
	cr_assert_eq(nsent(), 2);
	expect(0, 0x28, 1, 1);
	expect(1, 0x2a, 0, 2);
	cr_assert_eq(d.err, 0);
}

Test(blkio, unaligned_write_past_the_maximum_transfer_length_is_split_after_the_edges)
{
	open_dev(8, 0);
	static struct done d;
	write_bytes(100, 20 * BS, 0x33, &d); /* blocks 0..20 */
	cr_assert_eq(nsent(), 5);
	expect(0, 0x28, 0, 1);
	expect(1, 0x28, 20, 1);
	expect(2, 0x2a, 0, 8);
	expect(3, 0x2a, 8, 8);
	expect(4, 0x2a, 16, 5);
	cr_assert_eq(d.err, 0);
	cr_assert_eq(d.len, 20 * BS);
}

struct writer {
	uint64_t off;
	size_t len;
	struct done d;
};

static void *write_thread(void *arg)
{
	struct writer *w = arg;
	write_bytes(w->off, w->len, 0x44, &w->d);
	return NULL;
}

Test(blkio, a_write_waits_for_an_overlapping_write_in_flight_but_not_for_others)
{
	open_dev(0, 0);
	fk.manual = true;
	static struct done a, c;
	write_bytes(0, 2 * BS, 0x01, &a); /* blocks 0..1, left in flight */
	cr_assert_eq(nsent(), 1);
	static struct writer b = {.off = BS, .len = 2 * BS}; /* blocks 1..2: overlaps a */
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, write_thread, &b), 0);
	write_bytes(10 * BS, BS, 0x03, &c); /* block 10: overlaps nothing */
	cr_assert_eq(nsent(), 2);
	expect(1, 0x2a, 10, 1);
	usleep(200 * 1000);
	cr_assert_eq(nsent(), 2, "the overlapping write was sent while the first is in flight");
	fake_complete(1);
	usleep(100 * 1000);
	cr_assert_eq(nsent(), 2, "the overlapping write was sent once a disjoint write completed");
	cr_assert_eq(c.calls, 1);
	fake_complete(0);
	cr_assert_eq(a.calls, 1);
	cr_assert_eq(a.err, 0);
	for (int i = 0; i < 500 && nsent() < 3; i++)
		usleep(10 * 1000);
	cr_assert_eq(nsent(), 3);
	expect(2, 0x2a, 1, 2);
	fake_complete(2);
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_eq(b.d.calls, 1);
	cr_assert_eq(b.d.err, 0);
	cr_assert_eq(fk.disk[0], 0x01);
	cr_assert_eq(fk.disk[BS], 0x44);
}

Test(blkio, busy_is_retried_with_the_same_command)
{
	open_dev(0, 0);
	fk.busy_left = 2;
	static struct done d;
	cr_assert_eq(blk_read(&dev, 5 * BS, BS, on_done, &d), 0);
	cr_assert_eq(nsent(), 3);
	for (unsigned i = 0; i < 3; i++)
		expect(i, 0x28, 5, 1);
	cr_assert_eq(d.calls, 1);
	cr_assert_eq(d.err, 0);
	cr_assert_arr_eq(d.data, fk.disk + 5 * BS, BS);
}

Test(blkio, busy_without_a_retry_queue_fails_after_8_retries)
{
	open_dev(0, 0);
	fk.busy_left = 1000;
	static struct done d;
	cr_assert_eq(blk_read(&dev, 0, BS, on_done, &d), 0);
	cr_assert_eq(nsent(), 9);
	cr_assert_eq(d.calls, 1);
	cr_assert_eq(d.err, -EBUSY);
	cr_assert_eq(d.len, 0);
}

Test(blkio, a_retried_split_read_resumes_at_the_failed_command)
{
	open_dev(4, 0);
	fk.manual = true;
	static struct done d;
	cr_assert_eq(blk_read(&dev, 0, 8 * BS, on_done, &d), 0);
	fake_complete(0);
	fk.busy_left = 1;
	fake_complete(1); /* BUSY: re-sent at once */
	fake_complete(2);
	cr_assert_eq(nsent(), 3);
	expect(0, 0x28, 0, 4);
	expect(1, 0x28, 4, 4);
	expect(2, 0x28, 4, 4);
	cr_assert_eq(d.calls, 1);
	cr_assert_eq(d.err, 0);
	cr_assert_arr_eq(d.data, fk.disk, 8 * BS);
}

Test(blkio, synchronize_cache_only_after_a_write)
{
	open_dev(0, 0);
	static struct done s1, w, s2, s3;
	cr_assert_eq(blk_sync(&dev, on_done, &s1), 0);
	cr_assert_eq(nsent(), 0, "nothing written: no SYNCHRONIZE CACHE");
	cr_assert_eq(s1.calls, 1);
	cr_assert_eq(s1.err, 0);
	write_bytes(0, BS, 0x77, &w);
	cr_assert_eq(blk_sync(&dev, on_done, &s2), 0);
	cr_assert_eq(nsent(), 2);
	expect(1, 0x35, 0, 0); /* SYNCHRONIZE CACHE(10), the whole LUN */
	cr_assert_eq(fk.log[1].dir, ISCSI_DIR_NONE);
	cr_assert_eq(s2.calls, 1);
	cr_assert_eq(s2.err, 0);
	cr_assert_eq(blk_sync(&dev, on_done, &s3), 0);
	cr_assert_eq(nsent(), 2, "nothing written since: no second SYNCHRONIZE CACHE");
}

Test(blkio, a_session_that_refuses_the_command_fails_the_request_with_eio)
{
	open_dev(0, 0);
	fk.submit_err = -ENOTCONN;
	static struct done d;
	cr_assert_eq(blk_read(&dev, 0, BS, on_done, &d), 0);
	cr_assert_eq(d.calls, 1);
	cr_assert_eq(d.err, -EIO);
}

Test(blkio, requests_past_the_capacity_are_refused_and_the_capacity_can_change)
{
	open_dev(0, 0);
	static struct done d;
	cr_assert_eq(blk_dev_size(&dev), NBLOCKS * BS);
	cr_assert_eq(blk_dev_nblocks(&dev), NBLOCKS);
	cr_assert_eq(blk_read(&dev, NBLOCKS * BS - 100, 101, on_done, &d), -EINVAL);
	cr_assert_eq(blk_read(&dev, 0, MAX_IO + 1, on_done, &d), -EINVAL);
	uint8_t buf[BS];
	cr_assert_eq(blk_read_into(&dev, 10, BS, buf, on_done, &d), -EINVAL, "unaligned read_into");
	blk_dev_set_capacity(&dev, 16);
	cr_assert_eq(blk_dev_size(&dev), 16 * BS);
	cr_assert_eq(blk_dev_nblocks(&dev), 16);
	cr_assert_eq(blk_read_into(&dev, 16 * BS, BS, buf, on_done, &d), -EINVAL, "past the shrunken end");
	cr_assert_eq(nsent(), 0);
	cr_assert_eq(blk_read_into(&dev, 15 * BS, BS, buf, on_done, &d), 0);
	cr_assert_eq(nsent(), 1);
	expect(0, 0x28, 15, 1);
	cr_assert_eq(d.calls, 1);
	cr_assert_arr_eq(buf, fk.disk + 15 * BS, BS);
}
