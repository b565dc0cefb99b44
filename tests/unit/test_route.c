/* SPDX-License-Identifier: MIT */
/*
 * gateway/fs/route.c without a mount or a target: the checks every LUN
 * operation shares (gone, read-only, O_DIRECT alignment), the choice
 * between the block cache and block I/O, and the one errno mapping of
 * submission and completion codes.  The cache and block I/O calls are
 * stubs that record what they were asked and return what a test sets.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "gateway/gateway.h"
#include "gateway/fs/route.h"

/* ---- the stub backend ---- */

enum call {
	C_BLK_READ,
	C_BLK_WRITE_PREPARE,
	C_BLK_WRITE_PREPARE_IN,
	C_BLK_WRITE_SUBMIT,
	C_BLK_WRITE_CANCEL,
	C_BLK_SYNC,
	C_BLK_DISCARD,
	C_BLK_SEEK,
	C_BLK_SEEK_PREPARE,
	C_BLK_SEEK_START,
	C_BCACHE_READ,
	C_BCACHE_DEV_EMPTY,
	C_BCACHE_WRITE_ABSORB,
	C_BCACHE_WRITE_BEGIN,
	C_BCACHE_WRITE_END,
	C_BCACHE_FLUSH,
	C_BCACHE_WRITEBACK,
	C_COUNT
};

static struct {
	unsigned calls[C_COUNT];
	int rc;                 /* what the int-returning submissions return */
	bool empty, absorb;     /* bcache_dev_empty, bcache_write_absorb */
	bool read_direct;       /* bcache_read's direct argument */
	uint64_t off, len;      /* the last submission's range */
	bool punch;
	int end_err;            /* bcache_write_end's err */
	int seek_start_err;
	/* the last completion callback and its argument, to complete by hand */
	blk_done_fn done;
	bcache_read_fn read_done;
	blk_seek_fn seek_done;
	void *arg;
} st;

static char fake_req, fake_op, fake_cdev, fake_write, payload_buf[4096];

static int s_blk_read(struct blk_dev *d, uint64_t off, size_t len, blk_done_fn cb, void *arg)
{
	(void)d;
	st.calls[C_BLK_READ]++;
	st.off = off, st.len = len, st.done = cb, st.arg = arg;
	return st.rc;
}

static struct blk_req *s_blk_write_prepare(struct blk_dev *d, uint64_t off, size_t len, void **payload)
{
	(void)d;
	st.calls[C_BLK_WRITE_PREPARE]++;
	st.off = off, st.len = len;
	*payload = payload_buf;
	return (struct blk_req *)&fake_req;
}

static char fake_req_in, rx_slice[8192];
static void *in_slice, *in_data; /* blk_write_prepare_in's slice and data */

static struct blk_req *s_blk_write_prepare_in(struct blk_dev *d, uint64_t off, size_t len, void *slice, void *data)
{
	(void)d;
	st.calls[C_BLK_WRITE_PREPARE_IN]++;
	st.off = off, st.len = len;
	in_slice = slice, in_data = data;
	return (struct blk_req *)&fake_req_in;
}

static void s_blk_write_submit(struct blk_req *r, blk_done_fn cb, void *arg)
{
	cr_assert(r == (struct blk_req *)&fake_req || r == (struct blk_req *)&fake_req_in);
	st.calls[C_BLK_WRITE_SUBMIT]++;
	st.done = cb, st.arg = arg;
}

static void s_blk_write_cancel(struct blk_req *r)
{
	cr_assert(r == (struct blk_req *)&fake_req || r == (struct blk_req *)&fake_req_in);
	st.calls[C_BLK_WRITE_CANCEL]++;
}

static int s_blk_sync(struct blk_dev *d, blk_done_fn cb, void *arg)
{
	(void)d;
	st.calls[C_BLK_SYNC]++;
	st.done = cb, st.arg = arg;
	return st.rc;
}

static int s_blk_discard(struct blk_dev *d, const struct discard_caps *c, uint64_t off, uint64_t len, bool punch,
			 const char *what, blk_done_fn cb, void *arg)
{
	(void)d, (void)c, (void)what;
	st.calls[C_BLK_DISCARD]++;
	st.off = off, st.len = len, st.punch = punch, st.done = cb, st.arg = arg;
	return st.rc;
}

static int s_blk_seek(struct blk_dev *d, const struct discard_caps *c, uint64_t off, bool hole, blk_seek_fn cb,
		      void *arg)
{
	(void)d, (void)c, (void)hole;
	st.calls[C_BLK_SEEK]++;
	st.off = off, st.seek_done = cb, st.arg = arg;
	return st.rc;
}

