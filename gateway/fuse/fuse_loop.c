/* SPDX-License-Identifier: MIT */
/*
 * The default FUSE request loop (see fuse_loop.h).
 *
 * Each reader reads a request from /dev/fuse and runs its handler on the
 * same thread: our handlers submit a SCSI command and return, the reply
 * comes from the completion on the connection's event thread, so no
 * thread hands a request to another.  A handler blocks only for
 * back-pressure (a pool slice, a task slot, an overlapping write); when
 * every reader is blocked so, the supervisor (the thread that called
 * gw_fuse_loop) starts a stand-in reader, so that the requests that do
 * not wait (getattr, readdir, .stats, the completions' next requests)
 * are still read and answered.
 *
 * Ownership: struct loop's atomics are shared by the readers and the
 * supervisor; the reader table and `live` are the supervisor's, except
 * that a reader writes its own `buf` and `busy` and, as its last act,
 * its `state` (R_ENDED).  The supervisor joins a reader only once it is
 * R_ENDED.  No lock: readers wake the supervisor by writing an eventfd.
 */
#include "fuse_loop.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "initiator/util/clock.h"
#include "initiator/util/log.h"
#include "initiator/util/thread.h"
#include "fuse_io.h"
#include "fuse_rx.h"

/* The private signal that makes a reader's read(2) of /dev/fuse return EINTR. */
#define LOOP_KICK_SIGNAL SIGUSR2
/* While stopping: how often the readers not yet ended are woken again (ms). */
#define LOOP_KICK_MS 10
/*
 * How often the supervisor looks without being woken (ms): for spare
 * stand-ins, and for a session exited by another thread without a signal
 * (the live watcher, daemon.c, when the kernel does not take the mount).
 */
#define LOOP_CHECK_MS 250

enum reader_state { R_FREE, R_LIVE, R_ENDED };

struct loop;

struct reader {
	pthread_t t;
	struct loop *lp;
	struct fuse_buf buf;   /* the reader's; libfuse allocates its memory at the first read */
	struct gw_rx rx;       /* the reader's receive slice (fuse_rx.h) */
	struct fuse_buf rxbuf; /* a request read into rx's slice */
	struct gw_rx hrx;      /* the slice of a request the I/O thread handed over (fuse_io.h) */
	struct fuse_buf hbuf;  /* that request */
	_Atomic int state;     /* enum reader_state: R_LIVE by the supervisor, R_ENDED by the reader */
	atomic_bool busy;      /* in a handler */
	atomic_bool in_read;   /* reading /dev/fuse itself */
	atomic_bool retire;    /* the supervisor asks this stand-in to end */
	bool standin;          /* supervisor only */
};

struct loop {
	struct fuse_session *se;
	struct gw_io *io;      /* the I/O thread, NULL: the readers read every request */
	int efd;               /* eventfd: readers wake the supervisor */
	atomic_uint idle;      /* readers not in a handler */
	atomic_ulong handled;  /* handlers finished, ever */
	atomic_bool armed;     /* a stall check is due: set by the reader that made idle 0 */
	atomic_int err;        /* the first read error (negative errno), 0 if none */
	unsigned base, max;
	unsigned live;         /* supervisor only: readers started and not yet joined */
	struct reader *r;      /* max slots */
};

static void kick_noop(int sig)
{
	(void)sig;
}

/* Wake the supervisor (async-signal-safe; an eventfd write never blocks short of 2^64 - 1). */
static void loop_wake(struct loop *lp)
{
	uint64_t one = 1;
	if (write(lp->efd, &one, sizeof(one)) < 0)
		return; /* EAGAIN: already signalled */
}

static void loop_fail(struct loop *lp, int err)
{
	int none = 0;
	atomic_compare_exchange_strong(&lp->err, &none, err);
}

/*
 * Read the next request: into the reader's pool slice (fuse_rx.h), so
 * that a WRITE's handler can take the data over without a copy, or, when
 * no slice can be taken (none free, or the readers' cap reached), into
 * libfuse's buffer.  *fb is the request read.  Returns as
 * fuse_session_receive_buf.
 */
