/* SPDX-License-Identifier: MIT */
/* A worker that takes over a live FUSE connection (see fuse_resume.h). */
#include "fuse_resume.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "gateway/handover/lifestate.h"
#include "initiator/util/log.h"
#include "custom_io.h"
#include "fuse_uring_conv.h"

/* The replayed INIT's unique while its reply is due (dropped), else 0. */
static _Atomic uint64_t replay_unique;

void gw_resume_note(const void *req, size_t len)
{
	struct gw_life_state *st = gw_life.st;
	if (!st || len < sizeof(struct fuse_in_header))
		return;
	const struct fuse_in_header *h = req;
	if (h->unique & GW_FUSE_UNIQUE_RESEND)
		atomic_fetch_add_explicit(&st->resent, 1, memory_order_relaxed);
	if (h->opcode == FUSE_INIT && gw_life.n == 0 && len <= GW_LIFE_INIT_MAX &&
	    !atomic_load_explicit(&st->init_len, memory_order_acquire)) {
		memcpy(st->init, req, len);
		atomic_store_explicit(&st->init_len, (uint32_t)len, memory_order_release);
	}
}

int gw_resume_resend(int fd)
{
	struct fuse_out_header oh = {.len = sizeof(oh), .error = GW_FUSE_NOTIFY_RESEND, .unique = 0};
	ssize_t n = write(fd, &oh, sizeof(oh));
	if (n == (ssize_t)sizeof(oh))
		return 0;
	return n < 0 ? -errno : -EIO;
}

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)userdata;
	ssize_t n = read(fd, buf, len);
	if (n > 0)
		gw_resume_note(buf, (size_t)n);
	return n;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	(void)userdata;
	uint64_t want = atomic_load_explicit(&replay_unique, memory_order_relaxed);
	if (want && gw_fuse_reply_unique(iov, count) == want &&
	    atomic_compare_exchange_strong(&replay_unique, &want, 0)) {
		size_t total = 0; /* the kernel had its INIT reply from the first worker */
		for (int i = 0; i < count; i++)
			total += iov[i].iov_len;
		return (ssize_t)total;
	}
	return writev(fd, iov, count);
}

int gw_resume_attach(struct fuse_session *se, int fd)
{
	/* splice as libfuse would do it itself, so that INIT negotiates the same capabilities */
	const struct fuse_custom_io io = {
		.writev = io_writev,
		.read = io_read,
		.splice_receive = gw_io_splice_receive,
		.splice_send = gw_io_splice_send,
	};
	return fuse_session_custom_io(se, &io, fd);
}

int gw_resume_replay(struct fuse_session *se)
{
	struct gw_life_state *st = gw_life.st;
	uint32_t len = st ? atomic_load_explicit(&st->init_len, memory_order_acquire) : 0;
	if (len < sizeof(struct fuse_in_header) + sizeof(struct fuse_init_in) - 48) /* the 7.x layout's first fields */
		return -EPROTO;
	/* libfuse may keep pointers into the buffer only during the call */
	uint8_t *copy = malloc(len);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, st->init, len);
	const struct fuse_in_header *h = (const void *)copy;
	atomic_store(&replay_unique, h->unique);
	struct fuse_buf fb = {.mem = copy, .size = len};
	fuse_session_process_buf(se, &fb);
	free(copy);
	bool dropped = atomic_exchange(&replay_unique, 0) == 0;
	if (!dropped || fuse_session_exited(se))
		return -EPROTO;
	return 0;
}
