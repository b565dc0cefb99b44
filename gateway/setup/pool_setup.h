/* SPDX-License-Identifier: MIT */
/*
 * The payload pool's size and the block cache carved out of it: how many
 * slices of how many bytes (queue_depth, pool_slices, max_io_kib,
 * cache_size), creating the pool (which iSER registers at the first
 * connect), and the cache blocks taken out of its extra slices.
 */
#ifndef ISERFUSE_POOL_SETUP_H
#define ISERFUSE_POOL_SETUP_H

#include <stdbool.h>
#include <stddef.h>

#include "gateway/gateway.h"

struct gw_pool_plan {
	unsigned slices;                /* payload slices: queue_depth, or fewer pool_slices; at least 2 */
	unsigned cache_slices;          /* extra slices holding the cache blocks */
	size_t slice_bytes;             /* max_io + 4 * GW_BLOCK_SIZE_MAX */
	size_t cache_block;             /* bytes per cache block: a power of two, at most max_io, 64 KiB at most */
	unsigned long long cache_bytes; /* -o cache_size=; 0: no block cache */
};

/*
 * The plan for qd (queue_depth), pool_slices (0: not given), max_io
 * (bytes per FUSE request) and cache_bytes.  Each block request holds one
 * slice and one command at a time: more slices than task slots would only
 * make requests wait for a task instead of a slice.
 */
void gw_pool_plan(struct gw_pool_plan *p, unsigned qd, long long pool_slices, size_t max_io,
		  unsigned long long cache_bytes);

/*
 * Create g->pool as p says (before the session: iSER registers it at the
 * first connect).  Returns 0, or a negative errno after printing one line
 * (how much was asked for and why).
 */
int gw_pool_create(struct gw *g, const struct gw_pool_plan *p);

/*
 * Let the FUSE readers receive requests into payload slices (fuse_rx.h,
 * rx_layout.h), at most p->slices - 1 of them held by readers at a time
 * (at least one payload slice is always left to block I/O), when a slice
 * holds a headroom page plus g->max_io bytes of data with the scratch
 * blocks free; else readers use libfuse's buffer.  After gw_pool_create,
 * before the FUSE loop.
 */
void gw_pool_rx_setup(struct gw *g, const struct gw_pool_plan *p);

/*
 * route.c's set of request contexts (route_ctx_setup: the payload
 * slices plus what the kernel may have outstanding beyond them), and the
 * block cache (with cache_bytes): cache blocks in pool slices taken out
 * of circulation, so that one RDMA registration covers them and fills
 * land in registered memory; every LUN in g->luns gets a cache device
 * with read and write contexts for as many requests.  Returns 0 or a
 * negative errno.
 */
int gw_cache_setup(struct gw *g, const struct gw_pool_plan *p);

/*
 * After the session is closed: free the files a stop left open (no
 * RELEASE comes after the unmount), log the cache's counters, remove the
 * cache devices, destroy the cache, give its slices back to the pool and
 * free route.c's set of request contexts.
 * No-op for what was never set up.
 */
void gw_cache_teardown(struct gw *g);

#endif
