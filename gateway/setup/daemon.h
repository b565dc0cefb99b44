/* SPDX-License-Identifier: MIT */
/*
 * Becoming a daemon: the fork whose parent waits for the child's "mounted"
 * (or its exit status), the start-up watchdog, and the watcher thread
 * that sees the mount go live (FUSE INIT completed), then reports
 * success, tells systemd and detaches from the terminal.
 */
#ifndef ISERFUSE_DAEMON_H
#define ISERFUSE_DAEMON_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

/*
 * Fork.  The parent never returns: it exits 0 once the child reports the
 * mount ready on the pipe, else with the child's exit status (1 if that
 * was 0 or the child was killed).  The child gets *ready_fd, the pipe's
 * write end (for gw_live_watch), and a session of its own.  Returns 0 in
 * the child, or -1 after printing why (pipe, fork).
 */
int gw_daemon_fork(int *ready_fd);

/*
 * Until the mount is live nothing can wait for a slow target but the
 * user: SIGALRM in 2 * login_timeout_s + 5 s ends the start-up with one
 * line and exit 1 (commands have no timeout of their own yet).  The
 * watcher disarms it once the mount is live.
 */
void gw_startup_watchdog_arm(unsigned login_timeout_s);

/*
 * The mount is live only once the kernel has completed the FUSE INIT
 * exchange (the request size, max_pages, is settled there): a stat of the
 * mount point waits for it and then sees our root (inode 1 on a new
 * device), or fails when the kernel dropped the connection.  Until then
 * the parent process waits and nothing says "mounted".  lock guards live,
 * given_up and ready_fd; cv wakes the watcher when the FUSE loop ends.
 */
struct gw_live_watch {
	pthread_mutex_t lock;
	pthread_cond_t cv;  /* CLOCK_MONOTONIC (gw_live_watch_init) */
	bool live, given_up;
	int ready_fd;       /* the parent's pipe, -1 in the foreground */
	bool foreground;
	const char *mnt;
	dev_t under;        /* st_dev of the mount point before the mount */
	char started[512];  /* the start-up line */
	struct fuse_session *se;
};

/* Initialise w's lock and condition variable, ready_fd -1. */
void gw_live_watch_init(struct gw_live_watch *w);

/*
 * Start the watcher (detached, the stop signals blocked) once the mount
 * is made; w must outlive it (until gw_live_watch_end).  Once live it
 * prints the start-up line (in the background), writes to ready_fd,
 * sends READY=1 to systemd, and in the background leaves the terminal.
 * If the mount does not come up within 60 s it prints why and ends the
 * FUSE loop.  Returns 0 or pthread_create's (positive) error number.
 */
int gw_live_watch_start(struct gw_live_watch *w);

/*
 * After the FUSE loop: the watcher says nothing more.  Returns true if
 * the mount never went live (one line printed if the watcher had not
 * said why).
 */
bool gw_live_watch_end(struct gw_live_watch *w);

#endif
