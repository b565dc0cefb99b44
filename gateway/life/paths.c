/* SPDX-License-Identifier: MIT */
/*
 * The mount's paths (paths.h): the multipath set around the first
 * session, the thread that opens the other paths, the identity check a
 * path passes before it carries I/O, the link and route watcher, and the
 * gw_sess_* functions the gateway calls in place of the session's.
 *
 * Threads: gw_paths_begin/first/start and stop on main; the path thread
 * (opens sessions, retries a portal that failed after 5 s doubling to a
 * minute, mpath_portal_retry_ms); the
 * netwatch thread (on_net); check_path on the path thread or the mpath's
 * thread.  struct gw_paths is written by main before the threads start,
 * then only `stop` changes (under its lock).
 */
#include "paths.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "initiator/lun/alua_query.h"
#include "initiator/scsi/alua.h"
#include "initiator/transport/cancel.h"
#include "initiator/login/discovery.h"
#include "initiator/lun/lun_ident.h"
#include "initiator/mpath/mpath.h"
#include "initiator/net/netroute.h"
#include "initiator/net/netwatch.h"
#include "initiator/net/portal_addr.h"
#include "initiator/util/thread.h"
#include "initiator/util/log.h"

#define DISCOVERY_TIMEOUT_MS 5000
#define PORTALS_MAX (MPATH_MAX_PATHS / 2)

struct gw_paths {
	struct mpath_path *first;
	struct iscsi_session_config sc; /* the first session's configuration, CHAP included: wiped at stop */
	struct iser_ctx *iser;      /* the first path's iSER context (its pool registration), NULL over TCP */
	bool iser_only;             /* -o transport=iser: no path falls back to TCP */
	bool accept_unlisted;       /* -o accept_unlisted_portals (gw_portal_vouch) */
	unsigned sessions;          /* -o sessions= per portal */
	struct iscsi_portal portals[PORTALS_MAX]; /* -o portal= ones, then discovery's (filled by the path thread) */
	size_t nportals;
	size_t given;               /* of those, from -o portal= */
	bool discover;              /* -o discover_portals=on: SendTargets' portals are paths too */
	pthread_t thread;
	bool started;
	int cancel_fd;              /* fired at stop: ends a login or discovery in progress */
	struct netwatch *nw;
};

/* ---- the gw_sess_* functions ---- */

struct iscsi_session *gw_ctl(struct gw *g)
{
	struct iscsi_session *s = g->mp ? mpath_ctl_session(g->mp) : NULL;
	return s ? s : g->s;
}

bool gw_sess_up(struct gw *g)
{
	if (g->mp) {
		struct mpath_stats st;
		mpath_get_stats(g->mp, &st, NULL, 0);
		return st.paths_up > 0;
	}
	return g->s && iscsi_session_up(g->s);
}

void gw_sess_stats(struct gw *g, struct iscsi_session_stats *out)
{
	if (g->mp)
		mpath_session_stats(g->mp, out);
	else
		iscsi_session_get_stats(g->s, out);
}

void gw_sess_latency(struct gw *g, uint64_t out[LAT_BUCKETS])
{
	if (g->mp)
		mpath_latency(g->mp, out);
	else
		iscsi_session_get_latency(g->s, out);
}

void gw_sess_stopping(struct gw *g, int grace_ms)
{
	if (g->mp)
		mpath_stopping(g->mp, grace_ms);
	else
		iscsi_session_stopping(g->s, grace_ms);
}

int gw_sess_drain(struct gw *g, int timeout_ms)
{
	return g->mp ? mpath_drain(g->mp, timeout_ms) : iscsi_session_drain(g->s, timeout_ms);
}

void gw_sess_close(struct gw *g, int timeout_ms)
{
	gw_paths_stop(g);
	if (g->mp)
		mpath_close(g->mp, timeout_ms);
	else if (g->s)
		iscsi_session_close(g->s, timeout_ms);
	g->mp = NULL;
	g->s = NULL;
}

/* ---- the identity check (RFC 7143 says nothing of it: SPC-4 §7.8.6, §7.8.15; SBC-3 §5.16) ---- */

