/* SPDX-License-Identifier: MIT */
/*
 * initiator/transport/evthread.c: a kick writes the eventfd only for a thread that is
 * asleep (or about to be), a kick that came while the thread was awake
 * keeps it from blocking, abort and stop always write, and no kick is
 * lost between a thread's last look for work and its poll.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#include "initiator/transport/evthread.h"

static void *idle_thread(void *arg)
{
	(void)arg;
	return NULL;
}

static void start(struct iscsi_evthread *e)
{
	iscsi_evthread_init(e);
	cr_assert_eq(iscsi_evthread_start(e, idle_thread, NULL), 0);
	pthread_join(e->thread, NULL);
	e->started = false; /* joined here: fini only closes the eventfd */
}

static bool readable(struct iscsi_evthread *e)
{
	uint64_t v;
	return read(e->fd, &v, sizeof(v)) == sizeof(v);
}

Test(evthread, kick_of_an_awake_thread_writes_nothing_and_keeps_it_from_blocking)
{
	struct iscsi_evthread e;
	start(&e);
	iscsi_evthread_kick(&e, "t");
	cr_assert(!readable(&e), "a thread that is awake looks for work by itself: no eventfd write");
	cr_assert(!iscsi_evthread_sleep(&e), "the kick is pending: the thread must not block");
	cr_assert(!atomic_load(&e.sleeping));
	iscsi_evthread_fini(&e);
}

Test(evthread, kick_of_a_sleeping_thread_writes_the_eventfd_once)
{
	struct iscsi_evthread e;
	start(&e);
	cr_assert(iscsi_evthread_sleep(&e), "nothing pending: block");
	iscsi_evthread_kick(&e, "t");
	iscsi_evthread_kick(&e, "t");
	uint64_t v = 0;
	cr_assert_eq(read(e.fd, &v, sizeof(v)), (ssize_t)sizeof(v));
	cr_assert_eq(v, 1, "one write for two kicks, got %llu", (unsigned long long)v);
	iscsi_evthread_woke(&e, 1);
	cr_assert_eq(iscsi_evthread_wakeups(&e), 1);
	iscsi_evthread_fini(&e);
}

Test(evthread, abort_signals_an_awake_thread)
{
	struct iscsi_evthread e;
	start(&e);
	e.started = true; /* abort acts on a started thread only */
	iscsi_evthread_abort(&e, "t");
	e.started = false;
	struct pollfd p = {.fd = e.fd, .events = POLLIN};
	cr_assert_eq(poll(&p, 1, 0), 1, "abort is seen only through a readable eventfd");
	cr_assert_eq(iscsi_evthread_drain(&e), -ENETDOWN);
	iscsi_evthread_fini(&e);
}

/* A loop like the transports': clear the kick, take the work, block in poll unless kicked meanwhile. */
#define KICKS 200000
static atomic_uint work;
static atomic_uint done;
static atomic_uint lost;

static void *loop_thread(void *arg)
{
	struct iscsi_evthread *e = arg;
	while (atomic_load(&done) < KICKS) {
		atomic_store(&e->kicked, false);
		atomic_fetch_add(&done, atomic_exchange(&work, 0));
		if (atomic_load(&done) >= KICKS)
			break;
		int wait = iscsi_evthread_sleep(e) ? 2000 : 0;
		struct pollfd p = {.fd = e->fd, .events = POLLIN};
		int r = poll(&p, 1, wait);
		iscsi_evthread_woke(e, r);
		if (r == 0 && wait && atomic_load(&work))
			atomic_fetch_add(&lost, 1); /* slept 2 s with work queued: a kick was lost */
		if (r > 0)
			iscsi_evthread_drain(e);
	}
	return NULL;
}

Test(evthread, no_kick_is_lost_between_the_last_look_and_poll, .timeout = 60)
{
	struct iscsi_evthread e;
	iscsi_evthread_init(&e);
	cr_assert_eq(iscsi_evthread_start(&e, loop_thread, &e), 0);
	for (unsigned i = 0; i < KICKS; i++) {
		atomic_fetch_add(&work, 1);
		iscsi_evthread_kick(&e, "t");
		if (i % 1024 == 0)
			usleep(50); /* let it fall asleep now and then */
	}
	pthread_join(e.thread, NULL);
	e.started = false;
	cr_assert_eq(atomic_load(&done), KICKS);
	cr_assert_eq(atomic_load(&lost), 0, "%u kicks lost", atomic_load(&lost));
	iscsi_evthread_fini(&e);
}
