/* SPDX-License-Identifier: MIT */
/*
 * iSCSI session internals, shared by session.c and session_*.c only (never
 * included outside initiator/): the task and session structures with the
 * lock that protects each field, the ITT layout, and the internal
 * interface between the session's files.
 *
 * Locking: one mutex per session, iscsi_session.lock.  Unless a field says
 * otherwise it is read and written with that lock held.  Submitters take
 * it briefly; the transport's event thread takes it in every hook; the
 * recovery thread holds it except around connect, login, transport start
 * and shutdown.  Completion callbacks (and the asynchronous-event hook) run
 * with the lock released.  Every condition variable waits on
 * CLOCK_MONOTONIC (clk_cond_init) with clk_deadline_ms deadlines.
 */
#ifndef ISERFUSE_SESSION_PRIV_H
#define ISERFUSE_SESSION_PRIV_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "initiator/util/clock.h"
#include "initiator/util/defaults.h"
#include "initiator/util/latency.h"
#include "initiator/util/log.h"
#include "initiator/login/login.h"
#include "initiator/wire/pdu.h"
#include "session.h"
#include "initiator/transport/transport.h"

#define R2T_QUEUE 4 /* R2Ts queued per task beyond the burst being sent (MaxOutstandingR2T, §13.17) */
/* Reconnect back-off (ms): first try at once, then BASE doubling up to MAX, each +-25% jitter. */
#define RECONNECT_BASE_MS 250
#define RECONNECT_MAX_MS 1000
#define RENEGOTIATE_MIN_MS 30000 /* AsyncEvent 4 again sooner after its relogin: ignored */
/* Most seconds a target's Time2Wait, Time2Retain or logout delay is taken for (target_secs_ms). */
#define TARGET_SECS_MAX 60
#define BURST_PDUS_PER_FILL 8 /* Data-Out PDUs of one task per turn in tx_fill */
#define NOP_DATA_MAX 4096     /* bytes of a NOP-In's ping data echoed back */
#define LOGIN_CMDSN 1 /* CmdSN of every login request (a new session each time, §6.3.5) */
/* A task management request not answered within cmd_timeout/2 (2..10 s) escalates. */
#define TMF_TIMEOUT_MIN_MS 2000
#define TMF_TIMEOUT_MAX_MS 10000
/*
 * At the stop (iscsi_session_stopping) a synchronous command already sent
 * gets this long to be answered; then its connection is dropped (the ERL 0
 * way to take a command back from the target) and it fails.
 */
#define STOP_ANSWER_MS 1000
/*
 * At the close after a stop: how long the Logout Response is waited for
 * (else LOGOUT_RSP_MS), and never past the stop grace's end + this.
 */
#define STOP_LOGOUT_MS 1000
#define LOGOUT_RSP_MS 3000

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
#define TASKS_MAX (2 * ISCSI_QUEUE_DEPTH_MAX + 8) /* task slots at the largest queue_depth (iscsi_session_open) */
static_assert(ITT_GEN_TMF < ITT_GEN_PING && ITT_GEN_PING < ITT_GEN_LOGOUT && ITT_GEN_LOGOUT < ITT_GEN_RESERVED,
	      "the reserved ITT generations are distinct and above every task generation");
static_assert((ISCSI_RESERVED_TAG >> 16) == ITT_GEN_RESERVED, "the reserved tag lies in the last generation");
static_assert(TASKS_MAX <= 0x10000, "a task index fits the ITT's low 16 bits");

/* The ITT of generation gen, index idx. */
static inline uint32_t itt_make(uint32_t gen, uint32_t idx) { return (gen << 16) | (idx & 0xffffu); }

/* The next ITT of a reserved generation (TMF, ping, Logout) after prev. */
static inline uint32_t itt_next_reserved(uint32_t gen, uint32_t prev) { return itt_make(gen, prev + 1); }

struct r2t {
	uint32_t ttt, offset, length; /* R2T's Target Transfer Tag, Buffer Offset and Desired Data Transfer Length (bytes) */
};

