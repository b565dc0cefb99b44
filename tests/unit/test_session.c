/* SPDX-License-Identifier: MIT */
/*
 * Session recovery (RFC 7143 §6.3.5, ERL 0) against a scripted transport:
 * each connection logs in at once, then its event thread takes the
 * commands the session sends and, as the test says, answers them GOOD or
 * drops the connection after the Nth.  Checks what reached each
 * "connection": commands re-issued in their original order with fresh
 * ITTs and consecutive new CmdSNs, callbacks exactly once, the re-issue
 * cap, the replacement timeout (counted from a command's first loss),
 * iscsi_session_close during recovery, the command timeout's ABORT TASK /
 * LOGICAL UNIT RESET escalation, and the stop failing synchronous commands.
 * Real targets are exercised by the recovery suite.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "initiator/util/clock.h"
#include "initiator/session/session.h"

#define MAX_CONNS 16
#define MAX_SEEN 256

struct seen {
	int conn;
	uint32_t itt, cmdsn;
	uint8_t marker; /* cdb[1] */
};

/* What the scripted target does; shared by every connection of a test. */
struct world {
	pthread_mutex_t m;
	int refuse;                /* connects to refuse from now on (-1: all) */
	int conns;                 /* connections made */
	int drop_after[MAX_CONNS]; /* per connection: drop after receiving N commands (0: never) */
	bool answer[MAX_CONNS];    /* per connection: answer commands GOOD */
	bool ignore_first[MAX_CONNS]; /* per connection: leave its first command unanswered */
	int tmf_response;          /* Task Management Response code to send; -1: none */
	uint8_t tmf_seen[8];       /* functions of the TMF requests received */
	int ntmf;
	int drop_default;          /* for connections past the arrays */
	bool manual;               /* start() runs no thread: the test drives the hooks itself */
	struct fconn *manual_conn; /* the connection last started so */
	struct seen seen[MAX_SEEN];
	int nseen;
};

struct fconn {
	struct iscsi_transport base;
	struct world *w;
	int index;
	uint32_t login_itt;
	int login_step;
	const struct iscsi_transport_hooks *hooks;
	void *sess;
	pthread_t thread;
	bool started;
	pthread_mutex_t m;
	pthread_cond_t cv;
	bool kicked, stop;
	bool aborted;              /* the abort op was called: the thread drops the connection (-ENETDOWN) */
};

static const struct iscsi_transport_ops fake_ops;

static int f_connect(struct iscsi_transport **out, void *ctx, const char *host, unsigned port, int timeout_ms,
		     char *err, size_t err_cap)
{
	struct world *w = ctx;
	(void)host;
	(void)port;
	(void)timeout_ms;
	pthread_mutex_lock(&w->m);
	if (w->refuse) {
		if (w->refuse > 0)
			w->refuse--;
		pthread_mutex_unlock(&w->m);
		snprintf(err, err_cap, "refused");
		return -ECONNREFUSED;
	}
	struct fconn *c = calloc(1, sizeof(*c));
	c->base.ops = &fake_ops;
	c->w = w;
	c->index = w->conns++;
	pthread_mutex_unlock(&w->m);
	pthread_mutex_init(&c->m, NULL);
	cr_assert_eq(clk_cond_init(&c->cv), 0);
	*out = &c->base;
	return 0;
}

static int f_send(struct iscsi_transport *t, const uint8_t *bhs, const void *data, uint32_t dlen, int timeout_ms)
{
	struct fconn *c = (struct fconn *)t;
	(void)data;
	(void)dlen;
	(void)timeout_ms;
	c->login_itt = iscsi_wire_itt(bhs);
	return 0;
}

/* Security stage (AuthMethod=None), then operational straight to full feature. */
static int f_recv(struct iscsi_transport *t, uint8_t *bhs, void *data, uint32_t cap, uint32_t *dlen, int timeout_ms)
{
	static const char sec[] = "AuthMethod=None";
	static const char op[] = "HeaderDigest=None\0DataDigest=None";
	struct fconn *c = (struct fconn *)t;
	(void)timeout_ms;
	struct iscsi_bhs h = {0};
	h.opcode = ISCSI_OP_LOGIN_RSP;
	h.itt = c->login_itt;
	h.u.login.transit = true;
	h.u.login.csg = c->login_step == 0 ? 0 : 1;
	h.u.login.nsg = c->login_step == 0 ? 1 : 3;
	h.u.login.tsih = 0x4000 + c->index;
	h.u.login.statsn = 500;
	h.u.login.expcmdsn = 1000 * (uint32_t)(c->index + 1);
	h.u.login.maxcmdsn = h.u.login.expcmdsn + 63;
	const char *text = c->login_step == 0 ? sec : op;
	uint32_t len = c->login_step == 0 ? sizeof(sec) : sizeof(op);
	c->login_step++;
	h.dlen = len;
	cr_assert_leq(len, cap);
	memcpy(data, text, len);
	*dlen = len;
	return iscsi_bhs_encode(&h, bhs);
}

