/* SPDX-License-Identifier: MIT */
/*
 * iSCSI session, full feature phase (RFC 7143).  See session.h and
 * docs/design.md for the threading model: `lock` guards everything below;
 * submitters take it briefly, the transport's event thread takes it in the
 * hooks.  Completion callbacks run on the event thread with the lock
 * released.
 */
#include "session.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "be.h"
#include "cancel.h"
#include "clock.h"
#include "url.h"
#include "latency.h"
#include "log.h"

#define R2T_QUEUE 4
/* Reconnect back-off (ms): first try at once, then BASE doubling up to MAX, each +-25% jitter. */
#define RECONNECT_BASE_MS 250
#define RECONNECT_MAX_MS 1000
#define RENEGOTIATE_MIN_MS 30000 /* AsyncEvent 4 again sooner after its relogin: ignored */
/* Most seconds a target's Time2Wait, Time2Retain or logout delay is taken for (target_secs_ms). */
#define TARGET_SECS_MAX 60
#define BURST_PDUS_PER_FILL 8
#define NOP_DATA_MAX 4096
#define LOGIN_CMDSN 1 /* CmdSN of every login request (a new session each time, §6.3.5) */
/* A task management request not answered within cmd_timeout/2 (2..10 s) escalates. */
#define TMF_TIMEOUT_MIN_MS 2000
#define TMF_TIMEOUT_MAX_MS 10000

/*
 * ITT layout (RFC 7143 §11.1.2.2: the initiator's own choice): generation
 * << 16 | task index.  Task generations run 0..ITT_GEN_TMF-1; the top four
 * generations are reserved: task management requests, NOP-Out pings and
 * Logout each count through their own, and 0xffff holds the reserved tag
 * 0xffffffff.  So a TMF, ping or Logout ITT never equals a task's.
 */
#define ITT_GEN_TMF 0xfffcu
#define ITT_GEN_PING 0xfffdu
#define ITT_GEN_LOGOUT 0xfffeu
#define ITT_GEN_RESERVED 0xffffu
#define TASKS_MAX (2 * 4096 + 8) /* task slots at the largest queue_depth (iscsi_session_open) */
static_assert(ITT_GEN_TMF < ITT_GEN_PING && ITT_GEN_PING < ITT_GEN_LOGOUT && ITT_GEN_LOGOUT < ITT_GEN_RESERVED,
	      "the reserved ITT generations are distinct and above every task generation");
static_assert((ISCSI_RESERVED_TAG >> 16) == ITT_GEN_RESERVED, "the reserved tag lies in the last generation");
static_assert(TASKS_MAX <= 0x10000, "a task index fits the ITT's low 16 bits");

/* The ITT of generation gen, index idx. */
static inline uint32_t itt_make(uint32_t gen, uint32_t idx) { return (gen << 16) | (idx & 0xffffu); }

/* The next ITT of a reserved generation (TMF, ping, Logout) after prev. */
static inline uint32_t itt_next_reserved(uint32_t gen, uint32_t prev) { return itt_make(gen, prev + 1); }

struct r2t {
	uint32_t ttt, offset, length;
};

struct task {
	struct task *next;          /* free list, window queue or tx queue */
	uint16_t index, gen;
	bool in_use, in_txq, counted, cmd_sent, bursting;
	struct iscsi_cmd cmd;
	uint32_t itt, cmdsn;
	/* Data-Out state (§11.7.1) */
	uint32_t unsol_end;         /* end of unsolicited data (bytes) */
	uint32_t tx_offset, burst_end, burst_ttt, burst_datasn;
	uint32_t data_sent;         /* a WRITE's data bytes given to the transport in PDUs (not RDMA-read) */
	struct r2t r2tq[R2T_QUEUE];
	uint8_t r2t_head, r2t_count;
	/* Data-In state (§11.7.2) */
	uint32_t rx_offset, rx_datasn;
	int64_t submit_ms;          /* CLOCK_MONOTONIC ms at (re-)issue, for cmd_timeout_ms */
	int64_t submit_us;          /* CLOCK_MONOTONIC us at submission, for the latency histogram */
	uint64_t seq;               /* submission order, which is CmdSN order */
	uint8_t reissues;           /* times re-issued after a connection loss */
	bool stalled;               /* the CmdSN window kept it unsent past cmd_timeout: its connection was dropped */
	bool doomed;                /* to complete with deferred_res while the connection is down */
	/* PDUs of this task handed to the transport and not yet written: the
	 * caller's buffer is still in use, so completion waits for them. */
	uint16_t tx_pending;
	bool done_deferred;
	struct iscsi_cmd_result deferred_res;
};

/*
 * SS_UP: full feature phase.  SS_DOWN: the connection is lost, the recovery
 * thread reconnects; commands wait, parked (in no queue).  SS_STARTING: a
 * new connection is logged in and its event thread starting; commands
 * still park.  SS_CLOSED: shut down for good.
 */
enum sess_state { SS_UP, SS_DOWN, SS_STARTING, SS_CLOSED };

struct iscsi_session {
	pthread_mutex_t lock;
	pthread_cond_t slot_cv;     /* a task slot was freed or the session went down */
	pthread_cond_t state_cv;    /* logout answered, outstanding reached 0 */
	struct iscsi_transport *t;
	struct iscsi_session_config cfg;
	struct iscsi_params params;
	uint8_t isid[6];
	uint16_t tsih;
	uint8_t chap_algs[ISCSI_CHAP_ALGS_MAX]; /* CHAP_A offer, narrowed by iscsi_login_chap_retry */
	enum sess_state state;
	pthread_t event_thread;
	bool event_thread_known;

	/* Recovery (ERL 0): the recovery thread reconnects while state is SS_DOWN. */
	pthread_t rec_thread;
	bool rec_started;
	pthread_cond_t rec_cv;      /* state became SS_DOWN, or closing */
	bool closing;               /* iscsi_session_close has begun: recovery stops */
	int cancel_fd;              /* fired with closing: ends the recovery thread's connect or login (cancel.h) */
	int64_t stop_by_ms;         /* iscsi_session_stopping: the replacement deadline is no later (0: none) */
	int64_t attempt_deadline_ms; /* the recovery thread's connect and login end by then (0: none running) */
	bool fail_fast;             /* down for longer than replacement_timeout_ms */
	int64_t lost_ms;            /* when the connection was lost (0: up) */
	int lost_err;               /* why */
	const char *lost_reason;    /* or this (drop_reason at the loss), when set */
	unsigned reissued;          /* commands re-issued by the recovery in progress */
	uint64_t next_seq;
	struct task **sorted;       /* ntasks pointers: re-issue order */

	uint32_t cmdsn, expcmdsn, maxcmdsn, expstatsn;

	struct task *tasks;
	unsigned ntasks;
	struct task *free_list;
	struct task *win_head, *win_tail; /* waiting for the CmdSN window */
	struct task *tx_head, *tx_tail;   /* something to send */
	unsigned outstanding, worker_outstanding;

	/*
	 * NOP-Out answering a NOP-In (§11.19: TTT != 0xffffffff asks for one).
	 * The echoed data lives in one of two buffers: one may still be being
	 * written by the transport (busy until tx_done), so a ping arriving
	 * meanwhile never changes bytes (or their data digest) under a send.
	 * A reply not yet sent is replaced by a newer ping's; with both buffers
	 * busy a ping goes unanswered.
	 */
	bool nop_reply;
	uint32_t nop_ttt;
	uint64_t nop_lun;
	uint32_t nop_dlen;
	unsigned nop_next;          /* buffer holding the reply to send (when nop_reply) */
	struct nop_echo {
		bool busy;              /* handed to the transport, no tx_done yet */
		uint8_t data[NOP_DATA_MAX];
	} nop_buf[2];

	/* Keep-alive: NOP-Out pings with an ITT of their own (§11.18) */
	int64_t last_rx_ms;
	bool ping_want, ping_sent;
	int64_t ping_sent_ms;
	uint32_t ping_itt;

	/*
	 * Task management (§11.5), one request at a time: ABORT TASK for a
	 * command older than cmd_timeout_ms, then LOGICAL UNIT RESET, then the
	 * connection is dropped.
	 */
	bool tmf_want, tmf_sent;
	uint8_t tmf_function;       /* ISCSI_TMF_ABORT_TASK or ISCSI_TMF_LUN_RESET */
	uint64_t tmf_lun;
	uint32_t tmf_itt, tmf_rtt, tmf_refcmdsn;
	int64_t tmf_sent_ms;

	/* Logout (§11.14) */
	bool logout_want, logout_sent, logout_done;
	/*
	 * The target asked for a logout or for a parameter renegotiation
	 * (Async Message, AsyncEvent 1 or 4): new
	 * commands park; once none is in flight (or at relogin_deadline_ms)
	 * Logout, then the connection is dropped and recovery logs in again.
	 */
	bool relogin_pending, logout_relogin;
	const char *relogin_reason; /* AsyncEvent 1 or 4, for the recovery line */
	int64_t renegotiated_ms;    /* when AsyncEvent 4 last made us log in again (0: never) */
	int64_t relogin_deadline_ms, logout_sent_ms;
	const char *drop_reason;    /* why the session itself drops the connection, for the recovery line */
	int64_t reconnect_delay_ms; /* Time2Wait the target asked for before we reconnect */
	uint32_t logout_itt;

	struct iscsi_session_stats stats;
	struct lat_hist lat;        /* submission to completion of commands that got an answer (lock-free) */
};

/* ---- small helpers ---- */

static void txq_push(struct iscsi_session *s, struct task *t)
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
}

static struct task *txq_pop(struct iscsi_session *s)
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

/* Append t to the queue of commands waiting for the CmdSN window (§4.2.2.1). */
static void winq_push(struct iscsi_session *s, struct task *t)
{
	t->next = NULL;
	if (s->win_tail)
		s->win_tail->next = t;
	else
		s->win_head = t;
	s->win_tail = t;
}

