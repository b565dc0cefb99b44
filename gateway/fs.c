/* SPDX-License-Identifier: MIT */
/*
 * FUSE low-level operations.  Workers never wait on the network: read,
 * write, flush and fsync submit an asynchronous block request and return;
 * the reply is sent from the completion on the connection's event thread.
 * A worker may wait for a free pool slice or task slot (back-pressure) or
 * for an overlapping write to finish (read-modify-write ordering).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../cache/discard.h"
#include "gateway.h"

#define ROOT_INO FUSE_ROOT_ID
#define ATTR_TIMEOUT 1.0

static struct gw *gw_of(fuse_req_t req) { return fuse_req_userdata(req); }

static struct gw_lun *lun_by_ino(struct gw *g, fuse_ino_t ino)
{
	if (ino < 2 || ino - 2 >= gw_nluns(g))
		return NULL;
	return &g->luns[ino - 2];
}

/*
 * A LUN file's mode, owner and times are kept in its slot for the life of
 * the mount, as a device node's are until the device goes; this lock
 * guards them (writes only stamp write_ns, without it).
 */
static pthread_mutex_t attr_lock = PTHREAD_MUTEX_INITIALIZER;

static int64_t ts_ns(struct timespec t) { return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec; }
static struct timespec ns_ts(int64_t ns) { return (struct timespec){.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000}; }

/*
 * A write, punch or zero range moves mtime and ctime: one relaxed store of
 * the coarse clock (the kernel's own file times have its resolution), no
 * lock; getattr reads it, setattr folds it into the kept times.
 */
static void stamp_write(struct gw_lun *l)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME_COARSE, &now);
	atomic_store_explicit(&l->write_ns, ts_ns(now), memory_order_relaxed);
}

void gw_lun_attr_init(const struct gw *g, struct gw_lun *l)
{
	l->mode = 0666 & ~g->umask;
	l->uid = g->uid;
	l->gid = g->gid;
	clock_gettime(CLOCK_REALTIME, &l->mtime);
	l->atime = l->ctime = l->mtime;
	l->write_ns = 0;
}

/* Under attr_lock: a write since the last setattr becomes the kept mtime and ctime. */
static void fold_write(struct gw_lun *l)
{
	int64_t w = atomic_exchange_explicit(&l->write_ns, 0, memory_order_relaxed);
	if (w)
		l->mtime = l->ctime = ns_ts(w);
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
	pthread_mutex_lock(&attr_lock);
	st->st_mode = S_IFREG | (l->mode & (gw_lun_ro(l) ? ~(mode_t)0222 : 07777));
	st->st_uid = l->uid;
	st->st_gid = l->gid;
	st->st_atim = l->atime;
	st->st_mtim = l->mtime;
	st->st_ctim = l->ctime;
	pthread_mutex_unlock(&attr_lock);
	int64_t w = atomic_load_explicit(&l->write_ns, memory_order_relaxed);
	if (w)
		st->st_mtim = st->st_ctim = ns_ts(w);
	st->st_nlink = 1;
	st->st_size = (off_t)blk_dev_size(&l->dev);
	st->st_blksize = l->dev.bs > 4096 ? l->dev.bs : 4096;
	st->st_blocks = (blkcnt_t)(st->st_size / 512);
}

/* Whether the caller is in group gid (its primary or a supplementary group). */
static bool caller_in_group(fuse_req_t req, gid_t gid)
{
	gid_t groups[64];
	if (fuse_req_ctx(req)->gid == gid)
		return true;
	int n = fuse_req_getgroups(req, 64, groups);
	for (int i = 0; i < n && i < 64; i++)
		if (groups[i] == gid)
			return true;
	return false;
}

/* Permission to `want` (R_OK, W_OK, X_OK bits) on a file of these attributes, as the kernel checks (root passes). */
static bool caller_may(fuse_req_t req, const struct stat *st, int want)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	if (c->uid == 0)
		return !(want & X_OK) || S_ISDIR(st->st_mode) || (st->st_mode & 0111);
	unsigned bits = c->uid == st->st_uid		     ? st->st_mode >> 6
			: caller_in_group(req, st->st_gid) ? st->st_mode >> 3
							   : st->st_mode;
	return (bits & (unsigned)want & 7) == ((unsigned)want & 7);
}

