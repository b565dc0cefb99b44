/* SPDX-License-Identifier: MIT */
/*
 * The one monotonic clock of the initiator and the cache: CLOCK_MONOTONIC
 * readings in milliseconds and microseconds, absolute deadlines as struct
 * timespec for pthread_cond_timedwait, and condition variables that wait on
 * that clock.  A condition variable waited with these deadlines must be
 * made with clk_cond_init: one on the default clock (CLOCK_REALTIME) takes
 * a monotonic deadline for one long past and returns at once.
 *
 * Header only but for the pass clock (clock.c): one thread-local reading
 * that an event loop takes as it wakes, so the commands a pass submits and
 * completes are stamped without a clock read each; any thread.
 */
#ifndef ISERFUSE_CLOCK_H
#define ISERFUSE_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#define CLK_NS_PER_S 1000000000L
#define CLK_NS_PER_MS 1000000L

/* CLOCK_MONOTONIC now, in milliseconds. */
static inline int64_t clk_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / CLK_NS_PER_MS;
}

/* CLOCK_MONOTONIC now, in microseconds. */
static inline int64_t clk_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/*
 * ts plus ms milliseconds (negative taken as 0), normalised: tv_nsec stays
 * below one second, the carry goes into tv_sec.  ts must be normalised.
 */
static inline struct timespec clk_ts_add_ms(struct timespec ts, int64_t ms)
{
	if (ms < 0)
		ms = 0;
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * CLK_NS_PER_MS;
	if (ts.tv_nsec >= CLK_NS_PER_S) {
		ts.tv_sec++;
		ts.tv_nsec -= CLK_NS_PER_S;
	}
	return ts;
}

/* An absolute CLOCK_MONOTONIC time abs_ms (milliseconds, >= 0), or a duration, as a struct timespec. */
static inline struct timespec clk_ms_ts(int64_t abs_ms)
{
	struct timespec ts = {0, 0};
	return clk_ts_add_ms(ts, abs_ms);
}

/*
 * The CLOCK_MONOTONIC deadline ms_from_now milliseconds from now (negative
 * taken as 0), for pthread_cond_timedwait on a clk_cond_init condvar.
 */
static inline struct timespec clk_deadline_ms(int64_t ms_from_now)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return clk_ts_add_ms(ts, ms_from_now);
}

/*
 * Initialise *cv to wait on CLOCK_MONOTONIC (the clock of clk_deadline_ms
 * and clk_ms_ts).  Returns 0 or a negative errno (pthread_cond_init's).
 * Free with pthread_cond_destroy.
 */
static inline int clk_cond_init(pthread_cond_t *cv)
{
	pthread_condattr_t ca;
	int rc = pthread_condattr_init(&ca);
	if (rc)
		return -rc;
	rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (!rc)
		rc = pthread_cond_init(cv, &ca);
	pthread_condattr_destroy(&ca);
	return -rc;
}

/*
 * The pass clock.  An event loop calls clk_pass_begin as it wakes and
 * clk_pass_end before it waits again; in between, clk_pass_us is that
 * reading (CLOCK_MONOTONIC, microseconds), and outside a pass, or on a
 * thread that keeps none, a fresh one.  Only for what a pass may share:
 * a command's submission and completion stamps, the last receive, the
 * loop's own tick and wait.  Per thread.
 */
extern _Thread_local int64_t clk_pass_now_us;

/* Starts the calling thread's pass: reads the clock once and returns it (microseconds). */
static inline int64_t clk_pass_begin(void)
{
	return clk_pass_now_us = clk_now_us();
}

/* Ends the calling thread's pass: clk_pass_us reads the clock again. */
static inline void clk_pass_end(void)
{
	clk_pass_now_us = 0;
}

/* The pass's reading, or CLOCK_MONOTONIC now outside a pass (microseconds). */
static inline int64_t clk_pass_us(void)
{
	int64_t v = clk_pass_now_us;
	return v ? v : clk_now_us();
}

#endif
