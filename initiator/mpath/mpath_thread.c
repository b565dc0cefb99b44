/* SPDX-License-Identifier: MIT */
/*
 * Multipath (mpath.h): the mpath's thread (checks paths that came up,
 * logs failovers and failbacks, runs the stall watch of mpath_stall.c,
 * re-issues held commands, fails them at the deadline), link and route
 * events, statistics, stop and close.
 */
#include "mpath_priv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "initiator/scsi/alua.h"
#include "initiator/util/clock.h"
#include "initiator/util/log.h"
#include "initiator/util/thread.h"

const char *mpath_alua_name(int state)
{
	return alua_state_name(state);
}

int mpath_portal_retry_ms(unsigned failures)
{
	int ms = failures ? MPATH_PORTAL_RETRY_MIN_MS : 0;
	for (unsigned i = 1; i < failures && ms < MPATH_PORTAL_RETRY_MAX_MS; i++)
		ms *= 2;
	return ms < MPATH_PORTAL_RETRY_MAX_MS ? ms : MPATH_PORTAL_RETRY_MAX_MS;
}

/*
 * Run check_path on one path that came up (or whose ALUA states are to be
 * read again), lock dropped around it.  Lock held.
 */
static void check_one(struct mpath *m, struct mpath_path *p, int64_t now)
{
	struct iscsi_session *s = p->s;
	p->next_check_ms = now + MP_RECHECK_MS;
	p->recheck = false;
	pthread_mutex_unlock(&m->lock);
	int alua = MP_ALUA_NONE;
	char why[256] = "";
	int rc = m->cfg.check_path ? m->cfg.check_path(m->cfg.check_arg, s, &alua, why, sizeof(why)) : 0;
	pthread_mutex_lock(&m->lock);
	if (rc == -ENODEV) {
		log_err("path " ISCSI_HOSTPORT_FMT " refused: %s", ISCSI_HOSTPORT_ARGS(p->host, p->port), why);
		p->state = MP_SLOT_REFUSED; /* its session stays open, unused, until mpath_close */
		m->refused++;
	} else if (rc == 0) {
		if (p->alua != alua && p->checked)
			log_info("path " ISCSI_HOSTPORT_FMT ": ALUA %s -> %s", ISCSI_HOSTPORT_ARGS(p->host, p->port),
				 mpath_alua_name(p->alua), mpath_alua_name(alua));
		p->alua = alua;
		p->checked = true;
	} else {
		log_debug("path " ISCSI_HOSTPORT_FMT ": check failed: %s", ISCSI_HOSTPORT_ARGS(p->host, p->port),
			  why[0] ? why : strerror(-rc));
	}
	mp_note_paths(m);
}

void mp_log_transitions(struct mpath *m, struct mpath_path *p, int64_t now)
{
	if (p->down_ms && !p->down_logged && (!p->outstanding || now - p->down_ms > MP_DOWN_LINE_WAIT_MS)) {
		p->down_logged = true;
		bool other = false;
		for (size_t i = 0; i < m->npaths && !other; i++)
			other = &m->paths[i] != p && mp_usable(&m->paths[i]);
		/* with one path the session's own lines say what becomes of its commands */
		if (m->multi && other)
			log_warn("path " ISCSI_HOSTPORT_FMT " down (%s): %u commands moved to other paths, the longest "
				 "after %lld ms in flight", ISCSI_HOSTPORT_ARGS(p->host, p->port),
				 p->down_cause ? p->down_cause : "connection lost", p->moved,
				 (long long)(p->moved_stall_us / 1000));
		else if (m->multi)
			log_warn("path " ISCSI_HOSTPORT_FMT " down (%s) and no other path usable: %u commands held "
				 "until one is back or replacement_timeout", ISCSI_HOSTPORT_ARGS(p->host, p->port),
				 p->down_cause ? p->down_cause : "connection lost", p->moved);
	}
	if (p->down_ms && mp_usable(p)) {
		if (m->multi)
			log_warn("path " ISCSI_HOSTPORT_FMT " up again after %lld ms", ISCSI_HOSTPORT_ARGS(p->host, p->port),
				 (long long)(now - p->down_ms));
		p->down_ms = 0;
		p->down_cause = NULL;
	}
}

/* Take the hold queue (lock held); the caller re-issues or fails each outside the lock. */
static struct mp_cmd *take_held(struct mpath *m)
{
	struct mp_cmd *c = m->held_head;
	m->held_head = m->held_tail = NULL;
	m->nheld = 0;
	return c;
}