static int reader_receive(struct reader *r, struct fuse_buf **fb)
{
	int res = gw_rx_receive(&r->rx, r->lp->se, &r->rxbuf);
	if (res != -ENOBUFS) {
		*fb = &r->rxbuf;
		return res;
	}
	*fb = &r->buf;
	return fuse_session_receive_buf(r->lp->se, &r->buf);
}

/* The reader ends: its receive slice goes back to the pool, libfuse's buffer is freed. */
static void reader_receive_end(struct reader *r)
{
	gw_rx_release(&r->rx);
	free(r->buf.mem);
	r->buf.mem = NULL;
}

static void *reader_run(void *arg)
{
	struct reader *r = arg;
	struct loop *lp = r->lp;
	while (!fuse_session_exited(lp->se) && !atomic_load_explicit(&r->retire, memory_order_relaxed)) {
		struct fuse_buf *fb;
		void *item = NULL;
		int res;
		if (lp->io && gw_io_serving(lp->io)) {
			item = gw_io_take(lp->io, &r->hrx, &r->hbuf, &r->retire);
			if (!item)
				continue; /* woken: serving stopped, a stop, a retire */
			fb = &r->hbuf;
			res = (int)fb->size;
		} else {
			atomic_store(&r->in_read, true);
			res = reader_receive(r, &fb);
			atomic_store(&r->in_read, false);
		}
		if (res == -EINTR || res == -EAGAIN)
			continue; /* kicked, or the I/O thread serves (non-blocking): the loop's condition says what next */
		if (res <= 0) {
			/* 0: the session exited, or ENODEV (unmounted) made libfuse exit it */
			if (res < 0)
				loop_fail(lp, res);
			fuse_session_exit(lp->se);
			break;
		}
		atomic_store_explicit(&r->busy, true, memory_order_relaxed);
		if (atomic_fetch_sub(&lp->idle, 1) == 1 && !atomic_exchange(&lp->armed, true))
			loop_wake(lp); /* the last idle reader: the supervisor checks for a stall */
		fuse_session_process_buf(lp->se, fb);
		if (item)
			gw_io_done(lp->io, &r->hrx, item);
		else
			gw_rx_done(&r->rx);
		atomic_fetch_add_explicit(&lp->handled, 1, memory_order_relaxed);
		atomic_fetch_add(&lp->idle, 1);
		atomic_store_explicit(&r->busy, false, memory_order_relaxed);
	}
	atomic_fetch_sub(&lp->idle, 1);
	reader_receive_end(r);
	atomic_store_explicit(&r->state, R_ENDED, memory_order_release);
	loop_wake(lp);
	return NULL;
}

/* Start a reader in a free slot.  Returns 0 or a negative errno (-EAGAIN: no free slot). */
static int reader_start(struct loop *lp, bool standin)
{
	for (unsigned i = 0; i < lp->max; i++) {
		struct reader *r = &lp->r[i];
		if (atomic_load_explicit(&r->state, memory_order_relaxed) != R_FREE)
			continue;
		memset(&r->buf, 0, sizeof(r->buf));
		memset(&r->rx, 0, sizeof(r->rx));
		memset(&r->hrx, 0, sizeof(r->hrx));
		atomic_store(&r->in_read, false);
		r->lp = lp;
		r->standin = standin;
		atomic_store(&r->busy, false);
		atomic_store(&r->retire, false);
		atomic_store(&r->state, R_LIVE);
		atomic_fetch_add(&lp->idle, 1);
		int rc = thread_start_quiet(&r->t, reader_run, r);
		if (rc) {
			atomic_fetch_sub(&lp->idle, 1);
			atomic_store(&r->state, R_FREE);
			return -rc;
		}
		lp->live++;
		return 0;
	}
	return -EAGAIN;
}

/* Join the readers that have ended. */
static void readers_reap(struct loop *lp)
{
	for (unsigned i = 0; i < lp->max && lp->live; i++) {
		struct reader *r = &lp->r[i];
		if (atomic_load_explicit(&r->state, memory_order_acquire) != R_ENDED)
			continue;
		pthread_join(r->t, NULL);
		atomic_store_explicit(&r->state, R_FREE, memory_order_relaxed);
		lp->live--;
	}
}

