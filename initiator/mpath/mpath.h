/* SPDX-License-Identifier: MIT */
/*
 * Multipath: one logical unit set reached through several iSCSI sessions
 * (paths: one per portal and session, each its own ISID, connection and
 * recovery), behind the same submit contract as one session (session.h),
 * so block I/O does not know how many paths there are.
 *
 * A command goes down the best usable path (ALUA: active/optimized before
 * active/non-optimized; standby, unavailable, transitioning, offline not
 * used; within the group the path selector of path_select.h).  When its
 * path is lost (the session hands it back: -ETIMEDOUT, see
 * iscsi_session_set_hand_back) or the target
 * says the path cannot do it now (ALUA standby/unavailable/transitioning
 * sense, ASYMMETRIC ACCESS STATE CHANGED), it is re-issued at once on
 * another usable path, whole (a WRITE is re-sent from the caller's
 * buffer; the caller's callback fires once, with the final result).
 * Ordering: block I/O never has two overlapping writes in flight, so a
 * re-issue cannot reorder them.  With no usable path, commands are held;
 * replacement_timeout_ms after the last path went, they fail (-ETIMEDOUT)
 * and new ones are refused (-ENOTCONN) until a path is back.
 *
 * With one attached path, the session's own recovery serves as today
 * (its replacement timeout, its re-issue); from the second attached path
 * on, every session hands commands back at once and the holding above
 * applies; while two paths or more are usable, a path whose commands got
 * no reply for much longer than its recent latency is pinged at once and
 * dropped when the ping goes unanswered (mpath_stall.c).  Each path going
 * down and coming back is one warning line, from the mpath's thread.
 * Either way a reinstated session runs check_path before any
 * command goes out on it again (mpath_path_verify_hook).
 *
 * Threads and locks: any thread submits; completions run on the paths'
 * event (or recovery) threads; the mpath's thread re-issues held commands,
 * fails them at the deadline and runs the caller's check_path on paths
 * that (re)connected before they carry I/O.  One mutex (m->lock) guards
 * the path table, the contexts and the hold queue; it is taken after a
 * session's lock (the session's on_path_state hook) and never held while
 * calling into a session.
 */
#ifndef ISERFUSE_MPATH_H
#define ISERFUSE_MPATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "initiator/util/latency.h"
#include "path_select.h"
#include "initiator/session/session.h"
#include "initiator/net/url.h"

#define MPATH_MAX_PATHS 64

struct mpath;
struct mpath_path;

struct mpath_config {
	unsigned queue_depth;         /* most commands in flight from ordinary threads, all paths together (1..ISCSI_QUEUE_DEPTH_MAX) */
	int replacement_timeout_ms;   /* with no usable path, held commands fail this long after the last path went */
	enum path_sel_policy policy;
	/*
	 * Before a path carries I/O (when attached, and each time its session
	 * is reinstated): check that it leads to the same device and read its
	 * ALUA state into *alua_state (ALUA_NONE, 0x100, without ALUA).  On the
	 * mpath's thread (or the attaching thread), no mpath lock held; it may
	 * run commands on s (iscsi_session_exec).  Returns 0 (usable), -ENODEV
	 * (another device: the path is refused for good, why says how) or
	 * another negative errno (try again later).  NULL: every path is fine.
	 */
	int (*check_path)(void *arg, struct iscsi_session *s, int *alua_state, char *why, size_t cap);
	void *check_arg;
};

/* A snapshot of one path for statistics. */
struct mpath_path_info {
	char host[ISCSI_URL_HOST_MAX];
	unsigned port;
	const char *transport;        /* "tcp", "iser" (static) */
	bool up;                      /* takes commands now */
	int alua_state;               /* enum alua_state of alua.h; 0x100: none */
	uint64_t commands;            /* commands completed on it */
	uint64_t errors;              /* of those, failed by the path (handed back, ALUA sense) */
	uint64_t failovers;           /* commands moved from it to another path */
	unsigned outstanding;
	uint64_t p50_us, p99_us;      /* the session's command latency */
};

struct mpath_stats {
	size_t paths;                 /* attached paths (checked) */
	size_t paths_up;              /* usable now */
	size_t paths_refused;         /* refused: another device */
	uint64_t failovers;           /* commands moved to another path, all paths */
	unsigned held;                /* commands waiting for a usable path now */
};

/*
 * A multipath set with no path yet, and its thread.  Returns 0 and *out
 * (free with mpath_close), or -EINVAL / -ENOMEM / pthread_create's error.
 */
int mpath_create(const struct mpath_config *cfg, struct mpath **out);

/*
 * A new path slot for a session about to be opened to host:port: pass
 * mpath_path_state_hook and the returned slot as the session config's
 * on_path_state / path_state_arg, then mpath_path_attach (or
 * mpath_path_discard when the open failed).  NULL when the table is full.
 */
struct mpath_path *mpath_path_new(struct mpath *m, const char *host, unsigned port);

/* The session_config on_path_state hook for a slot of mpath_path_new. */
void mpath_path_state_hook(void *arg, bool up);

/*
 * The session_config verify hook for a slot of mpath_path_new (pass the
 * slot as verify_arg): check_path on the reinstated session before it
 * carries I/O again, its ALUA state kept.  Another device (-ENODEV): with
 * other paths attached the path is refused for good (one log line); as the
 * only path it is fenced (its session fails the I/O with -EIO; a fenced
 * path is picked only when no other is usable) until the hook passes
 * again.  Returns check_path's result.  On the session's recovery thread
 * (or iscsi_session_reverify's caller), no lock held.
 */
