/* SPDX-License-Identifier: MIT */
/*
 * iSER data path (RFC 7145 §9.2): SEND and RECV posting, the 28-byte iSER
 * header with its Read/Write STag and Base Offset, bounce slots for
 * buffers outside the registered pool, and completion polling.  Every
 * function here runs on the thread that owns the connection at the time
 * (the login thread, then the event thread; see iser_priv.h); no locks.
 */
#include "iser_priv.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "initiator/util/be.h"
#include "initiator/util/log.h"

/* ---- receive posting ---- */

int iser_post_rx(struct iser_conn *c, const unsigned *idx, unsigned n)
{
	struct ibv_recv_wr wr[ISER_POLL_BATCH], *bad;
	struct ibv_sge sge[ISER_POLL_BATCH];
	unsigned done = 0;
	while (done < n) {
		unsigned k = n - done < ISER_POLL_BATCH ? n - done : ISER_POLL_BATCH;
		for (unsigned i = 0; i < k; i++) {
			unsigned j = idx[done + i];
			sge[i] = (struct ibv_sge){(uintptr_t)(c->rxmem + (size_t)j * RX_STRIDE), RX_STRIDE, c->mem_mr->lkey};
			wr[i] = (struct ibv_recv_wr){.wr_id = j, .sg_list = &sge[i], .num_sge = 1,
						     .next = i + 1 < k ? &wr[i + 1] : NULL};
		}
		int rc = ibv_post_recv(c->id->qp, wr, &bad);
		if (rc)
			return -rc;
		c->rx_posted += k;
		done += k;
	}
	return 0;
}

/* ---- send path ---- */

static struct bounce *bounce_find(struct iser_conn *c, uint32_t itt)
{
	for (int i = 0; i < BOUNCE_SLOTS; i++)
		if (c->bounce[i].used && c->bounce[i].itt == itt)
			return &c->bounce[i];
	return NULL;
}

/*
 * A bounce slot for a new command with this ITT.  A slot whose command
 * ended without a SCSI Response on this connection (Reject, ABORT TASK,
 * a re-issue under a new ITT) is taken back: one with the same ITT (the
 * session never has two commands with one ITT), or, with none free, one
 * the session no longer owns.  NULL when all are in use.
 */
static struct bounce *bounce_get(struct iser_conn *c, uint32_t itt)
{
	struct bounce *b = bounce_find(c, itt);
	if (b)
		return b;
	for (int i = 0; i < BOUNCE_SLOTS; i++)
		if (!c->bounce[i].used)
			return &c->bounce[i];
	for (int i = 0; i < BOUNCE_SLOTS && c->hooks && c->hooks->task_owns; i++) {
		b = &c->bounce[i];
		if (!c->hooks->task_owns(c->sess, b->itt, b->user, b->len)) {
			log_debug("iSER: bounce slot of ended ITT 0x%08x taken back", b->itt);
			return b;
		}
	}
	return NULL;
}

static bool in_region(const struct iser_conn *c, const void *p, size_t len)
{
	const uint8_t *b = c->ctx->base, *q = p;
	return c->ctx->mr && q >= b && len <= c->ctx->len && (size_t)(q - b) <= c->ctx->len - len;
}

/*
 * The Read or Write STag and Base Offset of s's transfer in the iSER
 * header hdr (RFC 7145 §9.2): the pool's rkey and the buffer's address,
 * or a bounce slot (WRITE data copied in) for a buffer outside the pool.
 * Nothing for a command without data.  0 or -ENOBUFS.
 */
