/* SPDX-License-Identifier: MIT */
/*
 * FUSE low-level operations: the table (gw_ops), the directory (lookup,
 * readdir, the names that cannot change), open and release of LUN files
 * and their struct gw_file list (files_lock), statfs.  Attributes are in
 * fs_attr.c; read, write, flush, fsync, fallocate and lseek in fs_io.c,
 * which hands them to route.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs_priv.h"
#include "gateway/life/rescan.h"

static void gw_init(void *userdata, struct fuse_conn_info *conn)
{
	struct gw *g = userdata;
	route_init(&route_blk_backend, &gw_io_sink); /* before the first request */
	conn->max_write = (unsigned)g->max_io;
	conn->max_read = (unsigned)g->max_io; /* equals the max_read mount option */
	conn->max_background = GW_FUSE_MAX_BACKGROUND;
	conn->congestion_threshold = GW_FUSE_MAX_BACKGROUND * 3 / 4;
	/*
	 * open(2) with O_TRUNC reaches us as a SETATTR of the size (after the
	 * OPEN, without O_TRUNC in its flags), which zeroes the LUN
	 * (fs_attr.c), instead of an O_TRUNC in the OPEN's flags
	 * (libfuse would negotiate that by default).
	 */
	conn->want &= ~(unsigned)FUSE_CAP_ATOMIC_O_TRUNC;
	/*
	 * The FUSE readers read each request straight into a pool slice
	 * (fuse_rx.h) over either transport: an aligned write's data is sent
	 * from there, no copy.  Splice only matters for what reads into
	 * libfuse's buffer (a reader that found no slice free or the readers'
	 * cap reached, -s), and only over iSER: there a write's payload waits in a
	 * pipe and write_buf reads it into the slice the target RDMA-reads,
	 * at the price of two or three system calls per request.  Over TCP
	 * one read into libfuse's buffer plus a memcpy into the slice measured
	 * faster (the memcpy is counted in payload_bytes_copied).
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
			gw_fill_attr(g, e.ino, &e.attr);
			fuse_reply_entry(req, &e);
			return;
		}
	}
	fuse_reply_err(req, ENOENT);
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

/* The root's listing: the LUNs (nluns of them when it began), then .stats and by-id/. */
struct root_list {
	const struct gw *g;
	size_t nluns;
};

static bool root_entry(const void *ctx, size_t j, const char **name, struct stat *st)
{
	const struct root_list *r = ctx;
	if (j < r->nluns) {
		const struct gw_lun *l = &r->g->luns[j];
		if (gw_lun_gone(l))
			return false;
		*name = l->name;
		st->st_ino = l->ino;
		st->st_mode = S_IFREG;
	} else if (j == r->nluns) {
		*name = GW_STATS_NAME;
		st->st_ino = GW_STATS_INO;
		st->st_mode = S_IFREG;
	} else {
		*name = GW_BYID_NAME;
		st->st_ino = GW_BYID_INO;
		st->st_mode = S_IFDIR;
	}
	return true;
}

static void gw_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct gw *g = gw_of(req);
	(void)fi;
	if (ino == GW_BYID_INO) {
		gw_byid_readdir(req, g, size, off);
		return;
	}
	if (ino != ROOT_INO) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	struct root_list r = {g, gw_nluns(g)};
	gw_reply_dir(req, ROOT_INO, ROOT_INO, size, off, r.nluns + 2, root_entry, &r); /* the LUNs, .stats, by-id */
}

static void gw_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct gw *g = gw_of(req);
	struct gw_lun *l = gw_lun_by_ino(g, ino);
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
	gw_fill_attr(g, ino, &st);
	int want = (fi->flags & O_ACCMODE) == O_RDONLY ? R_OK : (fi->flags & O_ACCMODE) == O_WRONLY ? W_OK : R_OK | W_OK;
	if (!gw_caller_may(req, &st, want)) { /* the kept mode, as chmod left it */
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
		fi->fh = gw_fh_make(f);
	}
	if (fuse_reply_open(req, fi) == -ENOENT && g->cache)
		gw_file_free(g, gw_fh_ptr(fi->fh)); /* interrupted: no release will come */
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
	gw_stats_free_all(); /* .stats opens too */
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
	struct gw_lun *l = gw_lun_by_ino(g, ino);
	gw_file_free(g, gw_fh_ptr(fi->fh)); /* NULL: opened by an earlier worker */
	/* Write-back: the last close writes the dirty blocks back. */
	if (l && g->writeback && (fi->flags & O_ACCMODE) != O_RDONLY && route_cache_flush(l, release_done, req))
		return;
	fuse_reply_err(req, 0);
}

/* The first statfs waits this long at most for the thin LUNs' first figures (a dead target: not longer). */
#define SPACE_FIRST_WAIT_MS 1000

/*
 * The LUNs' capacity and free space in 4 KiB units: free is what a thin
 * LUN (LBPME) last reported deallocated (gw_lun.dealloc_blocks), all of a
 * fully provisioned LUN (nothing to tell: 0 used), and all of a thin LUN
 * not measured yet.  Sets *stale when a thin LUN's figure is missing or
 * older than GW_SPACE_REFRESH_MS, *unmeasured when one has none yet.
 */
static void space(struct gw *g, struct statvfs *sv, bool *stale, bool *unmeasured)
{
	int64_t now = (int64_t)blk_now_ms();
	*stale = *unmeasured = false;
	sv->f_blocks = sv->f_bfree = 0;
	for (size_t i = 0, n = gw_nluns(g); i < n; i++) {
		struct gw_lun *l = &g->luns[i];
		if (gw_lun_gone(l))
			continue;
		uint64_t size = blk_dev_size(&l->dev), free_bytes = size;
		struct discard_caps c;
		discard_caps_from_info(&c, &l->info);
		if (c.lba_status) {
			int64_t at = atomic_load_explicit(&l->dealloc_at_ms, memory_order_acquire);
			*stale |= !at || now - at >= GW_SPACE_REFRESH_MS;
			*unmeasured |= !at;
			if (at) {
				uint64_t d = atomic_load_explicit(&l->dealloc_blocks, memory_order_relaxed);
				free_bytes = d < size / l->dev.bs ? d * l->dev.bs : size;
			}
		}
		sv->f_blocks += size / 4096;
		sv->f_bfree += free_bytes / 4096;
	}
	sv->f_bavail = sv->f_bfree;
}

static void gw_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct gw *g = gw_of(req);
	struct statvfs sv = {0};
	bool stale, unmeasured;
	(void)ino;
	sv.f_bsize = sv.f_frsize = 4096;
	space(g, &sv, &stale, &unmeasured);
	/* A stale figure is answered now and measured again for the next statfs; a missing one is waited for a little. */
	if (stale && gw_rescan_space(g) && unmeasured) {
		for (int waited = 0; unmeasured && waited < SPACE_FIRST_WAIT_MS; waited += 10) {
			usleep(10000);
			space(g, &sv, &stale, &unmeasured);
		}
	}
	sv.f_files = gw_nluns(g) + 1;
	sv.f_namemax = 255;
	fuse_reply_statfs(req, &sv);
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
