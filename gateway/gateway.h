/* SPDX-License-Identifier: MIT */
/*
 * The FUSE gateway: one directory of the LUN files of one iSCSI target,
 * through a multipath set of sessions (one per path), or one session alone.
 * State is set up before the FUSE loop starts and read-only afterwards,
 * except what blk_dev guards itself and the LUN table, which the rescan
 * thread extends and marks (rescan.c; atomics, see docs/design.md).  The
 * fields read across threads are C11 _Atomic; the gateway reads gone, ro
 * and nluns through gw_lun_gone, gw_lun_ro and gw_nluns.
 */
#ifndef ISERFUSE_GATEWAY_H
#define ISERFUSE_GATEWAY_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include "cache/bcache/bcache.h"
#include "cache/blkio/blkio.h"
#include "cache/pool/pool.h"
#include "initiator/lun/lun.h"
#include "initiator/net/url.h"

/* FUSE requests the kernel may have in the background (FUSE_INIT's max_background). */
#define GW_FUSE_MAX_BACKGROUND 128u

#define GW_MAX_LUNS 256

struct mpath;
struct gw_paths;

struct gw_lun {
	char name[16];          /* "lun<N>" */
	fuse_ino_t ino;
	_Atomic bool ro;        /* -o ro or write protected; the rescan thread changes it (MODE SENSE WP) */
	struct iscsi_lun_info info;
	struct blk_dev dev;
	_Atomic bool gone;      /* no longer reported by the target (rescan.c): set release, read acquire */
	struct bcache_dev *cdev; /* NULL: no block cache */
	/*
	 * Attributes kept for the life of the mount (fs/fs_attr.c): chmod, chown
	 * and utimens set them, under fs_attr.c's attr_lock; set when the slot is
	 * first filled (gw_lun_add, luns/lun_table.c), kept when the LUN comes back.
	 */
	mode_t mode;            /* permission bits; the write bits are hidden while ro */
	uid_t uid;
	gid_t gid;
	struct timespec atime, mtime, ctime;
	/*
	 * ns since the epoch (CLOCK_REALTIME_COARSE) of the last write, punch
	 * or zero range since the last setattr, 0 if none: stamped by route.c,
	 * read and folded by fs_attr.c; relaxed
	 */
	_Atomic int64_t write_ns;
	_Atomic bool pages_stale; /* a UNIT ATTENTION said its data may have changed: the rescan thread
				   * invalidates the kernel's pages of it (rescan.c) */
	/*
	 * statfs's free space of a thin-provisioned LUN (LBPME): its
	 * deallocated blocks (GET LBA STATUS), measured by the rescan thread
	 * at dealloc_at_ms (blk_now_ms; 0: not yet) when a statfs asks
	 * (gw_rescan_space).  Relaxed, dealloc_at_ms stored last (release).
	 */
	_Atomic uint64_t dealloc_blocks;
	_Atomic int64_t dealloc_at_ms;
};

struct gw_fuse_uring;
struct gw_io;

