/* SPDX-License-Identifier: MIT */
/*
 * iSCSI session recovery at ErrorRecoveryLevel 0 (RFC 7143 §6.3.5): the
 * connection loss (conn_lost hook), the recovery thread that reconnects
 * with back-off and logs in again (session reinstatement), the re-issue of
 * parked commands in CmdSN order with fresh ITTs, and the replacement
 * timeout.  Also the re-issue of a task the target aborted on a live
 * connection (sess_reissue_now).
 *
 * Threads: conn_lost runs on the dying connection's event thread; the
 * recovery thread sleeps on rec_cv (CLOCK_MONOTONIC) and drops the session
 * lock around connect, login, start and every completion callback.
 */
#include "session_priv.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "initiator/transport/cancel.h"
#include "initiator/util/clock.h"
#include "initiator/util/log.h"
#include "initiator/net/url.h"

/*
 * Send a task that the target no longer has (aborted by ABORT TASK or
 * LOGICAL UNIT RESET) again on this connection, with a fresh ITT and a new
 * CmdSN; or, once it was re-issued ISCSI_REISSUE_MAX times, mark it
 * doomed (to fail with -EIO by sess_complete_tasks) and return true.  PDUs of it
 * still in the transport's batch stay counted in tx_pending (the buffer is
 * the same).  Lock held.
 */
bool sess_reissue_now(struct iscsi_session *s, struct task *t)
{
	bool stop = t->sync && s->sync_stop_ms; /* the stop fails a synchronous command instead */
	if (t->reissues >= ISCSI_REISSUE_MAX || stop) {
		if (!stop)
			log_err("command 0x%02x aborted %u times: failing it", t->cmd.cdb[0], t->reissues + 1);
		if (t->in_txq)
			sess_txq_remove(s, t);
		memset(&t->deferred_res, 0, sizeof(t->deferred_res));
		t->deferred_res.err = stop ? -ESHUTDOWN : -EIO;
		t->doomed = true;
		return true;
	}
	t->reissues++;
	if (t->in_txq)
		sess_txq_remove(s, t);
	uint16_t pending = t->tx_pending;
	sess_task_reset(t);
	t->tx_pending = pending;
	t->gen++;
	sess_task_assign_itt(t);
	t->submit_ms = clk_now_ms();
	sess_winq_push(s, t);
	return false;
}

static const char *loss_cause(int err)
{
	switch (err) {
	case -ETIMEDOUT:
		return "command or NOP-Out timeout";
	case -EBADMSG:
		return "digest error";
	case -EPROTO:
		return "protocol violation";
	default:
		return strerror(-err);
	}
}

/*
 * The connection is gone and the session will be recovered (RFC 7143
 * §6.3.5, ERL 0): every command not answered yet is parked for re-issue,
 * one answered while its PDUs were still queued completes now, one
 * re-issued ISCSI_REISSUE_MAX times already fails with -EIO.  On the dying
 * connection's event thread, lock held; the recovery thread takes over.
 */
