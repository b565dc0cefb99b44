/* SPDX-License-Identifier: MIT */
/*
 * The TCP event thread's loop on an io_uring (liburing): tcp.c's poll
 * loop with the waits, sends, receives and the writes its callbacks make
 * folded into few io_uring_enter calls.
 *
 * A pass: the tick, then the transmit round (tcp_tx_next under tx_lock:
 * the rest of a batch, or a new one), whose sendmsg becomes an SQE; the
 * socket watched by a receive armed into rxbuf's free room (a POLL_ADD
 * instead while a Data-In payload is placed straight into a command's
 * slice, which only tcp_rx_drain's own readv may write); single-shot
 * POLL_ADDs for the eventfd (kick) and the guest's descriptor, armed again
 * once fired (so readiness is level-triggered, as with poll(2)); then one
 * io_uring_enter submits and waits for a completion or the next tick.
 * The completions are handled as poll(2)'s revents were (handle): the
 * send first (tx_done once a batch is all written, as a synchronous send
 * would have), then the kick, the socket and the guest.  What the
 * callbacks of the pass queued with iscsi_tcp_ring_writev goes with the
 * next pass's io_uring_enter, ahead of its wait: those writes complete
 * within its submit (/dev/fuse takes a write at once), so the wait counts
 * them among the completions it waits for and still sleeps.  Once they
 * are reaped the flush hook runs (the gateway releases the pool slices the
 * replies referred to, as spares its next requests take first).  While
 * slices are held so, or while the idle hook at the end of a pass says it
 * keeps some for the next passes, a wait lasts at most HOLD_WAIT_MS, so a
 * thread waiting for a slice is not kept waiting long.
 *
 * The batch stays in c->iov while its SQE is out: iovpos < iovcnt, so a
 * direct sender (tcp_try_send) keeps off it.  A send the socket could not
 * take (-EAGAIN) waits for a POLLOUT poll.  The ring runs its completions'
 * task work only inside this thread's io_uring_enter (DEFER_TASKRUN) where
 * the kernel has that; under valgrind the waits are poll(2)s on the ring's
 * descriptor (enter_polled).  A ring that cannot be made or entered
 * leaves the poll loop to serve (ring_make).  At the end every SQE still
 * out is cancelled and its completion reaped before the ring goes, so
 * nothing of the kernel's refers to the batch, rxbuf, the msghdr, a write
 * slot or a descriptor after the loop returns.
 */
#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "initiator/util/clock.h"
#include "initiator/util/log.h"
#include "tcp_conn.h"

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define UNDER_VALGRIND() RUNNING_ON_VALGRIND
#else
#define UNDER_VALGRIND() 0
#endif

#define SEND_AT_ONCE_MAX (64u * 1024u) /* a send this small the socket is expected to take at once */
#define HOLD_WAIT_MS 1 /* the longest wait while the flush hook has puts to return, or the idle hook keeps some */

enum { UD_SOCK = 1, UD_RECV, UD_SOCK_OUT, UD_KICK, UD_SEND, UD_CANCEL, UD_WRITE = 64, UD_GUEST = 256 };

#define WRITE_SLOTS 64      /* writes queued by iscsi_tcp_ring_writev, out at once */
#define WRITE_IOV_MAX 8
#define WRITE_INLINE 128    /* bytes of small iovec entries a queued write keeps a copy of */
#define WRITE_COPY_MAX 64   /* an entry this small is copied, a larger one referenced */

struct ring_write {
	struct iovec iov[WRITE_IOV_MAX];
	uint8_t inl[WRITE_INLINE];
};

struct ring_loop {
	struct io_uring ring;
	struct msghdr msg;          /* the send's; lives while its SQE is out */
	bool sock_armed, out_armed, kick_armed, sending;
	bool send_new;              /* the send SQE is not submitted yet */
	struct iovec recv_iov;      /* the receive's buffer (rxbuf's free room) while its SQE is out */
	size_t recv_asked;
	bool recv_done;
	int recv_res;
	int guest_armed;            /* the descriptor of the guest's POLL_ADD out, or -1 */
	uint64_t guest_ud;          /* its user_data: UD_GUEST, a generation, the descriptor */
	uint32_t guest_gen;
	bool rest;                  /* bytes of the batch are left to send (set under tx_lock) */
	bool congested;             /* the last send did not take the whole batch at once */
	size_t send_len;            /* bytes the send SQE out was given */
	unsigned out;               /* SQEs submitted whose completion has not come */
	short sock_rev, kick_rev, guest_rev;
	int send_res;
	bool send_done;
	bool polled;                /* wait in poll(2) on the ring's descriptor (enter_polled) */
	struct ring_write writes[WRITE_SLOTS];
	uint8_t write_free[WRITE_SLOTS]; /* indexes of the free write slots, a stack */
	unsigned nwrite_free;
	unsigned writes_out;        /* queued writes whose completion has not come */
	unsigned writes_new;        /* of those, not submitted yet */
	bool held;                  /* a write was queued since the last flush (iscsi_tcp_ring_set_flush) */
};

