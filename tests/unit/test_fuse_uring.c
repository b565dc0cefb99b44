/* SPDX-License-Identifier: MIT */
/*
 * gateway/fuse/fuse_uring_conv.c: a ring entry (in_out = fuse_in_header,
 * op_in = the first argument, payload = the rest, as the kernel fills
 * them) into /dev/fuse's contiguous layout for each operation the
 * gateway serves, replies into an entry, and the INIT flag.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "gateway/fuse/fuse_uring_conv.h"

#define CAP 65536

/* One entry's memory: the headroom, then the payload buffer. */
static struct {
	char room[GW_FUSE_URING_HEADROOM];
	char payload[CAP];
} mem;
static struct gw_fuse_uring_req_header hdr;

/* Fill the entry as the kernel does for a request of opcode with argument arg (asz bytes) and rest (rsz bytes). */
static void fill(uint32_t opcode, uint64_t unique, uint64_t nodeid, const void *arg, size_t asz, const void *rest,
		 size_t rsz)
{
	memset(&hdr, 0xa5, sizeof(hdr));
	memset(&mem, 0x5a, sizeof(mem));
	struct fuse_in_header in = {.len = (uint32_t)(sizeof(in) + asz + rsz), .opcode = opcode, .unique = unique,
				    .nodeid = nodeid, .uid = 1000, .gid = 1000, .pid = 42};
	memcpy(hdr.in_out, &in, sizeof(in));
	if (asz)
		memcpy(hdr.op_in, arg, asz);
	if (rsz)
		memcpy(mem.payload, rest, rsz);
	hdr.ring_ent_in_out.payload_sz = (uint32_t)rsz;
	hdr.ring_ent_in_out.commit_id = unique;
}

/* Convert and check the /dev/fuse layout: header, argument, rest, contiguous, ending at the payload's end. */
static char *convert_ok(uint32_t opcode, const void *arg, size_t asz, const void *rest, size_t rsz)
{
	void *start = NULL;
	size_t len = 0;
	cr_assert_eq(gw_fuse_uring_to_dev(&hdr, mem.payload, CAP, &start, &len), 0);
	char *p = start;
	cr_assert_eq(len, sizeof(struct fuse_in_header) + asz + rsz);
	cr_assert_eq(p + sizeof(struct fuse_in_header) + asz, mem.payload, "the payload stays where the kernel put it");
	struct fuse_in_header in;
	memcpy(&in, p, sizeof(in));
	cr_assert_eq(in.opcode, opcode);
	cr_assert_eq(in.len, len);
	cr_assert_eq(in.pid, 42);
	if (asz)
		cr_assert_eq(memcmp(p + sizeof(in), arg, asz), 0);
	if (rsz)
		cr_assert_eq(memcmp(p + sizeof(in) + asz, rest, rsz), 0);
	return p;
}

Test(fuse_uring, lookup_name_in_payload)
{
	/* LOOKUP: an empty first argument (op_in unused), the name in the payload */
	fill(FUSE_LOOKUP, 7, 1, NULL, 0, "lun1", 5);
	char *p = convert_ok(FUSE_LOOKUP, NULL, 0, "lun1", 5);
	cr_assert_str_eq(p + sizeof(struct fuse_in_header), "lun1");
	struct fuse_in_header in;
	memcpy(&in, p, sizeof(in));
	cr_assert_eq(in.unique, 7);
	cr_assert_eq(in.nodeid, 1);
}

Test(fuse_uring, read_argument_in_op_in)
{
	struct fuse_read_in r = {.fh = 3, .offset = 1 << 20, .size = 4096, .flags = 040000};
	fill(FUSE_READ, 9, 2, &r, sizeof(r), NULL, 0);
	char *p = convert_ok(FUSE_READ, &r, sizeof(r), NULL, 0);
	struct fuse_read_in got;
	memcpy(&got, p + sizeof(struct fuse_in_header), sizeof(got));
	cr_assert_eq(got.offset, 1 << 20);
	cr_assert_eq(got.size, 4096);
	cr_assert_eq(got.fh, 3);
}

