/* SPDX-License-Identifier: MIT */
/*
 * Multipath (mpath.h): the path table, submission through the best usable
 * path, the re-issue of commands a path handed back, and the hold queue
 * for when no path is usable.  The mpath's thread (mpath_thread.c) checks
 * reconnected paths, re-issues held commands and fails them at the
 * deadline.
 */
#include "mpath_priv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "initiator/scsi/alua.h"
#include "initiator/util/clock.h"
#include "initiator/util/defaults.h"
#include "initiator/util/log.h"

int mp_alua_rank(int state)
{
	return alua_state_rank(state);
}

int mp_rank(const struct mpath_path *p)
{
	int rank = mp_alua_rank(p->alua);
	return p->fenced && rank < MP_RANK_FENCED ? MP_RANK_FENCED : rank;
}

bool mp_usable(const struct mpath_path *p)
{
	return p->state == MP_SLOT_READY && p->sess_up && p->checked && mp_alua_rank(p->alua) < MP_RANK_UNUSABLE;
}

/* Keep nopath_since right after path states changed.  Lock held. */
void mp_note_paths(struct mpath *m)
{
	bool any = false;
	for (size_t i = 0; i < m->npaths && !any; i++)
		any = mp_usable(&m->paths[i]);
	if (any) {
		m->nopath_since = 0;
		m->nopath_failing = false;
	} else if (!m->nopath_since && m->attached) {
		m->nopath_since = clk_now_ms();
	}
}

/* The path the next command takes (ALUA's best group, then the selector), or NULL.  Lock held. */
struct mpath_path *mp_pick(struct mpath *m)
{
	if (m->npaths == 1) { /* one path: what the ranking and the selector below come to, without them */
		struct mpath_path *p = &m->paths[0];
		if (!mp_usable(p))
			return NULL;
		m->sel.next = 1;
		return p;
	}
	int best = MP_RANK_UNUSABLE;
	for (size_t i = 0; i < m->npaths; i++)
		if (mp_usable(&m->paths[i]) && mp_rank(&m->paths[i]) < best)
			best = mp_rank(&m->paths[i]);
	if (best == MP_RANK_UNUSABLE)
		return NULL;
	struct path_sel_path snap[MPATH_MAX_PATHS];
	for (size_t i = 0; i < m->npaths; i++) {
		const struct mpath_path *p = &m->paths[i];
		snap[i].usable = mp_usable(p) && mp_rank(p) == best;
		snap[i].outstanding = p->outstanding;
	}
	int i = path_select(&m->sel, snap, m->npaths);
	return i < 0 ? NULL : &m->paths[i];
}

/* Put c on the hold queue (no usable path now); the mpath's thread takes it from there.  Lock held. */
void mp_hold(struct mpath *m, struct mp_cmd *c)
{
	c->next = NULL;
	if (m->held_tail)
		m->held_tail->next = c;
	else
		m->held_head = c;
	m->held_tail = c;
	m->nheld++;
	pthread_cond_signal(&m->thread_cv);
}

/* Give c back to the free list.  Lock held. */
static void ctx_put(struct mpath *m, struct mp_cmd *c)
{
	if (c->worker) {
		m->worker_out--;
		pthread_cond_signal(&m->slot_cv);
	}
	m->total_out--;
	if (!m->total_out)
		pthread_cond_broadcast(&m->drain_cv);
	c->next = m->free;
	m->free = c;
}

/*
 * The caller's callback of a context just put back (lock held): runs it
 * with the lock dropped, counted.  The last one out wakes mpath_drain,
 * only when one waits: drain_waiters and callbacks_running are both
 * sequentially consistent, so either the drainer sees the count at 0 or
 * this sees the drainer.
 */
static void run_callback_unlock(struct mpath *m, iscsi_cmd_cb cb, void *arg, const struct iscsi_cmd_result *res)
{
	atomic_fetch_add_explicit(&m->callbacks_running, 1, memory_order_relaxed);
	pthread_mutex_unlock(&m->lock);
	cb(arg, res);
	if (atomic_fetch_sub(&m->callbacks_running, 1) == 1 && atomic_load(&m->drain_waiters)) {
		pthread_mutex_lock(&m->lock); /* mpath_drain reads the count under the lock */
		pthread_cond_broadcast(&m->drain_cv);
		pthread_mutex_unlock(&m->lock);
	}
}