/*
 * Wait until us microseconds have passed (us < 0: no limit) or a reader
 * wrote the eventfd or a signal came; mask is the mask to wait with (the
 * stop signals unblocked).
 */
static void loop_wait(struct loop *lp, int64_t us, const sigset_t *mask)
{
	struct pollfd p = {.fd = lp->efd, .events = POLLIN};
	struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
	if (ppoll(&p, 1, us < 0 ? NULL : &ts, mask) > 0) {
		uint64_t v;
		if (read(lp->efd, &v, sizeof(v)) < 0)
			return; /* another wait took it */
	}
}

/* Sleep GW_LOOP_STALL_MS (or until the session exits); readers may write the eventfd meanwhile. */
static void stall_sleep(struct loop *lp, const sigset_t *mask)
{
	int64_t end = clk_now_us() + GW_LOOP_STALL_MS * 1000;
	for (int64_t now = clk_now_us(); now < end && !fuse_session_exited(lp->se); now = clk_now_us())
		loop_wait(lp, end - now, mask);
}

/* A stall check: every reader was in a handler; start a stand-in if none finished one meanwhile. */
static void stall_check(struct loop *lp, const sigset_t *mask)
{
	unsigned long before = atomic_load(&lp->handled);
	stall_sleep(lp, mask);
	if (fuse_session_exited(lp->se))
		return;
	bool stuck = atomic_load(&lp->idle) == 0 && atomic_load(&lp->handled) == before;
	if (stuck && lp->live < lp->max) {
		int rc = reader_start(lp, true);
		if (rc)
			log_warn("cannot start a FUSE reader: %s", strerror(-rc));
		else
			log_debug("FUSE readers all waiting for %d ms: stand-in started (%u readers)", GW_LOOP_STALL_MS,
				  lp->live);
	}
	atomic_store(&lp->armed, false);
	/* All still busy: no reader will make idle 0 again, so check once more (unless none can be added). */
	if (atomic_load(&lp->idle) == 0 && lp->live < lp->max && !atomic_exchange(&lp->armed, true))
		loop_wake(lp);
}

/* Ask up to n idle stand-ins to end (the last started first). */
static void standins_retire(struct loop *lp, unsigned n)
{
	for (unsigned i = lp->max; i-- > 0 && n;) {
		struct reader *r = &lp->r[i];
		/* one asked before but still idle missed its kick (it came just before its read): again */
		if (atomic_load(&r->state) != R_LIVE || !r->standin || atomic_load(&r->busy))
			continue;
		atomic_store(&r->retire, true);
		pthread_kill(r->t, LOOP_KICK_SIGNAL);
		if (lp->io)
			gw_io_wake_all(lp->io);
		n--;
	}
}

/* While the I/O thread serves: kick the readers still in read(2) of /dev/fuse; whether there were any. */
static bool readers_kick_reading(struct loop *lp)
{
	bool any = false;
	for (unsigned i = 0; i < lp->max; i++) {
		struct reader *r = &lp->r[i];
		if (atomic_load(&r->state) == R_LIVE && atomic_load(&r->in_read)) {
			pthread_kill(r->t, LOOP_KICK_SIGNAL);
			any = true;
		}
	}
	return any;
}

/*
 * Until the session exits (seen at once on a stop signal or a reader's
 * end, else within LOOP_CHECK_MS): stall checks, and the end of the spare
 * stand-ins once more than the base count have been idle for
 * GW_LOOP_SPARE_MS.
 */
static void supervise(struct loop *lp, const sigset_t *mask)
{
	int64_t spare_since = -1;
	while (!fuse_session_exited(lp->se)) {
		readers_reap(lp);
		if (lp->io && gw_io_serving(lp->io) && readers_kick_reading(lp)) {
			loop_wait(lp, LOOP_KICK_MS * 1000, mask); /* until none reads /dev/fuse beside the I/O thread */
			continue;
		}
		if (atomic_load(&lp->armed)) {
			stall_check(lp, mask);
			continue;
		}
		unsigned idle = atomic_load(&lp->idle);
		if (lp->live > lp->base && idle > lp->base) {
			int64_t now = clk_now_ms();
			if (spare_since < 0) {
				spare_since = now;
			} else if (now - spare_since >= GW_LOOP_SPARE_MS) {
				standins_retire(lp, idle - lp->base);
				spare_since = now;
			}
		} else {
			spare_since = -1;
		}
		loop_wait(lp, LOOP_CHECK_MS * 1000, mask);
	}
}

