/* SPDX-License-Identifier: MIT */
/* The stop signals and the shutdown sequence (see stop.h). */
#include "stop.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "initiator/iser/iser.h"
#include "initiator/util/clock.h"
#include "initiator/util/log.h"
#include "gateway/fuse/fuse_uring.h"
#include "gateway/life/paths.h"
#include "gateway/life/rescan.h"
#include "gateway/setup/pool_setup.h"

/* ---- the stop signals ---- */

/* The first stop signal ends this session's FUSE loop. */
static struct fuse_session *stop_session;
/*
 * Stopping: how long commands in flight, a lost connection's recovery, the
 * write-back and SYNCHRONIZE CACHE may take in all; past it what is still
 * unanswered fails (iscsi_session_stopping).
 */
#define STOP_GRACE_MS 5000
/* The close waits this long: the sessions failed what was left when the grace ended. */
#define STOP_SLACK_MS 1000
/*
 * The drain and each LUN's write-back and SYNCHRONIZE CACHE wait at most
 * this long: the grace counts from the target's last answer (a target that
 * keeps answering a long write-back is not cut; one that goes silent is,
 * by the sessions), and this caps a target that answers too slowly.
 */
#define STOP_WAIT_MAX_MS 30000
static volatile sig_atomic_t stop_signals;
static volatile sig_atomic_t handover; /* SIGUSR1: a new worker takes over (supervisor.h) */

static void restart_signal(int sig)
{
	(void)sig;
	if (stop_signals)
		return; /* stopping already: the stop wins */
	handover = 1;
	if (stop_session)
		fuse_session_exit(stop_session);
}

/*
 * A stop signal within this long of the first is the same stop (ms): one
 * sent to every process (pkill, a shutdown) reaches the worker twice, once
 * directly and once handed on by the supervisor.
 */
#define STOP_SIGNAL_SAME_MS 500

static void stop_signal(int sig)
{
	static const char msg[] = "iserfuse: stopped by a second signal before the I/O was drained\n";
	static struct timespec first;
	(void)sig;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now); /* async-signal-safe */
	if (stop_signals++ == 0) {
		first = now;
		if (stop_session)
			fuse_session_exit(stop_session);
		return;
	}
	if ((now.tv_sec - first.tv_sec) * 1000 + (now.tv_nsec - first.tv_nsec) / 1000000 < STOP_SIGNAL_SAME_MS)
		return;
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(2);
	_exit(2);
}

void gw_stop_signals_install(struct fuse_session *se)
{
	struct sigaction sa = {.sa_handler = stop_signal};
	sigemptyset(&sa.sa_mask);
	stop_session = se;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	struct sigaction ra = {.sa_handler = restart_signal};
	sigemptyset(&ra.sa_mask);
	sigaction(SIGUSR1, &ra, NULL);
}

bool gw_stop_handover(void)
{
	return handover && !stop_signals;
}

void gw_stop_handover_refused(void)
{
	handover = 0;
}

/*
 * Detach the mount on mnt: what fuse_session_unmount does for the session
 * that mounted (umount2 MNT_DETACH as root, else fusermount3 -u -z), for a
 * worker that took the mount over (its session did not mount).
 */
