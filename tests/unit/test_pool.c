/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

#include "cache/pool/pool.h"

Test(pool, slices_are_distinct_aligned_and_inside)
{
	struct buf_pool *p;
	cr_assert_eq(buf_pool_create(&p, 5000, 4), 0);
	cr_assert_eq(buf_pool_slice_size(p), 8192, "slice size is rounded up to pages");
	cr_assert_eq(buf_pool_len(p), 4 * 8192);
	uint8_t *base = buf_pool_base(p);
	void *s[4];
	unsigned idx[4];
	for (int i = 0; i < 4; i++) {
		s[i] = buf_pool_get(p, &idx[i]);
		cr_assert((uint8_t *)s[i] >= base && (uint8_t *)s[i] < base + buf_pool_len(p));
		cr_assert_eq(((uint8_t *)s[i] - base) % 8192, 0);
		cr_assert_eq((uint8_t *)s[i], base + (size_t)idx[i] * 8192);
		for (int j = 0; j < i; j++)
			cr_assert_neq(s[i], s[j]);
	}
	cr_assert_eq(buf_pool_in_use(p), 4);
	cr_assert_null(buf_pool_tryget(p, NULL), "exhausted pool has no slice to try");
	buf_pool_put(p, s[2]);
	cr_assert_eq(buf_pool_tryget(p, NULL), s[2]);
	for (int i = 0; i < 4; i++)
		buf_pool_put(p, s[i]);
	cr_assert_eq(buf_pool_in_use(p), 0);
	cr_assert_eq(buf_pool_max_in_use(p), 4);
	buf_pool_destroy(p);
}

Test(pool, index_of_a_slice_start_and_nothing_else)
{
	struct buf_pool *p;
	cr_assert_eq(buf_pool_create(&p, 5000, 4), 0);
	uint8_t *base = buf_pool_base(p);
	unsigned idx = 99;
	cr_assert_eq(buf_pool_index(p, base, &idx), 0);
	cr_assert_eq(idx, 0);
	cr_assert_eq(buf_pool_index(p, base + 3 * 8192, &idx), 0);
	cr_assert_eq(idx, 3);
	idx = 99;
	cr_assert_eq(buf_pool_index(p, base + 8192 + 4096, &idx), -EINVAL, "inside a slice, not its start");
	cr_assert_eq(buf_pool_index(p, base + 4 * 8192, &idx), -EINVAL, "just past the pool");
	cr_assert_eq(buf_pool_index(p, base - 8192, &idx), -EINVAL, "before the pool");
	cr_assert_eq(idx, 99, "left alone on failure");
	void *s = buf_pool_get(p, &idx);
	unsigned got;
	cr_assert_eq(buf_pool_index(p, s, &got), 0);
	cr_assert_eq(got, idx, "the number buf_pool_get gave");
	buf_pool_put(p, s);
	buf_pool_destroy(p);
}

Test(pool, bad_sizes)
{
	struct buf_pool *p;
	cr_assert_eq(buf_pool_create(&p, 0, 4), -EINVAL);
	cr_assert_eq(buf_pool_create(&p, 4096, 0), -EINVAL);
	cr_assert_eq(buf_pool_create(&p, SIZE_MAX / 2, 4), -EINVAL);
}

struct putter {
	struct buf_pool *p;
	void *slice;
	atomic_bool returned; /* set just before the slice goes back */
};

static void *put_later(void *arg)
{
	struct putter *pt = arg;
	usleep(100000);
	atomic_store(&pt->returned, true);
	buf_pool_put(pt->p, pt->slice);
	return NULL;
}

Test(pool, exhaustion_waits_for_a_free_slice)
{
	struct buf_pool *p;
	cr_assert_eq(buf_pool_create(&p, 4096, 1), 0);
	struct putter pt = {p, buf_pool_get(p, NULL), false};
	pthread_t th;
	pthread_create(&th, NULL, put_later, &pt);
	void *again = buf_pool_get(p, NULL); /* blocks until put_later returns the slice */
	cr_assert(atomic_load(&pt.returned), "the only slice was handed out again while still in use");
	cr_assert_eq(again, pt.slice);
	cr_assert_eq(buf_pool_in_use(p), 1);
	pthread_join(th, NULL);
	buf_pool_put(p, again);
	buf_pool_destroy(p);
}

static void *put_one(void *arg)
{
	void **a = arg;
	buf_pool_put(a[0], a[1]);
	return NULL;
}

