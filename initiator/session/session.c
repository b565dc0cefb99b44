/* SPDX-License-Identifier: MIT */
/*
 * iSCSI session, full feature phase (RFC 7143): the public API of
 * session.h (open, submit, exec, statistics, stopping, drain, close) and
 * the hook table handed to the transport.  The session's concerns live in
 * session_task.c (task table, queues), session_tx.c (PDUs out),
 * session_rx.c (PDUs in), session_timer.c (deadlines, keep-alive),
 * session_recovery.c (ERL 0) and session_connect.c (login); their shared
 * state and internal interface is session_priv.h.  See session.h and
 * docs/design.md for the threading model: `lock` guards the session;
 * submitters take it briefly, the transport's event thread takes it in the
 * hooks.  Completion callbacks run with the lock released.
 */
#include "session_priv.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "initiator/transport/cancel.h"
#include "initiator/util/clock.h"
#include "initiator/util/latency.h"
#include "initiator/util/log.h"

/* The session's side of the transport interface (transport.h). */
const struct iscsi_transport_hooks sess_hooks = {
	.tick = sess_hook_tick,
	.tx_done = sess_hook_tx_done,
	.tx_fill = sess_hook_tx_fill,
	.tx_idle = sess_hook_tx_idle,
	.rx_data_dest = sess_hook_rx_data_dest,
	.rx_pdu = sess_hook_rx_pdu,
	.conn_lost = sess_hook_conn_lost,
	.task_owns = sess_hook_task_owns,
	.guest_fd = sess_hook_guest_fd,
	.guest_run = sess_hook_guest_run,
	.guest_live = sess_hook_guest_live,
};

static bool on_event_thread(const struct iscsi_session *s)
{
	return s->event_thread_known && pthread_equal(s->event_thread, pthread_self());
}

static void session_free(struct iscsi_session *s)
{
	log_forget_key(s); /* the counts of repeated lines its event threads left */
	sess_wipe_creds(s);
	free(s->sorted);
	free(s->tasks);
	if (s->cancel_fd >= 0)
		close(s->cancel_fd);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->slot_cv);
	pthread_cond_destroy(&s->state_cv);
	pthread_cond_destroy(&s->rec_cv);
	free(s);
}