void mp_complete(struct mpath *m, struct mp_cmd *c, const struct iscsi_cmd_result *res)
{
	iscsi_cmd_cb cb = c->cb;
	void *arg = c->arg;
	pthread_mutex_lock(&m->lock);
	ctx_put(m, c);
	run_callback_unlock(m, cb, arg, res);
}

void mp_fail(struct mpath *m, struct mp_cmd *c, int err)
{
	struct iscsi_cmd_result res = {.err = err};
	mp_complete(m, c, &res);
}

/* The path c goes down, counted in its outstanding commands; NULL: c is held.  Lock held. */
static struct mpath_path *route(struct mpath *m, struct mp_cmd *c)
{
	struct mpath_path *p = m->closing ? NULL : mp_pick(m);
	if (!p) {
		mp_hold(m, c);
		return NULL;
	}
	if (++p->outstanding == 1 && !m->stall_ticking) { /* the stall watch looks from the first command on */
		m->stall_ticking = true;
		pthread_cond_signal(&m->thread_cv);
	}
	c->path = p;
	return p;
}

/*
 * Submit c on path p (chosen by route).  Returns 0 (c's callback will
 * run), 1 when p refused it (-ENOTCONN: marked down, choose again), or
 * the session's other error (-EINVAL, -EAGAIN); c is then still the
 * caller's.  Lock NOT held.
 */
static int send_on(struct mpath *m, struct mp_cmd *c, struct mpath_path *p)
{
	int rc = iscsi_session_submit(p->s, &c->cmd); /* c->cmd.cb is mp_done, its arg c */
	if (rc == 0)
		return 0;
	pthread_mutex_lock(&m->lock);
	p->outstanding--;
	if (rc == -ENOTCONN) { /* down or refusing: its hook says when it is back */
		p->sess_up = false;
		mp_note_paths(m);
	}
	pthread_mutex_unlock(&m->lock);
	return rc == -ENOTCONN ? 1 : rc;
}

/*
 * Send c down the best usable path, or hold it.  Returns 0 (c's callback
 * will run), or the session's error other than -ENOTCONN (-EINVAL,
 * -EAGAIN); c is then still the caller's.  Lock NOT held.
 */
int mp_dispatch(struct mpath *m, struct mp_cmd *c)
{
	for (;;) {
		pthread_mutex_lock(&m->lock);
		struct mpath_path *p = route(m, c);
		pthread_mutex_unlock(&m->lock);
		int rc = p ? send_on(m, c, p) : 0;
		if (rc != 1)
			return rc;
	}
}

enum mp_verdict mp_judge(const struct iscsi_cmd_result *res, int *alua_state)
{
	switch (res->err) {
	case 0:
		break;
	case -ETIMEDOUT:   /* handed back at the loss (hand_back) */
	case -ECONNRESET:
	case -ENOTCONN:
	case -ENETDOWN:
		return MP_PATH_LOST;
	default:
		return MP_DELIVER;
	}
	if (res->status != SCSI_STATUS_CHECK_CONDITION || !res->has_sense)
		return MP_DELIVER;
	const struct scsi_sense *s = &res->sense;
	switch (alua_classify_sense(s)) {
	case ALUA_SENSE_TRANSITIONING:
		*alua_state = ALUA_TRANSITIONING;
		return MP_PATH_STATE;
	case ALUA_SENSE_PATH:
		*alua_state = s->ascq == 0x0b ? ALUA_STANDBY : ALUA_UNAVAILABLE;
		return MP_PATH_STATE;
	case ALUA_SENSE_CHANGED:
		return MP_STATES_CHANGED;
	case ALUA_SENSE_OTHER:
		break;
	}
	return MP_DELIVER;
}

