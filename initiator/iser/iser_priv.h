/* SPDX-License-Identifier: MIT */
/*
 * iSER transport internals (RFC 7145), shared by its files and by nothing
 * else:
 *
 *   iser.c        the transport ops table, start/kick/shutdown/destroy and
 *                 the event thread (full feature phase)
 *   iser_ctx.c    the per-mount context: PD and the pool's one registration
 *   iser_conn.c   connection set-up and teardown, one step and its undo at
 *                 a time, and the RDMA CM event handlers
 *   iser_io.c     the data path: SEND/RECV posting, the iSER header and its
 *                 STags, bounce slots, completion polling
 *   iser_login.c  the login phase's blocking send_pdu/recv_pdu
 *
 * Threads: from iser_connect until start() every field of an iser_conn is
 * used by the one thread that logs in (send_pdu/recv_pdu); from start() on
 * the event thread owns the QP, the CQ, the rings and the bounce slots.
 * Only c->ev.stop/kicked (C11 atomics) are touched by other threads.
 */
#ifndef ISERFUSE_ISER_PRIV_H
#define ISERFUSE_ISER_PRIV_H

#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "initiator/transport/evthread.h"
#include "iser.h"
#include "initiator/wire/pdu.h"
#include "initiator/transport/transport.h"

#define ISER_HDR_LEN 28u
#define ISER_CTRL 0x10u            /* iSCSI control-type PDU (§9.2) */
#define ISER_WSV 0x08u             /* Write STag valid */
#define ISER_RSV 0x04u             /* Read STag valid */
#define ISER_CM_ZBVA_NOT_SUP 0x80u /* §5.1.3.1: we send virtual addresses */
#define ISER_CM_SIE_NOT_SUP 0x40u  /* §5.1.3.1: no Send with Invalidate (one MR, never invalidated) */

#define ISER_RECV_DSL 8192u        /* InitiatorRecvDataSegmentLength we declare; the login limit too */
#define ISER_TARGET_DSL 8192u      /* TargetRecvDataSegmentLength we offer: the RFC 7145 default; LIO (ib_isert)
                                    * posts receive buffers of 8 KiB + headers whatever it answers */
#define ISER_SEND_COPY 8192u       /* most data a SEND carries from outside the region (copied) */
#define ISER_UNEXPECTED 8u
#define ISER_IMMEDIATE_RX 8u
#define ISER_POLL_BATCH 16
#define TX_BATCH 32
static_assert(TX_BATCH <= ISCSI_TX_BATCH_MAX, "a tx_fill batch fits the session's tx_done");
#define MSG_HDR (ISER_HDR_LEN + ISCSI_BHS_LEN)
#define AHS_MAX (255u * 4u)
#define RX_STRIDE 9344u            /* >= MSG_HDR + AHS_MAX + ISER_RECV_DSL + 3, 64-byte multiple */
#define TX_STRIDE (128u + ISER_SEND_COPY)
#define BOUNCE_SLOTS 4
#define BOUNCE_SIZE (64u * 1024u)
#define PEND_MAX 8
#define WR_SEND_TAG (1ull << 63)

/* The per-mount context (iser.h); see iser_ctx.c. */
struct iser_ctx {
	pthread_mutex_t lock;      /* guards verbs, pd and mr while iser_ctx_attach sets them */
	void *base;                /* the payload region (the buffer pool); not owned */
	size_t len;
	unsigned queue_depth;
	void (*registered)(void *arg);
	void *arg;
	/* set once under lock by the first connect; read without it afterwards (the connect that set
	 * them happens before any data path use) */
	struct ibv_context *verbs; /* the device the first route led to (owned by librdmacm) */
	struct ibv_pd *pd;
	struct ibv_mr *mr;         /* the region's one registration; NULL when len == 0 */
};

/* One send ring entry: the PDU handed back to the session when its SEND completes. */
struct tx_ent {
	struct iscsi_tx_slot slot;
};

/* A bounce slot: a command's buffer outside the region, staged in c->bmem. */
struct bounce {
	bool used;
	uint32_t itt;
	uint8_t dir;               /* 1: read (target writes into the slot), 2: write */
	void *user;                /* the command's own buffer */
	uint32_t len;
};

/*
 * One iSER connection (one RC QP).  Owned by the session through `base`;
 * freed by iser_conn_free.  Threads: see the top of this file.
 */
struct iser_conn {
	struct iscsi_transport base;
	struct iser_ctx *ctx;      /* not owned */
	char peer[300];
	/* RDMA CM (iser_conn.c) */
	struct rdma_event_channel *ech;
	struct rdma_cm_id *id;
	/* completions and the QP (iser_conn.c makes them, iser_io.c uses them) */
	struct ibv_comp_channel *cch;
	struct ibv_cq *cq;
	bool qp_made, connected;
	unsigned nrx, ntx, ncq;
	/* buffers, registered once per connection with IBV_ACCESS_LOCAL_WRITE */
	uint8_t *mem;              /* rx buffers | tx headers and copies | bounce area */
	size_t memlen;
	struct ibv_mr *mem_mr;
	uint8_t *rxmem, *txmem, *bmem;
	struct tx_ent *txr;
	uint64_t tx_head, tx_tail; /* entries posted / released (counters, ring index = % ntx) */
	unsigned rx_posted;
	struct bounce bounce[BOUNCE_SLOTS];
	/* login phase: receive completions not yet asked for */
	unsigned pend_idx[PEND_MAX];
	uint32_t pend_len[PEND_MAX];
	unsigned npend;

	/* full feature phase, set by start() */
	const struct iscsi_transport_hooks *hooks;
	void *sess;
	struct iscsi_params params;
	struct iscsi_evthread ev;   /* the event thread and its wake-up */
};

