/* SPDX-License-Identifier: MIT */
/*
 * Multipath (mpath.h): the stall watch.  Replies lost on a path whose link
 * stays up (a blackhole, a hung switch port) give no link or route event,
 * and the session's keep-alive only notices after noop_interval +
 * noop_timeout.  With another path usable, a path whose commands got no
 * reply for much longer than its recent latency is pinged at once
 * (NOP-Out, RFC 7143 §11.18); an answer keeps it, no answer drops it, and
 * the session hands its commands back to be re-issued on another path.
 * With one usable path nothing changes: its session's own keep-alive and
 * recovery apply.
 */
#include "mpath_priv.h"

#include <stdio.h>
#include <string.h>

#include "initiator/util/log.h"

static int64_t clamp(int64_t v, int64_t lo, int64_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

void mp_stall_limits(const uint64_t lat[LAT_BUCKETS], struct mp_stall_limits *l)
{
	int64_t p99_ms = (int64_t)((lat_hist_percentile(lat, 99) + 999) / 1000);
	l->ping_after = clamp(MP_PING_AFTER_P99 * p99_ms, MP_PING_AFTER_MIN_MS, MP_PING_AFTER_MAX_MS);
	l->answer = clamp(MP_ANSWER_P99 * p99_ms, MP_ANSWER_MIN_MS, MP_ANSWER_MAX_MS);
}

void mp_lat_recent(const uint64_t cur[LAT_BUCKETS], const uint64_t base[LAT_BUCKETS], uint64_t out[LAT_BUCKETS])
{
	uint64_t n = 0;
	for (size_t i = 0; i < LAT_BUCKETS; i++) {
		out[i] = cur[i] >= base[i] ? cur[i] - base[i] : 0;
		n += out[i];
	}
	if (n < MP_LAT_MIN_SAMPLES)
		memcpy(out, cur, sizeof(uint64_t) * LAT_BUCKETS);
}

enum mp_stall_act mp_stall_judge(const struct mp_stall_limits *l, const struct iscsi_session_wait *w, int64_t ping_ms,
				 int64_t now)
{
	if (!w->up)
		return MP_STALL_NONE;
	if (ping_ms) {
		if (w->last_rx_ms >= ping_ms)
			return MP_STALL_ANSWERED;
		return now - ping_ms >= l->answer ? MP_STALL_DROP : MP_STALL_NONE;
	}
	if (!w->oldest_ms)
		return MP_STALL_NONE;
	int64_t since = w->last_rx_ms > w->oldest_ms ? w->last_rx_ms : w->oldest_ms;
	return now - since >= l->ping_after ? MP_STALL_PING : MP_STALL_NONE;
}

/* The bounds for path p now, from its session's recent latency (one to two MP_LAT_WINDOW_MS).  Mpath's thread. */
static void path_limits(struct mpath_path *p, struct iscsi_session *s, int64_t now, struct mp_stall_limits *l)
{
	uint64_t cur[LAT_BUCKETS], recent[LAT_BUCKETS];
	iscsi_session_get_latency(s, cur);
	if (!p->lat_mid_ms) {
		memcpy(p->lat_base, cur, sizeof(cur));
		memcpy(p->lat_mid, cur, sizeof(cur));
		p->lat_mid_ms = now;
	} else if (now - p->lat_mid_ms >= MP_LAT_WINDOW_MS) {
		memcpy(p->lat_base, p->lat_mid, sizeof(cur));
		memcpy(p->lat_mid, cur, sizeof(cur));
		p->lat_mid_ms = now;
	}
	mp_lat_recent(cur, p->lat_base, recent);
	mp_stall_limits(recent, l);
}

/* Whether a path other than p is usable.  Lock held. */
static bool other_usable(const struct mpath *m, const struct mpath_path *p)
{
	for (size_t i = 0; i < m->npaths; i++)
		if (&m->paths[i] != p && mp_usable(&m->paths[i]))
			return true;
	return false;
}

/* Act on one watched path (lock NOT held). */
static void watch_one(struct mpath *m, struct mpath_path *p, struct iscsi_session *s, int64_t now)
{
	struct iscsi_session_wait w;
	struct mp_stall_limits l;
	iscsi_session_get_wait(s, &w);
	path_limits(p, s, now, &l);
	switch (mp_stall_judge(&l, &w, p->ping_ms, now)) {
	case MP_STALL_NONE:
		if (!w.up)
			p->ping_ms = 0;
		return;
	case MP_STALL_PING: {
		int64_t since = w.last_rx_ms > w.oldest_ms ? w.last_rx_ms : w.oldest_ms;
		if (iscsi_session_ping(s))
			return;
		p->ping_ms = now;
		p->silent_ms = now - since;
		log_debug("path " ISCSI_HOSTPORT_FMT ": no reply for %lld ms (limit %lld ms): ping, answer expected "
			  "within %lld ms", ISCSI_HOSTPORT_ARGS(p->host, p->port), (long long)p->silent_ms,
			  (long long)l.ping_after, (long long)l.answer);
		return;
	}
	case MP_STALL_ANSWERED:
		log_debug("path " ISCSI_HOSTPORT_FMT ": answered %lld ms after the ping: kept",
			  ISCSI_HOSTPORT_ARGS(p->host, p->port), (long long)(w.last_rx_ms - p->ping_ms));
		p->ping_ms = 0;
		return;
	case MP_STALL_DROP:
		break;
	}
	p->ping_ms = 0;
	snprintf(p->cause, sizeof(p->cause), "no reply for %lld ms, then none within %lld ms of a ping",
		 (long long)p->silent_ms, (long long)l.answer);
	pthread_mutex_lock(&m->lock);
	bool drop = mp_usable(p) && other_usable(m, p); /* the other path may have gone meanwhile */
	if (drop && !p->down_cause)
		p->down_cause = p->cause;
	pthread_mutex_unlock(&m->lock);
	if (drop)
		iscsi_session_drop(s, "no answer to a ping while commands waited");
}

int64_t mp_watch_stalls(struct mpath *m, int64_t now, int64_t wake)
{
	struct mpath_path *ps[MPATH_MAX_PATHS];
	struct iscsi_session *ss[MPATH_MAX_PATHS];
	size_t n = 0, usable = 0;
	for (size_t i = 0; i < m->npaths; i++)
		usable += mp_usable(&m->paths[i]);
	for (size_t i = 0; i < m->npaths; i++) {
		struct mpath_path *p = &m->paths[i];
		if (!m->multi || usable < 2 || !mp_usable(p)) {
			p->ping_ms = 0; /* one usable path: its session's keep-alive and recovery alone */
			continue;
		}
		if (p->outstanding || p->ping_ms) {
			ps[n] = p;
			ss[n++] = p->s;
		}
	}
	m->stall_ticking = n || !m->multi || usable < 2;
	if (!n)
		return wake;
	pthread_mutex_unlock(&m->lock);
	for (size_t i = 0; i < n; i++)
		watch_one(m, ps[i], ss[i], now);
	pthread_mutex_lock(&m->lock);
	return now + MP_STALL_TICK_MS < wake ? now + MP_STALL_TICK_MS : wake;
}