bool gw_path_same_lun(const struct gw_lun *l, const struct iscsi_lun_info *info, char *why, size_t cap)
{
	struct iscsi_lun_ident a, b;
	iscsi_lun_ident_from_info(&l->info, &a);
	if (a.device_type == 0)
		a.nblocks = blk_dev_nblocks(&l->dev); /* as the rescans left it */
	iscsi_lun_ident_from_info(info, &b);
	return iscsi_lun_ident_same(&a, &b, why, cap);
}

/*
 * The ALUA state of this path's target port group (info->tpg, from VPD
 * 0x83 through s) in REPORT TARGET PORT GROUPS (SPC-4 §6.36); ALUA_NONE
 * when the target does not answer it or does not list the group.
 */
static int path_alua_state(struct iscsi_session *s, const struct iscsi_lun_info *info, void *buf, size_t buflen)
{
	int state = ALUA_NONE;
	int rc = iscsi_alua_path_state(s, info, buf, buflen, &state);
	if (rc)
		log_debug("lun%u: target port group %u: %s", info->lun, info->tpg, strerror(-rc));
	return rc ? ALUA_NONE : state;
}

#define PROBE_BUF_TCP (64u * 1024u) /* the probe's scratch buffer over TCP */

/*
 * mpath's check_path, and every session's verify hook (through
 * mpath_path_verify_hook, or verify_one without multipath): every mounted
 * LUN, probed through s, must be the same device; the path's ALUA state
 * (alua non-NULL) is its target port group's, read through the first LUN
 * that reports one.
 */
static int check_path(void *arg, struct iscsi_session *s, int *alua, char *why, size_t cap)
{
	struct gw *g = arg;
	int dummy;
	if (!alua)
		alua = &dummy;
	*alua = ALUA_NONE;
	/*
	 * Over iSER a pool slice (the target RDMA-writes the answers into
	 * registered memory): when commands parked by a reconnect hold them
	 * all, the check is tried again later.  Over TCP the heap, so that the
	 * check after a reconnect never waits for the commands it guards.
	 */
	size_t buflen = g->iser ? buf_pool_slice_size(g->pool) : PROBE_BUF_TCP;
	void *buf = g->iser ? buf_pool_tryget(g->pool, NULL) : malloc(buflen);
	struct iscsi_lun_info *info = malloc(sizeof(*info));
	int rc = !buf ? -EAGAIN : info ? 0 : -ENOMEM;
	if (rc)
		snprintf(why, cap, "%s", !buf && g->iser ? "no free pool slice to probe with" : "out of memory");
	for (size_t i = 0, n = gw_nluns(g); i < n && !rc; i++) {
		const struct gw_lun *l = &g->luns[i];
		if (gw_lun_gone(l))
			continue;
		struct gw_own_ua ua = {g, l->dev.lun_field}; /* a reconnect's power-on UNIT ATTENTION drops cached data */
		rc = iscsi_lun_probe_ua(s, l->info.lun, buf, buflen, info, gw_own_ua, &ua);
		char diff[160];
		if (rc == -ENXIO || rc == -ENODEV || (!rc && info->inq.device_type != l->info.inq.device_type)) {
			if (rc)
				snprintf(why, cap, "LUN %u is not there (%s)", l->info.lun, strerror(-rc));
			else
				snprintf(why, cap, "LUN %u is not the same device there (peripheral qualifier %u, device type "
					 "0x%02x, was 0x%02x)", l->info.lun, info->inq.qualifier, info->inq.device_type,
					 l->info.inq.device_type);
			rc = -ENODEV;
		} else if (rc) {
			snprintf(why, cap, "LUN %u: probe failed: %s", l->info.lun, strerror(-rc));
		} else if (!gw_path_same_lun(l, info, diff, sizeof(diff))) {
			snprintf(why, cap, "LUN %u is another device (%s)", l->info.lun, diff);
			rc = -ENODEV;
		} else if (alua != &dummy && *alua == ALUA_NONE && info->tpgs && info->have_tpg) {
			*alua = path_alua_state(s, info, buf, buflen);
		}
	}
	free(info);
	if (buf && g->iser)
		buf_pool_put(g->pool, buf);
	else
		free(buf);
	return rc;
}