/* ---- iser_ctx.c ---- */

/*
 * Make the context's protection domain on `verbs` and the region's one
 * registration (local write, remote read, remote write) if not made yet;
 * calls ctx->registered once for the registration.  Takes ctx->lock.
 * Returns 0, -ENODEV (the route now leads to another device), or the
 * negative errno of ibv_alloc_pd/ibv_reg_mr (-ENOMEM when none is set),
 * with a reason in err (err_cap bytes).  RFC 7145 §9.2 (the STag is the
 * rkey of that registration).
 */
int iser_ctx_attach(struct iser_ctx *x, struct ibv_context *verbs, char *err, size_t err_cap);

/* ---- iser_conn.c ---- */

/*
 * transport.h connect: resolve the portal, make the QP and its buffers on
 * the context's PD, post every receive buffer and connect with the iSER
 * CM private data (RFC 7145 §5.1.3).  timeout_ms (<= 0: 10 s) bounds the
 * whole set-up.  Returns 0 and the connection in *out (freed by the ops'
 * destroy), or a negative errno with a reason in err.
 */
int iser_conn_connect(struct iscsi_transport **out, void *vctx, const char *host, unsigned port, int timeout_ms,
		      char *err, size_t err_cap);

/*
 * Undo every step iser_conn_connect took, in the order: disconnect (and
 * wait up to 1 s for DISCONNECTED), QP to ERR + drain + destroy, CQ and
 * completion channel, buffers, CM ID and event channel; then free c.
 * Safe on a partly set-up connection.  The event thread must be stopped.
 */
void iser_conn_free(struct iser_conn *c);

/*
 * Full feature phase, on the event thread: handle the CM events queued on
 * c->ech (non-blocking).  Returns -ECONNRESET when one ends the connection
 * (DISCONNECTED, DEVICE_REMOVAL, ADDR_CHANGE), else 0.
 */
int iser_cm_poll(struct iser_conn *c);

/* ---- iser_io.c ---- */

/*
 * Post the receive buffers of indices idx[0..n) (RX_STRIDE bytes each,
 * lkey of c->mem_mr), ISER_POLL_BATCH WRs per ibv_post_recv.  Returns 0 or
 * the negative errno ibv_post_recv returned.
 */
int iser_post_rx(struct iser_conn *c, const unsigned *idx, unsigned n);

/*
 * Post n (1..TX_BATCH) PDUs as SENDs behind their iSER headers (RFC 7145
 * §9.2: Read/Write STag and Base Offset from the pool's registration or a
 * bounce slot), only the last one signalled.  The send ring must have n
 * free entries.  Returns 0, -ENOBUFS / -EMSGSIZE (a buffer outside the
 * pool that cannot be bounced or copied), or ibv_post_send's negative errno.
 */
int iser_post_sends(struct iser_conn *c, const struct iscsi_tx_slot *slots, int n);

/* Full feature phase: pull PDUs from the session (hooks->tx_fill) while send entries are free. 0 or -errno. */
int iser_tx_flush(struct iser_conn *c);

/*
 * Full feature phase: hand the PDU in receive buffer idx (len bytes as
 * received) to the session; a SCSI Response releases its command's bounce
 * slot (copying READ data back).  Returns hooks->rx_pdu's result, or
 * -EPROTO for a malformed message or a Data-In / R2T PDU (over iSER
 * data moves by RDMA).
 */
int iser_rx_deliver(struct iser_conn *c, unsigned idx, uint32_t len);

/*
 * Validate the message in receive buffer idx (len bytes): the iSER
 * control header and a DataSegmentLength within ISER_RECV_DSL.  Sets
 * *bhs, *data (past the AHS) and *dlen (bytes) into the buffer.  Returns
 * 0 or -EPROTO.
 */
int iser_parse_msg(struct iser_conn *c, unsigned idx, uint32_t len, uint8_t **bhs, uint8_t **data, uint32_t *dlen);

/*
 * Poll one batch (ISER_POLL_BATCH) of completions.  deliver (full feature
 * phase): received PDUs go to the session and their buffers are reposted;
 * otherwise (login phase) they are queued in c->pend_idx/pend_len.  Send
 * completions release their ring entries.  Returns the number of
 * completions handled, or -EIO (a failed completion or poll), -EPROTO (the
 * login-phase queue is full) or a delivery error.
 */
int iser_poll_batch(struct iser_conn *c, bool deliver);

/* ---- iser_login.c ---- */

/*
 * transport.h send_pdu, login phase (RFC 7143 §6): the BHS and dlen bytes
 * of data (copied, at most ISER_SEND_COPY) as one SEND, waited for until it
 * completes; timeout_ms (ms) bounds the wait for a free send entry and the
 * completion.  Returns 0, -EMSGSIZE, -ETIMEDOUT, -EIO (failed completion
 * or arming) or -ECANCELED (the thread's cancel token, cancel.h).
 */
int iser_login_send_pdu(struct iscsi_transport *t, const uint8_t *bhs, const void *data, uint32_t dlen,
			int timeout_ms);

/*
 * transport.h recv_pdu, login phase (RFC 7143 §6): the next received PDU,
 * its BHS copied to bhs and its data segment (at most cap bytes) to data,
 * *dlen its length in bytes; the receive buffer is reposted.  timeout_ms
 * (ms) bounds the wait.  Returns 0, -EPROTO (malformed, or more than cap
 * bytes of data), -ETIMEDOUT, -EIO, -ECANCELED, or ibv_post_recv's error.
 */
int iser_login_recv_pdu(struct iscsi_transport *t, uint8_t *bhs, void *data, uint32_t cap, uint32_t *dlen,
			int timeout_ms);

#endif
