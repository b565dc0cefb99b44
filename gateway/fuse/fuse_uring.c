/* SPDX-License-Identifier: MIT */
/*
 * FUSE over io_uring (see fuse_uring.h).
 *
 * Queues and threads: the kernel has one queue per possible CPU and
 * queues a request on the queue of the CPU its caller runs on; the ring
 * is used once every queue has an entry registered.  Each ring (an
 * io_uring of SQE128 entries) carries the entries of one or more queues
 * and is served by one thread (not pinned), plus stand-ins while that one
 * waits in a handler for back-pressure (started by the supervisor thread
 * after GW_LOOP_STALL_MS, as fuse_loop.c does for /dev/fuse).  A thread may
 * not end before its ring (see ring_run): a stand-in that finishes a
 * handler while another thread of its ring is out of handlers parks
 * instead (park), taking no part in the ring until the supervisor wakes it
 * for the next stall; the entries it committed last pass to the ring's
 * other threads as their requests come.  Only the thread holding the
 * ring's cq_lock submits
 * (REGISTER of the entries, COMMIT_AND_FETCH of each reply, the read of
 * the ring's eventfd) and reaps; it turns a request into /dev/fuse's
 * layout (fuse_uring_conv.c), lets go of cq_lock and runs the handler
 * (fuse_session_process_buf), as a /dev/fuse reader does.
 *
 * Replies: libfuse writes every reply through our writev hook, on
 * whichever thread replies (the ring thread, the connection's event
 * thread, the retry thread).  The hook finds the entry by the reply's
 * unique (each entry in a handler holds its request's unique, an atomic
 * that the hook takes back with a compare-exchange: exactly once), copies
 * the reply into the entry, and queues the entry on its ring's commit list
 * (lock: the ring's `lock`), writing the ring's eventfd unless it runs on
 * the ring's own thread.  A reply that matches no entry goes to /dev/fuse.
 *
 * Ownership: an entry's memory (header and payload) is the kernel's from
 * REGISTER or COMMIT_AND_FETCH until its completion, then the ring
 * thread's and the handler's until the reply is copied in, then the ring
 * thread's again.  u->rings and the entries are made by the thread that
 * writes the INIT reply, before the rings start, and freed by
 * gw_fuse_uring_end after the threads are joined.
 */
#include "fuse_uring.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "initiator/util/log.h"
#include "initiator/util/thread.h"
#include "fuse_loop.h"
#include "fuse_resume.h"
#include "fuse_rx.h"
#include "custom_io.h"
#include "fuse_uring_conv.h"
#include "gateway/gateway.h"
#include "gateway/handover/lifestate.h"

#define ENABLE_URING_PARAM "/sys/module/fuse/parameters/enable_uring"
/* user_data of the eventfd read (entries are pointers, never 1) */
#define EFD_TAG 1u
/* Room for an INIT reply (fuse_out_header + fuse_init_out) */
#define INIT_REPLY_MAX 256

struct ring;

struct ent {
	struct ring *r;
	struct gw_fuse_uring_req_header *hdr; /* iovec[0] */
	char *payload;                        /* iovec[1], GW_FUSE_URING_HEADROOM bytes after hdr's page start */
	struct iovec iov[2];
	_Atomic uint64_t unique;              /* the request in a handler; 0: none */
	uint64_t commit_id;                   /* the reply's unique, for COMMIT_AND_FETCH */
	uint32_t opcode;
	uint16_t qid;
	bool dead;                            /* ring thread: completed with an error, not resubmitted */
};

struct ring {
	struct gw_fuse_uring *u;
	struct io_uring ring;
	bool ring_ok;
	pthread_mutex_t cq_lock;              /* held by the thread that submits and reaps (the poller) */
	bool registered;                      /* under cq_lock: the entries were registered */
	pthread_t *t;                         /* the ring's threads: [0] from the start, stand-ins after it */
	unsigned nthreads, tcap;              /* written by the starter (rings_create, then the supervisor) */
	atomic_uint idle;                     /* threads not in a handler */
	atomic_ulong handled;                 /* handlers finished, ever */
	atomic_bool armed;                    /* a stall check is due: set by the thread that made idle 0 */
	int efd;
	uint64_t efd_val;
	atomic_bool kicked;                   /* efd written, its read not yet reaped: no need to write again */
	struct ent *ents;
	unsigned nents;
	void *mem;                            /* one mapping for the entries' headers and payloads */
	size_t mem_len;
	pthread_mutex_t lock;                 /* guards pending, npending */
	struct ent **pending;                 /* replies copied in, to be committed */
	unsigned npending;
	atomic_ullong queued;                 /* replies put on pending so far */
	atomic_ullong committed;              /* of those, submitted to the kernel (gw_fuse_uring_flush) */
	unsigned long long prepared;          /* COMMIT_AND_FETCHes prepared, not yet submitted (cq_lock) */
	atomic_bool stop;
	atomic_uint started;                  /* threads that ran ring_run: the first is no stand-in */
	pthread_mutex_t park_lock;            /* guards parked, unparks */
	pthread_cond_t park_cv;
	unsigned parked;                      /* stand-ins parked */
	unsigned unparks;                     /* wake-ups the supervisor gave that no parked stand-in took yet */
};

