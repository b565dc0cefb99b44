/* SPDX-License-Identifier: MIT */
#include "bcache_blk.h"

#include <errno.h>
#include <string.h>

static int be_read(void *ctx, uint64_t off, size_t len, bcache_io_fn cb, void *arg)
{
	return blk_read(ctx, off, len, cb, arg);
}

static int be_read_into(void *ctx, uint64_t off, size_t len, void *buf, bcache_io_fn cb, void *arg)
{
	return blk_read_into(ctx, off, len, buf, cb, arg);
}

/* Write-back of a cache block: copied into a slice, so the block may change meanwhile. */
static int be_write(void *ctx, uint64_t off, size_t len, const void *buf, bcache_io_fn cb, void *arg)
{
	void *payload;
	struct blk_req *r = blk_write_prepare(ctx, off, len, &payload);
	if (!r)
		return -EINVAL;
	memcpy(payload, buf, len);
	blk_write_submit(r, cb, arg);
	return 0;
}

static int be_sync(void *ctx, bcache_io_fn cb, void *arg) { return blk_sync(ctx, cb, arg); }

void bcache_blk_backend(struct bcache_backend *be, struct blk_dev *d)
{
	memset(be, 0, sizeof(*be));
	be->ctx = d;
	be->size = blk_dev_size(d);
	be->lbsize = d->bs;
	be->max_io = d->max_io;
	be->read = be_read;
	be->read_into = be_read_into;
	be->write = be_write;
	be->sync = be_sync;
}