Test(pool, held_puts_stay_out_until_the_hold_ends)
{
	struct buf_pool *p;
	cr_assert_eq(buf_pool_create(&p, 4096, 200), 0);
	void *s[200];
	for (int i = 0; i < 200; i++)
		s[i] = buf_pool_get(p, NULL);
	pool_hold_begin();
	for (int i = 0; i < 150; i++) /* more than the hold's first allocation: it grows */
		buf_pool_put(p, s[i]);
	cr_assert_eq(buf_pool_in_use(p), 200, "a held put gave its slice back at once");
	cr_assert_null(buf_pool_tryget(p, NULL), "a held slice was handed out again");
	/* another thread's puts are not held */
	pthread_t th;
	void *a[2] = {p, s[150]};
	pthread_create(&th, NULL, put_one, a);
	pthread_join(th, NULL);
	cr_assert_eq(buf_pool_in_use(p), 199);
	pool_hold_end();
	cr_assert_eq(buf_pool_in_use(p), 49, "the held slices came back at the hold's end");
	buf_pool_put(p, s[151]); /* no hold now: back at once */
	cr_assert_eq(buf_pool_in_use(p), 48);
	for (int i = 152; i < 200; i++)
		buf_pool_put(p, s[i]);
	cr_assert_eq(buf_pool_in_use(p), 0);
	buf_pool_destroy(p);
}

static void *get_one(void *arg)
{
	return buf_pool_get(arg, NULL); /* blocks while the pool is empty */
}

Test(pool, a_hold_ending_wakes_every_waiter_it_can_serve)
{
	struct buf_pool *p;
	cr_assert_eq(buf_pool_create(&p, 4096, 3), 0);
	void *s[3];
	for (int i = 0; i < 3; i++)
		s[i] = buf_pool_get(p, NULL);
	pool_hold_begin();
	buf_pool_put(p, s[0]);
	buf_pool_put(p, s[1]);
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, get_one, p);
	usleep(100 * 1000); /* both wait in buf_pool_get: the held slices are not in the pool */
	cr_assert_eq(buf_pool_in_use(p), 3);
	pool_hold_end(); /* both puts in one lock round: both waiters must wake, not one */
	void *got[2];
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], &got[i]);
	cr_assert(got[0] && got[1] && got[0] != got[1]);
	cr_assert(got[0] == s[0] || got[0] == s[1]);
	cr_assert(got[1] == s[0] || got[1] == s[1]);
	cr_assert_eq(buf_pool_in_use(p), 3);
	for (int i = 0; i < 2; i++)
		buf_pool_put(p, got[i]);
	buf_pool_put(p, s[2]);
	cr_assert_eq(buf_pool_in_use(p), 0);
	buf_pool_destroy(p);
}

static void *tryget_one(void *arg)
{
	return buf_pool_tryget(arg, NULL);
}

/* buf_pool_get in a thread of its own, telling when it has its slice. */
struct getter {
	struct buf_pool *p;
	atomic_bool got;
	void *slice;
	pthread_t th;
};

static void *getter_run(void *arg)
{
	struct getter *g = arg;
	g->slice = buf_pool_get(g->p, NULL);
	atomic_store(&g->got, true);
	return NULL;
}

static void getter_start(struct getter *g, struct buf_pool *p)
{
	g->p = p;
	atomic_init(&g->got, false);
	g->slice = NULL;
	pthread_create(&g->th, NULL, getter_run, g);
}

Test(pool, spares_serve_their_thread_only_until_returned)
{
	struct buf_pool *p, *q;
	cr_assert_eq(buf_pool_create(&p, 4096, 200), 0);
	cr_assert_eq(buf_pool_create(&q, 4096, 4), 0);
	void *s[200];
	for (int i = 0; i < 200; i++)
		s[i] = buf_pool_get(p, NULL);
	void *x = buf_pool_get(q, NULL);
	pool_hold_begin();
	for (int i = 0; i < 150; i++) /* more than a thread keeps: 128 become spares, 22 go back */
		buf_pool_put(p, s[i]);
	buf_pool_put(q, x); /* another pool's: back to its pool */
	pool_hold_end_keep();
	cr_assert_eq(buf_pool_in_use(p), 178, "past 128 a kept slice went back to the pool");
	cr_assert_eq(buf_pool_in_use(q), 0);
	/* another thread finds only the 22 in the pool, never a spare */
	void *other[22];
	pthread_t th;
	for (int i = 0; i < 22; i++) {
		pthread_create(&th, NULL, tryget_one, p);
		pthread_join(th, &other[i]);
		cr_assert_not_null(other[i]);
	}
	void *none;
	pthread_create(&th, NULL, tryget_one, p);
	pthread_join(th, &none);
	cr_assert_null(none, "another thread took a spare");
	/* this thread takes its spares, the last returned first, with their numbers */
	unsigned idx, want;
	cr_assert_eq(buf_pool_tryget(p, &idx), s[127]);
	cr_assert_eq(buf_pool_index(p, s[127], &want), 0);
	cr_assert_eq(idx, want);
	cr_assert_eq(buf_pool_get(p, NULL), s[126]);
	cr_assert_eq(buf_pool_tryget(q, NULL), x, "a spare of p served a get of q");
	buf_pool_put(q, x);
	pool_spares_return();
	cr_assert_eq(buf_pool_in_use(p), 74, "the 126 spares left went back");
	pool_spares_return(); /* none left: nothing */
	cr_assert_eq(buf_pool_in_use(p), 74);
	for (int i = 0; i < 22; i++)
		buf_pool_put(p, other[i]);
	for (int i = 126; i < 128; i++)
		buf_pool_put(p, s[i]);
	for (int i = 150; i < 200; i++)
		buf_pool_put(p, s[i]);
	cr_assert_eq(buf_pool_in_use(p), 0);
	buf_pool_destroy(p);
	buf_pool_destroy(q);
}

