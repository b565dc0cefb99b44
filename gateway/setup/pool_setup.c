/* SPDX-License-Identifier: MIT */
/* The payload pool's sizing and creation, and the block cache in its slices (see pool_setup.h). */
#include "pool_setup.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/bcache/bcache_blk.h"
#include "initiator/util/log.h"
#include "gateway/fuse/fuse_rx.h"
#include "gateway/luns/lun_select.h"
#include "gateway/fs/route.h"
#include "gateway/fuse/rx_layout.h"

#define CACHE_BLOCK_MAX (64u * 1024u)
/*
 * Requests the kernel may have outstanding beyond the payload slices (reads
 * waiting for cache fills and punches hold none): max_background
 * (GW_FUSE_MAX_BACKGROUND, gateway.h) and 32 more: fewer than the readers -o max_threads allows (256
 * by default), so a handler may find a set empty and wait (ctxpool_get).
 * Sizes the sets of request contexts.
 */
#define GW_CTX_EXTRA (GW_FUSE_MAX_BACKGROUND + 32u)

void gw_pool_plan(struct gw_pool_plan *p, unsigned qd, long long pool_slices, size_t max_io,
		  unsigned long long cache_bytes)
{
	p->slices = pool_slices && pool_slices < qd ? (unsigned)pool_slices : qd;
	if (p->slices < 2)
		p->slices = 2;
	p->cache_block = CACHE_BLOCK_MAX; /* a power of two, at most one request */
	while (p->cache_block > max_io)
		p->cache_block /= 2;
	size_t cache_per_slice = (max_io + 4 * GW_BLOCK_SIZE_MAX) / p->cache_block;
	p->cache_slices = (unsigned)((cache_bytes + (unsigned long long)cache_per_slice * p->cache_block - 1) /
				     ((unsigned long long)cache_per_slice * p->cache_block));
	p->slice_bytes = max_io + 4 * GW_BLOCK_SIZE_MAX;
	p->cache_bytes = cache_bytes;
}

int gw_pool_create(struct gw *g, const struct gw_pool_plan *p)
{
	int rc = buf_pool_create(&g->pool, p->slice_bytes, p->slices + p->cache_slices);
	if (rc)
		fprintf(stderr, "iserfuse: cannot allocate the buffer pool of %llu MiB (%u payload slices for queue_depth "
			"and pool_slices + %u cache slices for cache_size, %zu bytes each): %s\n",
			((unsigned long long)(p->slices + p->cache_slices) * p->slice_bytes) >> 20, p->slices,
			p->cache_slices, p->slice_bytes, strerror(-rc));
	return rc;
}

void gw_pool_rx_setup(struct gw *g, const struct gw_pool_plan *p)
{
	bool fits = gw_rx_fits(buf_pool_slice_size(g->pool), g->max_io, GW_BLOCK_SIZE_MAX);
	gw_rx_setup(fits ? g->pool : NULL, p->slices - 1);
}

int gw_cache_setup(struct gw *g, const struct gw_pool_plan *p)
{
	unsigned long long bytes = p->cache_bytes;
	unsigned nslices = p->cache_slices;
	size_t cblock = p->cache_block;
	int rc = route_ctx_setup(p->slices + GW_CTX_EXTRA); /* cached writes, punches and zero ranges */
	if (rc || !bytes)
		return rc;
	size_t per_slice = buf_pool_slice_size(g->pool) / cblock;
	unsigned nblocks = (unsigned)((bytes + cblock - 1) / cblock);
	void **bufs = calloc(nblocks, sizeof(*bufs));
	g->cache_slices = calloc(nslices, sizeof(*g->cache_slices));
	if (!bufs || !g->cache_slices) {
		free(bufs);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < nblocks; i++) {
		if (i % per_slice == 0)
			g->cache_slices[g->ncache_slices++] = buf_pool_get(g->pool, NULL);
		bufs[i] = (uint8_t *)g->cache_slices[g->ncache_slices - 1] + (i % per_slice) * cblock;
	}
	rc = bcache_create(&g->cache, cblock, nblocks, bufs, g->writeback);
	free(bufs);
	for (size_t i = 0; !rc && i < gw_nluns(g); i++) {
		struct bcache_backend be;
		bcache_blk_backend(&be, &g->luns[i].dev);
		be.depth = p->slices + GW_CTX_EXTRA; /* sizes its read and write contexts */
		rc = bcache_dev_add(g->cache, &be, &g->luns[i].cdev);
	}
	if (!rc)
		log_info("block cache: %u blocks of %zu KiB, %s", nblocks, cblock / 1024,
			 g->writeback ? "write-back" : "write-through");
	return rc;
}

void gw_cache_teardown(struct gw *g)
{
	gw_files_free_all(g); /* files a stop left open: no RELEASE comes after the unmount */
	if (g->cache) {
		struct bcache_stats st;
		bcache_get_stats(g->cache, &st);
		log_info("block cache: %llu hits, %llu misses, %llu bypassed reads, read-ahead %llu bytes "
			 "(%llu used, %llu wasted), %llu blocks written back, %llu dirty left",
			 (unsigned long long)st.hits, (unsigned long long)st.misses,
			 (unsigned long long)st.bypass_reads, (unsigned long long)st.ra_bytes,
			 (unsigned long long)st.ra_used_bytes, (unsigned long long)st.ra_wasted_bytes,
			 (unsigned long long)st.writeback_blocks, (unsigned long long)st.dirty_blocks);
	}
	for (size_t i = 0; i < gw_nluns(g); i++) {
		bcache_dev_remove(g->luns[i].cdev);
		g->luns[i].cdev = NULL;
	}
	bcache_destroy(g->cache);
	g->cache = NULL;
	for (unsigned i = 0; i < g->ncache_slices; i++)
		buf_pool_put(g->pool, g->cache_slices[i]);
	free(g->cache_slices);
	g->cache_slices = NULL;
	g->ncache_slices = 0;
	route_ctx_teardown();
}
