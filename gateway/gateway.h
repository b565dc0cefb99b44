/* SPDX-License-Identifier: MIT */
/*
 * The FUSE gateway: one directory of LUN files backed by one iSCSI session.
 * State is set up before the FUSE loop starts and read-only afterwards,
 * except what blk_dev guards itself and the LUN table, which the rescan
 * thread extends and marks (rescan.c; atomics, see docs/design.md).
 */
#ifndef ISERFUSE_GATEWAY_H
#define ISERFUSE_GATEWAY_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <time.h>

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
	bool gone;              /* no longer reported by the target (rescan.c); __atomic access */
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
	/* target events (rescan.c): slots luns[0..GW_MAX_LUNS) exist, nluns are in use */
	struct fuse_session *se;      /* for kernel cache invalidation */
	struct blk_retry *retry;      /* delayed SCSI retries, UNIT ATTENTION hook */
	uint32_t retry_budget_ms;     /* how long transient SCSI failures are retried */
	int url_lun;                  /* -1: every LUN of REPORT LUNS; else the URL's one LUN */
	struct gw_rescan *rescan;
};

/* ---- target events: rescans, capacity and LUN changes (rescan.c) ---- */

struct gw_rescan_stats {
	uint64_t rescans;           /* rounds run (periodic or prompted) */
	uint64_t prompted;          /* of those, prompted by a UNIT ATTENTION */
	uint64_t capacity_changes;  /* a LUN's size changed */
	uint64_t luns_added, luns_removed;
};

/* The number of LUN slots in use (slots are never freed; a removed LUN's slot has gone set). */
size_t gw_nluns(const struct gw *g);

/*
 * Make info's LUN a file: a new slot (ino 2 + slot), or the gone slot of
 * the same LUN number and block size again.  Called by open_luns before the
 * mount and by the rescan thread.  Returns the slot or NULL (table full,
 * blk_dev_init failure).
 */
struct gw_lun *gw_lun_add(struct gw *g, const struct iscsi_lun_info *info);

/*
 * Start the rescan thread: every interval_s seconds (0 = only when
 * prompted), and whenever a UNIT ATTENTION says so (CAPACITY DATA HAS
 * CHANGED, REPORTED LUNS DATA HAS CHANGED, power on / reset, ...), READ
 * CAPACITY of each LUN and, without a LUN in the URL, REPORT LUNS; sizes
 * follow, LUN files appear and disappear, the kernel's caches are told
 * (fuse_lowlevel_notify_inval_inode/_entry).  Also installs the UNIT
 * ATTENTION hook on g->retry.  Returns 0 or a negative errno.
 */
int gw_rescan_start(struct gw *g, unsigned interval_s);
/* Stop and join the rescan thread (waits for a round in progress).  No-op if not started. */
void gw_rescan_stop(struct gw *g);
/* Counters so far (zeros if not started). */
void gw_rescan_get_stats(struct gw *g, struct gw_rescan_stats *out);

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