struct gw_fuse_uring {
	struct fuse_session *se;
	enum gw_uring_mode mode;
	unsigned depth;
	int fd;                               /* /dev/fuse */
	atomic_uint_fast64_t *copied;
	atomic_bool init_seen;
	uint64_t init_unique;
	bool offered;
	atomic_bool active;                   /* the rings are registered and serve */
	atomic_bool failed;
	atomic_bool ending;                   /* the FUSE loop has ended: refuse new requests, errors are the stop's */
	atomic_ullong requests;
	size_t payload_sz;
	unsigned nqueues, nrings;
	struct ring *rings;
	/* the rings wait for the INIT reply to be written before they register */
	pthread_mutex_t go_lock;
	pthread_cond_t go_cv;
	_Atomic int go;                       /* 0: wait, 1: register, -1: none (fallback, failure, end) */
	/* the supervisor: starts a stand-in on a ring whose threads all wait in handlers */
	pthread_t sup;
	bool sup_ok;
	int sup_efd;
	atomic_bool sup_stop;
};

static _Thread_local struct ring *tl_ring; /* the ring whose thread this is */

int gw_uring_mode_parse(const char *text, enum gw_uring_mode *out)
{
	if (!text || !strcmp(text, "auto"))
		*out = GW_URING_AUTO;
	else if (!strcmp(text, "on"))
		*out = GW_URING_ON;
	else if (!strcmp(text, "off"))
		*out = GW_URING_OFF;
	else
		return -EINVAL;
	return 0;
}

int gw_uring_kernel_check(char *why, size_t cap)
{
	char v[8] = "";
	FILE *f = fopen(ENABLE_URING_PARAM, "re");
	if (!f) {
		snprintf(why, cap, "this kernel has no FUSE over io_uring (%s: %s)", ENABLE_URING_PARAM, strerror(errno));
		return -EOPNOTSUPP;
	}
	bool y = fgets(v, sizeof(v), f) && (v[0] == 'Y' || v[0] == 'y' || v[0] == '1');
	fclose(f);
	if (!y) {
		snprintf(why, cap, "the kernel does not offer FUSE over io_uring (%s is N)", ENABLE_URING_PARAM);
		return -EOPNOTSUPP;
	}
	return 0;
}

/* ---- the rings ---- */

static void prep_cmd(struct io_uring_sqe *sqe, int fd, struct ent *e, uint32_t op)
{
	gw_fuse_uring_prep_cmd(sqe, fd, op, e->qid, e->iov, e->commit_id, e);
}

static void arm_eventfd(struct ring *r)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
	if (!sqe)
		return;
	io_uring_prep_read(sqe, r->efd, &r->efd_val, sizeof(r->efd_val), 0);
	io_uring_sqe_set_data64(sqe, EFD_TAG);
}

/* Queue e's reply (copied in) for COMMIT_AND_FETCH by its ring's thread. */
static void commit_queue(struct ent *e)
{
	struct ring *r = e->r;
	pthread_mutex_lock(&r->lock);
	r->pending[r->npending++] = e; /* at most every entry once: never full */
	atomic_fetch_add(&r->queued, 1);
	pthread_mutex_unlock(&r->lock);
	/* its own thread in a handler with no other thread polling: it submits the list itself on return */
	if ((tl_ring != r || atomic_load(&r->idle) > 0) && !atomic_exchange(&r->kicked, true)) {
		uint64_t one = 1;
		if (write(r->efd, &one, sizeof(one)) < 0)
			return; /* EAGAIN: already signalled */
	}
}

/* An error reply of our own (no handler): fuse_out_header only. */
static void reply_err(struct ent *e, uint64_t unique, int err)
{
	struct fuse_out_header out = {.len = sizeof(out), .error = -err, .unique = unique};
	struct iovec iov = {&out, sizeof(out)};
	gw_fuse_uring_from_reply(&iov, 1, e->hdr, e->payload, 0, NULL);
	e->commit_id = unique;
	commit_queue(e);
}