Test(fuse_uring, write_data_not_moved)
{
	static char data[8192];
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)(i * 7);
	struct fuse_write_in w = {.fh = 3, .offset = 4096, .size = sizeof(data)};
	fill(FUSE_WRITE, 11, 2, &w, sizeof(w), data, sizeof(data));
	char *p = convert_ok(FUSE_WRITE, &w, sizeof(w), data, sizeof(data));
	/* /dev/fuse's layout: 40 + 40 bytes of headers, then the data: here the entry's own payload buffer */
	cr_assert_eq(p + 80, mem.payload);
	struct fuse_write_in got;
	memcpy(&got, p + 40, sizeof(got));
	cr_assert_eq(got.size, sizeof(data));
	cr_assert_eq(got.offset, 4096);
}

Test(fuse_uring, getattr_setattr_open_release)
{
	struct fuse_getattr_in ga = {.getattr_flags = FUSE_GETATTR_FH, .fh = 5};
	fill(FUSE_GETATTR, 13, 2, &ga, sizeof(ga), NULL, 0);
	convert_ok(FUSE_GETATTR, &ga, sizeof(ga), NULL, 0);

	struct fuse_setattr_in sa = {.valid = FATTR_MODE | FATTR_SIZE, .size = 12345, .mode = 0640};
	fill(FUSE_SETATTR, 15, 2, &sa, sizeof(sa), NULL, 0);
	char *p = convert_ok(FUSE_SETATTR, &sa, sizeof(sa), NULL, 0);
	struct fuse_setattr_in got;
	memcpy(&got, p + 40, sizeof(got));
	cr_assert_eq(got.size, 12345);
	cr_assert_eq(got.mode, 0640);
	cr_assert_eq(sizeof(sa), 88);

	struct fuse_open_in o = {.flags = 02 | 040000};
	fill(FUSE_OPEN, 17, 2, &o, sizeof(o), NULL, 0);
	convert_ok(FUSE_OPEN, &o, sizeof(o), NULL, 0);

	struct fuse_release_in rl = {.fh = 5, .flags = 02, .release_flags = FUSE_RELEASE_FLUSH};
	fill(FUSE_RELEASE, 19, 2, &rl, sizeof(rl), NULL, 0);
	convert_ok(FUSE_RELEASE, &rl, sizeof(rl), NULL, 0);
}

Test(fuse_uring, fsync_fallocate_lseek_flush)
{
	struct fuse_fsync_in fs = {.fh = 5, .fsync_flags = 1};
	fill(FUSE_FSYNC, 21, 2, &fs, sizeof(fs), NULL, 0);
	convert_ok(FUSE_FSYNC, &fs, sizeof(fs), NULL, 0);

	struct fuse_fallocate_in fa = {.fh = 5, .offset = 8192, .length = 65536, .mode = 0x03};
	fill(FUSE_FALLOCATE, 23, 2, &fa, sizeof(fa), NULL, 0);
	char *p = convert_ok(FUSE_FALLOCATE, &fa, sizeof(fa), NULL, 0);
	struct fuse_fallocate_in got;
	memcpy(&got, p + 40, sizeof(got));
	cr_assert_eq(got.length, 65536);
	cr_assert_eq(got.mode, 3);

	struct fuse_lseek_in ls = {.fh = 5, .offset = 4096, .whence = 3 /* SEEK_DATA */};
	fill(FUSE_LSEEK, 25, 2, &ls, sizeof(ls), NULL, 0);
	convert_ok(FUSE_LSEEK, &ls, sizeof(ls), NULL, 0);

	struct fuse_flush_in fl = {.fh = 5, .lock_owner = 99};
	fill(FUSE_FLUSH, 27, 2, &fl, sizeof(fl), NULL, 0);
	convert_ok(FUSE_FLUSH, &fl, sizeof(fl), NULL, 0);
}

Test(fuse_uring, no_argument)
{
	/* STATFS: no argument at all */
	fill(FUSE_STATFS, 29, 1, NULL, 0, NULL, 0);
	convert_ok(FUSE_STATFS, NULL, 0, NULL, 0);
}

