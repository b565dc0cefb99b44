/* SPDX-License-Identifier: MIT */
/*
 * Controls a multipath layer needs on one session (session.h): fail the
 * connection when the path under it went away, end a reconnect back-off
 * when the route came back, hand commands back at once on a loss, and
 * whether the session takes commands.
 */
#include "session_priv.h"

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

void iscsi_session_set_replacement_timeout(struct iscsi_session *s, int ms)
{
	pthread_mutex_lock(&s->lock);
	s->cfg.replacement_timeout_ms = ms < 0 ? 0 : ms;
	pthread_cond_broadcast(&s->rec_cv); /* a recovery in progress re-reads its deadline */
	pthread_mutex_unlock(&s->lock);
}

bool iscsi_session_up(struct iscsi_session *s)
{
	pthread_mutex_lock(&s->lock);
	bool up = s->state == SS_UP && !s->fail_fast && !s->closing && !s->relogin_pending;
	pthread_mutex_unlock(&s->lock);
	return up;
}
