/* SPDX-License-Identifier: MIT */
#include "retry.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "initiator/util/clock.h"
#include "initiator/util/log.h"

struct blk_retry {
	pthread_t thread;
	pthread_mutex_t lock;        /* guards head, stop, firing, the hook (held while it runs) */
	pthread_cond_t cv;           /* CLOCK_MONOTONIC: wakes the thread (new earliest item, stop) */
	pthread_cond_t idle_cv;      /* signalled when the list empties */
	struct blk_retry_item *head; /* sorted by due_ms */
	unsigned firing;             /* items taken off the list, fire() running */
	bool stop;
	blk_ua_fn ua_fn;
	void *ua_arg;
	atomic_uint_fast64_t retried, delayed, exhausted, uas, ua_capacity, ua_luns;
};

uint64_t blk_now_ms(void) { return (uint64_t)clk_now_ms(); }

static void *retry_thread(void *arg)
{
	struct blk_retry *q = arg;
	pthread_mutex_lock(&q->lock);
	for (;;) {
		struct blk_retry_item *it = q->head;
		if (!it) {
			if (q->stop)
				break;
			pthread_cond_wait(&q->cv, &q->lock);
			continue;
		}
		if (!q->stop && it->due_ms > blk_now_ms()) {
			struct timespec ts = clk_ms_ts((int64_t)it->due_ms);
			pthread_cond_timedwait(&q->cv, &q->lock, &ts);
			continue;
		}
		q->head = it->next;
		q->firing++;
		pthread_mutex_unlock(&q->lock);
		it->fire(it); /* may block for a task slot; may park the item again */
		pthread_mutex_lock(&q->lock);
		q->firing--;
		if (!q->head && !q->firing)
			pthread_cond_broadcast(&q->idle_cv);
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

int blk_retry_create(struct blk_retry **out)
{
	struct blk_retry *q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	int rc = clk_cond_init(&q->cv);
	if (!rc)
		rc = clk_cond_init(&q->idle_cv);
	pthread_mutex_init(&q->lock, NULL);
	if (!rc)
		rc = -pthread_create(&q->thread, NULL, retry_thread, q);
	if (rc) {
		pthread_cond_destroy(&q->cv);
		pthread_cond_destroy(&q->idle_cv);
		pthread_mutex_destroy(&q->lock);
		free(q);
		return rc;
	}
	*out = q;
	return 0;
}

void blk_retry_destroy(struct blk_retry *q)
{
	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	q->stop = true;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->lock);
	pthread_join(q->thread, NULL);
	pthread_cond_destroy(&q->cv);
	pthread_cond_destroy(&q->idle_cv);
	pthread_mutex_destroy(&q->lock);
	free(q);
}

void blk_retry_set_ua_hook(struct blk_retry *q, blk_ua_fn fn, void *arg)
{
	pthread_mutex_lock(&q->lock);
	q->ua_fn = fn;
	q->ua_arg = arg;
	pthread_mutex_unlock(&q->lock);
}

void blk_retry_schedule(struct blk_retry *q, struct blk_retry_item *it, unsigned delay_ms)
{
	it->due_ms = blk_now_ms() + delay_ms;
	pthread_mutex_lock(&q->lock);
	struct blk_retry_item **pp = &q->head;
	while (*pp && (*pp)->due_ms <= it->due_ms)
		pp = &(*pp)->next;
	it->next = *pp;
	*pp = it;
	if (q->head == it)
		pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->lock);
}

int blk_retry_drain(struct blk_retry *q, int timeout_ms)
{
	struct timespec ts = clk_deadline_ms(timeout_ms);
	int rc = 0;
	pthread_mutex_lock(&q->lock);
	while ((q->head || q->firing) && rc == 0)
		if (pthread_cond_timedwait(&q->idle_cv, &q->lock, &ts) == ETIMEDOUT)
			rc = -ETIMEDOUT;
	if (rc && !q->head && !q->firing)
		rc = 0;
	pthread_mutex_unlock(&q->lock);
	return rc;
}

void blk_retry_note_ua(struct blk_retry *q, uint64_t lun_field, const struct scsi_sense *sense)
{
	if (!q)
		return;
	unsigned ev = scsi_ua_event(sense);
	atomic_fetch_add(&q->uas, 1);
	if (ev & SCSI_UA_CAPACITY)
		atomic_fetch_add(&q->ua_capacity, 1);
	if (ev & SCSI_UA_LUNS)
		atomic_fetch_add(&q->ua_luns, 1);
	pthread_mutex_lock(&q->lock); /* so that the hook is never called once it has been cleared */
	if (q->ua_fn)
		q->ua_fn(q->ua_arg, lun_field, ev, sense);
	pthread_mutex_unlock(&q->lock);
}

void blk_retry_log_failure(unsigned lun, const char *what, int err, const struct iscsi_cmd_result *res)
{
	char st[64];
	if (res->err)
		log_debug("lun%u: %s failed: %s", lun, what, strerror(-err));
	else
		log_warn("lun%u: %s failed: %s%s", lun, what, strerror(-err), iscsi_cmd_result_status(res, st, sizeof(st)));
}

#define RETRIES_UNQUEUED 8 /* immediate retries when no retry thread can wait (shutting down) */

int blk_retry_decide(struct blk_retry *q, uint64_t lun_field, const struct iscsi_cmd_result *res, unsigned *retries,
		     uint64_t *t0_ms, uint32_t budget_ms)
{
	const struct scsi_sense *sense = res->has_sense ? &res->sense : NULL;
	if (res->err)
		return -1;
	if (sense && sense->key == SCSI_SK_UNIT_ATTENTION)
		blk_retry_note_ua(q, lun_field, sense);
	enum scsi_retry c = scsi_status_retry(res->status, sense);
	if (c == SCSI_RETRY_NO)
		return -1;
	uint64_t now = blk_now_ms();
	if (*retries == 0)
		*t0_ms = now;
	int delay = scsi_retry_delay_ms(c, *retries, now - *t0_ms, budget_ms);
	if (delay < 0 || (!q && *retries >= RETRIES_UNQUEUED)) {
		blk_retry_count(q, false, false);
		return -1;
	}
	(*retries)++;
	blk_retry_count(q, true, delay > 0 && q);
	return q ? delay : 0;
}

void blk_retry_count(struct blk_retry *q, bool retried, bool delayed)
{
	if (!q)
		return;
	if (!retried) {
		atomic_fetch_add(&q->exhausted, 1);
		return;
	}
	atomic_fetch_add(&q->retried, 1);
	if (delayed)
		atomic_fetch_add(&q->delayed, 1);
}

void blk_retry_get_stats(struct blk_retry *q, struct blk_retry_stats *out)
{
	out->retried = atomic_load(&q->retried);
	out->delayed = atomic_load(&q->delayed);
	out->exhausted = atomic_load(&q->exhausted);
	out->unit_attentions = atomic_load(&q->uas);
	out->ua_capacity = atomic_load(&q->ua_capacity);
	out->ua_luns = atomic_load(&q->ua_luns);
}