/* Held commands: re-issue them when a path is usable, fail them at the deadline.  Returns when to look again.  Lock held. */
static int64_t serve_held(struct mpath *m, int64_t now, int64_t wake)
{
	bool usable = false;
	for (size_t i = 0; i < m->npaths && !usable; i++)
		usable = mp_usable(&m->paths[i]);
	if (usable) {
		struct mp_cmd *c = take_held(m);
		pthread_mutex_unlock(&m->lock);
		bool again = false;
		while (c) {
			struct mp_cmd *next = c->next;
			int rc = mp_dispatch(m, c);
			if (rc == -EAGAIN) {
				pthread_mutex_lock(&m->lock);
				mp_hold(m, c);
				pthread_mutex_unlock(&m->lock);
				again = true;
			} else if (rc) {
				mp_fail(m, c, rc);
			}
			c = next;
		}
		pthread_mutex_lock(&m->lock);
		return again ? now + 10 : wake;
	}
	int64_t deadline = m->nopath_since ? m->nopath_since + m->cfg.replacement_timeout_ms : 0;
	bool by_stop = m->stop_by_ms && (!deadline || m->stop_by_ms < deadline);
	if (by_stop)
		deadline = m->stop_by_ms;
	if (!deadline)
		return wake;
	if (now < deadline)
		return deadline < wake ? deadline : wake;
	unsigned n = m->nheld;
	struct mp_cmd *c = take_held(m);
	m->nopath_failing = true;
	int64_t since = m->nopath_since;
	pthread_mutex_unlock(&m->lock);
	if (by_stop) /* stopping (mpath_stopping): the grace ended first; nothing to say when none failed */
		log_msg(n ? LOG_LVL_ERR : LOG_LVL_INFO, "no usable path for %lld ms when the stop grace ended: %u commands failed",
			(long long)(since ? now - since : 0), n);
	else
		log_err("no usable path for %lld ms, replacement timeout: %u commands failed; new I/O fails until a path is "
			"back", (long long)(now - since), n);
	while (c) {
		struct mp_cmd *next = c->next;
		mp_fail(m, c, -ETIMEDOUT);
		c = next;
	}
	pthread_mutex_lock(&m->lock);
	return wake;
}

/* The mpath's thread: see the file comment. */
static void *mp_thread(void *arg)
{
	struct mpath *m = arg;
	pthread_mutex_lock(&m->lock);
	while (!m->closing) {
		int64_t now = clk_now_ms(), wake = now + 1000;
		bool checked = false;
		for (size_t i = 0; i < m->npaths && !checked; i++) {
			struct mpath_path *p = &m->paths[i];
			/* also, every MP_RECHECK_MS, a path its ALUA state keeps out (standby may become active) */
			bool parked = p->checked && mp_alua_rank(p->alua) >= MP_RANK_UNUSABLE;
			if (p->state != MP_SLOT_READY || !p->sess_up || (p->checked && !p->recheck && !parked))
				continue;
			if (!p->checked && !m->multi) { /* one path: the session's own recovery, as without multipath */
				p->checked = true;
				mp_note_paths(m);
				continue;
			}
			if (p->next_check_ms > now) {
				if (p->next_check_ms < wake)
					wake = p->next_check_ms;
				continue;
			}
			check_one(m, p, now);
			checked = true; /* the lock was dropped: look at the table again */
		}
		if (checked)
			continue;
		for (size_t i = 0; i < m->npaths; i++) {
			struct mpath_path *p = &m->paths[i];
			if (p->state == MP_SLOT_READY) {
				mp_log_transitions(m, p, now);
				if (p->down_ms && !p->down_logged && now + 100 < wake)
					wake = now + 100;
			}
		}
		wake = mp_watch_stalls(m, now, wake);
		if (m->closing)
			break;
		if (m->nheld)
			wake = serve_held(m, now, wake);
		if (m->closing)
			break;
		now = clk_now_ms();
		if (wake > now) {
			struct timespec ts = clk_deadline_ms(wake - now);
			pthread_cond_timedwait(&m->thread_cv, &m->lock, &ts);
		}
	}
	pthread_mutex_unlock(&m->lock);
	return NULL;
}

int mp_thread_start(struct mpath *m)
{
	return -thread_start_quiet(&m->thread, mp_thread, m);
}