int iscsi_session_open(const struct iscsi_session_config *cfg, struct iscsi_session **out,
		       char *err, size_t err_cap)
{
	struct iscsi_session *s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, err_cap, "out of memory");
		return -ENOMEM;
	}
	s->cfg = *cfg;
	s->cancel_fd = -1;
	atomic_store(&s->guest_fd, -1);
	unsigned qd = cfg->queue_depth ? cfg->queue_depth : ISCSI_QUEUE_DEPTH_DEFAULT;
	if (qd > ISCSI_QUEUE_DEPTH_MAX)
		qd = ISCSI_QUEUE_DEPTH_MAX;
	s->cfg.queue_depth = qd;
	if (s->cfg.replacement_timeout_ms < 0)
		s->cfg.replacement_timeout_ms = 0;
	s->ntasks = 2 * qd + 8; /* worker submissions use qd; completions may chain more (TASKS_MAX at most) */
	s->tasks = calloc(s->ntasks, sizeof(*s->tasks));
	s->sorted = calloc(s->ntasks, sizeof(*s->sorted));
	pthread_mutex_init(&s->lock, NULL);
	/* Every wait on these takes a CLOCK_MONOTONIC deadline (clk_deadline_ms). */
	int cv_rc = clk_cond_init(&s->slot_cv);
	if (!cv_rc)
		cv_rc = clk_cond_init(&s->state_cv);
	if (!cv_rc)
		cv_rc = clk_cond_init(&s->rec_cv);
	s->cancel_fd = iscsi_cancel_new();
	if (cv_rc || !s->tasks || !s->sorted || s->cancel_fd < 0) {
		session_free(s);
		snprintf(err, err_cap, "out of memory");
		return -ENOMEM;
	}
	for (unsigned i = s->ntasks; i-- > 0;) {
		s->tasks[i].index = (uint16_t)i;
		s->tasks[i].next = s->free_list;
		s->free_list = &s->tasks[i];
	}
	static const uint8_t no_isid[6];
	if (memcmp(cfg->isid, no_isid, sizeof(no_isid)))
		memcpy(s->isid, cfg->isid, sizeof(s->isid));
	else
		iscsi_isid_random(s->isid);

	/* CHAP credentials stay in s->cfg for logins after a connection loss; wiped at close. */
	struct iscsi_transport *t = NULL;
	struct iscsi_login_result lr;
	int rc;
	/* A busy target gets a few more tries with back-off (0.25, 0.5, 1, 2 s), as in recovery. */
	for (int64_t delay = RECONNECT_BASE_MS;; delay *= 2) {
		rc = sess_connect_login(s, cfg->timeout_ms, 0, &t, &lr, err, err_cap);
		if (rc == 0 || !sess_login_busy(&lr) || delay > 2000)
			break;
		log_warn("%s: retrying in %lld ms", err, (long long)delay);
		struct timespec ts = clk_ms_ts(delay);
		nanosleep(&ts, NULL);
	}
	if (rc) {
		session_free(s);
		return rc;
	}
	sess_adopt_login(s, t, &lr);
	s->logout_itt = itt_make(ITT_GEN_LOGOUT, 0);
	s->ping_itt = itt_make(ITT_GEN_PING, 0);
	if (s->cfg.noop_interval_ms > 0 && s->cfg.noop_timeout_ms <= 0)
		s->cfg.noop_timeout_ms = ISCSI_NOOP_TIMEOUT_DEFAULT_S * 1000;
	s->state = SS_UP;
	rc = s->t->ops->start(s->t, &sess_hooks, s, &s->params);
	if (rc) {
		snprintf(err, err_cap, "cannot start the connection: %s", strerror(-rc));
		goto fail_t;
	}
	rc = -pthread_create(&s->rec_thread, NULL, sess_recovery_thread, s);
	if (rc) {
		snprintf(err, err_cap, "cannot start the recovery thread: %s", strerror(-rc));
		goto fail_t;
	}
	s->rec_started = true;
	*out = s;
	return 0;
fail_t:
	s->closing = true;
	s->t->ops->shutdown(s->t);
	s->t->ops->destroy(s->t);
	session_free(s);
	return rc;
}

/* New commands are refused: closing, shut down, logging out, down past replacement_timeout_ms, or the stop grace over. */
static bool refusing(const struct iscsi_session *s)
{
	return s->closing || s->state == SS_CLOSED || s->fail_fast || (s->logout_want && !s->logout_relogin) ||
	       (s->stop_by_ms && sess_grace_over(s, clk_now_ms())); /* the clock only while stopping */
}

/*
 * A task taken from the free list as a fresh one: every field zero but
 * its slot's identity (index, gen), its command (the caller copies it
 * whole) and the two last fields, its R2T ring (read only below
 * r2t_count) and deferred_res (read only once doomed or done_deferred set
 * it): most of the task's bytes, whose zeroing was most of a submission's
 * own cost.
 */
#define TASK_END(f) (offsetof(struct task, f) + sizeof(((struct task *)0)->f))
static_assert(offsetof(struct task, next) == 0 && TASK_END(next) == offsetof(struct task, index) &&
		      TASK_END(index) == offsetof(struct task, gen) && TASK_END(r2tq) == offsetof(struct task, deferred_res) &&
		      sizeof(struct task) - TASK_END(deferred_res) < _Alignof(struct task),
	      "task_reset: struct task no longer ends with r2tq and deferred_res, or no longer starts with next, index, gen");

static void task_reset(struct task *t)
{
	t->next = NULL;
	memset((char *)t + TASK_END(gen), 0, offsetof(struct task, cmd) - TASK_END(gen));
	memset((char *)t + TASK_END(cmd), 0, offsetof(struct task, r2tq) - TASK_END(cmd));
}