static _Thread_local struct ring_loop *this_loop; /* the calling thread's, while it runs tcp_ring_loop */
static void (*_Atomic flush_fn)(void);
static bool (*_Atomic idle_fn)(bool last);

/* An SQE: a free one, else what is queued is submitted first to free one. */
static struct io_uring_sqe *sqe_get(struct ring_loop *L)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&L->ring);
	if (!sqe) {
		io_uring_submit(&L->ring);
		sqe = io_uring_get_sqe(&L->ring);
	}
	return sqe;
}

static void arm_poll(struct ring_loop *L, int fd, unsigned events, uint64_t ud)
{
	struct io_uring_sqe *sqe = sqe_get(L);
	io_uring_prep_poll_add(sqe, fd, events);
	io_uring_sqe_set_data64(sqe, ud);
	L->out++;
}

/* Take one completion: note what it says for the pass to act on. */
static void reap(struct ring_loop *L, const struct io_uring_cqe *cqe)
{
	uint64_t ud = io_uring_cqe_get_data64(cqe);
	short rev = cqe->res < 0 ? POLLERR : (short)cqe->res;
	L->out--;
	switch (ud) {
	case UD_SOCK:
		L->sock_armed = false;
		L->sock_rev |= rev;
		break;
	case UD_RECV:
		L->sock_armed = false;
		L->recv_done = true;
		L->recv_res = cqe->res;
		break;
	case UD_SOCK_OUT:
		L->out_armed = false;
		break;
	case UD_KICK:
		L->kick_armed = false;
		L->kick_rev |= rev;
		break;
	case UD_SEND:
		L->sending = false;
		L->send_done = true;
		L->send_res = cqe->res;
		break;
	case UD_CANCEL:
		break;
	default:
		if (ud >= UD_WRITE && ud < UD_WRITE + WRITE_SLOTS) {
			L->write_free[L->nwrite_free++] = (uint8_t)(ud - UD_WRITE);
			L->writes_out--;
			if (cqe->res < 0)
				log_debug("a queued write failed: %s", strerror(-cqe->res));
			break;
		}
		if (L->guest_armed >= 0 && ud == L->guest_ud) {
			L->guest_armed = -1;
			if (cqe->res != -ECANCELED)
				L->guest_rev |= rev;
		}
		break;
	}
}

/* The send's completion, under tx_lock: move the batch on; tx_done once it is all written.  0 or -errno. */
static int send_finish(struct tcp_conn *c, struct ring_loop *L)
{
	L->send_done = false;
	int res = L->send_res;
	L->congested = res < 0 || (size_t)res < L->send_len;
	if (res == -EAGAIN || res == -EINTR) {
		L->rest = true;
		if (res == -EAGAIN) {
			arm_poll(L, c->fd, POLLOUT, UD_SOCK_OUT); /* the socket is full: send again when it drains */
			L->out_armed = true;
		}
		return 0;
	}
	if (res < 0)
		return res;
	pthread_mutex_lock(&c->tx_lock);
	tcp_tx_advance(c, (size_t)res);
	L->rest = c->iovpos < c->iovcnt; /* a partial send: the rest goes next pass */
	if (!L->rest)
		tcp_tx_done(c);
	pthread_mutex_unlock(&c->tx_lock);
	return 0;
}

/* The transmit round: the rest of the batch, or the next, as an SQE.  0 or -errno (a direct send's error). */
static int send_round(struct tcp_conn *c, struct ring_loop *L)
{
	int err = 0;
	pthread_mutex_lock(&c->tx_lock);
	if (c->tx_err)
		err = c->tx_err;
	else if (tcp_tx_next(c)) {
		L->msg = (struct msghdr){.msg_iov = c->iov + c->iovpos, .msg_iovlen = (size_t)(c->iovcnt - c->iovpos)};
		L->send_len = 0;
		for (size_t i = 0; i < L->msg.msg_iovlen; i++)
			L->send_len += L->msg.msg_iov[i].iov_len;
		struct io_uring_sqe *sqe = sqe_get(L);
		io_uring_prep_sendmsg(sqe, c->fd, &L->msg, MSG_NOSIGNAL);
		io_uring_sqe_set_data64(sqe, UD_SEND);
		L->out++;
		L->sending = true;
		L->send_new = true;
		L->rest = false;
	}
	pthread_mutex_unlock(&c->tx_lock);
	return err;
}

