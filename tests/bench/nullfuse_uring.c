/* SPDX-License-Identifier: MIT */
/*
 * nullfuse --loop=uring (see nullfuse_uring.h).
 *
 * The INIT request comes over /dev/fuse (the read hook notes its unique
 * and whether the kernel offers the rings); the writev hook turns
 * libfuse's INIT reply into one with FUSE_OVER_IO_URING, maps the entries
 * (per entry one page of headers, then a payload buffer of the size the
 * reply set up), writes the reply and only then starts the ring thread,
 * which registers every entry (NF_URING_DEPTH per possible CPU) on one
 * SQE128 io_uring.  The ring thread turns each request into /dev/fuse's
 * layout (gateway/fuse/fuse_uring_conv.c), runs fuse_session_process_buf;
 * every nullfuse handler replies before it returns, on this thread, so
 * the writev hook copies the reply into the thread's current entry, and
 * the thread queues its COMMIT_AND_FETCH for the next io_uring_enter.
 * Replies of other requests (the /dev/fuse ones) go to /dev/fuse.
 */
#include "nullfuse_uring.h"

#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gateway/fuse/fuse_uring_conv.h"

#define ENABLE_URING_PARAM "/sys/module/fuse/parameters/enable_uring"
#define EFD_TAG 1u /* user_data of the eventfd read (entries are pointers) */

struct nf_ent {
	struct gw_fuse_uring_req_header *hdr; /* iovec[0] */
	char *payload;                        /* iovec[1] */
	struct iovec iov[2];
	uint64_t unique;                      /* the request in the handler */
	bool replied;
	uint16_t qid;
};

static struct {
	struct fuse_session *se;
	int fd;
	bool init_seen, offered;
	uint64_t init_unique;
	size_t payload_sz;
	struct io_uring ring;
	bool ring_ok;
	struct nf_ent *ents;
	unsigned nents;
	void *mem;
	size_t mem_len;
	int efd;
	uint64_t efd_val;
	pthread_t t;
	bool t_ok;
	atomic_bool stop;
	unsigned long requests; /* ring thread */
} nf = {.efd = -1};

static _Thread_local struct nf_ent *tl_cur; /* the ring thread's entry in a handler */

static bool uring_enabled(void)
{
	char v[8] = "";
	FILE *f = fopen(ENABLE_URING_PARAM, "re");
	if (!f)
		return false;
	bool y = fgets(v, sizeof(v), f) && (v[0] == 'Y' || v[0] == 'y' || v[0] == '1');
	fclose(f);
	return y;
}

/* An SQE, submitting the queue first when it is full (NULL only if that fails). */
static struct io_uring_sqe *sqe_get(void)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&nf.ring);
	if (!sqe && io_uring_submit(&nf.ring) >= 0)
		sqe = io_uring_get_sqe(&nf.ring);
	return sqe;
}

static void prep_cmd(struct nf_ent *e, uint32_t op)
{
	struct io_uring_sqe *sqe = sqe_get();
	if (!sqe)
		return;
	gw_fuse_uring_prep_cmd(sqe, nf.fd, op, e->qid, e->iov, e->unique, e);
}

static void arm_eventfd(void)
{
	struct io_uring_sqe *sqe = sqe_get();
	if (!sqe)
		return;
	io_uring_prep_read(sqe, nf.efd, &nf.efd_val, sizeof(nf.efd_val), 0);
	io_uring_sqe_set_data64(sqe, EFD_TAG);
}

/* An error reply into e (a request that could not be handled or whose reply did not fit). */
static void ent_error(struct nf_ent *e, int err)
{
	struct fuse_out_header out = {.len = sizeof(out), .error = -err, .unique = e->unique};
	struct iovec iov = {&out, sizeof(out)};
	gw_fuse_uring_from_reply(&iov, 1, e->hdr, e->payload, 0, NULL);
	e->replied = true;
}