/*
 * iscsi_session_submit, and iscsi_session_exec's with sync (not fenced):
 * such a command is refused with -ESHUTDOWN once the caller is stopping
 * (iscsi_session_stopping), also while it waits for a slot.  The
 * identity check's own commands (cfg.verify on the recovery thread) go out
 * while every other one parks, never wait for a slot (the parked commands
 * may hold them all) and pass the replacement timeout's refusal.
 */
static int submit(struct iscsi_session *s, const struct iscsi_cmd *cmd, bool sync)
{
	if (cmd->cdb_len == 0 || cmd->cdb_len > SCSI_CDB_MAX || (cmd->len && !cmd->buf) ||
	    (cmd->dir == ISCSI_DIR_NONE && cmd->len))
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	bool probe = s->verifying && sync && pthread_equal(pthread_self(), s->rec_thread);
	bool ev = on_event_thread(s) || iscsi_session_in_callback() || probe;
	while (!refusing(s) && !(sync && s->sync_stop_ms) && !ev && s->worker_outstanding >= s->cfg.queue_depth) {
		s->slot_waiting++;
		pthread_cond_wait(&s->slot_cv, &s->lock);
		s->slot_waiting--;
	}
	bool refuse = probe ? s->closing || s->state == SS_CLOSED : refusing(s);
	if (refuse || (sync && s->sync_stop_ms)) {
		int rc = refuse ? -ENOTCONN : -ESHUTDOWN;
		pthread_mutex_unlock(&s->lock);
		return rc;
	}
	if (s->fenced && !sync) {
		pthread_mutex_unlock(&s->lock);
		return -EIO;
	}
	struct task *t = s->free_list;
	if (!t) { /* only reachable from the event thread or a callback */
		pthread_mutex_unlock(&s->lock);
		return -EAGAIN;
	}
	s->free_list = t->next;
	struct iscsi_transport *direct = NULL; /* try_send on it once the lock is dropped */
	unsigned in_flight = 0;
	task_reset(t);
	t->in_use = true;
	t->probe = probe;
	t->counted = !ev;
	t->cmd = *cmd;
	t->sync = sync;
	t->seq = s->next_seq++;
	t->submit_us = clk_pass_us(); /* the pass clock (clock.h): both from CLOCK_MONOTONIC */
	t->submit_ms = t->submit_us / 1000;
	sess_task_assign_itt(t);
	s->outstanding++;
	if (!ev)
		s->worker_outstanding++;
	if (s->outstanding > s->stats.max_outstanding)
		s->stats.max_outstanding = s->outstanding;
	if (s->state != SS_UP || s->relogin_pending || (s->verifying && !probe)) {
		/* Being recovered (or about to log out and in again): parked until requeue_parked. */
		t->lost_ms = s->lost_ms; /* it meets the loss in progress (0: none) */
	} else if (!s->win_head && iscsi_sn_le(s->cmdsn, s->maxcmdsn)) {
		t->cmdsn = s->cmdsn++;
		sess_txq_push(s, t);
		if (!ev && s->t->ops->try_send) {
			/* sent below, lock dropped (tx_fill takes it); direct_senders keeps s->t alive */
			direct = s->t;
			in_flight = s->outstanding;
			atomic_fetch_add_explicit(&s->direct_senders, 1, memory_order_relaxed);
		} else {
			s->t->ops->kick(s->t); /* under the lock: s->t cannot be replaced meanwhile */
			if (!on_event_thread(s)) /* the event thread's own submissions (its guest) go out in its next pass */
				atomic_fetch_add_explicit(&s->tx_kicks, 1, memory_order_relaxed);
		}
	} else {
		sess_winq_push(s, t);
	}
	pthread_mutex_unlock(&s->lock);
	if (direct) {
		sess_tx_direct = true;
		int ran = direct->ops->try_send(direct, in_flight);
		sess_tx_direct = false;
		if (!ran) {
			direct->ops->kick(direct);
			atomic_fetch_add_explicit(&s->tx_kicks, 1, memory_order_relaxed);
		}
		atomic_fetch_sub_explicit(&s->direct_senders, 1, memory_order_release);
	}
	return 0;
}

int iscsi_session_submit(struct iscsi_session *s, const struct iscsi_cmd *cmd)
{
	return submit(s, cmd, false);
}