int mpath_fail_ifindex(struct mpath *m, int ifindex, const char *reason)
{
	struct iscsi_session *ss[MPATH_MAX_PATHS];
	int n = 0;
	pthread_mutex_lock(&m->lock);
	for (size_t i = 0; i < m->npaths; i++) {
		struct mpath_path *p = &m->paths[i];
		if (p->state == MP_SLOT_READY && p->sess_up && ifindex > 0 && p->ifindex == ifindex) {
			p->down_cause = reason;
			ss[n++] = p->s;
		}
	}
	pthread_mutex_unlock(&m->lock);
	for (int i = 0; i < n; i++)
		iscsi_session_drop(ss[i], reason);
	return n;
}

void mpath_path_set_ifindex(struct mpath_path *p, int ifindex)
{
	pthread_mutex_lock(&p->m->lock);
	p->ifindex = ifindex;
	pthread_mutex_unlock(&p->m->lock);
}

void mpath_paths_route_check(struct mpath *m, int (*lookup)(void *arg, const char *host, unsigned port), void *arg)
{
	for (size_t i = 0; i < MPATH_MAX_PATHS; i++) {
		pthread_mutex_lock(&m->lock);
		if (i >= m->npaths) {
			pthread_mutex_unlock(&m->lock);
			return;
		}
		struct mpath_path *p = &m->paths[i];
		if (p->state != MP_SLOT_READY) {
			pthread_mutex_unlock(&m->lock);
			continue;
		}
		char host[ISCSI_URL_HOST_MAX];
		snprintf(host, sizeof(host), "%s", p->host);
		unsigned port = p->port;
		struct iscsi_session *s = p->s;
		bool up = p->sess_up;
		pthread_mutex_unlock(&m->lock);
		int ifindex = lookup(arg, host, port);
		if (ifindex < 0)
			continue;
		pthread_mutex_lock(&m->lock);
		if (ifindex > 0)
			p->ifindex = ifindex;
		else if (up && !p->down_cause) /* a link down already named the cause */
			p->down_cause = "route gone";
		pthread_mutex_unlock(&m->lock);
		if (ifindex > 0 && !up)
			iscsi_session_retry_now(s);
		else if (ifindex == 0 && up)
			iscsi_session_drop(s, "route gone");
	}
}

size_t mpath_get_stats(struct mpath *m, struct mpath_stats *st, struct mpath_path_info *out, size_t cap)
{
	struct iscsi_session *ss[MPATH_MAX_PATHS];
	size_t n = 0;
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&m->lock);
	for (size_t i = 0; i < m->npaths; i++) {
		const struct mpath_path *p = &m->paths[i];
		if (p->state != MP_SLOT_READY)
			continue;
		st->paths++;
		if (mp_usable(p))
			st->paths_up++;
		if (n < cap) {
			struct mpath_path_info *o = &out[n];
			memset(o, 0, sizeof(*o));
			snprintf(o->host, sizeof(o->host), "%s", p->host);
			o->port = p->port;
			o->transport = p->transport;
			o->up = mp_usable(p);
			o->alua_state = p->alua;
			o->commands = p->commands;
			o->errors = p->errors;
			o->failovers = p->failovers;
			o->outstanding = p->outstanding;
			ss[n++] = p->s;
		}
	}
	st->paths_refused = m->refused;
	st->failovers = m->failovers;
	st->held = m->nheld;
	pthread_mutex_unlock(&m->lock);
	for (size_t i = 0; i < n; i++) {
		uint64_t lat[LAT_BUCKETS];
		iscsi_session_get_latency(ss[i], lat);
		out[i].p50_us = lat_hist_percentile(lat, 50);
		out[i].p99_us = lat_hist_percentile(lat, 99);
	}
	return n;
}

/* The sessions of attached paths (READY or refused after a reconnect), copied under the lock. */
static size_t sessions(struct mpath *m, struct iscsi_session **ss)
{
	size_t n = 0;
	pthread_mutex_lock(&m->lock);
	for (size_t i = 0; i < m->npaths; i++)
		if ((m->paths[i].state == MP_SLOT_READY || m->paths[i].state == MP_SLOT_REFUSED) && m->paths[i].s)
			ss[n++] = m->paths[i].s;
	pthread_mutex_unlock(&m->lock);
	return n;
}

