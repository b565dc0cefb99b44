/* SPDX-License-Identifier: MIT */
/*
 * The kernel's FUSE-over-io_uring ABI (Linux 6.14 and later,
 * include/uapi/linux/fuse.h, protocol 7.42), declared here because
 * Debian 12's linux-libc-dev (6.1) has none of it.  The static asserts
 * pin every size and offset the kernel relies on.
 */
#ifndef ISERFUSE_FUSE_URING_ABI_H
#define ISERFUSE_FUSE_URING_ABI_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

/* INIT flag FUSE_OVER_IO_URING (bit 41): flags2 bit 9, valid only with FUSE_INIT_EXT in flags. */
#define GW_FUSE_OVER_IO_URING_FLAGS2 (1u << 9)

/* The two sizes of struct fuse_uring_req_header's areas (bytes). */
#define GW_FUSE_URING_IN_OUT_SZ 128
#define GW_FUSE_URING_OP_IN_OUT_SZ 128

/* The smallest payload buffer the kernel accepts is max(this, max_write, max_pages x page size) bytes. */
#define GW_FUSE_URING_MIN_PAYLOAD 8192

/* The ring entry's own part of the header: written by both sides. */
struct gw_fuse_uring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;  /* the request's unique, to be given back with COMMIT_AND_FETCH */
	uint32_t payload_sz; /* bytes used in the payload buffer, in either direction */
	uint32_t padding;
	uint64_t reserved;
};

/*
 * The header buffer (iovec[0] of REGISTER): in_out holds struct
 * fuse_in_header on a request and struct fuse_out_header on a reply;
 * op_in the operation's first argument (its per-operation header, or
 * nothing); everything else goes through the payload buffer (iovec[1]).
 */
struct gw_fuse_uring_req_header {
	char in_out[GW_FUSE_URING_IN_OUT_SZ];
	char op_in[GW_FUSE_URING_OP_IN_OUT_SZ];
	struct gw_fuse_uring_ent_in_out ring_ent_in_out;
};

/* IORING_OP_URING_CMD's cmd_op on /dev/fuse. */
enum gw_fuse_uring_cmd {
	GW_FUSE_IO_URING_CMD_INVALID = 0,
	GW_FUSE_IO_URING_CMD_REGISTER = 1,         /* addr = struct iovec[2], len = 2 */
	GW_FUSE_IO_URING_CMD_COMMIT_AND_FETCH = 2, /* commit_id = the reply's unique */
};

/* In the SQE's command area (an SQE128 ring's 80 bytes). */
struct gw_fuse_uring_cmd_req {
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;       /* the queue: one per possible CPU, 0..nr-1 */
	uint8_t padding[6];
};

static_assert(sizeof(struct gw_fuse_uring_ent_in_out) == 32, "fuse_uring_ent_in_out is 32 bytes");
static_assert(offsetof(struct gw_fuse_uring_ent_in_out, commit_id) == 8, "commit_id at 8");
static_assert(offsetof(struct gw_fuse_uring_ent_in_out, payload_sz) == 16, "payload_sz at 16");
static_assert(sizeof(struct gw_fuse_uring_req_header) == 288, "fuse_uring_req_header is 288 bytes");
static_assert(offsetof(struct gw_fuse_uring_req_header, op_in) == 128, "op_in at 128");
static_assert(offsetof(struct gw_fuse_uring_req_header, ring_ent_in_out) == 256, "ring_ent_in_out at 256");
static_assert(sizeof(struct gw_fuse_uring_cmd_req) == 24, "fuse_uring_cmd_req is 24 bytes");
static_assert(offsetof(struct gw_fuse_uring_cmd_req, commit_id) == 8, "commit_id at 8");
static_assert(offsetof(struct gw_fuse_uring_cmd_req, qid) == 16, "qid at 16");

#endif
