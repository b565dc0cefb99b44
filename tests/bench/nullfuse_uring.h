/* SPDX-License-Identifier: MIT */
/*
 * nullfuse --loop=uring: the null FUSE server's requests over FUSE over
 * io_uring (Linux 6.14+, enable_uring=Y at mount time), done by hand
 * since libfuse 3.14 has no ring support.  One ring thread serves the
 * entries of every CPU queue; the /dev/fuse loop of nullfuse.c keeps
 * reading what stays on /dev/fuse (INIT, FORGET, INTERRUPT).
 */
#ifndef NULLFUSE_URING_H
#define NULLFUSE_URING_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

/* Ring entries per CPU queue (fio's QD32 cells queue on one CPU's queue). */
#define NF_URING_DEPTH 64

/*
 * After fuse_session_mount(se), before the loop reads INIT: install the
 * custom I/O that adds FUSE_OVER_IO_URING to the INIT reply, sets up the
 * ring once the reply is written and routes the ring requests' replies.
 * Returns 0, -EOPNOTSUPP when enable_uring is not Y (nothing installed),
 * or fuse_session_custom_io's negative errno.
 */
int nf_uring_attach(struct fuse_session *se);

/* After the /dev/fuse loop has returned: stop the ring thread and close the ring.  No-op if none. */
void nf_uring_end(void);

#endif
