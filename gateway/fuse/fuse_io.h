/* SPDX-License-Identifier: MIT */
/*
 * The I/O thread: the connection's event thread also serves /dev/fuse
 * (the session's guest, session.h).  It reads each request as it comes,
 * runs a READ or WRITE that can go without waiting to completion on its
 * own thread (the fast handler: submit, and the reply written from the
 * completion, on the same thread), and hands every other request (and one
 * that would wait: no pool slice, an overlapping write, the block cache's
 * paths) to the FUSE readers of fuse_loop.c, which run it through libfuse
 * as before.  While no event thread serves (the connection is down, a
 * transport without guests: iSER), the readers read /dev/fuse themselves.
 *
 * Raw replies: the fast handler answers without libfuse.  Its answer's
 * argument (route.h's sink arg) is the request's unique with bit 0 set
 * (the kernel's uniques are even), told apart from a fuse_req_t by
 * gw_io_raw; gw_io_reply writes the fuse_out_header and the data in one
 * writev to /dev/fuse.
 *
 * Threads: gw_io_run and gw_io_live on the event thread; the queue under
 * its lock; gw_io_take on the readers; gw_io_reply on any thread.
 */
#ifndef ISERFUSE_FUSE_IO_H
#define ISERFUSE_FUSE_IO_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "fuse_rx.h"

struct gw_io;

/*
 * The fast handler: a request of bytes at req (read into a pool slice,
 * fuse_rx.h: gw_rx_claim / gw_rx_taken work on it) on the event thread.
 * Returns true when it took the request (answered it, or submitted it
 * with a gw_io_raw_arg answer), false to hand it to a reader (nothing
 * done).  Never waits.
 */
typedef bool (*gw_io_fast_fn)(void *arg, const void *req, size_t len);

/*
 * The process's one I/O thread state for se (descriptor: fuse_session_fd),
 * with its fast handler.  Lives until the process ends (the event thread
 * may still look at it after the stop).  NULL when called twice.
 */
struct gw_io *gw_io_new(struct fuse_session *se, gw_io_fast_fn fast, void *fast_arg);

/*
 * Before each loop that uses io (gw_fuse_loop), then attach it: the
 * event thread may read again, hand over again.
 */
void gw_io_arm(struct gw_io *io);
/*
 * The loop is ending (a stop, a handover): from its return on, the event
 * thread reads no more request (a pass in progress ends first) and the
 * guest is off the session (the on_exit callback).  What it read and did
 * not hand over or answer stays unanswered: a worker after this one gets
 * it again (FUSE_NOTIFY_RESEND), an unmount fails it.  Any thread but the
 * event thread.
 */
void gw_io_stop(struct gw_io *io);

/* The session's guest callbacks (iscsi_session_set_guest(s, fuse_session_fd(se), gw_io_run, gw_io_live, io)). */
void gw_io_run(void *io);
void gw_io_live(void *io, bool live);

/*
 * Called once per arming, when gw_io_run sees the FUSE session exited (on
 * the event thread) or at gw_io_stop, to take the guest off the session:
 * fn(arg).  Set before attaching.
 */
void gw_io_on_exit(struct gw_io *io, void (*fn)(void *arg), void *arg);

/* ---- the readers' side (fuse_loop.c) ---- */

/* The loop's supervisor is woken with fn(arg) when serving starts or stops. */
void gw_io_on_change(struct gw_io *io, void (*fn)(void *arg), void *arg);
/* An event thread serves /dev/fuse now (readers must not read it), or requests wait in the queue. */
bool gw_io_serving(struct gw_io *io);
/*
 * A reader: wait for a handed-off request while serving and no stop or
 * retire is asked (*stop true, or gw_io_wake_all).  Returns the item, its
 * request in *fb and rx holding its slice (gw_rx_adopt) when it came in
 * one; NULL when woken with none.  After the handler: gw_io_done.
 */
void *gw_io_take(struct gw_io *io, struct gw_rx *rx, struct fuse_buf *fb, const _Atomic bool *stop);
/* After the handler of a taken item: rx's slice back to the pool if the request left it, the item freed. */
void gw_io_done(struct gw_io *io, struct gw_rx *rx, void *item);
/* Wake every reader waiting in gw_io_take (a stop, a retire). */
void gw_io_wake_all(struct gw_io *io);
/*
 * After the readers ended and gw_io_stop: drop what is still queued (its
 * slices back; unanswered, as gw_io_stop says), refuse more.
 */
void gw_io_close(struct gw_io *io);

/* Requests run on the event thread, and handed to readers, so far (statistics). */
void gw_io_counts(struct gw_io *io, uint64_t *fast, uint64_t *handed);

/* ---- raw replies ---- */

static inline void *gw_io_raw_arg(uint64_t unique) { return (void *)(uintptr_t)(unique | 1); }
static inline bool gw_io_raw(const void *arg) { return ((uintptr_t)arg & 1) != 0; }

/*
 * Answer the raw request arg: err (a positive errno) alone, or the n
 * iovecs (n 0: no data).  Any thread.  A request the kernel no longer
 * waits for (interrupted, unmounted) is dropped silently.
 */
void gw_io_reply(void *arg, int err, const struct iovec *iov, int n);

/* The descriptor in blocking mode again (a loop that blocks in read(2): -s, the readers alone). */
void gw_io_fd_blocking(int fd);

#endif
