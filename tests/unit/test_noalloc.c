/* SPDX-License-Identifier: MIT */
/*
 * No heap allocation per request in cache/ (bcache.c over blkio.c over a
 * fake session that completes every command at once): random reads that
 * bypass the cache, sequential reads that fill cache blocks (READs into a
 * caller's buffer), reads that hit, and write-through writes (their token
 * and their block request).  malloc, calloc and realloc are wrapped at
 * link time (-Wl,--wrap) for the objects linked into this test, so the
 * calls of cache/ and initiator/ are counted, criterion's are not.
 */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cache/bcache/bcache.h"
#include "cache/bcache/bcache_blk.h"
#include "cache/blkio/blkio.h"

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);

static atomic_uint nalloc;

void *__wrap_malloc(size_t size)
{
	atomic_fetch_add(&nalloc, 1);
	return __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
	atomic_fetch_add(&nalloc, 1);
	return __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t size)
{
	atomic_fetch_add(&nalloc, 1);
	return __real_realloc(p, size);
}

#define BS 512u
#define NBLOCKS 8192u /* 4 MiB */
#define MAX_IO (128u * 1024)
#define CBLOCK 4096u
#define NCBLOCKS 64u

static uint8_t disk[NBLOCKS * BS];

/* The fake session: a RAM disk; every command completes inline, on the submitting thread. */
static uint64_t be_get(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

static int fake_submit(void *s, const struct iscsi_cmd *cmd)
{
	(void)s;
	uint64_t lba = cmd->cdb[0] == 0x28 || cmd->cdb[0] == 0x2a ? be_get(cmd->cdb + 2, 4) : 0;
	if (cmd->dir == ISCSI_DIR_READ)
		memcpy(cmd->buf, disk + lba * BS, cmd->len);
	else if (cmd->dir == ISCSI_DIR_WRITE)
		memcpy(disk + lba * BS, cmd->buf, cmd->len);
	struct iscsi_cmd_result res = {.status = SCSI_STATUS_GOOD, .xfer_len = cmd->len};
	cmd->cb(cmd->arg, &res);
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
static struct bcache *cache;
static struct bcache_dev *cdev;
static void *cblocks[NCBLOCKS];
static void *cslice;

static void setup(void)
{
	for (size_t i = 0; i < sizeof(disk); i++)
		disk[i] = (uint8_t)(i * 13 + 1);
	struct iscsi_lun_info info = {.lun = 1, .lun_field = 0x0001000000000000ull,
				      .cap = {.nblocks = NBLOCKS, .block_size = BS}};
	/* 8 slices of 256 KiB: one holds the 64 cache blocks */
	cr_assert_eq(buf_pool_create(&pool, NCBLOCKS * CBLOCK, 8), 0);
	cr_assert_eq(blk_dev_init_ops(&dev, &disk, &fake_ops, pool, &info, MAX_IO), 0);
	cslice = buf_pool_get(pool, NULL);
	for (unsigned i = 0; i < NCBLOCKS; i++)
		cblocks[i] = (uint8_t *)cslice + (size_t)i * CBLOCK;
	cr_assert_eq(bcache_create(&cache, CBLOCK, NCBLOCKS, cblocks, false), 0);
	struct bcache_backend be;
	bcache_blk_backend(&be, &dev);
	be.depth = 8;
	cr_assert_eq(bcache_dev_add(cache, &be, &cdev), 0);
}

static void teardown(void)
{
	bcache_dev_remove(cdev);
	bcache_destroy(cache);
	buf_pool_put(pool, cslice);
	blk_dev_fini(&dev);
	buf_pool_destroy(pool);
}

struct got {
	unsigned calls;
	int err;
	uint8_t first;
	size_t bytes;
};

static void on_read(void *arg, int err, const struct iovec *iov, int n)
{
	struct got *g = arg;
	g->calls++;
	g->err = err;
	g->bytes = 0;
	for (int i = 0; i < n; i++)
		g->bytes += iov[i].iov_len;
	g->first = n ? *(const uint8_t *)iov[0].iov_base : 0;
}

static void on_io(void *arg, int err, const void *data, size_t len)
{
	(void)data;
	(void)len;
	struct got *g = arg;
	g->calls++;
	g->err = err;
}

TestSuite(noalloc, .init = setup, .fini = teardown);

Test(noalloc, bypass_reads_fills_hits_and_write_through_writes_allocate_nothing)
{
	struct bcache_stream st = {0};
	struct got g = {0};
	/* First use of every path (so that only steady-state requests are counted). */
	cr_assert_eq(bcache_read(cdev, NULL, 3 * BS, BS, false, on_read, &g), 0);
	unsigned before = atomic_load(&nalloc);

	/* 100 random reads on an empty cache: each bypasses it (a bc_read, a blk request on a slice). */
	for (unsigned i = 0; i < 100; i++) {
		uint64_t off = (uint64_t)(i * 37 % NBLOCKS) * BS;
		cr_assert_eq(bcache_read(cdev, NULL, off, BS, false, on_read, &g), 0);
		cr_assert_eq(g.err, 0);
		cr_assert_eq(g.first, disk[off], "read %u's first byte", i);
	}
	/* Sequential reads through a stream: cache blocks filled by READs into them, then read-ahead. */
	for (unsigned i = 0; i < 64; i++) {
		cr_assert_eq(bcache_read(cdev, &st, (uint64_t)i * CBLOCK, CBLOCK, false, on_read, &g), 0);
		cr_assert_eq(g.err, 0);
		cr_assert_eq(g.bytes, CBLOCK);
		cr_assert_eq(g.first, disk[i * CBLOCK], "sequential read %u's first byte", i);
	}
	struct bcache_stats s;
	bcache_get_stats(cache, &s);
	cr_assert_gt(s.misses, 0, "the sequential reads filled blocks");
	cr_assert_gt(s.hits, 0, "and read blocks filled ahead");
	/* Write-through writes over cached blocks: token, block request. */
	for (unsigned i = 0; i < 100; i++) {
		uint64_t off = (uint64_t)(i % 16) * CBLOCK;
		void *payload;
		struct blk_req *r = blk_write_prepare(&dev, off, BS, &payload);
		cr_assert_not_null(r);
		memset(payload, (int)i, BS);
		struct bcache_write *w = bcache_write_begin(cdev, off, BS, payload);
		cr_assert_not_null(w);
		g.calls = 0;
		blk_write_submit(r, on_io, &g);
		cr_assert_eq(g.calls, 1);
		cr_assert_eq(g.err, 0);
		bcache_write_end(cdev, w, 0);
		cr_assert_eq(disk[off], (uint8_t)i);
	}
	/* A hit sees the last write. */
	cr_assert_eq(bcache_read(cdev, NULL, 15 * CBLOCK, BS, false, on_read, &g), 0);
	cr_assert_eq(g.first, 95);
	unsigned allocs = atomic_load(&nalloc) - before;
	cr_assert_eq(allocs, 0, "%u heap allocations for 365 requests", allocs);
}
