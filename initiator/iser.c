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
 */
#include "iser.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "be.h"
#include "cancel.h"
#include "url.h"
#include "evthread.h"
#include "log.h"
#include "pdu.h"

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
#define MSG_HDR (ISER_HDR_LEN + ISCSI_BHS_LEN)
#define AHS_MAX (255u * 4u)
#define RX_STRIDE 9344u            /* >= MSG_HDR + AHS_MAX + ISER_RECV_DSL + 3, 64-byte multiple */
#define TX_STRIDE (128u + ISER_SEND_COPY)
#define BOUNCE_SLOTS 4
#define BOUNCE_SIZE (64u * 1024u)
#define PEND_MAX 8
#define WR_SEND_TAG (1ull << 63)

struct iser_ctx {
	pthread_mutex_t lock;
	void *base;
	size_t len;
	unsigned queue_depth;
	void (*registered)(void *arg);
	void *arg;
	struct ibv_context *verbs; /* the device the first route led to (owned by librdmacm) */
	struct ibv_pd *pd;
	struct ibv_mr *mr;         /* the region's one registration; NULL when len == 0 */
};

struct tx_ent {
	struct iscsi_tx_slot slot;
};

struct bounce {
	bool used;
	uint32_t itt;
	uint8_t dir;
	void *user;
	uint32_t len;
};

struct iser_conn {
	struct iscsi_transport base;
	struct iser_ctx *ctx;
	char peer[300];
	struct rdma_event_channel *ech;
	struct rdma_cm_id *id;
	struct ibv_comp_channel *cch;
	struct ibv_cq *cq;
	bool qp_made, connected;
	unsigned nrx, ntx, ncq;
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

	const struct iscsi_transport_hooks *hooks;
	void *sess;
	struct iscsi_params params;
	struct iscsi_evthread ev;   /* the event thread and its wake-up */
};

/* ---- context ---- */

int iser_ctx_create(struct iser_ctx **out, void *base, size_t len, unsigned queue_depth,
		    void (*registered)(void *arg), void *arg)
{
	struct iser_ctx *x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	pthread_mutex_init(&x->lock, NULL);
	x->base = base;
	x->len = base ? len : 0;
	x->queue_depth = queue_depth ? queue_depth : 128;
	x->registered = registered;
	x->arg = arg;
	*out = x;
	return 0;
}

void iser_ctx_destroy(struct iser_ctx *x)
{
	if (!x)
		return;
	if (x->mr)
		ibv_dereg_mr(x->mr);
	if (x->pd)
		ibv_dealloc_pd(x->pd);
	pthread_mutex_destroy(&x->lock);
	free(x);
}

/* The PD and the region's registration on the device `verbs`, made once. */
static int ctx_attach(struct iser_ctx *x, struct ibv_context *verbs, char *err, size_t err_cap)
{
	int rc = 0;
	pthread_mutex_lock(&x->lock);
	if (x->verbs && x->verbs != verbs) {
		snprintf(err, err_cap, "the route to the portal now leads to another RDMA device (%s, was %s)",
			 ibv_get_device_name(verbs->device), ibv_get_device_name(x->verbs->device));
		rc = -ENODEV;
	} else if (!x->pd) {
		x->pd = ibv_alloc_pd(verbs);
		if (!x->pd) {
			rc = -errno ? -errno : -ENOMEM;
			snprintf(err, err_cap, "cannot allocate an RDMA protection domain on %s: %s",
				 ibv_get_device_name(verbs->device), strerror(-rc));
		} else {
			x->verbs = verbs;
		}
	}
	if (!rc && x->len && !x->mr) {
		x->mr = ibv_reg_mr(x->pd, x->base, x->len,
				   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
		if (!x->mr) {
			rc = -errno ? -errno : -ENOMEM;
			snprintf(err, err_cap, "cannot register the %zu-byte buffer pool for RDMA: %s (raise RLIMIT_MEMLOCK)",
				 x->len, strerror(-rc));
		} else {
			log_debug("iSER: buffer pool registered once: %zu bytes, rkey 0x%08x", x->len, x->mr->rkey);
			if (x->registered)
				x->registered(x->arg);
		}
	}
	pthread_mutex_unlock(&x->lock);
	return rc;
}

/* ---- connection setup and teardown ---- */

static int64_t now_ms(void) { return iscsi_now_ms(); }

static int wait_readable(int fd, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int r = iscsi_poll_cancellable(&p, 1, (int)(left > 1000000 ? 1000000 : left));
		if (r > 0)
			return 0;
		if (r < 0)
			return r; /* -ECANCELED: the thread's cancel token fired (cancel.h) */
	}
}

