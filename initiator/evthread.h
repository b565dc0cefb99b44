/* SPDX-License-Identifier: MIT */
/*
 * A connection's event thread and the eventfd that wakes it, shared by the
 * transports (tcp.c, iser.c).  Any thread may kick; one kick per wake-up
 * reaches the eventfd (the event thread clears `kicked` before it pulls
 * work, so a later kick wakes it again).
 */
#ifndef ISERFUSE_EVTHREAD_H
#define ISERFUSE_EVTHREAD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

struct iscsi_evthread {
	int fd;                 /* eventfd; -1 until started */
	atomic_bool kicked;     /* a wake-up is pending */
	atomic_bool stop;       /* the thread is to end */
	bool started;
	pthread_t thread;
};

/* Before anything else: no eventfd, no thread. */
void iscsi_evthread_init(struct iscsi_evthread *e);

/* Make the eventfd and start fn(arg) on a new thread.  Returns 0 or a negative errno. */
int iscsi_evthread_start(struct iscsi_evthread *e, void *(*fn)(void *), void *arg);

/* Wake the thread (any thread; cheap when a wake-up is pending).  peer names the connection in a failure line. */
void iscsi_evthread_kick(struct iscsi_evthread *e, const char *peer);

/* On the event thread, after poll saw e->fd readable: consume the wake-ups.  0 or a negative errno. */
int iscsi_evthread_drain(struct iscsi_evthread *e);

/* Set stop, wake the thread and join it (detach when called from it).  Idempotent. */
void iscsi_evthread_stop(struct iscsi_evthread *e, const char *peer);

/* Close the eventfd (after stop). */
void iscsi_evthread_fini(struct iscsi_evthread *e);

#endif