/* A request arrived on e: run its handler (or refuse it once the session is ending). */
static void ent_dispatch(struct ent *e)
{
	struct gw_fuse_uring *u = e->r->u;
	struct fuse_in_header in;
	memcpy(&in, e->hdr->in_out, sizeof(in));
	void *start;
	size_t len;
	if (fuse_session_exited(u->se) || atomic_load(&u->ending)) {
		reply_err(e, in.unique, ENOTCONN);
		return;
	}
	if (gw_fuse_uring_to_dev(e->hdr, e->payload, u->payload_sz, &start, &len)) {
		log_warn("FUSE ring: request %llu (opcode %u) has inconsistent lengths (len %u, payload %u): EIO",
			 (unsigned long long)in.unique, in.opcode, in.len, e->hdr->ring_ent_in_out.payload_sz);
		reply_err(e, in.unique, EIO);
		return;
	}
	e->opcode = in.opcode;
	atomic_store_explicit(&e->unique, in.unique, memory_order_release);
	atomic_fetch_add_explicit(&u->requests, 1, memory_order_relaxed);
	struct fuse_buf fb = {.mem = start, .size = len};
	fuse_session_process_buf(u->se, &fb);
}

/* What was prepared went to the kernel (cq_lock held). */
static void ring_submitted(struct ring *r)
{
	atomic_fetch_add(&r->committed, r->prepared);
	r->prepared = 0;
}

/*
 * Prepare a COMMIT_AND_FETCH for each reply queued (cq_lock held); they
 * go to the kernel with the next io_uring_submit_and_wait, or, once
 * ending, at once, so that gw_fuse_uring_flush sees every reply reach the
 * kernel before the unmount.
 */
static void ring_submit_pending(struct ring *r)
{
	pthread_mutex_lock(&r->lock);
	unsigned n = r->npending;
	for (unsigned i = 0; i < r->npending; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
		if (!sqe) { /* cannot happen: one slot per entry */
			memmove(r->pending, r->pending + i, (r->npending - i) * sizeof(*r->pending));
			r->npending -= i;
			n = i;
			break;
		}
		prep_cmd(sqe, r->u->fd, r->pending[i], GW_FUSE_IO_URING_CMD_COMMIT_AND_FETCH);
	}
	if (n == r->npending)
		r->npending = 0;
	pthread_mutex_unlock(&r->lock);
	r->prepared += n;
	if (r->prepared && atomic_load(&r->u->ending) && io_uring_submit(&r->ring) >= 0)
		ring_submitted(r);
}

static void ring_fail(struct ring *r, struct ent *e, int res)
{
	struct gw_fuse_uring *u = r->u;
	e->dead = true;
	if (res == -ENOTCONN || atomic_load(&r->stop) || atomic_load(&u->ending) || fuse_session_exited(u->se))
		return; /* the stop, the unmount */
	if (atomic_exchange(&u->active, false)) {
		if (u->mode == GW_URING_ON) {
			log_err("io_uring=on: a FUSE ring entry failed (queue %u: %s): stopping", e->qid, strerror(-res));
			atomic_store(&u->failed, true);
			fuse_session_exit(u->se);
		} else {
			log_warn("FUSE ring entry failed (queue %u: %s): requests go on over /dev/fuse", e->qid,
				 strerror(-res));
		}
	}
}

static void sup_wake(struct gw_fuse_uring *u)
{
	uint64_t one = 1;
	if (write(u->sup_efd, &one, sizeof(one)) < 0)
		return; /* EAGAIN: already signalled */
}

/* How park() ended: not parked (another thread was not out of handlers), woken by unpark, the ring's stop. */
enum park_end { PARK_NOT, PARK_WOKEN, PARK_STOP };

/*
 * A stand-in, its handler done, steps aside if another thread of r is out
 * of its handlers: r is served without it.  It counts itself parked before
 * it looks, so that a stall check in between finds it (unpark) rather
 * than nothing to wake.  Its queued replies are committed by the serving
 * thread (woken through efd).  It waits until the supervisor needs it
 * again (unpark, which counts it idle) or the ring stops.  While it waits,
 * a request for an entry it committed last is still delivered in its
 * context (io_uring's task work wakes it) and lands on the ring for the
 * others.  PARK_NOT: the caller counts itself idle again.
 */
