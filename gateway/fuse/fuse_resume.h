/* SPDX-License-Identifier: MIT */
/*
 * A worker that takes over a live FUSE connection (life/supervisor.h):
 * Linux 6.9+ keeps the connection while any process holds its /dev/fuse
 * descriptor, and FUSE_NOTIFY_RESEND puts every request read but not
 * answered back in the queue, its unique marked FUSE_UNIQUE_RESEND.  The
 * kernel sends FUSE_INIT once per connection: the first worker saves the
 * request (life/lifestate.h), a later one replays it to libfuse so that
 * both sides agree on the connection as negotiated (protocol minor,
 * max_write, flags), and drops libfuse's reply to it.  Block reads and
 * writes are idempotent: a resent request simply runs again.
 */
#ifndef ISERFUSE_FUSE_RESUME_H
#define ISERFUSE_FUSE_RESUME_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <stddef.h>

/* include/uapi/linux/fuse.h 7.40 (Linux 6.9); linux-libc-dev 6.1 lacks them */
#define GW_FUSE_NOTIFY_RESEND 7
#define GW_FUSE_UNIQUE_RESEND (1ull << 63)

/*
 * A request just read from /dev/fuse (len bytes at req), by any reader:
 * counts a resent one (life state's resent), and in the first worker
 * saves the INIT request.  Cheap: one load and a test otherwise.
 */
void gw_resume_note(const void *req, size_t len);

/*
 * Write FUSE_NOTIFY_RESEND to fd (/dev/fuse).  Returns 0, or the negative
 * errno of the write (-EINVAL or -ENOSYS: a kernel before 6.9).  On a
 * connection whose INIT was not read yet it moves nothing: a probe.
 */
int gw_resume_resend(int fd);

/*
 * Install the custom I/O (read, writev and splice as libfuse does them,
 * plus gw_resume_note and the dropped INIT reply) on se, over fd, which se
 * then owns.  For a session without FUSE over io_uring (whose own custom
 * I/O calls gw_resume_note).  Returns 0 or fuse_session_custom_io's
 * negative errno.
 */
int gw_resume_attach(struct fuse_session *se, int fd);

/*
 * A restarted worker, after gw_resume_attach: hand the saved INIT request
 * to se (the init op runs; the reply is dropped).  Returns 0, or -EPROTO
 * when there is none or libfuse refused it.
 */
int gw_resume_replay(struct fuse_session *se);

#endif
