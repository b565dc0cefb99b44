/* SPDX-License-Identifier: MIT */
/*
 * Controls a multipath layer needs on one session (session.h): fail the
 * connection when the path under it went away, end a reconnect back-off
 * when the route came back, hand commands back at once on a loss,
 * whether the session takes commands, what its stall check reads (how
 * long the session has waited on the target, a ping at once), and the
 * fence an identity check (cfg.verify) sets and a rescan lifts.
 */
#include "session_priv.h"

#include <errno.h>

#include "initiator/util/log.h"
#include "initiator/net/url.h"

void iscsi_session_drop(struct iscsi_session *s, const char *reason)
{
	pthread_mutex_lock(&s->lock);
	if (s->state == SS_UP && s->t && s->t->ops->abort && !s->closing) {
		if (!s->drop_reason)
			s->drop_reason = reason;
		s->t->ops->abort(s->t);
	}
	pthread_mutex_unlock(&s->lock);
}

void iscsi_session_retry_now(struct iscsi_session *s)
{
	pthread_mutex_lock(&s->lock);
	if (s->state == SS_DOWN) {
		s->retry_now = true;
		pthread_cond_broadcast(&s->rec_cv);
	}
	pthread_mutex_unlock(&s->lock);
}

void iscsi_session_set_hand_back(struct iscsi_session *s, bool on)
{
	pthread_mutex_lock(&s->lock);
	s->cfg.hand_back = on;
	pthread_cond_broadcast(&s->rec_cv); /* a recovery in progress re-reads its deadline */
	pthread_mutex_unlock(&s->lock);
}

bool iscsi_session_up(struct iscsi_session *s)
{
	pthread_mutex_lock(&s->lock);
	bool up = s->state == SS_UP && !s->fail_fast && !s->closing && !s->relogin_pending && !s->verifying;
	pthread_mutex_unlock(&s->lock);
	return up;
}

void iscsi_session_join_multipath(struct iscsi_session *s)
{
	pthread_mutex_lock(&s->lock);
	s->multipath = true;
	pthread_mutex_unlock(&s->lock);
	iscsi_session_set_hand_back(s, true);
}

void iscsi_session_get_wait(struct iscsi_session *s, struct iscsi_session_wait *w)
{
	pthread_mutex_lock(&s->lock);
	w->up = s->state == SS_UP && !s->closing;
	w->last_rx_ms = s->last_rx_ms;
	w->oldest_ms = 0;
	for (unsigned i = 0; w->up && i < s->ntasks; i++) {
		const struct task *t = &s->tasks[i];
		if (t->in_use && t->cmd_sent && !t->done_deferred && (!w->oldest_ms || t->submit_ms < w->oldest_ms))
			w->oldest_ms = t->submit_ms;
	}
	pthread_mutex_unlock(&s->lock);
}

int iscsi_session_ping(struct iscsi_session *s)
{
	int rc = 0;
	pthread_mutex_lock(&s->lock);
	if (s->state != SS_UP || s->closing || !s->t || s->logout_want) {
		rc = -ENOTCONN;
	} else if (!s->ping_sent && !s->ping_want) {
		s->ping_want = true;
		sess_tx_want(s);
		s->t->ops->kick(s->t);
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

bool iscsi_session_fenced(struct iscsi_session *s)
{
	pthread_mutex_lock(&s->lock);
	bool fenced = s->fenced;
	pthread_mutex_unlock(&s->lock);
	return fenced;
}

int iscsi_session_reverify(struct iscsi_session *s)
{
	pthread_mutex_lock(&s->lock);
	bool fenced = s->fenced && s->cfg.verify;
	unsigned gen = s->fence_gen;
	pthread_mutex_unlock(&s->lock);
	if (!fenced)
		return 0;
	char why[256] = "";
	int rc = s->cfg.verify(s->cfg.verify_arg, s, why, sizeof(why));
	pthread_mutex_lock(&s->lock);
	if (rc == 0 && s->fenced && s->fence_gen == gen) {
		s->fenced = false;
		log_warn("session to " ISCSI_HOSTPORT_FMT ": the device is back: I/O resumes",
			 ISCSI_HOSTPORT_ARGS(s->cfg.host, s->cfg.port));
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}