static void ent_dispatch(struct nf_ent *e)
{
	struct fuse_in_header in;
	void *start;
	size_t len;
	memcpy(&in, e->hdr->in_out, sizeof(in));
	e->unique = in.unique;
	e->replied = false;
	nf.requests++;
	if (gw_fuse_uring_to_dev(e->hdr, e->payload, nf.payload_sz, &start, &len)) {
		ent_error(e, EIO);
	} else {
		struct fuse_buf fb = {.mem = start, .size = len};
		tl_cur = e;
		fuse_session_process_buf(nf.se, &fb);
		tl_cur = NULL;
		if (!e->replied) /* no nullfuse handler leaves a request unanswered; the entry must go back */
			ent_error(e, ENOSYS);
	}
	prep_cmd(e, GW_FUSE_IO_URING_CMD_COMMIT_AND_FETCH);
}

static void *ring_run(void *arg)
{
	(void)arg;
	unsigned dead = 0;
	for (unsigned i = 0; i < nf.nents; i++)
		prep_cmd(&nf.ents[i], GW_FUSE_IO_URING_CMD_REGISTER);
	arm_eventfd();
	fprintf(stderr, "nullfuse: FUSE over io_uring: %u entries of %zu-byte payloads, one ring thread\n", nf.nents,
		nf.payload_sz);
	while (!atomic_load(&nf.stop) && dead < nf.nents) {
		int rc = io_uring_submit_and_wait(&nf.ring, 1);
		if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
			fprintf(stderr, "nullfuse: io_uring_enter: %s\n", strerror(-rc));
			break;
		}
		struct io_uring_cqe *cqe;
		while (io_uring_peek_cqe(&nf.ring, &cqe) == 0) {
			uint64_t ud = cqe->user_data;
			int res = cqe->res;
			io_uring_cqe_seen(&nf.ring, cqe);
			if (ud == EFD_TAG) {
				if (!atomic_load(&nf.stop))
					arm_eventfd();
				continue;
			}
			if (res) { /* the unmount (-ENOTCONN) or a refused entry: not resubmitted */
				if (res != -ENOTCONN && !atomic_load(&nf.stop))
					fprintf(stderr, "nullfuse: ring entry (queue %u): %s\n",
						((struct nf_ent *)(uintptr_t)ud)->qid, strerror(-res));
				dead++;
				continue;
			}
			ent_dispatch((struct nf_ent *)(uintptr_t)ud);
		}
	}
	return NULL;
}