struct gw {
	struct iscsi_session *s; /* the first session (owned by mp when there is one); control commands use gw_ctl */
	struct mpath *mp;        /* the multipath set (paths.c), NULL with -o multipath=off: I/O goes through it */
	struct gw_paths *paths;  /* the path thread and the link watcher (paths.c), NULL without mp */
	char portal_host[ISCSI_URL_HOST_MAX]; /* the URL's portal (path 0), for .stats */
	unsigned portal_port;
	struct buf_pool *pool;
	struct gw_lun *luns;
	_Atomic size_t nluns;   /* slots in use: filled, then published (release); read with gw_nluns */
	size_t max_io;          /* bytes per FUSE read/write */
	bool ro;
	bool iser;              /* the session runs over iSER (per-command size cap) */
	uid_t uid;
	gid_t gid;
	mode_t umask;           /* cleared from 0777 (directory) and 0666/0444 (LUN files) */
	struct timespec mtime;
	const char *transport;  /* "tcp", "iser": for .stats */
	struct gw_link *links;  /* by-id/ symlinks (luns/byid_links.c): GW_MAX_LINKS slots allocated at mount */
	_Atomic size_t nlinks;  /* slots in use: filled, then published (release), never freed */
	/* target events (rescan.c): slots luns[0..GW_MAX_LUNS) exist, nluns are in use */
	struct fuse_session *se;      /* for kernel cache invalidation */
	struct blk_retry *retry;      /* delayed SCSI retries, UNIT ATTENTION hook */
	uint32_t retry_budget_ms;     /* how long transient SCSI failures are retried */
	int url_lun;                  /* -1: every LUN of REPORT LUNS; else the URL's one LUN */
	struct gw_rescan *rescan;
	struct bcache *cache;   /* NULL: -o cache_size=0 */
	bool writeback;         /* -o writeback */
	pthread_mutex_t files_lock; /* guards files */
	struct gw_file *files;  /* open LUN files (with the block cache) */
	atomic_uint_fast64_t payload_copied; /* write payload bytes memcpy'd from libfuse's buffer (not a pipe),
					      * read replies copied into a FUSE ring entry's payload */
	struct gw_fuse_uring *uring; /* FUSE over io_uring (fuse_uring.c); NULL with -o io_uring=off */
	struct gw_io *io;            /* the I/O thread (gateway/fuse/fuse_io.h); NULL with -s or io_threads=0 */
	void **cache_slices;    /* pool slices holding the cache blocks */
	unsigned ncache_slices;
};

/* Per open LUN file (fi->fh) while the block cache is on. */
struct gw_file {
	bool direct;                /* opened O_DIRECT: the cache is bypassed */
	struct bcache_stream stream;
	struct gw_file *prev, *next; /* on gw->files until release */
};

/*
 * fi->fh of an open file (struct gw_file, .stats's snapshot): the pointer
 * with this worker's generation in its top byte (lifestate.c; pointers
 * leave it 0).  A file opened before a worker restart (supervisor.h)
 * carries another worker's tag: gw_fh_ptr gives NULL for it, and it is
 * served as a file opened without one (no read-ahead stream).
 */
extern uint8_t gw_fh_gen;
static inline uint64_t gw_fh_make(const void *p)
{
	return p ? (uint64_t)(uintptr_t)p | (uint64_t)gw_fh_gen << 56 : 0;
}
static inline void *gw_fh_ptr(uint64_t fh)
{
	return fh && (uint8_t)(fh >> 56) == gw_fh_gen ? (void *)(uintptr_t)(fh & ((1ull << 56) - 1)) : NULL;
}

/*
 * Open LUN files with a struct gw_file (fs.c): kept on a list so that those
 * a stop leaves open (no RELEASE comes after the unmount) are freed.
 */
struct gw_file *gw_file_new(struct gw *g, bool direct);
void gw_file_free(struct gw *g, struct gw_file *f);
void gw_files_free_all(struct gw *g);

/*
 * Make everything written to l durable: write back its dirty cache
 * blocks, then SYNCHRONIZE CACHE (SBC-3 §5.22).  cb is called once, with
 * 0 or a negative errno.  Returns 0 or a negative errno (-ENOMEM), then cb
 * is not called (route.c).
 */
int gw_lun_sync(struct gw_lun *l, blk_done_fn cb, void *arg);

/*
 * The number of LUN slots in use (slots are never freed; a removed LUN's
 * slot has gone set).  Acquire: the slots below it are filled.  Any thread.
 */
static inline size_t gw_nluns(const struct gw *g) { return atomic_load_explicit(&g->nluns, memory_order_acquire); }

/*
 * Whether the target no longer reports l (rescan.c): its name is gone, its
 * open files get ENODEV.  Acquire, pairing with the rescan thread's
 * release store.  Any thread.
 */
static inline bool gw_lun_gone(const struct gw_lun *l) { return atomic_load_explicit(&l->gone, memory_order_acquire); }

/*
 * Whether l refuses writes (-o ro, or the WP bit of MODE SENSE, SBC-3
 * §6.5.1; the rescan thread turns it on and off while requests run).
 * Relaxed: it guards nothing else.  Any thread.
 */
