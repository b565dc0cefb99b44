/* SPDX-License-Identifier: MIT */
#include "cancel.h"

#include <errno.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "initiator/util/clock.h"

#define POLL_FDS_MAX 4

static _Thread_local int bound_fd = -1;

int iscsi_cancel_new(void)
{
	int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

void iscsi_cancel_fire(int fd)
{
	uint64_t one = 1;
	if (fd >= 0 && write(fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is saturated, the token has fired anyway */
	}
}

void iscsi_cancel_bind(int fd)
{
	bound_fd = fd;
}

bool iscsi_cancelled(void)
{
	if (bound_fd < 0)
		return false;
	struct pollfd p = {.fd = bound_fd, .events = POLLIN};
	return poll(&p, 1, 0) > 0;
}

int iscsi_poll_cancellable(struct pollfd *fds, nfds_t n, int timeout_ms)
{
	if (bound_fd < 0 || n >= POLL_FDS_MAX) {
		for (;;) {
			int r = poll(fds, n, timeout_ms);
			if (r >= 0)
				return r;
			if (errno != EINTR)
				return -errno;
		}
	}
	struct pollfd p[POLL_FDS_MAX];
	int64_t until = timeout_ms < 0 ? -1 : clk_now_ms() + timeout_ms;
	for (nfds_t i = 0; i < n; i++)
		p[i] = fds[i];
	p[n] = (struct pollfd){.fd = bound_fd, .events = POLLIN};
	for (;;) {
		int left = -1;
		if (until >= 0) {
			int64_t l = until - clk_now_ms();
			left = l < 0 ? 0 : (int)l;
		}
		int r = poll(p, n + 1, left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (p[n].revents)
			return -ECANCELED;
		for (nfds_t i = 0; i < n; i++)
			fds[i].revents = p[i].revents;
		return r;
	}
}