/*
 * Watch the socket: a receive into rxbuf, whose completion brings the
 * bytes (no poll and read(2) after it); a poll while a Data-In payload is
 * being placed, since its destination (a command's slice) must not be
 * written outside tcp_rx_drain.  0 or -errno.
 */
static int arm_sock(struct tcp_conn *c, struct ring_loop *L)
{
	struct iovec iov[4];
	size_t asked;
	int n = tcp_rx_target(c, iov, &asked);
	if (n < 0)
		return n;
	if (n == 1) {
		L->recv_iov = iov[0];
		L->recv_asked = asked;
		struct io_uring_sqe *sqe = sqe_get(L);
		io_uring_prep_recv(sqe, c->fd, L->recv_iov.iov_base, L->recv_iov.iov_len, 0);
		io_uring_sqe_set_data64(sqe, UD_RECV);
		L->out++;
	} else {
		arm_poll(L, c->fd, POLLIN, UD_SOCK);
	}
	L->sock_armed = true;
	return 0;
}

/* The receive's completion: account its bytes and parse them, reading on while they filled the buffer. */
static int recv_finish(struct tcp_conn *c, struct ring_loop *L)
{
	L->recv_done = false;
	int res = L->recv_res;
	if (res == -EAGAIN || res == -EINTR)
		return 0;
	if (res < 0)
		return res;
	int rc = tcp_rx_got(c, (size_t)res, L->recv_asked);
	if (rc < 0)
		return rc;
	return tcp_rx_drain(c, rc == 1);
}

/* Reap every completion there is: the number. */
static int reap_all(struct ring_loop *L)
{
	struct io_uring_cqe *cqe;
	unsigned head;
	int n = 0;
	io_uring_for_each_cqe(&L->ring, head, cqe) {
		reap(L, cqe);
		n++;
	}
	io_uring_cq_advance(&L->ring, (unsigned)n);
	return n;
}

/*
 * enter() under valgrind, which (3.19) keeps its lock across
 * io_uring_enter, so a wait there never sees what another thread causes:
 * submit without waiting, then wait in poll(2) on the ring's descriptor
 * (readable while completions are there), reaping as they come.  The same
 * user-space work as enter() but for the poll, so callgrind counts what
 * the ring loop costs.
 */
static int enter_polled(struct ring_loop *L, int64_t wait_ms, unsigned wait_nr)
{
	int r = io_uring_submit(&L->ring);
	if (r < 0 && r != -EINTR && r != -EBUSY)
		return r;
	int n = reap_all(L);
	while (wait_ms > 0 && (unsigned)n < wait_nr) {
		/* each poll may wait wait_ms: no clock read, valgrind only */
		struct pollfd p = {.fd = L->ring.ring_fd, .events = POLLIN};
		int pr = poll(&p, 1, (int)wait_ms);
		if (pr < 0 && errno != EINTR)
			return -errno;
		if (pr == 0)
			break;
		n += reap_all(L);
	}
	return n;
}

/*
 * Submit what the pass prepared and wait up to wait_ms (0: do not wait)
 * for wait_nr completions; reap them all.  The number reaped, or -errno.
 */
static int enter(struct ring_loop *L, int64_t wait_ms, unsigned wait_nr)
{
	if (L->polled)
		return enter_polled(L, wait_ms, wait_nr);
	struct io_uring_cqe *cqe = NULL;
	int r;
	if (wait_ms <= 0) {
		r = io_uring_submit(&L->ring);
	} else {
		struct __kernel_timespec ts = {.tv_sec = wait_ms / 1000, .tv_nsec = (wait_ms % 1000) * 1000000};
		r = io_uring_submit_and_wait_timeout(&L->ring, &cqe, wait_nr, &ts, NULL);
		if (r == -ETIME)
			r = 0;
	}
	if (r < 0 && r != -EINTR && r != -EBUSY)
		return r;
	return reap_all(L);
}

/* Cancel every SQE still out and reap until none is. */
static void drain_ring(struct ring_loop *L)
{
	struct io_uring_sqe *sqe = sqe_get(L);
	io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
	io_uring_sqe_set_data64(sqe, UD_CANCEL);
	L->out++;
	for (int tries = 0; L->out && tries < 1000; tries++)
		if (enter(L, 10, 1) < 0)
			break;
}

