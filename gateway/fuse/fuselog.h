/* SPDX-License-Identifier: MIT */
/*
 * libfuse's own messages (fuse_log, libfuse >= 3.7) through our log:
 * "iserfuse: " in front, to the daemon's destination (stderr, log file,
 * journal, syslog), at the matching level.  A libfuse line never reaches
 * the user unprefixed.  (libfuse's perror() for a failed reply to
 * /dev/fuse is outside fuse_log: the shutdown avoids it instead, see
 * stop.c.)
 */
#ifndef ISERFUSE_FUSELOG_H
#define ISERFUSE_FUSELOG_H

#include <stddef.h>

/* Route libfuse's messages to our log (fuse_set_log_func).  Call once, early, on the main thread. */
void gw_fuselog_route(void);

/*
 * While buf is set (cap bytes, not NULL), libfuse's messages on this
 * thread are kept in buf instead (the first one, without its newline;
 * buf is "" if none came): for a trial whose error the caller words
 * itself.  gw_fuselog_capture(NULL, 0) ends it.  Starting one routes
 * libfuse's log here (gw_fuselog_route) if nothing had.
 */
void gw_fuselog_capture(char *buf, size_t cap);

#endif
