/* SPDX-License-Identifier: MIT */
/*
 * iSCSI over TCP (RFC 7143): the transport ops of transport.h on a
 * non-blocking socket.
 *
 * Full feature phase: one event thread per connection owns the socket and
 * everything in struct tcp_conn (tcp_conn.h) marked so.  It waits on the
 * socket and an eventfd (kick) on an io_uring (tcp_ring.c, the default)
 * or in poll(2) (poll_loop below: iscsi_tcp_set_ring(false), or no
 * ring), reads as much as the socket has into `rxbuf` and parses many
 * PDUs from it; Data-In payload that has not arrived yet is
 * read with readv straight into the destination slice; it sends batches
 * of PDUs pulled from the session with one sendmsg (BHS, payload slice,
 * padding; no copy, no allocation).
 *
 * Digests (RFC 7143 §11.1, §13.1): none during login; from start() on,
 * with HeaderDigest=CRC32C every PDU carries the CRC32C of BHS+AHS after
 * the header, and with DataDigest=CRC32C every non-empty data segment is
 * followed by the CRC32C of data+padding.  On receive nothing of a header
 * is used before its digest matched (so the header and its digest must
 * be in rxbuf first); a Data-In payload read straight into the slice is
 * checked chunk by chunk as it arrives, and the session hears of the PDU
 * (rx_pdu, which may complete the command) only after its data digest
 * matched.  A mismatch logs one line and drops the connection (ERL 0).
 * Transmit digests live in per-slot storage: no allocation either.
 *
 * Direct send (tcp_try_send): the transmit state (slots, iov, the tx_*
 * fields) is guarded by tx_lock, which the event thread holds around its
 * tx_flush and a submitter takes with trylock to write its command itself
 * while the connection is idle (one tx_fill round, non-blocking; the rest
 * of a partial write, and any error, go to the event thread, woken).
 * Lock order: tx_lock, then the session lock (inside tx_fill/tx_done);
 * nobody takes tx_lock with the session lock held.  The event thread
 * alone reads the socket.  Before conn_lost, and in tcp_shutdown before
 * the socket is closed, tx_closing is set under tx_lock: a direct send in
 * progress finishes first (its tx_done precedes conn_lost), none starts
 * after.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "cancel.h"
#include "initiator/util/clock.h"
#include "initiator/util/crc32c.h"
#include "initiator/net/url.h"
#include "evthread.h"
#include "initiator/util/log.h"
#include "transport.h"
#include "tcp_conn.h"

static const uint8_t zero_pad[4];
static atomic_bool ring_on = true; /* iscsi_tcp_set_ring */

static atomic_uint loops_ring, loops_poll; /* event threads in tcp_ring_loop, in poll_loop */

void iscsi_tcp_set_ring(bool on) { atomic_store(&ring_on, on); }

void iscsi_tcp_loops(unsigned *ring, unsigned *poll)
{
	*ring = atomic_load(&loops_ring);
	*poll = atomic_load(&loops_poll);
}

void tcp_ring_running(bool on)
{
	if (on)
		atomic_fetch_add(&loops_ring, 1);
	else
		atomic_fetch_sub(&loops_ring, 1);
}

/* The tick hook's clock (transport.h): clk_now_ms, for login.c, discovery.c and iser.c. */
int64_t iscsi_now_ms(void) { return clk_now_ms(); }

static int wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - clk_now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p = {.fd = fd, .events = events};
		int r = iscsi_poll_cancellable(&p, 1, (int)(left > INT_MAX ? INT_MAX : left));
		if (r > 0)
			return 0;
		if (r < 0)
			return r; /* -ECANCELED: the thread's cancel token fired (cancel.h) */
	}
}