static enum park_end park(struct ring *r)
{
	pthread_mutex_lock(&r->park_lock);
	r->parked++;
	pthread_mutex_unlock(&r->park_lock);
	atomic_thread_fence(memory_order_seq_cst); /* parked, then idle: against the stall check's idle, then parked */
	bool alone = atomic_load(&r->idle) == 0;
	if (!alone && !atomic_exchange(&r->kicked, true)) {
		uint64_t one = 1;
		if (write(r->efd, &one, sizeof(one)) < 0)
			log_debug("FUSE ring: eventfd: %s", strerror(errno));
	}
	pthread_mutex_lock(&r->park_lock);
	while (!alone && !r->unparks && !atomic_load(&r->stop))
		pthread_cond_wait(&r->park_cv, &r->park_lock);
	enum park_end end = PARK_NOT;
	if (r->unparks) { /* a wake-up, for this thread or another parked one: this one serves, counted idle */
		r->unparks--;
		end = PARK_WOKEN;
	}
	r->parked--;
	if (atomic_load(&r->stop))
		end = PARK_STOP;
	pthread_mutex_unlock(&r->park_lock);
	return end;
}

/* The supervisor: wake a parked stand-in of r, counted idle from now, if one is parked.  Whether one was. */
static bool unpark(struct ring *r)
{
	pthread_mutex_lock(&r->park_lock);
	bool any = r->parked > r->unparks;
	if (any) {
		r->unparks++;
		atomic_fetch_add(&r->idle, 1); /* as ring_thread_start does: no second wake-up before it runs */
		pthread_cond_signal(&r->park_cv);
	}
	pthread_mutex_unlock(&r->park_lock);
	return any;
}

/* Stand-ins of r parked, not asked back (any thread). */
static unsigned parked_count(struct ring *r)
{
	pthread_mutex_lock(&r->park_lock);
	unsigned n = r->parked > r->unparks ? r->parked - r->unparks : 0;
	pthread_mutex_unlock(&r->park_lock);
	return n;
}

/*
 * A ring's thread: leader and followers.  The thread that holds cq_lock
 * submits the queued commits, waits for completions and takes one; for a
 * request it lets go of cq_lock and runs the handler, so that another
 * thread of the ring (a stand-in, started when all wait in handlers) can
 * take over while a handler waits for back-pressure.  The first thread to
 * hold cq_lock registers the entries.  Threads never end before the ring
 * does: the kernel delivers an entry's next request in the task that
 * submitted its last command, and fails it if that task is gone.
 */
static void *ring_run(void *arg)
{
	struct ring *r = arg;
	struct gw_fuse_uring *u = r->u;
	tl_ring = r;
	bool standin = atomic_fetch_add(&r->started, 1) > 0;
	pthread_mutex_lock(&u->go_lock);
	while (!u->go)
		pthread_cond_wait(&u->go_cv, &u->go_lock);
	int go = u->go;
	pthread_mutex_unlock(&u->go_lock);
	if (go < 0)
		return NULL;
	pthread_mutex_lock(&r->cq_lock);
	if (!r->registered) {
		for (unsigned i = 0; i < r->nents; i++) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring); /* the SQ holds every entry */
			if (sqe)
				prep_cmd(sqe, u->fd, &r->ents[i], GW_FUSE_IO_URING_CMD_REGISTER);
		}
		arm_eventfd(r);
		r->registered = true;
	}
	while (!atomic_load(&r->stop)) {
		struct io_uring_cqe *cqe;
		ring_submit_pending(r);
		if (io_uring_peek_cqe(&r->ring, &cqe) != 0) {
			int rc = io_uring_submit_and_wait(&r->ring, 1);
			if (rc >= 0)
				ring_submitted(r);
			if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY && rc != -ETIME) {
				log_err("FUSE ring: io_uring_enter: %s", strerror(-rc));
				break;
			}
			continue;
		}
		uint64_t ud = cqe->user_data;
		int res = cqe->res;
		io_uring_cqe_seen(&r->ring, cqe);
		if (ud == EFD_TAG) {
			/* before the commit list is taken: a reply queued after this writes efd again */
			atomic_store(&r->kicked, false);
			if (!atomic_load(&r->stop))
				arm_eventfd(r);
			continue;
		}
		struct ent *e = (struct ent *)(uintptr_t)ud;
		if (res) {
			ring_fail(r, e, res);
			continue;
		}
		if (atomic_fetch_sub(&r->idle, 1) == 1 && !atomic_exchange(&r->armed, true))
			sup_wake(u); /* the last thread not in a handler: the supervisor checks for a stall */
		pthread_mutex_unlock(&r->cq_lock);
		ent_dispatch(e);
		atomic_fetch_add_explicit(&r->handled, 1, memory_order_relaxed);
		/* no longer needed while another thread is out of handlers: park */
		enum park_end pe = standin && atomic_load(&r->idle) > 0 ? park(r) : PARK_NOT;
		if (pe == PARK_STOP)
			return NULL;
		if (pe == PARK_NOT)
			atomic_fetch_add(&r->idle, 1);
		pthread_mutex_lock(&r->cq_lock);
	}
	pthread_mutex_unlock(&r->cq_lock);
	return NULL;
}

