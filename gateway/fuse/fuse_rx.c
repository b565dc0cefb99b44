/* SPDX-License-Identifier: MIT */
/*
 * A FUSE reader's receive slice (see fuse_rx.h).  No lock: the count of
 * slices readers hold is atomic, the rest is the reader's own or
 * thread-local.
 */
#include "fuse_rx.h"

#include <errno.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "initiator/util/log.h"
#include "fuse_resume.h"
#include "rx_layout.h"

static struct buf_pool *rx_pool; /* set by gw_rx_setup before the readers start */
static unsigned rx_cap;
static atomic_uint rx_held;      /* slices readers hold now */
static _Thread_local struct gw_rx *rx_cur; /* the reader whose request this thread is handling */

void gw_rx_setup(struct buf_pool *pool, unsigned cap)
{
	rx_pool = pool;
	rx_cap = pool ? cap : 0;
	atomic_store(&rx_held, 0);
}

/* Take a slice for rx if one is free and the cap allows; false if not. */
static bool rx_take(struct gw_rx *rx)
{
	if (atomic_fetch_add(&rx_held, 1) >= rx_cap) {
		atomic_fetch_sub(&rx_held, 1);
		return false;
	}
	rx->slice = buf_pool_tryget(rx_pool, NULL);
	if (!rx->slice) {
		atomic_fetch_sub(&rx_held, 1);
		return false;
	}
	return true;
}

static void (*rx_observer)(void *arg, const void *req, size_t len);
static void *rx_observer_arg;
static atomic_bool rx_init_passed; /* the observer saw a FUSE_INIT: it is not called again */

void gw_rx_on_request(void (*fn)(void *arg, const void *req, size_t len), void *arg)
{
	rx_observer = fn;
	rx_observer_arg = arg;
}

int gw_rx_receive(struct gw_rx *rx, struct fuse_session *se, struct fuse_buf *fb)
{
	if (!rx->slice && !rx_take(rx))
		return -ENOBUFS;
	uint8_t *buf = rx->slice + gw_rx_read_off();
	size_t len = gw_rx_read_len(buf_pool_slice_size(rx_pool));
	int fd = fuse_session_fd(se);
	ssize_t res;
	do
		res = read(fd, buf, len);
	while (res < 0 && errno == ENOENT && !fuse_session_exited(se)); /* ENOENT: the request was interrupted */
	int err = errno;
	if (fuse_session_exited(se))
		return 0;
	if (res < 0) {
		if (err == ENODEV) { /* unmounted, or the connection aborted */
			fuse_session_exit(se);
			return 0;
		}
		if (err != EINTR && err != EAGAIN)
			log_err("reading /dev/fuse: %s", strerror(err));
		return -err;
	}
	if ((size_t)res < GW_RX_IN_HDR) {
		log_err("short read on /dev/fuse (%zd bytes)", res);
		return -EIO;
	}
	gw_resume_note(buf, (size_t)res); /* a resent request counted; the INIT request saved for a restart */
	if (rx_observer && !atomic_load_explicit(&rx_init_passed, memory_order_relaxed)) {
		rx_observer(rx_observer_arg, buf, (size_t)res);
		if (((const struct fuse_in_header *)buf)->opcode == FUSE_INIT)
			atomic_store_explicit(&rx_init_passed, true, memory_order_relaxed);
	}
	*fb = (struct fuse_buf){.mem = buf, .size = (size_t)res};
	rx_cur = rx;
	return (int)res;
}

void *gw_rx_claim(const void *data)
{
	struct gw_rx *rx = rx_cur;
	if (!rx || !rx->slice || data != rx->slice + GW_RX_DATA_OFF)
		return NULL;
	return rx->slice;
}

void gw_rx_taken(void)
{
	struct gw_rx *rx = rx_cur;
	if (!rx || !rx->slice)
		return;
	rx->slice = NULL;
	atomic_fetch_sub(&rx_held, 1);
}

void gw_rx_retake(void *slice)
{
	struct gw_rx *rx = rx_cur;
	if (!rx || rx->slice || !slice)
		return;
	rx->slice = slice;
	atomic_fetch_add(&rx_held, 1);
}

void gw_rx_adopt(struct gw_rx *rx, void *slice)
{
	rx->slice = slice;
	rx_cur = rx;
}

void gw_rx_done(struct gw_rx *rx)
{
	(void)rx;
	rx_cur = NULL;
}

void gw_rx_release(struct gw_rx *rx)
{
	if (!rx->slice)
		return;
	buf_pool_put(rx_pool, rx->slice);
	rx->slice = NULL;
	atomic_fetch_sub(&rx_held, 1);
}
