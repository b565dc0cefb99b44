/* SPDX-License-Identifier: MIT */
/*
 * Transport interface: how the session layer moves PDUs without knowing
 * whether they travel over TCP (tcp.c) or iSER (RDMA).  The session layer
 * never branches on the transport; a transport never interprets SCSI.
 *
 * Two phases:
 *  - login: connect(), then blocking send_pdu()/recv_pdu() on the caller's
 *    thread, one PDU at a time (RFC 7143 §6, login and text requests);
 *  - full feature: start() hands the connection to the transport's event
 *    thread, which pulls PDUs to send with hooks->tx_fill() and delivers
 *    received PDUs with hooks->rx_pdu(); Data-In payload is placed straight
 *    into the buffer that hooks->rx_data_dest() names (a pool slice).
 *
 * Direct send (optional op try_send, TCP): the thread that just queued a
 * command may run the transmit side itself while the connection is idle,
 * instead of waking the event thread.  The event thread stays the only
 * reader of the connection.  Lock order: the transport's transmit lock
 * before the session lock (tx_fill and tx_done take the session lock), so
 * try_send is never called with the session lock held.
 */
#ifndef ISERFUSE_TRANSPORT_H
#define ISERFUSE_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "initiator/wire/pdu.h"
#include "initiator/wire/text.h"

/* One PDU to send: BHS (written by the session) and an optional data segment. */
struct iscsi_tx_slot {
	uint8_t bhs[ISCSI_BHS_LEN];
	const void *data;  /* payload, owned by the session (pool slice or session buffer) */
	uint32_t dlen;     /* bytes; the transport adds padding (and digests) */
	void *owner;       /* the session's, handed back by tx_done */
	/*
	 * SCSI Command PDUs only (zero otherwise): the task's whole buffer, for
	 * a transport that moves the data itself (iSER, RFC 7145 §9.2: the
	 * STag and base offsets of the iSER header).
	 */
	void *xfer_buf;
	uint32_t xfer_len;   /* Expected Data Transfer Length, bytes */
	uint32_t xfer_unsol; /* bytes sent unsolicited (immediate data and Data-Out PDUs) */
	uint8_t xfer_dir;    /* 1 = read, 2 = write (enum iscsi_dir) */
};

/*
 * Most slots a transport passes to one tx_fill (max), and so hands back in
 * one tx_done (n): the session completes up to that many deferred commands
 * per tx_done from an array of its own.
 */
#define ISCSI_TX_BATCH_MAX 64

/*
 * Session callbacks, called on the transport's event thread; tx_fill and
 * tx_done also on a submitter's thread inside try_send, never two at once
 * (the transport's transmit lock).
 */