/* Wait for CM event `want`; returns 0 with the event (ack it), or -errno and a reason in err. */
static int cm_wait(struct iser_conn *c, enum rdma_cm_event_type want, int64_t deadline,
		   struct rdma_cm_event **ev, char *err, size_t err_cap)
{
	for (;;) {
		if (rdma_get_cm_event(c->ech, ev) == 0)
			break;
		if (errno != EAGAIN) {
			snprintf(err, err_cap, "RDMA CM: %s", strerror(errno));
			return -errno;
		}
		int rc = wait_readable(c->ech->fd, deadline);
		if (rc) {
			snprintf(err, err_cap, "iSER connection to %s timed out waiting for %s", c->peer,
				 rdma_event_str(want));
			return rc;
		}
	}
	if ((*ev)->event == want)
		return 0;
	int rc;
	switch ((*ev)->event) {
	case RDMA_CM_EVENT_REJECTED:
		rc = -ECONNREFUSED;
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
		rc = -EHOSTUNREACH;
		break;
	default:
		rc = -ECONNRESET;
	}
	snprintf(err, err_cap, "iSER connection to %s failed: %s (status %d)", c->peer, rdma_event_str((*ev)->event),
		 (*ev)->status);
	rdma_ack_cm_event(*ev);
	*ev = NULL;
	return rc;
}

static int post_rx(struct iser_conn *c, const unsigned *idx, unsigned n)
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

/* Drain what the QP still holds after the disconnect (flush completions), briefly. */
static void drain_cq(struct iser_conn *c)
{
	int64_t deadline = now_ms() + 1000;
	struct ibv_wc wc[ISER_POLL_BATCH];
	while ((c->rx_posted || c->tx_tail < c->tx_head) && now_ms() < deadline) {
		int n = ibv_poll_cq(c->cq, ISER_POLL_BATCH, wc);
		if (n < 0)
			break;
		if (n == 0) {
			usleep(1000);
			continue;
		}
		for (int i = 0; i < n; i++) {
			if (wc[i].wr_id & WR_SEND_TAG)
				c->tx_tail = (wc[i].wr_id & ~WR_SEND_TAG) + 1;
			else if (c->rx_posted)
				c->rx_posted--;
		}
	}
}

static void conn_free(struct iser_conn *c)
{
	if (c->id && c->connected) {
		struct rdma_cm_event *ev;
		char err[64];
		rdma_disconnect(c->id);
		c->connected = false;
		/* wait briefly for DISCONNECTED so no event is left unacknowledged */
		if (cm_wait(c, RDMA_CM_EVENT_DISCONNECTED, now_ms() + 1000, &ev, err, sizeof(err)) == 0)
			rdma_ack_cm_event(ev);
	}
	if (c->qp_made) {
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
		ibv_modify_qp(c->id->qp, &a, IBV_QP_STATE);
		drain_cq(c);
		rdma_destroy_qp(c->id);
	}
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->cch)
		ibv_destroy_comp_channel(c->cch);
	if (c->mem_mr)
		ibv_dereg_mr(c->mem_mr);
	free(c->mem);
	free(c->txr);
	if (c->id)
		rdma_destroy_id(c->id);
	if (c->ech)
		rdma_destroy_event_channel(c->ech);
	iscsi_evthread_fini(&c->ev);
	free(c);
}

