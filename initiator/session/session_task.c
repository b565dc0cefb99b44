/* SPDX-License-Identifier: MIT */
/*
 * iSCSI session: the task table and its queues (RFC 7143 §4.2.2.1, §11.1).
 * A task slot's ITT is its generation << 16 | its index (ITT_GEN_*), so a
 * response finds its task in O(1); commands wait in the CmdSN window queue
 * until CmdSN <= MaxCmdSN, then in the tx queue until the transport's
 * tx_fill takes their PDUs.  Completion releases the slot before the
 * callback runs, which happens with the session lock dropped.
 *
 * Locks: everything here runs with the session lock held, except
 * sess_run_completion (lock dropped) and iscsi_session_in_callback.
 */
#include "session_priv.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "initiator/util/clock.h"
#include "initiator/util/latency.h"

/* Append t to the tx queue: it has a PDU to send (no-op when queued). */
void sess_txq_push(struct iscsi_session *s, struct task *t)
{
	if (t->in_txq)
		return;
	t->in_txq = true;
	t->next = NULL;
	if (s->tx_tail)
		s->tx_tail->next = t;
	else
		s->tx_head = t;
	s->tx_tail = t;
	sess_tx_want(s);
}

/* The next task with something to send, taken off the tx queue; NULL when empty. */
struct task *sess_txq_pop(struct iscsi_session *s)
{
	struct task *t = s->tx_head;
	if (!t)
		return NULL;
	s->tx_head = t->next;
	if (!s->tx_head)
		s->tx_tail = NULL;
	t->next = NULL;
	t->in_txq = false;
	return t;
}

/* Take t off the tx queue wherever it is. */
void sess_txq_remove(struct iscsi_session *s, struct task *t)
{
	struct task *prev = NULL;
	for (struct task *x = s->tx_head; x; prev = x, x = x->next) {
		if (x != t)
			continue;
		if (prev)
			prev->next = t->next;
		else
			s->tx_head = t->next;
		if (s->tx_tail == t)
			s->tx_tail = prev;
		break;
	}
	t->in_txq = false;
	t->next = NULL;
}

/* Append t to the queue of commands waiting for the CmdSN window (§4.2.2.1). */
void sess_winq_push(struct iscsi_session *s, struct task *t)
{
	t->next = NULL;
	if (s->win_tail)
		s->win_tail->next = t;
	else
		s->win_head = t;
	s->win_tail = t;
}

void sess_winq_drop(struct iscsi_session *s, bool (*pick)(const struct task *))
{
	struct task *prev = NULL;
	for (struct task *x = s->win_head, *next; x; x = next) {
		next = x->next;
		if (!pick(x)) {
			prev = x;
			continue;
		}
		if (prev)
			prev->next = next;
		else
			s->win_head = next;
		if (s->win_tail == x)
			s->win_tail = prev;
		x->next = NULL;
	}
}

/* Give t the ITT of its current generation, wrapping below the reserved ones (ITT_GEN_TMF..). */
void sess_task_assign_itt(struct task *t)
{
	if (t->gen >= ITT_GEN_TMF)
		t->gen = 0;
	t->itt = itt_make(t->gen, t->index);
}

/* Move commands from the window queue while CmdSN <= MaxCmdSN (§4.2.2.1). */
bool sess_window_admit(struct iscsi_session *s)
{
	bool any = false;
	while (s->win_head && iscsi_sn_le(s->cmdsn, s->maxcmdsn)) {
		struct task *t = s->win_head;
		s->win_head = t->next;
		if (!s->win_head)
			s->win_tail = NULL;
		t->cmdsn = s->cmdsn++;
		sess_txq_push(s, t);
		any = true;
	}
	return any;
}

/* O(1): the ITT's low 16 bits index the table; the whole ITT must match (generation). */
struct task *sess_task_lookup(struct iscsi_session *s, uint32_t itt)
{
	uint32_t idx = itt & 0xffff;
	if (itt == ISCSI_RESERVED_TAG || idx >= s->ntasks)
		return NULL;
	struct task *t = &s->tasks[idx];
	if (!t->in_use || t->itt != itt || !t->cmd_sent || t->done_deferred)
		return NULL;
	return t;
}