static void gw_init(void *userdata, struct fuse_conn_info *conn)
{
	struct gw *g = userdata;
	conn->max_write = (unsigned)g->max_io;
	conn->max_read = (unsigned)g->max_io; /* equals the max_read mount option */
	conn->max_background = 128;
	conn->congestion_threshold = 96;
	/*
	 * Splice from /dev/fuse only over iSER.  With splice a write's payload
	 * waits in a pipe and write_buf reads it straight into the pool slice
	 * the target then RDMA-reads: no copy in user space, at the price of
	 * two or three system calls per request.  Over TCP the payload is
	 * copied into the socket anyway, and one read into libfuse's buffer
	 * plus a memcpy into the slice measured faster (the memcpy is counted in
	 * payload_bytes_copied).
	 */
	if (g->iser && (conn->capable & FUSE_CAP_SPLICE_READ))
		conn->want |= FUSE_CAP_SPLICE_READ;
	else
		conn->want &= ~(unsigned)FUSE_CAP_SPLICE_READ;
}

static void gw_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct gw *g = gw_of(req);
	fuse_ino_t extra = gw_extra_lookup(g, parent, name); /* .stats, by-id/ and its links */
	if (extra) {
		struct fuse_entry_param e = {.ino = extra, .attr_timeout = ATTR_TIMEOUT, .entry_timeout = ATTR_TIMEOUT};
		gw_extra_attr(g, extra, &e.attr);
		fuse_reply_entry(req, &e);
		return;
	}
	if (parent == GW_BYID_INO) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (parent != ROOT_INO) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	for (size_t i = 0, n = gw_nluns(g); i < n; i++) {
		if (!gw_lun_gone(&g->luns[i]) && strcmp(g->luns[i].name, name) == 0) {
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
	if (gw_extra_attr(g, ino, &st)) {
		fuse_reply_attr(req, &st, ATTR_TIMEOUT);
		return;
	}
	if (ino != ROOT_INO && !lun_by_ino(g, ino)) { /* a gone LUN keeps its attributes for open files */
		fuse_reply_err(req, ENOENT);
		return;
	}
	fill_attr(g, ino, &st);
	fuse_reply_attr(req, &st, ATTR_TIMEOUT);
}

#define SET_ATTRS                                                                                          \
	(FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID | FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | \
	 FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW)

/*
 * Who may change what, as for any file (the kernel leaves the checks to
 * us without default_permissions): the owner (or root) the mode and times,
 * root the owner, the owner the group to one of its own; setting the times
 * to now takes write permission.  Returns 0 or the errno.
 */
static int may_set(fuse_req_t req, const struct gw_lun *l, const struct stat *attr, int to_set, bool in_group)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	bool root = c->uid == 0, owner = root || c->uid == l->uid;
	bool explicit_times = ((to_set & FUSE_SET_ATTR_ATIME) && !(to_set & FUSE_SET_ATTR_ATIME_NOW)) ||
			      ((to_set & FUSE_SET_ATTR_MTIME) && !(to_set & FUSE_SET_ATTR_MTIME_NOW));
	if ((to_set & FUSE_SET_ATTR_MODE) && !owner)
		return EPERM;
	if ((to_set & FUSE_SET_ATTR_UID) && attr->st_uid != l->uid && !root)
		return EPERM;
	if ((to_set & FUSE_SET_ATTR_GID) && attr->st_gid != l->gid && !root && !(owner && in_group))
		return EPERM;
	if (explicit_times && !owner)
		return EPERM;
	if ((to_set & (FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW)) && !owner) {
		struct stat st = {.st_mode = l->mode, .st_uid = l->uid, .st_gid = l->gid};
		if (!caller_may(req, &st, W_OK))
			return EACCES;
	}
	return 0;
}

/* Under attr_lock, once may_set agreed: apply and move ctime. */
static void apply_set(fuse_req_t req, struct gw_lun *l, const struct stat *attr, int to_set)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	fold_write(l);
	if (to_set & FUSE_SET_ATTR_MODE)
		l->mode = attr->st_mode & 07777;
	if (to_set & FUSE_SET_ATTR_UID)
		l->uid = attr->st_uid;
	if (to_set & FUSE_SET_ATTR_GID)
		l->gid = attr->st_gid;
	if ((to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) && fuse_req_ctx(req)->uid != 0)
		l->mode &= ~(mode_t)06000; /* chown by others than root drops set-user-ID and set-group-ID */
	if (to_set & FUSE_SET_ATTR_ATIME)
		l->atime = (to_set & FUSE_SET_ATTR_ATIME_NOW) ? now : attr->st_atim;
	if (to_set & FUSE_SET_ATTR_MTIME)
		l->mtime = (to_set & FUSE_SET_ATTR_MTIME_NOW) ? now : attr->st_mtim;
	l->ctime = now;
}