static int iser_connect(struct iscsi_transport **out, void *vctx, const char *host, unsigned port,
			int timeout_ms, char *err, size_t err_cap)
{
	struct iser_ctx *x = vctx;
	if (!x) {
		snprintf(err, err_cap, "iSER needs its per-mount context");
		return -EINVAL;
	}
	struct iser_conn *c = calloc(1, sizeof(*c));
	if (!c) {
		snprintf(err, err_cap, "out of memory");
		return -ENOMEM;
	}
	c->base.ops = &iscsi_iser_transport;
	c->ctx = x;
	iscsi_evthread_init(&c->ev);
	snprintf(c->peer, sizeof(c->peer), ISCSI_HOSTPORT_FMT, ISCSI_HOSTPORT_ARGS(host, port));
	int64_t deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 10000);
	int rc;
	struct rdma_cm_event *ev = NULL;

	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
	char service[16];
	snprintf(service, sizeof(service), "%u", port);
	if ((rc = getaddrinfo(host, service, &hints, &ai))) {
		snprintf(err, err_cap, "cannot resolve %s: %s", host, gai_strerror(rc));
		free(c);
		return -EHOSTUNREACH;
	}
	c->ech = rdma_create_event_channel();
	if (!c->ech || rdma_create_id(c->ech, &c->id, c, RDMA_PS_TCP)) {
		rc = -errno;
		snprintf(err, err_cap, "no RDMA CM (no RDMA device or rdma_cm module?): %s", strerror(errno));
		freeaddrinfo(ai);
		goto fail;
	}
	fcntl(c->ech->fd, F_SETFL, fcntl(c->ech->fd, F_GETFL) | O_NONBLOCK);
	int step = timeout_ms > 0 ? timeout_ms / 2 : 5000;
	rc = rdma_resolve_addr(c->id, NULL, ai->ai_addr, step);
	freeaddrinfo(ai);
	if (rc) {
		rc = -errno;
		snprintf(err, err_cap, "no RDMA route to %s: %s", c->peer, strerror(errno));
		goto fail;
	}
	if ((rc = cm_wait(c, RDMA_CM_EVENT_ADDR_RESOLVED, deadline, &ev, err, err_cap)))
		goto fail;
	rdma_ack_cm_event(ev);
	if (rdma_resolve_route(c->id, step)) {
		rc = -errno;
		snprintf(err, err_cap, "no RDMA route to %s: %s", c->peer, strerror(errno));
		goto fail;
	}
	if ((rc = cm_wait(c, RDMA_CM_EVENT_ROUTE_RESOLVED, deadline, &ev, err, err_cap)))
		goto fail;
	rdma_ack_cm_event(ev);
	if ((rc = ctx_attach(x, c->id->verbs, err, err_cap)))
		goto fail;

	struct ibv_device_attr da;
	if (ibv_query_device(c->id->verbs, &da)) {
		rc = -EIO;
		snprintf(err, err_cap, "cannot query RDMA device %s", ibv_get_device_name(c->id->verbs->device));
		goto fail;
	}
	unsigned qd = x->queue_depth;
	c->nrx = 2 * qd + 8 + ISER_UNEXPECTED + ISER_IMMEDIATE_RX;
	c->ntx = 2 * qd + 16;
	if (c->nrx > (unsigned)da.max_qp_wr)
		c->nrx = (unsigned)da.max_qp_wr;
	if (c->ntx > (unsigned)da.max_qp_wr)
		c->ntx = (unsigned)da.max_qp_wr;
	c->ncq = c->nrx + c->ntx;
	if (c->ncq > (unsigned)da.max_cqe) {
		rc = -EINVAL;
		snprintf(err, err_cap, "queue depth %u needs %u CQ entries, %s has %d", qd, c->ncq,
			 ibv_get_device_name(c->id->verbs->device), da.max_cqe);
		goto fail;
	}
	c->cch = ibv_create_comp_channel(c->id->verbs);
	c->cq = c->cch ? ibv_create_cq(c->id->verbs, (int)c->ncq, NULL, c->cch, 0) : NULL;
	if (!c->cq) {
		rc = -ENOMEM;
		snprintf(err, err_cap, "cannot create an RDMA completion queue of %u entries", c->ncq);
		goto fail;
	}
	fcntl(c->cch->fd, F_SETFL, fcntl(c->cch->fd, F_GETFL) | O_NONBLOCK);
	struct ibv_qp_init_attr qa = {
		.send_cq = c->cq,
		.recv_cq = c->cq,
		.qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = c->ntx, .max_recv_wr = c->nrx, .max_send_sge = 2, .max_recv_sge = 1},
		.sq_sig_all = 0,
	};
	if (rdma_create_qp(c->id, x->pd, &qa)) {
		rc = -errno;
		snprintf(err, err_cap, "cannot create the RDMA queue pair: %s", strerror(errno));
		goto fail;
	}
	c->qp_made = true;
	c->memlen = (size_t)c->nrx * RX_STRIDE + (size_t)c->ntx * TX_STRIDE + (size_t)BOUNCE_SLOTS * BOUNCE_SIZE;
	c->txr = calloc(c->ntx, sizeof(*c->txr));
	if (posix_memalign((void **)&c->mem, 4096, c->memlen) || !c->txr) {
		c->mem = NULL;
		rc = -ENOMEM;
		snprintf(err, err_cap, "out of memory");
		goto fail;
	}
	c->rxmem = c->mem;
	c->txmem = c->rxmem + (size_t)c->nrx * RX_STRIDE;
	c->bmem = c->txmem + (size_t)c->ntx * TX_STRIDE;
	c->mem_mr = ibv_reg_mr(x->pd, c->mem, c->memlen, IBV_ACCESS_LOCAL_WRITE);
	if (!c->mem_mr) {
		rc = -errno;
		snprintf(err, err_cap, "cannot register %zu bytes of iSER buffers: %s (raise RLIMIT_MEMLOCK)", c->memlen,
			 strerror(errno));
		goto fail;
	}
	{
		unsigned *all = malloc(c->nrx * sizeof(*all));
		if (!all) {
			rc = -ENOMEM;
			snprintf(err, err_cap, "out of memory");
			goto fail;
		}
		for (unsigned i = 0; i < c->nrx; i++)
			all[i] = i;
		rc = post_rx(c, all, c->nrx);
		free(all);
		if (rc) {
			snprintf(err, err_cap, "cannot post RDMA receive buffers: %s", strerror(-rc));
			goto fail;
		}
	}
	uint8_t priv[4] = {ISER_CM_ZBVA_NOT_SUP | ISER_CM_SIE_NOT_SUP, 0, 0, 0};
	unsigned rd = da.max_qp_rd_atom < 16 ? (unsigned)da.max_qp_rd_atom : 16;
	unsigned init = da.max_qp_init_rd_atom < 16 ? (unsigned)da.max_qp_init_rd_atom : 16;
	struct rdma_conn_param cp = {
		.private_data = priv,
		.private_data_len = sizeof(priv),
		.responder_resources = (uint8_t)rd, /* the target's RDMA Reads of WRITE data */
		.initiator_depth = (uint8_t)init,
		.retry_count = 7,
		.rnr_retry_count = 7,
	};
	if (rdma_connect(c->id, &cp)) {
		rc = -errno;
		snprintf(err, err_cap, "iSER connect to %s: %s", c->peer, strerror(errno));
		goto fail;
	}
	if ((rc = cm_wait(c, RDMA_CM_EVENT_ESTABLISHED, deadline, &ev, err, err_cap)))
		goto fail;
	if (ev->param.conn.private_data_len >= 4 && ev->param.conn.private_data)
		log_debug("iSER: CM REP private data flags 0x%02x",
			  ((const uint8_t *)ev->param.conn.private_data)[0]);
	rdma_ack_cm_event(ev);
	c->connected = true;
	log_debug("iSER: connected to %s over %s (%u receive, %u send WRs)", c->peer,
		  ibv_get_device_name(c->id->verbs->device), c->nrx, c->ntx);
	*out = &c->base;
	return 0;
