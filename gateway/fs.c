/* SPDX-License-Identifier: MIT */
/*
 * FUSE low-level operations.  Workers never wait on the network: read,
 * write, flush and fsync submit an asynchronous block request and return;
 * the reply is sent from the completion on the connection's event thread.
 * A worker may wait for a free pool slice or task slot (back-pressure) or
 * for an overlapping write to finish (read-modify-write ordering).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gateway.h"

#define ROOT_INO FUSE_ROOT_ID
#define ATTR_TIMEOUT 1.0

static struct gw *gw_of(fuse_req_t req) { return fuse_req_userdata(req); }

static struct gw_lun *lun_by_ino(struct gw *g, fuse_ino_t ino)
{
	if (ino < 2 || ino - 2 >= g->nluns)
		return NULL;
	return &g->luns[ino - 2];
}

static void fill_attr(struct gw *g, fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = g->uid;
	st->st_gid = g->gid;
	st->st_atim = st->st_mtim = st->st_ctim = g->mtime;
	if (ino == ROOT_INO) {
		st->st_mode = S_IFDIR | (0777 & ~g->umask);
		st->st_nlink = 2;
		return;
	}
	struct gw_lun *l = lun_by_ino(g, ino);
	st->st_mode = S_IFREG | ((l->ro ? 0444 : 0666) & ~g->umask);
	st->st_nlink = 1;
	st->st_size = (off_t)l->dev.size;
	st->st_blksize = l->dev.bs > 4096 ? l->dev.bs : 4096;
	st->st_blocks = (blkcnt_t)(l->dev.size / 512);
}

static void gw_init(void *userdata, struct fuse_conn_info *conn)
{
	struct gw *g = userdata;
	conn->max_write = (unsigned)g->max_io;
	conn->max_read = (unsigned)g->max_io; /* equals the max_read mount option */
	conn->max_background = 128;
	conn->congestion_threshold = 96;
	/*
	 * No splice from /dev/fuse (libfuse turns it on by default when write_buf
	 * is set): the payload must end up in memory (a pool slice), and splice
	 * into a pipe then read from it copies as often as one read, with two or
	 * three system calls per request instead of one.
	 */
	conn->want &= ~(unsigned)FUSE_CAP_SPLICE_READ;
}

static void gw_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct gw *g = gw_of(req);
	if (parent != ROOT_INO) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	for (size_t i = 0; i < g->nluns; i++) {
		if (strcmp(g->luns[i].name, name) == 0) {
			struct fuse_entry_param e = {.ino = g->luns[i].ino, .attr_timeout = ATTR_TIMEOUT,
						     .entry_timeout = ATTR_TIMEOUT};
			fill_attr(g, e.ino, &e.attr);
			fuse_reply_entry(req, &e);
			return;
		}
	}
	fuse_reply_err(req, ENOENT);
}

static void gw_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct gw *g = gw_of(req);
	struct stat st;
	(void)fi;
	if (ino != ROOT_INO && !lun_by_ino(g, ino)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fill_attr(g, ino, &st);
	fuse_reply_attr(req, &st, ATTR_TIMEOUT);
}

/*
 * A block device keeps its size: truncating to any size up to the
 * capacity succeeds and changes nothing (so qemu-img can create an image on
 * the LUN); beyond it is EFBIG.  Modes, owners and times are not stored.
 */
static void gw_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi)
{
	struct gw *g = gw_of(req);
	struct gw_lun *l = lun_by_ino(g, ino);
	struct stat st;
	(void)fi;
	if (ino != ROOT_INO && !l) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		if (!l) {
			fuse_reply_err(req, EISDIR);
			return;
		}
		if (l->ro) {
			fuse_reply_err(req, EROFS);
			return;
		}
		if (attr->st_size < 0 || (uint64_t)attr->st_size > l->dev.size) {
			fuse_reply_err(req, EFBIG);
			return;
		}
	}
	fill_attr(g, ino, &st);
	fuse_reply_attr(req, &st, ATTR_TIMEOUT);
}

static void gw_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct gw *g = gw_of(req);
	char buf[16384];
	size_t used = 0;
	(void)fi;
	if (ino != ROOT_INO) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	if (size > sizeof(buf))
		size = sizeof(buf);
	for (off_t i = off; i < (off_t)g->nluns + 2; i++) {
		struct stat st = {0};
		const char *name;
		if (i == 0) {
			name = ".";
			st.st_ino = ROOT_INO;
			st.st_mode = S_IFDIR;
		} else if (i == 1) {
			name = "..";
			st.st_ino = ROOT_INO;
			st.st_mode = S_IFDIR;
		} else {
			name = g->luns[i - 2].name;
			st.st_ino = g->luns[i - 2].ino;
			st.st_mode = S_IFREG;
		}
		size_t n = fuse_add_direntry(req, buf + used, size - used, name, &st, i + 1);
		if (n > size - used)
			break;
		used += n;
	}
	fuse_reply_buf(req, buf, used);
}

