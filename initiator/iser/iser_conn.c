/* SPDX-License-Identifier: MIT */
/*
 * iSER connection set-up and teardown (RFC 7145 §5.1) on librdmacm, and
 * one handler per RDMA CM event.
 *
 * iser_conn_connect takes one step at a time; each step is followed in
 * this file by its undo, and iser_conn_free is the one unwind ladder
 * (on a failed connect as on destroy):
 *
 *   step                 makes                          undo
 *   conn_open_cm         CM event channel + CM ID       conn_close_cm
 *   conn_resolve_addr    ADDR_RESOLVED                  -
 *   conn_resolve_route   ROUTE_RESOLVED                 -
 *   iser_ctx_attach      PD + pool MR, once per mount   - (the mount's: iser_ctx_destroy)
 *   conn_size            query the device, queue sizes  -
 *   conn_create_cq       completion channel + CQ        conn_destroy_cq
 *   conn_create_qp       the RC QP                      conn_destroy_qp
 *   conn_alloc_buffers   rx/tx/bounce memory + its MR   conn_free_buffers
 *   conn_post_all_rx     every receive posted           (flushed by conn_destroy_qp)
 *   conn_establish       rdma_connect, ESTABLISHED      conn_disconnect
 *
 * The ladder runs the undos in reverse order, but for the buffers: the
 * QP's posted receives point into them, so the QP is moved to ERR,
 * drained and destroyed, and its CQ with it, before their registration
 * is dropped; only the CM ID goes after them.
 *
 * Threads: the caller's (connect, and destroy once the event thread is
 * stopped); iser_cm_poll on the event thread.
 */
#include "iser_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "initiator/transport/cancel.h"
#include "initiator/util/log.h"
#include "initiator/net/url.h"

/* ---- waiting for a CM event ---- */

