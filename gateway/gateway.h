/* SPDX-License-Identifier: MIT */
/*
 * The FUSE gateway: one directory of LUN files backed by one iSCSI session.
 * State is set up before the FUSE loop starts and read-only afterwards,
 * except what blk_dev guards itself.
 */
#ifndef ISERFUSE_GATEWAY_H
#define ISERFUSE_GATEWAY_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <time.h>

#include "../cache/bcache.h"
#include "../cache/blkio.h"
#include "../cache/pool.h"
#include "../initiator/lun.h"

#define GW_MAX_LUNS 256

struct gw_lun {
	char name[16];          /* "lun<N>" */
	fuse_ino_t ino;
	bool ro;                /* -o ro or write protected */
	struct iscsi_lun_info info;
	struct blk_dev dev;
	struct bcache_dev *cdev; /* NULL: no block cache */
};

struct gw {
	struct iscsi_session *s;
	struct buf_pool *pool;
	struct gw_lun *luns;
	size_t nluns;
	size_t max_io;          /* bytes per FUSE read/write */
	bool ro;
	uid_t uid;
	gid_t gid;
	mode_t umask;           /* cleared from 0777 (directory) and 0666/0444 (LUN files) */
	struct timespec mtime;
	struct bcache *cache;   /* NULL: -o cache_size=0 */
	bool writeback;         /* -o writeback */
	void **cache_slices;    /* pool slices holding the cache blocks */
	unsigned ncache_slices;
};

/* Per open LUN file (fi->fh) while the block cache is on. */
struct gw_file {
	bool direct;                /* opened O_DIRECT: the cache is bypassed */
	struct bcache_stream stream;
};

/*
 * Make everything written to l durable: write back its dirty cache
 * blocks, then SYNCHRONIZE CACHE (SBC-3 §5.22).  cb is called once.
 * Returns 0 or a negative errno (fs.c).
 */
int gw_lun_sync(struct gw_lun *l, blk_done_fn cb, void *arg);

/* The FUSE low-level operations (fs.c); userdata is a struct gw. */
extern const struct fuse_lowlevel_ops gw_ops;

/*
 * The initiator name to use when none is given: read from the state file
 * ($STATE_DIRECTORY, /var/lib/iserfuse when root, else
 * $XDG_STATE_HOME/iserfuse or ~/.local/state/iserfuse), created once with a
 * random suffix.  Returns 0 or a negative errno (out gets a usable name
 * anyway).
 */
int gw_default_initiator_name(char *out, size_t cap);

/*
 * iserfuse --list URL (list.c): SendTargets discovery on the URL's portal
 * (RFC 7143 Appendix C), then a session per target and portal, REPORT LUNS
 * and a probe of each LUN, printed to stdout.  initiator_name may be NULL
 * (the kept default); login_timeout_s 0 means 15 s.  Returns the exit
 * status: 0 once discovery worked (a target whose login fails gets an
 * "Error:" line), 1 for a bad URL, an unreachable portal or a failed
 * discovery login (one line on stderr).
 */
int gw_list(const char *url, const char *initiator_name, unsigned login_timeout_s);

#endif
