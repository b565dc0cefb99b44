/* SPDX-License-Identifier: MIT */
/*
 * iSCSI session, deadlines (RFC 7143 §11.5, §11.18, ERL 0): the
 * transport's tick hook, about once a second.  A command older than
 * cmd_timeout_ms gets ABORT TASK, then LOGICAL UNIT RESET, then the
 * connection is dropped (no task management once stopping: the end of the
 * stop grace drops the connection instead, session_recovery.c); a logout
 * the target asked for is sent once nothing is in flight; a quiet
 * connection gets NOP-Out pings and is dropped when they go unanswered.
 * The connection is dropped too for a synchronous command unanswered at
 * the stop (tick_stop) and for a re-issued command past
 * replacement_timeout on a connection that served nothing (tick_replaced).
 *
 * Threads: the transport's event thread, session lock held throughout.
 */
#include "session_priv.h"

#include <errno.h>
#include <pthread.h>

#include "initiator/util/log.h"

/*
 * A task management request unanswered for cmd_timeout/2 (TMF_TIMEOUT_MIN_MS
 * .. TMF_TIMEOUT_MAX_MS): ABORT TASK escalates to LOGICAL UNIT RESET, an
 * unanswered LU RESET drops the connection (-ETIMEDOUT).  Lock held.
 */
static int tick_tmf(struct iscsi_session *s, int64_t now, bool *kick)
{
	int64_t limit = s->cfg.cmd_timeout_ms / 2;
	limit = limit < TMF_TIMEOUT_MIN_MS ? TMF_TIMEOUT_MIN_MS : limit > TMF_TIMEOUT_MAX_MS ? TMF_TIMEOUT_MAX_MS : limit;
	if (now - s->tmf_sent_ms <= limit)
		return 0;
	s->tmf_sent = false;
	if (s->tmf_function != ISCSI_TMF_ABORT_TASK) {
		log_err("no answer to LOGICAL UNIT RESET within %lld ms: dropping the connection", (long long)limit);
		return -ETIMEDOUT;
	}
	log_err("no answer to ABORT TASK for ITT 0x%08x within %lld ms: LOGICAL UNIT RESET", s->tmf_rtt,
		(long long)limit);
	s->tmf_function = ISCSI_TMF_LUN_RESET;
	s->tmf_itt = itt_next_reserved(ITT_GEN_TMF, s->tmf_itt);
	s->tmf_want = *kick = true;
	return 0;
}

/*
 * The first command older than cmd_timeout_ms: ABORT TASK for it (§11.5.1),
 * or, never sent (the CmdSN window stayed closed) or stuck in the
 * transport, a drop of the connection (-ETIMEDOUT).  Lock held.
 */
static int tick_cmd_timeout(struct iscsi_session *s, int64_t now, bool *kick)
{
	for (unsigned i = 0; i < s->ntasks; i++) {
		struct task *t = &s->tasks[i];
		if (!t->in_use || now - t->submit_ms <= s->cfg.cmd_timeout_ms || (t->sync && s->sync_stop_ms))
			continue; /* (a synchronous command at the stop: tick_stop's) */
		if (s->verifying && !t->probe)
			continue; /* parked until the identity check ends: its deadline is verify_by_ms */
		if (!t->cmd_sent || t->done_deferred) {
			log_err("command 0x%02x (ITT 0x%08x) not sent within %d s: dropping the connection",
				t->cmd.cdb[0], t->itt, s->cfg.cmd_timeout_ms / 1000);
			t->stalled = true;
			/* the window that kept the identity check in would keep the parked commands in: each counts it */
			for (unsigned j = 0; j < s->ntasks && t->probe; j++)
				if (s->tasks[j].in_use)
					s->tasks[j].stalled = true;
			return -ETIMEDOUT;
		}
		log_err("command 0x%02x (ITT 0x%08x) not answered within %d s: ABORT TASK", t->cmd.cdb[0],
			t->itt, s->cfg.cmd_timeout_ms / 1000);
		s->tmf_function = ISCSI_TMF_ABORT_TASK;
		s->tmf_lun = t->cmd.lun;
		s->tmf_rtt = t->itt;
		s->tmf_refcmdsn = t->cmdsn;
		s->tmf_itt = itt_next_reserved(ITT_GEN_TMF, s->tmf_itt);
		s->tmf_want = *kick = true;
		return 0;
	}
	return 0;
}

/*
 * A logout the target asked for (AsyncEvent 1 or 4): sent once no command
 * is in flight or at relogin_deadline_ms; no Logout Response within 5 s
 * drops the connection (-ETIMEDOUT).  Lock held.
 */
static int tick_relogin(struct iscsi_session *s, int64_t now, bool *kick)
{
	if (s->relogin_pending && !s->logout_want) {
		bool inflight = false;
		for (unsigned i = 0; i < s->ntasks && !inflight; i++)
			inflight = s->tasks[i].in_use && s->tasks[i].cmd_sent;
		if (!inflight || now >= s->relogin_deadline_ms) {
			s->logout_want = s->logout_relogin = true;
			*kick = true;
		}
	}
	if (s->logout_relogin && s->logout_sent && now - s->logout_sent_ms > 5000) {
		log_err("no Logout Response within 5 s: dropping the connection");
		s->drop_reason = s->relogin_reason;
		return -ETIMEDOUT;
	}
	return 0;
}