/* The session's verify hook with -o multipath=off: check_path without ALUA. */
static int verify_one(void *arg, struct iscsi_session *s, char *why, size_t cap)
{
	return check_path(arg, s, NULL, why, cap);
}

/* ---- the path thread ---- */

/*
 * The output interface of the route to host:port (> 0; a name, not
 * resolved here, gives 1), 0 when the kernel has no route to it, or a
 * negative errno when the lookup itself failed.
 */
static int route_ifindex(void *arg, const char *host, unsigned port)
{
	(void)arg;
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST}, *ai;
	char service[16];
	snprintf(service, sizeof(service), "%u", port);
	if (getaddrinfo(host, service, &hints, &ai))
		return 1; /* a name: not watched (its route is looked up by the connect) */
	struct iscsi_route r;
	int rc = iscsi_route_lookup(ai->ai_addr, &r);
	freeaddrinfo(ai);
	if (rc == -ENETUNREACH || rc == -EHOSTUNREACH || rc == -EACCES || rc == -EINVAL)
		return 0; /* no route (or an unreachable, prohibit or blackhole one) */
	if (rc)
		return rc; /* the lookup itself failed: leave the path alone */
	return r.ifindex > 0 ? r.ifindex : 1;
}

/* Whether the thread is to end (fired cancel token). */
static bool stopping(const struct gw_paths *P)
{
	struct pollfd p = {.fd = P->cancel_fd, .events = POLLIN};
	return poll(&p, 1, 0) > 0;
}

/*
 * The template with host:port and slot p's hook: sc gets a copy of the
 * credentials (the caller wipes them).  With a fixed ISID (a worker that
 * may be restarted, supervisor.h), each path's ISID is the first
 * session's with its qualifier changed by a hash of host, port and nth
 * (which of the portal's sessions still to open this is): the same for the
 * same path in the next worker, so the target reinstates it (RFC 7143
 * §6.3.5), and another for every other path.
 */
static void path_config(const struct gw_paths *P, struct iscsi_session_config *sc, struct mpath_path *p,
			const char *host, unsigned port, unsigned nth)
{
	static const uint8_t no_isid[6];
	*sc = P->sc;
	snprintf(sc->host, sizeof(sc->host), "%s", host);
	sc->port = port;
	if (memcmp(sc->isid, no_isid, sizeof(no_isid))) {
		uint32_t h = 2166136261u; /* FNV-1a */
		for (const char *c = host; *c; c++)
			h = (h ^ (uint8_t)*c) * 16777619u;
		h = ((h ^ port) * 16777619u ^ nth) * 16777619u;
		sc->isid[3] ^= (uint8_t)h;
		sc->isid[4] ^= (uint8_t)(h >> 8) | 1u; /* never the first session's */
	}
	sc->path_state_arg = p;
	sc->verify_arg = p;
}

/*
 * Open one more session to host:port and attach it.  Returns 0 (attached
 * or refused: not to be tried again) or a negative errno (try again later).
 */
static int open_path(struct gw *g, struct gw_paths *P, const char *host, unsigned port, unsigned fails, unsigned nth)
{
	struct mpath_path *p = mpath_path_new(g->mp, host, port);
	if (!p)
		return 0; /* table full */
	struct iscsi_session *s = NULL;
	char err[256] = "";
	int rc = -ENOTCONN;
	const char *transport = iscsi_tcp_transport.name;
	struct iscsi_session_config sc;
	if (P->iser) { /* the first path's transport and its one registration of the pool */
		path_config(P, &sc, p, host, port, nth);
		sc.transport = &iscsi_iser_transport;
		sc.transport_ctx = P->iser;
		iser_neg_config(&sc.neg);
		rc = iscsi_session_open(&sc, &s, err, sizeof(err));
		iscsi_chap_creds_wipe(&sc.chap);
		if (rc == 0)
			transport = iscsi_iser_transport.name;
	}
	if (rc && !(P->iser && P->iser_only)) {
		path_config(P, &sc, p, host, port, nth);
		sc.transport = &iscsi_tcp_transport;
		sc.transport_ctx = NULL;
		rc = iscsi_session_open(&sc, &s, err, sizeof(err));
	}
	iscsi_chap_creds_wipe(&sc.chap);
	if (rc) {
		if (fails == 0)
			log_warn("path " ISCSI_HOSTPORT_FMT ": %s; trying again in %d s, then less often (every %d s at most)",
				 ISCSI_HOSTPORT_ARGS(host, port), err, mpath_portal_retry_ms(1) / 1000,
				 MPATH_PORTAL_RETRY_MAX_MS / 1000);
		else
			log_debug("path " ISCSI_HOSTPORT_FMT ": %s; trying again in %d s", ISCSI_HOSTPORT_ARGS(host, port),
				  err, mpath_portal_retry_ms(fails + 1) / 1000);
		mpath_path_discard(p);
		return rc;
	}
	char why[512];
	if (gw_portal_vouch(g, &P->sc, host, port, P->accept_unlisted, why, sizeof(why))) {
		mpath_path_refuse(p, s, why);
		return 0;
	}
	mpath_path_set_ifindex(p, route_ifindex(NULL, host, port));
	mpath_path_attach(p, s, transport);
	return 0;
}