static struct seek_op *s_blk_seek_prepare(struct blk_dev *d, const struct discard_caps *c, uint64_t off, bool hole,
					  blk_seek_fn cb, void *arg, int *err)
{
	(void)d, (void)c, (void)hole;
	st.calls[C_BLK_SEEK_PREPARE]++;
	st.off = off, st.seek_done = cb, st.arg = arg;
	*err = st.rc;
	return st.rc ? NULL : (struct seek_op *)&fake_op;
}

static void s_blk_seek_start(struct seek_op *op, int err)
{
	cr_assert_eq(op, (struct seek_op *)&fake_op);
	st.calls[C_BLK_SEEK_START]++;
	st.seek_start_err = err;
}

static int s_bcache_read(struct bcache_dev *d, struct bcache_stream *s, uint64_t off, size_t len, bool direct,
			 bcache_read_fn cb, void *arg)
{
	(void)d, (void)s;
	st.calls[C_BCACHE_READ]++;
	st.off = off, st.len = len, st.read_direct = direct, st.read_done = cb, st.arg = arg;
	return st.rc;
}

static bool s_bcache_dev_empty(struct bcache_dev *d)
{
	(void)d;
	st.calls[C_BCACHE_DEV_EMPTY]++;
	return st.empty;
}

static bool s_bcache_write_absorb(struct bcache_dev *d, uint64_t off, size_t len, const void *data)
{
	(void)d, (void)off, (void)len, (void)data;
	st.calls[C_BCACHE_WRITE_ABSORB]++;
	return st.absorb;
}

static struct bcache_write *s_bcache_write_begin(struct bcache_dev *d, uint64_t off, size_t len, const void *data)
{
	(void)d, (void)off, (void)len, (void)data;
	st.calls[C_BCACHE_WRITE_BEGIN]++;
	return (struct bcache_write *)&fake_write;
}

static void s_bcache_write_end(struct bcache_dev *d, struct bcache_write *w, int err)
{
	(void)d;
	cr_assert_eq(w, (struct bcache_write *)&fake_write);
	st.calls[C_BCACHE_WRITE_END]++;
	st.end_err = err;
}

static int s_bcache_flush(struct bcache_dev *d, bcache_io_fn cb, void *arg)
{
	(void)d;
	st.calls[C_BCACHE_FLUSH]++;
	st.done = cb, st.arg = arg;
	return st.rc;
}

static int s_bcache_writeback(struct bcache_dev *d, bcache_io_fn cb, void *arg)
{
	(void)d;
	st.calls[C_BCACHE_WRITEBACK]++;
	st.done = cb, st.arg = arg;
	return st.rc;
}

static const struct route_backend stub_backend = {
	.blk_read = s_blk_read,
	.blk_write_prepare = s_blk_write_prepare,
	.blk_write_prepare_in = s_blk_write_prepare_in,
	.blk_write_submit = s_blk_write_submit,
	.blk_write_cancel = s_blk_write_cancel,
	.blk_sync = s_blk_sync,
	.blk_discard = s_blk_discard,
	.blk_seek = s_blk_seek,
	.blk_seek_prepare = s_blk_seek_prepare,
	.blk_seek_start = s_blk_seek_start,
	.bcache_read = s_bcache_read,
	.bcache_dev_empty = s_bcache_dev_empty,
	.bcache_write_absorb = s_bcache_write_absorb,
	.bcache_write_begin = s_bcache_write_begin,
	.bcache_write_end = s_bcache_write_end,
	.bcache_flush = s_bcache_flush,
	.bcache_writeback = s_bcache_writeback,
};

/* ---- the recording sink ---- */

enum answer { A_NONE, A_READ, A_WRITE, A_STATUS, A_SEEK, A_TRUNCATE };

static struct {
	unsigned count;
	enum answer kind;
	int err;
	int n;          /* read: iovecs */
	size_t len;     /* read: bytes of iov[0]; write: count */
	uint64_t off;   /* seek */
	void *arg;
} ans;

static void k_read(void *arg, int err, const struct iovec *iov, int n)
{
	ans.count++, ans.kind = A_READ, ans.err = err, ans.n = n, ans.arg = arg;
	ans.len = n ? iov[0].iov_len : 0;
}

static void k_write(void *arg, int err, size_t len) { ans.count++, ans.kind = A_WRITE, ans.err = err, ans.len = len, ans.arg = arg; }
static void k_status(void *arg, int err) { ans.count++, ans.kind = A_STATUS, ans.err = err, ans.arg = arg; }
static void k_seek(void *arg, int err, uint64_t off) { ans.count++, ans.kind = A_SEEK, ans.err = err, ans.off = off, ans.arg = arg; }

static void k_truncate(void *arg, int err) { ans.count++, ans.kind = A_TRUNCATE, ans.err = err, ans.arg = arg; }

static const struct route_sink sink = {.read_done = k_read, .write_done = k_write, .status_done = k_status,
				       .seek_done = k_seek, .truncate_done = k_truncate};

/* ---- fixtures ---- */

