/* SPDX-License-Identifier: MIT */
/*
 * Threads that leave the stop signals to the main thread.  A new thread
 * inherits its creator's signal mask, so a thread created with SIGTERM,
 * SIGINT and SIGHUP blocked never runs a stop signal's handler: the
 * daemon's main thread takes them all (gateway/stop.c).  Header only.
 */
#ifndef ISERFUSE_THREAD_H
#define ISERFUSE_THREAD_H

#include <pthread.h>
#include <signal.h>

/*
 * Block SIGTERM, SIGINT, SIGHUP and SIGUSR1 (the restart signal) in the calling thread; *old gets the
 * mask to give back to thread_quiet_end.  Every thread the caller creates
 * until then starts with them blocked (those created inside a library
 * call too, such as a session's event thread).
 */
static inline void thread_quiet_begin(sigset_t *old)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1); /* the gateway's restart signal, like the stop signals */
	pthread_sigmask(SIG_BLOCK, &set, old);
}

/* Restore the mask thread_quiet_begin saved in *old. */
static inline void thread_quiet_end(const sigset_t *old)
{
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

/*
 * pthread_create(t, NULL, fn, arg) with the stop signals blocked in the
 * new thread; the caller's mask is unchanged afterwards.  Returns 0 or
 * pthread_create's (positive) error number.
 */
static inline int thread_start_quiet(pthread_t *t, void *(*fn)(void *), void *arg)
{
	sigset_t old;
	thread_quiet_begin(&old);
	int rc = pthread_create(t, NULL, fn, arg);
	thread_quiet_end(&old);
	return rc;
}

#endif