/* Release t's slot into c (see struct completion), or defer while the transport still sends from its buffer. */
void sess_task_finish(struct iscsi_session *s, struct task *t, struct completion *c)
{
	/* A target may answer before we sent all the data it could take. */
	if (t->in_txq)
		sess_txq_remove(s, t);
	t->bursting = false;
	t->r2t_count = 0;
	if (t->tx_pending) {
		/* The transport still sends from the buffer: finish in sess_hook_tx_done. */
		t->deferred_res = c->res;
		t->done_deferred = true;
		c->cb = NULL;
		return;
	}
	c->cb = t->cmd.cb;
	c->arg = t->cmd.arg;
	if (c->cb)
		atomic_fetch_add_explicit(&s->callbacks_running, 1, memory_order_relaxed);
	if (!c->res.err)
		lat_hist_add(&s->lat, (uint64_t)(clk_pass_us() - t->submit_us));
	t->in_use = false;
	t->gen++;
	if (t->counted)
		s->worker_outstanding--;
	s->outstanding--;
	t->next = s->free_list;
	s->free_list = t;
	if (s->slot_waiting)
		pthread_cond_signal(&s->slot_cv);
	if (s->outstanding == 0)
		pthread_cond_broadcast(&s->state_cv);
}

/* Forget a task's per-connection state: it will be sent again from scratch. */
void sess_task_reset(struct task *t)
{
	t->next = NULL;
	t->in_txq = t->cmd_sent = t->bursting = false;
	t->cmdsn = t->unsol_end = t->tx_offset = t->burst_end = t->burst_ttt = t->burst_datasn = t->data_sent = 0;
	t->stalled = false;
	t->r2t_head = t->r2t_count = 0;
	t->rx_offset = t->rx_datasn = 0;
	t->tx_pending = 0;
	t->done_deferred = false;
}

/* Callbacks may submit; such submissions never wait for a slot (whatever the thread). */
static _Thread_local int in_callback;

bool iscsi_session_in_callback(void) { return in_callback > 0; }

void sess_callback_enter(void) { in_callback++; }

void sess_callback_leave(void) { in_callback--; }

/* Run a completion taken by sess_task_finish; lock NOT held. */
void sess_run_completion(struct iscsi_session *s, struct completion *c)
{
	if (!c->cb)
		return;
	in_callback++;
	c->cb(c->arg, &c->res);
	in_callback--;
	if (atomic_fetch_sub(&s->callbacks_running, 1) == 1 && atomic_load(&s->drain_waiters)) {
		pthread_mutex_lock(&s->lock); /* a drain waiting on state_cv sees the count under the lock */
		pthread_cond_broadcast(&s->state_cv);
		pthread_mutex_unlock(&s->lock);
	}
}

/*
 * Complete, one at a time with the lock dropped around each callback, every
 * task `pick` selects; `err` is the result unless the task is doomed (then
 * its deferred_res).  Called with the lock held, returns with it held.
 * While connected (SS_UP) a task whose PDUs the transport still sends
 * completes later, in sess_hook_tx_done; otherwise the transport is gone and it
 * completes now.  Returns how many were picked.
 */
/*
 * A task already finished but for its PDUs the live transport still sends
 * from the buffer: sess_hook_tx_done completes it with its deferred
 * result.  Picking it again would finish it again, defer it again, and
 * spin until the event thread's tx_done.
 */
static bool finish_waits_tx(const struct iscsi_session *s, const struct task *t)
{
	return t->done_deferred && t->tx_pending && s->state == SS_UP;
}

unsigned sess_complete_tasks(struct iscsi_session *s, bool (*pick)(const struct task *), int err)
{
	unsigned n = 0;
	for (;;) {
		struct task *t = NULL;
		for (unsigned i = 0; i < s->ntasks && !t; i++)
			if (s->tasks[i].in_use && !finish_waits_tx(s, &s->tasks[i]) && pick(&s->tasks[i]))
				t = &s->tasks[i];
		if (!t)
			return n;
		struct completion c = {0};
		c.res.err = err;
		if (t->doomed || t->done_deferred) /* answered; only its unsent PDUs were left */
			c.res = t->deferred_res;
		t->doomed = false;
		t->done_deferred = false;
		if (s->state != SS_UP)
			t->tx_pending = 0; /* the transport no longer sends anything */
		sess_task_finish(s, t, &c); /* else its PDUs still queued defer it to sess_hook_tx_done */
		if (!c.cb && t->done_deferred)
			continue; /* deferred: finish_waits_tx keeps it from being picked again */
		n++;
		pthread_mutex_unlock(&s->lock);
		sess_run_completion(s, &c);
		pthread_mutex_lock(&s->lock);
	}
}

/* sess_complete_tasks pickers. */
bool sess_pick_any(const struct task *t) { (void)t; return true; }

bool sess_pick_doomed(const struct task *t) { return t->doomed; }