/* The entries and the ring for the payload size the INIT reply set up.  Returns 0 or a negative errno. */
static int ring_setup(void)
{
	long ncpu = sysconf(_SC_NPROCESSORS_CONF); /* the possible CPUs: the kernel's queue count */
	unsigned nq = ncpu > 0 ? (unsigned)ncpu : 1;
	size_t stride = 4096 + ((nf.payload_sz + 4095) & ~(size_t)4095);
	nf.nents = nq * NF_URING_DEPTH;
	nf.ents = calloc(nf.nents, sizeof(*nf.ents));
	nf.mem_len = stride * nf.nents;
	nf.mem = mmap(NULL, nf.mem_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (nf.mem == MAP_FAILED)
		nf.mem = NULL;
	nf.efd = eventfd(0, EFD_CLOEXEC);
	if (!nf.ents || !nf.mem || nf.efd < 0)
		return -ENOMEM;
	for (unsigned k = 0; k < nf.nents; k++) {
		struct nf_ent *e = &nf.ents[k];
		char *base = (char *)nf.mem + k * stride;
		e->qid = (uint16_t)(k / NF_URING_DEPTH);
		e->hdr = (struct gw_fuse_uring_req_header *)(void *)base;
		e->payload = base + 4096; /* the page before holds the /dev/fuse layout's headroom */
		e->iov[0] = (struct iovec){e->hdr, sizeof(*e->hdr)};
		e->iov[1] = (struct iovec){e->payload, nf.payload_sz};
	}
	struct io_uring_params p = {.flags = IORING_SETUP_SQE128} /* made here, submitted from the ring thread */;
	int rc = io_uring_queue_init_params(nf.nents + 2, &nf.ring, &p);
	if (rc)
		return rc;
	nf.ring_ok = true;
	return 0;
}

/* libfuse's INIT reply, with the flag, then the ring thread.  Without the rings the INIT fails (no mount). */
static ssize_t init_reply(int fd, struct iovec *iov, int count)
{
	char buf[256];
	struct fuse_init_out init;
	ssize_t n = -1;
	int rc = -EOPNOTSUPP;
	if (nf.offered && (n = gw_fuse_uring_init_reply_enable(iov, count, buf, sizeof(buf), &init)) > 0) {
		nf.payload_sz = gw_fuse_uring_payload_size(&init);
		rc = ring_setup();
	}
	if (rc) {
		fprintf(stderr, "nullfuse: --loop=uring: %s\n",
			!nf.offered ? "the kernel did not offer FUSE over io_uring" : strerror(-rc));
		struct fuse_out_header out = {.len = sizeof(out), .error = -EPROTO, .unique = nf.init_unique};
		fuse_session_exit(nf.se);
		return write(fd, &out, sizeof(out));
	}
	ssize_t res = write(fd, buf, (size_t)n);
	if (res == n) /* REGISTER only after the INIT reply is written */
		nf.t_ok = !pthread_create(&nf.t, NULL, ring_run, NULL);
	if (!nf.t_ok) {
		fprintf(stderr, "nullfuse: --loop=uring: no ring thread\n");
		fuse_session_exit(nf.se);
	}
	return res;
}

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)userdata;
	ssize_t n = read(fd, buf, len);
	if (n > 0 && !nf.init_seen)
		nf.init_seen = gw_fuse_uring_init_request(buf, (size_t)n, &nf.init_unique, &nf.offered);
	return n;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	(void)userdata;
	uint64_t unique = gw_fuse_reply_unique(iov, count);
	struct nf_ent *e = tl_cur;
	if (e && unique == e->unique) {
		if (gw_fuse_uring_from_reply(iov, count, e->hdr, e->payload, nf.payload_sz, NULL) < 0)
			ent_error(e, EIO);
		e->replied = true;
		size_t total = 0;
		for (int i = 0; i < count; i++)
			total += iov[i].iov_len;
		return (ssize_t)total;
	}
	if (nf.init_seen && !nf.ring_ok && !nf.t_ok && unique == nf.init_unique)
		return init_reply(fd, iov, count);
	return writev(fd, iov, count);
}

static ssize_t io_splice(int fdin, off_t *offin, int fdout, off_t *offout, size_t len, unsigned flags, void *userdata)
{
	(void)userdata;
	return splice(fdin, offin, fdout, offout, len, flags);
}

int nf_uring_attach(struct fuse_session *se)
{
	if (!uring_enabled()) {
		fprintf(stderr, "nullfuse: --loop=uring: %s is not Y\n", ENABLE_URING_PARAM);
		return -EOPNOTSUPP;
	}
	static const struct fuse_custom_io io = {
		.writev = io_writev,
		.read = io_read,
		.splice_receive = io_splice,
		.splice_send = io_splice,
	};
	nf.se = se;
	nf.fd = fuse_session_fd(se);
	return fuse_session_custom_io(se, &io, nf.fd);
}

void nf_uring_end(void)
{
	atomic_store(&nf.stop, true);
	if (nf.t_ok) {
		uint64_t one = 1;
		if (write(nf.efd, &one, sizeof(one)) < 0)
			perror("nullfuse: eventfd");
		pthread_join(nf.t, NULL);
		nf.t_ok = false;
		fprintf(stderr, "nullfuse: %lu requests over the ring\n", nf.requests);
	}
	if (nf.ring_ok)
		io_uring_queue_exit(&nf.ring); /* cancels the entries still registered */
	nf.ring_ok = false;
	if (nf.efd >= 0)
		close(nf.efd);
	nf.efd = -1;
	if (nf.mem)
		munmap(nf.mem, nf.mem_len);
	nf.mem = NULL;
	free(nf.ents);
	nf.ents = NULL;
}