static int build_stag(struct iser_conn *c, uint8_t *hdr, const struct iscsi_tx_slot *s, uint32_t itt)
{
	uint64_t va;
	uint32_t stag;
	if (!(s->xfer_dir && s->xfer_len))
		return 0;
	if (in_region(c, s->xfer_buf, s->xfer_len)) {
		va = (uintptr_t)s->xfer_buf;
		stag = c->ctx->mr->rkey;
	} else {
		/* a buffer outside the pool (probing commands): through a bounce slot */
		struct bounce *b = bounce_get(c, itt);
		if (!b || s->xfer_len > BOUNCE_SIZE) {
			log_err("iSER: no bounce buffer for a %u-byte command outside the pool", s->xfer_len);
			return -ENOBUFS;
		}
		*b = (struct bounce){true, itt, s->xfer_dir, s->xfer_buf, s->xfer_len};
		uint8_t *bb = c->bmem + (size_t)(b - c->bounce) * BOUNCE_SIZE;
		if (s->xfer_dir == 2)
			memcpy(bb, s->xfer_buf, s->xfer_len);
		va = (uintptr_t)bb;
		stag = c->mem_mr->rkey;
	}
	if (s->xfer_dir == 1) {
		hdr[0] |= ISER_RSV;
		put_be32(hdr + 16, stag);
		put_be64(hdr + 20, va);
	} else if (s->xfer_unsol < s->xfer_len) {
		/* the target RDMA-reads what was not sent unsolicited, from the base offset on */
		hdr[0] |= ISER_WSV;
		put_be32(hdr + 4, stag);
		put_be64(hdr + 8, va + s->xfer_unsol);
	}
	return 0;
}

/*
 * The SGE of s's data segment: from the registered region (no copy), from
 * the command's bounce slot, or copied into `copy` (the ring entry's
 * ISER_SEND_COPY bytes).  0 or -EMSGSIZE.
 */
static int build_data_sge(struct iser_conn *c, uint8_t *copy, const struct iscsi_tx_slot *s, uint32_t itt,
			  struct ibv_sge *sge)
{
	uint32_t len = s->dlen; /* iSER sends no padding: the SEND length delimits the PDU */
	uint32_t lkey = c->mem_mr->lkey;
	struct bounce *b;
	if (in_region(c, s->data, len)) {
		*sge = (struct ibv_sge){(uintptr_t)s->data, len, c->ctx->mr->lkey};
	} else if ((b = bounce_find(c, itt)) && (const uint8_t *)s->data >= (const uint8_t *)b->user &&
		   (size_t)((const uint8_t *)s->data - (const uint8_t *)b->user) + len <= b->len) {
		size_t off = (size_t)((const uint8_t *)s->data - (const uint8_t *)b->user);
		*sge = (struct ibv_sge){(uintptr_t)(c->bmem + (size_t)(b - c->bounce) * BOUNCE_SIZE + off), len, lkey};
	} else if (len <= ISER_SEND_COPY) {
		memcpy(copy, s->data, len);
		*sge = (struct ibv_sge){(uintptr_t)copy, len, lkey};
	} else {
		log_err("iSER: a %u-byte data segment outside the pool", len);
		return -EMSGSIZE;
	}
	return 0;
}

/*
 * Build the WR of one PDU in ring entry e: iSER header + BHS in the
 * entry's header area, the data segment from the registered region (no
 * copy), from a bounce slot, or copied into the entry.  0 or -errno.
 */
static int build_send(struct iser_conn *c, uint64_t e, const struct iscsi_tx_slot *s, struct ibv_send_wr *wr,
		      struct ibv_sge sge[2])
{
	uint8_t *hdr = c->txmem + (size_t)(e % c->ntx) * TX_STRIDE;
	uint8_t *copy = hdr + 128;
	uint32_t itt = iscsi_wire_itt(s->bhs);
	memset(hdr, 0, ISER_HDR_LEN);
	hdr[0] = ISER_CTRL;
	int rc = build_stag(c, hdr, s, itt);
	if (rc)
		return rc;
	memcpy(hdr + ISER_HDR_LEN, s->bhs, ISCSI_BHS_LEN);
	sge[0] = (struct ibv_sge){(uintptr_t)hdr, MSG_HDR, c->mem_mr->lkey};
	int nsge = 1;
	if (s->dlen) {
		if ((rc = build_data_sge(c, copy, s, itt, &sge[1])))
			return rc;
		nsge = 2;
	}
	*wr = (struct ibv_send_wr){.wr_id = WR_SEND_TAG | e, .sg_list = sge, .num_sge = nsge, .opcode = IBV_WR_SEND};
	return 0;
}