struct sync_wait {
	pthread_mutex_t m;
	pthread_cond_t cv;
	bool done;
	struct iscsi_cmd_result res;
};

static void sync_done(void *arg, const struct iscsi_cmd_result *res)
{
	struct sync_wait *w = arg;
	pthread_mutex_lock(&w->m);
	w->res = *res;
	w->done = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->m);
}

int iscsi_session_exec(struct iscsi_session *s, struct iscsi_cmd *cmd, struct iscsi_cmd_result *res)
{
	struct sync_wait w = {.done = false};
	pthread_mutex_init(&w.m, NULL);
	pthread_cond_init(&w.cv, NULL);
	cmd->cb = sync_done;
	cmd->arg = &w;
	int rc = submit(s, cmd, true);
	if (rc == 0) {
		pthread_mutex_lock(&w.m);
		while (!w.done)
			pthread_cond_wait(&w.cv, &w.m);
		pthread_mutex_unlock(&w.m);
		*res = w.res;
	}
	pthread_mutex_destroy(&w.m);
	pthread_cond_destroy(&w.cv);
	return rc;
}

uint32_t iscsi_session_max_cmd_bytes(const struct iscsi_session *s)
{
	return s->cfg.transport->max_cmd_bytes;
}

const struct iscsi_params *iscsi_session_params(const struct iscsi_session *s) { return &s->params; }

void iscsi_session_get_stats(struct iscsi_session *s, struct iscsi_session_stats *out)
{
	pthread_mutex_lock(&s->lock);
	*out = s->stats;
	out->outstanding = s->outstanding;
	if (s->t && s->t->ops->payload_copied)
		out->payload_bytes_copied += s->t->ops->payload_copied(s->t);
	out->tx_kicks = atomic_load_explicit(&s->tx_kicks, memory_order_relaxed);
	if (s->t && s->t->ops->wakeups)
		out->event_wakeups += s->t->ops->wakeups(s->t);
	pthread_mutex_unlock(&s->lock);
}

void iscsi_session_get_latency(struct iscsi_session *s, uint64_t out[LAT_BUCKETS])
{
	lat_hist_snapshot(&s->lat, out);
}

/* A completion's callback has not returned yet (never called from a callback). */
static bool callbacks_busy(struct iscsi_session *s)
{
	return atomic_load(&s->callbacks_running) > 0;
}