#define BS 512u
#define LUN_SIZE (1024u * BS) /* 512 KiB */
#define MAX_IO (64u * 1024u)

static struct gw_lun lun;
static struct gw_file file;
static int req_token; /* stands for a FUSE request */
#define ARG ((void *)&req_token)

static void setup(void)
{
	memset(&st, 0, sizeof(st));
	memset(&ans, 0, sizeof(ans));
	memset(&lun, 0, sizeof(lun));
	memset(&file, 0, sizeof(file));
	lun.dev.bs = BS;
	lun.dev.nblocks = LUN_SIZE / BS;
	lun.dev.size = LUN_SIZE;
	route_init(&stub_backend, &sink);
}

static void teardown(void) { route_init(NULL, NULL); }

static void with_cache(void) { lun.cdev = (struct bcache_dev *)&fake_cdev; }

static unsigned backend_calls(void)
{
	unsigned n = 0;
	for (int i = 0; i < C_COUNT; i++)
		n += st.calls[i];
	return n;
}

TestSuite(route, .init = setup, .fini = teardown);

/* ---- gone and read-only ---- */

Test(route, gone_lun_is_enodev_for_every_operation)
{
	struct blk_req *r = (struct blk_req *)&fake_req;
	void *p;
	size_t len = 4096;
	atomic_store(&lun.gone, true);
	with_cache();
	cr_assert_eq(route_read(&lun, &file, false, 0, 4096, MAX_IO, ARG), ENODEV);
	cr_assert_eq(route_write_prepare(&lun, false, 0, &len, MAX_IO, &r, &p, ARG), ENODEV);
	cr_assert_null(r);
	cr_assert_eq(route_fallocate(&lun, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096, ARG), ENODEV);
	cr_assert_eq(route_seek(&lun, 0, SEEK_DATA, ARG), ENODEV);
	/* a bad mode on a gone LUN: ENODEV comes first */
	cr_assert_eq(route_fallocate(&lun, 0x4000, 0, 4096, ARG), ENODEV);
	cr_assert_eq(backend_calls(), 0);
	cr_assert_eq(ans.count, 0);
}

Test(route, gone_lun_sync_fails_only_with_unflushed_writes)
{
	atomic_store(&lun.gone, true);
	cr_assert_eq(route_sync(&lun, ARG), 0);
	cr_assert_eq(ans.count, 1);
	cr_assert_eq(ans.kind, A_STATUS);
	cr_assert_eq(ans.err, 0);
	atomic_store(&lun.dev.dirty, true);
	cr_assert_eq(route_sync(&lun, ARG), ENODEV);
	cr_assert_eq(ans.count, 1);
	cr_assert_eq(backend_calls(), 0);
}

Test(route, read_only_lun_refuses_writes_and_discards_with_erofs)
{
	struct blk_req *r;
	void *p;
	size_t len = 4096;
	atomic_store(&lun.ro, true);
	cr_assert(gw_lun_ro(&lun));
	cr_assert_eq(route_write_prepare(&lun, false, 0, &len, MAX_IO, &r, &p, ARG), EROFS);
	cr_assert_null(r);
	cr_assert_eq(route_fallocate(&lun, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096, ARG), EROFS);
	cr_assert_eq(route_fallocate(&lun, FALLOC_FL_ZERO_RANGE, 0, 4096, ARG), EROFS);
	cr_assert_eq(route_fallocate(&lun, 0, 0, 4096, ARG), EROFS);
	cr_assert_eq(st.calls[C_BLK_WRITE_PREPARE], 0);
	cr_assert_eq(st.calls[C_BLK_DISCARD], 0);
	cr_assert_eq(ans.count, 0);
	/* an unsupported mode is EOPNOTSUPP before EROFS */
	cr_assert_eq(route_fallocate(&lun, FALLOC_FL_PUNCH_HOLE, 0, 4096, ARG), EOPNOTSUPP);
	/* reads still go out */
	cr_assert_eq(route_read(&lun, NULL, false, 0, 4096, MAX_IO, ARG), 0);
	cr_assert_eq(st.calls[C_BLK_READ], 1);
	/* and writable again once the WP bit clears */
	atomic_store(&lun.ro, false);
	cr_assert_eq(route_write_prepare(&lun, false, 0, &len, MAX_IO, &r, &p, ARG), 0);
	cr_assert_eq(r, (struct blk_req *)&fake_req);
}

/* ---- argument checks ---- */