Test(fuse_uring, lengths_that_do_not_add_up)
{
	void *start;
	size_t len;
	struct fuse_read_in r = {.size = 4096};
	fill(FUSE_READ, 31, 2, &r, sizeof(r), NULL, 0);
	struct fuse_in_header in;
	memcpy(&in, hdr.in_out, sizeof(in));
	in.len = sizeof(in) + GW_FUSE_URING_OP_IN_OUT_SZ + 1; /* a first argument larger than op_in */
	memcpy(hdr.in_out, &in, sizeof(in));
	cr_assert_eq(gw_fuse_uring_to_dev(&hdr, mem.payload, CAP, &start, &len), -EPROTO);
	fill(FUSE_WRITE, 33, 2, &r, sizeof(r), "x", 1);
	hdr.ring_ent_in_out.payload_sz = 100; /* more payload than len says */
	cr_assert_eq(gw_fuse_uring_to_dev(&hdr, mem.payload, CAP, &start, &len), -EPROTO);
	fill(FUSE_WRITE, 35, 2, &r, sizeof(r), "x", 1);
	hdr.ring_ent_in_out.payload_sz = CAP + 1;
	cr_assert_eq(gw_fuse_uring_to_dev(&hdr, mem.payload, CAP, &start, &len), -EPROTO);
}

Test(fuse_uring, reply_read_data)
{
	static char data[4096];
	memset(data, 'r', sizeof(data));
	struct fuse_out_header out = {.len = sizeof(out) + sizeof(data), .error = 0, .unique = 41};
	struct iovec iov[2] = {{&out, sizeof(out)}, {data, sizeof(data)}};
	uint64_t unique = 0;
	memset(&hdr, 0, sizeof(hdr));
	cr_assert_eq(gw_fuse_uring_from_reply(iov, 2, &hdr, mem.payload, CAP, &unique), 4096);
	cr_assert_eq(unique, 41);
	struct fuse_out_header got;
	memcpy(&got, hdr.in_out, sizeof(got));
	cr_assert_eq(got.unique, 41);
	cr_assert_eq(got.len, sizeof(out) + 4096);
	cr_assert_eq(hdr.ring_ent_in_out.payload_sz, 4096);
	cr_assert_eq(hdr.ring_ent_in_out.commit_id, 41);
	cr_assert_eq(memcmp(mem.payload, data, sizeof(data)), 0);
	cr_assert_eq(gw_fuse_reply_unique(iov, 2), 41);
}

Test(fuse_uring, reply_split_and_error)
{
	/* fuse_reply_iov: the output in several pieces; the header may come split too */
	struct fuse_attr_out ao = {.attr_valid = 1, .attr = {.ino = 2, .size = 1 << 30, .mode = 0100600}};
	struct fuse_out_header out = {.len = sizeof(out) + sizeof(ao), .unique = 43};
	struct iovec iov[3] = {{&out, 8}, {(char *)&out + 8, 8}, {&ao, sizeof(ao)}};
	cr_assert_eq(gw_fuse_uring_from_reply(iov, 3, &hdr, mem.payload, CAP, NULL), (ssize_t)sizeof(ao));
	struct fuse_attr_out got;
	memcpy(&got, mem.payload, sizeof(got));
	cr_assert_eq(got.attr.size, 1 << 30);
	cr_assert_eq(hdr.ring_ent_in_out.payload_sz, sizeof(ao));

	/* fuse_reply_err: the header only */
	struct fuse_out_header err = {.len = sizeof(err), .error = -ENOENT, .unique = 45};
	struct iovec e = {&err, sizeof(err)};
	cr_assert_eq(gw_fuse_uring_from_reply(&e, 1, &hdr, mem.payload, CAP, NULL), 0);
	struct fuse_out_header gh;
	memcpy(&gh, hdr.in_out, sizeof(gh));
	cr_assert_eq(gh.error, -ENOENT);
	cr_assert_eq(hdr.ring_ent_in_out.payload_sz, 0);
	cr_assert_eq(hdr.ring_ent_in_out.commit_id, 45);

	/* too large for the entry, too short for a header */
	static char big[CAP + 1];
	struct iovec b[2] = {{&out, sizeof(out)}, {big, sizeof(big)}};
	cr_assert_eq(gw_fuse_uring_from_reply(b, 2, &hdr, mem.payload, CAP, NULL), -EOVERFLOW);
	struct iovec s = {&out, 10};
	cr_assert_eq(gw_fuse_uring_from_reply(&s, 1, &hdr, mem.payload, CAP, NULL), -EINVAL);
	cr_assert_eq(gw_fuse_reply_unique(&s, 1), 0);
}

