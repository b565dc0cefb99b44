/* SPDX-License-Identifier: MIT */
/*
 * Routing of the FUSE handlers' LUN operations to the block cache or to
 * block I/O (see route.h).  Nothing here waits on the network: requests
 * are submitted and answered from their completion, on the connection's
 * event thread.  No lock of its own; the two tables are set before the
 * first request and only read afterwards.  The contexts of cached writes
 * and of punches / zero ranges come from a fixed set made at mount time
 * (route_ctx_setup; cache/pool/ctxpool.h, which has its own lock).
 */
#include "route.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "cache/pool/ctxpool.h"
#include "cache/pool/pool.h"
#include "gateway/gateway.h"

const struct route_backend route_blk_backend = {
	.blk_read = blk_read,
	.blk_write_prepare = blk_write_prepare,
	.blk_write_prepare_in = blk_write_prepare_in,
	.blk_write_submit = blk_write_submit,
	.blk_write_claim = blk_write_claim,
	.blk_write_go = blk_write_go,
	.blk_write_cancel = blk_write_cancel,
	.blk_sync = blk_sync,
	.blk_discard = blk_discard,
	.blk_seek = blk_seek,
	.blk_seek_prepare = blk_seek_prepare,
	.blk_seek_start = blk_seek_start,
	.bcache_read = bcache_read,
	.bcache_dev_empty = bcache_dev_empty,
	.bcache_write_absorb = bcache_write_absorb,
	.bcache_write_begin = bcache_write_begin,
	.bcache_write_end = bcache_write_end,
	.bcache_flush = bcache_flush,
	.bcache_writeback = bcache_writeback,
};

static const struct route_backend *_Atomic backend = &route_blk_backend;
static const struct route_sink *_Atomic sink;

void route_init(const struct route_backend *be, const struct route_sink *s)
{
	atomic_store_explicit(&backend, be ? be : &route_blk_backend, memory_order_release);
	atomic_store_explicit(&sink, s, memory_order_release);
}

/* The block layer's functions in use: route_blk_backend, or the test seam's set by route_init. */
static const struct route_backend *cur_backend(void) { return atomic_load_explicit(&backend, memory_order_acquire); }
/* Where completions go: the FUSE replies route_init set (a unit test's recorder in tests). */
static const struct route_sink *cur_sink(void) { return atomic_load_explicit(&sink, memory_order_acquire); }

int route_errno(int err)
{
	switch (err) {
	case -ECONNRESET:
	case -ECONNABORTED:
	case -ENOTCONN:
	case -EPROTO:
	case -EPIPE:
	case -ETIMEDOUT:
	case -EAGAIN: /* retries exhausted (UNIT ATTENTION, NOT READY, ...) */
	case -EBUSY:
		return EIO;
	default:
		return -err;
	}
}

/*
 * A write, punch or zero range moves mtime and ctime: one relaxed store of
 * the coarse clock (the kernel's own file times have its resolution), no
 * lock; getattr reads it, setattr folds it into the kept times (fs_attr.c).
 */
static void stamp_write(struct gw_lun *l)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME_COARSE, &now);
	atomic_store_explicit(&l->write_ns, (int64_t)now.tv_sec * 1000000000 + now.tv_nsec, memory_order_relaxed);
}

/*
 * O_DIRECT I/O must be aligned to the logical block size in offset and
 * length, as the kernel demands of a block device (EINVAL otherwise).  The
 * kernel passes the file's current flags with each READ and WRITE.
 */
static bool direct_misaligned(const struct gw_lun *l, bool o_direct, int64_t off, size_t size)
{
	return o_direct && ((uint64_t)off % l->dev.bs != 0 || size % l->dev.bs != 0);
}

/* ---- read ---- */

static void read_done(void *arg, int err, const void *data, size_t len)
{
	struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
	if (err)
		cur_sink()->read_done(arg, route_errno(err), NULL, 0);
	else
		cur_sink()->read_done(arg, 0, &iov, 1);
}