Test(route, o_direct_must_be_block_aligned)
{
	struct blk_req *r;
	void *p;
	size_t len = 100;
	cr_assert_eq(route_read(&lun, NULL, true, 0, 100, MAX_IO, ARG), EINVAL);
	cr_assert_eq(route_read(&lun, NULL, true, 1, BS, MAX_IO, ARG), EINVAL);
	cr_assert_eq(route_read(&lun, NULL, false, -1, BS, MAX_IO, ARG), EINVAL);
	cr_assert_eq(route_write_prepare(&lun, true, 0, &len, MAX_IO, &r, &p, ARG), EINVAL);
	cr_assert_eq(backend_calls(), 0);
	/* unaligned without O_DIRECT is fine (read-modify-write in blkio) */
	cr_assert_eq(route_read(&lun, NULL, false, 1, 100, MAX_IO, ARG), 0);
	cr_assert_eq(st.calls[C_BLK_READ], 1);
	cr_assert_eq(route_read(&lun, NULL, true, BS, 2 * BS, MAX_IO, ARG), 0);
	cr_assert_eq(st.calls[C_BLK_READ], 2);
}

Test(route, read_is_cut_at_the_end_and_to_max_io)
{
	cr_assert_eq(route_read(&lun, NULL, false, LUN_SIZE - 100, 4096, MAX_IO, ARG), 0);
	cr_assert_eq(st.off, LUN_SIZE - 100);
	cr_assert_eq(st.len, 100);
	cr_assert_eq(route_read(&lun, NULL, false, 0, 2 * MAX_IO, MAX_IO, ARG), 0);
	cr_assert_eq(st.len, MAX_IO);
	cr_assert_eq(ans.count, 0);
	/* at the end: no bytes, answered at once */
	cr_assert_eq(route_read(&lun, NULL, false, LUN_SIZE, 4096, MAX_IO, ARG), 0);
	cr_assert_eq(ans.count, 1);
	cr_assert_eq(ans.kind, A_READ);
	cr_assert_eq(ans.err, 0);
	cr_assert_eq(ans.n, 0);
	cr_assert_eq(st.calls[C_BLK_READ], 2);
}

Test(route, write_limits)
{
	struct blk_req *r;
	void *p;
	size_t len = 4096;
	cr_assert_eq(route_write_prepare(&lun, false, LUN_SIZE, &len, MAX_IO, &r, &p, ARG), EFBIG);
	len = 4096;
	cr_assert_eq(route_write_prepare(&lun, false, LUN_SIZE - 512, &len, MAX_IO, &r, &p, ARG), 0);
	cr_assert_eq(len, 512); /* short, as on a block device */
	cr_assert_eq(st.len, 512);
	cr_assert_eq(p, payload_buf);
	len = 4096; /* O_DIRECT: refused whole (the kernel would turn the short reply into EIO) */
	st.len = 0;
	cr_assert_eq(route_write_prepare(&lun, true, LUN_SIZE - 512, &len, MAX_IO, &r, &p, ARG), EFBIG);
	cr_assert_eq(st.len, 0);
	len = 2 * MAX_IO;
	cr_assert_eq(route_write_prepare(&lun, false, 0, &len, MAX_IO, &r, &p, ARG), 0);
	cr_assert_eq(len, MAX_IO);
	cr_assert_eq(ans.count, 0);
	len = 0; /* empty: answered, nothing prepared */
	cr_assert_eq(route_write_prepare(&lun, false, 0, &len, MAX_IO, &r, &p, ARG), 0);
	cr_assert_null(r);
	cr_assert_eq(ans.kind, A_WRITE);
	cr_assert_eq(ans.len, 0);
	cr_assert_eq(st.calls[C_BLK_WRITE_PREPARE], 2);
}

Test(route, fallocate_modes_and_ranges)
{
	cr_assert_eq(route_fallocate(&lun, FALLOC_FL_PUNCH_HOLE, 0, 4096, ARG), EOPNOTSUPP);
	cr_assert_eq(route_fallocate(&lun, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 0, 4096, ARG),
		     EOPNOTSUPP);
	cr_assert_eq(route_fallocate(&lun, FALLOC_FL_ZERO_RANGE, -1, 4096, ARG), EINVAL);
	cr_assert_eq(route_fallocate(&lun, FALLOC_FL_ZERO_RANGE, 0, 0, ARG), EINVAL);
	cr_assert_eq(route_fallocate(&lun, 0, LUN_SIZE - 512, 4096, ARG), EFBIG);
	cr_assert_eq(backend_calls(), 0);
	cr_assert_eq(ans.count, 0);
	cr_assert_eq(route_fallocate(&lun, 0, 0, 4096, ARG), 0); /* the blocks exist */
	cr_assert_eq(ans.count, 1);
	cr_assert_eq(ans.kind, A_STATUS);
	cr_assert_eq(route_fallocate(&lun, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, LUN_SIZE, 4096, ARG), 0);
	cr_assert_eq(ans.count, 2);
	cr_assert_eq(backend_calls(), 0);
	/* past the end with KEEP_SIZE: cut at the end */
	cr_assert_eq(route_fallocate(&lun, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, LUN_SIZE - 1024, 4096, ARG), 0);
	cr_assert_eq(st.calls[C_BLK_DISCARD], 1);
	cr_assert_eq(st.off, LUN_SIZE - 1024);
	cr_assert_eq(st.len, 1024);
	cr_assert(st.punch);
	cr_assert_neq(atomic_load(&lun.write_ns), 0); /* mtime moves */
	cr_assert_eq(route_fallocate(&lun, FALLOC_FL_ZERO_RANGE, 0, 4096, ARG), 0);
	cr_assert_not(st.punch);
	cr_assert_eq(st.calls[C_BLK_DISCARD], 2);
}

