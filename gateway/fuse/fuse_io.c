/* SPDX-License-Identifier: MIT */
/*
 * The I/O thread's side of /dev/fuse (see fuse_io.h).
 *
 * Ownership: rx, fbuf and the reads are the event thread's (one at a
 * time: a session's event threads never overlap); the queue, `closed` and
 * the waiting count are under `lock`; `serving`, `inflight` and the
 * counters are atomic.
 */
#include "fuse_io.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/pool/pool.h"
#include "initiator/transport/transport.h"
#include "initiator/util/log.h"

static_assert(sizeof(void *) == sizeof(uint64_t), "a raw reply's argument holds a 64-bit unique");

/* Most requests one gw_io_run reads while others are in flight (then back to poll). */
#define IO_BATCH 32

struct io_item {
	struct io_item *next;
	struct fuse_buf fb;
	void *slice;          /* the pool slice fb.mem lies in, or NULL: fb.mem is copy[] */
	uint8_t copy[];
};

struct gw_io {
	struct fuse_session *se;
	int fd;
	gw_io_fast_fn fast;
	void *fast_arg;
	struct gw_rx rx;           /* event thread: the slice it reads into */
	struct fuse_buf fbuf;      /* event thread: libfuse's buffer, when no slice can be taken */
	bool exit_told;            /* under run_lock */
	pthread_mutex_t run_lock;  /* held by gw_io_run for a pass (uncontended but by gw_io_stop) */
	atomic_bool stopped;       /* gw_io_stop: the event thread reads no more */
	void (*on_exit)(void *);
	void *on_exit_arg;
	void (*on_change)(void *);
	void *on_change_arg;
	atomic_bool serving;
	atomic_uint inflight;      /* raw requests not yet answered */
	_Atomic uint64_t nfast, nhanded;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	struct io_item *head, *tail;
	atomic_uint queued;        /* items in the queue (written under lock) */
	bool closed;
};

static struct gw_io io_one;
static atomic_bool io_made;

/* The ring's idle hook: the event thread's pool spares kept for its next passes, or given back (last: all). */
static bool spares_idle(bool last)
{
	if (!last)
		return pool_spares_idle();
	pool_spares_return();
	return false;
}

struct gw_io *gw_io_new(struct fuse_session *se, gw_io_fast_fn fast, void *fast_arg)
{
	if (atomic_exchange(&io_made, true))
		return NULL;
	struct gw_io *io = &io_one;
	io->se = se;
	io->fd = fuse_session_fd(se);
	io->fast = fast;
	io->fast_arg = fast_arg;
	/* the slices of replies queued on a ring (gw_io_reply), then kept as spares for the next requests */
	iscsi_tcp_ring_set_flush(pool_hold_end_keep, spares_idle);
	pthread_mutex_init(&io->lock, NULL);
	pthread_mutex_init(&io->run_lock, NULL);
	pthread_cond_init(&io->cv, NULL);
	return io;
}

void gw_io_arm(struct gw_io *io)
{
	pthread_mutex_lock(&io->run_lock);
	io->exit_told = false;
	atomic_store(&io->stopped, false);
	pthread_mutex_unlock(&io->run_lock);
	pthread_mutex_lock(&io->lock);
	io->closed = false;
	pthread_mutex_unlock(&io->lock);
}

/* Take the guest off the session, once per arming.  Under run_lock. */
static void tell_exit(struct gw_io *io)
{
	if (io->exit_told)
		return;
	io->exit_told = true;
	if (io->on_exit)
		io->on_exit(io->on_exit_arg);
}

void gw_io_stop(struct gw_io *io)
{
	atomic_store(&io->stopped, true);
	pthread_mutex_lock(&io->run_lock); /* a pass in progress ends first */
	tell_exit(io);
	pthread_mutex_unlock(&io->run_lock);
}

void gw_io_on_exit(struct gw_io *io, void (*fn)(void *arg), void *arg)
{
	io->on_exit = fn;
	io->on_exit_arg = arg;
}

void gw_io_on_change(struct gw_io *io, void (*fn)(void *arg), void *arg)
{
	pthread_mutex_lock(&io->lock);
	io->on_change = fn;
	io->on_change_arg = arg;
	pthread_mutex_unlock(&io->lock);
}

/* Tell the loop's supervisor (under the lock: it may be going away, gw_io_on_change NULL). */
static void tell_change(struct gw_io *io)
{
	pthread_mutex_lock(&io->lock);
	if (io->on_change)
		io->on_change(io->on_change_arg);
	pthread_mutex_unlock(&io->lock);
}