/* Cache blocks or the read's slice: no copy. */
static void cached_read_done(void *arg, int err, const struct iovec *iov, int n)
{
	if (err)
		cur_sink()->read_done(arg, route_errno(err), NULL, 0);
	else
		cur_sink()->read_done(arg, 0, iov, n);
}

int route_read(struct gw_lun *l, struct gw_file *f, bool o_direct, int64_t off, size_t size, size_t max_io, void *arg)
{
	if (gw_lun_gone(l))
		return ENODEV;
	if (off < 0 || direct_misaligned(l, o_direct, off, size))
		return EINVAL;
	uint64_t dev_size = blk_dev_size(&l->dev);
	if ((uint64_t)off >= dev_size || size == 0) {
		cur_sink()->read_done(arg, 0, NULL, 0); /* end of device */
		return 0;
	}
	if (size > dev_size - (uint64_t)off)
		size = dev_size - (uint64_t)off;
	if (size > max_io)
		size = max_io;
	int rc;
	if (!l->cdev)
		f = NULL;
	/* O_DIRECT goes around the cache, through it only while it holds blocks of the LUN (they may be newer) */
	if (l->cdev && !(f && f->direct && cur_backend()->bcache_dev_empty(l->cdev)))
		rc = cur_backend()->bcache_read(l->cdev, f ? &f->stream : NULL, (uint64_t)off, size, f && f->direct,
				      cached_read_done, arg);
	else
		rc = cur_backend()->blk_read(&l->dev, (uint64_t)off, size, read_done, arg);
	return rc ? route_errno(rc) : 0;
}

/* ---- write, discard / zero range ---- */

/*
 * A write, punch or zero range in flight on a cached LUN (cdev NULL: no
 * cache), with the token of bcache_write_begin to end when it completes.
 */
struct cache_write_ctx {
	void *arg;
	struct bcache_dev *cdev;
	struct bcache_write *w;
	blk_done_fn done; /* a punch's or zero range's answer (discard) */
};

/* The contexts of route_ctx_setup; NULL: malloc'd (unit tests, before the mount). */
static struct ctxpool *_Atomic ctx_set;

int route_ctx_setup(unsigned n)
{
	struct ctxpool *p;
	int rc = ctxpool_create(&p, sizeof(struct cache_write_ctx), n);
	if (!rc)
		atomic_store_explicit(&ctx_set, p, memory_order_release);
	return rc;
}

void route_ctx_teardown(void)
{
	ctxpool_destroy(atomic_exchange_explicit(&ctx_set, NULL, memory_order_acq_rel));
}

/* A context from the set (waits while all are out: FUSE threads only), else malloc'd; NULL only when that fails. */
static struct cache_write_ctx *ctx_get(void)
{
	struct ctxpool *p = atomic_load_explicit(&ctx_set, memory_order_acquire);
	return p ? ctxpool_get(p) : malloc(sizeof(struct cache_write_ctx));
}

static void ctx_put(struct cache_write_ctx *cw)
{
	struct ctxpool *p = atomic_load_explicit(&ctx_set, memory_order_acquire);
	if (ctxpool_owns(p, cw))
		ctxpool_put(p, cw);
	else
		free(cw);
}

static void write_done(void *arg, int err, const void *data, size_t len)
{
	(void)data;
	cur_sink()->write_done(arg, route_errno(err), err ? 0 : len);
}

static void cached_write_done(void *arg, int err, const void *data, size_t len)
{
	struct cache_write_ctx *cw = arg;
	cur_backend()->bcache_write_end(cw->cdev, cw->w, err);
	write_done(cw->arg, err, data, len);
	ctx_put(cw);
}

/*
 * The checks and cuts every write shares.  Returns a positive errno
 * (no answer), 0 with the write answered (*answered: at or past the end
 * with nothing to write, or empty), or 0 with *len bytes to write.
 */