static void lose_connection(struct iscsi_session *s, int err)
{
	s->state = SS_DOWN;
	s->event_thread_known = false;
	if (s->cfg.on_path_state)
		s->cfg.on_path_state(s->cfg.path_state_arg, false);
	if (!s->lost_ms) {
		s->lost_ms = clk_now_ms();
		s->lost_err = err;
		s->lost_reason = s->drop_reason;
		s->reissued = 0;
	}
	const char *why = s->drop_reason;
	s->drop_reason = NULL;
	bool over = sess_grace_over(s, clk_now_ms());
	unsigned unanswered = 0;
	for (unsigned i = 0; i < s->ntasks; i++) {
		struct task *t = &s->tasks[i];
		if (!t->in_use)
			continue;
		if (!t->lost_ms)
			t->lost_ms = s->lost_ms;
		if (t->done_deferred) {
			t->doomed = true;
		} else if (t->probe) { /* the recovery thread waits for it: it fails, never parks */
			memset(&t->deferred_res, 0, sizeof(t->deferred_res));
			t->deferred_res.err = -ECONNRESET;
			t->doomed = true;
		} else if (over && !t->sync) { /* the stop grace ended: no re-issue, it fails */
			memset(&t->deferred_res, 0, sizeof(t->deferred_res));
			t->deferred_res.err = -ETIMEDOUT;
			t->doomed = true;
			unanswered++;
		} else if (t->sync && s->sync_stop_ms) { /* the stop takes it back (tick_stop) */
			memset(&t->deferred_res, 0, sizeof(t->deferred_res));
			t->deferred_res.err = -ESHUTDOWN;
			t->doomed = true;
		} else if ((t->cmd_sent || t->stalled) && t->reissues >= ISCSI_REISSUE_MAX) {
			log_err("command 0x%02x lost with the connection %u times: failing it", t->cmd.cdb[0],
				t->reissues + 1);
			memset(&t->deferred_res, 0, sizeof(t->deferred_res));
			t->deferred_res.err = -EIO;
			t->doomed = true;
		} else if (t->cmd_sent || t->stalled) {
			/* a command never sent counts only when it was the reason for the drop (a window kept closed) */
			t->reissues++;
		}
		sess_task_reset(t);
	}
	s->win_head = s->win_tail = s->tx_head = s->tx_tail = NULL;
	s->nop_reply = s->ping_want = s->ping_sent = false;
	s->tmf_want = s->tmf_sent = false;
	s->relogin_pending = s->logout_relogin = s->logout_want = s->logout_sent = s->logout_done = false;
	if (over) /* stopping: nothing is re-issued or accepted any more (refusing; recover_connect waits for the close) */
		log_msg(unanswered ? LOG_LVL_ERR : LOG_LVL_INFO,
			"session to " ISCSI_HOSTPORT_FMT ": the stop grace ended with %u commands unanswered: they fail, "
			"the connection is closed (%s)", ISCSI_HOSTPORT_ARGS(s->cfg.host, s->cfg.port), unanswered,
			why ? why : loss_cause(err));
	pthread_cond_signal(&s->rec_cv);
	sess_complete_tasks(s, sess_pick_doomed, 0);
	if (over) {
		/* only now: a drain that saw fail_fast before the callbacks ran would let the unmount
		 * abort the FUSE requests they answer (ECONNABORTED instead of EIO) */
		s->fail_fast = true;
		pthread_cond_broadcast(&s->slot_cv);
		pthread_cond_broadcast(&s->state_cv);
	}
}

/* conn_lost hook (transport.h), on the dying connection's event thread: recover (err < 0) or fail everything (shutdown). */
void sess_hook_conn_lost(void *arg, int err)
{
	struct iscsi_session *s = arg;
	pthread_mutex_lock(&s->lock);
	if (err && !s->logout_done && !s->closing && !sess_grace_over(s, clk_now_ms()))
		log_msg(sess_path_level(s, LOG_LVL_ERR), "connection to " ISCSI_HOSTPORT_FMT " lost: %s",
			ISCSI_HOSTPORT_ARGS(s->cfg.host, s->cfg.port), s->drop_reason ? s->drop_reason : strerror(-err));
	if (err && !s->closing && s->state != SS_CLOSED) {
		lose_connection(s, err);
		pthread_mutex_unlock(&s->lock);
		return;
	}
	/* Shut down (iscsi_session_close): whatever is left fails. */
	s->state = SS_CLOSED;
	for (unsigned i = 0; i < s->ntasks; i++)
		s->tasks[i].in_txq = false;
	s->win_head = s->win_tail = s->tx_head = s->tx_tail = NULL;
	sess_complete_tasks(s, sess_pick_any, err ? -ECONNRESET : -ECONNABORTED);
	s->win_head = s->win_tail = s->tx_head = s->tx_tail = NULL;
	s->logout_done = true;
	pthread_cond_broadcast(&s->slot_cv);
	pthread_cond_broadcast(&s->state_cv);
	pthread_mutex_unlock(&s->lock);
}

static const char *loss_what(const struct iscsi_session *s)
{
	return s->lost_reason ? s->lost_reason : loss_cause(s->lost_err);
}