static void gw_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct gw *g = gw_of(req);
	struct gw_lun *l = lun_by_ino(g, ino);
	if (!l) {
		fuse_reply_err(req, ino == ROOT_INO ? EISDIR : ENOENT);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY && l->ro) {
		fuse_reply_err(req, EROFS);
		return;
	}
	fi->keep_cache = 0; /* another initiator may have written since */
	if (g->cache) {
		struct gw_file *f = calloc(1, sizeof(*f));
		if (!f) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		f->direct = (fi->flags & O_DIRECT) != 0;
		fi->fh = (uint64_t)(uintptr_t)f;
	}
	if (fuse_reply_open(req, fi) == -ENOENT && g->cache)
		free((void *)(uintptr_t)fi->fh); /* interrupted: no release will come */
}

/* A lost or broken connection reaches the file's user as EIO, as on a disk. */
static int io_errno(int err)
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

static void read_done(void *arg, int err, const void *data, size_t len)
{
	fuse_req_t req = arg;
	if (err)
		fuse_reply_err(req, io_errno(err));
	else
		fuse_reply_buf(req, data, len);
}

/* Replies point into cache blocks or the read's slice: no copy. */
static void cached_read_done(void *arg, int err, const struct iovec *iov, int n)
{
	fuse_req_t req = arg;
	if (err)
		fuse_reply_err(req, io_errno(err));
	else
		fuse_reply_iov(req, iov, n);
}

static void gw_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct gw *g = gw_of(req);
	struct gw_lun *l = lun_by_ino(g, ino);
	if (!l) {
		fuse_reply_err(req, EBADF);
		return;
	}
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if ((uint64_t)off >= l->dev.size || size == 0) {
		fuse_reply_buf(req, NULL, 0); /* end of device */
		return;
	}
	if (size > l->dev.size - (uint64_t)off)
		size = l->dev.size - (uint64_t)off;
	if (size > g->max_io)
		size = g->max_io;
	int rc;
	struct gw_file *f = l->cdev ? (struct gw_file *)(uintptr_t)fi->fh : NULL;
	if (l->cdev && !(f && f->direct && bcache_dev_empty(l->cdev))) {
		rc = bcache_read(l->cdev, f ? &f->stream : NULL, (uint64_t)off, size, f && f->direct, cached_read_done,
				 req);
	} else {
		rc = blk_read(&l->dev, (uint64_t)off, size, read_done, req);
	}
	if (rc)
		fuse_reply_err(req, -rc);
}

static void write_done(void *arg, int err, const void *data, size_t len)
{
	fuse_req_t req = arg;
	(void)data;
	if (err)
		fuse_reply_err(req, io_errno(err));
	else
		fuse_reply_write(req, len);
}

struct cached_write_ctx {
	fuse_req_t req;
	struct gw_lun *l;
	struct bcache_write *w;
};

static void cached_write_done(void *arg, int err, const void *data, size_t len)
{
	struct cached_write_ctx *cw = arg;
	bcache_write_end(cw->l->cdev, cw->w, err);
	write_done(cw->req, err, data, len);
	free(cw);
}

/*
 * With the cache: write-back keeps the data (the slice goes back unsent);
 * otherwise the write goes out with its cached blocks updated first.
 * O_DIRECT writes are never kept.
 */