/* Release the ring entries up to and including `last`; the session hears of them (full feature phase). */
static void tx_release(struct iser_conn *c, uint64_t last)
{
	while (c->tx_tail <= last && c->tx_tail < c->tx_head) {
		uint64_t end = last + 1;
		unsigned from = (unsigned)(c->tx_tail % c->ntx);
		uint64_t run = end - c->tx_tail;
		if (from + run > c->ntx)
			run = c->ntx - from;
		if (c->hooks && c->hooks->tx_done) {
			/* hand back in chunks of TX_BATCH (the session's own completion array is bounded) */
			for (uint64_t k = 0; k < run; k += TX_BATCH) {
				uint64_t m = run - k < TX_BATCH ? run - k : TX_BATCH;
				struct iscsi_tx_slot tmp[TX_BATCH];
				for (uint64_t j = 0; j < m; j++)
					tmp[j] = c->txr[from + k + j].slot;
				c->hooks->tx_done(c->sess, tmp, (int)m);
			}
		}
		c->tx_tail += run;
	}
}

/* Post n PDUs (the last one signalled). 0 or -errno. */
int iser_post_sends(struct iser_conn *c, const struct iscsi_tx_slot *slots, int n)
{
	struct ibv_send_wr wr[TX_BATCH], *bad;
	struct ibv_sge sge[TX_BATCH][2];
	for (int i = 0; i < n; i++) {
		uint64_t e = c->tx_head + (uint64_t)i;
		c->txr[e % c->ntx].slot = slots[i];
		int rc = build_send(c, e, &slots[i], &wr[i], sge[i]);
		if (rc)
			return rc;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	wr[n - 1].send_flags = IBV_SEND_SIGNALED;
	int rc = ibv_post_send(c->id->qp, wr, &bad);
	if (rc) {
		log_err("iSER: posting %d sends failed: %s", n, strerror(rc));
		return -rc;
	}
	log_debug("iSER: posted %d sends, first %s ITT 0x%08x", n, iscsi_opcode_name(iscsi_wire_opcode(slots[0].bhs)),
		  iscsi_wire_itt(slots[0].bhs));
	c->tx_head += (uint64_t)n;
	return 0;
}

/* Pull PDUs from the session while send entries are free. */
int iser_tx_flush(struct iser_conn *c)
{
	for (;;) {
		uint64_t busy = c->tx_head - c->tx_tail;
		if (busy >= c->ntx)
			return 0;
		int max = c->ntx - busy < TX_BATCH ? (int)(c->ntx - busy) : TX_BATCH;
		struct iscsi_tx_slot slots[TX_BATCH];
		memset(slots, 0, sizeof(slots));
		int n = c->hooks->tx_fill(c->sess, slots, max);
		if (n <= 0)
			return 0;
		int rc = iser_post_sends(c, slots, n);
		if (rc)
			return rc;
	}
}

/* ---- receive path ---- */

/* Validate a received message; *bhs, *data, *dlen point into the buffer. 0 or -EPROTO. */
int iser_parse_msg(struct iser_conn *c, unsigned idx, uint32_t len, uint8_t **bhs, uint8_t **data, uint32_t *dlen)
{
	uint8_t *m = c->rxmem + (size_t)idx * RX_STRIDE;
	if (len < MSG_HDR || (m[0] & 0xf0) != ISER_CTRL) {
		log_err("iSER: %s sent a %u-byte message that is not an iSCSI control PDU (flags 0x%02x)", c->peer, len,
			len ? m[0] : 0);
		return -EPROTO;
	}
	*bhs = m + ISER_HDR_LEN;
	uint32_t ahs = iscsi_wire_ahs_bytes(*bhs), dl = iscsi_wire_dlen(*bhs);
	if (dl > ISER_RECV_DSL || (uint64_t)MSG_HDR + ahs + dl > len) {
		log_err("iSER: %s PDU with DataSegmentLength %u in a %u-byte message (limit %u)",
			iscsi_opcode_name(iscsi_wire_opcode(*bhs)), dl, len, ISER_RECV_DSL);
		return -EPROTO;
	}
	*data = *bhs + ISCSI_BHS_LEN + ahs;
	*dlen = dl;
	return 0;
}

/* Full feature phase: one received PDU to the session. 0 or -errno. */
int iser_rx_deliver(struct iser_conn *c, unsigned idx, uint32_t len)
{
	uint8_t *bhs, *data;
	uint32_t dlen;
	int rc = iser_parse_msg(c, idx, len, &bhs, &data, &dlen);
	if (rc)
		return rc;
	uint8_t op = iscsi_wire_opcode(bhs);
	log_debug("iSER: received %s ITT 0x%08x (%u bytes)", iscsi_opcode_name(op), iscsi_wire_itt(bhs), len);
	if (op == ISCSI_OP_DATA_IN || op == ISCSI_OP_R2T) {
		log_err("iSER: %s sent a %s PDU: data moves by RDMA", c->peer, iscsi_opcode_name(op));
		return -EPROTO;
	}
	if (op == ISCSI_OP_SCSI_RSP) {
		struct bounce *b = bounce_find(c, iscsi_wire_itt(bhs));
		if (b) {
			/* only into a buffer its command still owns: never one handed back and reused */
			if (b->dir == 1 && c->hooks->task_owns && c->hooks->task_owns(c->sess, b->itt, b->user, b->len))
				memcpy(b->user, c->bmem + (size_t)(b - c->bounce) * BOUNCE_SIZE, b->len);
			else if (b->dir == 1)
				log_warn("iSER: SCSI Response for ended ITT 0x%08x: its data is dropped", b->itt);
			b->used = false;
		}
	}
	return c->hooks->rx_pdu(c->sess, bhs, data, dlen);
}

/*
 * Poll one batch of completions.  Full feature phase (deliver): PDUs go
 * to the session; login phase: receives are queued in pend.  Returns the
 * number handled, or -errno.
 */
int iser_poll_batch(struct iser_conn *c, bool deliver)
{
	struct ibv_wc wc[ISER_POLL_BATCH];
	unsigned repost[ISER_POLL_BATCH], nrep = 0;
	int n = ibv_poll_cq(c->cq, ISER_POLL_BATCH, wc);
	if (n < 0)
		return -EIO;
	int rc = 0;
	for (int i = 0; i < n; i++) {
		bool send = (wc[i].wr_id & WR_SEND_TAG) != 0;
		if (!send && c->rx_posted)
			c->rx_posted--;
		if (wc[i].status != IBV_WC_SUCCESS) {
			if (!rc && !atomic_load(&c->ev.stop)) {
				log_err("iSER: %s completion failed: %s", send ? "send" : "receive",
					ibv_wc_status_str(wc[i].status));
				rc = -EIO;
			}
			if (send)
				c->tx_tail = (wc[i].wr_id & ~WR_SEND_TAG) + 1; /* nothing is handed back */
			continue;
		}
		if (send) {
			tx_release(c, wc[i].wr_id & ~WR_SEND_TAG);
			continue;
		}
		unsigned idx = (unsigned)wc[i].wr_id;
		if (rc)
			continue;
		if (!deliver) {
			if (c->npend == PEND_MAX) {
				rc = -EPROTO;
				continue;
			}
			c->pend_idx[c->npend] = idx;
			c->pend_len[c->npend++] = wc[i].byte_len;
			continue;
		}
		rc = iser_rx_deliver(c, idx, wc[i].byte_len);
		repost[nrep++] = idx;
	}
	if (nrep && !rc)
		rc = iser_post_rx(c, repost, nrep);
	return rc ? rc : n;
}