/*
 * One task slot of the table.  Protected by the session lock; cmd is the
 * caller's, unchanged while in_use; cmd.buf belongs to the caller and is
 * handed back by the completion (only after tx_pending reached 0).
 */
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
	uint8_t r2t_head, r2t_count; /* the R2T ring r2tq below */
	/* Data-In state (§11.7.2) */
	uint32_t rx_offset, rx_datasn;
	int64_t submit_ms;          /* CLOCK_MONOTONIC ms at (re-)issue, for cmd_timeout_ms */
	int64_t submit_us;          /* CLOCK_MONOTONIC us at submission, for the latency histogram */
	uint64_t seq;               /* submission order, which is CmdSN order */
	uint8_t reissues;           /* times re-issued after a connection loss */
	bool stalled;               /* the CmdSN window kept it unsent past cmd_timeout: its connection was dropped */
	bool doomed;                /* to complete with deferred_res while the connection is down */
	bool sync;                  /* submitted by iscsi_session_exec: failed at the stop (iscsi_session_stopping) */
	int64_t lost_ms;            /* CLOCK_MONOTONIC ms of the first connection loss that caught it (0: none) */
	bool probe;                 /* sent by cfg.verify on the recovery thread: fails with the connection, never parked */
	/* PDUs of this task handed to the transport and not yet written: the
	 * caller's buffer is still in use, so completion waits for them. */
	uint16_t tx_pending;
	bool done_deferred;
	/*
	 * These two come last: a submission (task_reset, session.c) zeroes
	 * every field but index, gen and cmd up to here, not them; each is
	 * read only once written (r2tq below r2t_count, deferred_res once
	 * doomed or done_deferred).  A new field goes above.
	 */
	struct r2t r2tq[R2T_QUEUE];
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
	pthread_mutex_t lock;       /* protects every field below unless noted */
	pthread_cond_t slot_cv;     /* (CLOCK_MONOTONIC) a task slot was freed or the session went down */
	unsigned slot_waiting;      /* submitters in pthread_cond_wait on slot_cv: a freed slot signals only then */
	pthread_cond_t state_cv;    /* (CLOCK_MONOTONIC) logout answered, outstanding reached 0 */
	struct iscsi_transport *t;  /* replaced only by the recovery thread, lock held; NULL while reaped */
	/* Set at open; host and port change (lock held) at a permanent login redirection. */
	struct iscsi_session_config cfg;
	struct iscsi_params params; /* the last login's; written by the opener or the recovery thread, lock held */
	uint8_t isid[6];            /* set at open, then read-only */
	uint16_t tsih;
	uint8_t chap_algs[ISCSI_CHAP_ALGS_MAX]; /* CHAP_A offer, narrowed by iscsi_login_chap_retry (opener, recovery thread) */
	enum sess_state state;
	pthread_t event_thread;     /* the connection's event thread, learnt in its first hook */
	bool event_thread_known;

	/* The event thread's guest (session_guest.c): fn and arg set before fd (release), under the lock. */
	_Atomic int guest_fd;       /* -1: none; read lock-free by the event thread at every pass */
	/*
	 * tx_fill has something to send: set (sess_tx_want) under the lock
	 * with what is queued (tx queue, NOP-Out, ping, TMF, Logout), made
	 * exact again by every tx_fill; read lock-free by sess_hook_tx_idle.
	 */
	atomic_bool tx_any;
	void (*guest_run)(void *arg);
	void (*guest_live)(void *arg, bool live);
	void *guest_arg;
	bool guest_ev_live;         /* an event thread that serves a guest runs (its guest_live hook) */

	/* Recovery (ERL 0): the recovery thread reconnects while state is SS_DOWN. */
	pthread_t rec_thread;       /* written by open, joined by close: no lock */
	bool rec_started;           /* idem */
	pthread_cond_t rec_cv;      /* (CLOCK_MONOTONIC) state became SS_DOWN, or closing */
	bool closing;               /* iscsi_session_close has begun: recovery stops */
	int cancel_fd;              /* set at open; fired with closing: ends the recovery thread's connect or login (cancel.h) */
	int64_t stop_by_ms;         /* iscsi_session_stopping: the replacement deadline is no later (0: none) */
	int64_t sync_stop_ms;       /* iscsi_session_stopping was called then: synchronous commands fail (0: not yet) */
	bool grace_dropped;         /* the recovery thread dropped the connection at stop_by_ms (sess_grace_over) */
	int stop_grace_ms;          /* iscsi_session_stopping's grace: each answer moves stop_by_ms to now + this */
	bool answered;              /* the target answered a command on this connection (reset at each reinstatement) */
	int64_t attempt_deadline_ms; /* the recovery thread's connect and login end by then (0: none running) */
	bool fail_fast;             /* down for longer than replacement_timeout_ms */
	bool retry_now;             /* iscsi_session_retry_now: the back-off wait ends at once */
	int64_t lost_ms;            /* when the connection was lost (0: up) */
	int lost_err;               /* why */
	const char *lost_reason;    /* or this (drop_reason at the loss), when set */
	unsigned reissued;          /* commands re-issued by the recovery in progress */
	/*
	 * cfg.verify runs on the recovery thread (state SS_UP): only its
	 * commands are sent, every other one parks; the tick drops the
	 * connection at verify_by_ms (or the stop grace) if it has not ended.
	 */
	bool verifying;
	int64_t verify_by_ms;
	bool fenced;                /* cfg.verify found another device: iscsi_session_submit fails with -EIO */
	unsigned fence_gen;         /* times fenced: iscsi_session_reverify lifts only the fence it checked */
	uint64_t next_seq;
	struct task **sorted;       /* ntasks pointers: re-issue order (allocation set at open) */

	uint32_t cmdsn, expcmdsn, maxcmdsn, expstatsn; /* §4.2.2.1, §4.2.2.2 */

	struct task *tasks;         /* ntasks slots, allocated at open; their fields: lock */
	unsigned ntasks;            /* set at open, then read-only */
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
		bool busy;              /* handed to the transport, no tx_done yet (lock) */
		uint8_t data[NOP_DATA_MAX]; /* written with the lock held while !busy; read by the transport while busy */
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
	bool multipath;             /* iscsi_session_join_multipath: path event lines at debug level */
	int64_t reconnect_delay_ms; /* Time2Wait the target asked for before we reconnect */
	uint32_t logout_itt;

	struct iscsi_session_stats stats; /* tx_kicks: see tx_kicks below */
	_Atomic uint64_t tx_kicks;  /* kicks by submitters (relaxed; some are counted without the lock) */
	/*
	 * Submitters inside try_send on s->t (no lock: taken with the lock
	 * held while s->t is read, dropped after the call).  Whoever takes s->t
	 * away waits for 0 (sess_wait_direct) before destroying it.
	 */
	_Atomic unsigned direct_senders;
	/*
	 * Completions taken by sess_task_finish whose callback has not
	 * returned yet: drain and close wait for these too (a callback
	 * replies to the caller, whose own channel may close once drained).
	 * The last one out broadcasts state_cv under the lock when a drain or
	 * close waits (drain_waiters).  Both sequentially consistent: either
	 * the waiter sees the count at 0 or the last one out sees the waiter.
	 */
	_Atomic unsigned callbacks_running;
	_Atomic unsigned drain_waiters;
	struct lat_hist lat;        /* submission to completion of commands that got an answer: lock-free (atomics) */
};

