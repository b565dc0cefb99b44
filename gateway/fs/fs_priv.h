/* SPDX-License-Identifier: MIT */
/*
 * What the FUSE handlers share (fs.c: the operations table, names, open
 * and release; fs_attr.c: attributes and permissions; fs_io.c: I/O through
 * route.c; extras.c: the files that are not LUNs).  Internal to
 * gateway/fs/: the helpers below are inline so that no handler file calls
 * back into the operations table's file.
 */
#ifndef ISERFUSE_FS_PRIV_H
#define ISERFUSE_FS_PRIV_H

#include <fcntl.h>
#include <stdbool.h>
#include <sys/stat.h>

#include "gateway/gateway.h"
#include "route.h"

#define ROOT_INO FUSE_ROOT_ID
#define ATTR_TIMEOUT 1.0 /* seconds the kernel keeps attributes and entries */

/* The gateway a request belongs to (the session's userdata). */
static inline struct gw *gw_of(fuse_req_t req) { return fuse_req_userdata(req); }

/* The LUN slot of inode ino (a gone LUN's too: its open files still reach it), or NULL. */
static inline struct gw_lun *gw_lun_by_ino(struct gw *g, fuse_ino_t ino)
{
	if (ino < 2 || ino - 2 >= gw_nluns(g))
		return NULL;
	return &g->luns[ino - 2];
}

/*
 * For a write: the open file's struct gw_file from its handle fh (NULL
 * without the block cache).  One opened by an earlier worker
 * (supervisor.h) has none here; if it was opened O_DIRECT (flags: the
 * file's, which the kernel passes with each request) its writes still
 * bypass the cache, through direct_tmp (used only during the submission).
 */
static inline struct gw_file *gw_file_of(uint64_t fh, int flags, struct gw_file *direct_tmp)
{
	struct gw_file *f = gw_fh_ptr(fh);
	if (!f && fh && (flags & O_DIRECT)) {
		*direct_tmp = (struct gw_file){.direct = true};
		f = direct_tmp;
	}
	return f;
}

/*
 * The directory entry j (0-based, after "." and "..") of a listing: sets
 * *name and st->st_ino, st->st_mode (the type bits); false when there is
 * none there now (a gone LUN's: skipped, its index kept).
 */
typedef bool (*gw_dirent_fn)(const void *ctx, size_t j, const char **name, struct stat *st);

/*
 * readdir's reply for a directory of inode self in parent: ".", "..",
 * then entry(ctx, j, ...) for j in [0, n), from listing index off (the
 * offset of the entry at index i is i + 1) as far as size bytes (at most
 * 16 KiB) hold.  Reply sent.
 */
static inline void gw_reply_dir(fuse_req_t req, fuse_ino_t self, fuse_ino_t parent, size_t size, off_t off, size_t n,
				gw_dirent_fn entry, const void *ctx)
{
	char buf[16384];
	size_t used = 0;
	if (size > sizeof(buf))
		size = sizeof(buf);
	for (off_t i = off < 0 ? 0 : off; i < (off_t)n + 2; i++) {
		struct stat st = {0};
		const char *name;
		if (i < 2) {
			name = i == 0 ? "." : "..";
			st.st_ino = i == 0 ? self : parent;
			st.st_mode = S_IFDIR;
		} else if (!entry(ctx, (size_t)i - 2, &name, &st)) {
			continue;
		}
		size_t len = fuse_add_direntry(req, buf + used, size - used, name, &st, i + 1);
		if (len > size - used)
			break;
		used += len;
	}
	fuse_reply_buf(req, buf, used);
}

/* ---- fs_attr.c ---- */

/*
 * Attributes of the root (ROOT_INO) or of a LUN file (ino must be one):
 * the kept mode (write bits hidden while read-only), owner and times, the
 * last write's time, the size in bytes, st_blocks in 512-byte units.
 */
void gw_fill_attr(struct gw *g, fuse_ino_t ino, struct stat *st);
/*
 * Whether the caller of req may `want` (R_OK, W_OK, X_OK bits) on a file
 * of attributes st, as the kernel checks it (root passes, except X_OK on a
 * file without any execute bit).
 */
bool gw_caller_may(fuse_req_t req, const struct stat *st, int want);
/* getattr, setattr and access(2) of every inode (reply sent). */
void gw_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void gw_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi);
void gw_access(fuse_req_t req, fuse_ino_t ino, int mask);
/* route.c's answer to a truncation setattr started (arg its context, freed here; reply sent). */
void gw_truncate_reply(void *arg, int err);

/* ---- fs_io.c: the handlers of route.c's operations (reply sent, now or on completion) ---- */

/* route.c's answers as FUSE replies; the arg of each request is its fuse_req_t. */
extern const struct route_sink gw_io_sink;
void gw_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void gw_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *bufv, off_t off, struct fuse_file_info *fi);
void gw_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void gw_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void gw_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len, struct fuse_file_info *fi);
void gw_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi);

#endif