static int write_check(struct gw_lun *l, bool o_direct, int64_t off, size_t *len, size_t max_io, bool *answered,
		       void *arg)
{
	*answered = false;
	if (gw_lun_gone(l))
		return ENODEV;
	if (gw_lun_ro(l))
		return EROFS;
	if (off < 0 || direct_misaligned(l, o_direct, off, *len))
		return EINVAL;
	uint64_t dev_size = blk_dev_size(&l->dev);
	if ((uint64_t)off >= dev_size) {
		if (*len)
			return EFBIG;
		cur_sink()->status_done(arg, 0);
		*answered = true;
		return 0;
	}
	if (*len == 0) {
		cur_sink()->write_done(arg, 0, 0);
		*answered = true;
		return 0;
	}
	/*
	 * A write crossing the end is short, as on a block device; but the
	 * kernel's asynchronous direct I/O turns a short reply into EIO for
	 * the whole write, so an O_DIRECT one is refused: EFBIG, nothing of
	 * this request written (the requests before it of a larger write the
	 * kernel split may have been).
	 */
	if (*len > dev_size - (uint64_t)off) {
		if (o_direct)
			return EFBIG;
		*len = dev_size - (uint64_t)off;
	}
	if (*len > max_io)
		*len = max_io;
	return 0;
}

int route_write_prepare(struct gw_lun *l, bool o_direct, int64_t off, size_t *len, size_t max_io, struct blk_req **r,
			void **payload, void *arg)
{
	bool in_place;
	return route_write_prepare_in(l, o_direct, off, len, max_io, NULL, NULL, r, payload, &in_place, arg);
}

int route_write_prepare_in(struct gw_lun *l, bool o_direct, int64_t off, size_t *len, size_t max_io, void *slice,
			   void *data, struct blk_req **r, void **payload, bool *in_place, void *arg)
{
	bool answered;
	*r = NULL;
	*in_place = false;
	int err = write_check(l, o_direct, off, len, max_io, &answered, arg);
	if (err || answered)
		return err;
	uint32_t bs = l->dev.bs;
	if (slice && cur_backend()->blk_write_prepare_in && (uint64_t)off % bs == 0 && *len % bs == 0) {
		*r = cur_backend()->blk_write_prepare_in(&l->dev, (uint64_t)off, *len, slice, data);
		if (*r) {
			*in_place = true;
			*payload = data;
			return 0;
		}
	}
	*r = cur_backend()->blk_write_prepare(&l->dev, (uint64_t)off, *len, payload);
	return *r ? 0 : pool_nowait() ? ENOBUFS : EINVAL;
}

void route_write_cancel(struct blk_req *r) { cur_backend()->blk_write_cancel(r); }

/*
 * With the cache: write-back keeps the data (the slice goes back unsent);
 * otherwise the write goes out with its cached blocks updated first.
 * O_DIRECT writes are never kept.
 */
static void cached_write(struct gw_lun *l, const struct gw_file *f, struct blk_req *r, uint64_t off, size_t len,
			 const void *payload, void *arg)
{
	if (!(f && f->direct) && cur_backend()->bcache_write_absorb(l->cdev, off, len, payload)) {
		cur_backend()->blk_write_cancel(r);
		cur_sink()->write_done(arg, 0, len);
		return;
	}
	struct cache_write_ctx *cw = ctx_get();
	if (!cw) {
		cur_backend()->blk_write_cancel(r);
		cur_sink()->write_done(arg, ENOMEM, 0);
		return;
	}
	*cw = (struct cache_write_ctx){.arg = arg, .cdev = l->cdev};
	cw->w = cur_backend()->bcache_write_begin(l->cdev, off, len, payload);
	cur_backend()->blk_write_submit(r, cached_write_done, cw);
}

void route_write_submit(struct gw_lun *l, struct gw_file *f, struct blk_req *r, uint64_t off, size_t len,
			const void *payload, void *arg)
{
	stamp_write(l);
	if (l->cdev) {
		cached_write(l, f, r, off, len, payload, arg);
		return;
	}
	cur_backend()->blk_write_submit(r, write_done, arg);
}