/*
 * A task's completion, taken by sess_task_finish with the lock held and
 * run by sess_run_completion after it is dropped: the slot is free before
 * the callback runs, so a callback may submit the next command
 * (read-modify-write, retries).  cb NULL: nothing to run.
 */
struct completion {
	iscsi_cmd_cb cb;
	void *arg;
	struct iscsi_cmd_result res;
};

/*
 * The stop grace ended (iscsi_session_stopping): commands still pending
 * fail and new ones are refused, whatever the connection's state.  Lock
 * held.
 */
static inline bool sess_grace_over(const struct iscsi_session *s, int64_t now)
{
	return s->stop_by_ms && now >= s->stop_by_ms;
}

/*
 * The target answered a command on a live connection: while stopping, the
 * grace counts from this answer, so a target that keeps answering (a long
 * write-back) is not cut, and one that goes silent is, stop_grace_ms after
 * its last answer.  Lock held; event thread.
 */
static inline void sess_stop_progress(struct iscsi_session *s)
{
	if (!s->stop_by_ms || !s->stop_grace_ms || s->grace_dropped)
		return;
	int64_t by = clk_now_ms() + s->stop_grace_ms;
	if (by > s->stop_by_ms)
		s->stop_by_ms = by;
}

/* ---- session.c ---- */