/* Start one more thread on r (the stop signals blocked).  Returns 0 or a negative errno. */
static int ring_thread_start(struct ring *r)
{
	if (r->nthreads >= r->tcap)
		return -EAGAIN;
	atomic_fetch_add(&r->idle, 1);
	int rc = thread_start_quiet(&r->t[r->nthreads], ring_run, r);
	if (rc) {
		atomic_fetch_sub(&r->idle, 1);
		return -rc;
	}
	r->nthreads++;
	return 0;
}

/* As fuse_loop.c's supervisor: after GW_LOOP_STALL_MS with every thread of a ring in a handler and none done, a stand-in. */
static void *sup_run(void *arg)
{
	struct gw_fuse_uring *u = arg;
	while (!atomic_load(&u->sup_stop)) {
		struct pollfd p = {.fd = u->sup_efd, .events = POLLIN};
		if (poll(&p, 1, 250) > 0) {
			uint64_t v;
			if (read(u->sup_efd, &v, sizeof(v)) < 0)
				continue;
		}
		for (bool again = true; again && !atomic_load(&u->sup_stop);) {
			again = false;
			for (unsigned i = 0; i < u->nrings; i++) {
				struct ring *r = &u->rings[i];
				if (!atomic_load(&r->armed))
					continue;
				unsigned long before = atomic_load(&r->handled);
				struct timespec ts = {0, GW_LOOP_STALL_MS * 1000000L};
				nanosleep(&ts, NULL);
				if (atomic_load(&r->idle) == 0 && atomic_load(&r->handled) == before) {
					int rc = unpark(r) ? 1 : ring_thread_start(r);
					if (rc == 1)
						log_debug("FUSE ring %u: threads all in handlers for %d ms: a parked stand-in "
							  "woken", i, GW_LOOP_STALL_MS);
					else if (rc && rc != -EAGAIN)
						log_warn("cannot start a FUSE ring thread: %s", strerror(-rc));
					else if (!rc)
						log_debug("FUSE ring %u: threads all in handlers for %d ms: stand-in started "
							  "(%u threads)", i, GW_LOOP_STALL_MS, r->nthreads);
				}
				atomic_store(&r->armed, false);
				if (atomic_load(&r->idle) == 0 && (r->nthreads < r->tcap || parked_count(r)) &&
				    !atomic_exchange(&r->armed, true))
					again = true; /* all still busy: look again */
			}
		}
	}
	return NULL;
}

/* Free what rings_create made (threads joined first). */
static void rings_free(struct gw_fuse_uring *u)
{
	if (u->sup_ok) {
		atomic_store(&u->sup_stop, true);
		sup_wake(u);
		pthread_join(u->sup, NULL);
		u->sup_ok = false;
	}
	for (unsigned i = 0; u->rings && i < u->nrings; i++) {
		struct ring *r = &u->rings[i];
		atomic_store(&r->stop, true);
		pthread_mutex_lock(&r->park_lock);
		pthread_cond_broadcast(&r->park_cv);
		pthread_mutex_unlock(&r->park_lock);
		if (r->nthreads) {
			uint64_t one = 1;
			if (write(r->efd, &one, sizeof(one)) < 0)
				log_debug("FUSE ring: eventfd: %s", strerror(errno));
		}
		for (unsigned k = 0; k < r->nthreads; k++)
			pthread_join(r->t[k], NULL);
		if (r->ring_ok)
			io_uring_queue_exit(&r->ring); /* cancels the entries still registered */
		if (r->efd >= 0)
			close(r->efd);
		if (r->mem)
			munmap(r->mem, r->mem_len);
		free(r->ents);
		free(r->pending);
		free(r->t);
		pthread_mutex_destroy(&r->lock);
		pthread_mutex_destroy(&r->cq_lock);
		pthread_mutex_destroy(&r->park_lock);
		pthread_cond_destroy(&r->park_cv);
	}
	free(u->rings);
	u->rings = NULL;
	u->nrings = 0;
}