struct iscsi_transport_hooks {
	/* Fill up to max (<= ISCSI_TX_BATCH_MAX) slots with PDUs to send; returns the number filled. */
	int (*tx_fill)(void *sess, struct iscsi_tx_slot *slots, int max);
	/*
	 * The n slots of the last tx_fill are written to the connection: their
	 * data may be reused.  n <= ISCSI_TX_BATCH_MAX.  Not called for a batch
	 * a lost connection cut off.
	 */
	void (*tx_done)(void *sess, const struct iscsi_tx_slot *slots, int n);
	/*
	 * Optional, lock-free: nothing waits for tx_fill now.  An event loop
	 * pass that was not kicked and has nothing of its own left to write
	 * may then skip its transmit round (no transmit lock, no tx_fill): a
	 * thread that queues a PDU from elsewhere kicks the transport.
	 */
	bool (*tx_idle)(void *sess);
	/*
	 * A Data-In BHS (48 bytes, AHS already consumed) arrived: return in
	 * *dest where its DataSegmentLength bytes must go (validated against the
	 * task's buffer).  Returns 0, or a negative errno: the transport then
	 * drops the connection.
	 */
	int (*rx_data_dest)(void *sess, const uint8_t *bhs, void **dest);
	/*
	 * A whole PDU arrived.  data/dlen is the data segment (without
	 * padding), valid only during the call; for Data-In, data is NULL when
	 * the payload was placed already (rx_data_dest), else the session
	 * checks the Buffer Offset and copies it into the READ's buffer itself.
	 * Returns 0, or a negative errno to drop the connection.
	 */
	int (*rx_pdu)(void *sess, const uint8_t *bhs, const uint8_t *data, uint32_t dlen);
	/* The connection is gone (err < 0) or was shut down (err == 0). */
	void (*conn_lost)(void *sess, int err);
	/*
	 * Called about once a second (ISCSI_TICK_MS) with CLOCK_MONOTONIC
	 * milliseconds, for deadlines and keep-alive.  Returns 0, or a negative
	 * errno: the transport then drops the connection.
	 */
	int (*tick)(void *sess, int64_t now_ms);
	/*
	 * Whether the command with this ITT is still outstanding with its
	 * buffer at buf (at least len bytes): a transport that copies data into
	 * the buffer itself (iSER bounce slots) asks before every copy, so a
	 * late or forged response for an ITT that ended (Reject, ABORT TASK, a
	 * re-issue under a new ITT) never writes into a buffer handed back.
	 */
	bool (*task_owns)(void *sess, uint32_t itt, const void *buf, uint32_t len);
	/*
	 * Optional, all three or none (a transport may ignore them: iSER
	 * does).  The event thread's guest: one more descriptor its poll
	 * waits on, so that the thread that waits for the target also waits
	 * for the work that makes commands (the gateway's /dev/fuse).
	 * guest_fd is read at every pass of the loop (-1: none now);
	 * guest_run is called when it is readable, without any lock held, and
	 * what it queues is sent by the same pass; guest_live says that an
	 * event thread that serves the guest starts (true, before its first
	 * poll) or ends (false, after its last guest_run).
	 */
	int (*guest_fd)(void *sess);
	void (*guest_run)(void *sess);
	void (*guest_live)(void *sess, bool live);
};

#define ISCSI_TICK_MS 1000

/* CLOCK_MONOTONIC in milliseconds, the clock of the tick hook: clk_now_ms (clock.h) for its callers outside clock.h. */
int64_t iscsi_now_ms(void);

struct iscsi_transport;

struct iscsi_transport_ops {
	const char *name;
	/*
	 * The transport places the data itself (iSER: the target RDMA-writes
	 * READ data and RDMA-reads WRITE data, RFC 7145 §7.3): no Data-In or
	 * R2T PDUs arrive, and a SCSI Response completes a READ with its
	 * residual telling how much was placed.
	 */
	bool data_by_rdma;
	/*
	 * Most payload bytes one SCSI command may move over this transport
	 * (iSER: the target's per-task buffer); 0 = no limit of its own.
	 * blk_dev_init splits larger I/O into several commands.
	 */
	uint32_t max_cmd_bytes;
	/*
	 * Connect to host:port within timeout_ms.  ctx is the transport's own
	 * per-mount context (for iSER: the device, protection domain and the
	 * pool's one memory registration), kept by the caller across
	 * reconnects; NULL where the transport needs none (TCP).  On success
	 * *out is a new transport (owned by the caller, freed with destroy).
	 * Returns 0 or a negative errno with a one-line reason in err.
	 */
	int (*connect)(struct iscsi_transport **out, void *ctx, const char *host, unsigned port,
		       int timeout_ms, char *err, size_t err_cap);
	/* Login phase: send one PDU (bhs + dlen bytes of data), blocking. 0 or -errno. */
	int (*send_pdu)(struct iscsi_transport *t, const uint8_t *bhs, const void *data,
			uint32_t dlen, int timeout_ms);
	/*
	 * Login phase: receive one PDU, blocking.  Data segment (up to cap bytes)
	 * into data, its length into *dlen.  -EPROTO if it does not fit.
	 */
	int (*recv_pdu)(struct iscsi_transport *t, uint8_t *bhs, void *data, uint32_t cap,
			uint32_t *dlen, int timeout_ms);
	/* Enter the full feature phase with the negotiated parameters. 0 or -errno. */
	int (*start)(struct iscsi_transport *t, const struct iscsi_transport_hooks *hooks,
		     void *sess, const struct iscsi_params *params);
	/* There is something to send (any thread, cheap when already signalled). */
	void (*kick)(struct iscsi_transport *t);
	/*
	 * Optional (NULL: the caller kicks instead).  Called by a thread that
	 * has just queued a command, session lock NOT held, never from the
	 * event thread or a completion callback: if the transmit side is free
	 * (trylock), nothing is left half-written and either the event thread
	 * sleeps in poll or in_flight (commands outstanding on the session,
	 * the new one included) is 1, run one round of the transmit path on
	 * this thread: tx_fill, a non-blocking write (digests as usual) and,
	 * once every byte is written, tx_done (which may run completion
	 * callbacks of commands answered meanwhile on this thread).  A partial
	 * write or a write error is left to the event thread, woken for it;
	 * the caller never blocks on the connection.  Returns 1 when the
	 * transmit side ran, 0 when it was not taken: the caller then kicks.
	 * t stays valid until the call returns (the session's reaper waits
	 * for direct senders before destroy).
	 */
	int (*try_send)(struct iscsi_transport *t, unsigned in_flight);
	/*
	 * Fail the connection now, as if it were lost (a link or route under it
	 * went away): the event thread calls conn_lost(-ENETDOWN) soon after.
	 * Any thread; idempotent; the transport stays valid (the session
	 * reaps it as after any loss).
	 */
	void (*abort)(struct iscsi_transport *t);
	/* Stop the event thread (joins it unless called from it) and close the connection. */
	void (*shutdown)(struct iscsi_transport *t);
	/* Free everything (after shutdown). */
	void (*destroy)(struct iscsi_transport *t);
	/*
	 * Optional (NULL: none): payload bytes this connection copied in user
	 * space so far (for the statistics; any thread, no lock needed).
	 */
	uint64_t (*payload_copied)(struct iscsi_transport *t);
	/*
	 * Optional (NULL: none counted): times this connection's event thread
	 * woke from poll with something to do (a kick or the socket), for the
	 * statistics; any thread, no lock needed.
	 */
	uint64_t (*wakeups)(struct iscsi_transport *t);
};