static void unmount_taken_over(const char *mnt)
{
	if (geteuid() == 0) {
		if (umount2(mnt, MNT_DETACH) && errno != EINVAL && errno != ENOENT)
			log_warn("cannot unmount %s: %s", mnt, strerror(errno));
		return;
	}
	pid_t pid = fork();
	if (pid == 0) {
		execlp("fusermount3", "fusermount3", "-u", "-q", "-z", "--", mnt, (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

/* ---- SYNCHRONIZE CACHE of every LUN ---- */

/*
 * One result per LUN, 0 until its completion: a negative errno, or 1 for
 * success.  Allocated by gw_stop and freed by gw_stop_close, after the
 * session: a command that timed out here still completes, when the
 * session closes.
 */
struct gw_sync_batch {
	pthread_mutex_t lock; /* guards res */
	pthread_cond_t cv;    /* CLOCK_MONOTONIC; signalled at each completion */
	size_t n;
	struct gw_sync_one {
		struct gw_sync_batch *b;
		int res;
	} one[];
};

static void sync_all_done(void *arg, int err, const void *data, size_t len)
{
	struct gw_sync_one *o = arg;
	(void)data;
	(void)len;
	pthread_mutex_lock(&o->b->lock);
	o->res = err ? err : 1;
	pthread_cond_broadcast(&o->b->cv);
	pthread_mutex_unlock(&o->b->lock);
}

static struct gw_sync_batch *sync_batch_new(size_t n)
{
	struct gw_sync_batch *b = calloc(1, sizeof(*b) + n * sizeof(b->one[0]));
	if (!b)
		return NULL;
	clk_cond_init(&b->cv);
	pthread_mutex_init(&b->lock, NULL);
	b->n = n;
	for (size_t i = 0; i < n; i++)
		b->one[i].b = b;
	return b;
}

/* Wait until o has its result or the CLOCK_MONOTONIC deadline passed; returns the result (0: none). */
static int sync_wait(struct gw_sync_one *o, const struct timespec *deadline)
{
	pthread_mutex_lock(&o->b->lock);
	while (!o->res && pthread_cond_timedwait(&o->b->cv, &o->b->lock, deadline) == 0)
		;
	int r = o->res;
	pthread_mutex_unlock(&o->b->lock);
	return r;
}

/*
 * A write-back at the stop failed with err: one line with the bytes of
 * acknowledged data of l that the target never got and why, the ranges at
 * debug level.  Returns false when nothing is left dirty (then it was the
 * SYNCHRONIZE CACHE that failed).
 */
static bool log_discarded(struct gw_lun *l, int err)
{
	struct bcache_range *r = NULL;
	size_t n = 0;
	uint64_t bytes = l->cdev ? bcache_dev_dirty(l->cdev, &r, &n) : 0;
	if (!bytes)
		return false;
	if (err == -ETIMEDOUT || err == -ENOTCONN) /* no status: unanswered when the grace ended, or refused after */
		log_err("%s: %llu bytes of acknowledged write-back data discarded: the target did not answer before "
			"the stop grace (%d s) ended", l->name, (unsigned long long)bytes, STOP_GRACE_MS / 1000);
	else
		log_err("%s: %llu bytes of acknowledged write-back data discarded: the write-back failed at the stop: %s",
			l->name, (unsigned long long)bytes, strerror(-err));
	for (size_t i = 0; i < n; i++)
		log_debug("%s: discarded write-back data at bytes %llu..%llu (%llu bytes)", l->name,
			  (unsigned long long)r[i].off, (unsigned long long)(r[i].off + r[i].len - 1),
			  (unsigned long long)r[i].len);
	free(r);
	return true;
}

/*
 * SYNCHRONIZE CACHE on every LUN written (after the write-back of what
 * the block cache holds), up to STOP_WAIT_MAX_MS each (the sessions fail
 * what a silent target leaves unanswered at the grace's end and refuse new
 * commands after it).  Returns the number of LUNs whose write-back or
 * SYNCHRONIZE CACHE failed or went unanswered.
 */
static int sync_all(struct gw *g, struct gw_sync_batch *b)
{
	int failed = 0;
	for (size_t i = 0; i < b->n; i++) {
		struct gw_lun *l = &g->luns[i];
		/* a LUN write-protected since it was written is synced too (blk_sync sends nothing for one never written) */
		if (g->ro || gw_lun_gone(l) || gw_lun_sync(l, sync_all_done, &b->one[i]))
			continue;
		struct timespec deadline = clk_deadline_ms(STOP_WAIT_MAX_MS);
		int r = sync_wait(&b->one[i], &deadline);
		if (r < 0 && !log_discarded(l, r))
			log_err("%s: SYNCHRONIZE CACHE failed: %s", l->name, strerror(-r));
		else if (r == 0)
			log_err("%s: no answer to the write-back or SYNCHRONIZE CACHE before the stop grace (%d s) ended",
				l->name, STOP_GRACE_MS / 1000);
		failed += r <= 0;
	}
	return failed;
}

/* ---- the shutdown sequence ---- */

static void log_counters(struct gw *g)
{
	struct blk_retry_stats rs;
	blk_retry_get_stats(g->retry, &rs);
	log_info("SCSI retries: %llu (%llu after a delay), %llu given up; %llu UNIT ATTENTIONs "
		 "(%llu capacity changed, %llu LUNs changed)",
		 (unsigned long long)rs.retried, (unsigned long long)rs.delayed, (unsigned long long)rs.exhausted,
		 (unsigned long long)rs.unit_attentions, (unsigned long long)rs.ua_capacity,
		 (unsigned long long)rs.ua_luns);
	struct iscsi_session_stats ss;
	gw_sess_stats(g, &ss);
	log_info("%llu commands, %llu bytes read, %llu bytes written, peak %u commands outstanding, "
		 "peak %u of %u pool slices in use",
		 (unsigned long long)ss.commands, (unsigned long long)ss.bytes_read,
		 (unsigned long long)ss.bytes_written, ss.max_outstanding, buf_pool_max_in_use(g->pool),
		 buf_pool_nslices(g->pool));
}

void gw_stop_begin(struct gw *g)
{
	gw_sess_stopping(g, STOP_GRACE_MS);
}

int gw_stop(struct gw *g, struct fuse_session *se, const char *mnt, bool taken_over, struct gw_sync_batch **batch)
{
	if (mnt)
		sd_notify(0, "STOPPING=1");
	stop_signals = stop_signals ? stop_signals : 1; /* from now on the next stop signal ends the daemon */
	/*
	 * Everything below ends within the stop grace, counted from the
	 * target's last answer: a session being recovered gets that long,
	 * not the whole replacement_timeout; the
	 * control commands of the background threads (a new path's identity
	 * probe, ALUA states, a rescan) fail now, or once their connection is
	 * dropped a second later if the target was sent one and does not
	 * answer, before those threads are joined; when a target stays silent
	 * that long, the commands it left unanswered fail and their connection
	 * is dropped, and later ones (write-back, SYNCHRONIZE CACHE) are
	 * refused.
	 */
	gw_sess_stopping(g, STOP_GRACE_MS);
	gw_paths_stop(g); /* no new paths from now on */
	gw_rescan_stop(g);
	/*
	 * Drain while still mounted, so that the requests in flight get their
	 * replies instead of being aborted by the unmount; new ones wait.
	 */
	if (blk_retry_drain(g->retry, STOP_WAIT_MAX_MS)) /* commands waiting to be retried */
		log_err("retries still pending at shutdown");
	gw_sess_drain(g, STOP_WAIT_MAX_MS); /* replies still in flight after the last FUSE request, callbacks returned */
	gw_fuse_uring_flush(g->uring, 500); /* and those replies handed to the kernel over the rings */
	/*
	 * A reply later than that (a drain that timed out) finds the channel
	 * closed: libfuse keeps quiet about it for an exited session instead
	 * of printing "fuse: writing device: Bad file descriptor".
	 */
	fuse_session_exit(se);
	if (mnt && taken_over)
		unmount_taken_over(mnt);
	else if (mnt)
		fuse_session_unmount(se);
	/* a handover leaves the mount: the requests not read yet wait for the next worker */
	*batch = sync_batch_new(gw_nluns(g));
	int unsynced = 0;
	if (*batch)
		unsynced = sync_all(g, *batch);
	log_counters(g);
	return unsynced;
}

void gw_stop_close(struct gw *g, struct iser_ctx *iser, struct gw_sync_batch *batch)
{
	/* Completions still to come (the close below aborts what is left) must
	 * not reach the retry queue: detach it from every LUN first. */
	for (size_t i = 0; i < gw_nluns(g); i++)
		blk_dev_set_retry(&g->luns[i].dev, NULL, g->retry_budget_ms);
	struct blk_retry *rq = g->retry;
	atomic_store_explicit(&g->retry, NULL, memory_order_release); /* async_sense may still run */
	blk_retry_destroy(rq); /* fires what is parked, while the session still exists */
	gw_sess_close(g, STOP_SLACK_MS); /* what is still out was failed when the stop grace ended */
	gw_cache_teardown(g);
	iser_ctx_destroy(iser); /* after the session: its connections used the registration */
	if (batch) {
		pthread_cond_destroy(&batch->cv);
		pthread_mutex_destroy(&batch->lock);
		free(batch);
	}
	for (size_t i = 0; i < gw_nluns(g); i++)
		blk_dev_fini(&g->luns[i].dev);
	free(g->luns);
	g->luns = NULL;
	gw_byid_free(g);
	buf_pool_destroy(g->pool);
	g->pool = NULL;
}