Test(route, truncate_zeroes_what_it_cuts_and_keeps_the_capacity)
{
	cr_assert_eq(route_truncate(&lun, LUN_SIZE + 1, ARG), EFBIG);
	cr_assert_eq(route_truncate(&lun, -1, ARG), EFBIG);
	cr_assert_eq(backend_calls(), 0);
	cr_assert_eq(ans.count, 0);
	/* to the capacity: nothing to zero, answered at once */
	cr_assert_eq(route_truncate(&lun, LUN_SIZE, ARG), 0);
	cr_assert_eq(ans.count, 1);
	cr_assert_eq(ans.kind, A_TRUNCATE);
	cr_assert_eq(ans.err, 0);
	cr_assert_eq(backend_calls(), 0);
	/* below it: [size, capacity) punched (zeroes where deallocating does not promise them), unaligned too */
	with_cache();
	cr_assert_eq(route_truncate(&lun, 1000, ARG), 0);
	cr_assert_eq(ans.count, 1); /* not before the zeroing is done */
	cr_assert_eq(st.calls[C_BLK_DISCARD], 1);
	cr_assert_eq(st.off, 1000);
	cr_assert_eq(st.len, LUN_SIZE - 1000);
	cr_assert(st.punch);
	cr_assert_eq(st.calls[C_BCACHE_WRITE_BEGIN], 1); /* the cached blocks of the range become zeroes */
	cr_assert_neq(atomic_load(&lun.write_ns), 0);
	st.done(st.arg, 0, NULL, LUN_SIZE - 1000);
	cr_assert_eq(ans.count, 2);
	cr_assert_eq(ans.kind, A_TRUNCATE);
	cr_assert_eq(ans.err, 0);
	cr_assert_eq(ans.arg, ARG);
	cr_assert_eq(st.calls[C_BCACHE_WRITE_END], 1);
	/* any failure of the zeroing is an error the tool reports: EIO, never success */
	cr_assert_eq(route_truncate(&lun, 0, ARG), 0);
	cr_assert_eq(st.off, 0);
	cr_assert_eq(st.len, LUN_SIZE);
	st.done(st.arg, -EINVAL, NULL, 0);
	cr_assert_eq(ans.err, EIO);
	cr_assert_eq(route_truncate(&lun, 0, ARG), 0);
	st.done(st.arg, -ECONNRESET, NULL, 0);
	cr_assert_eq(ans.err, EIO);
	cr_assert_eq(route_truncate(&lun, 0, ARG), 0);
	st.done(st.arg, -ENOSPC, NULL, 0);
	cr_assert_eq(ans.err, ENOSPC);
	/* read-only and gone */
	atomic_store(&lun.ro, true);
	cr_assert_eq(route_truncate(&lun, 0, ARG), EROFS);
	atomic_store(&lun.gone, true);
	cr_assert_eq(route_truncate(&lun, 0, ARG), ENODEV);
	cr_assert_eq(st.calls[C_BLK_DISCARD], 4);
	cr_assert_eq(ans.count, 5);
}

Test(route, seek_checks)
{
	cr_assert_eq(route_seek(&lun, 0, SEEK_SET, ARG), EINVAL);
	cr_assert_eq(route_seek(&lun, 0, SEEK_END, ARG), EINVAL);
	cr_assert_eq(route_seek(&lun, -1, SEEK_DATA, ARG), ENXIO);
	cr_assert_eq(route_seek(&lun, LUN_SIZE, SEEK_HOLE, ARG), ENXIO);
	cr_assert_eq(backend_calls(), 0);
}

/* ---- the cache-or-block-I/O choice ---- */

Test(route, read_goes_to_block_io_without_a_cache)
{
	file.direct = true;
	cr_assert_eq(route_read(&lun, &file, false, 0, 4096, MAX_IO, ARG), 0);
	cr_assert_eq(st.calls[C_BLK_READ], 1);
	cr_assert_eq(st.calls[C_BCACHE_READ], 0);
}