/* Completion of c on its path (event or recovery thread, in a session callback). */
static void mp_done(void *arg, const struct iscsi_cmd_result *res)
{
	struct mp_cmd *c = arg;
	struct mpath *m = c->m;
	struct mpath_path *p = c->path;
	int alua = -1;
	enum mp_verdict v = mp_judge(res, &alua);
	pthread_mutex_lock(&m->lock);
	p->outstanding--;
	p->commands++;
	/* past the stop grace (mpath_stopping) a command lost with its path fails: no path takes it any more */
	bool over = m->stop_by_ms && clk_now_ms() >= m->stop_by_ms;
	bool again = v != MP_DELIVER && m->multi && !m->closing && !over && c->tries < MP_TRIES_MAX;
	if (v != MP_DELIVER)
		p->errors++;
	if (!again) { /* the caller's result: the context goes back in this same lock round */
		iscsi_cmd_cb cb = c->cb;
		void *cb_arg = c->arg;
		ctx_put(m, c);
		run_callback_unlock(m, cb, cb_arg, res);
		return;
	}
	c->tries++;
	if (v == MP_PATH_STATE) {
		p->alua = alua;
		p->recheck = true;
	} else if (v == MP_STATES_CHANGED) {
		for (size_t i = 0; i < m->npaths; i++)
			m->paths[i].recheck = true;
	}
	if (v != MP_STATES_CHANGED) {
		p->failovers++;
		p->moved++;
		m->failovers++;
		int64_t stall = c->first_us ? clk_now_us() - c->first_us : 0;
		if (stall > p->moved_stall_us)
			p->moved_stall_us = stall;
	}
	mp_note_paths(m);
	pthread_cond_signal(&m->thread_cv);
	pthread_mutex_unlock(&m->lock);
	int rc = mp_dispatch(m, c);
	if (rc == -EAGAIN) {
		pthread_mutex_lock(&m->lock);
		mp_hold(m, c);
		pthread_mutex_unlock(&m->lock);
	} else if (rc) {
		mp_fail(m, c, rc);
	}
}

int mpath_submit(struct mpath *m, const struct iscsi_cmd *cmd)
{
	if (cmd->cdb_len == 0 || cmd->cdb_len > SCSI_CDB_MAX || (cmd->len && !cmd->buf) || !cmd->cb)
		return -EINVAL;
	bool worker = !iscsi_session_in_callback();
	pthread_mutex_lock(&m->lock);
	while (worker && !m->closing && m->worker_out >= m->cfg.queue_depth)
		pthread_cond_wait(&m->slot_cv, &m->lock);
	if (m->closing || m->nopath_failing) {
		pthread_mutex_unlock(&m->lock);
		return -ENOTCONN;
	}
	struct mp_cmd *c = m->free;
	if (!c) {
		pthread_mutex_unlock(&m->lock);
		return -EAGAIN;
	}
	m->free = c->next;
	if (++m->total_out > m->peak_out)
		m->peak_out = m->total_out;
	c->worker = worker;
	if (worker)
		m->worker_out++;
	c->cmd = *cmd;
	c->cmd.cb = mp_done; /* the session completes to us; the caller's callback is c->cb */
	c->cmd.arg = c;
	c->cb = cmd->cb;
	c->arg = cmd->arg;
	c->tries = 0;
	c->path = NULL;
	c->first_us = m->multi ? clk_pass_us() : 0; /* only a set of paths moves a command (mp_done) */
	struct mpath_path *p = route(m, c); /* in the same lock round as the context */
	pthread_mutex_unlock(&m->lock);
	int rc = p ? send_on(m, c, p) : 0;
	if (rc == 1)
		rc = mp_dispatch(m, c);
	if (rc) {
		pthread_mutex_lock(&m->lock);
		ctx_put(m, c);
		pthread_mutex_unlock(&m->lock);
	}
	return rc;
}

uint32_t mpath_max_cmd_bytes(const struct mpath *m)
{
	return atomic_load_explicit(&m->max_cmd_bytes, memory_order_relaxed);
}

struct iscsi_session *mpath_ctl_session(struct mpath *m)
{
	pthread_mutex_lock(&m->lock);
	struct iscsi_session *s = NULL;
	for (size_t i = 0; i < m->npaths && !s; i++)
		if (mp_usable(&m->paths[i]) && !m->paths[i].fenced)
			s = m->paths[i].s;
	for (size_t i = 0; i < m->npaths && !s; i++)
		if (mp_usable(&m->paths[i]))
			s = m->paths[i].s;
	for (size_t i = 0; i < m->npaths && !s; i++)
		if (m->paths[i].state == MP_SLOT_READY)
			s = m->paths[i].s;
	pthread_mutex_unlock(&m->lock);
	return s;
}