/*
 * A block device keeps its size: truncating to any size up to the
 * capacity succeeds and changes nothing (so qemu-img can create an image on
 * the LUN); beyond it is EFBIG.  A LUN file's mode, owner and times are
 * kept for the life of the mount (getattr returns them); those of the
 * directory, by-id/ and .stats cannot be changed (EPERM).  A read-only
 * mount changes nothing (EROFS).
 */
static void gw_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi)
{
	struct gw *g = gw_of(req);
	struct gw_lun *l = lun_by_ino(g, ino);
	struct stat st;
	(void)fi;
	if (gw_extra_attr(g, ino, &st)) {
		if (to_set & FUSE_SET_ATTR_SIZE)
			fuse_reply_err(req, ino == GW_STATS_INO ? EACCES : EISDIR);
		else if (to_set & SET_ATTRS)
			fuse_reply_err(req, g->ro ? EROFS : EPERM);
		else
			fuse_reply_attr(req, &st, ATTR_TIMEOUT);
		return;
	}
	if (ino != ROOT_INO && !l) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		if (!l) {
			fuse_reply_err(req, EISDIR);
			return;
		}
		if (gw_lun_ro(l)) {
			fuse_reply_err(req, EROFS);
			return;
		}
		if (attr->st_size < 0 || (uint64_t)attr->st_size > blk_dev_size(&l->dev)) {
			fuse_reply_err(req, EFBIG);
			return;
		}
	}
	if (to_set & SET_ATTRS) {
		if (g->ro || !l) {
			fuse_reply_err(req, g->ro ? EROFS : EPERM);
			return;
		}
		bool in_group = (to_set & FUSE_SET_ATTR_GID) && caller_in_group(req, attr->st_gid); /* reads /proc: outside the lock */
		pthread_mutex_lock(&attr_lock);
		int err = may_set(req, l, attr, to_set, in_group);
		if (!err)
			apply_set(req, l, attr, to_set);
		pthread_mutex_unlock(&attr_lock);
		if (err) {
			fuse_reply_err(req, err);
			return;
		}
	}
	fill_attr(g, ino, &st);
	fuse_reply_attr(req, &st, ATTR_TIMEOUT);
}

/* access(2): the kept mode and owner, as open checks them; writing a read-only LUN is EROFS. */
static void gw_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	struct gw *g = gw_of(req);
	struct gw_lun *l = lun_by_ino(g, ino);
	struct stat st;
	if (!gw_extra_attr(g, ino, &st)) {
		if (ino != ROOT_INO && !l) {
			fuse_reply_err(req, ENOENT);
			return;
		}
		fill_attr(g, ino, &st);
	}
	if ((mask & W_OK) && (g->ro || (l && gw_lun_ro(l)))) {
		fuse_reply_err(req, EROFS);
		return;
	}
	fuse_reply_err(req, caller_may(req, &st, mask & (R_OK | W_OK | X_OK)) ? 0 : EACCES);
}

/*
 * The directory holds what the target offers (the LUN files, .stats,
 * by-id/): no name can be made, removed, linked or renamed, as in a
 * directory one may not change (EPERM; EROFS on a read-only mount).
 * Extended attributes are not implemented: the kernel answers EOPNOTSUPP,
 * which copiers take as "none here".
 */
static void names_fixed(fuse_req_t req) { fuse_reply_err(req, gw_of(req)->ro ? EROFS : EPERM); }

static void gw_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	(void)parent, (void)name, (void)mode, (void)rdev;
	names_fixed(req);
}

static void gw_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	(void)parent, (void)name, (void)mode;
	names_fixed(req);
}

static void gw_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	(void)parent, (void)name;
	names_fixed(req);
}

static void gw_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	(void)link, (void)parent, (void)name;
	names_fixed(req);
}

static void gw_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	(void)parent, (void)name, (void)newparent, (void)newname, (void)flags;
	names_fixed(req);
}

static void gw_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	(void)ino, (void)newparent, (void)newname;
	names_fixed(req);
}

static void gw_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi)
{
	(void)parent, (void)name, (void)mode, (void)fi;
	names_fixed(req);
}