Test(route, read_goes_through_the_cache_unless_o_direct_and_empty)
{
	with_cache();
	cr_assert_eq(route_read(&lun, &file, false, 0, 4096, MAX_IO, ARG), 0);
	cr_assert_eq(st.calls[C_BCACHE_READ], 1);
	cr_assert_not(st.read_direct);
	cr_assert_eq(route_read(&lun, NULL, false, 0, 4096, MAX_IO, ARG), 0);
	cr_assert_eq(st.calls[C_BCACHE_READ], 2);
	/* O_DIRECT with blocks of the LUN cached: through the cache (they may be newer), direct */
	file.direct = true;
	st.empty = false;
	cr_assert_eq(route_read(&lun, &file, true, 0, 4096, MAX_IO, ARG), 0);
	cr_assert_eq(st.calls[C_BCACHE_READ], 3);
	cr_assert(st.read_direct);
	/* O_DIRECT, nothing cached: straight to block I/O */
	st.empty = true;
	cr_assert_eq(route_read(&lun, &file, true, 0, 4096, MAX_IO, ARG), 0);
	cr_assert_eq(st.calls[C_BCACHE_READ], 3);
	cr_assert_eq(st.calls[C_BLK_READ], 1);
}

static void write_4k(struct gw_file *f)
{
	struct blk_req *r;
	void *p;
	size_t len = 4096;
	cr_assert_eq(route_write_prepare(&lun, false, 8192, &len, MAX_IO, &r, &p, ARG), 0);
	cr_assert_not_null(r);
	route_write_submit(&lun, f, r, 8192, len, p, ARG);
}

Test(route, write_without_a_cache_goes_to_block_io)
{
	write_4k(&file);
	cr_assert_eq(st.calls[C_BLK_WRITE_SUBMIT], 1);
	cr_assert_eq(st.calls[C_BCACHE_WRITE_ABSORB] + st.calls[C_BCACHE_WRITE_BEGIN], 0);
	cr_assert_eq(st.arg, ARG);
	cr_assert_neq(atomic_load(&lun.write_ns), 0);
	st.done(st.arg, 0, payload_buf, 4096);
	cr_assert_eq(ans.kind, A_WRITE);
	cr_assert_eq(ans.err, 0);
	cr_assert_eq(ans.len, 4096);
}

/* A write whose data lies in a slice the caller holds (a FUSE reader's), at byte off, len bytes. */
static int write_in(int64_t off, size_t *len, struct blk_req **r, void **payload, bool *in_place)
{
	return route_write_prepare_in(&lun, false, off, len, MAX_IO, rx_slice, rx_slice + 4096, r, payload,
				      in_place, ARG);
}

Test(route, an_aligned_write_in_a_held_slice_is_written_in_place)
{
	size_t len = 8 * BS;
	struct blk_req *r;
	void *payload;
	bool in_place;
	cr_assert_eq(write_in(2 * BS, &len, &r, &payload, &in_place), 0);
	cr_assert(in_place);
	cr_assert_eq(r, (struct blk_req *)&fake_req_in);
	cr_assert_eq(payload, rx_slice + 4096, "the data is written from where it lies");
	cr_assert_eq(in_slice, rx_slice);
	cr_assert_eq(st.calls[C_BLK_WRITE_PREPARE_IN], 1);
	cr_assert_eq(st.calls[C_BLK_WRITE_PREPARE], 0, "no slice taken");
	cr_assert_eq(st.off, 2 * BS);
	cr_assert_eq(st.len, 8 * BS);
	route_write_submit(&lun, &file, r, 2 * BS, len, payload, ARG);
	cr_assert_eq(st.calls[C_BLK_WRITE_SUBMIT], 1);
	st.done(st.arg, 0, NULL, len);
	cr_assert_eq(ans.kind, A_WRITE);
	cr_assert_eq(ans.len, 8 * BS);
}

Test(route, a_held_slice_write_cut_at_the_end_stays_in_place_when_still_aligned)
{
	size_t len = 8 * BS;
	struct blk_req *r;
	void *payload;
	bool in_place;
	cr_assert_eq(write_in(LUN_SIZE - 4 * BS, &len, &r, &payload, &in_place), 0);
	cr_assert(in_place);
	cr_assert_eq(len, 4 * BS, "cut at the end of the LUN");
	cr_assert_eq(st.len, 4 * BS);
}

Test(route, an_unaligned_write_in_a_held_slice_takes_a_slice_of_its_own)
{
	struct blk_req *r;
	void *payload;
	bool in_place = true;
	size_t len = 8 * BS;
	cr_assert_eq(write_in(100, &len, &r, &payload, &in_place), 0);
	cr_assert(!in_place, "an unaligned offset needs the read-modify-write room of a slice of its own");
	cr_assert_eq(r, (struct blk_req *)&fake_req);
	cr_assert_eq(payload, payload_buf);
	len = 8 * BS + 1;
	cr_assert_eq(write_in(0, &len, &r, &payload, &in_place), 0);
	cr_assert(!in_place, "so does an unaligned length");
	cr_assert_eq(st.calls[C_BLK_WRITE_PREPARE_IN], 0);
	cr_assert_eq(st.calls[C_BLK_WRITE_PREPARE], 2);
}