int mpath_create(const struct mpath_config *cfg, struct mpath **out)
{
	if (!cfg->queue_depth || cfg->queue_depth > ISCSI_QUEUE_DEPTH_MAX)
		return -EINVAL;
	struct mpath *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->cfg = *cfg;
	m->nctx = 2 * cfg->queue_depth + 8; /* as a session's tasks: callbacks may chain more */
	m->ctx = calloc(m->nctx, sizeof(*m->ctx));
	if (!m->ctx) {
		free(m);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->nctx; i++) {
		m->ctx[i].m = m;
		m->ctx[i].next = i + 1 < m->nctx ? &m->ctx[i + 1] : NULL;
	}
	m->free = &m->ctx[0];
	path_sel_init(&m->sel, cfg->policy);
	pthread_mutex_init(&m->lock, NULL);
	pthread_mutex_init(&m->stop_lock, NULL);
	clk_cond_init(&m->slot_cv);
	clk_cond_init(&m->drain_cv);
	clk_cond_init(&m->thread_cv);
	int rc = mp_thread_start(m);
	if (rc) {
		free(m->ctx);
		free(m);
		return rc;
	}
	*out = m;
	return 0;
}

struct mpath_path *mpath_path_new(struct mpath *m, const char *host, unsigned port)
{
	pthread_mutex_lock(&m->lock);
	struct mpath_path *p = NULL;
	size_t i = 0;
	while (i < m->npaths && m->paths[i].state != MP_SLOT_FREE)
		i++;
	if (i < MPATH_MAX_PATHS) {
		p = &m->paths[i];
		memset(p, 0, sizeof(*p));
		p->m = m;
		p->index = i;
		if (i == m->npaths)
			m->npaths++;
		snprintf(p->host, sizeof(p->host), "%s", host);
		p->port = port;
		p->state = MP_SLOT_OPENING;
		p->alua = MP_ALUA_NONE;
		p->transport = "tcp";
	}
	pthread_mutex_unlock(&m->lock);
	return p;
}

void mpath_path_recheck(struct mpath_path *p)
{
	pthread_mutex_lock(&p->m->lock);
	p->recheck = true;
	p->next_check_ms = 0;
	pthread_cond_signal(&p->m->thread_cv);
	pthread_mutex_unlock(&p->m->lock);
}

void mpath_path_discard(struct mpath_path *p)
{
	pthread_mutex_lock(&p->m->lock);
	p->state = MP_SLOT_FREE;
	pthread_mutex_unlock(&p->m->lock);
}

void mpath_path_state_hook(void *arg, bool up)
{
	struct mpath_path *p = arg;
	struct mpath *m = p->m;
	pthread_mutex_lock(&m->lock);
	p->sess_up = up;
	if (up) {
		p->checked = p->verified; /* else checked again before it carries I/O: it may lead elsewhere now */
		p->verified = false;
	} else if (!p->down_ms) {
		p->down_ms = clk_now_ms();
		p->moved = 0;
		p->moved_stall_us = 0;
		p->down_logged = false;
	}
	mp_note_paths(m);
	pthread_cond_signal(&m->thread_cv);
	pthread_mutex_unlock(&m->lock);
}

int mpath_path_verify_hook(void *arg, struct iscsi_session *s, char *why, size_t cap)
{
	struct mpath_path *p = arg;
	struct mpath *m = p->m;
	pthread_mutex_lock(&m->lock);
	p->verified = false;
	pthread_mutex_unlock(&m->lock);
	int alua = MP_ALUA_NONE;
	int rc = m->cfg.check_path ? m->cfg.check_path(m->cfg.check_arg, s, &alua, why, cap) : 0;
	pthread_mutex_lock(&m->lock);
	if (rc == 0) {
		p->alua = alua;
		p->verified = true;
		p->fenced = false;
	} else if (rc == -ENODEV && p->state == MP_SLOT_READY && m->multi) {
		log_err("path " ISCSI_HOSTPORT_FMT " refused: %s", ISCSI_HOSTPORT_ARGS(p->host, p->port), why);
		p->state = MP_SLOT_REFUSED; /* its session stays open, unused, until mpath_close */
		m->refused++;
	} else if (rc == -ENODEV) {
		p->fenced = true; /* the only path: its session fails the I/O with EIO */
	}
	mp_note_paths(m);
	pthread_cond_signal(&m->thread_cv);
	pthread_mutex_unlock(&m->lock);
	return rc;
}