/* Give t the ITT of its current generation, wrapping below the reserved ones (ITT_GEN_TMF..). */
static void task_assign_itt(struct task *t)
{
	if (t->gen >= ITT_GEN_TMF)
		t->gen = 0;
	t->itt = itt_make(t->gen, t->index);
}

/* Move commands from the window queue while CmdSN <= MaxCmdSN (§4.2.2.1). */
static bool window_admit(struct iscsi_session *s)
{
	bool any = false;
	while (s->win_head && iscsi_sn_le(s->cmdsn, s->maxcmdsn)) {
		struct task *t = s->win_head;
		s->win_head = t->next;
		if (!s->win_head)
			s->win_tail = NULL;
		t->cmdsn = s->cmdsn++;
		txq_push(s, t);
		any = true;
	}
	return any;
}

/* ExpCmdSN/MaxCmdSN from any target PDU that carries them (§4.2.2.1). */
static void update_cmdsn(struct iscsi_session *s, uint32_t expcmdsn, uint32_t maxcmdsn)
{
	/* MaxCmdSN < ExpCmdSN - 1 means the fields are to be ignored. */
	if (iscsi_sn_lt(maxcmdsn, expcmdsn - 1))
		return;
	if (iscsi_sn_lt(s->expcmdsn, expcmdsn))
		s->expcmdsn = expcmdsn;
	if (iscsi_sn_lt(s->maxcmdsn, maxcmdsn))
		s->maxcmdsn = maxcmdsn;
}

static void update_statsn(struct iscsi_session *s, uint32_t statsn)
{
	if (iscsi_sn_le(s->expstatsn, statsn))
		s->expstatsn = statsn + 1;
}

static bool on_event_thread(const struct iscsi_session *s)
{
	return s->event_thread_known && pthread_equal(s->event_thread, pthread_self());
}

static struct task *task_lookup(struct iscsi_session *s, uint32_t itt)
{
	uint32_t idx = itt & 0xffff;
	if (itt == ISCSI_RESERVED_TAG || idx >= s->ntasks)
		return NULL;
	struct task *t = &s->tasks[idx];
	if (!t->in_use || t->itt != itt || !t->cmd_sent || t->done_deferred)
		return NULL;
	return t;
}

/*
 * Release a task's slot and return its callback; the caller runs it
 * after dropping the lock.  The slot is free before the callback runs so a
 * callback may submit the next command (read-modify-write, retries).
 */
struct completion {
	iscsi_cmd_cb cb;
	void *arg;
	struct iscsi_cmd_result res;
};

static void txq_remove(struct iscsi_session *s, struct task *t)
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

static void task_finish(struct iscsi_session *s, struct task *t, struct completion *c)
{
	/* A target may answer before we sent all the data it could take. */
	if (t->in_txq)
		txq_remove(s, t);
	t->bursting = false;
	t->r2t_count = 0;
	if (t->tx_pending) {
		/* The transport still sends from the buffer: finish in hook_tx_done. */
		t->deferred_res = c->res;
		t->done_deferred = true;
		c->cb = NULL;
		return;
	}
	c->cb = t->cmd.cb;
	c->arg = t->cmd.arg;
	if (!c->res.err)
		lat_hist_add(&s->lat, (uint64_t)(clk_now_us() - t->submit_us));
	t->in_use = false;
	t->gen++;
	if (t->counted)
		s->worker_outstanding--;
	s->outstanding--;
	t->next = s->free_list;
	s->free_list = t;
	pthread_cond_signal(&s->slot_cv);
	if (s->outstanding == 0)
		pthread_cond_broadcast(&s->state_cv);
}

/* Forget a task's per-connection state: it will be sent again from scratch. */
static void task_reset(struct task *t)
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

static void run_completion(struct completion *c)
{
	if (c->cb) {
		in_callback++;
		c->cb(c->arg, &c->res);
		in_callback--;
	}
}

/* ---- tx: build PDUs (called by the transport's event thread) ---- */

