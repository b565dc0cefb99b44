/* SPDX-License-Identifier: MIT */
/*
 * The block cache's backend over a blk_dev (cache/blkio/blkio.h): reads and
 * writes become SBC-3 READ/WRITE commands, sync SYNCHRONIZE CACHE.
 */
#ifndef ISERFUSE_BCACHE_BLK_H
#define ISERFUSE_BCACHE_BLK_H

#include "bcache.h"
#include "cache/blkio/blkio.h"

/* Fill *be for d (d must outlive every use of be). */
void bcache_blk_backend(struct bcache_backend *be, struct blk_dev *d);

#endif