fail:
	conn_free(c);
	return rc;
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
	uint32_t lkey = c->mem_mr->lkey;
	memset(hdr, 0, ISER_HDR_LEN);
	hdr[0] = ISER_CTRL;
	if (s->xfer_dir && s->xfer_len) {
		uint64_t va;
		uint32_t stag;
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
	}
	memcpy(hdr + ISER_HDR_LEN, s->bhs, ISCSI_BHS_LEN);
	sge[0] = (struct ibv_sge){(uintptr_t)hdr, MSG_HDR, lkey};
	int nsge = 1;
	if (s->dlen) {
		uint32_t len = s->dlen; /* iSER sends no padding: the SEND length delimits the PDU */
		struct bounce *b;
		if (in_region(c, s->data, len)) {
			sge[1] = (struct ibv_sge){(uintptr_t)s->data, len, c->ctx->mr->lkey};
		} else if ((b = bounce_find(c, itt)) && (const uint8_t *)s->data >= (const uint8_t *)b->user &&
			   (size_t)((const uint8_t *)s->data - (const uint8_t *)b->user) + len <= b->len) {
			size_t off = (size_t)((const uint8_t *)s->data - (const uint8_t *)b->user);
			sge[1] = (struct ibv_sge){(uintptr_t)(c->bmem + (size_t)(b - c->bounce) * BOUNCE_SIZE + off), len, lkey};
		} else if (len <= ISER_SEND_COPY) {
			memcpy(copy, s->data, len);
			sge[1] = (struct ibv_sge){(uintptr_t)copy, len, lkey};
		} else {
			log_err("iSER: a %u-byte data segment outside the pool", len);
			return -EMSGSIZE;
		}
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
static int post_sends(struct iser_conn *c, const struct iscsi_tx_slot *slots, int n)
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
static int tx_flush(struct iser_conn *c)
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
		int rc = post_sends(c, slots, n);
		if (rc)
			return rc;
	}
}

