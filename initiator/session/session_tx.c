/* SPDX-License-Identifier: MIT */
/*
 * iSCSI session, transmit side (RFC 7143 §11.2, §11.5, §11.7.1, §11.14,
 * §11.18): the transport's tx_fill and tx_done hooks and the builders of
 * every initiator PDU: SCSI Command (with immediate data), Data-Out
 * (unsolicited and for R2Ts), and the immediate PDUs NOP-Out, Task
 * Management Function Request and Logout Request, which are all built the
 * same way (immediate_bhs, slot_put) with the CmdSN of the next command.
 *
 * Threads: the hooks run on the transport's event thread, or on a
 * submitter's thread inside the transport's try_send (direct send,
 * sess_tx_direct set), and take the session lock; tx_done completes
 * deferred tasks after dropping it.
 */
#include "session_priv.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "initiator/util/clock.h"

_Thread_local bool sess_tx_direct;

void sess_wait_direct(struct iscsi_session *s)
{
	/* a direct send is one non-blocking write: this waits microseconds */
	while (atomic_load_explicit(&s->direct_senders, memory_order_acquire))
		nanosleep(&(struct timespec){.tv_nsec = 50000}, NULL);
}

static void emit_data_out(struct iscsi_session *s, struct task *t, struct iscsi_tx_slot *slot)
{
	uint32_t chunk = t->burst_end - t->tx_offset;
	if (chunk > s->params.max_xmit_dsl)
		chunk = s->params.max_xmit_dsl;
	struct iscsi_bhs h = {0};
	h.opcode = ISCSI_OP_DATA_OUT;
	h.final = t->tx_offset + chunk == t->burst_end;
	h.dlen = chunk;
	h.lun = t->cmd.lun;
	h.itt = t->itt;
	h.u.data_out.ttt = t->burst_ttt;
	h.u.data_out.expstatsn = s->expstatsn;
	h.u.data_out.datasn = t->burst_datasn++;
	h.u.data_out.offset = t->tx_offset;
	iscsi_bhs_encode(&h, slot->bhs);
	slot->data = (const uint8_t *)t->cmd.buf + t->tx_offset;
	slot->dlen = chunk;
	t->tx_offset += chunk;
	t->data_sent += chunk;
	if (h.final)
		t->bursting = false;
	s->stats.bytes_written += chunk;
}

/* Start the next solicited burst if one is queued (§11.8). */
void sess_next_r2t(struct task *t)
{
	if (t->bursting || !t->r2t_count)
		return;
	struct r2t *r = &t->r2tq[t->r2t_head];
	t->r2t_head = (uint8_t)((t->r2t_head + 1) % R2T_QUEUE);
	t->r2t_count--;
	t->bursting = true;
	t->burst_ttt = r->ttt;
	t->tx_offset = r->offset;
	t->burst_end = r->offset + r->length;
	t->burst_datasn = 0;
}

static void emit_command(struct iscsi_session *s, struct task *t, struct iscsi_tx_slot *slot)
{
	const struct iscsi_params *p = &s->params;
	struct iscsi_bhs h = {0};
	uint32_t imm = 0;

	h.opcode = ISCSI_OP_SCSI_CMD;
	h.lun = t->cmd.lun;
	h.itt = t->itt;
	h.u.cmd.read = t->cmd.dir == ISCSI_DIR_READ;
	h.u.cmd.write = t->cmd.dir == ISCSI_DIR_WRITE;
	h.u.cmd.attr = ISCSI_ATTR_SIMPLE;
	h.u.cmd.edtl = t->cmd.len;
	h.u.cmd.cmdsn = t->cmdsn;
	h.u.cmd.expstatsn = s->expstatsn;
	memcpy(h.u.cmd.cdb, t->cmd.cdb, t->cmd.cdb_len);
	h.final = true;
	if (t->cmd.dir == ISCSI_DIR_WRITE && t->cmd.len) {
		uint32_t unsol = 0;
		if (!p->initial_r2t || p->immediate_data)
			unsol = t->cmd.len < p->first_burst ? t->cmd.len : p->first_burst;
		if (p->immediate_data) {
			imm = unsol < p->max_xmit_dsl ? unsol : p->max_xmit_dsl;
		}
		if (p->initial_r2t)
			unsol = imm; /* only the immediate part is unsolicited */
		t->unsol_end = unsol;
		t->tx_offset = t->data_sent = imm;
		if (imm < unsol) {
			h.final = false; /* unsolicited Data-Out PDUs follow */
			t->bursting = true;
			t->burst_ttt = ISCSI_RESERVED_TAG;
			t->burst_end = unsol;
			t->burst_datasn = 0;
		}
		s->stats.bytes_written += imm;
	}
	h.dlen = imm;
	iscsi_bhs_encode(&h, slot->bhs);
	slot->data = imm ? t->cmd.buf : NULL;
	slot->dlen = imm;
	slot->xfer_buf = t->cmd.buf;
	slot->xfer_len = t->cmd.len;
	slot->xfer_unsol = t->cmd.dir == ISCSI_DIR_WRITE ? t->unsol_end : 0;
	slot->xfer_dir = (uint8_t)t->cmd.dir;
	t->cmd_sent = true;
	s->stats.commands++;
	if (sess_tx_direct)
		s->stats.tx_direct++;
	sess_next_r2t(t);
}

