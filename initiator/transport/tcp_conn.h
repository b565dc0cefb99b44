/* SPDX-License-Identifier: MIT */
/*
 * The TCP connection of tcp.c, shared with its io_uring event loop
 * (tcp_ring.c).  Which thread owns which field: tcp.c's head comment.
 */
#ifndef ISERFUSE_TCP_CONN_H
#define ISERFUSE_TCP_CONN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "evthread.h"
#include "transport.h"

#define TX_SLOTS 32
_Static_assert(TX_SLOTS <= ISCSI_TX_BATCH_MAX, "a tx_fill batch fits the session's tx_done");
#define RX_BUF_MIN (256u * 1024u)
#define AHS_MAX (255u * 4u)
#define IOV_PER_SLOT 5 /* BHS, header digest, data, padding, data digest */
#define RX_EXACT_MIN (16u * 1024u) /* a Data-In payload this large: read the next header alone */
#define RX_BATCH (64u * 1024u)      /* at most this much per read(2) into rxbuf: what a large Data-In arriving
				       * after small PDUs may have copied */

struct tcp_conn {
	struct iscsi_transport base;
	int fd;
	char peer[300];
	const struct iscsi_transport_hooks *hooks;
	void *sess;
	struct iscsi_params params;
	bool hdig, ddig;                 /* CRC32C header / data digests (full feature phase) */
	struct iscsi_evthread ev;        /* the event thread and its wake-up */

	/* ---- transmit side: tx_lock (the event thread, or a direct sender) ---- */
	pthread_mutex_t tx_lock;
	bool tx_closing;                 /* no more direct sends (conn_lost or shutdown begun) */
	int tx_err;                      /* a direct send's write error, for the event thread to act on */

	/* ---- owned by the event thread ---- */
	uint8_t *rxbuf;
	size_t rxcap, rxstart, rxend;
	bool in_datain;                  /* reading a Data-In payload straight into `dest` */
	bool rx_exact;                   /* the last PDU was a large Data-In: read up to the next header, no further */
	uint8_t datain_bhs[ISCSI_BHS_LEN];
	uint8_t *dest;
	uint32_t dest_left, pad_left, dig_left;
	uint32_t pad_len, dig_len;       /* of the Data-In being placed: padding, data digest (0 or 4) */
	uint32_t dcrc;                   /* its data digest so far (iscsi_crc32c chaining) */
	uint8_t pad_sink[4];             /* its padding (covered by the data digest) */
	uint8_t dig_buf[ISCSI_DIGEST_LEN]; /* its data digest as received */

	/* ---- transmit state: tx_lock ---- */
	struct iscsi_tx_slot slots[TX_SLOTS];
	int nslots;                      /* slots of the batch being written */
	uint8_t tx_dig[TX_SLOTS][2][ISCSI_DIGEST_LEN]; /* header and data digest of each slot */
	struct iovec iov[TX_SLOTS * IOV_PER_SLOT];
	int iovcnt, iovpos;
	_Atomic uint64_t bytes_copied;   /* payload copied from rxbuf to a slice (relaxed; read by tcp_payload_copied) */
};

/* ---- tcp.c, for the event loops ---- */

/*
 * tx_lock held.  Finish the batch whose bytes are all written (tx_done),
 * then pull the next with tx_fill and lay it out in iov.  True when bytes
 * wait to be written (c->iov from c->iovpos to c->iovcnt).
 */
bool tcp_tx_next(struct tcp_conn *c);

/* tx_lock held.  The batch is all written: hand its slots back (tx_done). */
void tcp_tx_done(struct tcp_conn *c);

/* tx_lock held.  w bytes of the batch were written: move iovpos and the partial iovec on. */
void tcp_tx_advance(struct tcp_conn *c, size_t w);

/*
 * Event thread.  The buffers the next read of the socket is to fill (1 or
 * 4 of iov: rxbuf's free room, or a Data-In's destination, padding,
 * digest and then rxbuf) and their length in *asked.  The count, or
 * -EPROTO.
 */
int tcp_rx_target(struct tcp_conn *c, struct iovec iov[4], size_t *asked);

/* Event thread.  r bytes of a read of tcp_rx_target's buffers came: 1 the read came back short, 0 full, or -errno. */
int tcp_rx_got(struct tcp_conn *c, size_t r, size_t asked);

/* Event thread.  Parse rxbuf, then read and parse until the socket is empty (see tcp.c); 0, or -errno. */
int tcp_rx_drain(struct tcp_conn *c, bool drained);

/* Event thread.  The session's tick hook once *next_tick (ms, clk_now_ms) has come, then the next; 0, or its error. */
int tcp_tick(struct tcp_conn *c, int64_t *next_tick);

/*
 * The event thread's loop on an io_uring (tcp_ring.c): as tcp.c's poll
 * loop, but the wait and the pass's sendmsg are one io_uring_enter.
 * Returns -ENOSYS before doing anything when no ring can be made (the
 * caller then runs the poll loop), else the error that ended the
 * connection, or 0 on stop.
 */
int tcp_ring_loop(struct tcp_conn *c);

/* tcp_ring_loop runs (on) or has ended (off): for iscsi_tcp_loops. */
void tcp_ring_running(bool on);

#endif