/* After the session exited: wake the readers blocked in read(2) until every reader has ended and is joined. */
static void readers_stop(struct loop *lp, const sigset_t *mask)
{
	for (;;) {
		readers_reap(lp);
		if (!lp->live)
			return;
		for (unsigned i = 0; i < lp->max; i++) {
			struct reader *r = &lp->r[i];
			/* one in a handler finishes it first, then sees the session exited */
			if (atomic_load(&r->state) == R_LIVE && !atomic_load(&r->busy))
				pthread_kill(r->t, LOOP_KICK_SIGNAL);
		}
		if (lp->io)
			gw_io_wake_all(lp->io);
		loop_wait(lp, LOOP_KICK_MS * 1000, mask);
	}
}

unsigned gw_fuse_loop_base(unsigned max_threads)
{
	/* half the CPUs, at least one: the readers share them with the connection's event thread and the
	 * application (on 2 CPUs a second reader lost 15-40 % at QD32 against one, see docs/performance.md) */
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned n = ncpu >= 4 ? (unsigned)(ncpu / 2) : 1;
	if (max_threads < 1)
		max_threads = 1;
	return n < max_threads ? n : max_threads;
}

/* The I/O thread started or stopped serving: the supervisor looks (fuse_io.h's on_change). */
static void loop_io_change(void *arg)
{
	loop_wake(arg);
}

int gw_fuse_loop(struct fuse_session *se, unsigned max_threads, struct gw_io *io, void (*ended)(void *arg),
		 void *arg)
{
	struct loop lp = {.se = se, .io = io, .base = gw_fuse_loop_base(max_threads)};
	lp.max = max_threads > lp.base ? max_threads : lp.base;
	lp.r = calloc(lp.max, sizeof(*lp.r));
	lp.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!lp.r || lp.efd < 0) {
		int rc = lp.r ? -errno : -ENOMEM;
		free(lp.r);
		if (lp.efd >= 0)
			close(lp.efd);
		return rc;
	}

	struct sigaction kick = {.sa_handler = kick_noop}, old_kick;
	sigemptyset(&kick.sa_mask); /* no SA_RESTART: a read(2) it interrupts returns EINTR */
	sigaction(LOOP_KICK_SIGNAL, &kick, &old_kick);
	sigset_t oldmask, waitmask;
	thread_quiet_begin(&oldmask); /* the stop signals come only while waiting (ppoll): no wake-up lost */
	waitmask = oldmask;
	sigdelset(&waitmask, SIGTERM);
	sigdelset(&waitmask, SIGINT);
	sigdelset(&waitmask, SIGHUP);
	sigdelset(&waitmask, SIGUSR1);

	if (io)
		gw_io_on_change(io, loop_io_change, &lp);
	for (unsigned i = 0; i < lp.base; i++) {
		int rc = reader_start(&lp, false);
		if (rc)
			log_warn("cannot start a FUSE reader: %s", strerror(-rc));
	}
	if (!lp.live) {
		loop_fail(&lp, -EAGAIN);
	} else {
		supervise(&lp, &waitmask);
		if (ended)
			ended(arg);
		readers_stop(&lp, &waitmask);
	}

	if (io) {
		gw_io_stop(io); /* before the reset: a reset session reads as not exited */
		gw_io_on_change(io, NULL, NULL);
		gw_io_close(io); /* what the I/O thread handed over and no reader took */
	}
	thread_quiet_end(&oldmask);
	sigaction(LOOP_KICK_SIGNAL, &old_kick, NULL);
	close(lp.efd);
	free(lp.r);
	fuse_session_reset(se);
	return atomic_load(&lp.err);
}