int route_read_try(struct gw_lun *l, struct gw_file *f, bool o_direct, int64_t off, size_t size, size_t max_io,
		   void *arg)
{
	/* the cache's reads may wait (contexts, fills): only block I/O's, as route_read picks them */
	if (l->cdev && !(f && f->direct && cur_backend()->bcache_dev_empty(l->cdev)))
		return ENOBUFS;
	pool_nowait_set(true);
	int rc = route_read(l, f, o_direct, off, size, max_io, arg);
	pool_nowait_set(false);
	return rc;
}

int route_write_try(struct gw_lun *l, struct gw_file *f, struct blk_req *r, uint64_t off, size_t len,
		    const void *payload, void *arg)
{
	const struct route_backend *be = cur_backend();
	if (!be->blk_write_claim || !be->blk_write_go || (l->cdev && !(f && f->direct)))
		return ENOBUFS; /* write-back or a backend without the two steps: route_write_submit may wait */
	struct cache_write_ctx *cw = NULL;
	if (l->cdev) {
		pool_nowait_set(true);
		cw = ctx_get();
		pool_nowait_set(false);
		if (!cw)
			return ENOBUFS;
	}
	if (be->blk_write_claim(r, false)) {
		if (cw)
			ctx_put(cw);
		return ENOBUFS;
	}
	stamp_write(l);
	if (!cw) {
		be->blk_write_go(r, write_done, arg);
		return 0;
	}
	*cw = (struct cache_write_ctx){.arg = arg, .cdev = l->cdev};
	pool_nowait_set(true); /* no write context free: the write is not tracked, the blocks it changes are dropped */
	cw->w = be->bcache_write_begin(l->cdev, off, len, payload);
	pool_nowait_set(false);
	be->blk_write_go(r, cached_write_done, cw);
	return 0;
}

/* A status alone (discard, zero range, sync) for the sink. */
static void status_done(void *arg, int err, const void *data, size_t len)
{
	(void)data;
	(void)len;
	cur_sink()->status_done(arg, route_errno(err));
}

static void discard_done(void *arg, int err, const void *data, size_t len)
{
	struct cache_write_ctx *dc = arg;
	blk_done_fn done = dc->done;
	void *done_arg = dc->arg;
	if (dc->cdev)
		cur_backend()->bcache_write_end(dc->cdev, dc->w, err);
	ctx_put(dc);
	done(done_arg, err, data, len);
}

/*
 * Punch (deallocate) or zero [start, end) of l, within the LUN; the cached
 * blocks of the range become zeroes.  what names it in the log (NULL:
 * blk_discard's default); done gets the negative errno.
 */
static int discard(struct gw_lun *l, uint64_t start, uint64_t end, bool punch, const char *what, blk_done_fn done,
		   void *arg)
{
	struct discard_caps caps;
	discard_caps_from_info(&caps, &l->info);
	struct cache_write_ctx *dc = ctx_get();
	if (!dc)
		return ENOMEM;
	stamp_write(l); /* the range's bytes change: mtime and ctime move */
	*dc = (struct cache_write_ctx){.arg = arg, .cdev = l->cdev, .done = done};
	if (dc->cdev) /* cached blocks of the range become zeroes, as the LUN's will */
		dc->w = cur_backend()->bcache_write_begin(dc->cdev, start, end - start, NULL);
	int rc = cur_backend()->blk_discard(&l->dev, &caps, start, end - start, punch, what, discard_done, dc);
	if (rc) {
		if (dc->cdev)
			cur_backend()->bcache_write_end(dc->cdev, dc->w, rc);
		ctx_put(dc);
		return route_errno(rc);
	}
	return 0;
}

int route_fallocate(struct gw_lun *l, int mode, int64_t off, int64_t len, void *arg)
{
	const int known = FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE;
	if (gw_lun_gone(l))
		return ENODEV;
	bool punch = mode & FALLOC_FL_PUNCH_HOLE, zero = mode & FALLOC_FL_ZERO_RANGE;
	if ((mode & ~known) || (punch && zero) || (punch && !(mode & FALLOC_FL_KEEP_SIZE)))
		return EOPNOTSUPP;
	if (gw_lun_ro(l))
		return EROFS;
	if (off < 0 || len <= 0)
		return EINVAL;
	uint64_t start = (uint64_t)off, end = start + (uint64_t)len, size = blk_dev_size(&l->dev);
	if (end > size && !(mode & FALLOC_FL_KEEP_SIZE))
		return EFBIG; /* the file would have to grow */
	if ((!punch && !zero) || start >= size) {
		cur_sink()->status_done(arg, 0); /* the blocks already exist, or nothing of the LUN is in the range */
		return 0;
	}
	return discard(l, start, end > size ? size : end, punch, NULL, status_done, arg);
}