static inline bool gw_lun_ro(const struct gw_lun *l) { return atomic_load_explicit(&l->ro, memory_order_relaxed); }

/*
 * Make info's LUN a file (gateway/luns/lun_table.c): a new slot (ino 2 +
 * slot, the mounting user's attributes, mode 0666 less -o umask, times
 * now), or the gone slot of the same LUN number and block size again
 * (its attributes kept).  Called by open_luns before the mount and by the
 * rescan thread.  Returns the slot or NULL (table full, blk_dev_init
 * failure).
 */
struct gw_lun *gw_lun_add(struct gw *g, const struct iscsi_lun_info *info);

/*
 * A UNIT ATTENTION consumed by one of the gateway's own synchronous
 * commands (rescan, probe, the identity check after a reconnect), sent to
 * the LUN lun_field: handed to block I/O's UNIT ATTENTION path
 * (blk_retry_note_ua) as if a block command had met it, so the block cache
 * drops what may have changed.  The on_ua argument of lun.h's functions;
 * arg is a struct gw_own_ua.
 */
struct gw_own_ua {
	struct gw *g;
	uint64_t lun_field;
};
static inline void gw_own_ua(void *arg, const struct scsi_sense *sense)
{
	const struct gw_own_ua *o = arg;
	blk_retry_note_ua(o->g->retry, o->lun_field, sense);
}


/*
 * Inodes: 1 the root, 2.. the LUN files, then the files that are not LUNs
 * (fixed numbers above every LUN's): .stats, by-id/ and its symlinks.
 */
#define GW_STATS_INO ((fuse_ino_t)(2 + GW_MAX_LUNS))
#define GW_BYID_INO ((fuse_ino_t)(3 + GW_MAX_LUNS))
#define GW_LINK_INO0 ((fuse_ino_t)(4 + GW_MAX_LUNS))
#define GW_STATS_NAME ".stats"
#define GW_BYID_NAME "by-id"

/* by-id/NAME -> ../lun<N> */
struct gw_link {
	char name[160];
	char target[24];
	fuse_ino_t ino;
	const struct gw_lun *lun; /* the slot it names; hidden while that LUN is gone */
};

/* Links per LUN: scsi-<id> and one per designator of iscsi_lun_info.lu_desig. */
#define GW_MAX_LINKS (GW_MAX_LUNS * 5)

/* The link slots in use; acquire: the entries below it are filled.  Any thread. */
static inline size_t gw_nlinks(const struct gw *g) { return atomic_load_explicit(&g->nlinks, memory_order_acquire); }

/*
 * by-id/ (the table: luns/byid_links.c; its files: fs/byid.c): one
 * symlink per VPD 0x83 logical-unit designator (SPC-4 §7.8.6) of each
 * LUN, named like /dev/disk/by-id: wwn-0x<hex> (NAA),
 * eui-0x<hex> (EUI-64), t10-<vendor_id> (T10 vendor ID, spaces as '_'),
 * and scsi-<id> for the preferred one (udev's ID_SERIAL form).
 * gw_byid_build allocates the link table and adds the links of the LUNs
 * in g->luns (before the mount); returns 0 or -ENOMEM.
 */
int gw_byid_build(struct gw *g);
/*
 * Add the links of l, a LUN that appeared (or came back) after the mount:
 * called by the rescan thread, the only writer of the table once mounted;
 * readers see an entry once nlinks covers it.  A name some LUN already
 * has stays that LUN's.  No-op before gw_byid_build.
 */
void gw_byid_add_lun(struct gw *g, const struct gw_lun *l);
void gw_byid_free(struct gw *g);
/* The inode of `name` in directory `parent` among by-id/ and .stats, or 0. */
fuse_ino_t gw_extra_lookup(struct gw *g, fuse_ino_t parent, const char *name);
/* Attributes of .stats (size 0), by-id/ or a symlink; false if ino is none of them.  Calls nothing. */
bool gw_extra_attr(struct gw *g, fuse_ino_t ino, struct stat *st);
/* readdir of by-id/ and readlink of its symlinks (reply sent). */
void gw_byid_readdir(fuse_req_t req, struct gw *g, size_t size, off_t off);
void gw_readlink(fuse_req_t req, fuse_ino_t ino);

