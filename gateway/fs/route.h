/* SPDX-License-Identifier: MIT */
/*
 * The one place a LUN operation of the FUSE handlers is routed: read,
 * write, discard / zero range (fallocate), SEEK_DATA / SEEK_HOLE and sync
 * go to the block cache (cache/bcache/bcache.h) when the LUN has one and the
 * operation may use it, else to block I/O (cache/blkio/blkio.h, cache/blkio/discard.h).
 * Here too are the checks every such operation shares (a gone LUN is
 * ENODEV, a read-only one refuses changes with EROFS, O_DIRECT alignment)
 * and the one mapping of negative errno codes, from submission and from
 * completion alike, to what the file's user sees (route_errno).
 *
 * No FUSE types: offsets and lengths in bytes, an opaque `arg` per request
 * and a table of answers (struct route_sink) that route calls exactly once
 * per accepted request, with positive errno values.  The cache and block
 * I/O calls go through a table too (struct route_backend), so that the
 * decisions can be tested without a target (tests/unit/test_route.c).
 */
#ifndef ISERFUSE_ROUTE_H
#define ISERFUSE_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "cache/bcache/bcache.h"
#include "cache/blkio/blkio.h"
#include "cache/blkio/discard.h"

struct gw_lun;
struct gw_file;

/*
 * The answers to a request, called once per request route accepted (on
 * the caller's thread when it is answered at once, else on the
 * transport's event thread).  err is 0 or a positive errno (already
 * mapped by route_errno).
 */
struct route_sink {
	/* A read's bytes: iov[0..n) valid only during the call; n 0 at the end of the LUN. */
	void (*read_done)(void *arg, int err, const struct iovec *iov, int n);
	/* A write: len bytes written. */
	void (*write_done)(void *arg, int err, size_t len);
	/* A status alone: sync, discard / zero range, allocation, an empty write beyond the end. */
	void (*status_done)(void *arg, int err);
	/* SEEK_DATA / SEEK_HOLE: the byte offset found. */
	void (*seek_done)(void *arg, int err, uint64_t off);
	/* A truncation (route_truncate): done, with what it cut reading as zeroes. */
	void (*truncate_done)(void *arg, int err);
};

/* The cache and block I/O calls route makes; same contracts as in cache/. */
struct route_backend {
	int (*blk_read)(struct blk_dev *d, uint64_t off, size_t len, blk_done_fn cb, void *arg);
	struct blk_req *(*blk_write_prepare)(struct blk_dev *d, uint64_t off, size_t len, void **payload);
	struct blk_req *(*blk_write_prepare_in)(struct blk_dev *d, uint64_t off, size_t len, void *slice, void *data);
	void (*blk_write_submit)(struct blk_req *r, blk_done_fn cb, void *arg);
	int (*blk_write_claim)(struct blk_req *r, bool wait); /* optional, with blk_write_go: route_write_try */
	void (*blk_write_go)(struct blk_req *r, blk_done_fn cb, void *arg);
	void (*blk_write_cancel)(struct blk_req *r);
	int (*blk_sync)(struct blk_dev *d, blk_done_fn cb, void *arg);
	int (*blk_discard)(struct blk_dev *d, const struct discard_caps *c, uint64_t off, uint64_t len, bool punch,
			   const char *what, blk_done_fn cb, void *arg);
	int (*blk_seek)(struct blk_dev *d, const struct discard_caps *c, uint64_t off, bool hole, blk_seek_fn cb,
			void *arg);
	struct seek_op *(*blk_seek_prepare)(struct blk_dev *d, const struct discard_caps *c, uint64_t off, bool hole,
					    blk_seek_fn cb, void *arg, int *err);
	void (*blk_seek_start)(struct seek_op *op, int err);
	int (*bcache_read)(struct bcache_dev *d, struct bcache_stream *st, uint64_t off, size_t len, bool direct,
			   bcache_read_fn cb, void *arg);
	bool (*bcache_dev_empty)(struct bcache_dev *d);
	bool (*bcache_write_absorb)(struct bcache_dev *d, uint64_t off, size_t len, const void *data);
	struct bcache_write *(*bcache_write_begin)(struct bcache_dev *d, uint64_t off, size_t len, const void *data);
	void (*bcache_write_end)(struct bcache_dev *d, struct bcache_write *w, int err);
	int (*bcache_flush)(struct bcache_dev *d, bcache_io_fn cb, void *arg);
	int (*bcache_writeback)(struct bcache_dev *d, bcache_io_fn cb, void *arg);
};

