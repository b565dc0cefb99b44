/* SPDX-License-Identifier: MIT */
/*
 * initiator/util/clock.h: milliseconds to struct timespec (normalised at the
 * nanosecond carry), deadlines on CLOCK_MONOTONIC, and a condition variable
 * whose timed wait honours such a deadline.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "initiator/util/clock.h"

Test(clock, ms_ts_splits_seconds_and_nanoseconds)
{
	struct timespec ts = clk_ms_ts(0);
	cr_assert_eq(ts.tv_sec, 0);
	cr_assert_eq(ts.tv_nsec, 0);
	ts = clk_ms_ts(1999);
	cr_assert_eq(ts.tv_sec, 1);
	cr_assert_eq(ts.tv_nsec, 999000000L);
	ts = clk_ms_ts(2000);
	cr_assert_eq(ts.tv_sec, 2);
	cr_assert_eq(ts.tv_nsec, 0);
	ts = clk_ms_ts(123456789);
	cr_assert_eq(ts.tv_sec, 123456);
	cr_assert_eq(ts.tv_nsec, 789000000L);
}

Test(clock, add_ms_carries_into_seconds)
{
	struct timespec ts = {.tv_sec = 5, .tv_nsec = 999999999L};
	struct timespec r = clk_ts_add_ms(ts, 1);
	cr_assert_eq(r.tv_sec, 6);
	cr_assert_eq(r.tv_nsec, 999999L);
	ts = (struct timespec){.tv_sec = 7, .tv_nsec = 500000000L};
	r = clk_ts_add_ms(ts, 500);
	cr_assert_eq(r.tv_sec, 8, "exactly one second of nanoseconds carries");
	cr_assert_eq(r.tv_nsec, 0);
	r = clk_ts_add_ms(ts, 2750);
	cr_assert_eq(r.tv_sec, 10);
	cr_assert_eq(r.tv_nsec, 250000000L);
	r = clk_ts_add_ms(ts, -5);
	cr_assert_eq(r.tv_sec, 7, "a negative delay is taken as 0");
	cr_assert_eq(r.tv_nsec, 500000000L);
}

Test(clock, now_ms_and_us_agree_and_advance)
{
	int64_t ms = clk_now_ms(), us = clk_now_us();
	cr_assert_geq(us / 1000, ms);
	cr_assert_leq(us / 1000 - ms, 50);
	struct timespec nap = {.tv_sec = 0, .tv_nsec = 20 * CLK_NS_PER_MS};
	nanosleep(&nap, NULL);
	cr_assert_geq(clk_now_ms() - ms, 20);
}

Test(clock, deadline_lies_in_the_future)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	struct timespec d = clk_deadline_ms(1500);
	int64_t now_ns = (int64_t)now.tv_sec * CLK_NS_PER_S + now.tv_nsec;
	int64_t d_ns = (int64_t)d.tv_sec * CLK_NS_PER_S + d.tv_nsec;
	cr_assert_lt(d.tv_nsec, CLK_NS_PER_S);
	cr_assert_geq(d_ns - now_ns, 1500 * CLK_NS_PER_MS);
	cr_assert_lt(d_ns - now_ns, 1600 * CLK_NS_PER_MS);
	cr_assert_eq(clk_ms_ts(clk_now_ms() + 1500).tv_sec - d.tv_sec <= 1, 1, "on the clock of clk_now_ms");
}

Test(clock, cond_timedwait_honours_a_monotonic_deadline)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cv;
	cr_assert_eq(clk_cond_init(&cv), 0);
	pthread_mutex_lock(&m);
	int64_t t0 = clk_now_ms();
	struct timespec d = clk_deadline_ms(200);
	int rc = 0;
	while (rc == 0) /* a spurious wake-up waits again for the same deadline */
		rc = pthread_cond_timedwait(&cv, &m, &d);
	int64_t waited = clk_now_ms() - t0;
	pthread_mutex_unlock(&m);
	cr_assert_eq(rc, ETIMEDOUT);
	cr_assert_geq(waited, 200, "returned after %lld ms, before its deadline", (long long)waited);
	cr_assert_lt(waited, 2000, "waited %lld ms for a 200 ms deadline", (long long)waited);
	pthread_cond_destroy(&cv);
	pthread_mutex_destroy(&m);
}

static void *pass_reading_elsewhere(void *arg)
{
	*(int64_t *)arg = clk_pass_now_us; /* another thread's pass is not this one's */
	return NULL;
}

Test(clock, a_pass_holds_one_reading_for_its_thread_until_it_ends)
{
	int64_t before = clk_now_us();
	int64_t begun = clk_pass_begin();
	cr_assert_geq(begun, before);
	struct timespec nap = {0, 3 * CLK_NS_PER_MS};
	nanosleep(&nap, NULL);
	cr_assert_eq(clk_pass_us(), begun, "within a pass: the reading taken as it began");
	int64_t other = -1;
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, pass_reading_elsewhere, &other), 0);
	pthread_join(th, NULL);
	cr_assert_eq(other, 0, "the pass is per thread");
	clk_pass_end();
	cr_assert_geq(clk_pass_us(), begun + 3000, "after the pass: the clock again");
}
