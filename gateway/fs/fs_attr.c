/* SPDX-License-Identifier: MIT */
/*
 * FUSE getattr, setattr and access(2): a LUN file's mode, owner and times
 * are kept in its slot for the life of the mount, as a device node's are
 * until the device goes; writes stamp the LUN's write_ns (route.c) and
 * getattr shows it.  Permissions are checked here, as the kernel would
 * (no default_permissions).  attr_lock guards the kept attributes.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fs_priv.h"

/*
 * A LUN file's mode, owner and times are kept in its slot for the life of
 * the mount, as a device node's are until the device goes; this lock
 * guards them (writes only stamp write_ns, without it: route.c).
 */
static pthread_mutex_t attr_lock = PTHREAD_MUTEX_INITIALIZER;

static struct timespec ns_ts(int64_t ns) { return (struct timespec){.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000}; }

/* Under attr_lock: a write since the last setattr becomes the kept mtime and ctime. */
static void fold_write(struct gw_lun *l)
{
	int64_t w = atomic_exchange_explicit(&l->write_ns, 0, memory_order_relaxed);
	if (w)
		l->mtime = l->ctime = ns_ts(w);
}

void gw_fill_attr(struct gw *g, fuse_ino_t ino, struct stat *st)
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
	struct gw_lun *l = gw_lun_by_ino(g, ino);
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
bool gw_caller_may(fuse_req_t req, const struct stat *st, int want)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	if (c->uid == 0)
		return !(want & X_OK) || S_ISDIR(st->st_mode) || (st->st_mode & 0111);
	unsigned bits = c->uid == st->st_uid		     ? st->st_mode >> 6
			: caller_in_group(req, st->st_gid) ? st->st_mode >> 3
							   : st->st_mode;
	return (bits & (unsigned)want & 7) == ((unsigned)want & 7);
}

void gw_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct gw *g = gw_of(req);
	struct stat st;
	(void)fi;
	if (gw_extra_attr(g, ino, &st)) {
		fuse_reply_attr(req, &st, ATTR_TIMEOUT);
		return;
	}
	if (ino != ROOT_INO && !gw_lun_by_ino(g, ino)) { /* a gone LUN keeps its attributes for open files */
		fuse_reply_err(req, ENOENT);
		return;
	}
	gw_fill_attr(g, ino, &st);
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
		if (!gw_caller_may(req, &st, W_OK))
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

/* A truncation in flight: the request and what its reply needs. */
struct trunc_req {
	fuse_req_t req;
	fuse_ino_t ino;
	off_t size;
};

/*
 * route_truncate's answer.  The reply gives the size asked for, valid for
 * no time: a size other than the kernel's makes it drop the file's pages
 * (else it would keep serving the bytes just zeroed from its page cache),
 * and its next getattr, at once, gets the capacity back.
 */
void gw_truncate_reply(void *arg, int err)
{
	struct trunc_req *t = arg;
	struct stat st;
	if (err) {
		fuse_reply_err(t->req, err);
	} else {
		gw_fill_attr(gw_of(t->req), t->ino, &st);
		st.st_size = t->size;
		fuse_reply_attr(t->req, &st, 0.0);
	}
	free(t);
}

/*
 * A LUN keeps its size: truncating to a size below the capacity zeroes
 * everything from there to the end (route_truncate) and answers once that
 * is done, to the capacity changes nothing, beyond it is EFBIG.  A LUN
 * file's mode, owner and times are kept for the life of the mount
 * (getattr returns them); those of the directory, by-id/ and .stats cannot
 * be changed (EPERM).  A read-only mount changes nothing (EROFS).
 */
void gw_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi)
{
	struct gw *g = gw_of(req);
	struct gw_lun *l = gw_lun_by_ino(g, ino);
	struct stat st;
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
		/*
		 * truncate(2) by name needs write permission (the kernel checks
		 * it too, default_permissions); ftruncate and O_TRUNC come with
		 * a descriptor opened for writing.
		 */
		gw_fill_attr(g, ino, &st);
		if (!fi && !gw_caller_may(req, &st, W_OK)) {
			fuse_reply_err(req, EACCES);
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
	if ((to_set & FUSE_SET_ATTR_SIZE) && (uint64_t)attr->st_size < blk_dev_size(&l->dev)) {
		struct trunc_req *t = malloc(sizeof(*t));
		int err = t ? 0 : ENOMEM;
		if (t) {
			*t = (struct trunc_req){.req = req, .ino = ino, .size = attr->st_size};
			err = route_truncate(l, attr->st_size, t);
		}
		if (err) {
			free(t);
			fuse_reply_err(req, err);
		}
		return;
	}
	gw_fill_attr(g, ino, &st);
	fuse_reply_attr(req, &st, ATTR_TIMEOUT);
}

/* access(2): the kept mode and owner, as open checks them; writing a read-only LUN is EROFS. */
void gw_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	struct gw *g = gw_of(req);
	struct gw_lun *l = gw_lun_by_ino(g, ino);
	struct stat st;
	if (!gw_extra_attr(g, ino, &st)) {
		if (ino != ROOT_INO && !l) {
			fuse_reply_err(req, ENOENT);
			return;
		}
		gw_fill_attr(g, ino, &st);
	}
	if ((mask & W_OK) && (g->ro || (l && gw_lun_ro(l)))) {
		fuse_reply_err(req, EROFS);
		return;
	}
	fuse_reply_err(req, gw_caller_may(req, &st, mask & (R_OK | W_OK | X_OK)) ? 0 : EACCES);
}
