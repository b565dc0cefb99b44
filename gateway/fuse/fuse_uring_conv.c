/* SPDX-License-Identifier: MIT */
/* FUSE over io_uring, the layouts (see fuse_uring_conv.h). */
#include "fuse_uring_conv.h"

#include <errno.h>
#include <liburing.h>
#include <string.h>

int gw_fuse_uring_to_dev(const struct gw_fuse_uring_req_header *h, char *payload, size_t payload_cap, void **start,
			 size_t *len)
{
	struct fuse_in_header in;
	memcpy(&in, h->in_out, sizeof(in));
	size_t psz = h->ring_ent_in_out.payload_sz;
	if (psz > payload_cap || in.len < sizeof(in) + psz)
		return -EPROTO;
	size_t arg = in.len - sizeof(in) - psz; /* the first argument, in op_in */
	if (arg > GW_FUSE_URING_OP_IN_OUT_SZ)
		return -EPROTO;
	char *p = payload - sizeof(in) - arg;
	memcpy(p, &in, sizeof(in));
	memcpy(p + sizeof(in), h->op_in, arg);
	*start = p;
	*len = in.len;
	return 0;
}

ssize_t gw_fuse_uring_from_reply(const struct iovec *iov, int count, struct gw_fuse_uring_req_header *h,
				 char *payload, size_t payload_cap, uint64_t *unique)
{
	struct fuse_out_header out;
	size_t hdr = 0, put = 0;
	for (int i = 0; i < count; i++) {
		const char *b = iov[i].iov_base;
		size_t n = iov[i].iov_len;
		if (hdr < sizeof(out)) {
			size_t take = n < sizeof(out) - hdr ? n : sizeof(out) - hdr;
			memcpy((char *)&out + hdr, b, take);
			hdr += take;
			b += take;
			n -= take;
		}
		if (!n)
			continue;
		if (n > payload_cap - put)
			return -EOVERFLOW;
		memcpy(payload + put, b, n);
		put += n;
	}
	if (hdr < sizeof(out))
		return -EINVAL;
	memset(h->in_out, 0, sizeof(out));
	memcpy(h->in_out, &out, sizeof(out));
	h->ring_ent_in_out.payload_sz = (uint32_t)put;
	h->ring_ent_in_out.commit_id = out.unique;
	if (unique)
		*unique = out.unique;
	return (ssize_t)put;
}

uint64_t gw_fuse_reply_unique(const struct iovec *iov, int count)
{
	struct fuse_out_header out;
	if (count < 1 || iov[0].iov_len < sizeof(out))
		return 0;
	memcpy(&out, iov[0].iov_base, sizeof(out));
	return out.unique;
}

bool gw_fuse_uring_init_request(const void *req, size_t len, uint64_t *unique, bool *offered)
{
	struct fuse_in_header in;
	struct fuse_init_in init = {0};
	if (len < sizeof(in))
		return false;
	memcpy(&in, req, sizeof(in));
	if (in.opcode != FUSE_INIT)
		return false;
	size_t arg = len - sizeof(in) < sizeof(init) ? len - sizeof(in) : sizeof(init);
	memcpy(&init, (const char *)req + sizeof(in), arg); /* older kernels send a shorter fuse_init_in */
	*unique = in.unique;
	*offered = arg >= offsetof(struct fuse_init_in, flags2) + sizeof(init.flags2) && (init.flags & FUSE_INIT_EXT) &&
		   (init.flags2 & GW_FUSE_OVER_IO_URING_FLAGS2);
	return true;
}

ssize_t gw_fuse_uring_init_reply_enable(const struct iovec *iov, int count, void *out, size_t cap,
					struct fuse_init_out *init)
{
	struct fuse_out_header oh;
	size_t n = 0;
	for (int i = 0; i < count; i++) {
		if (iov[i].iov_len > cap - n)
			return -EINVAL;
		memcpy((char *)out + n, iov[i].iov_base, iov[i].iov_len);
		n += iov[i].iov_len;
	}
	if (n < sizeof(oh) + sizeof(*init))
		return -EINVAL;
	memcpy(&oh, out, sizeof(oh));
	memcpy(init, (char *)out + sizeof(oh), sizeof(*init));
	if (oh.error || init->major != FUSE_KERNEL_VERSION || init->minor < 6)
		return -EINVAL;
	init->flags |= FUSE_INIT_EXT;
	init->flags2 |= GW_FUSE_OVER_IO_URING_FLAGS2;
	memcpy((char *)out + sizeof(oh), init, sizeof(*init));
	return (ssize_t)n;
}

size_t gw_fuse_uring_payload_size(const struct fuse_init_out *init)
{
	size_t sz = GW_FUSE_URING_MIN_PAYLOAD;
	if (init->max_write > sz)
		sz = init->max_write;
	if ((init->flags & FUSE_MAX_PAGES) && (size_t)init->max_pages * 4096 > sz)
		sz = (size_t)init->max_pages * 4096;
	return sz;
}

void gw_fuse_uring_prep_cmd(struct io_uring_sqe *sqe, int fd, uint32_t op, uint16_t qid, const struct iovec *iov,
			    uint64_t commit_id, void *data)
{
	memset((void *)sqe, 0, 128); /* an SQE128 slot */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fd;
	sqe->cmd_op = op;
	if (op == GW_FUSE_IO_URING_CMD_REGISTER) {
		sqe->addr = (uint64_t)(uintptr_t)iov;
		sqe->len = 2;
	}
	struct gw_fuse_uring_cmd_req *c = (struct gw_fuse_uring_cmd_req *)(void *)sqe->cmd;
	c->qid = qid;
	c->commit_id = op == GW_FUSE_IO_URING_CMD_COMMIT_AND_FETCH ? commit_id : 0;
	io_uring_sqe_set_data(sqe, data);
}