/* The real calls of cache/ (the default backend). */
extern const struct route_backend route_blk_backend;

/*
 * Set the backend (NULL: route_blk_backend) and the answers.  Call before
 * the first request (the FUSE init callback does); both tables must stay
 * valid for as long as requests run.  Not thread-safe against requests
 * in flight.
 */
void route_init(const struct route_backend *be, const struct route_sink *sink);

/*
 * Make the fixed set of n contexts of writes on a cached LUN and of
 * punches / zero ranges (one each while in flight), so that none is
 * allocated per request; a request takes one, waiting while all are out,
 * and its completion gives it back.  Without a set (never made, or after
 * route_ctx_teardown) contexts are malloc'd.  At mount time, before the
 * first request.  Returns 0, -EINVAL (n 0) or -ENOMEM.
 */
int route_ctx_setup(unsigned n);

/* Free the set of route_ctx_setup (none may be out: after the session closed); no-op without one. */
void route_ctx_teardown(void);

/*
 * The errno the file's user sees for err, a negative errno from a
 * submission or a completion of cache/ or blkio (0 stays 0).  A lost or
 * broken connection, a command timeout (RFC 7143 §7.1 recovery gave up)
 * and retries exhausted (BUSY, TASK SET FULL, UNIT ATTENTION, NOT READY:
 * SAM-5 status, SPC-4 §4.5) are EIO, as on a disk; anything else is -err
 * (EINVAL, ENOMEM, ENOSPC, ENXIO, EROFS, ...).
 */
int route_errno(int err);

/*
 * Read size bytes at byte offset off of l for an open file f (NULL: none;
 * f->direct, opened O_DIRECT, bypasses the cache unless it holds blocks of
 * the LUN) whose current flags have O_DIRECT when o_direct (offset and size
 * must then be multiples of the logical block size).  At most max_io bytes
 * and up to the end of the LUN are read; at or past the end the answer is
 * no bytes.  Returns 0 (sink->read_done is or was called once) or a
 * positive errno, without an answer: ENODEV (gone), EINVAL (off < 0,
 * misaligned O_DIRECT), or a submission error through route_errno.
 */
int route_read(struct gw_lun *l, struct gw_file *f, bool o_direct, int64_t off, size_t size, size_t max_io,
	       void *arg);

/*
 * route_read for a thread that must never wait (the event thread serving
 * FUSE requests, pool.h's pool_nowait): the same answers, or ENOBUFS with
 * nothing done and no answer when the read would go through the block
 * cache (whose reads may wait) or no pool slice is free.  The caller then
 * hands the request to a thread that may wait.
 */
int route_read_try(struct gw_lun *l, struct gw_file *f, bool o_direct, int64_t off, size_t size, size_t max_io,
		   void *arg);

/*
 * Start a write of *len bytes at byte offset off of l (alignment as for
 * route_read).  *len is cut at the end of the LUN (a short write, as on a
 * block device) and to max_io.  Returns a positive errno without an
 * answer (ENODEV gone, EROFS read-only, EINVAL offset, alignment or no
 * request, EFBIG at or past the end), or 0: then either *r is NULL and the
 * write was answered (a zero-length write) or *r is a prepared request
 * whose *len bytes the caller puts at *payload before route_write_submit,
 * or abandons with route_write_cancel.  May wait for a free pool slice.
 */
int route_write_prepare(struct gw_lun *l, bool o_direct, int64_t off, size_t *len, size_t max_io, struct blk_req **r,
			void **payload, void *arg);

/*
 * route_write_prepare for a write whose *len bytes already lie at data,
 * inside the pool slice `slice` (its start) that the caller holds (slice
 * NULL: none).  When the write, once cut, is block aligned in offset and
 * length, the request takes the slice over and writes from data in place
 * (blk_write_prepare_in): then *in_place is true and *payload is data,
 * and the caller must not touch the slice again (the request's end
 * returns it to the pool).  Otherwise (unaligned: the edges need
 * read-modify-write room; no slice; a backend without
 * blk_write_prepare_in) *in_place is false and this is
 * route_write_prepare: the caller keeps the slice and copies the bytes to
 * *payload.  Same returns as route_write_prepare.
 */
int route_write_prepare_in(struct gw_lun *l, bool o_direct, int64_t off, size_t *len, size_t max_io, void *slice,
			   void *data, struct blk_req **r, void **payload, bool *in_place, void *arg);

