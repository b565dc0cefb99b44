/* SPDX-License-Identifier: MIT */
/*
 * The mount outlives its daemon: the process that was started (after the
 * fork to the background) becomes the supervisor.  It does no I/O; it runs
 * the worker (this binary again, with GW_WORKER_FLAG), which does
 * everything else: log in, open the LUNs, mount (the first worker) and
 * serve.  The first worker hands the supervisor its /dev/fuse descriptor,
 * so the FUSE connection stays while a worker dies (Linux 6.9+).  A worker
 * that dies (a signal, an abort, an exit status other than 0 before it
 * chose to stop) is replaced at once: the new one logs in with the same
 * ISID (the target reinstates the session, RFC 7143 §6.3.5), finds the
 * same LUNs, replays the saved FUSE INIT (fuse/fuse_resume.h), writes
 * FUSE_NOTIFY_RESEND and serves.
 *
 * Ends: a worker that stops by itself (unmount, stop signal: it tells
 * 'Q') ends the supervisor with its exit status.  Five deaths within 60 s
 * of workers that had not served for a second yet (a crash loop),
 * a kernel without FUSE_NOTIFY_RESEND, or LUNs that are not the same
 * devices any more: one line, the connection aborted (pending I/O fails),
 * the mount removed, exit 1.  SIGTERM, SIGINT, SIGHUP go to the worker
 * (which stops as before; it has a process group of its own, so that a
 * signal to the supervisor's group reaches it once); SIGUSR1 or `iserfuse --restart MOUNTPOINT`
 * replaces the worker on purpose: the old one stops reading requests,
 * answers those it read, writes the block cache back and exits 0, the new
 * one (from the binary now on disk) takes the rest.
 */
#ifndef ISERFUSE_SUPERVISOR_H
#define ISERFUSE_SUPERVISOR_H

#include <stdbool.h>

/*
 * A crash loop: this many worker deaths within GW_SUP_LOOP_S seconds end
 * the mount; a death counts when the worker had not served yet or served
 * less than GW_SUP_STABLE_MS (one killed after serving a while is simply
 * replaced).
 */
#define GW_SUP_LOOP_DEATHS 5
#define GW_SUP_LOOP_S 60
#define GW_SUP_STABLE_MS 1000

struct gw_sup_config {
	int argc;
	char **argv;          /* the command line as given (credentials not yet scrubbed); the workers get it */
	const char *mnt;      /* the mount point, as given */
	bool foreground;
	int ready_fd;         /* the start-up parent's pipe (gw_daemon_fork), -1 in the foreground */
	char **env;           /* gw_sup_env_save's: put back into each worker's environment */
	int replacement_timeout_ms; /* how long a worker that cannot reach the target is started again */
};

/*
 * Before the credentials are loaded (they take ISERFUSE_CHAP_* out of the
 * environment): a copy of those "KEY=VALUE" strings, NULL-terminated, for
 * the workers (NULL when out of memory: the workers then lack them).
 */
char **gw_sup_env_save(void);

/* Free a NULL-terminated string vector (argv or gw_sup_env_save's), each string wiped first; NULL is a no-op. */
void gw_sup_strv_free(char **v);

/*
 * Supervise: run workers until the mount ends.  Returns the exit status:
 * the last worker's when it stopped by itself (or failed before the
 * mount), 1 when the supervisor gave up, after one line.
 */
int gw_supervise(const struct gw_sup_config *c);

/*
 * `iserfuse --restart MOUNTPOINT`: ask the supervisor of that mount for a
 * new worker and wait until it serves.  Returns the exit status (0, or 1
 * after one line on stderr).
 */
int gw_restart_request(const char *mnt);

#endif