/*
 * Ring threads: one per two CPU queues, at least one (as the /dev/fuse
 * readers: they share the CPUs with the event thread and the
 * application; on two CPUs one thread for both queues was at least as
 * fast as one per queue, see docs/performance.md).  ISERFUSE_URING_THREADS=N
 * (1..nqueues) sets it, for measurements.
 */
static unsigned rings_wanted(unsigned nqueues)
{
	const char *e = getenv("ISERFUSE_URING_THREADS");
	unsigned n = nqueues >= 4 ? nqueues / 2 : 1;
	if (e && *e) {
		char *end;
		unsigned long v = strtoul(e, &end, 10);
		if (!*end && v >= 1 && v <= nqueues)
			n = (unsigned)v;
		else
			log_warn("ISERFUSE_URING_THREADS=%s ignored: 1..%u expected; %u ring thread%s", e, nqueues, n,
				 n == 1 ? "" : "s");
	}
	return n;
}

/*
 * The rings, their entries and their threads (waiting for u->go).  Each
 * entry: one page of headers (struct gw_fuse_uring_req_header at its
 * start, the /dev/fuse layout's prefix at its end), then the payload
 * buffer, page aligned.  Returns 0 or a negative errno (all freed then).
 */
static int rings_create(struct gw_fuse_uring *u)
{
	long ncpu = sysconf(_SC_NPROCESSORS_CONF); /* the possible CPUs: the kernel's queue count */
	u->nqueues = ncpu > 0 ? (unsigned)ncpu : 1;
	u->nrings = rings_wanted(u->nqueues);
	u->rings = calloc(u->nrings, sizeof(*u->rings));
	if (!u->rings)
		return -ENOMEM;
	size_t stride = 4096 + ((u->payload_sz + 4095) & ~(size_t)4095);
	for (unsigned i = 0; i < u->nrings; i++)
		u->rings[i].efd = -1;
	int rc = 0;
	for (unsigned i = 0; i < u->nrings && !rc; i++) {
		struct ring *r = &u->rings[i];
		r->u = u;
		pthread_mutex_init(&r->lock, NULL);
		pthread_mutex_init(&r->cq_lock, NULL);
		pthread_mutex_init(&r->park_lock, NULL);
		pthread_cond_init(&r->park_cv, NULL);
		unsigned nq = u->nqueues / u->nrings + (i < u->nqueues % u->nrings); /* queues i, i + nrings, ... */
		r->nents = nq * u->depth;
		r->ents = calloc(r->nents, sizeof(*r->ents));
		r->pending = calloc(r->nents, sizeof(*r->pending));
		r->tcap = r->nents + 1; /* at most one thread per entry in a handler, and one polling */
		r->t = calloc(r->tcap, sizeof(*r->t));
		r->mem_len = stride * r->nents;
		r->mem = mmap(NULL, r->mem_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (r->mem == MAP_FAILED)
			r->mem = NULL;
		r->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (!r->ents || !r->pending || !r->t || !r->mem || r->efd < 0) {
			rc = r->efd < 0 && r->mem ? -errno : -ENOMEM;
			break;
		}
		for (unsigned k = 0; k < r->nents; k++) {
			struct ent *e = &r->ents[k];
			char *base = (char *)r->mem + k * stride;
			e->r = r;
			e->qid = (uint16_t)(i + (k / u->depth) * u->nrings);
			e->hdr = (struct gw_fuse_uring_req_header *)(void *)base;
			e->payload = base + 4096;
			e->iov[0] = (struct iovec){e->hdr, sizeof(*e->hdr)};
			e->iov[1] = (struct iovec){e->payload, u->payload_sz};
		}
		/* any thread of the ring may submit (under cq_lock): no SINGLE_ISSUER, no DEFER_TASKRUN */
		struct io_uring_params p = {.flags = IORING_SETUP_SQE128};
		rc = io_uring_queue_init_params(r->nents + 2, &r->ring, &p);
		if (rc)
			break;
		r->ring_ok = true;
		rc = ring_thread_start(r);
	}
	if (!rc) {
		u->sup_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		rc = u->sup_efd < 0 ? -errno : -thread_start_quiet(&u->sup, sup_run, u);
		u->sup_ok = !rc;
	}
	if (rc) {
		pthread_mutex_lock(&u->go_lock);
		u->go = -1;
		pthread_cond_broadcast(&u->go_cv);
		pthread_mutex_unlock(&u->go_lock);
		rings_free(u);
	}
	return rc;
}

/* ---- the custom I/O ---- */

static struct gw_fuse_uring *uring_of(void *userdata) { return ((struct gw *)userdata)->uring; }

/*
 * A request read from /dev/fuse, by libfuse (io_read) or by a reader into
 * its receive slice (fuse_rx.c): note the INIT request and whether the
 * kernel offers the rings.  Any reader thread.
 */
static void note_request(void *arg, const void *buf, size_t n)
{
	struct gw_fuse_uring *u = arg;
	if (atomic_load_explicit(&u->init_seen, memory_order_acquire))
		return;
	uint64_t unique;
	bool offered;
	if (gw_fuse_uring_init_request(buf, n, &unique, &offered)) {
		u->init_unique = unique;
		u->offered = offered;
		atomic_store_explicit(&u->init_seen, true, memory_order_release);
	}
}

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t n = read(fd, buf, len);
	if (n > 0) {
		gw_resume_note(buf, (size_t)n);
		note_request(uring_of(userdata), buf, (size_t)n);
	}
	return n;
}