void mpath_path_refuse(struct mpath_path *p, struct iscsi_session *s, const char *why)
{
	struct mpath *m = p->m;
	log_err("path " ISCSI_HOSTPORT_FMT " refused: %s", ISCSI_HOSTPORT_ARGS(p->host, p->port), why);
	pthread_mutex_lock(&m->stop_lock); /* mpath_stopping is not calling into s */
	pthread_mutex_lock(&m->lock);
	p->state = MP_SLOT_REFUSED;
	p->s = NULL;
	m->refused++;
	pthread_mutex_unlock(&m->lock);
	pthread_mutex_unlock(&m->stop_lock);
	iscsi_session_close(s, 2000);
}

int mpath_path_attach(struct mpath_path *p, struct iscsi_session *s, const char *transport)
{
	struct mpath *m = p->m;
	uint32_t max = iscsi_session_max_cmd_bytes(s);
	pthread_mutex_lock(&m->lock);
	p->s = s;
	p->transport = transport;
	p->state = MP_SLOT_CHECKING; /* not used, not offered for control commands, until checked */
	uint32_t cur = atomic_load_explicit(&m->max_cmd_bytes, memory_order_relaxed);
	bool too_small = m->attached && max && (!cur || max < cur);
	int64_t stop_by = m->stop_by_ms;
	pthread_mutex_unlock(&m->lock);
	if (stop_by) { /* attached after mpath_stopping took its list: the stop reaches it here */
		int64_t left = stop_by - clk_now_ms();
		iscsi_session_stopping(s, left > 0 ? (int)left : 0);
	}
	char why[256] = "";
	int alua = MP_ALUA_NONE;
	int rc = 0;
	if (too_small) {
		snprintf(why, sizeof(why), "its transport (%s) moves at most %u bytes per command, the mount's I/O needs more",
			 transport, max);
		rc = -ENODEV;
	} else if (m->cfg.check_path) {
		rc = m->cfg.check_path(m->cfg.check_arg, s, &alua, why, sizeof(why));
	}
	if (rc == -ENODEV) {
		mpath_path_refuse(p, s, why);
		return rc;
	}
	pthread_mutex_lock(&m->lock);
	if (!m->attached)
		atomic_store_explicit(&m->max_cmd_bytes, max, memory_order_relaxed);
	p->state = MP_SLOT_READY;
	p->sess_up = iscsi_session_up(s);
	p->checked = rc == 0;
	p->alua = alua;
	m->attached++;
	bool multi = m->attached >= 2;
	m->multi = multi;
	size_t n = 0;
	struct iscsi_session *ss[MPATH_MAX_PATHS];
	for (size_t i = 0; multi && i < m->npaths; i++)
		if (m->paths[i].state == MP_SLOT_READY)
			ss[n++] = m->paths[i].s;
	mp_note_paths(m);
	pthread_cond_signal(&m->thread_cv);
	size_t attached = m->attached;
	pthread_mutex_unlock(&m->lock);
	/* Two paths or more: a lost path hands its commands back at once, to be re-issued on another. */
	for (size_t i = 0; i < n; i++)
		iscsi_session_join_multipath(ss[i]);
	if (rc == -ESHUTDOWN) /* the caller is stopping (iscsi_session_stopping): nothing to say */
		log_debug("path " ISCSI_HOSTPORT_FMT ": not checked: stopping", ISCSI_HOSTPORT_ARGS(p->host, p->port));
	else if (rc)
		log_warn("path " ISCSI_HOSTPORT_FMT ": not usable yet (%s): checked again later",
			 ISCSI_HOSTPORT_ARGS(p->host, p->port), why[0] ? why : strerror(-rc));
	else if (p->index > 0)
		log_info("path " ISCSI_HOSTPORT_FMT " (%s, ALUA %s) added: %zu paths", ISCSI_HOSTPORT_ARGS(p->host, p->port),
			 transport, mpath_alua_name(alua), attached);
	return rc;
}