Test(route, a_write_in_a_held_slice_is_checked_as_any_write)
{
	struct blk_req *r;
	void *payload;
	bool in_place = true;
	size_t len = 0;
	cr_assert_eq(write_in(0, &len, &r, &payload, &in_place), 0);
	cr_assert_null(r, "an empty write is answered");
	cr_assert(!in_place);
	cr_assert_eq(ans.kind, A_WRITE);
	len = BS;
	cr_assert_eq(write_in(LUN_SIZE, &len, &r, &payload, &in_place), EFBIG);
	cr_assert(!in_place);
	atomic_store(&lun.gone, true);
	cr_assert_eq(write_in(0, &len, &r, &payload, &in_place), ENODEV);
	cr_assert_eq(backend_calls(), 0, "nothing reaches the backend");
}

Test(route, write_back_absorbs_a_write_written_in_place_and_returns_the_slice)
{
	with_cache();
	st.absorb = true;
	size_t len = 8 * BS;
	struct blk_req *r;
	void *payload;
	bool in_place;
	cr_assert_eq(write_in(0, &len, &r, &payload, &in_place), 0);
	cr_assert(in_place);
	route_write_submit(&lun, &file, r, 0, len, payload, ARG);
	cr_assert_eq(st.calls[C_BCACHE_WRITE_ABSORB], 1);
	cr_assert_eq(st.calls[C_BLK_WRITE_CANCEL], 1, "the cache keeps a copy, the slice goes back");
	cr_assert_eq(ans.kind, A_WRITE);
}

Test(route, write_back_absorbs_a_write)
{
	with_cache();
	st.absorb = true;
	write_4k(&file);
	cr_assert_eq(st.calls[C_BCACHE_WRITE_ABSORB], 1);
	cr_assert_eq(st.calls[C_BLK_WRITE_CANCEL], 1);
	cr_assert_eq(st.calls[C_BLK_WRITE_SUBMIT], 0);
	cr_assert_eq(ans.count, 1);
	cr_assert_eq(ans.kind, A_WRITE);
	cr_assert_eq(ans.len, 4096);
}

Test(route, o_direct_write_is_never_absorbed)
{
	with_cache();
	st.absorb = true;
	file.direct = true;
	write_4k(&file);
	cr_assert_eq(st.calls[C_BCACHE_WRITE_ABSORB], 0);
	cr_assert_eq(st.calls[C_BCACHE_WRITE_BEGIN], 1);
	cr_assert_eq(st.calls[C_BLK_WRITE_SUBMIT], 1);
	cr_assert_eq(ans.count, 0);
	/* the completion ends the cache's write with the raw code and answers the mapped one */
	st.done(st.arg, -ECONNRESET, NULL, 0);
	cr_assert_eq(st.calls[C_BCACHE_WRITE_END], 1);
	cr_assert_eq(st.end_err, -ECONNRESET);
	cr_assert_eq(ans.kind, A_WRITE);
	cr_assert_eq(ans.err, EIO);
	cr_assert_eq(ans.arg, ARG);
}

Test(route, seek_writes_back_first_with_a_cache)
{
	cr_assert_eq(route_seek(&lun, 0, SEEK_DATA, ARG), 0);
	cr_assert_eq(st.calls[C_BLK_SEEK], 1);
	cr_assert_eq(st.calls[C_BCACHE_WRITEBACK], 0);
	with_cache();
	cr_assert_eq(route_seek(&lun, 4096, SEEK_HOLE, ARG), 0);
	cr_assert_eq(st.calls[C_BLK_SEEK_PREPARE], 1);
	cr_assert_eq(st.calls[C_BCACHE_WRITEBACK], 1);
	cr_assert_eq(st.calls[C_BLK_SEEK_START], 0);
	st.done(st.arg, -EIO, NULL, 0); /* the write-back's result starts the seek */
	cr_assert_eq(st.calls[C_BLK_SEEK_START], 1);
	cr_assert_eq(st.seek_start_err, -EIO);
	/* the target's answer, mapped */
	st.seek_done(st.arg, 0, 8192);
	cr_assert_eq(ans.kind, A_SEEK);
	cr_assert_eq(ans.off, 8192);
	st.seek_done(st.arg, -ENXIO, 0);
	cr_assert_eq(ans.err, ENXIO);
}