static void *f_thread(void *arg)
{
	struct fconn *c = arg;
	struct world *w = c->w;
	struct iscsi_tx_slot slots[32];
	uint32_t statsn = 500, got = 0;
	int err = 0;
	pthread_mutex_lock(&w->m);
	int drop = c->index < MAX_CONNS ? w->drop_after[c->index] : w->drop_default;
	bool answer = c->index < MAX_CONNS && w->answer[c->index];
	bool ignore_first = c->index < MAX_CONNS && w->ignore_first[c->index];
	int tmf_response = w->tmf_response;
	pthread_mutex_unlock(&w->m);
	int64_t next_tick = iscsi_now_ms() + 100;
	for (;;) {
		pthread_mutex_lock(&c->m);
		bool stop = c->stop, aborted = c->aborted;
		c->kicked = false;
		pthread_mutex_unlock(&c->m);
		if (stop)
			break;
		if (aborted) {
			err = -ENETDOWN;
			break;
		}
		if (iscsi_now_ms() >= next_tick) {
			next_tick = iscsi_now_ms() + 100;
			if ((err = c->hooks->tick(c->sess, iscsi_now_ms())))
				break;
		}
		int n = c->hooks->tx_fill(c->sess, slots, 32);
		if (n > 0)
			c->hooks->tx_done(c->sess, slots, n);
		for (int i = 0; i < n && !err; i++) {
			struct iscsi_bhs h;
			cr_assert_eq(iscsi_bhs_decode(slots[i].bhs, &h), 0);
			if (h.opcode == ISCSI_OP_LOGOUT_REQ) {
				struct iscsi_bhs r = {0};
				uint8_t out[ISCSI_BHS_LEN];
				r.opcode = ISCSI_OP_LOGOUT_RSP;
				r.final = true;
				r.itt = h.itt;
				r.u.logout.statsn = statsn++;
				r.u.logout.expcmdsn = h.u.logout.cmdsn;
				r.u.logout.maxcmdsn = h.u.logout.cmdsn + 63;
				cr_assert_eq(iscsi_bhs_encode(&r, out), 0);
				err = c->hooks->rx_pdu(c->sess, out, NULL, 0);
				continue;
			}
			if (h.opcode == ISCSI_OP_TASK_MGMT_REQ) {
				pthread_mutex_lock(&w->m);
				if (w->ntmf < 8)
					w->tmf_seen[w->ntmf++] = h.u.tmf_req.function;
				pthread_mutex_unlock(&w->m);
				if (tmf_response < 0)
					continue;
				struct iscsi_bhs r = {0};
				uint8_t out[ISCSI_BHS_LEN];
				r.opcode = ISCSI_OP_TASK_MGMT_RSP;
				r.final = true;
				r.itt = h.itt;
				r.u.tmf_rsp.response = (uint8_t)tmf_response;
				r.u.tmf_rsp.statsn = statsn++;
				r.u.tmf_rsp.expcmdsn = h.u.tmf_req.cmdsn;
				r.u.tmf_rsp.maxcmdsn = h.u.tmf_req.cmdsn + 63;
				cr_assert_eq(iscsi_bhs_encode(&r, out), 0);
				err = c->hooks->rx_pdu(c->sess, out, NULL, 0);
				continue;
			}
			if (h.opcode != ISCSI_OP_SCSI_CMD)
				continue;
			pthread_mutex_lock(&w->m);
			cr_assert_lt(w->nseen, MAX_SEEN);
			w->seen[w->nseen++] = (struct seen){c->index, h.itt, h.u.cmd.cmdsn, h.u.cmd.cdb[1]};
			pthread_mutex_unlock(&w->m);
			if (++got >= (uint32_t)drop && drop) {
				err = -ECONNRESET;
				break;
			}
			if (answer && ignore_first && got == 1)
				continue;
			if (answer) {
				struct iscsi_bhs r = {0};
				uint8_t out[ISCSI_BHS_LEN];
				r.opcode = ISCSI_OP_SCSI_RSP;
				r.final = true;
				r.itt = h.itt;
				r.u.rsp.statsn = statsn++;
				r.u.rsp.expcmdsn = h.u.cmd.cmdsn + 1;
				r.u.rsp.maxcmdsn = h.u.cmd.cmdsn + 64;
				cr_assert_eq(iscsi_bhs_encode(&r, out), 0);
				if ((err = c->hooks->rx_pdu(c->sess, out, NULL, 0)))
					break;
			}
		}
		if (err)
			break;
		if (n == 0) {
			pthread_mutex_lock(&c->m);
			if (!c->kicked && !c->stop) {
				struct timespec ts = clk_deadline_ms(20);
				pthread_cond_timedwait(&c->cv, &c->m, &ts);
			}
			pthread_mutex_unlock(&c->m);
		}
	}
	pthread_mutex_lock(&c->m);
	bool stopped = c->stop;
	pthread_mutex_unlock(&c->m);
	c->hooks->conn_lost(c->sess, stopped ? 0 : err);
	return NULL;
}

static int f_start(struct iscsi_transport *t, const struct iscsi_transport_hooks *hooks, void *sess,
		   const struct iscsi_params *params)
{
	struct fconn *c = (struct fconn *)t;
	(void)params;
	c->hooks = hooks;
	c->sess = sess;
	if (c->w->manual) {
		c->w->manual_conn = c;
		return 0;
	}
	c->started = pthread_create(&c->thread, NULL, f_thread, c) == 0;
	return c->started ? 0 : -EAGAIN;
}

static void f_kick(struct iscsi_transport *t)
{
	struct fconn *c = (struct fconn *)t;
	pthread_mutex_lock(&c->m);
	c->kicked = true;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->m);
}

static void f_abort(struct iscsi_transport *t)
{
	struct fconn *c = (struct fconn *)t;
	pthread_mutex_lock(&c->m);
	c->aborted = true;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->m);
}

static void f_shutdown(struct iscsi_transport *t)
{
	struct fconn *c = (struct fconn *)t;
	if (!c->started)
		return;
	pthread_mutex_lock(&c->m);
	c->stop = true;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->m);
	if (pthread_equal(c->thread, pthread_self()))
		pthread_detach(c->thread);
	else
		pthread_join(c->thread, NULL);
	c->started = false;
}