/*
 * route_write_submit for a thread that must never wait: 0 (submitted,
 * sink->write_done is called once), or ENOBUFS with nothing done (r still
 * the caller's, for route_write_submit on a thread that may wait, or
 * route_write_cancel): a write that write-back would keep (f not O_DIRECT
 * on a cached LUN), a write in flight over the same blocks, no route
 * context free, a backend without blk_write_claim.  With the cache, a
 * write that finds no cache write context free drops the cached blocks it
 * changes instead of tracking them (bcache_write_begin).
 */
int route_write_try(struct gw_lun *l, struct gw_file *f, struct blk_req *r, uint64_t off, size_t len,
		    const void *payload, void *arg);

/*
 * Send a write route_write_prepare started (len bytes at off, the data at
 * payload): stamps the LUN's write time (mtime / ctime), then with a block
 * cache lets write-back keep it (unless f opened O_DIRECT) or updates the
 * cached blocks and writes through; without one writes it.
 * sink->write_done is called once.
 */
void route_write_submit(struct gw_lun *l, struct gw_file *f, struct blk_req *r, uint64_t off, size_t len,
			const void *payload, void *arg);

/* Abandon a write route_write_prepare started (its pool slice goes back); no answer. */
void route_write_cancel(struct blk_req *r);

/*
 * fallocate(2) on l with mode's FALLOC_FL_* bits over len bytes at off:
 * FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE deallocates (UNMAP, SBC-3
 * §5.28, or WRITE SAME with UNMAP where the LUN promises zeroes after it,
 * else zeroes are written), FALLOC_FL_ZERO_RANGE writes zeroes (WRITE
 * SAME(16), SBC-3 §5.43); the cached blocks of the range become zeroes too.
 * Plain allocation is a success within the LUN.  Returns 0
 * (sink->status_done is or was called once) or a positive errno without
 * an answer: ENODEV (gone), EOPNOTSUPP (an unknown or bad mix of modes),
 * EROFS, EINVAL (off < 0, len <= 0), EFBIG (the file would grow), ENOMEM,
 * or a submission error through route_errno.
 */
int route_fallocate(struct gw_lun *l, int mode, int64_t off, int64_t len, void *arg);

/*
 * truncate(2) / ftruncate(2) / open(2) with O_TRUNC of l to size bytes:
 * a LUN keeps its capacity, so truncating zeroes what it cuts, bytes
 * [size, capacity), as on a regular file that is cut and grown back:
 * punched as by route_fallocate (UNMAP or WRITE SAME(16) with UNMAP where
 * the LUN promises zeroes after it, SBC-3 §4.7.3.4, else WRITE SAME(16)
 * of a zero block, else WRITEs of zeroes; the partial block at an
 * unaligned size by read-modify-write), the cached blocks of the range
 * becoming zeroes too; a long one logs its progress (blk_discard).  size
 * equal to the capacity changes nothing.  Returns 0 (sink->truncate_done
 * is or was called once, with 0, or EIO for any failure of the zeroing
 * but ENOSPC and EROFS) or a positive errno without an answer: ENODEV
 * (gone), EROFS, EFBIG (size < 0 or beyond the capacity), ENOMEM, or a
 * submission error through route_errno.
 */
int route_truncate(struct gw_lun *l, int64_t size, void *arg);

/*
 * lseek(2) SEEK_DATA / SEEK_HOLE (whence) from byte offset off of l: GET
 * LBA STATUS (SBC-3 §5.8) where the LUN is thin provisioned, else all is
 * data; the end of the LUN is the implicit hole.  With a block cache its
 * dirty blocks are written back first (written data is data).  Returns 0
 * (sink->seek_done is or was called once) or a positive errno without an
 * answer: ENODEV (gone), EINVAL (another whence), ENXIO (off < 0 or at or
 * past the end), or a submission error through route_errno.
 */
int route_seek(struct gw_lun *l, int64_t off, int whence, void *arg);

/*
 * fsync(2) / flush of l: gw_lun_sync (write-back of the cache's dirty
 * blocks, SYNCHRONIZE CACHE, SBC-3 §5.22).  A gone LUN answers 0 at once,
 * or ENODEV when writes were not made durable.  Returns 0
 * (sink->status_done is or was called once) or a positive errno without
 * an answer (ENODEV, or a submission error through route_errno).
 */
int route_sync(struct gw_lun *l, void *arg);

/*
 * With a block cache, write l's dirty blocks back and SYNCHRONIZE CACHE
 * (the last close under write-back); cb gets 0 or a negative errno.
 * Returns true when cb will be called once; false (no cache, or the flush
 * could not start) when it will not.
 */
bool route_cache_flush(struct gw_lun *l, blk_done_fn cb, void *arg);

#endif