static uint16_t be16_get(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }

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
static void next_r2t(struct task *t)
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
	next_r2t(t);
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
		if (s->nop_dlen) {
			e->busy = true;
			slots[n].owner = e; /* hook_tx_done frees it */
		}
		emit_nop_out(s, &slots[n++], ISCSI_RESERVED_TAG, s->nop_ttt, s->nop_lun, s->nop_dlen ? e->data : NULL,
			     s->nop_dlen);
		s->nop_reply = false;
	}
	if (s->ping_want && n < max) {
		emit_nop_out(s, &slots[n++], s->ping_itt, ISCSI_RESERVED_TAG, 0, NULL, 0);
		s->ping_want = false;
		s->ping_sent = true;
		s->ping_sent_ms = clk_now_ms();
	}
	if (s->tmf_want && n < max) {
		emit_tmf_req(s, &slots[n++]);
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
		struct task *t = txq_pop(s);
		if (!t)
			break;
		int k = 0;
		do {
			if (!t->cmd_sent) {
				slots[n].owner = t;
				t->tx_pending++;
				emit_command(s, t, &slots[n++]);
			} else if (t->bursting) {
				slots[n].owner = t;
				t->tx_pending++;
				emit_data_out(s, t, &slots[n++]);
				next_r2t(t);
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
static int hook_tx_fill(void *arg, struct iscsi_tx_slot *slots, int max)
{
	struct iscsi_session *s = arg;

	for (int i = 0; i < max; i++) {
		slots[i].owner = NULL;
		slots[i].xfer_buf = NULL;
		slots[i].xfer_len = slots[i].xfer_unsol = 0;
		slots[i].xfer_dir = 0;
	}
	pthread_mutex_lock(&s->lock);
	if (!s->event_thread_known) {
		s->event_thread = pthread_self();
		s->event_thread_known = true;
	}
	int n = tx_fill_immediate(s, slots, 0, max);
	n = tx_fill_tasks(s, slots, n, max);
	if (s->logout_want && !s->logout_sent && !s->tx_head && n < max) {
		emit_logout_req(s, &slots[n++]);
		s->logout_sent = true;
		s->logout_sent_ms = clk_now_ms();
	}
	pthread_mutex_unlock(&s->lock);
	return n;
}

/* ---- rx ---- */

static int hook_rx_data_dest(void *arg, const uint8_t *bhs, void **dest)
{
	struct iscsi_session *s = arg;
	uint32_t itt = iscsi_wire_itt(bhs);
	uint32_t dlen = iscsi_wire_dlen(bhs);
	uint32_t offset = get_be32(bhs + 40); /* Buffer Offset */
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	struct task *t = task_lookup(s, itt);
	if (!t || t->cmd.dir != ISCSI_DIR_READ) {
		log_err("Data-In for unknown or non-read ITT 0x%08x: dropping the connection", itt);
		rc = -EPROTO;
	} else if (offset != t->rx_offset || dlen > t->cmd.len || offset > t->cmd.len - dlen) {
		log_err("Data-In ITT 0x%08x offset %u length %u outside the expected %u of %u bytes: dropping the connection",
			itt, offset, dlen, t->rx_offset, t->cmd.len);
		rc = -EPROTO;
	} else {
		*dest = (uint8_t *)t->cmd.buf + offset;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static void set_residual(struct iscsi_cmd_result *r, uint32_t len, bool under, bool over, uint32_t residual)
{
	r->residual = under ? residual : 0;
	if (under)
		r->xfer_len = residual <= len ? len - residual : 0;
	else
		r->xfer_len = len;
	(void)over;
}

/* A SCSI asynchronous event for the caller's hook, which runs after the lock is released. */
struct async_sense {
	bool have;
	uint64_t lun;
	struct scsi_sense sense;
};

/* What a PDU's handler leaves for hook_rx_pdu to do once the lock is dropped. */
struct rx_out {
	struct completion c; /* valid when done */
	bool done;
	struct async_sense ev;
};

/* Data-In (§11.7): data already placed by the transport (hook_rx_data_dest); with status it ends the READ. */
static int rx_data_in(struct iscsi_session *s, const struct iscsi_bhs *h, const uint8_t *data, uint32_t dlen,
		      struct rx_out *o)
{
	(void)data, (void)dlen;
	struct completion *c = &o->c;
	struct task *t = task_lookup(s, h->itt);
	if (!t || t->cmd.dir != ISCSI_DIR_READ)
		return -EPROTO;
	if (h->u.data_in.datasn != t->rx_datasn) {
		log_err("Data-In ITT 0x%08x DataSN %u, expected %u", h->itt, h->u.data_in.datasn, t->rx_datasn);
		return -EPROTO;
	}
	t->rx_datasn++;
	t->rx_offset += h->dlen;
	s->stats.bytes_read += h->dlen;
	if (!h->u.data_in.status_present)
		return 0;
	if (!h->final)
		return -EPROTO;
	memset(&c->res, 0, sizeof(c->res));
	c->res.status = h->u.data_in.status;
	set_residual(&c->res, t->cmd.len, h->u.data_in.underflow, h->u.data_in.overflow, h->u.data_in.residual);
	if (c->res.xfer_len > t->rx_offset) {
		/* More data claimed than arrived: the rest of the buffer is stale, whatever the status. */
		if (c->res.status == SCSI_STATUS_GOOD) {
			log_err("Data-In ITT 0x%08x: GOOD after %u of %u bytes", h->itt, t->rx_offset, c->res.xfer_len);
			c->res.err = -EIO;
		}
		c->res.xfer_len = t->rx_offset;
	}
	task_finish(s, t, c);
	o->done = true;
	return 0;
}

/* SCSI Response (§11.4): status, sense and residual of a command; it ends the task. */
static int rx_scsi_rsp(struct iscsi_session *s, const struct iscsi_bhs *h, const uint8_t *data, uint32_t dlen,
		       struct rx_out *o)
{
	struct completion *c = &o->c;
	struct task *t = task_lookup(s, h->itt);
	if (!t) {
		log_err("SCSI Response for unknown ITT 0x%08x", h->itt);
		return -EPROTO;
	}
	memset(&c->res, 0, sizeof(c->res));
	if (h->u.rsp.response != 0) {
		c->res.err = -EIO; /* target failure (§11.4.3) */
	} else {
		c->res.status = h->u.rsp.status;
		if (dlen >= 2) {
			uint32_t slen = be16_get(data);
			if (slen > dlen - 2) {
				log_err("SCSI Response ITT 0x%08x: SenseLength %u exceeds the %u-byte data segment",
					h->itt, slen, dlen);
				return -EPROTO;
			}
			if (slen) {
				/* A short fixed sense still gives its key; an unknown format maps as no sense. */
				scsi_parse_sense(data + 2, slen, &c->res.sense);
				c->res.has_sense = true;
			}
		}
	}
	set_residual(&c->res, t->cmd.len, h->u.rsp.underflow, h->u.rsp.overflow, h->u.rsp.residual);
	if (s->t->ops->data_by_rdma && !c->res.err) {
		/* iSER: the target placed the data by RDMA; the residual says how much */
		if (t->cmd.dir == ISCSI_DIR_READ) {
			t->rx_offset = c->res.xfer_len;
			s->stats.bytes_read += c->res.xfer_len;
		} else if (t->cmd.dir == ISCSI_DIR_WRITE && t->cmd.len > t->unsol_end) {
			s->stats.bytes_written += t->cmd.len - t->unsol_end;
		}
	}
	if (t->cmd.dir == ISCSI_DIR_WRITE && !s->t->ops->data_by_rdma && c->res.status == SCSI_STATUS_GOOD &&
	    !c->res.err && c->res.xfer_len > t->data_sent) {
		/* GOOD for data the target never got (no or too small an underflow): the write did not happen */
		log_err("SCSI Response ITT 0x%08x: GOOD for a write after %u of %u bytes were sent", h->itt,
			t->data_sent, c->res.xfer_len);
		c->res.err = -EIO;
	}
	if (t->cmd.dir == ISCSI_DIR_READ && c->res.xfer_len > t->rx_offset) {
		/* More data claimed than arrived (no or too small an underflow): the rest is stale. */
		if (c->res.status == SCSI_STATUS_GOOD && !c->res.err) {
			log_err("SCSI Response ITT 0x%08x: GOOD after %u of %u bytes", h->itt, t->rx_offset,
				c->res.xfer_len);
			c->res.err = -EIO;
		}
		c->res.xfer_len = t->rx_offset;
	}
	task_finish(s, t, c);
	o->done = true;
	return 0;
}

/* R2T (§11.8): queue a solicited burst of Data-Out for a WRITE. */
static int rx_r2t(struct iscsi_session *s, const struct iscsi_bhs *h, const uint8_t *data, uint32_t dlen,
		  struct rx_out *o)
{
	(void)data, (void)dlen, (void)o;
	struct task *t = task_lookup(s, h->itt);
	uint32_t off = h->u.r2t.offset, len = h->u.r2t.length;
	if (!t || t->cmd.dir != ISCSI_DIR_WRITE) {
		log_err("R2T for unknown or non-write ITT 0x%08x", h->itt);
		return -EPROTO;
	}
	if (len == 0 || off > t->cmd.len || len > t->cmd.len - off) {
		log_err("R2T ITT 0x%08x asks for %u bytes at %u of a %u-byte write", h->itt, len, off, t->cmd.len);
		return -EPROTO;
	}
	/* Outstanding: queued, plus the solicited burst being sent (§13.17). */
	uint32_t pending = t->r2t_count + (t->bursting && t->burst_ttt != ISCSI_RESERVED_TAG);
	if (t->r2t_count == R2T_QUEUE || pending >= (s->params.max_outstanding_r2t ? s->params.max_outstanding_r2t : 1)) {
		log_err("R2T ITT 0x%08x: more outstanding R2Ts than negotiated", h->itt);
		return -EPROTO;
	}
	struct r2t *r = &t->r2tq[(t->r2t_head + t->r2t_count) % R2T_QUEUE];
	r->ttt = h->u.r2t.ttt;
	r->offset = off;
	r->length = len;
	t->r2t_count++;
	next_r2t(t);
	txq_push(s, t);
	return 0;
}


/*
 * Send a task that the target no longer has (aborted by ABORT TASK or
 * LOGICAL UNIT RESET) again on this connection, with a fresh ITT and a new
 * CmdSN; or, once it was re-issued ISCSI_REISSUE_MAX times, mark it
 * doomed (to fail with -EIO by complete_tasks) and return true.  PDUs of it
 * still in the transport's batch stay counted in tx_pending (the buffer is
 * the same).  Lock held.
 */
static bool reissue_now(struct iscsi_session *s, struct task *t)
{
	if (t->reissues >= ISCSI_REISSUE_MAX) {
		log_err("command 0x%02x aborted %u times: failing it", t->cmd.cdb[0], t->reissues + 1);
		if (t->in_txq)
			txq_remove(s, t);
		memset(&t->deferred_res, 0, sizeof(t->deferred_res));
		t->deferred_res.err = -EIO;
		t->doomed = true;
		return true;
	}
	t->reissues++;
	if (t->in_txq)
		txq_remove(s, t);
	uint16_t pending = t->tx_pending;
	task_reset(t);
	t->tx_pending = pending;
	t->gen++;
	task_assign_itt(t);
	t->submit_ms = clk_now_ms();
	winq_push(s, t);
	return false;
}

static unsigned complete_tasks(struct iscsi_session *s, bool (*pick)(const struct task *), int err);
static bool pick_doomed(const struct task *t);

/* Task Management Function Response (§11.6) to our ABORT TASK or LOGICAL UNIT RESET. */
static int rx_tmf_rsp(struct iscsi_session *s, const struct iscsi_bhs *h, const uint8_t *data, uint32_t dlen,
		      struct rx_out *o)
{
	(void)data, (void)dlen, (void)o;
	if (!s->tmf_sent || h->itt != s->tmf_itt) {
		log_warn("Task Management Response we did not ask for (ITT 0x%08x): ignored", h->itt);
		return 0;
	}
	s->tmf_sent = false;
	uint8_t r = h->u.tmf_rsp.response;
	bool abort = s->tmf_function == ISCSI_TMF_ABORT_TASK;
	/* 0: function complete; 1: task does not exist (the target lost it: send it again) */
	if (r == 0 || (abort && r == 1)) {
		unsigned n = 0, failed = 0;
		for (unsigned i = 0; i < s->ntasks; i++) {
			struct task *t = &s->tasks[i];
			if (!t->in_use || !t->cmd_sent || t->done_deferred ||
			    (abort ? t->itt != s->tmf_rtt : t->cmd.lun != s->tmf_lun))
				continue;
			if (reissue_now(s, t))
				failed++;
			else
				n++;
		}
		log_warn("%s done (response %u): %u commands re-issued, %u failed", abort ? "ABORT TASK" : "LOGICAL UNIT RESET",
			 r, n, failed);
		if (failed)
			complete_tasks(s, pick_doomed, 0); /* drops the lock around the callbacks */
		return 0;
	}
	if (abort) {
		log_err("ABORT TASK for ITT 0x%08x refused (response %u): LOGICAL UNIT RESET", s->tmf_rtt, r);
		s->tmf_function = ISCSI_TMF_LUN_RESET;
		s->tmf_itt = itt_next_reserved(ITT_GEN_TMF, s->tmf_itt);
		s->tmf_want = true;
		return 0;
	}
	log_err("LOGICAL UNIT RESET refused (response %u): dropping the connection", r);
	return -ETIMEDOUT;
}

/* Reject (§11.17): a rejected SCSI Command may be re-issued or fails; any other rejected PDU drops the connection. */
static int rx_reject(struct iscsi_session *s, const struct iscsi_bhs *h, const uint8_t *data, uint32_t dlen,
		     struct rx_out *o)
{
	struct completion *c = &o->c;
	if (dlen < ISCSI_BHS_LEN) {
		log_err("Reject (reason 0x%02x) without the rejected header", h->u.reject.reason);
		return -EPROTO;
	}
	uint32_t itt = iscsi_wire_itt(data);
	log_err("target rejected a %s PDU (ITT 0x%08x), reason 0x%02x",
		iscsi_opcode_name(iscsi_wire_opcode(data)), itt, h->u.reject.reason);
	struct task *t = task_lookup(s, itt);
	if (t && iscsi_wire_opcode(data) == ISCSI_OP_SCSI_CMD) {
		uint8_t r = h->u.reject.reason;
		/* §11.17.1: data digest error, too many immediate commands, long
		 * operation (out of resources), waiting for logout: the command
		 * may be sent again; anything else says it never will work. */
		if (r == 0x02 || r == 0x06 || r == 0x0a || r == 0x0c) {
			if (reissue_now(s, t))
				complete_tasks(s, pick_doomed, 0);
			return 0;
		}
		memset(&c->res, 0, sizeof(c->res));
		c->res.err = -EIO;
		task_finish(s, t, c);
		o->done = true;
		return 0;
	}
	/* A rejected Data-Out or other PDU leaves the session unsure: drop it (ERL 0). */
	return -EPROTO;
}

/*
 * Milliseconds for a number of seconds a target asks us to wait (Time2Wait
 * or Time2Retain of an Async Message or a Logout Response, §11.9.1,
 * §11.15; the logout delay of AsyncEvent 1), capped at TARGET_SECS_MAX so
 * a hostile value cannot park recovery.  Every such value goes through
 * here.  what names it for the line logged when the cap applies.
 */
static int64_t target_secs_ms(uint32_t secs, const char *what)
{
	if (secs > TARGET_SECS_MAX) {
		log_warn("target asks to wait %u s (%s): taken as %d s", secs, what, TARGET_SECS_MAX);
		secs = TARGET_SECS_MAX;
	}
	return (int64_t)secs * 1000;
}

/*
 * Async Message (§11.9).  0: SCSI asynchronous event, its sense goes to
 * cfg.on_async_sense (or the log); 1: the target asks for a logout: park
 * new commands, log out once none is in flight (within Parameter3 seconds)
 * and log in again; 2, 3: the target will drop the connection or the
 * session: drop it now and reconnect after Time2Wait (Parameter2); 4:
 * parameter renegotiation: as 1, the new login negotiates them all again
 * (§11.9.1 allows a Logout Request for it), logout within Parameter3 s
 * or 2 s, whichever is less; asked again within RENEGOTIATE_MIN_MS, ignored.
 * Lock held.  0, or a negative errno to drop the connection.
 */
static int rx_async(struct iscsi_session *s, const struct iscsi_bhs *h, const uint8_t *data, uint32_t dlen,
		    struct rx_out *o)
{
	struct async_sense *ev = &o->ev;
	switch (h->u.async.event) {
	case 0: {
		uint32_t slen = dlen >= 2 ? be16_get(data) : 0;
		if (dlen < 2 || slen == 0 || slen > dlen - 2) {
			log_warn("SCSI asynchronous event with SenseLength %u in a %u-byte segment: ignored", slen, dlen);
			return 0;
		}
		scsi_parse_sense(data + 2, slen, &ev->sense);
		ev->lun = h->lun;
		if (s->cfg.on_async_sense)
			ev->have = true;
		else
			log_warn("SCSI asynchronous event: sense %x/%02x/%02x", ev->sense.key, ev->sense.asc,
				 ev->sense.ascq);
		return 0;
	}
	case 1:
	case 4:
		if (h->u.async.event == 4 && s->renegotiated_ms && clk_now_ms() - s->renegotiated_ms < RENEGOTIATE_MIN_MS) {
			/* a fresh login negotiated everything: a target asking again at once would loop us */
			log_warn("target asks to renegotiate parameters again within %d s of a new login: ignored",
				 RENEGOTIATE_MIN_MS / 1000);
			return 0;
		}
		if (!s->relogin_pending && !s->logout_want) {
			bool renegotiate = h->u.async.event == 4;
			uint16_t p3 = h->u.async.param3;
			uint16_t secs = !p3 ? 2 : renegotiate && p3 > 2 ? 2 : p3;
			if (renegotiate)
				log_warn("target asks to renegotiate parameters: logging out and in again");
			else
				log_warn("target requests a logout within %u s: logging out and in again", secs);
			s->relogin_pending = true;
			s->relogin_reason = renegotiate ? "a parameter renegotiation requested by the target"
							: "a logout requested by the target";
			s->relogin_deadline_ms = clk_now_ms() + target_secs_ms(secs, "logout delay");
			if (renegotiate)
				s->renegotiated_ms = clk_now_ms();
		}
		return 0;
	case 2:
	case 3:
		log_warn("target will drop the %s (Time2Wait %u s): reconnecting",
			 h->u.async.event == 2 ? "connection" : "session", h->u.async.param2);
		s->drop_reason = h->u.async.event == 2 ? "the target announced dropping the connection"
						       : "the target announced dropping the session";
		s->reconnect_delay_ms = target_secs_ms(h->u.async.param2, "Time2Wait");
		(void)target_secs_ms(h->u.async.param3, "Time2Retain"); /* ERL 0: nothing is retained */
		return -ECONNRESET;
	default:
		log_warn("target sent asynchronous event %u (vcode %u): ignored", h->u.async.event, h->u.async.vcode);
		return 0;
	}
}

/*
 * The ExpCmdSN/MaxCmdSN (§4.2.2.1) and StatSN (§4.2.2.2) a target PDU
 * carries, applied once per PDU before its handler.  StatSN counts only
 * where it numbers a status: a Data-In with status, a SCSI or TMF
 * Response, a Logout Response, an Async Message, and a NOP-In answering
 * our ping (a NOP-In with the reserved ITT does not advance StatSN,
 * §11.19.4); Data-In without status updates nothing.
 */
static void rx_update_sn(struct iscsi_session *s, const struct iscsi_bhs *h)
{
	uint32_t exp, max, statsn = 0;
	bool has_statsn = true;
	switch (h->opcode) {
	case ISCSI_OP_DATA_IN:
		if (!h->u.data_in.status_present)
			return;
		exp = h->u.data_in.expcmdsn, max = h->u.data_in.maxcmdsn, statsn = h->u.data_in.statsn;
		break;
	case ISCSI_OP_SCSI_RSP:
		exp = h->u.rsp.expcmdsn, max = h->u.rsp.maxcmdsn, statsn = h->u.rsp.statsn;
		break;
	case ISCSI_OP_R2T:
		exp = h->u.r2t.expcmdsn, max = h->u.r2t.maxcmdsn, has_statsn = false;
		break;
	case ISCSI_OP_NOP_IN:
		exp = h->u.nop.expcmdsn, max = h->u.nop.maxcmdsn, statsn = h->u.nop.statsn;
		has_statsn = h->itt != ISCSI_RESERVED_TAG;
		break;
	case ISCSI_OP_LOGOUT_RSP:
		exp = h->u.logout.expcmdsn, max = h->u.logout.maxcmdsn, statsn = h->u.logout.statsn;
		break;
	case ISCSI_OP_ASYNC_MSG:
		exp = h->u.async.expcmdsn, max = h->u.async.maxcmdsn, statsn = h->u.async.statsn;
		break;
	case ISCSI_OP_REJECT:
		exp = h->u.reject.expcmdsn, max = h->u.reject.maxcmdsn, has_statsn = false;
		break;
	case ISCSI_OP_TEXT_RSP: /* decoded into u.text, not u.tmf_rsp */
		exp = h->u.text.expcmdsn, max = h->u.text.maxcmdsn, has_statsn = false;
		break;
	case ISCSI_OP_TASK_MGMT_RSP:
		exp = h->u.tmf_rsp.expcmdsn, max = h->u.tmf_rsp.maxcmdsn, statsn = h->u.tmf_rsp.statsn;
		break;
	default:
		return;
	}
	update_cmdsn(s, exp, max);
	if (has_statsn)
		update_statsn(s, statsn);
}

/* NOP-In (§11.19): the answer to our ping, and/or the target's ping asking for a NOP-Out echo. */
static int rx_nop_in(struct iscsi_session *s, const struct iscsi_bhs *h, const uint8_t *data, uint32_t dlen,
		     struct rx_out *o)
{
	(void)o;
	if (h->itt != ISCSI_RESERVED_TAG) {
		if (h->itt != s->ping_itt || !s->ping_sent) {
			log_err("NOP-In answering a NOP-Out we did not send (ITT 0x%08x)", h->itt);
			return -EPROTO;
		}
		s->ping_sent = false;
		s->ping_itt = itt_next_reserved(ITT_GEN_PING, s->ping_itt);
	}
	if (h->u.nop.ttt == ISCSI_RESERVED_TAG)
		return 0;
	/* The target asks for a NOP-Out echoing its ping data (§11.19), into a buffer not being sent. */
	int b = s->nop_reply ? (int)s->nop_next : !s->nop_buf[0].busy ? 0 : !s->nop_buf[1].busy ? 1 : -1;
	if (b < 0) {
		log_debug("NOP-In ping (TTT 0x%08x) while two answers are being sent: not answered", h->u.nop.ttt);
		return 0;
	}
	s->nop_reply = true;
	s->nop_next = (unsigned)b;
	s->nop_ttt = h->u.nop.ttt;
	s->nop_lun = h->lun;
	s->nop_dlen = dlen < NOP_DATA_MAX ? dlen : NOP_DATA_MAX;
	if (s->nop_dlen)
		memcpy(s->nop_buf[b].data, data, s->nop_dlen);
	return 0;
}

/* Logout Response (§11.15) to our Logout Request. */
static int rx_logout_rsp(struct iscsi_session *s, const struct iscsi_bhs *h, const uint8_t *data, uint32_t dlen,
			 struct rx_out *o)
{
	(void)data, (void)dlen, (void)o;
	if (!s->logout_sent || h->itt != s->logout_itt) {
		log_err("Logout Response we did not ask for (ITT 0x%08x)", h->itt);
		return -EPROTO;
	}
	if (h->u.logout.response != 0)
		log_warn("logout response %u", h->u.logout.response);
	s->logout_done = true;
	pthread_cond_broadcast(&s->state_cv);
	if (!s->logout_relogin)
		return 0;
	/* Logged out as the target asked: log in again after its Time2Wait. */
	s->drop_reason = s->relogin_reason;
	s->reconnect_delay_ms = target_secs_ms(h->u.logout.time2wait, "Time2Wait");
	(void)target_secs_ms(h->u.logout.time2retain, "Time2Retain"); /* ERL 0: nothing is retained */
	return -ECONNRESET;
}

/* Text Response (§11.11): nothing of ours asks for one in the full feature phase; its SNs count. */
static int rx_text_rsp(struct iscsi_session *s, const struct iscsi_bhs *h, const uint8_t *data, uint32_t dlen,
		       struct rx_out *o)
{
	(void)s, (void)h, (void)data, (void)dlen, (void)o;
	return 0;
}

/* The handler of each target opcode in the full feature phase (SPDK's iscsi_pdu_hdr_op_<op>). */
static int rx_dispatch(struct iscsi_session *s, const struct iscsi_bhs *h, const uint8_t *data, uint32_t dlen,
		       struct rx_out *o)
{
	switch (h->opcode) {
	case ISCSI_OP_DATA_IN:
		return rx_data_in(s, h, data, dlen, o);
	case ISCSI_OP_SCSI_RSP:
		return rx_scsi_rsp(s, h, data, dlen, o);
	case ISCSI_OP_R2T:
		return rx_r2t(s, h, data, dlen, o);
	case ISCSI_OP_NOP_IN:
		return rx_nop_in(s, h, data, dlen, o);
	case ISCSI_OP_LOGOUT_RSP:
		return rx_logout_rsp(s, h, data, dlen, o);
	case ISCSI_OP_ASYNC_MSG:
		return rx_async(s, h, data, dlen, o);
	case ISCSI_OP_REJECT:
		return rx_reject(s, h, data, dlen, o);
	case ISCSI_OP_TEXT_RSP:
		return rx_text_rsp(s, h, data, dlen, o);
	case ISCSI_OP_TASK_MGMT_RSP:
		return rx_tmf_rsp(s, h, data, dlen, o);
	default:
		log_err("unexpected %s PDU in the full feature phase", iscsi_opcode_name(h->opcode));
		return -EPROTO;
	}
}

/*
 * A whole PDU from the target: sequence numbers first (rx_update_sn), then
 * its handler, then the CmdSN window; a completion or an asynchronous
 * event runs after the lock is released.  The event thread flushes tx
 * after every receive, so nothing here kicks it.
 */
static int hook_rx_pdu(void *arg, const uint8_t *bhs, const uint8_t *data, uint32_t dlen)
{
	struct iscsi_session *s = arg;
	struct iscsi_bhs h;
	struct rx_out o = {0};
	int rc = iscsi_bhs_decode(bhs, &h);
	if (rc) {
		log_err("received PDU with unexpected opcode 0x%02x", bhs[0] & 0x3f);
		return rc;
	}

	pthread_mutex_lock(&s->lock);
	if (!s->event_thread_known) {
		s->event_thread = pthread_self();
		s->event_thread_known = true;
	}
	s->last_rx_ms = clk_now_ms();
	rx_update_sn(s, &h);
	rc = rx_dispatch(s, &h, data, dlen, &o);
	window_admit(s);
	pthread_mutex_unlock(&s->lock);
	if (o.done)
		run_completion(&o.c);
	if (o.ev.have)
		s->cfg.on_async_sense(s->cfg.async_arg, o.ev.lun, &o.ev.sense);
	return rc;
}

static void hook_tx_done(void *arg, const struct iscsi_tx_slot *slots, int n)
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
			task_finish(s, t, &done[ndone]);
			ndone++;
		}
	}
	pthread_mutex_unlock(&s->lock);
	for (int i = 0; i < ndone; i++)
		run_completion(&done[i]);
}

/*
 * Complete, one at a time with the lock dropped around each callback, every
 * task `pick` selects; `err` is the result unless the task is doomed (then
 * its deferred_res).  Called with the lock held, returns with it held.
 * While connected (SS_UP) a task whose PDUs the transport still sends
 * completes later, in hook_tx_done; otherwise the transport is gone and it
 * completes now.  Returns how many were picked.
 */
static unsigned complete_tasks(struct iscsi_session *s, bool (*pick)(const struct task *), int err)
{
	unsigned n = 0;
	for (;;) {
		struct task *t = NULL;
		for (unsigned i = 0; i < s->ntasks && !t; i++)
			if (s->tasks[i].in_use && pick(&s->tasks[i]))
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
		task_finish(s, t, &c); /* else its PDUs still queued defer it to hook_tx_done */
		n++;
		pthread_mutex_unlock(&s->lock);
		run_completion(&c);
		pthread_mutex_lock(&s->lock);
	}
}

static bool pick_any(const struct task *t) { (void)t; return true; }
static bool pick_doomed(const struct task *t) { return t->doomed; }


/*
 * The connection is gone and the session will be recovered (RFC 7143
 * §6.3.5, ERL 0): every command not answered yet is parked for re-issue,
 * one answered while its PDUs were still queued completes now, one
 * re-issued ISCSI_REISSUE_MAX times already fails with -EIO.  On the dying
 * connection's event thread, lock held; the recovery thread takes over.
 */
static void lose_connection(struct iscsi_session *s, int err)
{
	s->state = SS_DOWN;
	s->event_thread_known = false;
	if (!s->lost_ms) {
		s->lost_ms = clk_now_ms();
		s->lost_err = err;
		s->lost_reason = s->drop_reason;
		s->reissued = 0;
	}
	s->drop_reason = NULL;
	for (unsigned i = 0; i < s->ntasks; i++) {
		struct task *t = &s->tasks[i];
		if (!t->in_use)
			continue;
		if (t->done_deferred) {
			t->doomed = true;
		} else if ((t->cmd_sent || t->stalled) && t->reissues >= ISCSI_REISSUE_MAX) {
			log_err("command 0x%02x lost with the connection %u times: failing it", t->cmd.cdb[0],
				t->reissues + 1);
			memset(&t->deferred_res, 0, sizeof(t->deferred_res));
			t->deferred_res.err = -EIO;
			t->doomed = true;
		} else if (t->cmd_sent || t->stalled) {
			/* a command never sent counts only when it was the reason for the drop (a window kept closed) */
			t->reissues++;
		}
		task_reset(t);
	}
	s->win_head = s->win_tail = s->tx_head = s->tx_tail = NULL;
	s->nop_reply = s->ping_want = s->ping_sent = false;
	s->tmf_want = s->tmf_sent = false;
	s->relogin_pending = s->logout_relogin = s->logout_want = s->logout_sent = s->logout_done = false;
	pthread_cond_signal(&s->rec_cv);
	complete_tasks(s, pick_doomed, 0);
}

static void hook_conn_lost(void *arg, int err)
{
	struct iscsi_session *s = arg;
	pthread_mutex_lock(&s->lock);
	if (err && !s->logout_done && !s->closing)
		log_err("connection to " ISCSI_HOSTPORT_FMT " lost: %s", ISCSI_HOSTPORT_ARGS(s->cfg.host, s->cfg.port),
			s->drop_reason ? s->drop_reason : strerror(-err));
	if (err && !s->closing && s->state != SS_CLOSED) {
		lose_connection(s, err);
		pthread_mutex_unlock(&s->lock);
		return;
	}
	/* Shut down (iscsi_session_close): whatever is left fails. */
	s->state = SS_CLOSED;
	for (unsigned i = 0; i < s->ntasks; i++)
		s->tasks[i].in_txq = false;
	s->win_head = s->win_tail = s->tx_head = s->tx_tail = NULL;
	complete_tasks(s, pick_any, err ? -ECONNRESET : -ECONNABORTED);
	s->win_head = s->win_tail = s->tx_head = s->tx_tail = NULL;
	s->logout_done = true;
	pthread_cond_broadcast(&s->slot_cv);
	pthread_cond_broadcast(&s->state_cv);
	pthread_mutex_unlock(&s->lock);
}

/*
 * A task management request unanswered for cmd_timeout/2 (TMF_TIMEOUT_MIN_MS
 * .. TMF_TIMEOUT_MAX_MS): ABORT TASK escalates to LOGICAL UNIT RESET, an
 * unanswered LU RESET drops the connection (-ETIMEDOUT).  Lock held.
 */
static int tick_tmf(struct iscsi_session *s, int64_t now, bool *kick)
{
	int64_t limit = s->cfg.cmd_timeout_ms / 2;
	limit = limit < TMF_TIMEOUT_MIN_MS ? TMF_TIMEOUT_MIN_MS : limit > TMF_TIMEOUT_MAX_MS ? TMF_TIMEOUT_MAX_MS : limit;
	if (now - s->tmf_sent_ms <= limit)
		return 0;
	s->tmf_sent = false;
	if (s->tmf_function != ISCSI_TMF_ABORT_TASK) {
		log_err("no answer to LOGICAL UNIT RESET within %lld ms: dropping the connection", (long long)limit);
		return -ETIMEDOUT;
	}
	log_err("no answer to ABORT TASK for ITT 0x%08x within %lld ms: LOGICAL UNIT RESET", s->tmf_rtt,
		(long long)limit);
	s->tmf_function = ISCSI_TMF_LUN_RESET;
	s->tmf_itt = itt_next_reserved(ITT_GEN_TMF, s->tmf_itt);
	s->tmf_want = *kick = true;
	return 0;
}

/*
 * The first command older than cmd_timeout_ms: ABORT TASK for it (§11.5.1),
 * or, never sent (the CmdSN window stayed closed) or stuck in the
 * transport, a drop of the connection (-ETIMEDOUT).  Lock held.
 */
static int tick_cmd_timeout(struct iscsi_session *s, int64_t now, bool *kick)
{
	for (unsigned i = 0; i < s->ntasks; i++) {
		struct task *t = &s->tasks[i];
		if (!t->in_use || now - t->submit_ms <= s->cfg.cmd_timeout_ms)
			continue;
		if (!t->cmd_sent || t->done_deferred) {
			log_err("command 0x%02x (ITT 0x%08x) not sent within %d s: dropping the connection",
				t->cmd.cdb[0], t->itt, s->cfg.cmd_timeout_ms / 1000);
			t->stalled = true;
			return -ETIMEDOUT;
		}
		log_err("command 0x%02x (ITT 0x%08x) not answered within %d s: ABORT TASK", t->cmd.cdb[0],
			t->itt, s->cfg.cmd_timeout_ms / 1000);
		s->tmf_function = ISCSI_TMF_ABORT_TASK;
		s->tmf_lun = t->cmd.lun;
		s->tmf_rtt = t->itt;
		s->tmf_refcmdsn = t->cmdsn;
		s->tmf_itt = itt_next_reserved(ITT_GEN_TMF, s->tmf_itt);
		s->tmf_want = *kick = true;
		return 0;
	}
	return 0;
}

/*
 * A logout the target asked for (AsyncEvent 1 or 4): sent once no command
 * is in flight or at relogin_deadline_ms; no Logout Response within 5 s
 * drops the connection (-ETIMEDOUT).  Lock held.
 */
static int tick_relogin(struct iscsi_session *s, int64_t now, bool *kick)
{
	if (s->relogin_pending && !s->logout_want) {
		bool inflight = false;
		for (unsigned i = 0; i < s->ntasks && !inflight; i++)
			inflight = s->tasks[i].in_use && s->tasks[i].cmd_sent;
		if (!inflight || now >= s->relogin_deadline_ms) {
			s->logout_want = s->logout_relogin = true;
			*kick = true;
		}
	}
	if (s->logout_relogin && s->logout_sent && now - s->logout_sent_ms > 5000) {
		log_err("no Logout Response within 5 s: dropping the connection");
		s->drop_reason = s->relogin_reason;
		return -ETIMEDOUT;
	}
	return 0;
}

/*
 * Keep-alive (§11.18): a NOP-Out ping after noop_interval_ms without a PDU;
 * no PDU within noop_timeout_ms of it drops the connection (-ETIMEDOUT).
 * Lock held.
 */
static int tick_ping(struct iscsi_session *s, int64_t now, bool *kick)
{
	if (s->cfg.noop_interval_ms <= 0 || s->logout_want)
		return 0;
	int64_t quiet_since = s->last_rx_ms;
	if (s->ping_sent) {
		if (s->ping_sent_ms > quiet_since)
			quiet_since = s->ping_sent_ms;
		if (now - quiet_since > s->cfg.noop_timeout_ms) {
			log_err("no answer to a NOP-Out ping within %d s: dropping the connection",
				s->cfg.noop_timeout_ms / 1000);
			return -ETIMEDOUT;
		}
	} else if (!s->ping_want && now - quiet_since >= s->cfg.noop_interval_ms) {
		s->ping_want = true;
		*kick = true;
	}
	return 0;
}

/*
 * Deadlines and keep-alive, once a second on the event thread.  A command
 * older than cmd_timeout_ms, or no PDU at all within noop_timeout_ms of a
 * ping, drops the connection (ERL 0: every outstanding command then fails).
 * A ping goes out only when nothing arrived for noop_interval_ms, so a busy
 * connection is never declared dead because a ping waits behind data.
 */
static int hook_tick(void *arg, int64_t now)
{
	struct iscsi_session *s = arg;
	int rc = 0;
	bool kick = false;
	pthread_mutex_lock(&s->lock);
	if (s->state != SS_UP) { /* commands are requeued with fresh deadlines first */
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	if (s->tmf_sent)
		rc = tick_tmf(s, now, &kick);
	else if (!s->tmf_want && s->cfg.cmd_timeout_ms > 0)
		rc = tick_cmd_timeout(s, now, &kick);
	if (!rc)
		rc = tick_relogin(s, now, &kick);
	if (!rc)
		rc = tick_ping(s, now, &kick);
	if (kick)
		s->t->ops->kick(s->t);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static bool hook_task_owns(void *arg, uint32_t itt, const void *buf, uint32_t len)
{
	struct iscsi_session *s = arg;
	pthread_mutex_lock(&s->lock);
	struct task *t = task_lookup(s, itt);
	bool owns = t && t->cmd.buf == buf && t->cmd.len >= len;
	pthread_mutex_unlock(&s->lock);
	return owns;
}

static const struct iscsi_transport_hooks session_hooks = {
	.tick = hook_tick,
	.tx_done = hook_tx_done,
	.tx_fill = hook_tx_fill,
	.rx_data_dest = hook_rx_data_dest,
	.rx_pdu = hook_rx_pdu,
	.conn_lost = hook_conn_lost,
	.task_owns = hook_task_owns,
};

/* ---- connecting, and recovery (ERL 0) ---- */

static void session_wipe_creds(struct iscsi_session *s)
{
	explicit_bzero(s->cfg.chap_user, sizeof(s->cfg.chap_user));
	explicit_bzero(s->cfg.chap_secret, sizeof(s->cfg.chap_secret));
	explicit_bzero(s->cfg.chap_mutual_user, sizeof(s->cfg.chap_mutual_user));
	explicit_bzero(s->cfg.chap_mutual_secret, sizeof(s->cfg.chap_mutual_secret));
}

/* Login redirections followed in one attempt (RFC 7143 §11.13.5, status class 1). */
#define REDIRECTS_MAX 4

/*
 * Connect and log in with the session's ISID (TSIH 0: a new session, or the
 * reinstatement of the one this ISID had, RFC 7143 §6.3.5).  The one path
 * for iscsi_session_open and for recovery; cfg->transport_ctx goes to every
 * connect.  A redirection (0x0101 temporary, 0x0102 permanent) is followed
 * to its TargetAddress; a permanent one replaces the portal in s->cfg for
 * every later login.  On success *out is the connected transport, not
 * started.  Called only where no event thread runs (open, recovery).
 */
static int connect_login(struct iscsi_session *s, int timeout_ms, int64_t deadline_ms, struct iscsi_transport **out,
			 struct iscsi_login_result *lr, char *err, size_t err_cap)
{
	const struct iscsi_session_config *cfg = &s->cfg;
	char host[ISCSI_URL_HOST_MAX];
	unsigned port = cfg->port;
	snprintf(host, sizeof(host), "%s", cfg->host);
	struct iscsi_login_config lc = {0};
	snprintf(lc.initiator_name, sizeof(lc.initiator_name), "%s", cfg->initiator_name);
	snprintf(lc.target_name, sizeof(lc.target_name), "%s", cfg->target_name);
	memcpy(lc.isid, s->isid, sizeof(lc.isid));
	lc.tsih = 0;
	lc.cmdsn = LOGIN_CMDSN;
	lc.neg = cfg->neg;
	lc.timeout_ms = timeout_ms;
	lc.deadline_ms = deadline_ms; /* every hop and CHAP retry within it */
	memcpy(lc.chap_algs, s->chap_algs, sizeof(lc.chap_algs));
	memcpy(lc.chap_user, cfg->chap_user, sizeof(lc.chap_user));
	memcpy(lc.chap_secret, cfg->chap_secret, sizeof(lc.chap_secret));
	memcpy(lc.chap_mutual_user, cfg->chap_mutual_user, sizeof(lc.chap_mutual_user));
	memcpy(lc.chap_mutual_secret, cfg->chap_mutual_secret, sizeof(lc.chap_mutual_secret));

	struct iscsi_transport *t = NULL;
	int rc = 0;
	if (!lc.deadline_ms)
		lc.deadline_ms = clk_now_ms() + timeout_ms;
	for (unsigned hop = 0;; hop++) {
		rc = iscsi_connect_login(cfg->transport, cfg->transport_ctx, host, port, &lc, lr, &t, err, err_cap);
		memcpy(s->chap_algs, lc.chap_algs, sizeof(s->chap_algs)); /* a narrowed CHAP_A offer is kept */
		if (rc == 0)
			break;
		t = NULL;
		if (lr->status_class != 0x01 || hop == REDIRECTS_MAX)
			break;
		char nhost[ISCSI_URL_HOST_MAX];
		unsigned nport;
		if (!lr->target_address[0] ||
		    iscsi_target_address_parse(lr->target_address, nhost, sizeof(nhost), &nport)) {
			snprintf(err, err_cap, "login redirected (status 0x01%02x) without a usable TargetAddress",
				 lr->status_detail);
			rc = -EPROTO;
			break;
		}
		bool permanent = lr->status_detail == 0x02;
		log_warn("login to " ISCSI_HOSTPORT_FMT " redirected %s to " ISCSI_HOSTPORT_FMT, ISCSI_HOSTPORT_ARGS(host, port),
			 permanent ? "permanently" : "temporarily", ISCSI_HOSTPORT_ARGS(nhost, nport));
		snprintf(host, sizeof(host), "%s", nhost);
		port = nport;
		if (permanent) {
			pthread_mutex_lock(&s->lock);
			snprintf(s->cfg.host, sizeof(s->cfg.host), "%s", nhost);
			s->cfg.port = nport;
			pthread_mutex_unlock(&s->lock);
		}
	}
	iscsi_login_config_wipe(&lc);
	if (rc)
		return rc;
	*out = t;
	return 0;
}

/* Target busy at login (status 0x0301 service unavailable, 0x0302 out of resources). */
static bool login_busy(const struct iscsi_login_result *lr)
{
	return lr->status_class == 0x03 && (lr->status_detail == 0x01 || lr->status_detail == 0x02);
}

/* Take the login's sequence numbers and parameters (lock held, or before the session is shared). */
static void adopt_login(struct iscsi_session *s, struct iscsi_transport *t, const struct iscsi_login_result *lr)
{
	s->t = t;
	s->tsih = lr->tsih;
	s->params = lr->params;
	/*
	 * §4.2.2.1: the first command carries the login's initial CmdSN, which
	 * the Login Response's ExpCmdSN normally repeats.  tgt's iSER login
	 * answers one higher and then expects the initial CmdSN anyway, so that
	 * one case keeps the initial value; otherwise the target's ExpCmdSN.
	 */
	s->cmdsn = lr->expcmdsn == LOGIN_CMDSN + 1 ? LOGIN_CMDSN : lr->expcmdsn;
	s->expcmdsn = lr->expcmdsn;
	s->maxcmdsn = lr->maxcmdsn;
	s->expstatsn = lr->expstatsn;
	s->last_rx_ms = clk_now_ms();
	s->ping_want = s->ping_sent = s->nop_reply = false;
	s->nop_buf[0].busy = s->nop_buf[1].busy = false; /* the old connection is gone, and its sends */
	s->tmf_want = s->tmf_sent = false;
	s->event_thread_known = false;
}

static const char *loss_cause(int err)
{
	switch (err) {
	case -ETIMEDOUT:
		return "command or NOP-Out timeout";
	case -EBADMSG:
		return "digest error";
	case -EPROTO:
		return "protocol violation";
	default:
		return strerror(-err);
	}
}

static const char *loss_what(const struct iscsi_session *s)
{
	return s->lost_reason ? s->lost_reason : loss_cause(s->lost_err);
}

static int by_seq(const void *a, const void *b)
{
	const struct task *x = *(struct task *const *)a, *y = *(struct task *const *)b;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/*
 * Queue every parked command again in submission (= old CmdSN) order with
 * a fresh ITT; window_admit gives them new CmdSNs.  Lock held, state
 * SS_STARTING.  Returns how many there are.
 */
static unsigned requeue_parked(struct iscsi_session *s)
{
	unsigned n = 0;
	for (unsigned i = 0; i < s->ntasks; i++)
		if (s->tasks[i].in_use)
			s->sorted[n++] = &s->tasks[i];
	qsort(s->sorted, n, sizeof(*s->sorted), by_seq);
	int64_t now = clk_now_ms();
	for (unsigned i = 0; i < n; i++) {
		struct task *t = s->sorted[i];
		task_reset(t);
		t->gen++;
		task_assign_itt(t);
		t->submit_ms = now;
		winq_push(s, t);
	}
	window_admit(s);
	return n;
}

/*
 * replacement_timeout_ms after the loss: pending commands fail with
 * -ETIMEDOUT and new ones with -ENOTCONN until the session is back.  Lock
 * held (dropped around callbacks).
 */
/* When pending commands fail: replacement_timeout_ms after the loss, or the stop grace if sooner.  Lock held. */
static int64_t replacement_deadline(const struct iscsi_session *s)
{
	int64_t d = s->lost_ms + s->cfg.replacement_timeout_ms;
	return s->stop_by_ms && s->stop_by_ms < d ? s->stop_by_ms : d;
}

static void check_replacement(struct iscsi_session *s, int64_t now)
{
	if (s->fail_fast || now < replacement_deadline(s))
		return;
	s->fail_fast = true;
	pthread_cond_broadcast(&s->slot_cv);
	pthread_cond_broadcast(&s->state_cv);
	unsigned n = complete_tasks(s, pick_any, -ETIMEDOUT);
	log_err("session to " ISCSI_HOSTPORT_FMT " down for %lld ms (%s), replacement timeout: %u commands failed; "
		"new I/O fails until the target is back",
		ISCSI_HOSTPORT_ARGS(s->cfg.host, s->cfg.port), (long long)(now - s->lost_ms), loss_what(s), n);
}

/* Sleep until `until` (CLOCK_MONOTONIC ms) or closing, minding the replacement timeout.  Lock held. */
static void recovery_wait(struct iscsi_session *s, int64_t until)
{
	for (;;) {
		int64_t now = clk_now_ms();
		check_replacement(s, now);
		if (s->closing || now >= until)
			return;
		int64_t wake = until;
		if (!s->fail_fast && replacement_deadline(s) < wake)
			wake = replacement_deadline(s);
		int64_t ms = wake - now;
		if (ms < 1)
			ms = 1;
		struct timespec ts = clk_deadline_ms(ms);
		pthread_cond_timedwait(&s->rec_cv, &s->lock, &ts);
	}
}

/*
 * Reconnect with capped, jittered exponential back-off (RECONNECT_BASE_MS
 * doubling to RECONNECT_MAX_MS, +-25%) until logged in, into *nt and *lr,
 * or closing (then *nt is NULL).  The first attempt waits for the target's
 * Time2Wait, at most half the replacement timeout.  Returns the attempts
 * made.  Lock held (dropped around each connect and login).
 */
static unsigned recover_connect(struct iscsi_session *s, struct iscsi_transport **nt, struct iscsi_login_result *lr)
{
	int64_t delay = 0, first = s->reconnect_delay_ms;
	unsigned attempts = 0;
	char err[256];
	int timeout_ms = s->cfg.timeout_ms > 0 ? s->cfg.timeout_ms : 15000;

	s->reconnect_delay_ms = 0;
	/* A Time2Wait that would outlast half the replacement timeout would fail I/O a target serves again. */
	if (first > s->cfg.replacement_timeout_ms / 2 && !s->fail_fast) {
		log_warn("reconnecting after %d ms instead of the target's Time2Wait (%lld ms): half the replacement "
			 "timeout", s->cfg.replacement_timeout_ms / 2, (long long)first);
		first = s->cfg.replacement_timeout_ms / 2;
	}
	for (;;) {
		recovery_wait(s, clk_now_ms() + (attempts ? delay : first));
		if (s->closing) {
			*nt = NULL;
			return attempts;
		}
		/*
		 * The whole connect and login ends within the login timeout and,
		 * until it passed, by the replacement deadline: recovery_wait then
		 * fails the I/O on time however the target stalls the login.
		 */
		int64_t deadline = clk_now_ms() + timeout_ms;
		if (!s->fail_fast && replacement_deadline(s) < deadline)
			deadline = replacement_deadline(s);
		s->attempt_deadline_ms = deadline;
		pthread_mutex_unlock(&s->lock);
		attempts++;
		err[0] = '\0';
		int rc = connect_login(s, timeout_ms, deadline, nt, lr, err, sizeof(err));
		pthread_mutex_lock(&s->lock);
		s->attempt_deadline_ms = 0;
		if (!s->closing) {
			/* iscsi_session_stopping may have cut this attempt short: re-arm the token for the next */
			uint64_t v;
			if (read(s->cancel_fd, &v, sizeof(v)) == sizeof(v))
				log_debug("reconnect attempt %u cancelled: the daemon is stopping", attempts);
		}
		if (rc == 0)
			break;
		log_debug("reconnect attempt %u to " ISCSI_HOSTPORT_FMT ": %s", attempts,
			  ISCSI_HOSTPORT_ARGS(s->cfg.host, s->cfg.port), err);
		delay = delay ? 2 * delay : RECONNECT_BASE_MS;
		if (delay > RECONNECT_MAX_MS)
			delay = RECONNECT_MAX_MS;
		delay = delay * 3 / 4 + (int64_t)(random() % (delay / 2 + 1));
	}
	return attempts;
}

/*
 * One recovery: reconnect (recover_connect), start the new connection and
 * re-issue the parked commands (RFC 7143 §6.3.5, ERL 0).  Lock held.
 */
static void recover(struct iscsi_session *s)
{
	struct iscsi_login_result lr;
	struct iscsi_transport *nt = NULL;
	unsigned attempts = recover_connect(s, &nt, &lr);
	if (!nt)
		return;
	if (s->closing) {
		pthread_mutex_unlock(&s->lock);
		nt->ops->shutdown(nt);
		nt->ops->destroy(nt);
		pthread_mutex_lock(&s->lock);
		return;
	}
	adopt_login(s, nt, &lr);
	s->state = SS_STARTING; /* submitters still park; the event thread may start calling hooks */
	pthread_mutex_unlock(&s->lock);
	int rc = nt->ops->start(nt, &session_hooks, s, &s->params);
	pthread_mutex_lock(&s->lock);
	if (rc) {
		log_err("cannot start the new connection to " ISCSI_HOSTPORT_FMT ": %s",
			ISCSI_HOSTPORT_ARGS(s->cfg.host, s->cfg.port), strerror(-rc));
		if (s->state == SS_STARTING)
			s->state = SS_DOWN; /* nt is reaped and the next attempt made by the caller */
		s->reconnect_delay_ms = RECONNECT_MAX_MS; /* not at once: it would fail the same way */
		return;
	}
	if (s->state != SS_STARTING)
		return; /* lost again already: the caller starts over */
	unsigned n = requeue_parked(s);
	s->reissued += n;
	s->state = SS_UP;
	s->fail_fast = false;
	s->stats.reconnects++;
	log_warn("session to " ISCSI_HOSTPORT_FMT " reinstated after %s: down %lld ms, %u commands re-issued, "
		 "%u connect attempts", ISCSI_HOSTPORT_ARGS(s->cfg.host, s->cfg.port), loss_what(s), (long long)(clk_now_ms() - s->lost_ms), n,
		 attempts);
	s->lost_ms = 0;
	pthread_cond_broadcast(&s->slot_cv);
	s->t->ops->kick(s->t);
}

/*
 * The recovery thread: sleeps until a connection is lost (state SS_DOWN),
 * reaps the dead transport (its event thread has returned from conn_lost
 * by the time shutdown joins it), and recovers.  Ends when closing.
 */
static void *recovery_thread(void *arg)
{
	struct iscsi_session *s = arg;
	iscsi_cancel_bind(s->cancel_fd); /* iscsi_session_close ends a connect or login in progress */
	pthread_mutex_lock(&s->lock);
	for (;;) {
		while (!s->closing && s->state != SS_DOWN)
			pthread_cond_wait(&s->rec_cv, &s->lock);
		if (s->closing)
			break;
		struct iscsi_transport *old = s->t;
		s->t = NULL;
		pthread_mutex_unlock(&s->lock);
		if (old)
			old->ops->shutdown(old);
		pthread_mutex_lock(&s->lock);
		if (old) { /* keep the dead connection's copy count in the session's */
			if (old->ops->payload_copied)
				s->stats.payload_bytes_copied += old->ops->payload_copied(old);
			old->ops->destroy(old);
		}
		recover(s);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* ---- public API ---- */

static void session_free(struct iscsi_session *s)
{
	session_wipe_creds(s);
	free(s->sorted);
	free(s->tasks);
	if (s->cancel_fd >= 0)
		close(s->cancel_fd);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->slot_cv);
	pthread_cond_destroy(&s->state_cv);
	pthread_cond_destroy(&s->rec_cv);
	free(s);
}

int iscsi_session_open(const struct iscsi_session_config *cfg, struct iscsi_session **out,
		       char *err, size_t err_cap)
{
	struct iscsi_session *s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, err_cap, "out of memory");
		return -ENOMEM;
	}
	s->cfg = *cfg;
	s->cancel_fd = -1;
	unsigned qd = cfg->queue_depth ? cfg->queue_depth : 128;
	if (qd > 4096)
		qd = 4096;
	s->cfg.queue_depth = qd;
	if (s->cfg.replacement_timeout_ms < 0)
		s->cfg.replacement_timeout_ms = 0;
	s->ntasks = 2 * qd + 8; /* worker submissions use qd; completions may chain more (TASKS_MAX at most) */
	s->tasks = calloc(s->ntasks, sizeof(*s->tasks));
	s->sorted = calloc(s->ntasks, sizeof(*s->sorted));
	pthread_mutex_init(&s->lock, NULL);
	/* Every wait on these takes a CLOCK_MONOTONIC deadline (clk_deadline_ms). */
	int cv_rc = clk_cond_init(&s->slot_cv);
	if (!cv_rc)
		cv_rc = clk_cond_init(&s->state_cv);
	if (!cv_rc)
		cv_rc = clk_cond_init(&s->rec_cv);
	s->cancel_fd = iscsi_cancel_new();
	if (cv_rc || !s->tasks || !s->sorted || s->cancel_fd < 0) {
		session_free(s);
		snprintf(err, err_cap, "out of memory");
		return -ENOMEM;
	}
	for (unsigned i = s->ntasks; i-- > 0;) {
		s->tasks[i].index = (uint16_t)i;
		s->tasks[i].next = s->free_list;
		s->free_list = &s->tasks[i];
	}
	iscsi_isid_random(s->isid);

	/* CHAP credentials stay in s->cfg for logins after a connection loss; wiped at close. */
	struct iscsi_transport *t = NULL;
	struct iscsi_login_result lr;
	int rc;
	/* A busy target gets a few more tries with back-off (0.25, 0.5, 1, 2 s), as in recovery. */
	for (int64_t delay = RECONNECT_BASE_MS;; delay *= 2) {
		rc = connect_login(s, cfg->timeout_ms, 0, &t, &lr, err, err_cap);
		if (rc == 0 || !login_busy(&lr) || delay > 2000)
			break;
		log_warn("%s: retrying in %lld ms", err, (long long)delay);
		struct timespec ts = {.tv_sec = delay / 1000, .tv_nsec = (long)(delay % 1000) * 1000000L};
		nanosleep(&ts, NULL);
	}
	if (rc) {
		session_free(s);
		return rc;
	}
	adopt_login(s, t, &lr);
	s->logout_itt = itt_make(ITT_GEN_LOGOUT, 0);
	s->ping_itt = itt_make(ITT_GEN_PING, 0);
	if (s->cfg.noop_interval_ms > 0 && s->cfg.noop_timeout_ms <= 0)
		s->cfg.noop_timeout_ms = 5000;
	s->state = SS_UP;
	rc = s->t->ops->start(s->t, &session_hooks, s, &s->params);
	if (rc) {
		snprintf(err, err_cap, "cannot start the connection: %s", strerror(-rc));
		goto fail_t;
	}
	rc = -pthread_create(&s->rec_thread, NULL, recovery_thread, s);
	if (rc) {
		snprintf(err, err_cap, "cannot start the recovery thread: %s", strerror(-rc));
		goto fail_t;
	}
	s->rec_started = true;
	*out = s;
	return 0;
fail_t:
	s->closing = true;
	s->t->ops->shutdown(s->t);
	s->t->ops->destroy(s->t);
	session_free(s);
	return rc;
}

/* New commands are refused: closing, shut down, logging out, or down past replacement_timeout_ms. */
static bool refusing(const struct iscsi_session *s)
{
	return s->closing || s->state == SS_CLOSED || s->fail_fast || (s->logout_want && !s->logout_relogin);
}

int iscsi_session_submit(struct iscsi_session *s, const struct iscsi_cmd *cmd)
{
	if (cmd->cdb_len == 0 || cmd->cdb_len > SCSI_CDB_MAX || (cmd->len && !cmd->buf) ||
	    (cmd->dir == ISCSI_DIR_NONE && cmd->len))
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	bool ev = on_event_thread(s) || in_callback > 0;
	while (!refusing(s) && !ev && s->worker_outstanding >= s->cfg.queue_depth)
		pthread_cond_wait(&s->slot_cv, &s->lock);
	if (refusing(s)) {
		pthread_mutex_unlock(&s->lock);
		return -ENOTCONN;
	}
	struct task *t = s->free_list;
	if (!t) { /* only reachable from the event thread or a callback */
		pthread_mutex_unlock(&s->lock);
		return -EAGAIN;
	}
	s->free_list = t->next;
	uint16_t index = t->index, gen = t->gen;
	memset(t, 0, sizeof(*t));
	t->index = index;
	t->gen = gen;
	t->in_use = true;
	t->counted = !ev;
	t->cmd = *cmd;
	t->seq = s->next_seq++;
	t->submit_ms = clk_now_ms();
	t->submit_us = clk_now_us();
	task_assign_itt(t);
	s->outstanding++;
	if (!ev)
		s->worker_outstanding++;
	if (s->outstanding > s->stats.max_outstanding)
		s->stats.max_outstanding = s->outstanding;
	if (s->state != SS_UP || s->relogin_pending) {
		/* Being recovered (or about to log out and in again): parked until requeue_parked. */
	} else if (!s->win_head && iscsi_sn_le(s->cmdsn, s->maxcmdsn)) {
		t->cmdsn = s->cmdsn++;
		txq_push(s, t);
		s->t->ops->kick(s->t); /* under the lock: s->t cannot be replaced meanwhile */
	} else {
		winq_push(s, t);
	}
	pthread_mutex_unlock(&s->lock);
	return 0;
}

struct sync_wait {
	pthread_mutex_t m;
	pthread_cond_t cv;
	bool done;
	struct iscsi_cmd_result res;
};

static void sync_done(void *arg, const struct iscsi_cmd_result *res)
{
	struct sync_wait *w = arg;
	pthread_mutex_lock(&w->m);
	w->res = *res;
	w->done = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->m);
}

int iscsi_session_exec(struct iscsi_session *s, struct iscsi_cmd *cmd, struct iscsi_cmd_result *res)
{
	struct sync_wait w = {.done = false};
	pthread_mutex_init(&w.m, NULL);
	pthread_cond_init(&w.cv, NULL);
	cmd->cb = sync_done;
	cmd->arg = &w;
	int rc = iscsi_session_submit(s, cmd);
	if (rc == 0) {
		pthread_mutex_lock(&w.m);
		while (!w.done)
			pthread_cond_wait(&w.cv, &w.m);
		pthread_mutex_unlock(&w.m);
		*res = w.res;
	}
	pthread_mutex_destroy(&w.m);
	pthread_cond_destroy(&w.cv);
	return rc;
}

uint32_t iscsi_session_max_cmd_bytes(const struct iscsi_session *s)
{
	return s->cfg.transport->max_cmd_bytes;
}

const struct iscsi_params *iscsi_session_params(const struct iscsi_session *s) { return &s->params; }

void iscsi_session_get_stats(struct iscsi_session *s, struct iscsi_session_stats *out)
{
	pthread_mutex_lock(&s->lock);
	*out = s->stats;
	out->outstanding = s->outstanding;
	if (s->t && s->t->ops->payload_copied)
		out->payload_bytes_copied += s->t->ops->payload_copied(s->t);
	pthread_mutex_unlock(&s->lock);
}

void iscsi_session_get_latency(struct iscsi_session *s, uint64_t out[LAT_BUCKETS])
{
	lat_hist_snapshot(&s->lat, out);
}

int iscsi_session_drain(struct iscsi_session *s, int timeout_ms)
{
	struct timespec dl = clk_deadline_ms(timeout_ms);
	int rc = 0;
	pthread_mutex_lock(&s->lock);
	while (s->state != SS_CLOSED && !s->fail_fast && s->outstanding > 0)
		if (pthread_cond_timedwait(&s->state_cv, &s->lock, &dl) == ETIMEDOUT) {
			rc = -ETIMEDOUT;
			break;
		}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void iscsi_session_stopping(struct iscsi_session *s, int grace_ms)
{
	pthread_mutex_lock(&s->lock);
	int64_t by = clk_now_ms() + (grace_ms > 0 ? grace_ms : 0);
	if (!s->stop_by_ms || by < s->stop_by_ms)
		s->stop_by_ms = by;
	if (s->attempt_deadline_ms > s->stop_by_ms && !s->closing)
		iscsi_cancel_fire(s->cancel_fd); /* recover() re-arms it and tries again by stop_by_ms */
	pthread_cond_broadcast(&s->rec_cv);
	pthread_mutex_unlock(&s->lock);
}

void iscsi_session_close(struct iscsi_session *s, int timeout_ms)
{
	struct timespec dl = clk_deadline_ms(timeout_ms);
	pthread_mutex_lock(&s->lock);
	while (s->state != SS_CLOSED && !s->fail_fast && s->outstanding > 0)
		if (pthread_cond_timedwait(&s->state_cv, &s->lock, &dl) == ETIMEDOUT)
			break;
	/* No more recovery: a connect or login in progress ends at once (-ECANCELED). */
	s->closing = true;
	iscsi_cancel_fire(s->cancel_fd);
	pthread_cond_broadcast(&s->rec_cv);
	pthread_cond_broadcast(&s->slot_cv);
	pthread_mutex_unlock(&s->lock);
	if (s->rec_started)
		pthread_join(s->rec_thread, NULL);
	pthread_mutex_lock(&s->lock);
	if (s->state == SS_UP) {
		s->logout_want = true;
		s->t->ops->kick(s->t);
		dl = clk_deadline_ms(3000);
		while (s->state == SS_UP && !s->logout_done)
			if (pthread_cond_timedwait(&s->state_cv, &s->lock, &dl) == ETIMEDOUT) {
				log_warn("no Logout Response from the target within 3 s");
				break;
			}
	}
	struct iscsi_transport *t = s->t;
	pthread_mutex_unlock(&s->lock);
	if (t) {
		t->ops->shutdown(t); /* calls conn_lost(0) if its event thread still runs: commands complete */
		t->ops->destroy(t);
	}
	pthread_mutex_lock(&s->lock);
	s->state = SS_CLOSED;
	complete_tasks(s, pick_any, -ECONNABORTED); /* parked while the connection was down */
	pthread_mutex_unlock(&s->lock);
	session_free(s);
}

int iscsi_cmd_result_errno(const struct iscsi_cmd_result *r)
{
	if (r->err)
		return r->err;
	return scsi_status_to_errno(r->status, r->has_sense ? &r->sense : NULL);
}
