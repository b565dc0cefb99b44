/* SPDX-License-Identifier: MIT */
/*
 * Stopping the daemon: the stop signals (SIGTERM, SIGINT, SIGHUP), then,
 * after the FUSE loop, the drain, the unmount, SYNCHRONIZE CACHE of every
 * LUN written, the counters, and closing the session and what hangs on it.
 */
#ifndef ISERFUSE_STOP_H
#define ISERFUSE_STOP_H

#include "gateway.h"

struct iser_ctx;

/*
 * Install the stop signals' handler.  The first signal ends se's FUSE
 * loop (as libfuse's own handler would); the daemon then waits for the
 * requests being served, drains and flushes, within the stop grace (5 s)
 * and about a second more: a second signal, at any point after the first (or after
 * gw_stop began), ends it at once with exit status 2 (writes the target
 * acknowledged may still be only in its cache).  Only the main thread
 * takes these signals: the threads started block them (initiator/util/thread.h).
 * SIGUSR1 ends the loop too, for a handover (gw_stop_handover).
 */
void gw_stop_signals_install(struct fuse_session *se);

/* The SYNCHRONIZE CACHE completions of gw_stop: they may come after it returns. */
struct gw_sync_batch;

/*
 * After the FUSE loop: tell systemd STOPPING=1, start the stop grace
 * (STOP_GRACE_MS, 5 s: a session being recovered gets that long, and what
 * the target has not answered when it ends fails, its connection dropped;
 * iscsi_session_stopping), stop the rescans, drain the retry queue and
 * the commands in flight while still mounted (the requests in flight get
 * their replies instead of being aborted by the unmount), unmount se,
 * write back and SYNCHRONIZE CACHE (SBC-4 §5.26) every LUN written, all
 * waited on until the grace's end + STOP_SLACK_MS (1 s) at most, and log
 * the retry and session counters.  *batch gets what the
 * SYNCHRONIZE CACHE completions still use (NULL if none): pass it to
 * gw_stop_close.  Returns the number of LUNs whose SYNCHRONIZE CACHE
 * failed or went unanswered.  mnt: the mount point to unmount (NULL: a
 * handover, no unmount); taken_over: se did not mount it (a restarted
 * worker, supervisor.h): detached with umount2 MNT_DETACH (fusermount3
 * -u -z when not root) instead of fuse_session_unmount.
 */
int gw_stop(struct gw *g, struct fuse_session *se, const char *mnt, bool taken_over, struct gw_sync_batch **batch);

/*
 * Whether the loop ended for a handover: SIGUSR1 (the supervisor's, for
 * `iserfuse --restart`) and no stop signal.  gw_stop then gets mnt NULL:
 * everything as for a stop but the unmount and STOPPING=1; the next
 * worker reads the requests left in the queue.
 */
bool gw_stop_handover(void);

/*
 * The stop's grace starts (STOP_GRACE_MS, as gw_stop's, which keeps the
 * earlier deadline): called as soon as the FUSE loop ends for a stop,
 * while readers may still be in handlers that wait on the target.
 */
void gw_stop_begin(struct gw *g);

/* The handover asked for is refused (the worker serves on): gw_stop_handover is false again. */
void gw_stop_handover_refused(void);

/*
 * Close what the start-up opened, in order: detach the retry queue from
 * every LUN and destroy it (firing what is parked while the session still
 * exists), Logout and close the session (up to 1 s for what is still
 * out, then 1 s for the Logout Response; it aborts what is left), tear
 * the block cache down, destroy the iSER context (may be NULL: after the
 * session, whose connections used its registration),
 * free batch (may be NULL), the LUN table, by-id/ and the pool.  Safe
 * after a start-up that stopped half way (g->s set).
 */
void gw_stop_close(struct gw *g, struct iser_ctx *iser, struct gw_sync_batch *batch);

#endif