/* The hooks the session hands to transport->start (transport.h). */
extern const struct iscsi_transport_hooks sess_hooks;

/* ---- session_task.c: task table and queues; lock held unless noted ---- */

/* Append t to the tx queue (no-op when already queued). */
void sess_txq_push(struct iscsi_session *s, struct task *t);
/* Take the head of the tx queue; NULL when empty. */
struct task *sess_txq_pop(struct iscsi_session *s);
/* Take t out of the tx queue wherever it is (O(queue length)). */
void sess_txq_remove(struct iscsi_session *s, struct task *t);
/* Append t to the queue of commands waiting for the CmdSN window (RFC 7143 §4.2.2.1). */
void sess_winq_push(struct iscsi_session *s, struct task *t);
/* Give t the ITT of its current generation, wrapping below the reserved ones (ITT_GEN_TMF..). */
void sess_task_assign_itt(struct task *t);
/* Move window-queue commands to the tx queue with CmdSNs while CmdSN <= MaxCmdSN (§4.2.2.1); true if any moved. */
bool sess_window_admit(struct iscsi_session *s);
/* The outstanding, sent, not yet answered task with this ITT; NULL for any other ITT (the reserved tag included). */
struct task *sess_task_lookup(struct iscsi_session *s, uint32_t itt);
/*
 * End t with c->res: free its slot and fill c for sess_run_completion; or,
 * while the transport still sends from its buffer (tx_pending), defer to
 * sess_hook_tx_done (c->cb NULL).
 */
void sess_task_finish(struct iscsi_session *s, struct task *t, struct completion *c);
/* Forget t's per-connection state (CmdSN, Data-Out/Data-In progress, R2Ts): it is sent again from scratch. */
void sess_task_reset(struct task *t);
/*
 * Run c's callback, lock NOT held; callbacks it runs may submit without
 * waiting for a slot.  Then it is no longer one of s->callbacks_running.
 */
void sess_run_completion(struct iscsi_session *s, struct completion *c);
/*
 * Complete every in-use task pick selects with err (a doomed or answered
 * one with its deferred_res), one at a time, dropping the lock around each
 * callback; returns with it held.  Returns how many were completed; a
 * task whose PDUs the live transport still sends from the buffer is
 * finished by sess_hook_tx_done instead (deferred_res), not counted.
 */
unsigned sess_complete_tasks(struct iscsi_session *s, bool (*pick)(const struct task *), int err);
/* Pickers for sess_complete_tasks: every task; the doomed ones. */
bool sess_pick_any(const struct task *t);
bool sess_pick_doomed(const struct task *t);
/* Take every task pick selects out of the window queue (they then sit in no queue). */
void sess_winq_drop(struct iscsi_session *s, bool (*pick)(const struct task *));

/* Enter or leave a completion callback's context on this thread (iscsi_session_in_callback). */
void sess_callback_enter(void);
void sess_callback_leave(void);

/* ---- session_guest.c: the event thread's guest (transport.h) ---- */

int sess_hook_guest_fd(void *arg);
void sess_hook_guest_run(void *arg);
void sess_hook_guest_live(void *arg, bool live);

/* ---- session_tx.c: transport hooks on the event thread (take the lock) ---- */

/* Set on a submitter's thread around try_send: its tx_fill counts tx_direct and is not the event thread. */
extern _Thread_local bool sess_tx_direct;
/* Wait until no submitter is inside try_send (after s->t was taken away or closing was set).  Lock NOT held. */
void sess_wait_direct(struct iscsi_session *s);

