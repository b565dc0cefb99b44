/* SPDX-License-Identifier: MIT */
/*
 * The event thread's guest (transport.h, session.h): a descriptor the
 * connection's event thread waits on beside the socket, and the work it
 * runs when that is readable, as in a completion callback (submissions
 * never wait for a slot).  The session keeps it across reconnects: every
 * event thread of a transport that serves guests polls it.
 */
#include "session_priv.h"

#include <stdatomic.h>

int sess_hook_guest_fd(void *arg)
{
	struct iscsi_session *s = arg;
	return atomic_load_explicit(&s->guest_fd, memory_order_acquire);
}

void sess_hook_guest_run(void *arg)
{
	struct iscsi_session *s = arg;
	/* fn and arg were written before the fd this pass polled (release/acquire), and stay until close */
	sess_callback_enter();
	s->guest_run(s->guest_arg);
	sess_callback_leave();
}

void sess_hook_guest_live(void *arg, bool live)
{
	struct iscsi_session *s = arg;
	pthread_mutex_lock(&s->lock);
	s->guest_ev_live = live;
	if (s->guest_live && atomic_load(&s->guest_fd) >= 0)
		s->guest_live(s->guest_arg, live);
	pthread_mutex_unlock(&s->lock);
}

void iscsi_session_set_guest(struct iscsi_session *s, int fd, void (*run)(void *arg),
			     void (*live)(void *arg, bool live), void *arg)
{
	pthread_mutex_lock(&s->lock);
	bool had = atomic_load(&s->guest_fd) >= 0;
	if (fd >= 0) {
		s->guest_run = run;
		s->guest_live = live;
		s->guest_arg = arg;
	}
	atomic_store_explicit(&s->guest_fd, fd, memory_order_release);
	if (s->guest_ev_live && s->guest_live && had != (fd >= 0))
		s->guest_live(s->guest_arg, fd >= 0);
	if (s->state == SS_UP && s->t)
		s->t->ops->kick(s->t); /* the event thread polls the new descriptor from its next pass */
	pthread_mutex_unlock(&s->lock);
}