/* -o io_uring=on cannot be honoured: the INIT fails (the kernel drops the mount), the session ends. */
static ssize_t init_refuse(struct gw_fuse_uring *u, int fd, const char *why)
{
	log_err("io_uring=on: %s", why);
	atomic_store(&u->failed, true);
	struct fuse_out_header out = {.len = sizeof(out), .error = -EPROTO, .unique = u->init_unique};
	ssize_t n = write(fd, &out, sizeof(out));
	fuse_session_exit(u->se);
	return n;
}

/* The INIT reply: with the flag once the rings are set up, else as libfuse made it. */
static ssize_t init_reply(struct gw_fuse_uring *u, int fd, struct iovec *iov, int count)
{
	char why[160];
	char buf[INIT_REPLY_MAX];
	struct fuse_init_out init;
	ssize_t n = -1;
	int rc = 0;
	if (!u->offered) {
		gw_uring_kernel_check(why, sizeof(why));
		if (!why[0])
			snprintf(why, sizeof(why), "the kernel did not offer FUSE over io_uring in its INIT request");
	} else if ((n = gw_fuse_uring_init_reply_enable(iov, count, buf, sizeof(buf), &init)) < 0) {
		snprintf(why, sizeof(why), "the INIT reply cannot carry the flag");
	} else {
		u->payload_sz = gw_fuse_uring_payload_size(&init);
		if ((rc = rings_create(u)))
			snprintf(why, sizeof(why), "cannot set up the rings: %s", strerror(-rc));
	}
	if (!u->offered || n < 0 || rc) {
		atomic_store(&u->go, -1); /* no rings: every reply goes to /dev/fuse */
		if (u->mode == GW_URING_ON)
			return init_refuse(u, fd, why);
		if (u->offered) /* offered and could not be used: worth a warning */
			log_warn("io_uring=auto: %s; FUSE requests go over /dev/fuse", why);
		else /* the usual case (enable_uring is N by default): one info line */
			log_info("io_uring=auto: %s; FUSE requests go over /dev/fuse", why);
		return writev(fd, iov, count);
	}
	ssize_t res = write(fd, buf, (size_t)n);
	int err = errno;
	pthread_mutex_lock(&u->go_lock);
	u->go = res == n ? 1 : -1; /* REGISTER only after the INIT reply is written (-EAGAIN before) */
	pthread_cond_broadcast(&u->go_cv);
	pthread_mutex_unlock(&u->go_lock);
	if (res != n) {
		rings_free(u);
		errno = err;
		return -1;
	}
	atomic_store(&u->active, true);
	if (gw_life.st && gw_life.worker) { /* the supervisor: no restart over rings (life/supervisor.h) */
		atomic_store(&gw_life.st->uring, true);
		log_info("FUSE over io_uring: a worker that dies ends the mount (the kernel keeps the requests on the "
			 "rings it registered; a new worker cannot take them over)");
	}
	log_info("FUSE requests over io_uring: %u queues of %u entries (%zu-byte payloads), %u ring thread%s",
		 u->nqueues, u->depth, u->payload_sz, u->nrings, u->nrings == 1 ? "" : "s");
	return res;
}