/* A truncation's zeroing ended: whatever failed, the tool sees an I/O error (or no space, or a write-protected LUN). */
static void truncate_done(void *arg, int err, const void *data, size_t len)
{
	int e = route_errno(err);
	(void)data;
	(void)len;
	cur_sink()->truncate_done(arg, e == 0 || e == ENOSPC || e == EROFS ? e : EIO);
}

int route_truncate(struct gw_lun *l, int64_t size, void *arg)
{
	if (gw_lun_gone(l))
		return ENODEV;
	if (gw_lun_ro(l))
		return EROFS;
	uint64_t cap = blk_dev_size(&l->dev);
	if (size < 0 || (uint64_t)size > cap)
		return EFBIG;
	if ((uint64_t)size == cap) {
		cur_sink()->truncate_done(arg, 0);
		return 0;
	}
	return discard(l, (uint64_t)size, cap, true, "zeroing after truncate", truncate_done, arg);
}

/* ---- SEEK_DATA / SEEK_HOLE ---- */

static void seek_done(void *arg, int err, uint64_t result)
{
	cur_sink()->seek_done(arg, route_errno(err), err ? 0 : result);
}

static void seek_after_writeback(void *arg, int err, const void *data, size_t len)
{
	(void)data;
	(void)len;
	cur_backend()->blk_seek_start(arg, err);
}

int route_seek(struct gw_lun *l, int64_t off, int whence, void *arg)
{
	if (gw_lun_gone(l))
		return ENODEV;
	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return EINVAL;
	if (off < 0 || (uint64_t)off >= blk_dev_size(&l->dev))
		return ENXIO;
	struct discard_caps caps;
	discard_caps_from_info(&caps, &l->info);
	bool hole = whence == SEEK_HOLE;
	if (!l->cdev) {
		int rc = cur_backend()->blk_seek(&l->dev, &caps, (uint64_t)off, hole, seek_done, arg);
		return rc ? route_errno(rc) : 0;
	}
	/*
	 * Write-back: data written but not yet written back is data, not a
	 * hole (a copier that skips holes would lose it).  Write the LUN's
	 * dirty blocks back first; then the target's answer covers them.
	 */
	int rc;
	struct seek_op *op = cur_backend()->blk_seek_prepare(&l->dev, &caps, (uint64_t)off, hole, seek_done, arg, &rc);
	if (!op)
		return route_errno(rc);
	rc = cur_backend()->bcache_writeback(l->cdev, seek_after_writeback, op);
	if (rc)
		cur_backend()->blk_seek_start(op, rc);
	return 0;
}

/* ---- sync ---- */

int gw_lun_sync(struct gw_lun *l, blk_done_fn cb, void *arg)
{
	return l->cdev ? cur_backend()->bcache_flush(l->cdev, cb, arg) : cur_backend()->blk_sync(&l->dev, cb, arg);
}

int route_sync(struct gw_lun *l, void *arg)
{
	if (gw_lun_gone(l)) { /* nothing can reach it; only unflushed writes are worth an error */
		if (atomic_load(&l->dev.dirty))
			return ENODEV;
		cur_sink()->status_done(arg, 0);
		return 0;
	}
	int rc = gw_lun_sync(l, status_done, arg);
	return rc ? route_errno(rc) : 0;
}

bool route_cache_flush(struct gw_lun *l, blk_done_fn cb, void *arg)
{
	return l->cdev && cur_backend()->bcache_flush(l->cdev, cb, arg) == 0;
}