/* ---- receive path ---- */

/* Validate a received message; *bhs, *data, *dlen point into the buffer. 0 or -EPROTO. */
static int parse_msg(struct iser_conn *c, unsigned idx, uint32_t len, uint8_t **bhs, uint8_t **data, uint32_t *dlen)
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
static int rx_deliver(struct iser_conn *c, unsigned idx, uint32_t len)
{
	uint8_t *bhs, *data;
	uint32_t dlen;
	int rc = parse_msg(c, idx, len, &bhs, &data, &dlen);
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
static int poll_batch(struct iser_conn *c, bool deliver)
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
		rc = rx_deliver(c, idx, wc[i].byte_len);
		repost[nrep++] = idx;
	}
	if (nrep && !rc)
		rc = post_rx(c, repost, nrep);
	return rc ? rc : n;
}

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
	int n = poll_batch(c, false);
	if (n != 0)
		return n < 0 ? n : 0;
	int64_t left = deadline - now_ms();
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

/* ---- login phase ---- */

static int iser_send_pdu(struct iscsi_transport *t, const uint8_t *bhs, const void *data, uint32_t dlen,
			 int timeout_ms)
{
	struct iser_conn *c = (struct iser_conn *)t;
	struct iscsi_tx_slot s = {.data = data, .dlen = dlen};
	memcpy(s.bhs, bhs, ISCSI_BHS_LEN);
	if (dlen > ISER_SEND_COPY)
		return -EMSGSIZE;
	int64_t deadline = now_ms() + timeout_ms;
	while (c->tx_head - c->tx_tail >= c->ntx) {
		int rc = poll_batch(c, false);
		if (rc < 0)
			return rc;
		if (rc == 0 && now_ms() >= deadline)
			return -ETIMEDOUT;
		if (rc == 0 && (rc = cq_wait(c, deadline)))
			return rc;
	}
	int rc = post_sends(c, &s, 1);
	if (rc)
		return rc;
	uint64_t mine = c->tx_head;
	while (c->tx_tail < mine) {
		rc = poll_batch(c, false);
		if (rc < 0)
			return rc;
		if (rc == 0) {
			if (now_ms() >= deadline)
				return -ETIMEDOUT;
			if ((rc = cq_wait(c, deadline)))
				return rc;
		}
	}
	return 0;
}

static int iser_recv_pdu(struct iscsi_transport *t, uint8_t *bhs, void *data, uint32_t cap, uint32_t *dlen,
			 int timeout_ms)
{
	struct iser_conn *c = (struct iser_conn *)t;
	int64_t deadline = now_ms() + timeout_ms;
	while (!c->npend) {
		int rc = poll_batch(c, false);
		if (rc < 0)
			return rc;
		if (rc == 0) {
			if (now_ms() >= deadline)
				return -ETIMEDOUT;
			if ((rc = cq_wait(c, deadline)))
				return rc;
		}
	}
	unsigned idx = c->pend_idx[0];
	uint32_t len = c->pend_len[0];
	c->npend--;
	memmove(c->pend_idx, c->pend_idx + 1, c->npend * sizeof(c->pend_idx[0]));
	memmove(c->pend_len, c->pend_len + 1, c->npend * sizeof(c->pend_len[0]));
	uint8_t *b, *d;
	uint32_t dl;
	int rc = parse_msg(c, idx, len, &b, &d, &dl);
	if (!rc && dl > cap)
		rc = -EPROTO;
	if (!rc) {
		memcpy(bhs, b, ISCSI_BHS_LEN);
		memcpy(data, d, dl);
		*dlen = dl;
	}
	int prc = post_rx(c, &idx, 1);
	return rc ? rc : prc;
}