/*
 * .stats (stats.c): "key value" lines, generated on open into a buffer
 * owned by the open file (a consistent snapshot); read-only, direct_io.
 * Served as /proc files are: its attributes (extras.c) give size 0 and
 * render nothing; a read returns the open file's text until EOF.
 * gw_stats_render fills *out (malloc'd, caller frees) and *len (bytes);
 * returns 0 or -ENOMEM.
 */
int gw_stats_render(struct gw *g, char **out, size_t *len);
void gw_stats_open(fuse_req_t req, struct fuse_file_info *fi);
void gw_stats_read(fuse_req_t req, size_t size, off_t off, struct fuse_file_info *fi);
void gw_stats_release(fuse_req_t req, struct fuse_file_info *fi);
/* The snapshots of .stats opens no RELEASE came for (a stop, a worker ending with one open): freed. */
void gw_stats_free_all(void);
/* SEEK_DATA / SEEK_HOLE in the open file's snapshot (reply sent). */
void gw_stats_lseek(fuse_req_t req, off_t off, int whence, struct fuse_file_info *fi);

/* The FUSE low-level operations (fs.c); userdata is a struct gw. */
extern const struct fuse_lowlevel_ops gw_ops;

/*
 * The fast handler of the I/O thread (gateway/fuse/fuse_io.h's
 * gw_io_fast_fn; arg: struct gw): a READ or WRITE of a LUN file that
 * block I/O can take without waiting (O_DIRECT or no block cache, a pool
 * slice free, a write block aligned in the slice it was read into and
 * overlapping no write in flight) is submitted with a raw answer; false
 * leaves the request to libfuse's handlers (gateway/fs/fs_fast.c).
 */
bool gw_fast_io(void *arg, const void *req, size_t len);

/*
 * The initiator name to use when none is given: read from the state file
 * ($STATE_DIRECTORY, /var/lib/iserfuse when root, else
 * $XDG_STATE_HOME/iserfuse or ~/.local/state/iserfuse), created once with a
 * random suffix.  Returns 0 or a negative errno (out gets a usable name
 * anyway).
 */
int gw_default_initiator_name(char *out, size_t cap);

/*
 * gw_default_initiator_name, with one warning when the name cannot be kept
 * (a new name at every start breaks a target's ACL): the reason and how
 * to give a name that stays.
 */
void gw_initiator_name_or_warn(char *out, size_t cap);

/*
 * iserfuse --list URL (list.c): SendTargets discovery on the URL's portal
 * (RFC 7143 Appendix C), then per target a session through the URL's
 * portal, REPORT LUNS and a probe of each LUN, printed to stdout, and the
 * other portals the target reports (numeric addresses only,
 * iscsi_disc_portals) each on a line marked as not used; with
 * discover_portals (-o discover_portals=on) a session through each of those
 * instead, as a mount would use them.  initiator_name may be NULL
 * (the kept default); login_timeout_s 0 means ISCSI_LOGIN_TIMEOUT_DEFAULT_S.  Returns the exit
 * status: 0 once discovery worked (a target whose login fails gets an
 * "Error:" line), 1 for a bad URL, an unreachable portal or a failed
 * discovery login (one line on stderr).  CHAP credentials (RFC 7143
 * §12.1.3) come from the URL, secret_file (may be NULL) or the
 * environment, as for a mount (gw_creds_load), and serve the discovery
 * session and every target's session.  url_where and secret_where start
 * the error lines about the URL and the secret file ("PATH:LINE: " of the
 * configuration file where they came from, else "").
 */
int gw_list(const char *url, const char *url_where, const char *initiator_name, unsigned login_timeout_s,
	    const char *secret_file, const char *secret_where, bool discover_portals);

/* iserfuse --version (version.c): ours, libfuse's, libibverbs' at build and run time, to f. */
void gw_print_version(FILE *f);

#endif