/* An INIT request as the kernel sends it. */
static size_t init_req(char *buf, uint32_t flags, uint32_t flags2)
{
	struct fuse_in_header in = {.len = sizeof(in) + sizeof(struct fuse_init_in), .opcode = FUSE_INIT, .unique = 2};
	struct fuse_init_in ii = {.major = 7, .minor = 44, .flags = flags, .flags2 = flags2};
	memcpy(buf, &in, sizeof(in));
	memcpy(buf + sizeof(in), &ii, sizeof(ii));
	return in.len;
}

Test(fuse_uring, init_request_offer)
{
	char buf[256];
	uint64_t unique = 0;
	bool offered = false;
	size_t n = init_req(buf, FUSE_INIT_EXT | FUSE_MAX_PAGES, GW_FUSE_OVER_IO_URING_FLAGS2);
	cr_assert(gw_fuse_uring_init_request(buf, n, &unique, &offered));
	cr_assert_eq(unique, 2);
	cr_assert(offered);
	n = init_req(buf, FUSE_MAX_PAGES, GW_FUSE_OVER_IO_URING_FLAGS2); /* flags2 without FUSE_INIT_EXT means nothing */
	cr_assert(gw_fuse_uring_init_request(buf, n, &unique, &offered));
	cr_assert_not(offered);
	n = init_req(buf, FUSE_INIT_EXT, 0); /* enable_uring N */
	cr_assert(gw_fuse_uring_init_request(buf, n, &unique, &offered));
	cr_assert_not(offered);
	fill(FUSE_GETATTR, 3, 1, NULL, 0, NULL, 0);
	cr_assert_not(gw_fuse_uring_init_request(hdr.in_out, sizeof(struct fuse_in_header), &unique, &offered));
}

Test(fuse_uring, init_reply_flag)
{
	struct fuse_out_header out = {.len = sizeof(out) + sizeof(struct fuse_init_out), .unique = 2};
	struct fuse_init_out io = {.major = 7, .minor = 31, .flags = FUSE_ASYNC_READ | FUSE_MAX_PAGES,
				   .max_write = 1 << 20, .max_pages = 256};
	struct iovec iov[2] = {{&out, sizeof(out)}, {&io, sizeof(io)}};
	char buf[256];
	struct fuse_init_out got;
	cr_assert_eq(gw_fuse_uring_init_reply_enable(iov, 2, buf, sizeof(buf), &got), (ssize_t)out.len);
	cr_assert_eq(got.flags, FUSE_ASYNC_READ | FUSE_MAX_PAGES | FUSE_INIT_EXT);
	cr_assert_eq(got.flags2, GW_FUSE_OVER_IO_URING_FLAGS2);
	struct fuse_init_out in_buf;
	memcpy(&in_buf, buf + sizeof(out), sizeof(in_buf));
	cr_assert_eq(in_buf.flags2, 1u << 9, "bit 41 of the 64-bit flags");
	cr_assert_eq(in_buf.max_write, 1 << 20);
	cr_assert_eq(io.flags2, 0, "libfuse's reply is not touched");
	cr_assert_eq(gw_fuse_uring_payload_size(&got), 1 << 20);

	/* an INIT that failed, a short one */
	out.error = -EPROTO;
	cr_assert_eq(gw_fuse_uring_init_reply_enable(iov, 2, buf, sizeof(buf), &got), -EINVAL);
	out.error = 0;
	iov[1].iov_len = 24;
	cr_assert_eq(gw_fuse_uring_init_reply_enable(iov, 2, buf, sizeof(buf), &got), -EINVAL);
}

Test(fuse_uring, payload_size)
{
	struct fuse_init_out io = {.max_write = 4096};
	cr_assert_eq(gw_fuse_uring_payload_size(&io), 8192);
	io.max_write = 131072;
	cr_assert_eq(gw_fuse_uring_payload_size(&io), 131072);
	io.flags = FUSE_MAX_PAGES;
	io.max_pages = 256;
	cr_assert_eq(gw_fuse_uring_payload_size(&io), 1 << 20);
	io.flags = 0; /* max_pages counts only with FUSE_MAX_PAGES */
	cr_assert_eq(gw_fuse_uring_payload_size(&io), 131072);
}
