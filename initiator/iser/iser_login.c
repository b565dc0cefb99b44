/* SPDX-License-Identifier: MIT */
/*
 * iSER login phase (RFC 7143 §6; over iSER every login PDU is one SEND
 * behind its iSER header, RFC 7145 §9.2): the blocking send_pdu/recv_pdu
 * of transport.h, on the thread that logs in, before the event thread
 * exists.  They poll the CQ and, when it is empty, arm it and sleep on its
 * completion channel.
 */
#include "iser_priv.h"

#include <errno.h>
#include <poll.h>
#include <string.h>

#include "initiator/transport/cancel.h"

/*
 * Arm the CQ and wait for it (or other fds) until deadline; consumes the CQ
 * event.  A completion that came after the caller's last poll but before
 * the arming raises no event: the CQ is polled once more after arming, and
 * when that finds completions there is no wait (0, the caller looks again).
 */
static int cq_wait(struct iser_conn *c, int64_t deadline)
{
	if (ibv_req_notify_cq(c->cq, 0))
		return -EIO;
	int n = iser_poll_batch(c, false);
	if (n != 0)
		return n < 0 ? n : 0;
	int64_t left = deadline - iscsi_now_ms();
	struct pollfd p = {.fd = c->cch->fd, .events = POLLIN};
	int r = iscsi_poll_cancellable(&p, 1, left < 0 ? 0 : (int)left);
	if (r < 0)
		return r;
	if (r > 0) {
		struct ibv_cq *cq;
		void *cctx;
		if (ibv_get_cq_event(c->cch, &cq, &cctx) == 0)
			ibv_ack_cq_events(cq, 1);
	}
	return 0;
}

/* What a login-phase wait waits for: a free send slot, sends completed up to `mark`, a PDU received. */
static bool send_slot_free(const struct iser_conn *c, uint64_t mark)
{
	(void)mark;
	return c->tx_head - c->tx_tail < c->ntx;
}

static bool sends_done(const struct iser_conn *c, uint64_t mark)
{
	return c->tx_tail >= mark;
}

static bool pdu_pending(const struct iser_conn *c, uint64_t mark)
{
	(void)mark;
	return c->npend != 0;
}

/* Poll the CQ, sleeping on it when empty, until done(c, mark) or deadline.  0, -ETIMEDOUT or -errno. */
static int poll_until(struct iser_conn *c, bool (*done)(const struct iser_conn *, uint64_t), uint64_t mark,
		      int64_t deadline)
{
	while (!done(c, mark)) {
		int rc = iser_poll_batch(c, false);
		if (rc < 0)
			return rc;
		if (rc == 0) {
			if (iscsi_now_ms() >= deadline)
				return -ETIMEDOUT;
			if ((rc = cq_wait(c, deadline)))
				return rc;
		}
	}
	return 0;
}

int iser_login_send_pdu(struct iscsi_transport *t, const uint8_t *bhs, const void *data, uint32_t dlen,
			int timeout_ms)
{
	struct iser_conn *c = (struct iser_conn *)t;
	struct iscsi_tx_slot s = {.data = data, .dlen = dlen};
	memcpy(s.bhs, bhs, ISCSI_BHS_LEN);
	if (dlen > ISER_SEND_COPY)
		return -EMSGSIZE;
	int64_t deadline = iscsi_now_ms() + timeout_ms;
	int rc = poll_until(c, send_slot_free, 0, deadline);
	if (rc || (rc = iser_post_sends(c, &s, 1)))
		return rc;
	return poll_until(c, sends_done, c->tx_head, deadline);
}

int iser_login_recv_pdu(struct iscsi_transport *t, uint8_t *bhs, void *data, uint32_t cap, uint32_t *dlen,
			int timeout_ms)
{
	struct iser_conn *c = (struct iser_conn *)t;
	int64_t deadline = iscsi_now_ms() + timeout_ms;
	int rc = poll_until(c, pdu_pending, 0, deadline);
	if (rc)
		return rc;
	unsigned idx = c->pend_idx[0];
	uint32_t len = c->pend_len[0];
	c->npend--;
	memmove(c->pend_idx, c->pend_idx + 1, c->npend * sizeof(c->pend_idx[0]));
	memmove(c->pend_len, c->pend_len + 1, c->npend * sizeof(c->pend_len[0]));
	uint8_t *b, *d;
	uint32_t dl;
	rc = iser_parse_msg(c, idx, len, &b, &d, &dl);
	if (!rc && dl > cap)
		rc = -EPROTO;
	if (!rc) {
		memcpy(bhs, b, ISCSI_BHS_LEN);
		memcpy(data, d, dl);
		*dlen = dl;
	}
	int prc = iser_post_rx(c, &idx, 1);
	return rc ? rc : prc;
}