/* ---- raw replies ---- */

void gw_io_reply(void *arg, int err, const struct iovec *iov, int n)
{
	struct iovec v[8];
	struct fuse_out_header h = {.unique = (uint64_t)(uintptr_t)arg & ~(uint64_t)1, .error = err ? -err : 0};
	size_t len = sizeof(h);
	int cnt = 1;
	v[0] = (struct iovec){&h, sizeof(h)};
	for (int i = 0; !err && i < n && cnt < 8; i++) {
		v[cnt++] = iov[i];
		len += iov[i].iov_len;
	}
	h.len = (uint32_t)len;
	/*
	 * On a TCP event thread's ring: queued, and written with the other
	 * replies of its pass by the next pass's io_uring_enter; the slices the
	 * data lies in are held back until those writes are reaped (the ring's
	 * flush hook, pool_hold_end_keep: then the thread's spares).
	 */
	if (iscsi_tcp_ring_writev(io_one.fd, v, cnt) == 0) {
		pool_hold_begin();
		atomic_fetch_sub_explicit(&io_one.inflight, 1, memory_order_relaxed);
		return;
	}
	ssize_t w = writev(io_one.fd, v, cnt);
	/* ENOENT: interrupted, the kernel no longer waits for it; ENODEV: unmounted */
	if (w < 0 && errno != ENOENT && errno != ENODEV)
		log_warn("writing a reply to /dev/fuse: %s", strerror(errno));
	atomic_fetch_sub_explicit(&io_one.inflight, 1, memory_order_relaxed);
}

void gw_io_fd_blocking(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0 && (fl & O_NONBLOCK))
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
}

/* ---- the event thread ---- */

void gw_io_live(void *arg, bool live)
{
	struct gw_io *io = arg;
	int fl = fcntl(io->fd, F_GETFL);
	if (live) {
		/* the event thread's reads never wait; a reader still in read(2) is kicked out of it */
		if (fl >= 0)
			fcntl(io->fd, F_SETFL, fl | O_NONBLOCK);
		atomic_store(&io->serving, true);
	} else {
		atomic_store(&io->serving, false);
		if (fl >= 0)
			fcntl(io->fd, F_SETFL, fl & ~O_NONBLOCK);
		gw_io_wake_all(io);
	}
	tell_change(io);
}

/* Queue the request in fb (in rx's slice when in_slice) for a reader.  0, -ENOMEM, or -ESHUTDOWN (closed). */
static int hand_off(struct gw_io *io, const struct fuse_buf *fb, bool in_slice)
{
	struct io_item *it = malloc(sizeof(*it) + (in_slice ? 0 : fb->size));
	if (!it)
		return -ENOMEM;
	it->next = NULL;
	it->fb = *fb;
	it->slice = NULL;
	if (!in_slice) {
		memcpy(it->copy, fb->mem, fb->size);
		it->fb.mem = it->copy;
	}
	pthread_mutex_lock(&io->lock);
	if (io->closed) {
		pthread_mutex_unlock(&io->lock);
		free(it);
		return -ESHUTDOWN;
	}
	if (in_slice) { /* the slice, and its count among the readers' (fuse_rx.c), go with the request */
		it->slice = io->rx.slice;
		io->rx.slice = NULL;
	}
	if (io->tail)
		io->tail->next = it;
	else
		io->head = it;
	io->tail = it;
	io->queued++;
	pthread_cond_signal(&io->cv);
	pthread_mutex_unlock(&io->lock);
	atomic_fetch_add_explicit(&io->nhanded, 1, memory_order_relaxed);
	return 0;
}

static void run_pass(struct gw_io *io);

/* One request read: to the fast handler, else to a reader. */
static void dispatch(struct gw_io *io, const struct fuse_buf *fb, bool in_slice)
{
	const struct fuse_in_header *in = fb->mem;
	if (fb->size >= sizeof(*in) && in->opcode == FUSE_INTERRUPT) {
		/*
		 * Dropped: it takes no reply, and no handler here asks whether it
		 * was interrupted (fuse_req_interrupted).  libfuse would keep one
		 * for a request it never saw (this thread's) in its list to the end.
		 */
		return;
	}
	if (in_slice) {
		atomic_fetch_add_explicit(&io->inflight, 1, memory_order_relaxed);
		if (io->fast(io->fast_arg, fb->mem, fb->size)) {
			atomic_fetch_add_explicit(&io->nfast, 1, memory_order_relaxed);
			return;
		}
		atomic_fetch_sub_explicit(&io->inflight, 1, memory_order_relaxed);
	}
	int err = hand_off(io, fb, in_slice);
	/* -ESHUTDOWN (the loop ended): no answer, a worker after this one has it sent again
	 * (FUSE_NOTIFY_RESEND), an unmount fails it; no memory for the hand-over: ENOMEM */
	if (err == -ENOMEM && in->opcode != FUSE_FORGET && in->opcode != FUSE_BATCH_FORGET) {
		atomic_fetch_add_explicit(&io->inflight, 1, memory_order_relaxed);
		gw_io_reply(gw_io_raw_arg(in->unique), ENOMEM, NULL, 0);
	}
}