/* Every transport object starts with this. */
struct iscsi_transport {
	const struct iscsi_transport_ops *ops;
};

extern const struct iscsi_transport_ops iscsi_tcp_transport;

/*
 * How TCP event threads started from now on wait (process-wide; any
 * thread): true (the default), on an io_uring whose io_uring_enter also
 * submits the pass's sendmsg, falling back to poll(2) where no ring can be
 * made; false, on poll(2) always.
 */
void iscsi_tcp_set_ring(bool on);

/*
 * On a TCP event thread that runs on its io_uring (say, in a completion
 * callback): queue writev(fd, iov, n) (n <= 8) on that ring, to be
 * submitted with whatever else the pass queued by the next pass's
 * io_uring_enter, ahead of its wait.  An entry of 64 bytes or less is
 * copied now (128 bytes of them at most); a larger one is only referenced
 * and must stay as it is until the flush hook (iscsi_tcp_ring_set_flush)
 * runs on this thread, once the write is reaped.  0 when queued; -EAGAIN
 * on any other thread, with 64 writes out already, or with more small
 * bytes than that: write it yourself.  The result of the write is not
 * reported (a failure is logged at debug level).
 */
int iscsi_tcp_ring_writev(int fd, const struct iovec *iov, int n);

/*
 * Two hooks of a TCP event thread on its ring.  flush runs once the writes
 * it queued (iscsi_tcp_ring_writev) have all been made, before the pass's
 * callbacks: the caller's moment to release what those writes referenced.
 * idle(false) runs at the end of each pass, before the io_uring_enter that
 * may wait: true when the caller keeps something for the next passes (the
 * gateway's pool spares), and the wait then lasts 1 ms at most;
 * idle(true) runs as the loop ends: give everything back.  Set once,
 * before the first connection; NULL: none.
 */
void iscsi_tcp_ring_set_flush(void (*flush)(void), bool (*idle)(bool last));

/* TCP event threads running now (any thread): on an io_uring (*ring), on poll(2) (*poll). */
void iscsi_tcp_loops(unsigned *ring, unsigned *poll);

#endif