static void f_destroy(struct iscsi_transport *t)
{
	struct fconn *c = (struct fconn *)t;
	pthread_mutex_destroy(&c->m);
	pthread_cond_destroy(&c->cv);
	free(c);
}

static const struct iscsi_transport_ops fake_ops = {
	.name = "scripted",
	.connect = f_connect,
	.send_pdu = f_send,
	.recv_pdu = f_recv,
	.start = f_start,
	.kick = f_kick,
	.abort = f_abort,
	.shutdown = f_shutdown,
	.destroy = f_destroy,
};

/* ---- completions ---- */

struct done {
	pthread_mutex_t m;
	int calls[64];
	int err[64];
};

static struct done done = {.m = PTHREAD_MUTEX_INITIALIZER};

static void on_done(void *arg, const struct iscsi_cmd_result *res)
{
	int i = (int)(intptr_t)arg;
	pthread_mutex_lock(&done.m);
	done.calls[i]++;
	done.err[i] = iscsi_cmd_result_errno(res);
	pthread_mutex_unlock(&done.m);
}

static int calls(int i)
{
	pthread_mutex_lock(&done.m);
	int n = done.calls[i];
	pthread_mutex_unlock(&done.m);
	return n;
}

/* Wait up to 5 s for commands 0..n-1 to have completed. */
static bool wait_done(int n)
{
	for (int tries = 0; tries < 500; tries++) {
		int k = 0;
		for (int i = 0; i < n; i++)
			k += calls(i) > 0;
		if (k == n)
			return true;
		usleep(10000);
	}
	return false;
}

static struct iscsi_session_config config(struct world *w, int replacement_ms)
{
	struct iscsi_session_config c = {0};
	c.transport = &fake_ops;
	c.transport_ctx = w;
	strcpy(c.host, "192.0.2.1");
	c.port = 3260;
	strcpy(c.initiator_name, "iqn.2026-11.org.example:init");
	strcpy(c.target_name, "iqn.2026-11.org.example:disk");
	iscsi_neg_config_default(&c.neg);
	c.queue_depth = 16;
	c.timeout_ms = 1000;
	c.replacement_timeout_ms = replacement_ms;
	return c;
}

static int submit(struct iscsi_session *s, int i)
{
	struct iscsi_cmd cmd = {0};
	cmd.cdb[0] = 0x00; /* TEST UNIT READY */
	cmd.cdb[1] = (uint8_t)i;
	cmd.cdb_len = 6;
	cmd.dir = ISCSI_DIR_NONE;
	cmd.cb = on_done;
	cmd.arg = (void *)(intptr_t)i;
	return iscsi_session_submit(s, &cmd);
}

static void init_world(struct world *w)
{
	memset(w, 0, sizeof(*w));
	pthread_mutex_init(&w->m, NULL);
	memset(&done.calls, 0, sizeof(done.calls));
	memset(&done.err, 0, sizeof(done.err));
}

Test(session, reissued_in_order_with_fresh_itts_and_cmdsns)
{
	struct world w;
	init_world(&w);
	w.drop_after[0] = 8; /* connection 0 takes 8 commands, answers none, drops */
	w.answer[1] = true;
	struct iscsi_session_config cfg = config(&w, 10000);
	struct iscsi_session *s = NULL;
	char err[256] = "";
	cr_assert_eq(iscsi_session_open(&cfg, &s, err, sizeof(err)), 0, "%s", err);
	for (int i = 0; i < 8; i++)
		cr_assert_eq(submit(s, i), 0);
	cr_assert(wait_done(8), "the commands complete after the reinstatement");
	for (int i = 0; i < 8; i++) {
		cr_assert_eq(calls(i), 1, "command %d completed %d times", i, calls(i));
		cr_assert_eq(done.err[i], 0);
	}
	struct iscsi_session_stats st;
	iscsi_session_get_stats(s, &st);
	cr_assert_eq(st.reconnects, 1);
	pthread_mutex_lock(&w.m);
	cr_assert_eq(w.nseen, 16, "8 on the first connection, 8 re-issued (%d)", w.nseen);
	for (int i = 0; i < 8; i++) {
		const struct seen *a = &w.seen[i], *b = &w.seen[8 + i];
		cr_assert_eq(a->conn, 0);
		cr_assert_eq(b->conn, 1);
		cr_assert_eq(a->marker, i);
		cr_assert_eq(b->marker, i, "re-issued in the original order");
		cr_assert_eq(a->cmdsn, 1000 + (uint32_t)i);
		cr_assert_eq(b->cmdsn, 2000 + (uint32_t)i, "new CmdSNs from the new login");
		cr_assert_neq(a->itt, b->itt, "a fresh ITT");
	}
	pthread_mutex_unlock(&w.m);
	iscsi_session_close(s, 1000);
}

