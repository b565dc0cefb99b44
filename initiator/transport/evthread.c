/* SPDX-License-Identifier: MIT */
#include "evthread.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "initiator/util/log.h"

void iscsi_evthread_init(struct iscsi_evthread *e)
{
	e->fd = -1;
	atomic_store(&e->kicked, false);
	atomic_store(&e->stop, false);
	atomic_store(&e->sleeping, false);
	atomic_store(&e->wakeups, 0);
	e->started = false;
}

int iscsi_evthread_start(struct iscsi_evthread *e, void *(*fn)(void *), void *arg)
{
	e->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (e->fd < 0)
		return -errno;
	int rc = pthread_create(&e->thread, NULL, fn, arg);
	if (rc)
		return -rc;
	e->started = true;
	return 0;
}

/* Writes the eventfd (a poll in progress or the next one returns). */
static void evthread_signal(struct iscsi_evthread *e, const char *peer)
{
	uint64_t one = 1;
	if (write(e->fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warn("%s: cannot wake the event thread: %s", peer, strerror(errno));
}

void iscsi_evthread_kick(struct iscsi_evthread *e, const char *peer)
{
	/* An awake thread clears `kicked` and looks for work at the top of its
	 * loop, and looks at `kicked` again before it blocks
	 * (iscsi_evthread_sleep): only a sleeping one needs the eventfd. */
	if (e->fd >= 0 && !atomic_exchange(&e->kicked, true) && atomic_load(&e->sleeping))
		evthread_signal(e, peer);
}

int iscsi_evthread_drain(struct iscsi_evthread *e)
{
	uint64_t v;
	if (read(e->fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return -errno;
	return atomic_load(&e->abort) ? -ENETDOWN : 0;
}

void iscsi_evthread_abort(struct iscsi_evthread *e, const char *peer)
{
	if (!e->started || atomic_exchange(&e->abort, true))
		return;
	atomic_store(&e->kicked, true);
	evthread_signal(e, peer); /* always: only a readable eventfd makes the thread look at abort */
}

void iscsi_evthread_stop(struct iscsi_evthread *e, const char *peer)
{
	atomic_store(&e->stop, true);
	if (!e->started)
		return;
	atomic_store(&e->kicked, true);
	evthread_signal(e, peer);
	if (!pthread_equal(e->thread, pthread_self()))
		pthread_join(e->thread, NULL);
	else
		pthread_detach(e->thread);
	e->started = false;
}

void iscsi_evthread_fini(struct iscsi_evthread *e)
{
	if (e->fd >= 0)
		close(e->fd);
	e->fd = -1;
}
