/* SPDX-License-Identifier: MIT */
/*
 * iSER (RFC 7145) transport on librdmacm + libibverbs: the ops of
 * transport.h over one RC queue pair.
 *
 * Every iSCSI PDU travels in one SEND (and arrives in one RECV) behind
 * the 28-byte iSER header (§9.2); SCSI data does not: the target
 * RDMA-writes READ data into the task's buffer (Read STag / Base Offset)
 * and RDMA-reads WRITE data from it (Write STag / Base Offset) beyond the
 * unsolicited part, which rides in the command's SEND (immediate data;
 * we ask for InitialR2T=Yes, so no Data-Out SENDs follow).  The STag is always the rkey of
 * the pool's one registration (iser_ctx); the session sees no Data-In and
 * no R2T PDUs (ops.data_by_rdma).
 *
 * Queue sizing (the session has at most 2*QD+8 tasks):
 *   receive WRs  nrx = (2*QD + 8)          one SCSI Response per task
 *                    + ISER_UNEXPECTED      NOP-In pings, Async Messages,
 *                                           Rejects: the MaxOutstanding-
 *                                           UnexpectedPDUs we declare
 *                    + ISER_IMMEDIATE_RX    answers to our NOP-Out pings,
 *                                           Logout, Text, TMF
 *   send WRs     ntx = 2*QD + 16            a command SEND and, on average,
 *                                           one unsolicited Data-Out each;
 *                                           sends are flow controlled (the
 *                                           session is asked for at most
 *                                           the free entries), so ntx bounds
 *                                           throughput, never correctness
 *   CQ entries   ncq = nrx + ntx            one CQ for both queues
 * All receive buffers are posted before the connection is requested and
 * reposted as soon as their PDU is handled, so the target never meets an
 * empty receive queue (no RNR).  Completions are polled ISER_POLL_BATCH
 * at a time; of each batch of SENDs only the last is signalled (RC
 * completes in order, so one completion releases the whole batch).
 *
 * Threads: connect/send_pdu/recv_pdu on the caller's thread (login);
 * from start() on, one event thread owns the QP and CQ.
 *
 * This file: the ops table, start/kick/shutdown/destroy and the event
 * thread.  Set-up and teardown are in iser_conn.c, the data path in
 * iser_io.c, the login phase in iser_login.c, the per-mount context in
 * iser_ctx.c; iser_priv.h has the structures they share.
 */
#include "iser_priv.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <string.h>

#include "initiator/util/log.h"

/* ---- full feature phase ---- */

/* The PDUs that arrived with the last login response, to the session.  0 or -errno. */
static int ev_deliver_pending(struct iser_conn *c)
{
	int err = 0;
	for (unsigned i = 0; i < c->npend && !err; i++) {
		err = iser_rx_deliver(c, c->pend_idx[i], c->pend_len[i]);
		if (!err)
			err = iser_post_rx(c, &c->pend_idx[i], 1);
	}
	c->npend = 0;
	return err;
}

/*
 * Nothing pending: arm the CQ, look once more (a completion may have
 * raced the arm), then sleep until a completion, a kick, a CM event or
 * next_tick (CLOCK_MONOTONIC ms).  0 (look again) or -errno.
 */
static int ev_sleep(struct iser_conn *c, int64_t next_tick)
{
	if (ibv_req_notify_cq(c->cq, 0))
		return -EIO;
	int n = iser_poll_batch(c, true);
	if (n != 0)
		return n < 0 ? n : 0;
	struct pollfd p[3] = {
		{.fd = c->cch->fd, .events = POLLIN},
		{.fd = c->ev.fd, .events = POLLIN},
		{.fd = c->ech->fd, .events = POLLIN},
	};
	int64_t wait = next_tick - iscsi_now_ms();
	if (!iscsi_evthread_sleep(&c->ev))
		wait = 0; /* kicked meanwhile: look once, then loop */
	int r = poll(p, 3, wait < 0 ? 0 : (int)wait);
	iscsi_evthread_woke(&c->ev, r);
	if (r < 0)
		return errno == EINTR ? 0 : -errno;
	if (p[0].revents & POLLIN) {
		struct ibv_cq *cq;
		void *cctx;
		if (ibv_get_cq_event(c->cch, &cq, &cctx) == 0)
			ibv_ack_cq_events(cq, 1);
	}
	int err;
	if ((p[1].revents & POLLIN) && (err = iscsi_evthread_drain(&c->ev)))
		return err;
	if ((p[2].revents & POLLIN) && (err = iser_cm_poll(c)))
		return err;
	return 0;
}

