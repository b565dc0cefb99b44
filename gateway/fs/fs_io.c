/* SPDX-License-Identifier: MIT */
/*
 * FUSE read, write, flush, fsync, fallocate and lseek of the LUN files:
 * the inode checks, then route.c, which picks the block cache or block
 * I/O.  The FUSE reader (or ring thread) that runs a handler never waits
 * on the network: a request is submitted and the reply is sent from its
 * completion on the connection's event thread.  A handler may wait for a free pool slice or task slot (back-pressure) or
 * for an overlapping write to finish (read-modify-write ordering).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#include "fs_priv.h"
#include "gateway/fuse/fuse_io.h"
#include "gateway/fuse/fuse_rx.h"

/* ---- route.c's answers ---- */

/* Replies point into cache blocks or the read's slice: no copy over /dev/fuse;
 * over the FUSE rings fuse_uring.c copies each reply into its ring entry. */
static void reply_read(void *arg, int err, const struct iovec *iov, int n)
{
	fuse_req_t req = arg;
	if (gw_io_raw(arg))
		gw_io_reply(arg, err, iov, n);
	else if (err)
		fuse_reply_err(req, err);
	else if (n <= 1)
		fuse_reply_buf(req, n ? iov[0].iov_base : NULL, n ? iov[0].iov_len : 0);
	else
		fuse_reply_iov(req, iov, n);
}

static void reply_write(void *arg, int err, size_t len)
{
	if (gw_io_raw(arg)) {
		struct fuse_write_out out = {.size = (uint32_t)len};
		gw_io_reply(arg, err, &(struct iovec){&out, sizeof(out)}, 1);
	} else if (err)
		fuse_reply_err(arg, err);
	else
		fuse_reply_write(arg, len);
}

static void reply_status(void *arg, int err)
{
	if (gw_io_raw(arg))
		gw_io_reply(arg, err, NULL, 0);
	else
		fuse_reply_err(arg, err);
}

static void reply_seek(void *arg, int err, uint64_t off)
{
	if (err)
		fuse_reply_err(arg, err);
	else
		fuse_reply_lseek(arg, (off_t)off);
}

const struct route_sink gw_io_sink = {
	.read_done = reply_read,
	.write_done = reply_write,
	.status_done = reply_status,
	.seek_done = reply_seek,
	.truncate_done = gw_truncate_reply,
};

/*
 * For a write: the open file's struct gw_file (NULL without the block
 * cache).  One opened by an earlier worker (supervisor.h) has none here;
 * if it was opened O_DIRECT (the kernel passes the file's flags with each
 * request) its writes still bypass the cache, through direct_tmp (used
 * only during route_write_submit).
 */
static struct gw_file *file_of(const struct fuse_file_info *fi, struct gw_file *direct_tmp)
{
	return gw_file_of(fi->fh, fi->flags, direct_tmp);
}

/* ---- the handlers ---- */

void gw_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct gw *g = gw_of(req);
	struct gw_lun *l = gw_lun_by_ino(g, ino);
	if (ino == GW_STATS_INO) {
		gw_stats_read(req, size, off, fi);
		return;
	}
	if (!l) {
		fuse_reply_err(req, EBADF);
		return;
	}
	/* an earlier worker's file: no stream (its read goes through the cache, which is coherent) */
	int err = route_read(l, gw_fh_ptr(fi->fh), (fi->flags & O_DIRECT) != 0, off, size, g->max_io, req);
	if (err)
		fuse_reply_err(req, err);
}

/*
 * A write's data: read by a FUSE reader into its pool slice
 * (fuse_rx.h), it is written from there when block aligned (the request
 * takes the slice over: no copy); otherwise it is copied into the slice
 * route prepared (from libfuse's buffer or the reader's slice: counted in
 * payload_copied) or read into it from the pipe libfuse spliced it to.
 */