/* One portal of the path thread: its address, the sessions still to open and its back-off. */
struct pending {
	struct iscsi_portal_addr addr;
	bool have_addr;             /* addr is known (a name that did not resolve: not) */
	unsigned left;              /* sessions still to open */
	unsigned fails;             /* failed attempts in a row */
	int64_t next_ms;            /* CLOCK_MONOTONIC ms of the next attempt */
};

/* Whether a is the address of one of the n portals in w (0 when a is unknown). */
static bool addr_taken(const struct pending *w, size_t n, const struct pending *a)
{
	for (size_t i = 0; i < n && a->have_addr; i++)
		if (w[i].have_addr && iscsi_portal_addr_same(&w[i].addr, &a->addr))
			return true;
	return false;
}

/*
 * SendTargets on the URL's portal (only with -o discover_portals=on): the
 * portals the target reports for itself, numeric addresses only
 * (iscsi_disc_portals), added to P's list unless their address is one
 * already there (w: the URL's at [0], then P's list at [1 + i]); each new
 * one gets `sessions` sessions to open.
 */
static void discover_portals(struct gw_paths *P, struct pending *w)
{
	struct iscsi_discovery_config dc = {.transport = &iscsi_tcp_transport, .port = P->sc.port};
	snprintf(dc.host, sizeof(dc.host), "%s", P->sc.host);
	snprintf(dc.initiator_name, sizeof(dc.initiator_name), "%s", P->sc.initiator_name);
	iscsi_neg_config_default(&dc.neg);
	dc.timeout_ms = P->sc.timeout_ms > 0 && P->sc.timeout_ms < DISCOVERY_TIMEOUT_MS ? P->sc.timeout_ms
											    : DISCOVERY_TIMEOUT_MS;
	dc.chap = P->sc.chap;
	struct iscsi_disc_list list = {0};
	char err[256];
	int rc = iscsi_discover(&dc, &list, err, sizeof(err));
	iscsi_chap_creds_wipe(&dc.chap);
	if (rc) {
		log_info("multipath: SendTargets on " ISCSI_HOSTPORT_FMT ": %s (only the given portals are used)",
			 ISCSI_HOSTPORT_ARGS(P->sc.host, P->sc.port), err);
		return;
	}
	struct iscsi_portal got[PORTALS_MAX];
	struct iscsi_portal_addr addrs[PORTALS_MAX];
	for (size_t t = 0; t < list.ntargets; t++) {
		if (strcasecmp(list.targets[t].name, P->sc.target_name)) /* RFC 7143 §4.2.7.1 */
			continue;
		size_t n = iscsi_disc_portals(&list.targets[t], got, addrs, PORTALS_MAX);
		for (size_t i = 0; i < n && P->nportals < PORTALS_MAX; i++) {
			struct pending *q = &w[1 + P->nportals];
			*q = (struct pending){.addr = addrs[i], .have_addr = true, .left = P->sessions};
			if (addr_taken(w, 1 + P->nportals, q))
				continue;
			P->portals[P->nportals++] = got[i];
			log_info("multipath: the target reports portal " ISCSI_HOSTPORT_FMT,
				 ISCSI_HOSTPORT_ARGS(got[i].host, got[i].port));
		}
	}
	iscsi_disc_list_free(&list);
}

