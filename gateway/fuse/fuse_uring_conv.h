/* SPDX-License-Identifier: MIT */
/*
 * FUSE over io_uring, the layouts: a ring entry's request into the
 * contiguous /dev/fuse layout that fuse_session_process_buf parses, a
 * reply as libfuse writes it (struct iovec, fuse_out_header first) into
 * a ring entry, and the INIT flag.  Pure functions: no kernel, no
 * threads (tests/unit/test_fuse_uring.c).
 */
#ifndef ISERFUSE_FUSE_URING_CONV_H
#define ISERFUSE_FUSE_URING_CONV_H

#include <linux/fuse.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "fuse_uring_abi.h"

/* Bytes a payload buffer must have free before it for gw_fuse_uring_to_dev: fuse_in_header and op_in. */
#define GW_FUSE_URING_HEADROOM (sizeof(struct fuse_in_header) + GW_FUSE_URING_OP_IN_OUT_SZ)

/*
 * The request a ring entry holds (h: in_out = struct fuse_in_header,
 * op_in = the operation's first argument, ring_ent_in_out.payload_sz =
 * bytes of the rest in payload) in /dev/fuse's layout: fuse_in_header,
 * the first argument, then the payload, contiguous.  The size of the
 * first argument is what fuse_in_header.len leaves beside the header and
 * the payload (0 for LOOKUP and the other operations whose first argument
 * is a name).  The header and the argument are written into the
 * GW_FUSE_URING_HEADROOM bytes before payload, which the caller owns; the
 * payload does not move (WRITE data stays where the kernel put it).
 * payload_cap: the payload buffer's size (bytes).  *start and *len get
 * the request.  Returns 0, or -EPROTO when the lengths do not add up
 * (len shorter than the header and payload, a first argument over 128
 * bytes, payload_sz over payload_cap).
 */
int gw_fuse_uring_to_dev(const struct gw_fuse_uring_req_header *h, char *payload, size_t payload_cap, void **start,
			 size_t *len);

/*
 * A reply as libfuse hands it to the writev of its custom I/O (iov[0..count):
 * struct fuse_out_header, then the output, in any split) into a ring
 * entry: fuse_out_header into h->in_out, the output gathered into payload
 * (payload_cap bytes), h->ring_ent_in_out.payload_sz and commit_id set
 * (commit_id = the header's unique).  *unique (may be NULL) gets the
 * unique.  Returns the payload bytes, -EINVAL when the iovecs hold less
 * than a fuse_out_header, -EOVERFLOW when the output is larger than
 * payload_cap (nothing useful written then).
 */
ssize_t gw_fuse_uring_from_reply(const struct iovec *iov, int count, struct gw_fuse_uring_req_header *h,
				 char *payload, size_t payload_cap, uint64_t *unique);

/* The unique of a reply's fuse_out_header (iov[0], as libfuse writes it); 0 (a notification) if too short. */
uint64_t gw_fuse_reply_unique(const struct iovec *iov, int count);

/*
 * A request read from /dev/fuse (len bytes): if it is FUSE_INIT, true,
 * with *unique its unique and *offered whether the kernel offers
 * FUSE_OVER_IO_URING (FUSE_INIT_EXT in flags and flags2 bit 9); false for
 * any other request.
 */
bool gw_fuse_uring_init_request(const void *req, size_t len, uint64_t *unique, bool *offered);

/*
 * A copy of a successful INIT reply (iov as libfuse writes it) into out
 * (cap bytes, at least sizeof(fuse_out_header) + sizeof(fuse_init_out)),
 * with FUSE_INIT_EXT set in flags and flags2 |= bit 9
 * (FUSE_OVER_IO_URING); *init gets the reply's struct fuse_init_out.
 * Returns the reply's length, or -EINVAL if it is not a successful INIT
 * reply of protocol 7.6 or later with the whole struct fuse_init_out (the
 * kernel reads flags2 of any such reply; libfuse 3.14 answers 7.31).
 */
ssize_t gw_fuse_uring_init_reply_enable(const struct iovec *iov, int count, void *out, size_t cap,
					struct fuse_init_out *init);

/*
 * The payload buffer a ring entry needs for the connection an INIT reply
 * set up (bytes): max(8192, max_write, max_pages x 4096), max_pages only
 * with FUSE_MAX_PAGES in flags.
 */
size_t gw_fuse_uring_payload_size(const struct fuse_init_out *init);

struct io_uring_sqe;

/*
 * Fill the SQE128 slot sqe (zeroed first) with a FUSE ring command on the
 * /dev/fuse descriptor fd for queue qid: op GW_FUSE_IO_URING_CMD_REGISTER
 * hands the kernel the entry's two iovecs (header page, payload; iov must
 * stay valid while the entry is registered), GW_FUSE_IO_URING_CMD_COMMIT_AND_FETCH
 * commits the reply to request commit_id and asks for the next one.
 * data becomes the completion's user data.  No errors.
 */
void gw_fuse_uring_prep_cmd(struct io_uring_sqe *sqe, int fd, uint32_t op, uint16_t qid, const struct iovec *iov,
			    uint64_t commit_id, void *data);

#endif