int mpath_path_verify_hook(void *arg, struct iscsi_session *s, char *why, size_t cap);

/*
 * The session of slot p is open: run check_path on it (on this thread),
 * then let it carry I/O.  The mpath owns s from now on (closed by
 * mpath_close, or at once when refused).  Returns 0, or -ENODEV when
 * check_path refused it (one log line says why; the slot stays, refused)
 * or check_path's other error (the path stays and is checked again when
 * its session is next reinstated and every few seconds).
 */
int mpath_path_attach(struct mpath_path *p, struct iscsi_session *s, const char *transport);

/*
 * The session s just opened on slot p must not carry I/O (why, one line,
 * logged): the slot stays, refused (counted in paths_refused), and s is
 * closed.  Instead of mpath_path_attach.
 */
void mpath_path_refuse(struct mpath_path *p, struct iscsi_session *s, const char *why);

/* Run check_path on slot p again soon (its ALUA state is to be read again).  Any thread. */
void mpath_path_recheck(struct mpath_path *p);

/* The open failed: the slot is dropped. */
void mpath_path_discard(struct mpath_path *p);

/*
 * Submit through the best usable path: the iscsi_session_submit contract
 * (0: cmd->cb called exactly once; -ENOTCONN: no path and past the
 * replacement timeout, or closing; -EINVAL; -EAGAIN from a completion
 * callback when no context is free).  Blocks while queue_depth commands
 * from ordinary threads are in flight.  `m` is passed as the blk_dev's
 * session pointer (cache/blkio/blkio.h, blk_session_ops_mpath).
 */
int mpath_submit(struct mpath *m, const struct iscsi_cmd *cmd);

/* Most payload bytes per command: the smallest of the paths' transports (0: no limit). */
uint32_t mpath_max_cmd_bytes(const struct mpath *m);

/*
 * A session for commands outside the I/O path (probes, REPORT LUNS, READ
 * CAPACITY): a usable path's, else the first attached one's, else NULL.
 * It stays valid until mpath_close.  Any thread.
 */
struct iscsi_session *mpath_ctl_session(struct mpath *m);

/*
 * The up paths whose route runs through interface ifindex (> 0: a link
 * went down): fail them now (iscsi_session_drop with reason, a static
 * string).  Returns how many.
 */
int mpath_fail_ifindex(struct mpath *m, int ifindex, const char *reason);

/*
 * Note the output interface of slot p's route (netroute.h), 0 if unknown:
 * what mpath_fail_ifindex matches.  Any thread.
 */
void mpath_path_set_ifindex(struct mpath_path *p, int ifindex);

/*
 * For each path: when lookup(arg, host, port) returns the interface index
 * of its route (> 0), a path that was down retries its connection at once
 * (iscsi_session_retry_now); when it returns 0 (no route), an up path is
 * failed (reason "route gone"); a negative return (the lookup failed)
 * leaves the path as it is.  On the caller's thread (the netwatch
 * thread), no lock held while lookup runs.
 */
void mpath_paths_route_check(struct mpath *m, int (*lookup)(void *arg, const char *host, unsigned port), void *arg);

/*
 * A portal whose session could not be opened (a path not yet attached) is
 * tried again after MPATH_PORTAL_RETRY_MIN_MS, then after twice as long
 * each time it fails again, at most MPATH_PORTAL_RETRY_MAX_MS.
 */
#define MPATH_PORTAL_RETRY_MIN_MS 5000
#define MPATH_PORTAL_RETRY_MAX_MS 60000

/*
 * The wait in ms before the next attempt on a portal that failed
 * `failures` times in a row (>= 1; 0 gives 0: try at once): 5, 10, 20,
 * 40, then 60 s for ever.  Pure.
 */
int mpath_portal_retry_ms(unsigned failures);

/* The name of an ALUA state (SPC-4 §6.36: "active/optimized", ..., "none" without ALUA), static. */
const char *mpath_alua_name(int state);

/* Counters and path snapshots: out gets up to cap paths, returns how many paths exist. */
size_t mpath_get_stats(struct mpath *m, struct mpath_stats *st, struct mpath_path_info *out, size_t cap);

/* Sum of the paths' session statistics (session.h) into *out. */
void mpath_session_stats(struct mpath *m, struct iscsi_session_stats *out);

/* Sum of the paths' latency histograms into out. */
void mpath_latency(struct mpath *m, uint64_t out[LAT_BUCKETS]);

/*
 * iscsi_session_stopping on every path (one being checked included, and
 * one attached later from mpath_path_attach), and held commands fail by
 * grace_ms from now.
 */
void mpath_stopping(struct mpath *m, int grace_ms);

/* Wait up to timeout_ms for every command to complete, also those out on a path after the
 * replacement timeout failed the held ones, and for their callbacks to have returned (not to
 * be called from one): 0 or -ETIMEDOUT. */
int mpath_drain(struct mpath *m, int timeout_ms);

/*
 * Stop the thread, close every session (iscsi_session_close with
 * timeout_ms), fail what is still held (-ECONNABORTED) and free m.
 */
void mpath_close(struct mpath *m, int timeout_ms);

#endif