/*
 * CmdSN carried by an immediate PDU: that of the next command not yet sent
 * (RFC 7143 §4.2.2.1), which is s->cmdsn when none is waiting.
 */
static uint32_t immediate_cmdsn(const struct iscsi_session *s)
{
	for (const struct task *q = s->tx_head; q; q = q->next)
		if (!q->cmd_sent)
			return q->cmdsn;
	return s->cmdsn;
}

/* The BHS of an immediate PDU (I and F bits set) with this opcode, ITT and LUN. */
static struct iscsi_bhs immediate_bhs(uint8_t opcode, uint32_t itt, uint64_t lun)
{
	struct iscsi_bhs h = {0};
	h.opcode = opcode;
	h.immediate = true;
	h.final = true;
	h.lun = lun;
	h.itt = itt;
	return h;
}

/*
 * slots[n], made ready for a new PDU: owned by owner (NULL: nothing for
 * tx_done to do), no transfer fields (a SCSI Command's are set by
 * emit_command).  Only the slots a fill uses are touched: clearing all of
 * them on every pass cost more than the rest of the fill.
 */
static struct iscsi_tx_slot *slot_take(struct iscsi_tx_slot *slots, int n, void *owner)
{
	struct iscsi_tx_slot *slot = &slots[n];
	slot->owner = owner;
	slot->xfer_buf = NULL;
	slot->xfer_len = slot->xfer_unsol = 0;
	slot->xfer_dir = 0;
	return slot;
}

/* Encode h into slot with dlen bytes of data (owned by the session) as its data segment. */
static void slot_put(struct iscsi_tx_slot *slot, struct iscsi_bhs *h, const void *data, uint32_t dlen)
{
	h->dlen = dlen;
	iscsi_bhs_encode(h, slot->bhs);
	slot->data = data;
	slot->dlen = dlen;
}

/* A NOP-Out (§11.18): a ping (our ITT, TTT reserved) or the answer to a NOP-In (ITT reserved, its TTT). */
static void emit_nop_out(struct iscsi_session *s, struct iscsi_tx_slot *slot, uint32_t itt, uint32_t ttt,
			 uint64_t lun, const void *data, uint32_t dlen)
{
	struct iscsi_bhs h = immediate_bhs(ISCSI_OP_NOP_OUT, itt, lun);
	h.u.nop.ttt = ttt;
	h.u.nop.cmdsn = immediate_cmdsn(s);
	h.u.nop.expstatsn = s->expstatsn;
	slot_put(slot, &h, data, dlen);
}

/* The pending Task Management Function Request (§11.5): ABORT TASK or LOGICAL UNIT RESET. */
static void emit_tmf_req(struct iscsi_session *s, struct iscsi_tx_slot *slot)
{
	bool abort = s->tmf_function == ISCSI_TMF_ABORT_TASK;
	struct iscsi_bhs h = immediate_bhs(ISCSI_OP_TASK_MGMT_REQ, s->tmf_itt, s->tmf_lun);
	h.u.tmf_req.function = s->tmf_function;
	h.u.tmf_req.rtt = abort ? s->tmf_rtt : ISCSI_RESERVED_TAG;
	h.u.tmf_req.cmdsn = immediate_cmdsn(s);
	h.u.tmf_req.expstatsn = s->expstatsn;
	h.u.tmf_req.refcmdsn = abort ? s->tmf_refcmdsn : 0;
	slot_put(slot, &h, NULL, 0);
}

/* A Logout Request (§11.14), reason 0: close the session. */
static void emit_logout_req(struct iscsi_session *s, struct iscsi_tx_slot *slot)
{
	struct iscsi_bhs h = immediate_bhs(ISCSI_OP_LOGOUT_REQ, s->logout_itt, 0);
	h.u.logout.reason = 0;
	h.u.logout.cmdsn = immediate_cmdsn(s);
	h.u.logout.expstatsn = s->expstatsn;
	slot_put(slot, &h, NULL, 0);
}

/*
 * Immediate PDUs first (§3.2.2.1: they bypass the CmdSN window): a NOP-Out
 * answering the target's ping, our own ping, the pending task management
 * request.  Returns the slots used from slots[n].  Lock held.
 */