void gw_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *bufv, off_t off, struct fuse_file_info *fi)
{
	struct gw *g = gw_of(req);
	struct gw_lun *l = gw_lun_by_ino(g, ino);
	size_t len = fuse_buf_size(bufv);
	struct blk_req *r;
	void *payload;
	if (!l) {
		fuse_reply_err(req, EBADF);
		return;
	}
	struct gw_file direct_tmp;
	const struct fuse_buf *src = &bufv->buf[bufv->idx];
	void *data = bufv->count == 1 && !(src->flags & FUSE_BUF_IS_FD) && !bufv->off ? src->mem : NULL;
	void *rx = data ? gw_rx_claim(data) : NULL;
	bool in_place;
	int err = route_write_prepare_in(l, (fi->flags & O_DIRECT) != 0, off, &len, g->max_io, rx, rx ? data : NULL,
					 &r, &payload, &in_place, req);
	if (err || !r) {
		if (err)
			fuse_reply_err(req, err);
		return;
	}
	if (in_place) {
		gw_rx_taken(); /* before the submission: its completion returns the slice to the pool */
		route_write_submit(l, file_of(fi, &direct_tmp), r, (uint64_t)off, len, payload, req);
		return;
	}
	struct fuse_bufvec dst = FUSE_BUFVEC_INIT(len);
	dst.buf[0].mem = payload;
	bool in_pipe = bufv->buf[bufv->idx].flags & FUSE_BUF_IS_FD; /* before the copy moves idx on */
	ssize_t got = fuse_buf_copy(&dst, bufv, 0);
	if (got < 0 || (size_t)got != len) {
		route_write_cancel(r);
		fuse_reply_err(req, got < 0 ? (int)-got : EIO);
		return;
	}
	/* A payload libfuse already read into its own memory was memcpy'd here; one in a pipe was not. */
	if (!in_pipe)
		atomic_fetch_add_explicit(&g->payload_copied, len, memory_order_relaxed);
	route_write_submit(l, file_of(fi, &direct_tmp), r, (uint64_t)off, len, payload, req);
}

static void do_sync(fuse_req_t req, fuse_ino_t ino)
{
	struct gw_lun *l = gw_lun_by_ino(gw_of(req), ino);
	if (!l) {
		fuse_reply_err(req, ino == ROOT_INO || ino == GW_STATS_INO ? 0 : EBADF);
		return;
	}
	int err = route_sync(l, req);
	if (err)
		fuse_reply_err(req, err);
}

void gw_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	do_sync(req, ino);
}

void gw_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)datasync;
	(void)fi;
	do_sync(req, ino);
}

/*
 * Logical block provisioning (route_fallocate): punch and zero range
 * leave the range reading as zeroes; plain allocation succeeds within the
 * LUN (every block exists as far as the file is concerned) and is EFBIG
 * beyond it, as a write there is; with FALLOC_FL_KEEP_SIZE the part
 * beyond the end is ignored.  Other modes are EOPNOTSUPP.
 */
void gw_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len, struct fuse_file_info *fi)
{
	struct gw_lun *l = gw_lun_by_ino(gw_of(req), ino);
	(void)fi;
	if (!l) {
		fuse_reply_err(req, ino == ROOT_INO ? EISDIR : EBADF);
		return;
	}
	int err = route_fallocate(l, mode, off, len, req);
	if (err)
		fuse_reply_err(req, err);
}

/*
 * SEEK_DATA / SEEK_HOLE (route_seek); the kernel answers SEEK_SET/CUR/END
 * itself.  .stats answers from its snapshot.
 */
void gw_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi)
{
	if (ino == GW_STATS_INO && (whence == SEEK_DATA || whence == SEEK_HOLE)) {
		gw_stats_lseek(req, off, whence, fi);
		return;
	}
	struct gw_lun *l = gw_lun_by_ino(gw_of(req), ino);
	if (!l) {
		fuse_reply_err(req, ino == ROOT_INO ? EISDIR : EBADF);
		return;
	}
	int err = route_seek(l, off, whence, req);
	if (err)
		fuse_reply_err(req, err);
}