Test(route, sync_flushes_the_cache_or_synchronizes_the_lun)
{
	cr_assert_eq(route_sync(&lun, ARG), 0);
	cr_assert_eq(st.calls[C_BLK_SYNC], 1);
	cr_assert_eq(st.calls[C_BCACHE_FLUSH], 0);
	with_cache();
	cr_assert_eq(route_sync(&lun, ARG), 0);
	cr_assert_eq(st.calls[C_BCACHE_FLUSH], 1);
	cr_assert_eq(st.calls[C_BLK_SYNC], 1);
	st.done(st.arg, -ETIMEDOUT, NULL, 0);
	cr_assert_eq(ans.kind, A_STATUS);
	cr_assert_eq(ans.err, EIO);
	/* the close-time flush is the cache's only */
	lun.cdev = NULL;
	cr_assert_not(route_cache_flush(&lun, st.done, ARG));
	with_cache();
	cr_assert(route_cache_flush(&lun, st.done, ARG));
	cr_assert_eq(st.calls[C_BCACHE_FLUSH], 2);
}

/* ---- one errno mapping for submission and completion ---- */

Test(route, errno_mapping)
{
	const int to_eio[] = {-ECONNRESET, -ECONNABORTED, -ENOTCONN, -EPROTO, -EPIPE, -ETIMEDOUT, -EAGAIN, -EBUSY};
	for (size_t i = 0; i < sizeof(to_eio) / sizeof(to_eio[0]); i++)
		cr_assert_eq(route_errno(to_eio[i]), EIO, "code %d", to_eio[i]);
	cr_assert_eq(route_errno(0), 0);
	cr_assert_eq(route_errno(-EINVAL), EINVAL);
	cr_assert_eq(route_errno(-ENOMEM), ENOMEM);
	cr_assert_eq(route_errno(-ENOSPC), ENOSPC);
	cr_assert_eq(route_errno(-ENXIO), ENXIO);
	cr_assert_eq(route_errno(-EIO), EIO);
	cr_assert_eq(route_errno(-EILSEQ), EILSEQ);
}

Test(route, submission_failures_are_mapped)
{
	st.rc = -EINVAL;
	cr_assert_eq(route_read(&lun, NULL, false, 0, 4096, MAX_IO, ARG), EINVAL);
	st.rc = -ENOTCONN;
	cr_assert_eq(route_read(&lun, NULL, false, 0, 4096, MAX_IO, ARG), EIO);
	cr_assert_eq(route_sync(&lun, ARG), EIO);
	cr_assert_eq(route_seek(&lun, 0, SEEK_DATA, ARG), EIO);
	with_cache();
	st.rc = -EBUSY;
	cr_assert_eq(route_read(&lun, &file, false, 0, 4096, MAX_IO, ARG), EIO);
	st.rc = -ENOMEM;
	cr_assert_eq(route_sync(&lun, ARG), ENOMEM);
	cr_assert_eq(route_seek(&lun, 0, SEEK_DATA, ARG), ENOMEM); /* blk_seek_prepare failed */
	cr_assert_eq(st.calls[C_BCACHE_WRITEBACK], 0);
	/* a discard that fails to start ends the cache's write with the raw code */
	st.rc = -EAGAIN;
	cr_assert_eq(route_fallocate(&lun, FALLOC_FL_ZERO_RANGE, 0, 4096, ARG), EIO);
	cr_assert_eq(st.calls[C_BCACHE_WRITE_BEGIN], 1);
	cr_assert_eq(st.calls[C_BCACHE_WRITE_END], 1);
	cr_assert_eq(st.end_err, -EAGAIN);
	cr_assert_eq(ans.count, 0);
}

Test(route, completion_failures_are_mapped)
{
	cr_assert_eq(route_read(&lun, NULL, false, 0, 4096, MAX_IO, ARG), 0);
	st.done(st.arg, -ETIMEDOUT, NULL, 0);
	cr_assert_eq(ans.kind, A_READ);
	cr_assert_eq(ans.err, EIO);
	st.done(st.arg, -EILSEQ, NULL, 0);
	cr_assert_eq(ans.err, EILSEQ);
	st.done(st.arg, 0, payload_buf, 4096);
	cr_assert_eq(ans.err, 0);
	cr_assert_eq(ans.n, 1);
	cr_assert_eq(ans.len, 4096);
	with_cache();
	cr_assert_eq(route_read(&lun, &file, false, 0, 4096, MAX_IO, ARG), 0);
	st.read_done(st.arg, -EPIPE, NULL, 0);
	cr_assert_eq(ans.err, EIO);
	cr_assert_eq(route_fallocate(&lun, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096, ARG), 0);
	st.done(st.arg, -ECONNABORTED, NULL, 0);
	cr_assert_eq(ans.kind, A_STATUS);
	cr_assert_eq(ans.err, EIO);
	cr_assert_eq(st.end_err, -ECONNABORTED);
	cr_assert_eq(ans.arg, ARG);
	cr_assert_eq(route_fallocate(&lun, FALLOC_FL_ZERO_RANGE, 0, 4096, ARG), 0);
	st.done(st.arg, -ENOSPC, NULL, 0);
	cr_assert_eq(ans.err, ENOSPC);
}