static void gw_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct gw *g = gw_of(req);
	char buf[16384];
	size_t used = 0;
	(void)fi;
	if (ino == GW_BYID_INO) {
		gw_byid_readdir(req, g, size, off);
		return;
	}
	if (ino != ROOT_INO) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	if (size > sizeof(buf))
		size = sizeof(buf);
	for (off_t i = off; i < (off_t)gw_nluns(g) + 4; i++) { /* ., .., the LUNs, .stats, by-id */
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
		} else if (i == (off_t)gw_nluns(g) + 2) {
			name = GW_STATS_NAME;
			st.st_ino = GW_STATS_INO;
			st.st_mode = S_IFREG;
		} else if (i == (off_t)gw_nluns(g) + 3) {
			name = GW_BYID_NAME;
			st.st_ino = GW_BYID_INO;
			st.st_mode = S_IFDIR;
		} else {
			if (gw_lun_gone(&g->luns[i - 2]))
				continue;
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
	if (ino == GW_STATS_INO) {
		gw_stats_open(req, fi);
		return;
	}
	if (!l || gw_lun_gone(l)) {
		fuse_reply_err(req, ino == ROOT_INO || ino == GW_BYID_INO ? EISDIR : ENOENT);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY && gw_lun_ro(l)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	struct stat st;
	fill_attr(g, ino, &st);
	int want = (fi->flags & O_ACCMODE) == O_RDONLY ? R_OK : (fi->flags & O_ACCMODE) == O_WRONLY ? W_OK : R_OK | W_OK;
	if (!caller_may(req, &st, want)) { /* the kept mode, as chmod left it */
		fuse_reply_err(req, EACCES);
		return;
	}
	/*
	 * Close-to-open: an open sees every write the target acknowledged
	 * before it, also another initiator's.  The kernel drops the file's
	 * page cache at an open without keep_cache; the block cache drops the
	 * LUN's clean blocks (its dirty ones are this mount's newest data).
	 */
	fi->keep_cache = 0;
	bcache_dev_drop_clean(l->cdev);
	if (g->cache) {
		struct gw_file *f = gw_file_new(g, (fi->flags & O_DIRECT) != 0);
		if (!f) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		fi->fh = (uint64_t)(uintptr_t)f;
	}
	if (fuse_reply_open(req, fi) == -ENOENT && g->cache)
		gw_file_free(g, (struct gw_file *)(uintptr_t)fi->fh); /* interrupted: no release will come */
}

struct gw_file *gw_file_new(struct gw *g, bool direct)
{
	struct gw_file *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->direct = direct;
	pthread_mutex_lock(&g->files_lock);
	f->next = g->files;
	if (g->files)
		g->files->prev = f;
	g->files = f;
	pthread_mutex_unlock(&g->files_lock);
	return f;
}

void gw_file_free(struct gw *g, struct gw_file *f)
{
	if (!f)
		return;
	pthread_mutex_lock(&g->files_lock);
	if (f->prev)
		f->prev->next = f->next;
	else
		g->files = f->next;
	if (f->next)
		f->next->prev = f->prev;
	pthread_mutex_unlock(&g->files_lock);
	free(f);
}

void gw_files_free_all(struct gw *g)
{
	while (g->files)
		gw_file_free(g, g->files);
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

/*
 * O_DIRECT I/O must be aligned to the logical block size in offset and
 * length, as the kernel demands of a block device (EINVAL otherwise).  The
 * kernel passes the file's current flags with each READ and WRITE.
 */
static bool direct_misaligned(const struct gw_lun *l, const struct fuse_file_info *fi, off_t off, size_t size)
{
	return (fi->flags & O_DIRECT) && ((uint64_t)off % l->dev.bs != 0 || size % l->dev.bs != 0);
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
	if (ino == GW_STATS_INO) {
		gw_stats_read(req, size, off, fi);
		return;
	}
	if (!l) {
		fuse_reply_err(req, EBADF);
		return;
	}
	if (gw_lun_gone(l)) {
		fuse_reply_err(req, ENODEV);
		return;
	}
	if (off < 0 || direct_misaligned(l, fi, off, size)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	uint64_t dev_size = blk_dev_size(&l->dev);
	if ((uint64_t)off >= dev_size || size == 0) {
		fuse_reply_buf(req, NULL, 0); /* end of device */
		return;
	}
	if (size > dev_size - (uint64_t)off)
		size = dev_size - (uint64_t)off;
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

/*
 * A write, punch or zero range in flight on a cached LUN (cdev NULL: no
 * cache), with the token of bcache_write_begin to end when it completes.
 */
struct cache_write_ctx {
	fuse_req_t req;
	struct bcache_dev *cdev;
	struct bcache_write *w;
};

static void cached_write_done(void *arg, int err, const void *data, size_t len)
{
	struct cache_write_ctx *cw = arg;
	bcache_write_end(cw->cdev, cw->w, err);
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
	struct cache_write_ctx *cw = malloc(sizeof(*cw));
	if (!cw) {
		blk_write_cancel(r);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	*cw = (struct cache_write_ctx){.req = req, .cdev = l->cdev};
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
	if (gw_lun_gone(l)) {
		fuse_reply_err(req, ENODEV);
		return;
	}
	if (gw_lun_ro(l)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (off < 0 || direct_misaligned(l, fi, off, len)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	uint64_t dev_size = blk_dev_size(&l->dev);
	if ((uint64_t)off >= dev_size) {
		fuse_reply_err(req, len ? EFBIG : 0);
		return;
	}
	if (len == 0) {
		fuse_reply_write(req, 0);
		return;
	}
	/* A write crossing the end is short, as on a block device. */
	if (len > dev_size - (uint64_t)off)
		len = dev_size - (uint64_t)off;
	if (len > g->max_io)
		len = g->max_io;
	struct blk_req *r = blk_write_prepare(&l->dev, (uint64_t)off, len, &payload);
	if (!r) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	struct fuse_bufvec dst = FUSE_BUFVEC_INIT(len);
	dst.buf[0].mem = payload;
	bool in_pipe = bufv->buf[bufv->idx].flags & FUSE_BUF_IS_FD; /* before the copy moves idx on */
	ssize_t got = fuse_buf_copy(&dst, bufv, 0);
	if (got < 0 || (size_t)got != len) {
		blk_write_cancel(r);
		fuse_reply_err(req, got < 0 ? (int)-got : EIO);
		return;
	}
	/* A payload libfuse already read into its own memory was memcpy'd here; one in a pipe was not. */
	if (!in_pipe)
		atomic_fetch_add_explicit(&g->payload_copied, len, memory_order_relaxed);
	stamp_write(l);
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
		fuse_reply_err(req, ino == ROOT_INO || ino == GW_STATS_INO ? 0 : EBADF);
		return;
	}
	if (gw_lun_gone(l)) { /* nothing can reach it; only unflushed writes are worth an error */
		fuse_reply_err(req, atomic_load(&l->dev.dirty) ? ENODEV : 0);
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
	if (ino == GW_STATS_INO) {
		gw_stats_release(req, fi);
		return;
	}
	struct gw *g = gw_of(req);
	struct gw_lun *l = lun_by_ino(g, ino);
	gw_file_free(g, (struct gw_file *)(uintptr_t)fi->fh);
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
	size_t n = gw_nluns(g);
	for (size_t i = 0; i < n; i++)
		if (!gw_lun_gone(&g->luns[i]))
			sv.f_blocks += blk_dev_size(&g->luns[i].dev) / 4096;
	sv.f_files = n + 1;
	sv.f_namemax = 255;
	fuse_reply_statfs(req, &sv);
}

/* ---- fallocate and lseek: logical block provisioning (cache/discard.c) ---- */

static void discard_done(void *arg, int err, const void *data, size_t len)
{
	struct cache_write_ctx *dc = arg;
	(void)data;
	(void)len;
	if (dc->cdev)
		bcache_write_end(dc->cdev, dc->w, err);
	fuse_reply_err(dc->req, err ? io_errno(err) : 0);
	free(dc);
}

/*
 * FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE deallocates (UNMAP or WRITE SAME
 * with UNMAP where the LUN promises zeroes after it, else zeroes are
 * written), FALLOC_FL_ZERO_RANGE writes zeroes (WRITE SAME); both leave the
 * range reading as zeroes.  Plain allocation succeeds within the LUN (every
 * block exists as far as the file is concerned) and is EFBIG beyond it, as
 * a write there is; with FALLOC_FL_KEEP_SIZE the part beyond the end is
 * ignored.  Other modes are EOPNOTSUPP.
 */
static void gw_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	const int known = FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE;
	struct gw_lun *l = lun_by_ino(gw_of(req), ino);
	(void)fi;
	if (!l) {
		fuse_reply_err(req, ino == ROOT_INO ? EISDIR : EBADF);
		return;
	}
	if (gw_lun_gone(l)) {
		fuse_reply_err(req, ENODEV);
		return;
	}
	bool punch = mode & FALLOC_FL_PUNCH_HOLE, zero = mode & FALLOC_FL_ZERO_RANGE;
	if ((mode & ~known) || (punch && zero) || (punch && !(mode & FALLOC_FL_KEEP_SIZE))) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	if (gw_lun_ro(l)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (off < 0 || len <= 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	uint64_t start = (uint64_t)off, end = start + (uint64_t)len;
	if (end > blk_dev_size(&l->dev) && !(mode & FALLOC_FL_KEEP_SIZE)) {
		fuse_reply_err(req, EFBIG); /* the file would have to grow */
		return;
	}
	if (!punch && !zero) {
		fuse_reply_err(req, 0); /* the blocks already exist */
		return;
	}
	if (start >= blk_dev_size(&l->dev)) {
		fuse_reply_err(req, 0); /* nothing of the LUN in the range */
		return;
	}
	if (end > blk_dev_size(&l->dev))
		end = blk_dev_size(&l->dev);
	struct discard_caps caps;
	discard_caps_from_info(&caps, &l->info);
	struct cache_write_ctx *dc = malloc(sizeof(*dc));
	if (!dc) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	stamp_write(l); /* the range's bytes change: mtime and ctime move */
	*dc = (struct cache_write_ctx){.req = req, .cdev = l->cdev};
	if (dc->cdev) /* cached blocks of the range become zeroes, as the LUN's will */
		dc->w = bcache_write_begin(dc->cdev, start, end - start, NULL);
	int rc = blk_discard(&l->dev, &caps, start, end - start, punch, discard_done, dc);
	if (rc) {
		if (dc->cdev)
			bcache_write_end(dc->cdev, dc->w, rc);
		free(dc);
		fuse_reply_err(req, -rc);
	}
}

static void seek_done(void *arg, int err, uint64_t result)
{
	fuse_req_t req = arg;
	if (err)
		fuse_reply_err(req, err == -ENXIO ? ENXIO : io_errno(err));
	else
		fuse_reply_lseek(req, (off_t)result);
}

static void seek_after_writeback(void *arg, int err, const void *data, size_t len)
{
	(void)data;
	(void)len;
	blk_seek_start(arg, err);
}

/*
 * SEEK_DATA / SEEK_HOLE from GET LBA STATUS where the LUN is thin
 * provisioned, else everything is data; the end of the LUN is the
 * implicit hole.  The kernel answers SEEK_SET/CUR/END itself.
 */
static void gw_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi)
{
	if (ino == GW_STATS_INO && (whence == SEEK_DATA || whence == SEEK_HOLE)) {
		gw_stats_lseek(req, off, whence, fi);
		return;
	}
	struct gw_lun *l = lun_by_ino(gw_of(req), ino);
	(void)fi;
	if (!l) {
		fuse_reply_err(req, ino == ROOT_INO ? EISDIR : EBADF);
		return;
	}
	if (gw_lun_gone(l)) {
		fuse_reply_err(req, ENODEV);
		return;
	}
	if (whence != SEEK_DATA && whence != SEEK_HOLE) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (off < 0 || (uint64_t)off >= blk_dev_size(&l->dev)) {
		fuse_reply_err(req, ENXIO);
		return;
	}
	struct discard_caps caps;
	discard_caps_from_info(&caps, &l->info);
	if (!l->cdev) {
		int rc = blk_seek(&l->dev, &caps, (uint64_t)off, whence == SEEK_HOLE, seek_done, req);
		if (rc)
			fuse_reply_err(req, -rc);
		return;
	}
	/*
	 * Write-back: data written but not yet written back is data, not a
	 * hole (a copier that skips holes would lose it).  Write the LUN's
	 * dirty blocks back first; then the target's answer covers them.
	 */
	int rc;
	struct seek_op *op = blk_seek_prepare(&l->dev, &caps, (uint64_t)off, whence == SEEK_HOLE, seek_done, req, &rc);
	if (!op) {
		fuse_reply_err(req, -rc);
		return;
	}
	rc = bcache_writeback(l->cdev, seek_after_writeback, op);
	if (rc)
		blk_seek_start(op, rc);
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
	.lseek = gw_lseek,
	.readlink = gw_readlink,
	.access = gw_access,
	.mknod = gw_mknod,
	.mkdir = gw_mkdir,
	.unlink = gw_unlink,
	.rmdir = gw_unlink, /* the same answer */
	.symlink = gw_symlink,
	.rename = gw_rename,
	.link = gw_link,
	.create = gw_create,
};