/* The event thread (full feature phase): ticks, sends, completions, kicks and CM events until stop or an error. */
static void *event_thread(void *arg)
{
	struct iser_conn *c = arg;
	int64_t next_tick = iscsi_now_ms() + ISCSI_TICK_MS;
	int err = ev_deliver_pending(c);
	while (!err && !atomic_load(&c->ev.stop)) {
		int64_t now = iscsi_now_ms();
		if (now >= next_tick) {
			next_tick = now + ISCSI_TICK_MS;
			if (c->hooks->tick && (err = c->hooks->tick(c->sess, now)))
				break;
		}
		atomic_store(&c->ev.kicked, false);
		if ((err = iser_tx_flush(c)))
			break;
		int n = iser_poll_batch(c, true);
		if (n < 0)
			err = n;
		else if (n == 0)
			err = ev_sleep(c, next_tick);
	}
	if (err && !atomic_load(&c->ev.stop))
		log_debug("%s: iSER connection error: %s", c->peer, strerror(-err));
	c->hooks->conn_lost(c->sess, atomic_load(&c->ev.stop) ? 0 : (err ? err : -ECONNRESET));
	return NULL;
}

static int iser_start(struct iscsi_transport *t, const struct iscsi_transport_hooks *hooks, void *sess,
		      const struct iscsi_params *params)
{
	struct iser_conn *c = (struct iser_conn *)t;
	if (!params->rdma_extensions) {
		log_err("iSER: %s did not agree to RDMAExtensions=Yes", c->peer);
		return -EPROTO;
	}
	if (params->header_digest || params->data_digest) {
		log_err("iSER: digests are not used over RDMA (RFC 7145 §6.3)");
		return -EPROTO;
	}
	c->hooks = hooks;
	c->sess = sess;
	c->params = *params;
	return iscsi_evthread_start(&c->ev, event_thread, c);
}

static void iser_kick(struct iscsi_transport *t)
{
	struct iser_conn *c = (struct iser_conn *)t;
	iscsi_evthread_kick(&c->ev, c->peer);
}

static void iser_abort(struct iscsi_transport *t)
{
	struct iser_conn *c = (struct iser_conn *)t;
	iscsi_evthread_abort(&c->ev, c->peer);
}

static void iser_shutdown(struct iscsi_transport *t)
{
	struct iser_conn *c = (struct iser_conn *)t;
	iscsi_evthread_stop(&c->ev, c->peer);
}

static void iser_destroy(struct iscsi_transport *t)
{
	struct iser_conn *c = (struct iser_conn *)t;
	c->hooks = NULL; /* flushed sends are not handed back */
	iser_conn_free(c);
}

/* wakeups op (transport.h): the times the event thread woke from poll with something to do. */
static uint64_t iser_wakeups(struct iscsi_transport *t)
{
	return iscsi_evthread_wakeups(&((struct iser_conn *)t)->ev);
}

const struct iscsi_transport_ops iscsi_iser_transport = {
	.name = "iser",
	.data_by_rdma = true,
	.max_cmd_bytes = ISER_MAX_CMD_BYTES,
	.connect = iser_conn_connect,
	.send_pdu = iser_login_send_pdu,
	.recv_pdu = iser_login_recv_pdu,
	.start = iser_start,
	.kick = iser_kick,
	.abort = iser_abort,
	.shutdown = iser_shutdown,
	.destroy = iser_destroy,
	.wakeups = iser_wakeups,
};

void iser_neg_config(struct iscsi_neg_config *neg)
{
	neg->rdma_extensions = true;
	neg->iser_initiator_recv_dsl = ISER_RECV_DSL;
	neg->iser_target_recv_dsl = ISER_TARGET_DSL;
	neg->iser_max_unexpected = ISER_UNEXPECTED;
	/*
	 * InitialR2T=Yes (an OR key, RFC 7143 §13.10, so it holds whatever
	 * the target offers): a write's unsolicited part is its immediate data
	 * only, and the target RDMA-reads the rest.  Unsolicited Data-Out SENDs
	 * would each take one of the target's receive buffers and save no round
	 * trip over RDMA; and tgt's iSER driver (1.0.85) mistakes later PDUs
	 * for garbage once it has taken some (it drops the connection, and
	 * answers ILLEGAL REQUEST for commands it misreads).
	 */
	neg->initial_r2t = true;
	/* RFC 7145 §6.3: no digests over RDMA */
	neg->header_digest_crc32c = false;
	neg->data_digest_crc32c = false;
}