Test(session, reissue_cap_then_eio)
{
	struct world w;
	init_world(&w);
	for (int i = 0; i < MAX_CONNS; i++)
		w.drop_after[i] = 1; /* every connection drops on the first command */
	w.drop_default = 1;
	struct iscsi_session_config cfg = config(&w, 10000);
	struct iscsi_session *s = NULL;
	char err[256] = "";
	cr_assert_eq(iscsi_session_open(&cfg, &s, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(submit(s, 0), 0);
	cr_assert(wait_done(1));
	cr_assert_eq(calls(0), 1);
	cr_assert_eq(done.err[0], -EIO);
	pthread_mutex_lock(&w.m);
	cr_assert_eq(w.nseen, 1 + ISCSI_REISSUE_MAX, "sent once and re-issued %d times (%d)", ISCSI_REISSUE_MAX,
		     w.nseen);
	pthread_mutex_unlock(&w.m);
	iscsi_session_close(s, 1000);
}

Test(session, replacement_timeout_fails_pending_then_io_works_again)
{
	struct world w;
	init_world(&w);
	w.drop_after[0] = 2;
	w.answer[1] = true;
	struct iscsi_session_config cfg = config(&w, 300);
	struct iscsi_session *s = NULL;
	char err[256] = "";
	cr_assert_eq(iscsi_session_open(&cfg, &s, err, sizeof(err)), 0, "%s", err);
	pthread_mutex_lock(&w.m);
	w.refuse = -1; /* the target is gone */
	pthread_mutex_unlock(&w.m);
	cr_assert_eq(submit(s, 0), 0);
	cr_assert_eq(submit(s, 1), 0);
	cr_assert(wait_done(2));
	cr_assert_eq(done.err[0], -ETIMEDOUT);
	cr_assert_eq(done.err[1], -ETIMEDOUT);
	cr_assert_eq(submit(s, 2), -ENOTCONN, "new I/O fails fast while the session is down");
	pthread_mutex_lock(&w.m);
	w.refuse = 0; /* back */
	pthread_mutex_unlock(&w.m);
	int rc = -ENOTCONN;
	for (int tries = 0; tries < 500 && rc == -ENOTCONN; tries++) {
		rc = submit(s, 3);
		if (rc)
			usleep(10000);
	}
	cr_assert_eq(rc, 0, "I/O works again once the target is back");
	for (int tries = 0; tries < 500 && calls(3) == 0; tries++)
		usleep(10000);
	cr_assert_eq(calls(3), 1);
	cr_assert_eq(done.err[3], 0);
	cr_assert_eq(calls(2), 0, "a refused submission gets no callback");
	iscsi_session_close(s, 1000);
}

Test(session, close_during_recovery)
{
	struct world w;
	init_world(&w);
	w.drop_after[0] = 3;
	struct iscsi_session_config cfg = config(&w, 60000);
	struct iscsi_session *s = NULL;
	char err[256] = "";
	cr_assert_eq(iscsi_session_open(&cfg, &s, err, sizeof(err)), 0, "%s", err);
	pthread_mutex_lock(&w.m);
	w.refuse = -1;
	pthread_mutex_unlock(&w.m);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(submit(s, i), 0);
	usleep(200000); /* lost, parked, reconnecting in vain */
	for (int i = 0; i < 3; i++)
		cr_assert_eq(calls(i), 0, "nothing completes before the replacement timeout");
	iscsi_session_close(s, 100);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(calls(i), 1, "closing completes each parked command once");
		cr_assert_eq(done.err[i], -ECONNABORTED);
	}
}

Test(session, abort_task_reissues_on_the_same_connection)
{
	struct world w;
	init_world(&w);
	w.answer[0] = true;
	w.ignore_first[0] = true; /* the first command is lost at the target */
	w.tmf_response = 0;       /* function complete */
	struct iscsi_session_config cfg = config(&w, 10000);
	cfg.cmd_timeout_ms = 300;
	struct iscsi_session *s = NULL;
	char err[256] = "";
	cr_assert_eq(iscsi_session_open(&cfg, &s, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(submit(s, 0), 0);
	cr_assert(wait_done(1));
	cr_assert_eq(calls(0), 1);
	cr_assert_eq(done.err[0], 0);
	struct iscsi_session_stats st;
	iscsi_session_get_stats(s, &st);
	cr_assert_eq(st.reconnects, 0, "no reconnection");
	pthread_mutex_lock(&w.m);
	cr_assert_eq(w.ntmf, 1);
	cr_assert_eq(w.tmf_seen[0], ISCSI_TMF_ABORT_TASK);
	cr_assert_eq(w.nseen, 2);
	cr_assert_eq(w.seen[1].conn, 0);
	cr_assert_neq(w.seen[0].itt, w.seen[1].itt, "re-issued with a fresh ITT");
	cr_assert_eq(w.seen[1].cmdsn, w.seen[0].cmdsn + 1, "and a new CmdSN");
	pthread_mutex_unlock(&w.m);
	iscsi_session_close(s, 1000);
}

Test(session, unanswered_task_management_escalates_to_a_reconnect)
{
	struct world w;
	init_world(&w);
	w.tmf_response = -1; /* connection 0 answers nothing at all */
	w.answer[1] = true;
	struct iscsi_session_config cfg = config(&w, 30000);
	cfg.cmd_timeout_ms = 300;
	struct iscsi_session *s = NULL;
	char err[256] = "";
	cr_assert_eq(iscsi_session_open(&cfg, &s, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(submit(s, 0), 0);
	for (int tries = 0; tries < 1000 && calls(0) == 0; tries++)
		usleep(10000); /* ABORT TASK 2 s, LOGICAL UNIT RESET 2 s, then the drop */
	cr_assert_eq(calls(0), 1);
	cr_assert_eq(done.err[0], 0);
	struct iscsi_session_stats st;
	iscsi_session_get_stats(s, &st);
	cr_assert_eq(st.reconnects, 1);
	pthread_mutex_lock(&w.m);
	cr_assert_eq(w.ntmf, 2);
	cr_assert_eq(w.tmf_seen[0], ISCSI_TMF_ABORT_TASK);
	cr_assert_eq(w.tmf_seen[1], ISCSI_TMF_LUN_RESET);
	cr_assert_eq(w.nseen, 2);
	cr_assert_eq(w.seen[1].conn, 1, "re-issued on the new connection");
	pthread_mutex_unlock(&w.m);
	iscsi_session_close(s, 1000);
}

/* A NOP-In ping (§11.19) with TTT ttt and 64 bytes of `fill`, as the target sends it. */
static void nop_in_ping(struct fconn *c, uint32_t ttt, uint8_t fill)
{
	struct iscsi_bhs h = {0};
	uint8_t out[ISCSI_BHS_LEN], data[64];
	memset(data, fill, sizeof(data));
	h.opcode = ISCSI_OP_NOP_IN;
	h.final = true;
	h.itt = ISCSI_RESERVED_TAG;
	h.dlen = sizeof(data);
	h.u.nop.ttt = ttt;
	h.u.nop.statsn = 500;
	h.u.nop.expcmdsn = 1000;
	h.u.nop.maxcmdsn = 1063;
	cr_assert_eq(iscsi_bhs_encode(&h, out), 0);
	cr_assert_eq(c->hooks->rx_pdu(c->sess, out, data, sizeof(data)), 0);
}

/* The one NOP-Out in slots[0..n-1]: answers ttt and echoes 64 bytes of `fill`. */
static void assert_echo(const struct iscsi_tx_slot *slots, int n, uint32_t ttt, uint8_t fill)
{
	uint8_t want[64];
	struct iscsi_bhs h;
	memset(want, fill, sizeof(want));
	cr_assert_eq(n, 1);
	cr_assert_eq(iscsi_bhs_decode(slots[0].bhs, &h), 0);
	cr_assert_eq(h.opcode, ISCSI_OP_NOP_OUT);
	cr_assert_eq(h.u.nop.ttt, ttt);
	cr_assert_eq(slots[0].dlen, 64);
	cr_assert_eq(memcmp(slots[0].data, want, 64), 0, "the NOP-Out for TTT 0x%x does not echo '%c'", ttt, fill);
}

/* A session on a fake connection driven by the test (tx_fill/tx_done by hand); the connection. */
static struct fconn *open_manual(struct world *w, struct iscsi_session **s)
{
	init_world(w);
	w->manual = true;
	struct iscsi_session_config cfg = config(w, 1000);
	char err[256];
	cr_assert_eq(iscsi_session_open(&cfg, s, err, sizeof(err)), 0, "%s", err);
	cr_assert_not_null(w->manual_conn);
	return w->manual_conn;
}

Test(session, nop_in_echo_never_changes_a_buffer_being_sent)
{
	struct world w;
	struct iscsi_session *s;
	struct fconn *c = open_manual(&w, &s);
	struct iscsi_tx_slot b1[8] = {0}, b2[8] = {0}, b3[8] = {0};

	nop_in_ping(c, 0x10, 'A');
	int n1 = c->hooks->tx_fill(c->sess, b1, 8);
	assert_echo(b1, n1, 0x10, 'A');
	/* While that NOP-Out is still being written, two more pings arrive: the later one replaces the first. */
	nop_in_ping(c, 0x11, 'B');
	nop_in_ping(c, 0x12, 'C');
	assert_echo(b1, n1, 0x10, 'A');
	c->hooks->tx_done(c->sess, b1, n1);
	int n2 = c->hooks->tx_fill(c->sess, b2, 8);
	assert_echo(b2, n2, 0x12, 'C');
	cr_assert_neq(b2[0].data, b1[0].data);
	/* The first buffer is free again, the second is being sent. */
	nop_in_ping(c, 0x13, 'D');
	assert_echo(b2, n2, 0x12, 'C');
	c->hooks->tx_done(c->sess, b2, n2);
	int n3 = c->hooks->tx_fill(c->sess, b3, 8);
	assert_echo(b3, n3, 0x13, 'D');
	c->hooks->tx_done(c->sess, b3, n3);
	iscsi_session_close(s, 0);
}

/* The ITT of the one SCSI Command in slots[0..n-1]. */
static uint32_t command_itt(const struct iscsi_tx_slot *slots, int n)
{
	struct iscsi_bhs h;
	cr_assert_eq(n, 1);
	cr_assert_eq(iscsi_bhs_decode(slots[0].bhs, &h), 0);
	cr_assert_eq(h.opcode, ISCSI_OP_SCSI_CMD);
	return h.itt;
}

static int submit_read(struct iscsi_session *s, int i, void *buf, uint32_t len)
{
	struct iscsi_cmd cmd = {0};
	cmd.cdb[0] = 0x28; /* READ(10) */
	cmd.cdb[8] = 1;
	cmd.cdb_len = 10;
	cmd.dir = ISCSI_DIR_READ;
	cmd.buf = buf;
	cmd.len = len;
	cmd.cb = on_done;
	cmd.arg = (void *)(intptr_t)i;
	return iscsi_session_submit(s, &cmd);
}

Test(session, task_owns_its_buffer_only_while_outstanding)
{
	struct world w;
	struct iscsi_session *s;
	struct fconn *c = open_manual(&w, &s);
	cr_assert_not_null(c->hooks->task_owns);
	static uint8_t buf1[512], buf2[512];
	struct iscsi_tx_slot b[8] = {0};

	/* A command ended by a Reject (reason 0x09, invalid PDU field: not to be re-sent). */
	cr_assert_eq(submit_read(s, 0, buf1, sizeof(buf1)), 0);
	int n = c->hooks->tx_fill(c->sess, b, 8);
	uint32_t itt = command_itt(b, n);
	c->hooks->tx_done(c->sess, b, n);
	cr_assert(c->hooks->task_owns(c->sess, itt, buf1, sizeof(buf1)));
	cr_assert_not(c->hooks->task_owns(c->sess, itt, buf2, sizeof(buf2)), "another buffer");
	cr_assert_not(c->hooks->task_owns(c->sess, itt, buf1, sizeof(buf1) + 1), "more than the buffer");
	cr_assert_not(c->hooks->task_owns(c->sess, itt ^ 0x10000u, buf1, sizeof(buf1)), "another generation");
	struct iscsi_bhs r = {0};
	uint8_t out[ISCSI_BHS_LEN];
	r.opcode = ISCSI_OP_REJECT;
	r.final = true;
	r.itt = ISCSI_RESERVED_TAG;
	r.dlen = ISCSI_BHS_LEN;
	r.u.reject.reason = 0x09;
	r.u.reject.statsn = 500;
	r.u.reject.expcmdsn = 1001;
	r.u.reject.maxcmdsn = 1064;
	cr_assert_eq(iscsi_bhs_encode(&r, out), 0);
	cr_assert_eq(c->hooks->rx_pdu(c->sess, out, b[0].bhs, ISCSI_BHS_LEN), 0);
	cr_assert(wait_done(1));
	cr_assert_eq(done.err[0], -EIO);
	cr_assert_not(c->hooks->task_owns(c->sess, itt, buf1, sizeof(buf1)), "owned after its Reject");

	/* The next command may reuse the task and its ITT: it owns its own buffer, not the old one. */
	cr_assert_eq(submit_read(s, 1, buf2, sizeof(buf2)), 0);
	n = c->hooks->tx_fill(c->sess, b, 8);
	uint32_t itt2 = command_itt(b, n);
	c->hooks->tx_done(c->sess, b, n);
	cr_assert(c->hooks->task_owns(c->sess, itt2, buf2, sizeof(buf2)));
	cr_assert_not(c->hooks->task_owns(c->sess, itt2, buf1, sizeof(buf1)));
	iscsi_session_close(s, 0);
}

/* A Data-In that ends a READ with GOOD status (§11.7.2, S bit), its payload not placed by the transport. */
static int data_in_whole(struct fconn *c, uint32_t itt, uint32_t offset, const uint8_t *data, uint32_t dlen)
{
	struct iscsi_bhs h = {0};
	uint8_t out[ISCSI_BHS_LEN];
	h.opcode = ISCSI_OP_DATA_IN;
	h.final = true;
	h.itt = itt;
	h.dlen = dlen;
	h.u.data_in.status_present = true;
	h.u.data_in.ttt = ISCSI_RESERVED_TAG;
	h.u.data_in.statsn = 500;
	h.u.data_in.expcmdsn = 1001;
	h.u.data_in.maxcmdsn = 1064;
	h.u.data_in.offset = offset;
	cr_assert_eq(iscsi_bhs_encode(&h, out), 0);
	return c->hooks->rx_pdu(c->sess, out, data, dlen);
}

/*
 * A transport may hand a Data-In over whole, payload and all, instead of
 * placing it through rx_data_dest: the session checks its Buffer Offset
 * and length as rx_data_dest does and copies it into the READ's buffer.
 */
Test(session, data_in_handed_over_whole_is_checked_then_copied)
{
	struct world w;
	struct iscsi_session *s;
	struct fconn *c = open_manual(&w, &s);
	static uint8_t buf[512], payload[512];
	memset(payload, 0x5a, sizeof(payload));
	struct iscsi_tx_slot b[8] = {0};

	cr_assert_eq(submit_read(s, 0, buf, sizeof(buf)), 0);
	int n = c->hooks->tx_fill(c->sess, b, 8);
	uint32_t itt = command_itt(b, n);
	c->hooks->tx_done(c->sess, b, n);
	/* not where the READ's data starts, then past its end: refused, nothing copied */
	cr_assert_eq(data_in_whole(c, itt, 8, payload, 504), -EPROTO);
	cr_assert_eq(data_in_whole(c, itt, 0, payload, sizeof(payload) + 4), -EPROTO);
	for (size_t i = 0; i < sizeof(buf); i++)
		cr_assert_eq(buf[i], 0, "byte %zu written by a refused Data-In", i);
	cr_assert_eq(calls(0), 0);
	cr_assert_eq(data_in_whole(c, itt, 0, payload, sizeof(payload)), 0);
	cr_assert(wait_done(1));
	cr_assert_eq(done.err[0], 0);
	cr_assert_eq(memcmp(buf, payload, sizeof(buf)), 0, "the payload in the READ's buffer");
	iscsi_session_close(s, 0);
}

/* Process CPU time (all threads), in milliseconds. */
static int64_t cpu_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * The recovery thread's back-off between refused reconnects sleeps on its
 * condition variable: it waits with CLOCK_MONOTONIC deadlines, so a
 * condvar on the default clock (CLOCK_REALTIME) would see every deadline as
 * long past and spin the whole back-off.
 */
Test(session, recovery_back_off_sleeps)
{
	struct world w;
	init_world(&w);
	w.drop_after[0] = 1; /* the first command drops the connection */
	struct iscsi_session_config cfg = config(&w, 60000);
	struct iscsi_session *s = NULL;
	char err[256] = "";
	cr_assert_eq(iscsi_session_open(&cfg, &s, err, sizeof(err)), 0, "%s", err);
	pthread_mutex_lock(&w.m);
	w.refuse = -1; /* every reconnect is refused: recovery backs off (250 ms doubling to 1 s) */
	pthread_mutex_unlock(&w.m);
	cr_assert_eq(submit(s, 0), 0);
	usleep(100000); /* lost and parked */
	int64_t cpu0 = cpu_ms();
	int64_t wall0 = clk_now_ms();
	usleep(1000000);
	int64_t wall = clk_now_ms() - wall0;
	int64_t cpu = cpu_ms() - cpu0;
	pthread_mutex_lock(&w.m);
	int conns = w.conns;
	pthread_mutex_unlock(&w.m);
	cr_assert_eq(conns, 1, "no reconnect got through (%d connections)", conns);
	cr_assert_eq(calls(0), 0, "the command stays parked within the replacement timeout");
	cr_assert_lt(cpu, 150, "%lld ms of CPU over %lld ms of back-off: the recovery thread spins",
		     (long long)cpu, (long long)wall);
	iscsi_session_close(s, 100);
	cr_assert_eq(calls(0), 1);
	cr_assert_eq(done.err[0], -ECONNABORTED);
}

/* ---- the controls a multipath layer uses (session_path.c) ---- */

static struct {
	pthread_mutex_t m;
	int downs, ups;
} path_events = {.m = PTHREAD_MUTEX_INITIALIZER};

static void on_path_state(void *arg, bool up)
{
	(void)arg;
	pthread_mutex_lock(&path_events.m);
	if (up)
		path_events.ups++;
	else
		path_events.downs++;
	pthread_mutex_unlock(&path_events.m);
}

static int ups(void)
{
	pthread_mutex_lock(&path_events.m);
	int n = path_events.ups;
	pthread_mutex_unlock(&path_events.m);
	return n;
}

static int conns_made(struct world *w)
{
	pthread_mutex_lock(&w->m);
	int n = w->conns;
	pthread_mutex_unlock(&w->m);
	return n;
}

Test(session, drop_hands_commands_back_at_once_with_hand_back)
{
	struct world w;
	init_world(&w); /* commands are never answered: they stay in flight */
	struct iscsi_session_config cfg = config(&w, 60000);
	cfg.on_path_state = on_path_state;
	path_events.downs = path_events.ups = 0;
	struct iscsi_session *s = NULL;
	char err[256] = "";
	cr_assert_eq(iscsi_session_open(&cfg, &s, err, sizeof(err)), 0, "%s", err);
	cr_assert(iscsi_session_up(s));
	cr_assert_eq(submit(s, 0), 0);
	cr_assert_eq(submit(s, 1), 0);
	usleep(50000);
	iscsi_session_set_hand_back(s, true);
	int64_t t0 = clk_now_ms();
	iscsi_session_drop(s, "link down");
	cr_assert(wait_done(2), "the commands in flight were not handed back");
	int64_t took = clk_now_ms() - t0;
	cr_assert_lt(took, 500, "handed back after %lld ms", (long long)took);
	cr_assert_eq(done.err[0], -ETIMEDOUT);
	cr_assert_eq(done.err[1], -ETIMEDOUT);
	pthread_mutex_lock(&path_events.m);
	cr_assert_geq(path_events.downs, 1);
	pthread_mutex_unlock(&path_events.m);
	for (int i = 0; i < 200 && !ups(); i++) /* reinstated in the background */
		usleep(10000);
	cr_assert_eq(ups(), 1);
	cr_assert(iscsi_session_up(s));
	cr_assert_eq(conns_made(&w), 2);
	iscsi_session_close(s, 100);
}

Test(session, retry_now_ends_the_back_off)
{
	struct world w;
	init_world(&w);
	struct iscsi_session_config cfg = config(&w, 60000);
	cfg.on_path_state = on_path_state;
	path_events.downs = path_events.ups = 0;
	struct iscsi_session *s = NULL;
	char err[256] = "";
	cr_assert_eq(iscsi_session_open(&cfg, &s, err, sizeof(err)), 0, "%s", err);
	pthread_mutex_lock(&w.m);
	w.refuse = -1; /* the route is gone: every reconnect fails */
	pthread_mutex_unlock(&w.m);
	iscsi_session_drop(s, "link down");
	usleep(1200000); /* attempts at 0, ~250, ~750 ms: the next is about a second away */
	cr_assert(!iscsi_session_up(s));
	pthread_mutex_lock(&w.m);
	w.refuse = 0; /* the route is back */
	pthread_mutex_unlock(&w.m);
	int64_t t0 = clk_now_ms();
	iscsi_session_retry_now(s);
	for (int i = 0; i < 300 && !ups(); i++)
		usleep(2000);
	int64_t took = clk_now_ms() - t0;
	cr_assert_eq(ups(), 1);
	cr_assert_lt(took, 200, "reinstated %lld ms after retry_now: the back-off was not cut", (long long)took);
	iscsi_session_close(s, 100);
}

/* A log line shows the status and sense a target sent, and none when it sent none. */
Test(session, result_status_only_what_the_target_sent)
{
	char b[64];
	struct iscsi_cmd_result r = {.err = -ETIMEDOUT};
	cr_assert_str_eq(iscsi_cmd_result_status(&r, b, sizeof(b)), "", "timed out here: no status");
	r = (struct iscsi_cmd_result){.status = SCSI_STATUS_CHECK_CONDITION, .has_sense = true,
				      .sense = {.key = 0x3, .asc = 0x11, .ascq = 0x00}};
	cr_assert_str_eq(iscsi_cmd_result_status(&r, b, sizeof(b)), " (status 0x02, sense 3/11/00)");
	r = (struct iscsi_cmd_result){.status = 0x08};
	cr_assert_str_eq(iscsi_cmd_result_status(&r, b, sizeof(b)), " (status 0x08)", "BUSY: no sense");
	cr_assert_str_eq(iscsi_cmd_result_status(&r, b, 5), " (st", "truncated to fit");
}

/* ---- the stop: synchronous commands (iscsi_session_exec) fail ---- */

struct exec_call {
	struct iscsi_session *s;
	pthread_t thread;
	int rc;
	struct iscsi_cmd_result res;
	int64_t ended_ms;
};

static void *exec_thread(void *arg)
{
	struct exec_call *e = arg;
	struct iscsi_cmd cmd = {.cdb_len = 6, .dir = ISCSI_DIR_NONE}; /* TEST UNIT READY */
	e->rc = iscsi_session_exec(e->s, &cmd, &e->res);
	e->ended_ms = clk_now_ms();
	return NULL;
}

/* iscsi_session_exec of a TEST UNIT READY on a thread of its own. */
static void exec_start(struct exec_call *e, struct iscsi_session *s)
{
	memset(e, 0, sizeof(*e));
	e->s = s;
	cr_assert_eq(pthread_create(&e->thread, NULL, exec_thread, e), 0);
}

/* iscsi_session_stopping with a 5 s grace, then e's end: it failed with -ESHUTDOWN; returns the ms it took. */
static int64_t stop_and_join(struct iscsi_session *s, struct exec_call *e)
{
	int64_t t0 = clk_now_ms();
	iscsi_session_stopping(s, 5000);
	pthread_join(e->thread, NULL);
	cr_assert_eq(e->rc, 0);
	cr_assert_eq(e->res.err, -ESHUTDOWN, "the synchronous command fails at the stop (err %d)", e->res.err);
	return e->ended_ms - t0;
}

static int seen_count(struct world *w)
{
	pthread_mutex_lock(&w->m);
	int n = w->nseen;
	pthread_mutex_unlock(&w->m);
	return n;
}

Test(session, stop_fails_an_unanswered_synchronous_command_and_reissues_the_rest, .timeout = 10)
{
	struct world w;
	init_world(&w); /* connection 0 answers nothing, connection 1 everything */
	w.answer[1] = true;
	struct iscsi_session_config cfg = config(&w, 60000);
	struct iscsi_session *s = NULL;
	char err[256] = "";
	cr_assert_eq(iscsi_session_open(&cfg, &s, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(submit(s, 0), 0);
	struct exec_call e;
	exec_start(&e, s);
	for (int i = 0; i < 200 && seen_count(&w) < 2; i++)
		usleep(10000);
	cr_assert_eq(seen_count(&w), 2, "both commands were sent");
	int64_t took = stop_and_join(s, &e);
	cr_assert_lt(took, 2000, "after %lld ms (1 s to answer, then the drop)", (long long)took);
	cr_assert(wait_done(1));
	cr_assert_eq(done.err[0], 0, "the other command is re-issued on the new connection and answered");
	struct iscsi_cmd cmd = {.cdb_len = 6, .dir = ISCSI_DIR_NONE};
	struct iscsi_cmd_result res;
	cr_assert_eq(iscsi_session_exec(s, &cmd, &res), -ESHUTDOWN, "a new synchronous command is refused");
	cr_assert_eq(submit(s, 1), 0, "I/O is still taken");
	cr_assert(wait_done(2));
	cr_assert_eq(done.err[1], 0);
	iscsi_session_close(s, 1000);
}

Test(session, stop_fails_a_parked_synchronous_command_at_once)
{
	struct world w;
	init_world(&w);
	w.drop_after[0] = 1; /* the command drops the connection; the target is then gone */
	struct iscsi_session_config cfg = config(&w, 60000);
	struct iscsi_session *s = NULL;
	char err[256] = "";
	cr_assert_eq(iscsi_session_open(&cfg, &s, err, sizeof(err)), 0, "%s", err);
	pthread_mutex_lock(&w.m);
	w.refuse = -1;
	pthread_mutex_unlock(&w.m);
	struct exec_call e;
	exec_start(&e, s);
	for (int i = 0; i < 200 && (seen_count(&w) < 1 || iscsi_session_up(s)); i++)
		usleep(10000);
	usleep(50000); /* parked, reconnecting in vain */
	int64_t took = stop_and_join(s, &e);
	cr_assert_lt(took, 200, "a command not sent fails at once (%lld ms), not at the stop grace", (long long)took);
	iscsi_session_close(s, 100);
}

/* ---- a replacement timeout a target cannot stretch ---- */

Test(session, reissued_command_unanswered_fails_at_replacement_timeout_from_the_first_loss)
{
	struct world w;
	init_world(&w);
	w.drop_after[0] = 1; /* lost with the first connection; the next ones take it and answer nothing */
	struct iscsi_session_config cfg = config(&w, 500);
	struct iscsi_session *s = NULL;
	char err[256] = "";
	cr_assert_eq(iscsi_session_open(&cfg, &s, err, sizeof(err)), 0, "%s", err);
	int64_t t0 = clk_now_ms();
	cr_assert_eq(submit(s, 0), 0);
	for (int tries = 0; tries < 300 && calls(0) == 0; tries++)
		usleep(10000);
	int64_t took = clk_now_ms() - t0;
	cr_assert_eq(calls(0), 1, "still pending after %lld ms", (long long)took);
	cr_assert_eq(done.err[0], -ETIMEDOUT);
	cr_assert_lt(took, 1500, "failed %lld ms after the loss: replacement timeout 500 ms + a tick", (long long)took);
	cr_assert_geq(seen_count(&w), 2, "re-issued on a reinstated connection first");
	iscsi_session_close(s, 100);
}