/*
 * Open the sessions due on one portal (w->next_ms passed): until none is
 * left or one fails, which puts the next attempt mpath_portal_retry_ms
 * later.
 */
static void open_due(struct gw *g, struct gw_paths *P, const char *host, unsigned port, struct pending *w)
{
	while (w->left && w->next_ms <= iscsi_now_ms() && !stopping(P)) {
		if (open_path(g, P, host, port, w->fails, w->left) == 0) {
			w->left--;
			w->fails = 0;
			continue;
		}
		w->fails++;
		w->next_ms = iscsi_now_ms() + mpath_portal_retry_ms(w->fails);
	}
}

/*
 * Open what is due on every portal (w[0]: the URL's, w[1 + i]: P's list).
 * Returns the CLOCK_MONOTONIC ms of the next attempt, or -1 when no
 * session is left to open.
 */
static int64_t open_pending(struct gw *g, struct gw_paths *P, struct pending *w)
{
	int64_t next = -1;
	for (size_t i = 0; i <= P->nportals && !stopping(P); i++) {
		const char *host = i ? P->portals[i - 1].host : P->sc.host;
		unsigned port = i ? P->portals[i - 1].port : P->sc.port;
		open_due(g, P, host, port, &w[i]);
		if (w[i].left && (next < 0 || w[i].next_ms < next))
			next = w[i].next_ms;
	}
	return next;
}

/*
 * The path thread: the URL's extra sessions and the given portals first
 * (a portal= whose address is the URL's or an earlier one's counts once:
 * names the user gave are resolved here), then with discover_portals=on
 * the portals SendTargets reports, then the ones that failed, each on its
 * back-off, until all are open or the stop.
 */
static void *path_thread(void *arg)
{
	struct gw *g = arg;
	struct gw_paths *P = g->paths;
	iscsi_cancel_bind(P->cancel_fd);
	struct pending w[PORTALS_MAX + 1] = {{.left = P->sessions - 1}}; /* [0]: the URL's portal, path 0 open */
	if (P->nportals || P->discover) /* something to compare it with */
		w[0].have_addr = !iscsi_portal_addr_resolve(P->sc.host, P->sc.port, &w[0].addr);
	for (size_t i = 0; i < P->nportals && !stopping(P); i++) {
		struct pending *q = &w[1 + i];
		q->have_addr = !iscsi_portal_addr_resolve(P->portals[i].host, P->portals[i].port, &q->addr);
		q->left = P->sessions;
		if (addr_taken(w, 1 + i, q)) {
			log_info("multipath: portal " ISCSI_HOSTPORT_FMT " is the address of another portal: one path",
				 ISCSI_HOSTPORT_ARGS(P->portals[i].host, P->portals[i].port));
			q->left = 0;
		}
	}
	open_pending(g, P, w);
	if (P->discover && !stopping(P))
		discover_portals(P, w);
	for (;;) {
		int64_t next = open_pending(g, P, w);
		if (next < 0 || stopping(P))
			break;
		int64_t ms = next - iscsi_now_ms();
		struct pollfd p = {.fd = P->cancel_fd, .events = POLLIN};
		if (poll(&p, 1, ms < 0 ? 0 : ms > INT32_MAX ? INT32_MAX : (int)ms) != 0)
			break;
	}
	return NULL;
}

/* The netwatch thread: a link down fails its paths now; any other change re-checks every path's route. */
static void on_net(void *arg, const struct netwatch_event *ev)
{
	struct gw *g = arg;
	if (ev->kind == NETWATCH_LINK && (ev->removed || !ev->running)) {
		int n = mpath_fail_ifindex(g->mp, ev->ifindex, ev->removed ? "link removed" : "link down");
		if (n)
			log_debug("link %s down: %d path(s) failed", ev->ifname[0] ? ev->ifname : "?", n);
	}
	mpath_paths_route_check(g->mp, route_ifindex, NULL);
}

/* ---- set-up and stop ---- */

