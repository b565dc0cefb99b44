/* SPDX-License-Identifier: MIT */
/*
 * initiator/mpath/mpath_stall.c without sessions: the stall watch's bounds from
 * a path's latency (floors, p99 multiples, caps), the recent part of a
 * histogram, and the decision (ping, keep, drop) on a session's state.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "initiator/mpath/mpath_priv.h"

/* A histogram of n commands of us microseconds each. */
static void hist(uint64_t h[LAT_BUCKETS], uint64_t us, uint64_t n)
{
	struct lat_hist lh;
	memset(&lh, 0, sizeof(lh));
	for (uint64_t i = 0; i < n; i++)
		lat_hist_add(&lh, us);
	lat_hist_snapshot(&lh, h);
}

Test(mpath_stall, limits_floors_without_history_or_fast)
{
	uint64_t h[LAT_BUCKETS] = {0};
	struct mp_stall_limits l;
	mp_stall_limits(h, &l); /* a new path: no latency yet */
	cr_assert_eq(l.ping_after, MP_PING_AFTER_MIN_MS);
	cr_assert_eq(l.answer, MP_ANSWER_MIN_MS);
	hist(h, 300, 1000); /* 0.3 ms commands: the floors, not 1.2 ms */
	mp_stall_limits(h, &l);
	cr_assert_eq(l.ping_after, 500);
	cr_assert_eq(l.answer, 700);
	cr_assert_leq(l.ping_after + l.answer, 1200); /* with the 100 ms tick, a blackholed path costs < 2 s */
}

Test(mpath_stall, limits_follow_p99_of_a_slow_path)
{
	uint64_t h[LAT_BUCKETS];
	hist(h, 1000, 900); /* 1 ms mostly ... */
	struct lat_hist lh;
	memset(&lh, 0, sizeof(lh));
	for (unsigned b = 0; b < LAT_BUCKETS; b++)
		atomic_store(&lh.count[b], h[b]);
	for (int i = 0; i < 100; i++)
		lat_hist_add(&lh, 400000); /* ... and a tenth at 400 ms (large writes, a busy target) */
	lat_hist_snapshot(&lh, h);
	uint64_t p99 = lat_hist_percentile(h, 99);
	cr_assert(p99 >= 262144 && p99 < 524288, "p99 %llu us in 400 ms's bucket", (unsigned long long)p99);
	struct mp_stall_limits l;
	mp_stall_limits(h, &l);
	int64_t p99_ms = (int64_t)((p99 + 999) / 1000);
	cr_assert_eq(l.ping_after, 4 * p99_ms); /* well past what such a path takes */
	cr_assert_eq(l.answer, 2 * p99_ms);
	hist(h, 30000000, 100); /* 30 s commands: the caps */
	mp_stall_limits(h, &l);
	cr_assert_eq(l.ping_after, MP_PING_AFTER_MAX_MS);
	cr_assert_eq(l.answer, MP_ANSWER_MAX_MS);
}

Test(mpath_stall, recent_part_of_the_histogram)
{
	uint64_t base[LAT_BUCKETS], cur[LAT_BUCKETS], out[LAT_BUCKETS];
	hist(base, 400000, 1000); /* slow long ago */
	memcpy(cur, base, sizeof(cur));
	cur[9] += 100; /* 100 recent ones near 0.5 ms */
	mp_lat_recent(cur, base, out);
	cr_assert_eq(out[9], 100);
	cr_assert_eq(out[18], 0); /* the old 400 ms ones left out */
	struct mp_stall_limits l;
	mp_stall_limits(out, &l);
	cr_assert_eq(l.ping_after, MP_PING_AFTER_MIN_MS);
	cur[9] = base[9] + MP_LAT_MIN_SAMPLES - 1; /* too few recent ones: everything so far */
	mp_lat_recent(cur, base, out);
	cr_assert_eq(memcmp(out, cur, sizeof(out)), 0);
}

Test(mpath_stall, judge_ping_when_silent_past_the_limit)
{
	struct mp_stall_limits l = {.ping_after = 500, .answer = 700};
	struct iscsi_session_wait w = {.up = true, .last_rx_ms = 10000, .oldest_ms = 0};
	cr_assert_eq(mp_stall_judge(&l, &w, 0, 20000), MP_STALL_NONE); /* nothing out: the keep-alive's business */
	w.oldest_ms = 10100; /* a command issued after the last reply */
	cr_assert_eq(mp_stall_judge(&l, &w, 0, 10599), MP_STALL_NONE);
	cr_assert_eq(mp_stall_judge(&l, &w, 0, 10600), MP_STALL_PING);
	/* an old command on a path that keeps replying (busy target, large writes): no ping */
	w.oldest_ms = 5000;
	w.last_rx_ms = 10400;
	cr_assert_eq(mp_stall_judge(&l, &w, 0, 10800), MP_STALL_NONE);
	cr_assert_eq(mp_stall_judge(&l, &w, 0, 10900), MP_STALL_PING);
	w.up = false; /* down already: its recovery's business */
	cr_assert_eq(mp_stall_judge(&l, &w, 0, 30000), MP_STALL_NONE);
}

Test(mpath_stall, judge_answered_ping_keeps_the_path_late_one_drops_it)
{
	struct mp_stall_limits l = {.ping_after = 500, .answer = 700};
	struct iscsi_session_wait w = {.up = true, .last_rx_ms = 10000, .oldest_ms = 10000};
	int64_t ping = 10500;
	cr_assert_eq(mp_stall_judge(&l, &w, ping, 11199), MP_STALL_NONE);
	cr_assert_eq(mp_stall_judge(&l, &w, ping, 11200), MP_STALL_DROP);
	w.last_rx_ms = 11100; /* the NOP-In (or any PDU) came: kept, however slow its commands */
	cr_assert_eq(mp_stall_judge(&l, &w, ping, 11200), MP_STALL_ANSWERED);
	cr_assert_eq(mp_stall_judge(&l, &w, ping, 60000), MP_STALL_ANSWERED);
	w.last_rx_ms = 10000;
	w.oldest_ms = 0; /* nothing out any more, and still no answer to the ping */
	cr_assert_eq(mp_stall_judge(&l, &w, ping, 11300), MP_STALL_DROP);
}