/* The completions reaped: act on them as on poll(2)'s revents (see the head comment).  0 or -errno. */
static int handle(struct tcp_conn *c, struct ring_loop *L, int gfd)
{
	int err;
	if (L->send_done && (err = send_finish(c, L)))
		return err;
	short krev = L->kick_rev;
	L->kick_rev = 0;
	if ((krev & POLLIN) && (err = iscsi_evthread_drain(&c->ev)))
		return err;
	short srev = L->sock_rev;
	L->sock_rev = 0;
	if ((srev & (POLLIN | POLLERR | POLLHUP)) && (err = tcp_rx_drain(c, false)))
		return err;
	if (L->recv_done && (err = recv_finish(c, L)))
		return err;
	short grev = L->guest_rev;
	L->guest_rev = 0;
	/* the guest's work, queued now, goes out at the top of the next pass */
	if (gfd >= 0 && (grev & (POLLIN | POLLERR | POLLHUP)))
		c->hooks->guest_run(c->sess);
	return 0;
}

void iscsi_tcp_ring_set_flush(void (*flush)(void), bool (*idle)(bool last))
{
	atomic_store(&idle_fn, idle);
	atomic_store(&flush_fn, flush);
}

/* The idle hook (iscsi_tcp_ring_set_flush), if one is set: true when it keeps something, for a short wait. */
static bool idle_run(bool last)
{
	bool (*fn)(bool) = atomic_load_explicit(&idle_fn, memory_order_relaxed);
	return fn && fn(last);
}

int iscsi_tcp_ring_writev(int fd, const struct iovec *iov, int n)
{
	struct ring_loop *L = this_loop;
	if (!L || n < 0 || n > WRITE_IOV_MAX)
		return -EAGAIN;
	if (!L->nwrite_free)
		return -EAGAIN;
	size_t small = 0;
	for (int i = 0; i < n; i++)
		if (iov[i].iov_len <= WRITE_COPY_MAX)
			small += iov[i].iov_len;
	if (small > WRITE_INLINE)
		return -EAGAIN; /* every small entry is copied, or none is queued */
	struct ring_write *w = &L->writes[L->write_free[--L->nwrite_free]];
	size_t used = 0;
	for (int i = 0; i < n; i++) {
		w->iov[i] = iov[i];
		if (iov[i].iov_len <= WRITE_COPY_MAX) {
			if (iov[i].iov_len)
				memcpy(w->inl + used, iov[i].iov_base, iov[i].iov_len);
			w->iov[i].iov_base = w->inl + used;
			used += iov[i].iov_len;
		}
	}
	struct io_uring_sqe *sqe = sqe_get(L);
	io_uring_prep_writev(sqe, fd, w->iov, (unsigned)n, (uint64_t)-1);
	io_uring_sqe_set_data64(sqe, UD_WRITE + (uint64_t)(w - L->writes));
	L->out++;
	L->writes_out++;
	L->writes_new++;
	L->held = true;
	return 0;
}

/* Once no queued write is out: the flush hook, if a write was queued since the last. */
static void flush_done(struct ring_loop *L)
{
	if (L->held && !L->writes_out) {
		L->held = false;
		void (*fn)(void) = atomic_load(&flush_fn);
		if (fn)
			fn();
	}
}

/*
 * Make the ring: completions' task work run only inside this thread's
 * io_uring_enter (DEFER_TASKRUN, SINGLE_ISSUER: Linux 6.1), else without
 * interrupting it (COOP_TASKRUN: 5.19), else plain; under valgrind plain
 * (enter_polled's poll(2) must see completions).  Then one NOP through it,
 * so a ring that can be made but not entered (a seccomp filter on
 * io_uring_enter) leaves the poll loop to serve.  0, or -ENOSYS.
 */
static int ring_make(struct ring_loop *L)
{
	static const unsigned tries[] = {IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
					 IORING_SETUP_COOP_TASKRUN, 0};
	int rc = -ENOSYS;
	for (unsigned i = L->polled ? 2 : 0; i < sizeof(tries) / sizeof(tries[0]) && rc < 0; i++)
		rc = io_uring_queue_init(64, &L->ring, tries[i]);
	if (rc < 0) {
		log_info("no io_uring for the connection (%s): it waits in poll(2)", strerror(-rc));
		return -ENOSYS;
	}
	const char *why = NULL;
	if (!(L->ring.features & IORING_FEAT_EXT_ARG))
		why = "no IORING_FEAT_EXT_ARG"; /* the timed wait would cost a timeout SQE */
	struct io_uring_sqe *sqe = io_uring_get_sqe(&L->ring);
	struct io_uring_cqe *cqe = NULL;
	if (!why) {
		io_uring_prep_nop(sqe);
		rc = io_uring_submit_and_wait(&L->ring, 1);
		if (rc >= 0)
			rc = io_uring_peek_cqe(&L->ring, &cqe);
		if (rc < 0 || !cqe || cqe->res < 0)
			why = strerror(rc < 0 ? -rc : cqe ? -cqe->res : EIO);
		else
			io_uring_cqe_seen(&L->ring, cqe);
	}
	if (why) {
		log_info("no io_uring for the connection (%s): it waits in poll(2)", why);
		io_uring_queue_exit(&L->ring);
		return -ENOSYS;
	}
	return 0;
}