int gw_paths_begin(struct gw *g, const struct gw_settings *o, struct iscsi_session_config *sc)
{
	sc->verify = verify_one; /* who answers after a reconnect: before any command goes out again */
	sc->verify_arg = g;
	if (!gw_settings_multipath(o))
		return 0;
	struct gw_paths *P = calloc(1, sizeof(*P));
	if (!P) {
		fprintf(stderr, "iserfuse: out of memory\n");
		return -ENOMEM;
	}
	P->cancel_fd = iscsi_cancel_new();
	struct mpath_config mc = {
		.queue_depth = sc->queue_depth,
		.replacement_timeout_ms = sc->replacement_timeout_ms,
		.policy = gw_settings_path_sel(o),
		.check_path = check_path,
		.check_arg = g,
	};
	int rc = P->cancel_fd < 0 ? P->cancel_fd : mpath_create(&mc, &g->mp);
	if (rc == 0 && !(P->first = mpath_path_new(g->mp, sc->host, sc->port)))
		rc = -ENOMEM;
	if (rc) {
		fprintf(stderr, "iserfuse: cannot set up multipath: %s\n", strerror(-rc));
		if (g->mp)
			mpath_close(g->mp, 0);
		g->mp = NULL;
		if (P->cancel_fd >= 0)
			close(P->cancel_fd);
		free(P);
		return rc;
	}
	sc->on_path_state = mpath_path_state_hook;
	sc->path_state_arg = P->first;
	sc->verify = mpath_path_verify_hook;
	sc->verify_arg = P->first;
	P->sc = *sc;
	P->sessions = (unsigned)gw_settings_num(o, GW_OPT_SESSIONS);
	P->discover = gw_settings_discover_portals(o);
	P->accept_unlisted = o->given[GW_OPT_ACCEPT_UNLISTED_PORTALS];
	const struct gw_portal *given;
	size_t n = gw_settings_portals(o, &given);
	for (size_t i = 0; i < n && P->nportals < PORTALS_MAX; i++) {
		struct iscsi_portal *q = &P->portals[P->nportals++];
		snprintf(q->host, sizeof(q->host), "%s", given[i].host);
		q->port = given[i].port;
		q->tpgt = -1;
	}
	P->given = P->nportals;
	g->paths = P;
	return 0;
}

void gw_paths_first(struct gw *g, int rc, const char *transport)
{
	struct gw_paths *P = g->paths;
	if (!P)
		return;
	if (rc) {
		mpath_path_discard(P->first);
		iscsi_chap_creds_wipe(&P->sc.chap);
		mpath_close(g->mp, 0);
		g->mp = NULL;
		close(P->cancel_fd);
		free(P);
		g->paths = NULL;
		return;
	}
	mpath_path_set_ifindex(P->first, route_ifindex(NULL, P->sc.host, P->sc.port));
	mpath_path_attach(P->first, g->s, transport);
}

int gw_paths_start(struct gw *g, struct iser_ctx *iser, bool iser_only)
{
	struct gw_paths *P = g->paths;
	if (!P)
		return 0;
	P->iser = iser;
	P->iser_only = iser_only;
	for (size_t i = 0, n = gw_nluns(g); i < n; i++)
		if (g->luns[i].info.tpgs && g->luns[i].info.have_tpg) {
			mpath_path_recheck(P->first); /* its ALUA state, now that there are LUNs to ask */
			break;
		}
	int rc = netwatch_start(on_net, g, &P->nw);
	if (rc)
		log_warn("multipath: no link and route events (%s): a lost path is noticed by its NOP-Out pings",
			 strerror(-rc));
	rc = -thread_start_quiet(&P->thread, path_thread, g);
	if (rc) {
		log_warn("multipath: cannot start the path thread (%s): one path only", strerror(-rc));
		return rc;
	}
	P->started = true;
	return 0;
}

void gw_paths_stop(struct gw *g)
{
	struct gw_paths *P = g->paths;
	if (!P)
		return;
	iscsi_cancel_fire(P->cancel_fd);
	if (P->started)
		pthread_join(P->thread, NULL);
	P->started = false;
	netwatch_stop(P->nw);
	P->nw = NULL;
	iscsi_chap_creds_wipe(&P->sc.chap);
	close(P->cancel_fd);
	free(P);
	g->paths = NULL;
}