static int tx_fill_immediate(struct iscsi_session *s, struct iscsi_tx_slot *slots, int n, int max)
{
	if (s->nop_reply && n < max) {
		struct nop_echo *e = &s->nop_buf[s->nop_next];
		if (s->nop_dlen)
			e->busy = true; /* the slot's owner: sess_hook_tx_done frees it */
		emit_nop_out(s, slot_take(slots, n++, s->nop_dlen ? e : NULL), ISCSI_RESERVED_TAG, s->nop_ttt, s->nop_lun,
			     s->nop_dlen ? e->data : NULL, s->nop_dlen);
		s->nop_reply = false;
	}
	if (s->ping_want && n < max) {
		emit_nop_out(s, slot_take(slots, n++, NULL), s->ping_itt, ISCSI_RESERVED_TAG, 0, NULL, 0);
		s->ping_want = false;
		s->ping_sent = true;
		s->ping_sent_ms = clk_now_ms();
	}
	if (s->tmf_want && n < max) {
		emit_tmf_req(s, slot_take(slots, n++, NULL));
		s->tmf_want = false;
		s->tmf_sent = true;
		s->tmf_sent_ms = clk_now_ms();
	}
	return n;
}

/*
 * Commands and their Data-Out from the tx queue, from slots[n]: at most
 * BURST_PDUS_PER_FILL PDUs of one task in a row; a task with more to send
 * goes back to the tail of the queue.  Returns the slots used.  Lock held.
 */
static int tx_fill_tasks(struct iscsi_session *s, struct iscsi_tx_slot *slots, int n, int max)
{
	struct task *requeue = NULL, **rq_tail = &requeue;
	while (n < max) {
		struct task *t = sess_txq_pop(s);
		if (!t)
			break;
		int k = 0;
		do {
			if (!t->cmd_sent) {
				t->tx_pending++;
				emit_command(s, t, slot_take(slots, n++, t));
			} else if (t->bursting) {
				t->tx_pending++;
				emit_data_out(s, t, slot_take(slots, n++, t));
				sess_next_r2t(t);
			}
		} while (t->bursting && n < max && ++k < BURST_PDUS_PER_FILL);
		if (t->bursting) {
			t->in_txq = true;
			t->next = NULL;
			*rq_tail = t;
			rq_tail = &t->next;
		}
	}
	if (requeue) {
		if (s->tx_tail)
			s->tx_tail->next = requeue;
		else
			s->tx_head = requeue;
		struct task *last = requeue;
		while (last->next)
			last = last->next;
		s->tx_tail = last;
	}
	return n;
}

/* Transport hook: fill up to max slots (immediate PDUs, tasks, then a Logout once nothing else waits). */
int sess_hook_tx_fill(void *arg, struct iscsi_tx_slot *slots, int max)
{
	struct iscsi_session *s = arg;
	pthread_mutex_lock(&s->lock);
	if (!s->event_thread_known && !sess_tx_direct) {
		s->event_thread = pthread_self();
		s->event_thread_known = true;
	}
	int n = tx_fill_immediate(s, slots, 0, max);
	n = tx_fill_tasks(s, slots, n, max);
	if (s->logout_want && !s->logout_sent && !s->tx_head && n < max) {
		emit_logout_req(s, slot_take(slots, n++, NULL));
		s->logout_sent = true;
		s->logout_sent_ms = clk_now_ms();
	}
	atomic_store(&s->tx_any, s->tx_head || s->nop_reply || s->ping_want || s->tmf_want ||
					 (s->logout_want && !s->logout_sent));
	pthread_mutex_unlock(&s->lock);
	return n;
}

void sess_tx_want(struct iscsi_session *s)
{
	atomic_store(&s->tx_any, true);
}

bool sess_hook_tx_idle(void *arg)
{
	struct iscsi_session *s = arg;
	return !atomic_load(&s->tx_any);
}

/* tx_done hook: the slots' data was written; a task answered meanwhile completes now. */
void sess_hook_tx_done(void *arg, const struct iscsi_tx_slot *slots, int n)
{
	struct iscsi_session *s = arg;
	struct completion done[ISCSI_TX_BATCH_MAX];
	int ndone = 0;
	assert(n <= ISCSI_TX_BATCH_MAX); /* one completion per slot at most */
	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < n; i++) {
		if (slots[i].owner == &s->nop_buf[0] || slots[i].owner == &s->nop_buf[1]) {
			((struct nop_echo *)slots[i].owner)->busy = false;
			continue;
		}
		struct task *t = slots[i].owner;
		if (!t || !t->tx_pending)
			continue;
		if (--t->tx_pending == 0 && t->done_deferred && ndone < ISCSI_TX_BATCH_MAX) {
			t->done_deferred = false;
			done[ndone].res = t->deferred_res;
			sess_task_finish(s, t, &done[ndone]);
			ndone++;
		}
	}
	pthread_mutex_unlock(&s->lock);
	for (int i = 0; i < ndone; i++)
		sess_run_completion(s, &done[i]);
}
