/* SPDX-License-Identifier: MIT */
/* What a worker hands on to the next one (see lifestate.h). */
#include "lifestate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "initiator/login/login.h"
#include "initiator/util/log.h"

#define LIFE_MAGIC 0x69736631u /* "isf1" */

struct gw_life gw_life = {.ctl_fd = -1, .state_fd = -1, .dev_fd = -1, .ready_fd = -1};
uint8_t gw_fh_gen = 1;

static struct gw_life_state *state_map(int fd)
{
	void *p = mmap(NULL, sizeof(struct gw_life_state), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	return p == MAP_FAILED ? NULL : p;
}

int gw_life_state_create(struct gw_life_state **out)
{
	int fd = memfd_create("iserfuse-state", 0); /* no CLOEXEC: every worker inherits it */
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, sizeof(struct gw_life_state))) {
		int err = -errno;
		close(fd);
		return err;
	}
	struct gw_life_state *st = state_map(fd);
	if (!st) {
		int err = -errno;
		close(fd);
		return err;
	}
	st->magic = LIFE_MAGIC;
	iscsi_isid_random(st->isid);
	*out = st;
	return fd;
}

int gw_life_from_argv(int *argc, char **argv)
{
	if (*argc < 3 || strcmp(argv[1], GW_WORKER_FLAG))
		return 0;
	struct gw_life *L = &gw_life;
	if (sscanf(argv[2], "%u,%d,%d,%d,%d", &L->n, &L->ctl_fd, &L->state_fd, &L->dev_fd, &L->ready_fd) != 5 ||
	    !(L->st = state_map(L->state_fd)) || L->st->magic != LIFE_MAGIC) {
		fprintf(stderr, "iserfuse: bad %s value '%s'\n", GW_WORKER_FLAG, argv[2]);
		return -1;
	}
	L->worker = true;
	gw_fh_gen = (uint8_t)(L->n % 255 + 1); /* an open file of another worker is known by its tag */
	memmove(&argv[1], &argv[3], (size_t)(*argc - 3 + 1) * sizeof(*argv)); /* argv[argc] (NULL) too */
	*argc -= 2;
	return 0;
}

void gw_life_tell(char what, int fd)
{
	if (!gw_life.worker || gw_life.ctl_fd < 0)
		return;
	struct iovec iov = {.iov_base = &what, .iov_len = 1};
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	if (fd >= 0) {
		memset(&u, 0, sizeof(u));
		msg.msg_control = u.buf;
		msg.msg_controllen = sizeof(u.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	if (sendmsg(gw_life.ctl_fd, &msg, MSG_NOSIGNAL) != 1)
		log_warn("cannot tell the supervisor '%c': %s", what, strerror(errno));
}

void gw_life_luns_save(const struct gw *g)
{
	struct gw_life_state *st = gw_life.st;
	if (!st)
		return;
	size_t n = gw_nluns(g);
	for (size_t i = 0; i < n; i++) {
		const struct iscsi_lun_info *in = &g->luns[i].info;
		struct gw_life_lun *o = &st->luns[i];
		o->lun = in->lun;
		o->block_size = in->cap.block_size;
		snprintf(o->serial, sizeof(o->serial), "%s", in->serial);
		snprintf(o->devid, sizeof(o->devid), "%s", in->devid);
	}
	st->nluns = (uint32_t)n;
}

int gw_life_luns_check(const struct gw *g, char *why, size_t cap)
{
	const struct gw_life_state *st = gw_life.st;
	size_t n = gw_nluns(g);
	if (!st)
		return 0;
	for (size_t i = 0; i < st->nluns; i++) {
		const struct gw_life_lun *o = &st->luns[i];
		if (i >= n) {
			snprintf(why, cap, "lun%u is no longer reported", o->lun);
			return -ENODEV;
		}
		const struct iscsi_lun_info *in = &g->luns[i].info;
		if (in->lun != o->lun) {
			snprintf(why, cap, "file %zu is lun%u, was lun%u", i, in->lun, o->lun);
			return -ENODEV;
		}
		if (in->cap.block_size != o->block_size || strcmp(in->serial, o->serial) || strcmp(in->devid, o->devid)) {
			snprintf(why, cap, "lun%u is another device (serial '%s', was '%s'; block size %u, was %u)", o->lun,
				 in->serial, o->serial, in->cap.block_size, o->block_size);
			return -ENODEV;
		}
	}
	return 0;
}

void gw_life_luns_order(struct iscsi_lun_info *infos, size_t n)
{
	const struct gw_life_state *st = gw_life.st;
	if (!st || !gw_life.n)
		return;
	size_t placed = 0;
	for (size_t i = 0; i < st->nluns && placed < n; i++) {
		for (size_t k = placed; k < n; k++) {
			if (infos[k].lun != st->luns[i].lun)
				continue;
			struct iscsi_lun_info t = infos[k]; /* move k to placed, the ones between one up: stable */
			memmove(&infos[placed + 1], &infos[placed], (k - placed) * sizeof(*infos));
			infos[placed++] = t;
			break;
		}
	}
}
