/* SPDX-License-Identifier: MIT */
/*
 * FUSE over io_uring (Linux 6.14+, FUSE_OVER_IO_URING): requests come on
 * ring entries instead of read(2) of /dev/fuse where the kernel offers it
 * in its INIT request (only when /sys/module/fuse/parameters/enable_uring
 * was Y at mount time).  libfuse 3.14 cannot ask for the flag: the
 * session's custom I/O (fuse_session_custom_io, installed on the session
 * libfuse mounted) sees the INIT request and adds the flag to the INIT
 * reply once the rings are set up, routes each reply of a ring request
 * to its entry, and passes everything else (the /dev/fuse requests that
 * remain: FORGET, INTERRUPT, those before the rings are ready; the
 * notifications) to /dev/fuse as before.
 */
#ifndef ISERFUSE_FUSE_URING_H
#define ISERFUSE_FUSE_URING_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* -o io_uring= */
enum gw_uring_mode {
	GW_URING_AUTO, /* the rings where the kernel offers them, else /dev/fuse (a warning says why) */
	GW_URING_ON,   /* the rings or no mount */
	GW_URING_OFF,  /* /dev/fuse only, as libfuse does it (no custom I/O at all) */
};

/* "auto", "on", "off" into *out.  Returns 0 or -EINVAL. */
int gw_uring_mode_parse(const char *text, enum gw_uring_mode *out);

/*
 * Whether this kernel will offer FUSE over io_uring to a mount made now:
 * /sys/module/fuse/parameters/enable_uring reads Y.  Returns 0, or
 * -EOPNOTSUPP with why (one phrase) in why (cap bytes).
 */
int gw_uring_kernel_check(char *why, size_t cap);

/*
 * Ring entries per CPU queue: the kernel puts up to max_background (128,
 * fs.c) background requests on one queue, each holding its entry while
 * its handler waits for back-pressure, and the synchronous ones (ls,
 * stat, .stats) need entries of their own meanwhile.
 */
#define GW_URING_QUEUE_ENTRIES (128 + 16)

struct gw_fuse_uring;

/*
 * After fuse_session_mount(se), before the FUSE loop reads the INIT
 * request: install the custom I/O on se (its /dev/fuse descriptor
 * stays).  depth: ring entries per queue (one queue per possible CPU).
 * copied: counter of payload bytes copied in user space (READ data into
 * an entry's payload buffer); the caller keeps it alive.  The caller owns
 * *out (gw_fuse_uring_end) and must make it reachable from the writev
 * hook as the gw's `uring` before the loop starts (the hooks get
 * fuse_session's userdata, a struct gw).  Returns 0 or a negative errno
 * (-ENOMEM; fuse_session_custom_io's).
 */
int gw_fuse_uring_attach(struct fuse_session *se, enum gw_uring_mode mode, unsigned depth,
			 atomic_uint_fast64_t *copied, struct gw_fuse_uring **out);

/* "io_uring" while the rings serve the mount, else "dev" (NULL u: "dev"). */
const char *gw_fuse_uring_path(const struct gw_fuse_uring *u);
/*
 * The rings' threads now: *threads started (the first of each ring and its
 * stand-ins), *parked of them stand-ins parked (no part in the rings until
 * the next stall).  Both 0 for NULL.  Any thread.
 */
void gw_fuse_uring_threads(struct gw_fuse_uring *u, unsigned *threads, unsigned *parked);
/* Requests served from ring entries so far (0 for NULL). */
uint64_t gw_fuse_uring_requests(const struct gw_fuse_uring *u);
/* True when -o io_uring=on could not be honoured (the session was exited: exit 1). */
bool gw_fuse_uring_failed(const struct gw_fuse_uring *u);

/*
 * Once the FUSE loop has returned (it resets the session's exited flag):
 * requests that still come on ring entries are answered ENOTCONN, as
 * /dev/fuse leaves them to the unmount, and ring errors from then on
 * (the unmount closes the descriptor: EBADF) are the stop's, not a
 * failure.  No-op for NULL.
 */
void gw_fuse_uring_quiesce(struct gw_fuse_uring *u);

/*
 * After gw_fuse_uring_quiesce and the drain, before the unmount: wait up
 * to timeout_ms until every reply written so far was handed to the kernel
 * (COMMIT_AND_FETCH submitted; a completion's reply is only queued for its
 * ring's thread), so that the unmount does not abort the requests they
 * answer (ECONNABORTED instead of their error or data).  No-op for NULL or
 * rings not in use.
 */
void gw_fuse_uring_flush(struct gw_fuse_uring *u, int timeout_ms);

/*
 * After the unmount and after the sessions are closed (no completion can
 * reply any more: writev may be called until then): stop the ring
 * threads, close the rings (the kernel cancels the entries still
 * registered) and free u.  No-op for NULL.
 */
void gw_fuse_uring_end(struct gw_fuse_uring *u);

#endif
