/* SPDX-License-Identifier: MIT */
/*
 * Cancelling a thread's blocking login-phase waits from another thread.
 *
 * The login phase (connect, Login and Text PDUs, RFC 7143 §6) runs on the
 * caller's thread with blocking calls that may each wait up to the login
 * timeout.  A thread that must be stoppable sooner (the session's recovery
 * thread) binds a cancel token: an eventfd that another thread makes
 * readable (iscsi_cancel_fire).  From then on every wait of the transports'
 * login phase on that thread (tcp.c, iser.c) also watches the token and
 * returns -ECANCELED once it fired, and iscsi_login checks it between PDUs.
 */
#ifndef ISERFUSE_CANCEL_H
#define ISERFUSE_CANCEL_H

#include <poll.h>
#include <stdbool.h>

/*
 * A new cancel token (a non-blocking eventfd), not fired.  Returns its fd
 * (owned by the caller, closed with close(2)) or a negative errno.
 */
int iscsi_cancel_new(void);

/* Fire token fd (any thread; idempotent): the bound thread's waits end with -ECANCELED. */
void iscsi_cancel_fire(int fd);

/* Bind token fd to the calling thread (-1: none, the default). */
void iscsi_cancel_bind(int fd);

/* Whether the token bound to the calling thread has fired (false when none is bound). */
bool iscsi_cancelled(void);

/*
 * poll(2) on fds[0..n-1] for at most timeout_ms (-1: no limit), also
 * watching the calling thread's token.  Returns poll's count (0 on
 * timeout), -ECANCELED once the token fired, or another negative errno
 * (EINTR is retried with the time left).
 */
int iscsi_poll_cancellable(struct pollfd *fds, nfds_t n, int timeout_ms);

#endif
