/* SPDX-License-Identifier: MIT */
/*
 * READ and WRITE of the LUN files on the I/O thread (gw_fast_io,
 * gateway.h; gateway/fuse/fuse_io.h): the request's fuse_in_header and
 * READ or WRITE arguments decoded here, checked as libfuse would, and
 * handed to route.c's calls that never wait; the answer goes back raw
 * (gw_io_reply, through fs_io.c's sink), with no libfuse request made.
 * Anything else, and whatever would wait, is left to libfuse's handlers.
 */
#include <errno.h>
#include <linux/fuse.h>

#include "fs_priv.h"
#include "cache/pool/pool.h"
#include "gateway/fuse/fuse_io.h"
#include "gateway/fuse/fuse_rx.h"

static bool fast_read(struct gw *g, const struct fuse_in_header *h, size_t len)
{
	const struct fuse_read_in *a = (const void *)(h + 1);
	struct gw_lun *l = gw_lun_by_ino(g, h->nodeid);
	if (len < sizeof(*h) + sizeof(*a) || !l)
		return false;
	void *arg = gw_io_raw_arg(h->unique);
	struct gw_file direct_tmp; /* a file an earlier worker opened O_DIRECT: still direct here */
	int err = route_read_try(l, gw_file_of(a->fh, (int)a->flags, &direct_tmp), (a->flags & O_DIRECT) != 0,
				 (int64_t)a->offset, a->size, g->max_io, arg);
	if (err == ENOBUFS)
		return false;
	if (err)
		gw_io_reply(arg, err, NULL, 0);
	return true;
}

static bool fast_write(struct gw *g, const struct fuse_in_header *h, size_t len)
{
	const struct fuse_write_in *a = (const void *)(h + 1);
	struct gw_lun *l = gw_lun_by_ino(g, h->nodeid);
	if (len < sizeof(*h) + sizeof(*a) || !l || (a->write_flags & FUSE_WRITE_CACHE) ||
	    a->size != len - sizeof(*h) - sizeof(*a))
		return false;
	uint8_t *data = (uint8_t *)(a + 1);
	size_t size = a->size;
	void *slice = gw_rx_claim(data);
	/* in place only: an unaligned write's edges need the room of a slice of its own */
	if (!slice || a->offset % l->dev.bs || size % l->dev.bs || a->offset > INT64_MAX)
		return false;
	void *arg = gw_io_raw_arg(h->unique);
	bool o_direct = (a->flags & O_DIRECT) != 0, in_place;
	struct blk_req *r;
	void *payload;
	pool_nowait_set(true);
	int err = route_write_prepare_in(l, o_direct, (int64_t)a->offset, &size, g->max_io, slice, data, &r, &payload,
					 &in_place, arg);
	pool_nowait_set(false);
	if (err == ENOBUFS)
		return false;
	if (err || !r) {
		if (err)
			gw_io_reply(arg, err, NULL, 0);
		return true; /* answered */
	}
	if (!in_place) {
		route_write_cancel(r);
		return false;
	}
	struct gw_file direct_tmp;
	gw_rx_taken(); /* before the submission: its completion returns the slice to the pool */
	if (route_write_try(l, gw_file_of(a->fh, (int)a->flags, &direct_tmp), r, a->offset, size, payload, arg)) {
		gw_rx_retake(slice); /* nothing was done: the request goes to a reader, in its slice */
		return false;
	}
	return true;
}

bool gw_fast_io(void *arg, const void *req, size_t len)
{
	const struct fuse_in_header *h = req;
	if (len < sizeof(*h))
		return false;
	if (h->opcode == FUSE_READ)
		return fast_read(arg, h, len);
	if (h->opcode == FUSE_WRITE)
		return fast_write(arg, h, len);
	return false;
}