static int tcp_connect(struct iscsi_transport **out, void *ctx, const char *host, unsigned port,
		       int timeout_ms, char *err, size_t err_cap)
{
	(void)ctx;
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	struct addrinfo *ai = NULL;
	char service[16];
	snprintf(service, sizeof(service), "%u", port);
	int rc = getaddrinfo(host, service, &hints, &ai);
	if (rc) {
		snprintf(err, err_cap, "cannot resolve %s: %s", host, gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	int fd = -1, last = -ECONNREFUSED;
	int64_t deadline = clk_now_ms() + (timeout_ms > 0 ? timeout_ms : 10000);
	for (struct addrinfo *a = ai; a; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
		if (fd < 0) {
			last = -errno;
			continue;
		}
		if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
			break;
		if (errno == EINPROGRESS) {
			rc = wait_fd(fd, POLLOUT, deadline);
			int soerr = 0;
			socklen_t sl = sizeof(soerr);
			if (rc == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0)
				break;
			last = rc ? rc : -soerr;
		} else {
			last = -errno;
		}
		close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	if (fd < 0) {
		snprintf(err, err_cap, "cannot connect to " ISCSI_HOSTPORT_FMT ": %s", ISCSI_HOSTPORT_ARGS(host, port),
			 strerror(-last));
		return last;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	struct tcp_conn *c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		snprintf(err, err_cap, "out of memory");
		return -ENOMEM;
	}
	c->base.ops = &iscsi_tcp_transport;
	c->fd = fd;
	pthread_mutex_init(&c->tx_lock, NULL);
	iscsi_evthread_init(&c->ev);
	snprintf(c->peer, sizeof(c->peer), ISCSI_HOSTPORT_FMT, ISCSI_HOSTPORT_ARGS(host, port));
	*out = &c->base;
	return 0;
}

/*
 * Blocking I/O for the login phase: moves every byte of iov (cnt entries)
 * in one direction, events POLLOUT (writev) or POLLIN (readv), waiting on
 * the non-blocking socket until deadline (clk_now_ms, ms).  iov is
 * advanced in place.  0; -ETIMEDOUT at the deadline, -ECANCELED when the
 * thread's cancel token fired (cancel.h), -ECONNRESET when the peer closed
 * before all was read, or the negative errno of writev/readv.
 */
static int io_all(int fd, short events, struct iovec *iov, int cnt, int64_t deadline)
{
	for (;;) {
		while (cnt > 0 && iov->iov_len == 0) {
			iov++;
			cnt--;
		}
		if (cnt == 0)
			return 0;
		ssize_t n = events == POLLOUT ? writev(fd, iov, cnt) : readv(fd, iov, cnt);
		if (n == 0 && events == POLLIN)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EAGAIN) {
				int rc = wait_fd(fd, events, deadline);
				if (rc)
					return rc;
				continue;
			}
			if (errno == EINTR)
				continue;
			return -errno;
		}
		while (cnt > 0 && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			cnt--;
		}
		if (cnt > 0) {
			iov->iov_base = (uint8_t *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
}

/* len bytes into buf (io_all, POLLIN). */
static int read_exact(int fd, void *buf, size_t len, int64_t deadline)
{
	struct iovec iov = {buf, len};
	return io_all(fd, POLLIN, &iov, 1, deadline);
}

static int tcp_send_pdu(struct iscsi_transport *t, const uint8_t *bhs, const void *data, uint32_t dlen,
			int timeout_ms)
{
	struct tcp_conn *c = (struct tcp_conn *)t;
	struct iovec iov[3] = {
		{(void *)bhs, ISCSI_BHS_LEN},
		{(void *)data, dlen},
		{(void *)zero_pad, iscsi_pad_len(dlen)},
	};
	return io_all(c->fd, POLLOUT, iov, 3, clk_now_ms() + timeout_ms);
}

static int tcp_recv_pdu(struct iscsi_transport *t, uint8_t *bhs, void *data, uint32_t cap, uint32_t *dlen,
			int timeout_ms)
{
	struct tcp_conn *c = (struct tcp_conn *)t;
	int64_t deadline = clk_now_ms() + timeout_ms;
	uint8_t sink[AHS_MAX];
	int rc = read_exact(c->fd, bhs, ISCSI_BHS_LEN, deadline);
	if (rc)
		return rc;
	uint32_t ahs = iscsi_wire_ahs_bytes(bhs), len = iscsi_wire_dlen(bhs);
	if (ahs && (rc = read_exact(c->fd, sink, ahs, deadline)))
		return rc;
	if (len > cap)
		return -EPROTO;
	if ((rc = read_exact(c->fd, data, len, deadline)))
		return rc;
	if ((rc = read_exact(c->fd, sink, iscsi_pad_len(len), deadline)))
		return rc;
	*dlen = len;
	return 0;
}

/* ---- transmit side (tx_lock held) ---- */

/* Lay out the n slots of a new batch in iov: BHS, header digest, data, padding, data digest. */
static void tx_build(struct tcp_conn *c, int n)
{
	c->nslots = n;
	c->iovcnt = c->iovpos = 0;
	for (int i = 0; i < n; i++) {
		struct iscsi_tx_slot *s = &c->slots[i];
		c->iov[c->iovcnt++] = (struct iovec){s->bhs, ISCSI_BHS_LEN};
		if (c->hdig) {
			/* the session sends no AHS: the BHS is the whole header */
			iscsi_digest_put(c->tx_dig[i][0], iscsi_crc32c(0, s->bhs, ISCSI_BHS_LEN));
			c->iov[c->iovcnt++] = (struct iovec){c->tx_dig[i][0], ISCSI_DIGEST_LEN};
		}
		if (s->dlen) {
			c->iov[c->iovcnt++] = (struct iovec){(void *)s->data, s->dlen};
			uint32_t pad = iscsi_pad_len(s->dlen);
			if (pad)
				c->iov[c->iovcnt++] = (struct iovec){(void *)zero_pad, pad};
			if (c->ddig) {
				uint32_t crc = iscsi_crc32c(0, s->data, s->dlen);
				iscsi_digest_put(c->tx_dig[i][1], iscsi_crc32c(crc, zero_pad, pad));
				c->iov[c->iovcnt++] = (struct iovec){c->tx_dig[i][1], ISCSI_DIGEST_LEN};
			}
		}
	}
}

void tcp_tx_advance(struct tcp_conn *c, size_t w)
{
	while (c->iovpos < c->iovcnt && w >= c->iov[c->iovpos].iov_len) {
		w -= c->iov[c->iovpos].iov_len;
		c->iovpos++;
	}
	if (c->iovpos < c->iovcnt) {
		c->iov[c->iovpos].iov_base = (uint8_t *)c->iov[c->iovpos].iov_base + w;
		c->iov[c->iovpos].iov_len -= w;
	}
}

/* Write what the batch has left, without blocking: 1 all written, 0 the socket is full, or -errno. */
static int tx_write(struct tcp_conn *c)
{
	while (c->iovpos < c->iovcnt) {
		struct msghdr m = {.msg_iov = c->iov + c->iovpos, .msg_iovlen = (size_t)(c->iovcnt - c->iovpos)};
		ssize_t w = sendmsg(c->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EAGAIN)
				return 0;
			if (errno == EINTR)
				continue;
			return -errno;
		}
		tcp_tx_advance(c, (size_t)w);
	}
	return 1;
}

void tcp_tx_done(struct tcp_conn *c)
{
	if (c->nslots && c->hooks->tx_done)
		c->hooks->tx_done(c->sess, c->slots, c->nslots);
	c->nslots = 0;
}

bool tcp_tx_next(struct tcp_conn *c)
{
	if (c->iovpos < c->iovcnt)
		return true;
	tcp_tx_done(c);
	int n = c->hooks->tx_fill(c->sess, c->slots, TX_SLOTS);
	if (n <= 0)
		return false;
	tx_build(c, n);
	return true;
}

/*
 * Send what is queued: finish the batch in progress (then tx_done), pull
 * the next with tx_fill, and so on; with once, at most one tx_fill.
 * Returns 0 (all sent, or the socket is full: wait for POLLOUT) or -errno.
 */
static int tx_flush(struct tcp_conn *c, bool once)
{
	if (c->tx_err)
		return c->tx_err;
	for (int fills = 0;;) {
		if (c->iovpos == c->iovcnt) {
			if (fills && (once || (c->hooks->tx_idle && c->hooks->tx_idle(c->sess)))) {
				tcp_tx_done(c); /* the last fill took all there was: no second round for nothing */
				return 0;
			}
			fills++;
			if (!tcp_tx_next(c))
				return 0;
		}
		int rc = tx_write(c);
		if (rc <= 0)
			return rc;
	}
}

/*
 * try_send op (transport.h): one round of the transmit path on the
 * caller's thread when the connection is idle (this is the only command in
 * flight).  1 when it ran, 0 when the caller is to kick.  With others in
 * flight the event thread sends it: it is awake, or wakes for their
 * responses, and its batches put many PDUs into one writev (a send per
 * command from the caller measured 1.5-2x the daemon's CPU per I/O at
 * QD32 over loopback).
 */
static int tcp_try_send(struct iscsi_transport *t, unsigned in_flight)
{
	struct tcp_conn *c = (struct tcp_conn *)t;
	if (in_flight > 1)
		return 0; /* the event thread's next batch takes it */
	if (pthread_mutex_trylock(&c->tx_lock))
		return 0;
	if (c->tx_closing || c->tx_err || c->iovpos < c->iovcnt) {
		pthread_mutex_unlock(&c->tx_lock);
		return 0;
	}
	int rc = tx_flush(c, true);
	if (rc)
		c->tx_err = rc;
	bool rest = c->iovpos < c->iovcnt;
	pthread_mutex_unlock(&c->tx_lock);
	if (rc || rest)
		iscsi_evthread_kick(&c->ev, c->peer); /* POLLOUT, or the error, on the event thread */
	return 1;
}

/* ---- event thread ---- */

/* A header (BHS + AHS, hdr bytes) followed by its digest: 0, or -EBADMSG. */
static int check_header_digest(struct tcp_conn *c, const uint8_t *bhs, size_t hdr)
{
	if (iscsi_crc32c(0, bhs, hdr) == iscsi_digest_get(bhs + hdr))
		return 0;
	log_err("%s: header digest mismatch: dropping the connection", c->peer);
	return -EBADMSG;
}

/* A data digest computed (crc) against the one received: 0, or -EBADMSG. */
static int check_data_digest(struct tcp_conn *c, const uint8_t *bhs, uint32_t crc, const uint8_t *dig)
{
	if (crc == iscsi_digest_get(dig))
		return 0;
	log_err("%s: data digest mismatch in a %s PDU (ITT 0x%08x, %u bytes): dropping the connection", c->peer,
		iscsi_opcode_name(iscsi_wire_opcode(bhs)), iscsi_wire_itt(bhs), iscsi_wire_dlen(bhs));
	return -EBADMSG;
}

static size_t min_size(size_t a, size_t b)
{
	return a < b ? a : b;
}

/*
 * A Data-In with a data segment whose header (hdr bytes, verified) is at
 * bhs: place what rxbuf already has of the payload; if the whole PDU is
 * there, check its data digest and hand it over, else switch to direct
 * placement for the rest.  0 or -errno.
 */
static int rx_data_in(struct tcp_conn *c, uint8_t *bhs, size_t hdr, size_t avail)
{
	uint32_t dlen = iscsi_wire_dlen(bhs), pad = iscsi_pad_len(dlen);
	uint32_t dd = c->ddig ? ISCSI_DIGEST_LEN : 0;
	const uint8_t *src = bhs + hdr;
	size_t have = avail - hdr;
	int rc;
	c->rx_exact = dlen >= RX_EXACT_MIN;
	if (have >= (size_t)dlen + pad + dd) {
		/* all of it in rxbuf: the session checks and copies it with the PDU, in one lock round */
		c->rxstart += hdr + dlen + pad + dd;
		if (dd && (rc = check_data_digest(c, bhs, iscsi_crc32c(0, src, dlen + pad), src + dlen + pad)))
			return rc;
		atomic_fetch_add_explicit(&c->bytes_copied, dlen, memory_order_relaxed);
		return c->hooks->rx_pdu(c->sess, bhs, src, dlen);
	}
	void *dest = NULL;
	if ((rc = c->hooks->rx_data_dest(c->sess, bhs, &dest)))
		return rc;
	size_t copy = min_size(have, dlen);
	memcpy(dest, src, copy);
	atomic_fetch_add_explicit(&c->bytes_copied, copy, memory_order_relaxed);
	uint32_t crc = dd ? iscsi_crc32c(0, src, copy) : 0;
	src += copy;
	have -= copy;
	size_t padhave = min_size(have, pad);
	memcpy(c->pad_sink, src, padhave);
	if (dd)
		crc = iscsi_crc32c(crc, src, padhave);
	src += padhave;
	have -= padhave;
	size_t dighave = min_size(have, dd);
	memcpy(c->dig_buf, src, dighave);
	if (copy == dlen && padhave == pad && dighave == dd) {
		c->rxstart += hdr + dlen + pad + dd;
		if (dd && (rc = check_data_digest(c, bhs, crc, c->dig_buf)))
			return rc;
		return c->hooks->rx_pdu(c->sess, bhs, NULL, dlen);
	}
	memcpy(c->datain_bhs, bhs, ISCSI_BHS_LEN);
	c->dest = (uint8_t *)dest + copy;
	c->dest_left = (uint32_t)(dlen - copy);
	c->pad_len = pad;
	c->pad_left = (uint32_t)(pad - padhave);
	c->dig_len = dd;
	c->dig_left = (uint32_t)(dd - dighave);
	c->dcrc = crc;
	c->rxstart = c->rxend = 0;
	c->in_datain = true;
	return 0;
}

/* Parse whole PDUs from rxbuf; may switch to direct Data-In placement. */
static int rx_parse(struct tcp_conn *c)
{
	while (!c->in_datain) {
		size_t avail = c->rxend - c->rxstart;
		if (avail < ISCSI_BHS_LEN)
			break;
		uint8_t *bhs = c->rxbuf + c->rxstart;
		/* TotalAHSLength is the one field used before the header digest
		 * is checked: it says where the digest is (at most 1020 bytes on). */
		size_t hdr = ISCSI_BHS_LEN + iscsi_wire_ahs_bytes(bhs);
		size_t hd = c->hdig ? ISCSI_DIGEST_LEN : 0;
		if (avail < hdr + hd)
			break;
		int rc;
		if (hd && (rc = check_header_digest(c, bhs, hdr)))
			return rc;
		uint32_t dlen = iscsi_wire_dlen(bhs), pad = iscsi_pad_len(dlen);
		if (dlen > c->params.max_recv_dsl) {
			log_err("%s: %s PDU with DataSegmentLength %u > MaxRecvDataSegmentLength %u",
				c->peer, iscsi_opcode_name(iscsi_wire_opcode(bhs)), dlen, c->params.max_recv_dsl);
			return -EPROTO;
		}
		if (iscsi_wire_opcode(bhs) == ISCSI_OP_DATA_IN && dlen > 0) {
			if ((rc = rx_data_in(c, bhs, hdr + hd, avail)))
				return rc;
			continue;
		}
		/* §11.1: a PDU without a data segment has no data digest */
		size_t dd = c->ddig && dlen ? ISCSI_DIGEST_LEN : 0;
		size_t total = hdr + hd + dlen + pad + dd;
		if (avail < total)
			break;
		c->rx_exact = false;
		c->rxstart += total;
		uint8_t *data = bhs + hdr + hd;
		if (dd && (rc = check_data_digest(c, bhs, iscsi_crc32c(0, data, dlen + pad), data + dlen + pad)))
			return rc;
		if ((rc = c->hooks->rx_pdu(c->sess, bhs, data, dlen)))
			return rc;
	}
	if (c->rxstart == c->rxend) {
		c->rxstart = c->rxend = 0;
	} else if (c->rxstart > 0 && c->rxcap - c->rxend < c->rxcap / 2) {
		memmove(c->rxbuf, c->rxbuf + c->rxstart, c->rxend - c->rxstart);
		c->rxend -= c->rxstart;
		c->rxstart = 0;
	}
	return 0;
}

/*
 * Direct Data-In placement: n bytes arrived by readv into the payload, its
 * padding, its data digest and then rxbuf.  Advances the placement, checks
 * the digest at the end and hands the PDU over.  0 or -errno.
 */
static int rx_placed(struct tcp_conn *c, size_t n)
{
	size_t k = min_size(n, c->dest_left);
	if (c->dig_len)
		c->dcrc = iscsi_crc32c(c->dcrc, c->dest, k);
	c->dest += k;
	c->dest_left -= (uint32_t)k;
	n -= k;
	k = min_size(n, c->pad_left);
	if (c->dig_len)
		c->dcrc = iscsi_crc32c(c->dcrc, c->pad_sink + (c->pad_len - c->pad_left), k);
	c->pad_left -= (uint32_t)k;
	n -= k;
	k = min_size(n, c->dig_left);
	c->dig_left -= (uint32_t)k;
	n -= k;
	c->rxstart = 0;
	c->rxend = n;
	if (c->dest_left || c->pad_left || c->dig_left)
		return 0;
	c->in_datain = false;
	int rc;
	if (c->dig_len && (rc = check_data_digest(c, c->datain_bhs, c->dcrc, c->dig_buf)))
		return rc;
	return c->hooks->rx_pdu(c->sess, c->datain_bhs, NULL, iscsi_wire_dlen(c->datain_bhs));
}

/*
 * The bytes of a header without AHS (BHS and header digest): after a large
 * Data-In the next PDU is read this far first, so that its payload, if it is
 * another large Data-In, is read straight into its slice (no copy).
 */
static size_t rx_header_len(const struct tcp_conn *c)
{
	return ISCSI_BHS_LEN + (c->hdig ? ISCSI_DIGEST_LEN : 0);
}

int tcp_rx_target(struct tcp_conn *c, struct iovec iov[4], size_t *asked)
{
	if (c->in_datain) {
		iov[0] = (struct iovec){c->dest, c->dest_left};
		iov[1] = (struct iovec){c->pad_sink + (c->pad_len - c->pad_left), c->pad_left};
		iov[2] = (struct iovec){c->dig_buf + (c->dig_len - c->dig_left), c->dig_left};
		iov[3] = (struct iovec){c->rxbuf, c->rx_exact ? rx_header_len(c) : c->rxcap};
		*asked = iov[0].iov_len + iov[1].iov_len + iov[2].iov_len + iov[3].iov_len;
		return 4;
	}
	if (c->rxend == c->rxcap)
		return -EPROTO; /* cannot happen: rxcap holds the largest PDU */
	size_t room = min_size(c->rxcap - c->rxend, RX_BATCH);
	if (c->rx_exact && c->rxend - c->rxstart < rx_header_len(c))
		room = min_size(room, rx_header_len(c) - (c->rxend - c->rxstart)); /* the rest of the next header */
	iov[0] = (struct iovec){c->rxbuf + c->rxend, room};
	*asked = room;
	return 1;
}

int tcp_rx_got(struct tcp_conn *c, size_t r, size_t asked)
{
	if (r == 0)
		return -ECONNRESET;
	if (c->in_datain) {
		int rc = rx_placed(c, r);
		if (rc)
			return rc;
	} else {
		c->rxend += r;
	}
	return r < asked;
}

/*
 * Parse what rxbuf holds, then read what the socket has and parse it, and
 * so on; returns 0 when it would block, or -errno.  drained: a read just
 * came back short (the socket is empty), so parse and read no more.
 * Small PDUs are read many to a read(2) into rxbuf (their payloads copied
 * from there); after a Data-In of RX_EXACT_MIN bytes or more only up to
 * the next header, so a run of large Data-In PDUs lands without a copy.
 */
int tcp_rx_drain(struct tcp_conn *c, bool drained)
{
	for (;;) {
		int rc = rx_parse(c);
		if (rc || drained)
			return rc;
		struct iovec iov[4];
		size_t asked;
		int n = tcp_rx_target(c, iov, &asked);
		if (n < 0)
			return n;
		ssize_t r = n == 1 ? read(c->fd, iov[0].iov_base, iov[0].iov_len) : readv(c->fd, iov, n);
		if (r < 0) {
			if (errno == EAGAIN)
				return 0;
			if (errno != EINTR)
				return -errno;
			continue;
		}
		/* A short read emptied the socket: parse what came, then back to
		 * poll (level-triggered) instead of a read that would say EAGAIN. */
		if ((rc = tcp_rx_got(c, (size_t)r, asked)) < 0)
			return rc;
		drained = rc;
	}
}

int tcp_tick(struct tcp_conn *c, int64_t *next_tick)
{
	int64_t now = clk_pass_us() / 1000; /* the pass's reading, where the loop keeps one */
	if (now < *next_tick)
		return 0;
	*next_tick = now + ISCSI_TICK_MS;
	return c->hooks->tick ? c->hooks->tick(c->sess, now) : 0;
}

/* The event thread's loop on poll(2): tcp_ring_loop's fallback.  The error that ended the connection, or 0. */
static int poll_loop(struct tcp_conn *c)
{
	int err = 0;
	int64_t next_tick = clk_now_ms() + ISCSI_TICK_MS;
	bool guest = c->hooks->guest_fd && c->hooks->guest_run && c->hooks->guest_live;
	bool want_out = false;
	while (!atomic_load(&c->ev.stop)) {
		if ((err = tcp_tick(c, &next_tick)))
			break;
		/* Clear the kick before pulling work so a later kick wakes us again. */
		bool kicked = atomic_exchange(&c->ev.kicked, false);
		/*
		 * The transmit round, unless nothing can be waiting: no kick (a
		 * direct sender that left bytes, or any thread that queued, kicks),
		 * no bytes of ours left, and the session has nothing (tx_idle).
		 */
		if (kicked || want_out || !c->hooks->tx_idle || !c->hooks->tx_idle(c->sess)) {
			pthread_mutex_lock(&c->tx_lock);
			err = tx_flush(c, false);
			want_out = c->iovpos < c->iovcnt;
			pthread_mutex_unlock(&c->tx_lock);
			if (err)
				break;
		}
		int gfd = guest ? c->hooks->guest_fd(c->sess) : -1;
		struct pollfd p[3] = {
			{.fd = c->fd, .events = POLLIN | (want_out ? POLLOUT : 0)},
			{.fd = c->ev.fd, .events = POLLIN},
			{.fd = gfd, .events = POLLIN},
		};
		int64_t wait = next_tick - clk_pass_us() / 1000;
		if (!iscsi_evthread_sleep(&c->ev))
			wait = 0; /* kicked meanwhile: look at the socket, then loop */
		clk_pass_end();
		int r = poll(p, gfd >= 0 ? 3 : 2, wait < 0 ? 0 : (int)wait);
		clk_pass_begin(); /* one clock read for what this pass submits, completes and ticks */
		iscsi_evthread_woke(&c->ev, r);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			break;
		}
		if ((p[1].revents & POLLIN) && (err = iscsi_evthread_drain(&c->ev)))
			break;
		if (p[0].revents & (POLLIN | POLLERR | POLLHUP)) {
			if ((err = tcp_rx_drain(c, false)))
				break;
		}
		/* the guest's work, queued now, goes out at the top of the next pass */
		if (gfd >= 0 && (p[2].revents & (POLLIN | POLLERR | POLLHUP)))
			c->hooks->guest_run(c->sess);
	}
	clk_pass_end();
	return err;
}

static void *event_thread(void *arg)
{
	struct tcp_conn *c = arg;
	bool guest = c->hooks->guest_fd && c->hooks->guest_run && c->hooks->guest_live;
	if (guest)
		c->hooks->guest_live(c->sess, true);
	int err = atomic_load(&ring_on) ? tcp_ring_loop(c) : -ENOSYS;
	if (err == -ENOSYS) {
		atomic_fetch_add(&loops_poll, 1);
		err = poll_loop(c);
		atomic_fetch_sub(&loops_poll, 1);
	}
	if (guest)
		c->hooks->guest_live(c->sess, false);
	if (err)
		log_debug("%s: connection error: %s", c->peer, strerror(-err));
	pthread_mutex_lock(&c->tx_lock); /* a direct send in progress ends (with its tx_done) first */
	c->tx_closing = true;
	pthread_mutex_unlock(&c->tx_lock);
	shutdown(c->fd, SHUT_RDWR);
	c->hooks->conn_lost(c->sess, atomic_load(&c->ev.stop) ? 0 : (err ? err : -ECONNRESET));
	return NULL;
}

static int tcp_start(struct iscsi_transport *t, const struct iscsi_transport_hooks *hooks, void *sess,
		     const struct iscsi_params *params)
{
	struct tcp_conn *c = (struct tcp_conn *)t;
	c->hooks = hooks;
	c->sess = sess;
	c->params = *params;
	/* Digests start with the full feature phase (RFC 7143 §13.1). */
	c->hdig = params->header_digest;
	c->ddig = params->data_digest;
	/* The largest PDU: header, header digest, data, padding, data digest. */
	c->rxcap = ISCSI_BHS_LEN + AHS_MAX + ISCSI_DIGEST_LEN + params->max_recv_dsl + 3 + ISCSI_DIGEST_LEN;
	if (c->rxcap < RX_BUF_MIN)
		c->rxcap = RX_BUF_MIN;
	c->rxcap *= 2;
	c->rxbuf = malloc(c->rxcap);
	if (!c->rxbuf)
		return -ENOMEM;
	return iscsi_evthread_start(&c->ev, event_thread, c);
}

static void tcp_kick(struct iscsi_transport *t)
{
	struct tcp_conn *c = (struct tcp_conn *)t;
	iscsi_evthread_kick(&c->ev, c->peer);
}

static void tcp_abort(struct iscsi_transport *t)
{
	struct tcp_conn *c = (struct tcp_conn *)t;
	iscsi_evthread_abort(&c->ev, c->peer);
}

static void tcp_shutdown(struct iscsi_transport *t)
{
	struct tcp_conn *c = (struct tcp_conn *)t;
	iscsi_evthread_stop(&c->ev, c->peer);
	pthread_mutex_lock(&c->tx_lock); /* no direct send uses the socket past this point */
	c->tx_closing = true;
	if (c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
	}
	pthread_mutex_unlock(&c->tx_lock);
}

static void tcp_destroy(struct iscsi_transport *t)
{
	struct tcp_conn *c = (struct tcp_conn *)t;
	iscsi_evthread_fini(&c->ev);
	pthread_mutex_destroy(&c->tx_lock);
	free(c->rxbuf);
	free(c);
}

static uint64_t tcp_payload_copied(struct iscsi_transport *t)
{
	return atomic_load_explicit(&((struct tcp_conn *)t)->bytes_copied, memory_order_relaxed);
}

static uint64_t tcp_wakeups(struct iscsi_transport *t)
{
	return iscsi_evthread_wakeups(&((struct tcp_conn *)t)->ev);
}

const struct iscsi_transport_ops iscsi_tcp_transport = {
	.name = "tcp",
	.connect = tcp_connect,
	.send_pdu = tcp_send_pdu,
	.recv_pdu = tcp_recv_pdu,
	.start = tcp_start,
	.kick = tcp_kick,
	.try_send = tcp_try_send,
	.abort = tcp_abort,
	.shutdown = tcp_shutdown,
	.destroy = tcp_destroy,
	.payload_copied = tcp_payload_copied,
	.wakeups = tcp_wakeups,
};
