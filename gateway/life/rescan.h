/* SPDX-License-Identifier: MIT */
/*
 * Target events: rescans, capacity and LUN changes (rescan.c).  What the
 * rest of the gateway asks of the rescan thread: start and stop it
 * (main.c, stop.c), a fresh free-space figure (statfs, fs.c), its
 * counters (.stats, stats.c).  The thread itself fills the LUN table
 * through gateway/luns/ and calls nothing in gateway/fs/.
 */
#ifndef ISERFUSE_RESCAN_H
#define ISERFUSE_RESCAN_H

#include <stdbool.h>
#include <stdint.h>

struct gw;

struct gw_rescan_stats {
	uint64_t rescans;           /* rounds run (periodic or prompted) */
	uint64_t prompted;          /* of those, prompted by a UNIT ATTENTION */
	uint64_t capacity_changes;  /* a LUN's size changed */
	uint64_t luns_added, luns_removed;
};

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
/*
 * statfs wants the deallocated blocks of the thin-provisioned LUNs
 * measured again (gw_lun.dealloc_blocks): the rescan thread does it for
 * each whose figure is older than GW_SPACE_REFRESH_MS, at most
 * GW_SPACE_MAX_CMDS GET LBA STATUS commands per LUN.  Never waits.
 * Returns false when there is no rescan thread (nothing will be measured).
 */
#define GW_SPACE_REFRESH_MS 3000
#define GW_SPACE_MAX_CMDS 64
bool gw_rescan_space(struct gw *g);
/* Stop and join the rescan thread (waits for a round in progress).  No-op if not started. */
void gw_rescan_stop(struct gw *g);
/* Counters so far (zeros if not started). */
void gw_rescan_get_stats(struct gw *g, struct gw_rescan_stats *out);

#endif