void gw_io_run(void *arg)
{
	struct gw_io *io = arg;
	pthread_mutex_lock(&io->run_lock);
	run_pass(io);
	if ((fuse_session_exited(io->se) || atomic_load(&io->stopped)) && !io->exit_told) {
		tell_exit(io);
		tell_change(io);
	}
	pthread_mutex_unlock(&io->run_lock);
}

/* Read and dispatch what /dev/fuse has, up to IO_BATCH requests.  Under run_lock. */
static void run_pass(struct gw_io *io)
{
	for (unsigned n = 0; n < IO_BATCH; n++) {
		if (fuse_session_exited(io->se) || atomic_load_explicit(&io->stopped, memory_order_relaxed))
			return;
		struct fuse_buf fb;
		bool in_slice = true;
		int res = gw_rx_receive(&io->rx, io->se, &fb);
		if (res == -ENOBUFS) { /* no slice: libfuse's buffer, and every request to the readers */
			in_slice = false;
			res = fuse_session_receive_buf(io->se, &io->fbuf);
			fb = io->fbuf;
		}
		if (res == -EAGAIN || res == -EINTR)
			return; /* nothing more now: back to poll */
		if (res <= 0) {
			if (res < 0)
				log_err("reading /dev/fuse: %s", strerror(-res));
			fuse_session_exit(io->se);
			return;
		}
		dispatch(io, &fb, in_slice);
		gw_rx_done(&io->rx);
		/* alone in flight (QD1): back to poll, which says at once if another came, without a read that finds none */
		if (atomic_load_explicit(&io->inflight, memory_order_relaxed) <= 1)
			return;
	}
}

/* ---- the readers ---- */

bool gw_io_serving(struct gw_io *io)
{
	return atomic_load(&io->serving) || atomic_load_explicit(&io->queued, memory_order_relaxed) != 0;
}

void *gw_io_take(struct gw_io *io, struct gw_rx *rx, struct fuse_buf *fb, const _Atomic bool *stop)
{
	pthread_mutex_lock(&io->lock);
	while (!io->head && !io->closed && atomic_load(&io->serving) && !atomic_load(stop) &&
	       !fuse_session_exited(io->se))
		pthread_cond_wait(&io->cv, &io->lock);
	struct io_item *it = io->head;
	if (it) {
		io->head = it->next;
		if (!io->head)
			io->tail = NULL;
		io->queued--;
	}
	pthread_mutex_unlock(&io->lock);
	if (!it)
		return NULL;
	*fb = it->fb;
	if (it->slice)
		gw_rx_adopt(rx, it->slice);
	return it;
}

void gw_io_done(struct gw_io *io, struct gw_rx *rx, void *item)
{
	(void)io;
	gw_rx_done(rx);
	gw_rx_release(rx);
	free(item);
}

void gw_io_wake_all(struct gw_io *io)
{
	pthread_mutex_lock(&io->lock);
	pthread_cond_broadcast(&io->cv);
	pthread_mutex_unlock(&io->lock);
}

void gw_io_close(struct gw_io *io)
{
	pthread_mutex_lock(&io->lock);
	io->closed = true;
	struct io_item *it = io->head;
	io->head = io->tail = NULL;
	io->queued = 0;
	pthread_cond_broadcast(&io->cv);
	pthread_mutex_unlock(&io->lock);
	while (it) {
		struct io_item *next = it->next;
		struct gw_rx rx = {.slice = it->slice}; /* back to the pool, with its count */
		gw_rx_release(&rx);
		free(it);
		it = next;
	}
}

void gw_io_counts(struct gw_io *io, uint64_t *fast, uint64_t *handed)
{
	*fast = atomic_load_explicit(&io->nfast, memory_order_relaxed);
	*handed = atomic_load_explicit(&io->nhanded, memory_order_relaxed);
}