/* ---- full feature phase ---- */

/* A CM event while connected: anything but a stray one ends the connection. */
static int cm_event(struct iser_conn *c)
{
	struct rdma_cm_event *ev;
	int rc = 0;
	while (rdma_get_cm_event(c->ech, &ev) == 0) {
		switch (ev->event) {
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
		case RDMA_CM_EVENT_ADDR_CHANGE:
			log_debug("iSER: %s: %s", c->peer, rdma_event_str(ev->event));
			c->connected = ev->event != RDMA_CM_EVENT_DISCONNECTED && c->connected;
			rc = -ECONNRESET;
			break;
		default:
			break;
		}
		rdma_ack_cm_event(ev);
	}
	return rc;
}

static void *event_thread(void *arg)
{
	struct iser_conn *c = arg;
	int err = 0;
	int64_t next_tick = now_ms() + ISCSI_TICK_MS;
	/* PDUs that arrived with the last login response */
	for (unsigned i = 0; i < c->npend && !err; i++) {
		err = rx_deliver(c, c->pend_idx[i], c->pend_len[i]);
		if (!err)
			err = post_rx(c, &c->pend_idx[i], 1);
	}
	c->npend = 0;
	while (!err && !atomic_load(&c->ev.stop)) {
		int64_t now = now_ms();
		if (now >= next_tick) {
			next_tick = now + ISCSI_TICK_MS;
			if (c->hooks->tick && (err = c->hooks->tick(c->sess, now)))
				break;
		}
		atomic_store(&c->ev.kicked, false);
		if ((err = tx_flush(c)))
			break;
		int n = poll_batch(c, true);
		if (n < 0) {
			err = n;
			break;
		}
		if (n > 0)
			continue;
		/* Nothing pending: arm, look once more (a completion may have raced the arm), then sleep. */
		if (ibv_req_notify_cq(c->cq, 0)) {
			err = -EIO;
			break;
		}
		if ((n = poll_batch(c, true)) != 0) {
			if (n < 0) {
				err = n;
				break;
			}
			continue;
		}
		struct pollfd p[3] = {
			{.fd = c->cch->fd, .events = POLLIN},
			{.fd = c->ev.fd, .events = POLLIN},
			{.fd = c->ech->fd, .events = POLLIN},
		};
		int64_t wait = next_tick - now_ms();
		int r = poll(p, 3, wait < 0 ? 0 : (int)wait);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			break;
		}
		if (p[0].revents & POLLIN) {
			struct ibv_cq *cq;
			void *cctx;
			if (ibv_get_cq_event(c->cch, &cq, &cctx) == 0)
				ibv_ack_cq_events(cq, 1);
		}
		if ((p[1].revents & POLLIN) && (err = iscsi_evthread_drain(&c->ev)))
			break;
		if ((p[2].revents & POLLIN) && (err = cm_event(c)))
			break;
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

static void iser_shutdown(struct iscsi_transport *t)
{
	struct iser_conn *c = (struct iser_conn *)t;
	iscsi_evthread_stop(&c->ev, c->peer);
}

static void iser_destroy(struct iscsi_transport *t)
{
	struct iser_conn *c = (struct iser_conn *)t;
	c->hooks = NULL; /* flushed sends are not handed back */
	conn_free(c);
}

const struct iscsi_transport_ops iscsi_iser_transport = {
	.name = "iser",
	.data_by_rdma = true,
	.max_cmd_bytes = ISER_MAX_CMD_BYTES,
	.connect = iser_connect,
	.send_pdu = iser_send_pdu,
	.recv_pdu = iser_recv_pdu,
	.start = iser_start,
	.kick = iser_kick,
	.shutdown = iser_shutdown,
	.destroy = iser_destroy,
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
