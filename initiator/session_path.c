/* SPDX-License-Identifier: MIT */
/*
 * Controls a multipath layer needs on one session (session.h): fail the
 * connection when the path under it went away, end a reconnect back-off
 * when the route came back, hand commands back at once on a loss,
 * whether the session takes commands, and the fence an identity check
 * (cfg.verify) sets and a rescan lifts.
 */
#include "session_priv.h"

#include "log.h"
#include "url.h"

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
	bool up = s->state == SS_UP && !s->fail_fast && !s->closing && !s->relogin_pending && !s->verifying;
	pthread_mutex_unlock(&s->lock);
	return up;
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
