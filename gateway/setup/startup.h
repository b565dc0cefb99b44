/* SPDX-License-Identifier: MIT */
/*
 * Checks made before anything starts (the mount point, the kernel's FUSE
 * request size limit), the mount's source name, and where a daemon in the
 * background sends its messages.
 */
#ifndef ISERFUSE_STARTUP_H
#define ISERFUSE_STARTUP_H

#include <stddef.h>

#include "initiator/net/url.h"

/*
 * The mount point must be a directory we can reach that holds no iserfuse
 * mount yet (/proc/self/mountinfo: a fuse.iserfuse mount on it would stack
 * a second session on the same LUNs).  Returns 0, or -1 after printing one
 * line: stat's error (for ENOTCONN, a stale FUSE mount, how to clear it),
 * "is not a directory", or the mount already there, after where (the
 * configuration file's "PATH:LINE: " when the mount point came from it,
 * else "").
 */
int gw_mountpoint_check(const char *where, const char *mnt);

/*
 * The largest FUSE request in bytes this kernel and libfuse accept:
 * /proc/sys/fs/fuse/max_pages_limit pages (256 when the file is missing,
 * FUSE_MAX_MAX_PAGES of kernels before 6.13), at most 256 pages with a
 * libfuse older than 3.17 (its read buffer), times the page size.
 */
size_t gw_fuse_max_io(void);

/*
 * The mount's source as findmnt and df show it: "iscsi://HOST[:PORT]/TARGET[/LUN]"
 * without credentials or query, IPv6 hosts in brackets, commas and
 * backslashes escaped for libfuse's -o parser ("fsname=" is prepended).
 */
void gw_fsname_opt(const struct iscsi_url *u, char *out, size_t cap);

/*
 * Where messages go once the daemon is in the background: log_file
 * (appended, opened now so that an error comes before anything starts),
 * else the systemd journal when /run/systemd/journal/socket exists, else
 * syslog when /dev/log exists.  Returns 0, or -1 after printing one line.
 */
int gw_logdest_prepare(const char *where, const char *log_file);

/* For the start-up line: "messages go to /var/log/x.log", "messages go to the systemd journal (...)", ... */
const char *gw_logdest_name(void);

/* Send the log to the chosen place (log_set_sink); called when stderr goes away. */
void gw_logdest_activate(void);

/* One line to the chosen place whatever the log level (the start-up line). */
void gw_logdest_notice(const char *line);

#endif
