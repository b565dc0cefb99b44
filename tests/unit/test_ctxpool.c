/* SPDX-License-Identifier: MIT */
/*
 * The fixed set of request contexts (cache/pool/ctxpool.c): every object handed
 * out once until put back, aligned and inside the set; a get with every
 * object out waits and is woken by a put; tryget never waits; a foreign or
 * doubled put aborts; and the cost of a get/put pair.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "cache/pool/ctxpool.h"

#define N 64u

Test(ctxpool, every_object_is_handed_out_once_aligned_and_inside_the_set)
{
	struct ctxpool *p;
	cr_assert_eq(ctxpool_create(&p, 40, N), 0);
	cr_assert_eq(ctxpool_size(p), N);
	void *got[N];
	for (unsigned i = 0; i < N; i++) {
		got[i] = ctxpool_get(p);
		cr_assert(ctxpool_owns(p, got[i]));
		cr_assert_eq((uintptr_t)got[i] % _Alignof(max_align_t), 0, "object %u aligned", i);
		for (unsigned j = 0; j < i; j++)
			cr_assert_neq(got[i], got[j], "objects %u and %u are the same", i, j);
		/* the objects do not overlap: 40 bytes of each can be written */
		memset(got[i], (int)i, 40);
	}
	for (unsigned i = 0; i < N; i++)
		cr_assert_eq(((unsigned char *)got[i])[39], (unsigned char)i, "object %u kept its bytes", i);
	cr_assert_eq(ctxpool_in_use(p), N);
	cr_assert_null(ctxpool_tryget(p), "tryget with every object out");
	ctxpool_put(p, got[5]);
	cr_assert_eq(ctxpool_tryget(p), got[5], "the object put back is the one handed out next");
	for (unsigned i = 0; i < N; i++)
		ctxpool_put(p, got[i]);
	cr_assert_eq(ctxpool_in_use(p), 0);
	cr_assert_eq(ctxpool_max_in_use(p), N);
	ctxpool_destroy(p);
}

Test(ctxpool, bad_sizes_are_refused)
{
	struct ctxpool *p;
	cr_assert_eq(ctxpool_create(&p, 0, 4), -EINVAL);
	cr_assert_eq(ctxpool_create(&p, 16, 0), -EINVAL);
	cr_assert_eq(ctxpool_create(&p, SIZE_MAX / 2, 4), -EINVAL);
	cr_assert_not(ctxpool_owns(NULL, &p));
}

struct waiter {
	struct ctxpool *p;
	atomic_bool done;
	void *got;
};

static void *get_thread(void *arg)
{
	struct waiter *w = arg;
	w->got = ctxpool_get(w->p);
	atomic_store(&w->done, true);
	return NULL;
}

Test(ctxpool, a_get_with_every_object_out_waits_and_a_put_wakes_it)
{
	struct ctxpool *p;
	cr_assert_eq(ctxpool_create(&p, 16, 2), 0);
	void *a = ctxpool_get(p), *b = ctxpool_get(p);
	struct waiter w = {.p = p};
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, get_thread, &w), 0);
	usleep(100 * 1000);
	cr_assert_not(atomic_load(&w.done), "get returned with every object out");
	ctxpool_put(p, b);
	for (int i = 0; i < 2000 && !atomic_load(&w.done); i++)
		usleep(1000);
	cr_assert(atomic_load(&w.done), "the put did not wake the waiting get");
	pthread_join(t, NULL);
	cr_assert_eq(w.got, b, "the waiter got the object put back");
	ctxpool_put(p, a);
	ctxpool_put(p, w.got);
	cr_assert_eq(ctxpool_in_use(p), 0);
	ctxpool_destroy(p);
}

Test(ctxpool, a_pointer_outside_the_set_aborts, .signal = SIGABRT)
{
	struct ctxpool *p;
	cr_assert_eq(ctxpool_create(&p, 16, 2), 0);
	int x;
	ctxpool_put(p, &x);
}

Test(ctxpool, a_put_with_every_object_free_aborts, .signal = SIGABRT)
{
	struct ctxpool *p;
	cr_assert_eq(ctxpool_create(&p, 16, 2), 0);
	void *a = ctxpool_get(p);
	ctxpool_put(p, a);
	ctxpool_put(p, a);
}

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Not a pass/fail timing: prints what one get/put pair costs (one thread, uncontended). */
Test(ctxpool, cost_of_a_get_put_pair_against_malloc_free)
{
	struct ctxpool *p;
	cr_assert_eq(ctxpool_create(&p, 200, 128), 0);
	enum { ROUNDS = 200000 };
	double best_pool = 1e18, best_malloc = 1e18;
	for (int round = 0; round < 5; round++) {
		double t0 = now_ns();
		for (int i = 0; i < ROUNDS; i++) {
			void *o = ctxpool_get(p);
			__asm__ volatile("" : : "r"(o) : "memory");
			ctxpool_put(p, o);
		}
		double t1 = now_ns();
		for (int i = 0; i < ROUNDS; i++) {
			void *o = malloc(200);
			__asm__ volatile("" : : "r"(o) : "memory");
			free(o);
		}
		double t2 = now_ns();
		if ((t1 - t0) / ROUNDS < best_pool)
			best_pool = (t1 - t0) / ROUNDS;
		if ((t2 - t1) / ROUNDS < best_malloc)
			best_malloc = (t2 - t1) / ROUNDS;
	}
	fprintf(stderr, "ctxpool get+put: %.1f ns; malloc+free of 200 bytes: %.1f ns (best of 5)\n", best_pool,
		best_malloc);
	cr_assert_eq(ctxpool_in_use(p), 0);
	ctxpool_destroy(p);
}