int iscsi_session_drain(struct iscsi_session *s, int timeout_ms)
{
	struct timespec dl = clk_deadline_ms(timeout_ms);
	int rc = 0;
	pthread_mutex_lock(&s->lock);
	atomic_fetch_add(&s->drain_waiters, 1); /* before callbacks_busy reads the count */
	while ((s->state != SS_CLOSED && !s->fail_fast && s->outstanding > 0) || callbacks_busy(s))
		if (pthread_cond_timedwait(&s->state_cv, &s->lock, &dl) == ETIMEDOUT) {
			rc = -ETIMEDOUT;
			break;
		}
	atomic_fetch_sub(&s->drain_waiters, 1);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* A synchronous command the target has not been sent (parked, waiting for the window or in the tx queue). */
static bool pick_sync_unsent(const struct task *t)
{
	return t->sync && !t->cmd_sent && !t->tx_pending && !t->done_deferred;
}

void iscsi_session_stopping(struct iscsi_session *s, int grace_ms)
{
	pthread_mutex_lock(&s->lock);
	int64_t now = clk_now_ms();
	int64_t by = now + (grace_ms > 0 ? grace_ms : 0);
	if (!s->stop_by_ms || by < s->stop_by_ms)
		s->stop_by_ms = by;
	s->stop_grace_ms = grace_ms > 0 ? grace_ms : 0; /* answers move stop_by_ms on (sess_stop_progress) */
	if (s->attempt_deadline_ms > s->stop_by_ms && !s->closing)
		iscsi_cancel_fire(s->cancel_fd); /* recover() re-arms it and tries again by stop_by_ms */
	pthread_cond_broadcast(&s->rec_cv);
	if (!s->sync_stop_ms) {
		/* Synchronous commands: new ones are refused, unsent ones fail now, sent ones in sess_hook_tick. */
		s->sync_stop_ms = now;
		pthread_cond_broadcast(&s->slot_cv);
		sess_winq_drop(s, pick_sync_unsent);
		unsigned n = sess_complete_tasks(s, pick_sync_unsent, -ESHUTDOWN); /* drops the lock around callbacks */
		if (n)
			log_debug("stopping: %u control commands not sent yet failed", n);
	}
	pthread_mutex_unlock(&s->lock);
}

void iscsi_session_close(struct iscsi_session *s, int timeout_ms)
{
	struct timespec dl = clk_deadline_ms(timeout_ms);
	pthread_mutex_lock(&s->lock);
	atomic_fetch_add(&s->drain_waiters, 1); /* before callbacks_busy reads the count */
	while ((s->state != SS_CLOSED && !s->fail_fast && s->outstanding > 0) || callbacks_busy(s))
		if (pthread_cond_timedwait(&s->state_cv, &s->lock, &dl) == ETIMEDOUT)
			break;
	atomic_fetch_sub(&s->drain_waiters, 1);
	/* No more recovery: a connect or login in progress ends at once (-ECANCELED), an identity check too. */
	s->closing = true;
	iscsi_cancel_fire(s->cancel_fd);
	if (s->verifying && s->t && s->t->ops->abort)
		s->t->ops->abort(s->t);
	pthread_cond_broadcast(&s->rec_cv);
	pthread_cond_broadcast(&s->slot_cv);
	pthread_mutex_unlock(&s->lock);
	if (s->rec_started)
		pthread_join(s->rec_thread, NULL);
	pthread_mutex_lock(&s->lock);
	if (s->state == SS_UP) {
		s->logout_want = true;
		sess_tx_want(s);
		s->t->ops->kick(s->t);
		/* stopping: STOP_LOGOUT_MS, and never past the grace's end + STOP_LOGOUT_MS (one deadline for every path) */
		int64_t wait_ms = LOGOUT_RSP_MS;
		if (s->stop_by_ms) {
			int64_t left = s->stop_by_ms + STOP_LOGOUT_MS - clk_now_ms();
			wait_ms = left < 0 ? 0 : left < STOP_LOGOUT_MS ? left : STOP_LOGOUT_MS;
		}
		dl = clk_deadline_ms((int)wait_ms);
		while (s->state == SS_UP && !s->logout_done)
			if (pthread_cond_timedwait(&s->state_cv, &s->lock, &dl) == ETIMEDOUT) {
				log_warn("no Logout Response from the target within %lld ms", (long long)wait_ms);
				break;
			}
	}
	struct iscsi_transport *t = s->t;
	pthread_mutex_unlock(&s->lock);
	if (t) {
		t->ops->shutdown(t); /* calls conn_lost(0) if its event thread still runs: commands complete */
		sess_wait_direct(s); /* a submitter that got in before closing may still be in try_send */
		t->ops->destroy(t);
	}
	pthread_mutex_lock(&s->lock);
	s->state = SS_CLOSED;
	sess_complete_tasks(s, sess_pick_any, -ECONNABORTED); /* parked while the connection was down */
	pthread_mutex_unlock(&s->lock);
	session_free(s);
}

int iscsi_cmd_result_errno(const struct iscsi_cmd_result *r)
{
	if (r->err)
		return r->err;
	if (r->status == SCSI_STATUS_GOOD)
		return 0; /* the table's first row, without the walk: every completed I/O comes here */
	return scsi_status_to_errno(r->status, r->has_sense ? &r->sense : NULL);
}

const char *iscsi_cmd_result_status(const struct iscsi_cmd_result *r, char *out, size_t cap)
{
	if (!cap)
		return out;
	if (r->err)
		out[0] = '\0';
	else if (r->has_sense)
		snprintf(out, cap, " (status 0x%02x, sense %x/%02x/%02x)", r->status, r->sense.key, r->sense.asc,
			 r->sense.ascq);
	else
		snprintf(out, cap, " (status 0x%02x)", r->status);
	return out;
}