/*
 * Keep-alive (§11.18): a NOP-Out ping after noop_interval_ms without a PDU;
 * no PDU within noop_timeout_ms of it drops the connection (-ETIMEDOUT).
 * Lock held.
 */
static int tick_ping(struct iscsi_session *s, int64_t now, bool *kick)
{
	if (s->cfg.noop_interval_ms <= 0 || s->logout_want)
		return 0;
	int64_t quiet_since = s->last_rx_ms;
	if (s->ping_sent) {
		if (s->ping_sent_ms > quiet_since)
			quiet_since = s->ping_sent_ms;
		if (now - quiet_since > s->cfg.noop_timeout_ms) {
			log_msg(sess_path_level(s, LOG_LVL_ERR),
				"no answer to a NOP-Out ping within %d s: dropping the connection",
				s->cfg.noop_timeout_ms / 1000);
			return -ETIMEDOUT;
		}
	} else if (!s->ping_want && now - quiet_since >= s->cfg.noop_interval_ms) {
		s->ping_want = true;
		*kick = true;
	}
	return 0;
}

/*
 * The stop (iscsi_session_stopping): a synchronous command the target was
 * sent and has not answered STOP_ANSWER_MS later drops the connection
 * (-ECANCELED); lose_connection then fails it with -ESHUTDOWN, and the
 * other commands are re-issued after the reconnect, within the stop grace.
 * Lock held.
 */
static int tick_stop(struct iscsi_session *s, int64_t now)
{
	if (!s->sync_stop_ms || now - s->sync_stop_ms < STOP_ANSWER_MS)
		return 0;
	for (unsigned i = 0; i < s->ntasks; i++) {
		const struct task *t = &s->tasks[i];
		if (t->in_use && t->sync && !t->done_deferred) {
			log_warn("stopping: command 0x%02x (ITT 0x%08x) unanswered %lld ms after the stop: dropping the "
				 "connection", t->cmd.cdb[0], t->itt, (long long)(now - s->sync_stop_ms));
			s->drop_reason = "stopping with a control command unanswered";
			return -ECANCELED;
		}
	}
	return 0;
}

/*
 * A command that met a connection loss, re-issued on this connection,
 * still pending sess_replacement_ms after that first loss while the
 * target has answered nothing here since the reinstatement: the target
 * keeps the session up without serving it (a logout it asks for on every
 * new connection, say), so the connection is dropped (-ETIMEDOUT) and the
 * recovery fails it at once.  Lock held.
 */
static int tick_replaced(struct iscsi_session *s, int64_t now)
{
	if (s->answered)
		return 0;
	int64_t rt = sess_replacement_ms(s);
	for (unsigned i = 0; i < s->ntasks; i++) {
		const struct task *t = &s->tasks[i];
		if (t->in_use && t->lost_ms && now - t->lost_ms >= rt) {
			log_err("command 0x%02x (ITT 0x%08x) re-issued after a connection loss %lld ms ago and nothing "
				"answered since: dropping the connection (replacement timeout)", t->cmd.cdb[0], t->itt,
				(long long)(now - t->lost_ms));
			s->drop_reason = "replacement timeout, re-issued commands unanswered";
			return -ETIMEDOUT;
		}
	}
	return 0;
}

/*
 * Deadlines and keep-alive, once a second on the event thread.  A command
 * older than cmd_timeout_ms, or no PDU at all within noop_timeout_ms of a
 * ping, drops the connection (ERL 0: every outstanding command then fails).
 * A ping goes out only when nothing arrived for noop_interval_ms, so a busy
 * connection is never declared dead because a ping waits behind data.
 * The counts of the session's repeated log lines are printed here too.
 */
int sess_hook_tick(void *arg, int64_t now)
{
	struct iscsi_session *s = arg;
	int rc = 0;
	bool kick = false;
	log_set_thread_key(s);
	log_flush_key(s); /* "N more like this" of a flood that ended */
	pthread_mutex_lock(&s->lock);
	if (s->state != SS_UP) { /* commands are requeued with fresh deadlines first */
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	if (s->verifying && (now >= s->verify_by_ms || (s->stop_by_ms && now >= s->stop_by_ms))) {
		s->drop_reason = "identity check not answered in time";
		pthread_mutex_unlock(&s->lock);
		return -ETIMEDOUT;
	}
	rc = tick_stop(s, now);
	if (!rc)
		rc = tick_replaced(s, now);
	/* stopping: no ABORT TASK or LU RESET any more, the end of the stop grace drops the connection (wait_up) */
	if (!rc && s->tmf_sent && !s->stop_by_ms)
		rc = tick_tmf(s, now, &kick);
	else if (!rc && !s->tmf_want && !s->tmf_sent && s->cfg.cmd_timeout_ms > 0 && !s->stop_by_ms)
		rc = tick_cmd_timeout(s, now, &kick);
	if (!rc)
		rc = tick_relogin(s, now, &kick);
	if (!rc)
		rc = tick_ping(s, now, &kick);
	if (kick) { /* a TMF, Logout or ping to send */
		sess_tx_want(s);
		s->t->ops->kick(s->t);
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}
