/* SPDX-License-Identifier: MIT */
/*
 * Delayed re-submission of block commands, and the count of what the
 * target reported while doing I/O (SAM-5 §5.3 status, SPC-4 §5.14 unit
 * attention conditions).
 *
 * A completion on the event thread must not sleep, so a command that is
 * to be retried after a delay (BUSY, TASK SET FULL, NOT READY / becoming
 * ready) is parked here: one thread sleeps until the earliest item is due
 * and calls its fire function, which re-submits it.  Items are embedded in
 * their owner (no allocation); the owner must stay valid until fired.
 *
 * A UNIT ATTENTION seen on the data path is passed to a hook (set by the
 * gateway), which decides what to probe again; the hook runs on the event
 * thread and must not block.
 */
#ifndef ISERFUSE_RETRY_H
#define ISERFUSE_RETRY_H

#include <stdbool.h>
#include <stdint.h>

#include "initiator/scsi/scsi.h"
#include "initiator/session/session.h"

struct blk_retry;

struct blk_retry_item {
	struct blk_retry_item *next;
	uint64_t due_ms;                          /* CLOCK_MONOTONIC, ms */
	void (*fire)(struct blk_retry_item *it);  /* on the retry thread */
};

/*
 * Called for each UNIT ATTENTION (on the event thread, or the thread of a
 * synchronous command), with q's lock held: it must not block or call
 * back into q.  events: SCSI_UA_* bits (may be 0).
 */
typedef void (*blk_ua_fn)(void *arg, uint64_t lun_field, unsigned events, const struct scsi_sense *sense);

struct blk_retry_stats {
	uint64_t retried;          /* commands re-submitted (any class) */
	uint64_t delayed;          /* of those, after a delay on the retry thread */
	uint64_t exhausted;        /* retryable failures that ran out of attempts or time */
	uint64_t unit_attentions;  /* UNIT ATTENTION statuses seen on the data path */
	uint64_t ua_capacity;      /* of those, CAPACITY DATA HAS CHANGED */
	uint64_t ua_luns;          /* of those, REPORTED LUNS DATA HAS CHANGED */
};

/* Start the retry thread.  Returns 0 or a negative errno. */
int blk_retry_create(struct blk_retry **out);

/* Fire every parked item now (their commands are re-submitted), stop the thread, free q.  NULL is a no-op. */
void blk_retry_destroy(struct blk_retry *q);

/* Set (or clear, fn NULL) the UNIT ATTENTION hook; once cleared it is no longer running or called. */
void blk_retry_set_ua_hook(struct blk_retry *q, blk_ua_fn fn, void *arg);

/* Park it; it->fire(it) runs on the retry thread about delay_ms from now. */
void blk_retry_schedule(struct blk_retry *q, struct blk_retry_item *it, unsigned delay_ms);

/* Wait up to timeout_ms until nothing is parked.  Returns 0 or -ETIMEDOUT. */
int blk_retry_drain(struct blk_retry *q, int timeout_ms);

/* Count a UNIT ATTENTION on lun_field and pass it to the hook.  q may be NULL. */
void blk_retry_note_ua(struct blk_retry *q, uint64_t lun_field, const struct scsi_sense *sense);

/*
 * The line for a command given up (what: "I/O", "discard/zeroing") on LUN
 * lun with err (negative errno): at warning level with the status and
 * sense when the target sent them (iscsi_cmd_result_status); at debug
 * level when it sent none (res->err: the command was lost with its
 * connection, timed out or failed at the replacement timeout or the stop
 * grace), since the session or the multipath layer logs that once for all
 * the commands it fails.
 */
void blk_retry_log_failure(unsigned lun, const char *what, int err, const struct iscsi_cmd_result *res);

/*
 * The retry decision for a command that failed with res (SAM-5 §5.3
 * status, SPC-4 §4.5 sense): a UNIT ATTENTION is noted (blk_retry_note_ua),
 * the status classified (scsi_status_retry) and, when it is transient and
 * the attempts or the time budget (budget_ms since the first failure) are
 * not spent, the retry counted.  *retries and *t0_ms are the command's own
 * (zero for a new command; updated here).  Returns the delay in ms before
 * the command is submitted again (0: at once; without q, always 0 and at
 * most 8 times), or -1: give up (transport error, a status that is not
 * transient, or nothing left).  Never blocks.
 */
int blk_retry_decide(struct blk_retry *q, uint64_t lun_field, const struct iscsi_cmd_result *res, unsigned *retries,
		     uint64_t *t0_ms, uint32_t budget_ms);

/* Count a retry (delayed or not) or a retryable failure given up.  q may be NULL. */
void blk_retry_count(struct blk_retry *q, bool retried, bool delayed);

void blk_retry_get_stats(struct blk_retry *q, struct blk_retry_stats *out);

/* CLOCK_MONOTONIC in milliseconds: clk_now_ms (initiator/util/clock.h), unsigned, for cache/. */
uint64_t blk_now_ms(void);

#endif
