/* SPDX-License-Identifier: MIT */
/*
 * A FUSE reader's receive slice: a reader of fuse_loop.c reads each
 * request from /dev/fuse straight into a payload pool slice it holds
 * (rx_layout.h: a WRITE's data lands page aligned one page in), and a
 * WRITE handler that finds its data there takes the slice over for the
 * block I/O (no copy; gw_rx_claim / gw_rx_taken); the reader then takes
 * a fresh slice for its next read.  Any other request leaves the slice
 * with the reader.
 *
 * Back-pressure: readers hold at most the cap given to gw_rx_setup
 * (one less than the payload slices), so block I/O always has a slice to
 * finish with; a reader that finds no free slice or the cap reached does
 * not wait: its caller reads into libfuse's own buffer instead, and the
 * write handler copies (counted in payload_bytes_copied).
 *
 * Threads: gw_rx_setup before the readers start; a struct gw_rx belongs
 * to one reader thread; gw_rx_claim and gw_rx_taken act on the calling
 * thread's request (thread-local), so they are only meaningful in a
 * handler that a reader runs on its own thread (NULL elsewhere: -s,
 * other loops).
 */
#ifndef ISERFUSE_FUSE_RX_H
#define ISERFUSE_FUSE_RX_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <stdint.h>

#include "cache/pool/pool.h"

struct gw_rx {
	uint8_t *slice; /* held by this reader, NULL if none */
};

/*
 * Let readers receive into slices of pool, at most cap slices held by
 * all readers together (0 or pool NULL: never).  The slices must fit
 * every request (gw_rx_fits(slice size, max_write, block size)); the
 * caller checks.  Call before the readers start; not thread-safe.
 */
void gw_rx_setup(struct buf_pool *pool, unsigned cap);

/*
 * Read the next request of se into rx's slice, taking one first if rx
 * holds none (never waiting).  Returns the bytes read (*fb is the whole
 * request, fb->mem inside the slice, and the calling thread's request is
 * rx until gw_rx_done), 0 when the session exited (ENODEV: unmounted,
 * fuse_session_exit called), -ENOBUFS when no slice could be taken (read
 * with fuse_session_receive_buf instead), or another negative errno of
 * read(2) (-EINTR, -EAGAIN, -EIO for a short read), as
 * fuse_session_receive_buf returns them.  An interrupted request
 * (ENOENT) is read again.
 */
int gw_rx_receive(struct gw_rx *rx, struct fuse_session *se, struct fuse_buf *fb);

/*
 * Call fn(arg, request, bytes) on the reader's thread for every request
 * gw_rx_receive reads until the session's INIT has been seen (the io_uring
 * set-up watches the INIT request, which libfuse's own read hook would
 * otherwise see).  Set before the loop starts; NULL: none.
 */
void gw_rx_on_request(void (*fn)(void *arg, const void *req, size_t len), void *arg);

/*
 * In a handler: the slice of the calling reader's request when data
 * (a WRITE's data, as libfuse passes it) lies at its data offset, else
 * NULL.  The reader still holds it until gw_rx_taken.
 */
void *gw_rx_claim(const void *data);

/* In a handler, after gw_rx_claim: the request now owns the slice (its end returns it to the pool). */
void gw_rx_taken(void);

/* In a handler, after gw_rx_taken: slice (the one gw_rx_claim gave) is the reader's again (its request did not take it). */
void gw_rx_retake(void *slice);
/*
 * A request another thread read into a slice it held (fuse_io.c's hand-off): rx (holding none) takes
 * the slice over, with its count, and the calling thread's request is rx until gw_rx_done.
 */
void gw_rx_adopt(struct gw_rx *rx, void *slice);
/* After the handler returned: the calling thread has no request in rx any more. */
void gw_rx_done(struct gw_rx *rx);

/* The reader ends: its slice, if any, goes back to the pool. */
void gw_rx_release(struct gw_rx *rx);

#endif