/* The entry whose request has this unique, taken back (NULL: a /dev/fuse request or a notification). */
static struct ent *ent_take(struct gw_fuse_uring *u, uint64_t unique)
{
	for (unsigned i = 0; i < u->nrings; i++) {
		struct ring *r = &u->rings[i];
		for (unsigned k = 0; k < r->nents; k++) {
			uint64_t want = unique;
			if (atomic_load_explicit(&r->ents[k].unique, memory_order_relaxed) == unique &&
			    atomic_compare_exchange_strong(&r->ents[k].unique, &want, 0))
				return &r->ents[k];
		}
	}
	return NULL;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct gw_fuse_uring *u = uring_of(userdata);
	uint64_t unique = gw_fuse_reply_unique(iov, count);
	if (unique && !u->go && atomic_load(&u->init_seen) && unique == u->init_unique)
		return init_reply(u, fd, iov, count);
	struct ent *e = unique && u->go > 0 ? ent_take(u, unique) : NULL;
	if (!e)
		return writev(fd, iov, count);
	ssize_t n = gw_fuse_uring_from_reply(iov, count, e->hdr, e->payload, u->payload_sz, NULL);
	if (n < 0) {
		log_warn("FUSE ring: reply %llu does not fit the entry (%s): EIO", (unsigned long long)unique,
			 strerror((int)-n));
		reply_err(e, unique, EIO);
	} else {
		if (e->opcode == FUSE_READ && n > 0)
			atomic_fetch_add_explicit(u->copied, (uint_fast64_t)n, memory_order_relaxed);
		e->commit_id = unique;
		commit_queue(e);
	}
	size_t total = 0;
	for (int i = 0; i < count; i++)
		total += iov[i].iov_len;
	return (ssize_t)total;
}

int gw_fuse_uring_attach(struct fuse_session *se, enum gw_uring_mode mode, unsigned depth,
			 atomic_uint_fast64_t *copied, struct gw_fuse_uring **out)
{
	struct gw_fuse_uring *u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->se = se;
	u->mode = mode;
	u->depth = depth ? depth : 1;
	u->fd = fuse_session_fd(se);
	u->copied = copied;
	u->sup_efd = -1;
	pthread_mutex_init(&u->go_lock, NULL);
	pthread_cond_init(&u->go_cv, NULL);
	/* splice as libfuse would do it itself: the /dev/fuse path stays as it was */
	const struct fuse_custom_io io = {
		.writev = io_writev,
		.read = io_read,
		.splice_receive = gw_io_splice_receive,
		.splice_send = gw_io_splice_send,
	};
	gw_rx_on_request(note_request, u); /* the readers that receive into slices bypass io_read */
	int rc = fuse_session_custom_io(se, &io, u->fd);
	if (rc) {
		pthread_mutex_destroy(&u->go_lock);
		pthread_cond_destroy(&u->go_cv);
		free(u);
		return rc;
	}
	*out = u;
	return 0;
}

const char *gw_fuse_uring_path(const struct gw_fuse_uring *u)
{
	return u && atomic_load(&u->active) ? "io_uring" : "dev";
}

void gw_fuse_uring_threads(struct gw_fuse_uring *u, unsigned *threads, unsigned *parked)
{
	*threads = *parked = 0;
	for (unsigned i = 0; u && atomic_load(&u->active) && i < u->nrings; i++) {
		*threads += atomic_load(&u->rings[i].started);
		*parked += parked_count(&u->rings[i]);
	}
}

uint64_t gw_fuse_uring_requests(const struct gw_fuse_uring *u)
{
	return u ? atomic_load_explicit(&u->requests, memory_order_relaxed) : 0;
}

bool gw_fuse_uring_failed(const struct gw_fuse_uring *u)
{
	return u && atomic_load(&u->failed);
}

void gw_fuse_uring_quiesce(struct gw_fuse_uring *u)
{
	if (u)
		atomic_store(&u->ending, true);
}

void gw_fuse_uring_flush(struct gw_fuse_uring *u, int timeout_ms)
{
	if (!u || !atomic_load(&u->active))
		return;
	for (int waited = 0; waited < timeout_ms; waited++) {
		bool left = false;
		for (unsigned i = 0; i < u->nrings && !left; i++)
			left = atomic_load(&u->rings[i].committed) < atomic_load(&u->rings[i].queued);
		if (!left)
			return;
		usleep(1000);
	}
}

void gw_fuse_uring_end(struct gw_fuse_uring *u)
{
	if (!u)
		return;
	atomic_store(&u->active, false);
	pthread_mutex_lock(&u->go_lock);
	if (!u->go)
		u->go = -1;
	pthread_cond_broadcast(&u->go_cv);
	pthread_mutex_unlock(&u->go_lock);
	rings_free(u);
	if (u->sup_efd >= 0)
		close(u->sup_efd);
	pthread_mutex_destroy(&u->go_lock);
	pthread_cond_destroy(&u->go_cv);
	free(u);
}
