/* SPDX-License-Identifier: MIT */
/*
 * The mount's paths (multipath, initiator/mpath/mpath.h): the first session is
 * opened by the start-up as before, inside a multipath set unless
 * -o multipath=off; once the LUN files exist, a thread of paths.c opens
 * the other paths (the URL portal's extra -o sessions=, the -o portal=
 * ones, with -o discover_portals=on the portals the target reports
 * through SendTargets), each checked
 * against the LUNs already mounted before it carries I/O, and a netlink
 * watcher (netwatch.h) fails a path whose link or route goes away and
 * retries it when the route returns.
 *
 * The gw_sess_* functions are what the rest of the gateway calls instead
 * of the session functions: through the multipath set when there is one,
 * else on the one session.
 */
#ifndef ISERFUSE_GW_PATHS_H
#define ISERFUSE_GW_PATHS_H

#include "initiator/iser/iser.h"
#include "initiator/session/session.h"
#include "gateway/gateway.h"
#include "gateway/settings/settings.h"

/*
 * Before the first session opens (sc complete, CHAP included): unless
 * multipath=off, make the set (g->mp) and its first path slot, hook sc's
 * on_path_state to it and keep a copy of sc for the other paths.
 * Returns 0 or a negative errno after printing one line.
 */
int gw_paths_begin(struct gw *g, const struct gw_settings *o, struct iscsi_session_config *sc);

/*
 * The first session's open returned rc (g->s the session when 0): attach
 * it to the set (which owns it from then on), or drop the set.  transport
 * is "tcp" or "iser".  No-op without a set.
 */
void gw_paths_first(struct gw *g, int rc, const char *transport);

/*
 * Once the LUN files exist: start the thread that opens the other paths
 * with the first session's configuration (copied by gw_paths_begin, CHAP
 * included; host and port replaced), over iSER with ctx iser when the
 * first path is iSER (NULL: TCP; a portal iSER cannot reach falls back to
 * TCP unless iser_only, -o transport=iser), and the link and route watcher.
 * Returns 0 or a negative errno (logged; the mount goes on with the paths
 * it has).  No-op without a set.
 */
int gw_paths_start(struct gw *g, struct iser_ctx *iser, bool iser_only);

/* Stop the path thread and the watcher (before drain and close).  Idempotent. */
void gw_paths_stop(struct gw *g);

/* A session for probes and other commands outside the I/O path (see mpath_ctl_session). */
struct iscsi_session *gw_ctl(struct gw *g);

/* Whether a path to the target is up now (any, with multipath). */
bool gw_sess_up(struct gw *g);

/* The session functions over every path: statistics, latency, stop grace, drain, close. */
void gw_sess_stats(struct gw *g, struct iscsi_session_stats *out);
void gw_sess_latency(struct gw *g, uint64_t out[LAT_BUCKETS]);
void gw_sess_stopping(struct gw *g, int grace_ms);
int gw_sess_drain(struct gw *g, int timeout_ms);
void gw_sess_close(struct gw *g, int timeout_ms);

/*
 * Whether the LUN probed on a new path (info) is the same device as the
 * mounted l: iscsi_lun_ident_same, its reason into why.  For the tests.
 */
bool gw_path_same_lun(const struct gw_lun *l, const struct iscsi_lun_info *info, char *why, size_t cap);

/*
 * Whether a path to host:port may carry the mount's I/O besides the one to
 * first's portal (the URL's): yes when it is that portal, when
 * accept_unlisted (-o accept_unlisted_portals), or when every mounted LUN's
 * identity is globally unique (iscsi_lun_ident_unique: then check_path
 * tells another device apart); else only when the SendTargets answer of
 * first's portal lists host:port for the target (portal_vouch.c).
 * Returns 0, or -ENODEV with one line in why saying why not and which
 * option accepts it.  On the path thread (a discovery login, within 5 s).
 */
int gw_portal_vouch(struct gw *g, const struct iscsi_session_config *first, const char *host, unsigned port,
		    bool accept_unlisted, char *why, size_t cap);

#endif