static int by_seq(const void *a, const void *b)
{
	const struct task *x = *(struct task *const *)a, *y = *(struct task *const *)b;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/*
 * Queue every parked command again in submission (= old CmdSN) order with
 * a fresh ITT; sess_window_admit gives them new CmdSNs.  Lock held, state
 * SS_STARTING.  Returns how many there are.
 */
static unsigned requeue_parked(struct iscsi_session *s)
{
	unsigned n = 0;
	for (unsigned i = 0; i < s->ntasks; i++)
		if (s->tasks[i].in_use)
			s->sorted[n++] = &s->tasks[i];
	qsort(s->sorted, n, sizeof(*s->sorted), by_seq);
	int64_t now = clk_now_ms();
	for (unsigned i = 0; i < n; i++) {
		struct task *t = s->sorted[i];
		sess_task_reset(t);
		t->gen++;
		sess_task_assign_itt(t);
		t->submit_ms = now;
		sess_winq_push(s, t);
	}
	sess_window_admit(s);
	return n;
}

/*
 * The earliest first loss (task.lost_ms) a pending command met, 0 if none
 * met one before this loss: one re-issued on a reinstated connection that
 * served nothing before it was lost again.  Lock held.
 */
static int64_t oldest_loss(const struct iscsi_session *s)
{
	int64_t oldest = 0;
	for (unsigned i = 0; i < s->ntasks; i++) {
		const struct task *t = &s->tasks[i];
		if (t->in_use && t->lost_ms && (!oldest || t->lost_ms < oldest))
			oldest = t->lost_ms;
	}
	return oldest;
}

/*
 * When pending commands fail: sess_replacement_ms after the loss (at once
 * when handed back), or after the first loss one of them met if sooner
 * (however many reinstatements came between), or the stop grace if
 * sooner.  Lock held.
 */
static int64_t replacement_deadline(const struct iscsi_session *s)
{
	int64_t rt = sess_replacement_ms(s);
	int64_t d = s->lost_ms + rt, oldest = oldest_loss(s);
	if (oldest && oldest + rt < d)
		d = oldest + rt;
	return s->stop_by_ms && s->stop_by_ms < d ? s->stop_by_ms : d;
}

/*
 * Commands whose first loss lies sess_replacement_ms back, while this
 * loss does not yet: those fail (-ETIMEDOUT), the others wait on.  Lock
 * held (dropped around callbacks).
 */
static void fail_expired(struct iscsi_session *s, int64_t now)
{
	unsigned n = 0;
	int64_t oldest = oldest_loss(s), rt = sess_replacement_ms(s);
	for (unsigned i = 0; i < s->ntasks; i++) {
		struct task *t = &s->tasks[i];
		if (t->in_use && !t->doomed && t->lost_ms && now - t->lost_ms >= rt) {
			memset(&t->deferred_res, 0, sizeof(t->deferred_res));
			t->deferred_res.err = -ETIMEDOUT;
			t->doomed = true;
			n++;
		}
	}
	log_err("session to " ISCSI_HOSTPORT_FMT " lost again (%s): %u commands failed, replacement timeout %lld ms "
		"after the first loss they met (reinstated since without an answer to them)",
		ISCSI_HOSTPORT_ARGS(s->cfg.host, s->cfg.port), loss_what(s), n, (long long)(now - oldest));
	sess_complete_tasks(s, sess_pick_doomed, 0);
}

/*
 * replacement_timeout_ms after the loss (at once when handed back,
 * cfg.hand_back; or at the stop grace): pending commands fail with
 * -ETIMEDOUT and new ones with -ENOTCONN until the session is back.
 * Before that, those whose first loss lies that far back (fail_expired).
 * Lock held (dropped around callbacks).
 */
static void check_replacement(struct iscsi_session *s, int64_t now)
{
	if (s->fail_fast || now < replacement_deadline(s))
		return;
	int64_t rt = sess_replacement_ms(s);
	if (now < s->lost_ms + rt && !(s->stop_by_ms && now >= s->stop_by_ms)) {
		fail_expired(s, now);
		return;
	}
	s->fail_fast = true;
	pthread_cond_broadcast(&s->slot_cv);
	pthread_cond_broadcast(&s->state_cv);
	unsigned n = sess_complete_tasks(s, sess_pick_any, -ETIMEDOUT);
	bool by_stop = s->stop_by_ms && s->stop_by_ms < s->lost_ms + rt;
	if (s->cfg.hand_back && !by_stop) { /* the multipath layer re-issues them */
		log_debug("session to " ISCSI_HOSTPORT_FMT " down (%s): %u commands handed back",
			 ISCSI_HOSTPORT_ARGS(s->cfg.host, s->cfg.port), loss_what(s), n);
		return;
	}
	if (by_stop) { /* stopping (iscsi_session_stopping): the grace ended first; nothing to say when none failed */
		log_msg(n ? LOG_LVL_ERR : LOG_LVL_INFO,
			"session to " ISCSI_HOSTPORT_FMT " down for %lld ms (%s) when the stop grace ended: %u commands failed",
			ISCSI_HOSTPORT_ARGS(s->cfg.host, s->cfg.port), (long long)(now - s->lost_ms), loss_what(s), n);
		return;
	}
	log_err("session to " ISCSI_HOSTPORT_FMT " down for %lld ms (%s), replacement timeout: %u commands failed; "
		"new I/O fails until the target is back",
		ISCSI_HOSTPORT_ARGS(s->cfg.host, s->cfg.port), (long long)(now - s->lost_ms), loss_what(s), n);
}

/* Sleep until `until` (CLOCK_MONOTONIC ms) or closing, minding the replacement timeout.  Lock held. */
static void recovery_wait(struct iscsi_session *s, int64_t until)
{
	for (;;) {
		int64_t now = clk_now_ms();
		check_replacement(s, now);
		if (s->closing || now >= until || s->retry_now) {
			s->retry_now = false;
			return;
		}
		int64_t wake = until;
		if (!s->fail_fast && replacement_deadline(s) < wake)
			wake = replacement_deadline(s);
		int64_t ms = wake - now;
		if (ms < 1)
			ms = 1;
		struct timespec ts = clk_deadline_ms(ms);
		pthread_cond_timedwait(&s->rec_cv, &s->lock, &ts);
	}
}

/*
 * Reconnect with capped, jittered exponential back-off (RECONNECT_BASE_MS
 * doubling to RECONNECT_MAX_MS, +-25%) until logged in, into *nt and *lr,
 * or closing (then *nt is NULL).  The first attempt waits for the target's
 * Time2Wait, at most half the replacement timeout.  Returns the attempts
 * made.  Lock held (dropped around each connect and login).
 */
static unsigned recover_connect(struct iscsi_session *s, struct iscsi_transport **nt, struct iscsi_login_result *lr)
{
	int64_t delay = 0, first = s->reconnect_delay_ms;
	unsigned attempts = 0;
	char err[256];
	int timeout_ms = s->cfg.timeout_ms > 0 ? s->cfg.timeout_ms : ISCSI_LOGIN_TIMEOUT_DEFAULT_S * 1000;

	s->reconnect_delay_ms = 0;
	/* A Time2Wait that would outlast half the replacement timeout would fail I/O a target serves again. */
	int64_t half = sess_replacement_ms(s) / 2;
	if (first > half && !s->fail_fast) {
		log_warn("reconnecting after %lld ms instead of the target's Time2Wait (%lld ms): half the replacement "
			 "timeout", (long long)half, (long long)first);
		first = half;
	}
	for (;;) {
		recovery_wait(s, clk_now_ms() + (attempts ? delay : first));
		while (!s->closing && sess_grace_over(s, clk_now_ms())) /* stopping: nothing left to serve */
			pthread_cond_wait(&s->rec_cv, &s->lock);
		if (s->closing) {
			*nt = NULL;
			return attempts;
		}
		/*
		 * The whole connect and login ends within the login timeout and,
		 * until it passed, by the replacement deadline: recovery_wait then
		 * fails the I/O on time however the target stalls the login.
		 */
		int64_t deadline = clk_now_ms() + timeout_ms;
		if (!s->fail_fast && replacement_deadline(s) < deadline)
			deadline = replacement_deadline(s);
		s->attempt_deadline_ms = deadline;
		pthread_mutex_unlock(&s->lock);
		attempts++;
		err[0] = '\0';
		int rc = sess_connect_login(s, timeout_ms, deadline, nt, lr, err, sizeof(err));
		pthread_mutex_lock(&s->lock);
		s->attempt_deadline_ms = 0;
		if (!s->closing) {
			/* iscsi_session_stopping may have cut this attempt short: re-arm the token for the next */
			uint64_t v;
			if (read(s->cancel_fd, &v, sizeof(v)) == sizeof(v))
				log_debug("reconnect attempt %u cancelled: the daemon is stopping", attempts);
		}
		if (rc == 0)
			break;
		log_debug("reconnect attempt %u to " ISCSI_HOSTPORT_FMT ": %s", attempts,
			  ISCSI_HOSTPORT_ARGS(s->cfg.host, s->cfg.port), err);
		delay = delay ? 2 * delay : RECONNECT_BASE_MS;
		if (delay > RECONNECT_MAX_MS)
			delay = RECONNECT_MAX_MS;
		delay = delay * 3 / 4 + (int64_t)(random() % (delay / 2 + 1));
	}
	return attempts;
}

/*
 * The new connection is started: before a parked command goes out on it,
 * cfg.verify checks that it leads to the same device (lock dropped; the
 * session is SS_UP with only the check's commands sent, the tick ends it
 * at the login timeout, the replacement deadline or the stop grace).
 * Returns true to go on: the same device, or another one (fenced: the
 * parked commands failed with -EIO, one line); false when the connection
 * was lost meanwhile or is being dropped (the check could not tell).
 * Lock held.
 */
static bool verify_new(struct iscsi_session *s)
{
	int64_t now = clk_now_ms();
	int timeout_ms = s->cfg.timeout_ms > 0 ? s->cfg.timeout_ms : ISCSI_LOGIN_TIMEOUT_DEFAULT_S * 1000;
	s->verify_by_ms = now + timeout_ms;
	if (!s->fail_fast && replacement_deadline(s) < s->verify_by_ms)
		s->verify_by_ms = replacement_deadline(s);
	s->verifying = true;
	s->state = SS_UP;
	pthread_mutex_unlock(&s->lock);
	char why[256] = "";
	int rc = s->cfg.verify(s->cfg.verify_arg, s, why, sizeof(why));
	pthread_mutex_lock(&s->lock);
	s->verifying = false;
	if (s->state != SS_UP || s->closing)
		return false; /* lost meanwhile: recovered again */
	if (rc == 0) {
		if (s->fenced)
			log_warn("session to " ISCSI_HOSTPORT_FMT ": the device is back: I/O resumes",
				 ISCSI_HOSTPORT_ARGS(s->cfg.host, s->cfg.port));
		s->fenced = false;
		return true;
	}
	if (rc == -ENODEV) {
		s->fenced = true;
		s->fence_gen++;
		unsigned n = sess_complete_tasks(s, sess_pick_any, -EIO); /* parked, in no queue */
		log_err("session to " ISCSI_HOSTPORT_FMT " reinstated, but it leads to another device (%s): %u commands "
			"failed; I/O refused until a rescan finds the device again",
			ISCSI_HOSTPORT_ARGS(s->cfg.host, s->cfg.port), why, n);
		return s->state == SS_UP && !s->closing; /* the lock was dropped around the callbacks */
	}
	log_warn("session to " ISCSI_HOSTPORT_FMT ": identity check after the reconnect failed (%s): reconnecting",
		 ISCSI_HOSTPORT_ARGS(s->cfg.host, s->cfg.port), why[0] ? why : strerror(-rc));
	if (!s->drop_reason)
		s->drop_reason = "identity check failed";
	s->reconnect_delay_ms = RECONNECT_MAX_MS; /* not at once: it would fail the same way */
	if (s->t->ops->abort)
		s->t->ops->abort(s->t); /* conn_lost follows on the event thread */
	else
		lose_connection(s, -EIO);
	return false;
}

/*
 * One recovery: reconnect (recover_connect), start the new connection,
 * check who answers (verify_new) and re-issue the parked commands (RFC
 * 7143 §6.3.5, ERL 0).  Lock held.
 */
static void recover(struct iscsi_session *s)
{
	struct iscsi_login_result lr;
	struct iscsi_transport *nt = NULL;
	unsigned attempts = recover_connect(s, &nt, &lr);
	if (!nt)
		return;
	if (s->closing) {
		pthread_mutex_unlock(&s->lock);
		nt->ops->shutdown(nt);
		nt->ops->destroy(nt);
		pthread_mutex_lock(&s->lock);
		return;
	}
	sess_adopt_login(s, nt, &lr);
	s->state = SS_STARTING; /* submitters still park; the event thread may start calling hooks */
	pthread_mutex_unlock(&s->lock);
	int rc = nt->ops->start(nt, &sess_hooks, s, &s->params);
	pthread_mutex_lock(&s->lock);
	if (rc) {
		log_err("cannot start the new connection to " ISCSI_HOSTPORT_FMT ": %s",
			ISCSI_HOSTPORT_ARGS(s->cfg.host, s->cfg.port), strerror(-rc));
		if (s->state == SS_STARTING)
			s->state = SS_DOWN; /* nt is reaped and the next attempt made by the caller */
		s->reconnect_delay_ms = RECONNECT_MAX_MS; /* not at once: it would fail the same way */
		return;
	}
	if (s->state != SS_STARTING)
		return; /* lost again already: the caller starts over */
	if (s->cfg.verify && !verify_new(s))
		return;
	unsigned n = requeue_parked(s);
	s->reissued += n;
	s->state = SS_UP;
	s->answered = false; /* until the target answers a command on this connection (tick_replaced) */
	s->fail_fast = false;
	s->stats.reconnects++;
	log_msg(sess_path_level(s, LOG_LVL_WARN),
		"session to " ISCSI_HOSTPORT_FMT " reinstated after %s: down %lld ms, %u commands re-issued, "
		"%u connect attempts", ISCSI_HOSTPORT_ARGS(s->cfg.host, s->cfg.port), loss_what(s),
		(long long)(clk_now_ms() - s->lost_ms), n, attempts);
	s->lost_ms = 0;
	pthread_cond_broadcast(&s->slot_cv);
	s->t->ops->kick(s->t);
	if (s->cfg.on_path_state)
		s->cfg.on_path_state(s->cfg.path_state_arg, true);
}

/*
 * The recovery thread's wait while the session is up: until something
 * changes, or until the stop grace ends (iscsi_session_stopping).  Then
 * commands still unanswered are taken back from the target the ERL 0 way,
 * by dropping the connection (lose_connection fails them, no ABORT TASK,
 * LOGICAL UNIT RESET or re-issue).  Lock held.
 */
static void wait_up(struct iscsi_session *s)
{
	if (!s->stop_by_ms || s->grace_dropped) {
		pthread_cond_wait(&s->rec_cv, &s->lock);
		return;
	}
	int64_t now = clk_now_ms();
	if (!sess_grace_over(s, now)) {
		struct timespec ts = clk_deadline_ms(s->stop_by_ms - now);
		pthread_cond_timedwait(&s->rec_cv, &s->lock, &ts);
		return;
	}
	s->grace_dropped = true;
	if (s->state == SS_UP && s->outstanding > 0 && s->t && s->t->ops->abort) {
		s->drop_reason = "dropped when the grace ended";
		s->t->ops->abort(s->t); /* the event thread calls conn_lost soon after */
	}
}

/*
 * The recovery thread: sleeps until a connection is lost (state SS_DOWN),
 * reaps the dead transport (its event thread has returned from conn_lost
 * by the time shutdown joins it), and recovers.  Ends when closing.
 */
void *sess_recovery_thread(void *arg)
{
	struct iscsi_session *s = arg;
	iscsi_cancel_bind(s->cancel_fd); /* iscsi_session_close ends a connect or login in progress */
	pthread_mutex_lock(&s->lock);
	for (;;) {
		while (!s->closing && s->state != SS_DOWN)
			wait_up(s);
		if (s->closing)
			break;
		struct iscsi_transport *old = s->t;
		s->t = NULL;
		pthread_mutex_unlock(&s->lock);
		if (old) {
			old->ops->shutdown(old);
			sess_wait_direct(s); /* s->t is NULL: no new direct sender on old */
		}
		pthread_mutex_lock(&s->lock);
		if (old) { /* keep the dead connection's counts in the session's */
			if (old->ops->payload_copied)
				s->stats.payload_bytes_copied += old->ops->payload_copied(old);
			if (old->ops->wakeups)
				s->stats.event_wakeups += old->ops->wakeups(old);
			old->ops->destroy(old);
		}
		recover(s);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}