void mpath_session_stats(struct mpath *m, struct iscsi_session_stats *out)
{
	struct iscsi_session *ss[MPATH_MAX_PATHS];
	size_t n = sessions(m, ss);
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&m->lock);
	out->max_outstanding = m->peak_out; /* the set's peak: the paths' own peaks need not coincide */
	pthread_mutex_unlock(&m->lock);
	for (size_t i = 0; i < n; i++) {
		struct iscsi_session_stats st;
		iscsi_session_get_stats(ss[i], &st);
		out->commands += st.commands;
		out->bytes_read += st.bytes_read;
		out->bytes_written += st.bytes_written;
		out->outstanding += st.outstanding;
		out->payload_bytes_copied += st.payload_bytes_copied;
		out->reconnects += st.reconnects;
		out->tx_direct += st.tx_direct;
		out->tx_kicks += st.tx_kicks;
		out->event_wakeups += st.event_wakeups;
	}
}

void mpath_latency(struct mpath *m, uint64_t out[LAT_BUCKETS])
{
	struct iscsi_session *ss[MPATH_MAX_PATHS];
	size_t n = sessions(m, ss);
	memset(out, 0, sizeof(uint64_t) * LAT_BUCKETS);
	for (size_t i = 0; i < n; i++) {
		uint64_t lat[LAT_BUCKETS];
		iscsi_session_get_latency(ss[i], lat);
		for (size_t b = 0; b < LAT_BUCKETS; b++)
			out[b] += lat[b];
	}
}

void mpath_stopping(struct mpath *m, int grace_ms)
{
	struct iscsi_session *ss[MPATH_MAX_PATHS];
	size_t n = 0;
	pthread_mutex_lock(&m->stop_lock);
	pthread_mutex_lock(&m->lock);
	int64_t by = clk_now_ms() + (grace_ms > 0 ? grace_ms : 0);
	if (!m->stop_by_ms || by < m->stop_by_ms)
		m->stop_by_ms = by;
	/* also a path being checked: its probe stops too (a path attached later: mpath_path_attach) */
	for (size_t i = 0; i < m->npaths; i++)
		if (m->paths[i].s && m->paths[i].state != MP_SLOT_FREE)
			ss[n++] = m->paths[i].s;
	pthread_cond_signal(&m->thread_cv);
	pthread_mutex_unlock(&m->lock);
	for (size_t i = 0; i < n; i++)
		iscsi_session_stopping(ss[i], grace_ms);
	pthread_mutex_unlock(&m->stop_lock);
}

int mpath_drain(struct mpath *m, int timeout_ms)
{
	struct timespec dl = clk_deadline_ms(timeout_ms);
	int rc = 0;
	pthread_mutex_lock(&m->lock);
	atomic_fetch_add(&m->drain_waiters, 1); /* before the count is read: run_callback_unlock */
	/* also after the replacement timeout: what is out on a path completes when its session fails it */
	while (m->total_out > 0 || atomic_load(&m->callbacks_running) > 0)
		if (pthread_cond_timedwait(&m->drain_cv, &m->lock, &dl) == ETIMEDOUT) {
			rc = -ETIMEDOUT;
			break;
		}
	atomic_fetch_sub(&m->drain_waiters, 1);
	pthread_mutex_unlock(&m->lock);
	return rc;
}

void mpath_close(struct mpath *m, int timeout_ms)
{
	struct iscsi_session *ss[MPATH_MAX_PATHS];
	size_t n = sessions(m, ss);
	pthread_mutex_lock(&m->lock);
	m->closing = true;
	pthread_cond_broadcast(&m->thread_cv);
	pthread_cond_broadcast(&m->slot_cv);
	pthread_mutex_unlock(&m->lock);
	pthread_join(m->thread, NULL);
	for (size_t i = 0; i < n; i++)
		iscsi_session_close(ss[i], timeout_ms); /* what is left completes with -ECONNABORTED: delivered */
	pthread_mutex_lock(&m->lock);
	struct mp_cmd *c = take_held(m);
	pthread_mutex_unlock(&m->lock);
	while (c) {
		struct mp_cmd *next = c->next;
		mp_fail(m, c, -ECONNABORTED);
		c = next;
	}
	pthread_cond_destroy(&m->slot_cv);
	pthread_cond_destroy(&m->drain_cv);
	pthread_cond_destroy(&m->thread_cv);
	pthread_mutex_destroy(&m->stop_lock);
	pthread_mutex_destroy(&m->lock);
	free(m->ctx);
	free(m);
}