int tcp_ring_loop(struct tcp_conn *c)
{
	struct ring_loop L = {.guest_armed = -1, .polled = UNDER_VALGRIND()};
	if (ring_make(&L))
		return -ENOSYS;
	for (unsigned i = 0; i < WRITE_SLOTS; i++)
		L.write_free[i] = (uint8_t)(WRITE_SLOTS - 1 - i);
	L.nwrite_free = WRITE_SLOTS;
	tcp_ring_running(true);
	this_loop = &L;
	int err = 0;
	int64_t next_tick = clk_now_ms() + ISCSI_TICK_MS;
	bool guest = c->hooks->guest_fd && c->hooks->guest_run && c->hooks->guest_live;
	while (!atomic_load(&c->ev.stop)) {
		if ((err = tcp_tick(c, &next_tick)))
			break;
		/* Clear the kick before pulling work so a later kick wakes us again. */
		bool kicked = atomic_exchange(&c->ev.kicked, false);
		if (!L.sending && !L.out_armed &&
		    (kicked || L.rest || !c->hooks->tx_idle || !c->hooks->tx_idle(c->sess)) && (err = send_round(c, &L)))
			break;
		if (!L.sock_armed && (err = arm_sock(c, &L)))
			break;
		if (!L.kick_armed) {
			arm_poll(&L, c->ev.fd, POLLIN, UD_KICK);
			L.kick_armed = true;
		}
		int gfd = guest ? c->hooks->guest_fd(c->sess) : -1;
		if (L.guest_armed >= 0 && L.guest_armed != gfd) {
			struct io_uring_sqe *sqe = sqe_get(&L);
			io_uring_prep_poll_remove(sqe, L.guest_ud);
			io_uring_sqe_set_data64(sqe, UD_CANCEL);
			L.out++;
			L.guest_armed = -1; /* its completion (-ECANCELED) is dropped */
		}
		if (gfd >= 0 && L.guest_armed < 0) {
			L.guest_ud = (uint64_t)UD_GUEST | (uint64_t)++L.guest_gen << 8 | (uint64_t)(unsigned)gfd << 32;
			arm_poll(&L, gfd, POLLIN, L.guest_ud);
			L.guest_armed = gfd;
		}
		int64_t wait = next_tick - clk_pass_us() / 1000;
		if (!iscsi_evthread_sleep(&c->ev))
			wait = 0; /* kicked meanwhile: look at the socket, then loop */
		/*
		 * A send the socket takes at once completes within the submit,
		 * before the wait: wait for one completion more then, or the
		 * pass would end at once and cost a second io_uring_enter.  Not
		 * once a send found the socket full (the wait would then hold
		 * the socket's and the guest's completions until the send's).
		 */
		unsigned wait_nr = L.send_new && !L.congested && L.send_len <= SEND_AT_ONCE_MAX ? 2 : 1;
		L.send_new = false;
		/* the last pass's replies (iscsi_tcp_ring_writev) go first and complete within the submit too */
		wait_nr += L.writes_new;
		L.writes_new = 0;
		if ((idle_run(false) || L.held) && wait > HOLD_WAIT_MS)
			wait = HOLD_WAIT_MS;
		clk_pass_end();
		int r = enter(&L, wait, wait_nr);
		clk_pass_begin(); /* one clock read for what this pass submits, completes and ticks */
		iscsi_evthread_woke(&c->ev, r);
		if (r < 0) {
			err = r;
			break;
		}
		flush_done(&L); /* before the callbacks, which may queue and hold anew */
		if ((err = handle(c, &L, gfd)))
			break;
	}
	clk_pass_end();
	if (L.writes_new)
		io_uring_submit(&L.ring); /* the replies queued last: they are made before the drain */
	shutdown(c->fd, SHUT_RDWR); /* a send still out ends at once */
	idle_run(true); /* the last pass's spares, before the drain waits */
	drain_ring(&L);
	flush_done(&L); /* now that nothing is out */
	idle_run(true);
	this_loop = NULL;
	io_uring_queue_exit(&L.ring);
	tcp_ring_running(false);
	return err;
}