static void cached_write(fuse_req_t req, struct gw_lun *l, const struct gw_file *f, struct blk_req *r, uint64_t off,
			 size_t len, const void *payload)
{
	if (!(f && f->direct) && bcache_write_absorb(l->cdev, off, len, payload)) {
		blk_write_cancel(r);
		fuse_reply_write(req, len);
		return;
	}
	struct cached_write_ctx *cw = malloc(sizeof(*cw));
	if (!cw) {
		blk_write_cancel(r);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	cw->req = req;
	cw->l = l;
	cw->w = bcache_write_begin(l->cdev, off, len, payload);
	blk_write_submit(r, cached_write_done, cw);
}

static void gw_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *bufv, off_t off,
			 struct fuse_file_info *fi)
{
	struct gw *g = gw_of(req);
	struct gw_lun *l = lun_by_ino(g, ino);
	size_t len = fuse_buf_size(bufv);
	void *payload;
	if (!l) {
		fuse_reply_err(req, EBADF);
		return;
	}
	if (l->ro) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if ((uint64_t)off >= l->dev.size) {
		fuse_reply_err(req, len ? EFBIG : 0);
		return;
	}
	if (len == 0) {
		fuse_reply_write(req, 0);
		return;
	}
	/* A write crossing the end is short, as on a block device. */
	if (len > l->dev.size - (uint64_t)off)
		len = l->dev.size - (uint64_t)off;
	if (len > g->max_io)
		len = g->max_io;
	struct blk_req *r = blk_write_prepare(&l->dev, (uint64_t)off, len, &payload);
	if (!r) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	struct fuse_bufvec dst = FUSE_BUFVEC_INIT(len);
	dst.buf[0].mem = payload;
	ssize_t got = fuse_buf_copy(&dst, bufv, 0);
	if (got < 0 || (size_t)got != len) {
		blk_write_cancel(r);
		fuse_reply_err(req, got < 0 ? (int)-got : EIO);
		return;
	}
	if (l->cdev) {
		cached_write(req, l, (struct gw_file *)(uintptr_t)fi->fh, r, (uint64_t)off, len, payload);
		return;
	}
	blk_write_submit(r, write_done, req);
}

static void sync_done(void *arg, int err, const void *data, size_t len)
{
	(void)data;
	(void)len;
	fuse_reply_err((fuse_req_t)arg, err ? io_errno(err) : 0);
}

static void do_sync(fuse_req_t req, fuse_ino_t ino)
{
	struct gw_lun *l = lun_by_ino(gw_of(req), ino);
	if (!l) {
		fuse_reply_err(req, ino == ROOT_INO ? 0 : EBADF);
		return;
	}
	int rc = gw_lun_sync(l, sync_done, req);
	if (rc)
		fuse_reply_err(req, -rc);
}

int gw_lun_sync(struct gw_lun *l, blk_done_fn cb, void *arg)
{
	return l->cdev ? bcache_flush(l->cdev, cb, arg) : blk_sync(&l->dev, cb, arg);
}

static void gw_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	do_sync(req, ino);
}

static void gw_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)datasync;
	(void)fi;
	do_sync(req, ino);
}

static void release_done(void *arg, int err, const void *data, size_t len)
{
	(void)data;
	(void)len;
	(void)err; /* close(2) has returned; flush reported errors to it */
	fuse_reply_err((fuse_req_t)arg, 0);
}

static void gw_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct gw *g = gw_of(req);
	struct gw_lun *l = lun_by_ino(g, ino);
	free((void *)(uintptr_t)fi->fh);
	/* Write-back: the last close writes the dirty blocks back. */
	if (l && l->cdev && g->writeback && (fi->flags & O_ACCMODE) != O_RDONLY &&
	    bcache_flush(l->cdev, release_done, req) == 0)
		return;
	fuse_reply_err(req, 0);
}

static void gw_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct gw *g = gw_of(req);
	struct statvfs sv = {0};
	(void)ino;
	sv.f_bsize = sv.f_frsize = 4096;
	for (size_t i = 0; i < g->nluns; i++)
		sv.f_blocks += g->luns[i].dev.size / 4096;
	sv.f_files = g->nluns + 1;
	sv.f_namemax = 255;
	fuse_reply_statfs(req, &sv);
}

static void gw_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	struct gw_lun *l = lun_by_ino(gw_of(req), ino);
	(void)fi;
	if (!l) {
		fuse_reply_err(req, EBADF);
		return;
	}
	/* Plain allocation within the device: the blocks already exist. */
	if (mode == 0 && off >= 0 && len > 0 && (uint64_t)off + (uint64_t)len <= l->dev.size) {
		fuse_reply_err(req, 0);
		return;
	}
	fuse_reply_err(req, mode == 0 ? EFBIG : EOPNOTSUPP);
}

const struct fuse_lowlevel_ops gw_ops = {
	.init = gw_init,
	.lookup = gw_lookup,
	.getattr = gw_getattr,
	.setattr = gw_setattr,
	.readdir = gw_readdir,
	.open = gw_open,
	.read = gw_read,
	.write_buf = gw_write_buf,
	.flush = gw_flush,
	.fsync = gw_fsync,
	.release = gw_release,
	.statfs = gw_statfs,
	.fallocate = gw_fallocate,
};