/* Start t's next queued solicited burst (R2T, §11.8) unless one is being sent.  Lock held. */
void sess_next_r2t(struct task *t);
/* tx_fill hook: up to max (<= ISCSI_TX_BATCH_MAX) PDUs; returns how many. */
int sess_hook_tx_fill(void *arg, struct iscsi_tx_slot *slots, int max);
/* tx_idle hook: !tx_any. */
bool sess_hook_tx_idle(void *arg);
/* Something was queued for tx_fill (lock held): sets tx_any. */
void sess_tx_want(struct iscsi_session *s);
/* tx_done hook: n (<= ISCSI_TX_BATCH_MAX) slots written; completes tasks that waited for them. */
void sess_hook_tx_done(void *arg, const struct iscsi_tx_slot *slots, int n);

/* ---- session_rx.c: transport hooks on the event thread (take the lock) ---- */

/* rx_data_dest hook: where a Data-In's data goes (§11.7); -EPROTO for an unknown ITT or a bad offset. */
int sess_hook_rx_data_dest(void *arg, const uint8_t *bhs, void **dest);
/* rx_pdu hook: one target PDU (§11); 0, or a negative errno that drops the connection. */
int sess_hook_rx_pdu(void *arg, const uint8_t *bhs, const uint8_t *data, uint32_t dlen);
/* task_owns hook: whether ITT itt is outstanding with its buffer at buf, at least len bytes. */
bool sess_hook_task_owns(void *arg, uint32_t itt, const void *buf, uint32_t len);

/*
 * How long after a loss pending commands wait for the session to come
 * back, in ms: 0 when they are handed back (cfg.hand_back), else the
 * replacement timeout.  Lock held.
 */
static inline int64_t sess_replacement_ms(const struct iscsi_session *s)
{
	return s->cfg.hand_back ? 0 : s->cfg.replacement_timeout_ms;
}

/* The level of a line about a loss or reinstatement: debug in a multipath set (its layer logs the event).  Lock held. */
static inline enum log_level sess_path_level(const struct iscsi_session *s, enum log_level level)
{
	return s->multipath ? LOG_LVL_DEBUG : level;
}

/* ---- session_timer.c ---- */

/* tick hook (now: CLOCK_MONOTONIC ms): deadlines and keep-alive; -ETIMEDOUT drops the connection. */
int sess_hook_tick(void *arg, int64_t now);

/* ---- session_recovery.c ---- */

/*
 * Send t, which the target no longer has (ABORT TASK, LU RESET, a Reject
 * that allows it), again on this connection with a fresh ITT and CmdSN;
 * after ISCSI_REISSUE_MAX re-issues mark it doomed (-EIO) and return true
 * (the caller then runs sess_complete_tasks(sess_pick_doomed)).  Lock held.
 */
bool sess_reissue_now(struct iscsi_session *s, struct task *t);
/* conn_lost hook: err < 0 parks the commands for recovery (RFC 7143 §6.3.5); 0 (shutdown) fails them. */
void sess_hook_conn_lost(void *arg, int err);
/* The recovery thread (pthread start routine, arg the session): reconnects while SS_DOWN, ends when closing. */
void *sess_recovery_thread(void *arg);

/* ---- session_connect.c: opener or recovery thread, never an event thread ---- */

/* Wipe the session's copy of the CHAP credentials (RFC 7143 §12.1.3). */
void sess_wipe_creds(struct iscsi_session *s);
/*
 * Connect and log in with the session's ISID, TSIH 0 (§6.3.5), within
 * timeout_ms per step and by deadline_ms (CLOCK_MONOTONIC ms, 0: timeout_ms
 * from now), following up to 4 redirections (§11.13.5).  0 with the
 * connected, not started transport in *out (owned by the caller), or a
 * negative errno with a reason in err and the login status in *lr.  Lock
 * NOT held.
 */
int sess_connect_login(struct iscsi_session *s, int timeout_ms, int64_t deadline_ms, struct iscsi_transport **out,
		       struct iscsi_login_result *lr, char *err, size_t err_cap);
/* The target was busy at login (status 0x0301 or 0x0302, §11.13.5): worth another try. */
bool sess_login_busy(const struct iscsi_login_result *lr);
/* Take t (owned by the session from now on) and the login's sequence numbers and parameters.  Lock held. */
void sess_adopt_login(struct iscsi_session *s, struct iscsi_transport *t, const struct iscsi_login_result *lr);

#endif