Test(pool, returned_spares_wake_a_waiter)
{
	struct buf_pool *p;
	cr_assert_eq(buf_pool_create(&p, 4096, 2), 0);
	void *s[2] = {buf_pool_get(p, NULL), buf_pool_get(p, NULL)};
	pool_hold_begin();
	buf_pool_put(p, s[0]);
	buf_pool_put(p, s[1]);
	pool_hold_end_keep();
	struct getter g[2];
	for (int i = 0; i < 2; i++)
		getter_start(&g[i], p);
	usleep(100 * 1000);
	cr_assert(!atomic_load(&g[0].got) && !atomic_load(&g[1].got), "another thread got a spare");
	pool_spares_return(); /* two slices in one lock round: both waiters wake */
	for (int i = 0; i < 2; i++)
		pthread_join(g[i].th, NULL);
	cr_assert(g[0].slice && g[1].slice && g[0].slice != g[1].slice);
	for (int i = 0; i < 2; i++)
		buf_pool_put(p, g[i].slice);
	cr_assert_eq(buf_pool_in_use(p), 0);
	buf_pool_destroy(p);
}

Test(pool, spares_stay_one_idle_round_while_used_and_none_waits)
{
	struct buf_pool *p;
	cr_assert_eq(buf_pool_create(&p, 4096, 4), 0);
	void *s[3];
	for (int i = 0; i < 3; i++)
		s[i] = buf_pool_get(p, NULL);
	cr_assert_not(pool_spares_idle(), "no spares, nothing kept");
	pool_hold_begin();
	buf_pool_put(p, s[0]);
	buf_pool_put(p, s[1]);
	pool_hold_end_keep();
	cr_assert(pool_spares_idle(), "spares just made are kept for the next round");
	cr_assert_eq(buf_pool_in_use(p), 3);
	cr_assert_eq(buf_pool_tryget(p, NULL), s[1]);
	cr_assert(pool_spares_idle(), "a round that took one keeps the rest");
	cr_assert_eq(buf_pool_in_use(p), 3);
	cr_assert_not(pool_spares_idle(), "a round that used none gives them back");
	cr_assert_eq(buf_pool_in_use(p), 2);
	/* every slice out: s[1] and three more */
	buf_pool_put(p, s[2]);
	void *a = buf_pool_tryget(p, NULL), *b = buf_pool_tryget(p, NULL), *c = buf_pool_tryget(p, NULL);
	cr_assert(a && b && c);
	/* a thread waits: the spare goes back at the next idle round */
	pool_hold_begin();
	buf_pool_put(p, a);
	pool_hold_end_keep();
	struct getter g;
	getter_start(&g, p);
	usleep(100 * 1000);
	cr_assert_not(atomic_load(&g.got), "another thread got a spare");
	cr_assert_not(pool_spares_idle(), "kept while a thread waits for a slice");
	pthread_join(g.th, NULL);
	cr_assert_eq(g.slice, a);
	/* made while a thread waits: none kept */
	pool_hold_begin();
	buf_pool_put(p, b);
	getter_start(&g, p);
	usleep(100 * 1000);
	cr_assert_not(atomic_load(&g.got));
	pool_hold_end_keep();
	for (int i = 0; i < 100 && !atomic_load(&g.got); i++)
		usleep(10 * 1000);
	bool woken = atomic_load(&g.got);
	pool_spares_return(); /* a spare kept would leave the waiter waiting: fail, not hang */
	pthread_join(g.th, NULL);
	cr_assert(woken, "a slice was kept as a spare while a thread waited");
	cr_assert_eq(g.slice, b);
	/* kept only while the pool has free slices besides them (a reader's tryget waits for nothing) */
	pool_hold_begin();
	buf_pool_put(p, b);
	pool_hold_end_keep();
	cr_assert_eq(buf_pool_in_use(p), 4);
	cr_assert_not(pool_spares_idle(), "kept with no slice of the pool's own free");
	cr_assert_eq(buf_pool_in_use(p), 3);
	buf_pool_put(p, s[1]);
	buf_pool_put(p, a);
	buf_pool_put(p, c);
	cr_assert_eq(buf_pool_in_use(p), 0);
	buf_pool_destroy(p);
}