static int wait_readable(int fd, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - iscsi_now_ms();
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

/* The next CM event (the caller acks it); `want` names the wait in a time-out.  0 or -errno, reason in err. */
static int cm_next(struct iser_conn *c, enum rdma_cm_event_type want, int64_t deadline,
		   struct rdma_cm_event **ev, char *err, size_t err_cap)
{
	for (;;) {
		if (rdma_get_cm_event(c->ech, ev) == 0)
			return 0;
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
}

/* ---- CM event handlers (set-up and teardown): each acknowledges its event ---- */

/*
 * Any event but the one a step waits for fails the step: REJECTED (the
 * target refused the connection), ADDR_ERROR / ROUTE_ERROR / UNREACHABLE,
 * or anything else (a reset).
 */
static int cm_on_unexpected(struct iser_conn *c, struct rdma_cm_event *ev, char *err, size_t err_cap)
{
	int rc;
	switch (ev->event) {
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
	snprintf(err, err_cap, "iSER connection to %s failed: %s (status %d)", c->peer, rdma_event_str(ev->event),
		 ev->status);
	rdma_ack_cm_event(ev);
	return rc;
}

/* ADDR_RESOLVED: the portal's address maps to a local RDMA device (c->id->verbs). */
static int cm_on_addr_resolved(struct iser_conn *c, struct rdma_cm_event *ev)
{
	(void)c;
	rdma_ack_cm_event(ev);
	return 0;
}

/* ROUTE_RESOLVED: a path to the portal is known; the QP can be made. */
static int cm_on_route_resolved(struct iser_conn *c, struct rdma_cm_event *ev)
{
	(void)c;
	rdma_ack_cm_event(ev);
	return 0;
}

/* ESTABLISHED: the target accepted; its REP private data (RFC 7145 §5.1.3.2) is only logged. */
static int cm_on_established(struct iser_conn *c, struct rdma_cm_event *ev)
{
	if (ev->param.conn.private_data_len >= 4 && ev->param.conn.private_data)
		log_debug("iSER: CM REP private data flags 0x%02x",
			  ((const uint8_t *)ev->param.conn.private_data)[0]);
	rdma_ack_cm_event(ev);
	c->connected = true;
	return 0;
}

/* DISCONNECTED during teardown: our rdma_disconnect is done. */
static int cm_on_disconnected(struct iser_conn *c, struct rdma_cm_event *ev)
{
	(void)c;
	rdma_ack_cm_event(ev);
	return 0;
}

/* Wait for CM event `want` and hand it to its handler; any other event fails.  0 or -errno, reason in err. */
static int cm_expect(struct iser_conn *c, enum rdma_cm_event_type want, int64_t deadline, char *err,
		     size_t err_cap)
{
	struct rdma_cm_event *ev;
	int rc = cm_next(c, want, deadline, &ev, err, err_cap);
	if (rc)
		return rc;
	if (ev->event != want)
		return cm_on_unexpected(c, ev, err, err_cap);
	switch (want) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		return cm_on_addr_resolved(c, ev);
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		return cm_on_route_resolved(c, ev);
	case RDMA_CM_EVENT_ESTABLISHED:
		return cm_on_established(c, ev);
	case RDMA_CM_EVENT_DISCONNECTED:
		return cm_on_disconnected(c, ev);
	default:
		rdma_ack_cm_event(ev);
		return 0;
	}
}

/* ---- CM events in the full feature phase ---- */

/* DISCONNECTED, DEVICE_REMOVAL or ADDR_CHANGE while connected: the connection is over (the caller acks). */
static int cm_on_conn_lost(struct iser_conn *c, const struct rdma_cm_event *ev)
{
	log_debug("iSER: %s: %s", c->peer, rdma_event_str(ev->event));
	c->connected = ev->event != RDMA_CM_EVENT_DISCONNECTED && c->connected;
	return -ECONNRESET;
}

int iser_cm_poll(struct iser_conn *c)
{
	struct rdma_cm_event *ev;
	int rc = 0;
	while (rdma_get_cm_event(c->ech, &ev) == 0) {
		switch (ev->event) {
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
		case RDMA_CM_EVENT_ADDR_CHANGE:
			rc = cm_on_conn_lost(c, ev);
			break;
		default: /* a stray event: ignored */
			break;
		}
		rdma_ack_cm_event(ev);
	}
	return rc;
}

/* ---- set-up steps, each followed by its undo ---- */

static struct iser_conn *conn_alloc(struct iser_ctx *x, const char *host, unsigned port)
{
	struct iser_conn *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->base.ops = &iscsi_iser_transport;
	c->ctx = x;
	iscsi_evthread_init(&c->ev);
	snprintf(c->peer, sizeof(c->peer), ISCSI_HOSTPORT_FMT, ISCSI_HOSTPORT_ARGS(host, port));
	return c;
}

/* The portal's addresses: 0 and *ai (the caller frees it), or -EHOSTUNREACH. */
static int conn_lookup(const char *host, unsigned port, struct addrinfo **ai, char *err, size_t err_cap)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	char service[16];
	int rc;
	*ai = NULL;
	snprintf(service, sizeof(service), "%u", port);
	if ((rc = getaddrinfo(host, service, &hints, ai))) {
		snprintf(err, err_cap, "cannot resolve %s: %s", host, gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	return 0;
}

/* The CM event channel (non-blocking) and the CM ID on it.  0 or -errno. */
static int conn_open_cm(struct iser_conn *c, char *err, size_t err_cap)
{
	c->ech = rdma_create_event_channel();
	if (!c->ech || rdma_create_id(c->ech, &c->id, c, RDMA_PS_TCP)) {
		int rc = -errno;
		snprintf(err, err_cap, "no RDMA CM (no RDMA device or rdma_cm module?): %s", strerror(errno));
		return rc;
	}
	fcntl(c->ech->fd, F_SETFL, fcntl(c->ech->fd, F_GETFL) | O_NONBLOCK);
	return 0;
}

static void conn_close_cm(struct iser_conn *c)
{
	if (c->id)
		rdma_destroy_id(c->id);
	if (c->ech)
		rdma_destroy_event_channel(c->ech);
}

/* Resolve the portal's address to a local RDMA device; frees ai.  0 or -errno. */
static int conn_resolve_addr(struct iser_conn *c, struct addrinfo *ai, int step_ms, int64_t deadline, char *err,
			     size_t err_cap)
{
	int rc = rdma_resolve_addr(c->id, NULL, ai->ai_addr, step_ms);
	freeaddrinfo(ai);
	if (rc) {
		rc = -errno;
		snprintf(err, err_cap, "no RDMA route to %s: %s", c->peer, strerror(errno));
		return rc;
	}
	return cm_expect(c, RDMA_CM_EVENT_ADDR_RESOLVED, deadline, err, err_cap);
}

/* Resolve the route to the portal.  0 or -errno. */
static int conn_resolve_route(struct iser_conn *c, int step_ms, int64_t deadline, char *err, size_t err_cap)
{
	if (rdma_resolve_route(c->id, step_ms)) {
		int rc = -errno;
		snprintf(err, err_cap, "no RDMA route to %s: %s", c->peer, strerror(errno));
		return rc;
	}
	return cm_expect(c, RDMA_CM_EVENT_ROUTE_RESOLVED, deadline, err, err_cap);
}

/* Query the device into *da and size the queues (see iser.c).  0, -EIO or -EINVAL. */
static int conn_size(struct iser_conn *c, struct ibv_device_attr *da, char *err, size_t err_cap)
{
	if (ibv_query_device(c->id->verbs, da)) {
		snprintf(err, err_cap, "cannot query RDMA device %s", ibv_get_device_name(c->id->verbs->device));
		return -EIO;
	}
	unsigned qd = c->ctx->queue_depth;
	c->nrx = 2 * qd + 8 + ISER_UNEXPECTED + ISER_IMMEDIATE_RX;
	c->ntx = 2 * qd + 16;
	if (c->nrx > (unsigned)da->max_qp_wr)
		c->nrx = (unsigned)da->max_qp_wr;
	if (c->ntx > (unsigned)da->max_qp_wr)
		c->ntx = (unsigned)da->max_qp_wr;
	c->ncq = c->nrx + c->ntx;
	if (c->ncq > (unsigned)da->max_cqe) {
		snprintf(err, err_cap, "queue depth %u needs %u CQ entries, %s has %d", qd, c->ncq,
			 ibv_get_device_name(c->id->verbs->device), da->max_cqe);
		return -EINVAL;
	}
	return 0;
}

/* One CQ for both queues, on a non-blocking completion channel.  0 or -ENOMEM. */
static int conn_create_cq(struct iser_conn *c, char *err, size_t err_cap)
{
	c->cch = ibv_create_comp_channel(c->id->verbs);
	c->cq = c->cch ? ibv_create_cq(c->id->verbs, (int)c->ncq, NULL, c->cch, 0) : NULL;
	if (!c->cq) {
		snprintf(err, err_cap, "cannot create an RDMA completion queue of %u entries", c->ncq);
		return -ENOMEM;
	}
	fcntl(c->cch->fd, F_SETFL, fcntl(c->cch->fd, F_GETFL) | O_NONBLOCK);
	return 0;
}

static void conn_destroy_cq(struct iser_conn *c)
{
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->cch)
		ibv_destroy_comp_channel(c->cch);
}

/* The RC QP on the context's PD, SENDs unsignalled unless asked.  0 or -errno. */
static int conn_create_qp(struct iser_conn *c, char *err, size_t err_cap)
{
	struct ibv_qp_init_attr qa = {
		.send_cq = c->cq,
		.recv_cq = c->cq,
		.qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = c->ntx, .max_recv_wr = c->nrx, .max_send_sge = 2, .max_recv_sge = 1},
		.sq_sig_all = 0,
	};
	if (rdma_create_qp(c->id, c->ctx->pd, &qa)) {
		int rc = -errno;
		snprintf(err, err_cap, "cannot create the RDMA queue pair: %s", strerror(errno));
		return rc;
	}
	c->qp_made = true;
	return 0;
}

/* Drain what the QP still holds after the disconnect (flush completions), briefly. */
static void drain_cq(struct iser_conn *c)
{
	int64_t deadline = iscsi_now_ms() + 1000;
	struct ibv_wc wc[ISER_POLL_BATCH];
	while ((c->rx_posted || c->tx_tail < c->tx_head) && iscsi_now_ms() < deadline) {
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

/* QP to ERR, its flushed completions drained (briefly), then destroyed. */
static void conn_destroy_qp(struct iser_conn *c)
{
	if (!c->qp_made)
		return;
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
	ibv_modify_qp(c->id->qp, &a, IBV_QP_STATE);
	drain_cq(c);
	rdma_destroy_qp(c->id);
}

/* The connection's rx/tx/bounce memory and the send ring, registered for local write.  0 or -errno. */
static int conn_alloc_buffers(struct iser_conn *c, char *err, size_t err_cap)
{
	c->memlen = (size_t)c->nrx * RX_STRIDE + (size_t)c->ntx * TX_STRIDE + (size_t)BOUNCE_SLOTS * BOUNCE_SIZE;
	c->txr = calloc(c->ntx, sizeof(*c->txr));
	if (posix_memalign((void **)&c->mem, 4096, c->memlen) || !c->txr) {
		c->mem = NULL;
		snprintf(err, err_cap, "out of memory");
		return -ENOMEM;
	}
	c->rxmem = c->mem;
	c->txmem = c->rxmem + (size_t)c->nrx * RX_STRIDE;
	c->bmem = c->txmem + (size_t)c->ntx * TX_STRIDE;
	c->mem_mr = ibv_reg_mr(c->ctx->pd, c->mem, c->memlen, IBV_ACCESS_LOCAL_WRITE);
	if (!c->mem_mr) {
		int rc = -errno;
		snprintf(err, err_cap, "cannot register %zu bytes of iSER buffers: %s (raise RLIMIT_MEMLOCK)", c->memlen,
			 strerror(errno));
		return rc;
	}
	return 0;
}

static void conn_free_buffers(struct iser_conn *c)
{
	if (c->mem_mr)
		ibv_dereg_mr(c->mem_mr);
	free(c->mem);
	free(c->txr);
}

/* Every receive buffer, before the connection is requested (no RNR).  0 or -errno. */
static int conn_post_all_rx(struct iser_conn *c, char *err, size_t err_cap)
{
	unsigned *all = malloc(c->nrx * sizeof(*all));
	if (!all) {
		snprintf(err, err_cap, "out of memory");
		return -ENOMEM;
	}
	for (unsigned i = 0; i < c->nrx; i++)
		all[i] = i;
	int rc = iser_post_rx(c, all, c->nrx);
	free(all);
	if (rc)
		snprintf(err, err_cap, "cannot post RDMA receive buffers: %s", strerror(-rc));
	return rc;
}

/* rdma_connect with the iSER CM private data (RFC 7145 §5.1.3.1), then ESTABLISHED.  0 or -errno. */
static int conn_establish(struct iser_conn *c, const struct ibv_device_attr *da, int64_t deadline, char *err,
			  size_t err_cap)
{
	uint8_t priv[4] = {ISER_CM_ZBVA_NOT_SUP | ISER_CM_SIE_NOT_SUP, 0, 0, 0};
	unsigned rd = da->max_qp_rd_atom < 16 ? (unsigned)da->max_qp_rd_atom : 16;
	unsigned init = da->max_qp_init_rd_atom < 16 ? (unsigned)da->max_qp_init_rd_atom : 16;
	struct rdma_conn_param cp = {
		.private_data = priv,
		.private_data_len = sizeof(priv),
		.responder_resources = (uint8_t)rd, /* the target's RDMA Reads of WRITE data */
		.initiator_depth = (uint8_t)init,
		.retry_count = 7,
		.rnr_retry_count = 7,
	};
	if (rdma_connect(c->id, &cp)) {
		int rc = -errno;
		snprintf(err, err_cap, "iSER connect to %s: %s", c->peer, strerror(errno));
		return rc;
	}
	int rc = cm_expect(c, RDMA_CM_EVENT_ESTABLISHED, deadline, err, err_cap);
	if (rc)
		return rc;
	log_debug("iSER: connected to %s over %s (%u receive, %u send WRs)", c->peer,
		  ibv_get_device_name(c->id->verbs->device), c->nrx, c->ntx);
	return 0;
}

/* Undo conn_establish: disconnect and wait briefly for DISCONNECTED so no event is left unacknowledged. */
static void conn_disconnect(struct iser_conn *c)
{
	char err[64];
	if (!c->id || !c->connected)
		return;
	rdma_disconnect(c->id);
	c->connected = false;
	cm_expect(c, RDMA_CM_EVENT_DISCONNECTED, iscsi_now_ms() + 1000, err, sizeof(err));
}

/* ---- connect and the unwind ladder ---- */

int iser_conn_connect(struct iscsi_transport **out, void *vctx, const char *host, unsigned port, int timeout_ms,
		      char *err, size_t err_cap)
{
	struct iser_ctx *x = vctx;
	struct iser_conn *c;
	struct addrinfo *ai;
	struct ibv_device_attr da;
	int rc;

	if (!x) {
		snprintf(err, err_cap, "iSER needs its per-mount context");
		return -EINVAL;
	}
	if (!(c = conn_alloc(x, host, port))) {
		snprintf(err, err_cap, "out of memory");
		return -ENOMEM;
	}
	int64_t deadline = iscsi_now_ms() + (timeout_ms > 0 ? timeout_ms : 10000);
	int step = timeout_ms > 0 ? timeout_ms / 2 : 5000; /* each resolution's own time-out */
	if ((rc = conn_lookup(host, port, &ai, err, err_cap))) {
		free(c);
		return rc;
	}
	if ((rc = conn_open_cm(c, err, err_cap))) {
		freeaddrinfo(ai);
		goto fail;
	}
	if ((rc = conn_resolve_addr(c, ai, step, deadline, err, err_cap)) ||
	    (rc = conn_resolve_route(c, step, deadline, err, err_cap)) ||
	    (rc = iser_ctx_attach(x, c->id->verbs, err, err_cap)) ||
	    (rc = conn_size(c, &da, err, err_cap)) ||
	    (rc = conn_create_cq(c, err, err_cap)) ||
	    (rc = conn_create_qp(c, err, err_cap)) ||
	    (rc = conn_alloc_buffers(c, err, err_cap)) ||
	    (rc = conn_post_all_rx(c, err, err_cap)) ||
	    (rc = conn_establish(c, &da, deadline, err, err_cap)))
		goto fail;
	*out = &c->base;
	return 0;
fail:
	iser_conn_free(c);
	return rc;
}

void iser_conn_free(struct iser_conn *c)
{
	conn_disconnect(c);
	conn_destroy_qp(c);
	conn_destroy_cq(c);
	conn_free_buffers(c);
	conn_close_cm(c);
	iscsi_evthread_fini(&c->ev);
	free(c);
}
