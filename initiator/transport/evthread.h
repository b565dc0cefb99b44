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
#include <stdint.h>

struct iscsi_evthread {
	int fd;                 /* eventfd; -1 until started */
	atomic_bool kicked;     /* a wake-up is pending */
	atomic_bool stop;       /* the thread is to end */
	atomic_bool abort;      /* the connection is to be failed (iscsi_evthread_abort) */
	atomic_bool sleeping;   /* the thread is in poll (set by iscsi_evthread_sleep/woke) */
	_Atomic uint64_t wakeups; /* polls that returned something to do (relaxed) */
	bool started;
	pthread_t thread;
};

/* Before anything else: no eventfd, no thread. */
void iscsi_evthread_init(struct iscsi_evthread *e);

/* Make the eventfd and start fn(arg) on a new thread.  Returns 0 or a negative errno. */
int iscsi_evthread_start(struct iscsi_evthread *e, void *(*fn)(void *), void *arg);

/* Wake the thread (any thread): writes the eventfd only when the thread sleeps in poll and no kick is pending.  peer names the connection in a failure line. */
void iscsi_evthread_kick(struct iscsi_evthread *e, const char *peer);

/*
 * On the event thread, about to block in poll: marks the thread asleep, then looks at `kicked`
 * once more.  True: block (a later kick writes the eventfd).  False: a kick
 * came in meanwhile without writing the eventfd (the thread looked awake),
 * so poll without blocking and loop.  The store and the load are seq_cst,
 * as are the kicker's exchange and load, so one of the two sees the other.
 */
static inline bool iscsi_evthread_sleep(struct iscsi_evthread *e)
{
	atomic_store(&e->sleeping, true);
	if (!atomic_load(&e->kicked))
		return true;
	atomic_store(&e->sleeping, false);
	return false;
}

/* On the event thread, after its poll returned ready (ready > 0 counts a wake-up). */
static inline void iscsi_evthread_woke(struct iscsi_evthread *e, int ready)
{
	atomic_store(&e->sleeping, false);
	if (ready > 0)
		atomic_fetch_add_explicit(&e->wakeups, 1, memory_order_relaxed);
}

/* Wake-ups counted so far (any thread). */
static inline uint64_t iscsi_evthread_wakeups(struct iscsi_evthread *e)
{
	return atomic_load_explicit(&e->wakeups, memory_order_relaxed);
}

/*
 * On the event thread, after poll saw e->fd readable: consume the
 * wake-ups.  0, -ENETDOWN once iscsi_evthread_abort was called (the
 * transport then drops the connection as lost), or another negative errno.
 */
int iscsi_evthread_drain(struct iscsi_evthread *e);

/*
 * Fail the connection as if it were lost (a link went down under it):
 * the event thread's next drain returns -ENETDOWN and the transport calls
 * conn_lost with it.  Any thread; idempotent; no-op before start.
 */
void iscsi_evthread_abort(struct iscsi_evthread *e, const char *peer);

/* Set stop, wake the thread and join it (detach when called from it).  Idempotent. */
void iscsi_evthread_stop(struct iscsi_evthread *e, const char *peer);

/* Close the eventfd (after stop). */
void iscsi_evthread_fini(struct iscsi_evthread *e);

#endif
