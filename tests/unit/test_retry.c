/* SPDX-License-Identifier: MIT */
/* The retry thread (cache/blkio/retry.c): order, delays, drain, destroy, counters and the UNIT ATTENTION hook. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "cache/blkio/retry.h"

struct item {
	struct blk_retry_item it; /* first member: the item is the struct */
	int id;
	uint64_t fired_ms;
};

static pthread_mutex_t order_lock = PTHREAD_MUTEX_INITIALIZER;
static int order[8];
static int norder;

static void fire(struct blk_retry_item *it)
{
	struct item *x = (struct item *)it;
	x->fired_ms = blk_now_ms();
	pthread_mutex_lock(&order_lock);
	order[norder++] = x->id;
	pthread_mutex_unlock(&order_lock);
}

Test(retry_queue, fires_in_due_order_after_the_delay)
{
	struct blk_retry *q;
	struct item a = {.it.fire = fire, .id = 1}, b = {.it.fire = fire, .id = 2}, c = {.it.fire = fire, .id = 3};
	norder = 0;
	cr_assert_eq(blk_retry_create(&q), 0);
	uint64_t t0 = blk_now_ms();
	blk_retry_schedule(q, &a.it, 150);
	blk_retry_schedule(q, &b.it, 50);
	blk_retry_schedule(q, &c.it, 100);
	cr_assert_eq(blk_retry_drain(q, 5000), 0);
	cr_assert_eq(norder, 3);
	cr_assert_eq(order[0], 2);
	cr_assert_eq(order[1], 3);
	cr_assert_eq(order[2], 1);
	cr_assert_geq(b.fired_ms - t0, 50);
	cr_assert_geq(a.fired_ms - t0, 150);
	cr_assert_lt(a.fired_ms - t0, 2000);
	blk_retry_destroy(q);
}

Test(retry_queue, drain_times_out_and_destroy_fires_what_is_left)
{
	struct blk_retry *q;
	struct item a = {.it.fire = fire, .id = 7};
	norder = 0;
	cr_assert_eq(blk_retry_create(&q), 0);
	blk_retry_schedule(q, &a.it, 60000);
	cr_assert_eq(blk_retry_drain(q, 100), -ETIMEDOUT);
	cr_assert_eq(norder, 0);
	uint64_t t0 = blk_now_ms();
	blk_retry_destroy(q);
	cr_assert_eq(norder, 1);
	cr_assert_lt(a.fired_ms - t0, 1000);
}

static atomic_int hook_calls;
static unsigned hook_events;

static void hook(void *arg, uint64_t lun_field, unsigned events, const struct scsi_sense *sense)
{
	(void)sense;
	cr_assert_eq(arg, (void *)&hook_calls);
	cr_assert_eq(lun_field, 0x0001000000000000ull);
	hook_events |= events;
	atomic_fetch_add(&hook_calls, 1);
}

Test(retry_queue, counts_and_unit_attention_hook)
{
	struct blk_retry *q;
	struct blk_retry_stats st;
	struct scsi_sense cap = {.response_code = 0x70, .key = SCSI_SK_UNIT_ATTENTION, .asc = 0x2a, .ascq = 0x09};
	struct scsi_sense luns = {.response_code = 0x70, .key = SCSI_SK_UNIT_ATTENTION, .asc = 0x3f, .ascq = 0x0e};
	cr_assert_eq(blk_retry_create(&q), 0);
	blk_retry_note_ua(q, 0x0001000000000000ull, &cap); /* no hook yet: counted only */
	blk_retry_set_ua_hook(q, hook, &hook_calls);
	blk_retry_note_ua(q, 0x0001000000000000ull, &luns);
	blk_retry_set_ua_hook(q, NULL, NULL);
	blk_retry_note_ua(q, 0x0001000000000000ull, &cap);
	blk_retry_count(q, true, false);
	blk_retry_count(q, true, true);
	blk_retry_count(q, false, false);
	blk_retry_note_ua(NULL, 0, &cap); /* no queue: nothing */
	blk_retry_count(NULL, true, true);
	blk_retry_get_stats(q, &st);
	cr_assert_eq(atomic_load(&hook_calls), 1);
	cr_assert_eq(hook_events, SCSI_UA_LUNS);
	cr_assert_eq(st.unit_attentions, 3);
	cr_assert_eq(st.ua_capacity, 2);
	cr_assert_eq(st.ua_luns, 1);
	cr_assert_eq(st.retried, 2);
	cr_assert_eq(st.delayed, 1);
	cr_assert_eq(st.exhausted, 1);
	blk_retry_destroy(q);
}

/* The decision every block and discard command takes on a failure. */
Test(retry_decide, classes_delays_and_giving_up)
{
	struct blk_retry *q;
	struct blk_retry_stats st;
	cr_assert_eq(blk_retry_create(&q), 0);
	unsigned n = 0;
	uint64_t t0 = 0;
	struct iscsi_cmd_result busy = {.status = SCSI_STATUS_BUSY};
	/* BUSY: 10 ms doubling */
	cr_assert_eq(blk_retry_decide(q, 0, &busy, &n, &t0, 30000), 10);
	cr_assert_eq(blk_retry_decide(q, 0, &busy, &n, &t0, 30000), 20);
	cr_assert_eq(n, 2);
	cr_assert_neq(t0, 0);
	/* a transport error or ILLEGAL REQUEST: given up */
	struct iscsi_cmd_result lost = {.err = -ECONNRESET};
	struct iscsi_cmd_result illegal = {.status = SCSI_STATUS_CHECK_CONDITION, .has_sense = true,
					   .sense = {.response_code = 0x70, .key = SCSI_SK_ILLEGAL_REQUEST, .asc = 0x24}};
	cr_assert_eq(blk_retry_decide(q, 0, &lost, &n, &t0, 30000), -1);
	cr_assert_eq(blk_retry_decide(q, 0, &illegal, &n, &t0, 30000), -1);
	/* a UNIT ATTENTION: at once, and counted as one */
	struct iscsi_cmd_result ua = {.status = SCSI_STATUS_CHECK_CONDITION, .has_sense = true,
				      .sense = {.response_code = 0x70, .key = SCSI_SK_UNIT_ATTENTION, .asc = 0x29}};
	unsigned m = 0;
	cr_assert_eq(blk_retry_decide(q, 0, &ua, &m, &t0, 30000), 0);
	blk_retry_get_stats(q, &st);
	cr_assert_eq(st.retried, 3);
	cr_assert_eq(st.delayed, 2);
	cr_assert_eq(st.unit_attentions, 1);
	/* no retry thread (shutting down): at once, at most 8 times */
	unsigned k = 0;
	for (int i = 0; i < 8; i++)
		cr_assert_eq(blk_retry_decide(NULL, 0, &busy, &k, &t0, 30000), 0);
	cr_assert_eq(blk_retry_decide(NULL, 0, &busy, &k, &t0, 30000), -1);
	blk_retry_destroy(q);
}
