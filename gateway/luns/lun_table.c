/* SPDX-License-Identifier: MIT */
/*
 * The LUN table's entries (struct gw_lun): filling a slot for a LUN, or
 * the gone slot of the same LUN again.  GW_MAX_LUNS slots are allocated
 * before the mount; open_luns (main.c, before the mount) and then only the
 * rescan thread (rescan.c) fill them, publishing each by raising
 * g->nluns.  A slot is never freed.  The FUSE side reads the table
 * (gw_nluns, gw_lun_gone, gw_lun_ro) and calls nothing here.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cache/bcache/bcache_blk.h"
#include "gateway/gateway.h"

/*
 * A newly filled slot's attributes: the mounting user's, mode 0666 less
 * -o umask, times now.  Kept when the LUN comes back; chmod, chown and
 * utimens change them later (fs_attr.c).
 */
static void lun_attr_init(const struct gw *g, struct gw_lun *l)
{
	l->mode = 0666 & ~g->umask;
	l->uid = g->uid;
	l->gid = g->gid;
	clock_gettime(CLOCK_REALTIME, &l->mtime);
	l->atime = l->ctime = l->mtime;
	l->write_ns = 0;
}

struct gw_lun *gw_lun_add(struct gw *g, const struct iscsi_lun_info *info)
{
	size_t n = gw_nluns(g);
	for (size_t i = 0; i < n; i++) {
		struct gw_lun *l = &g->luns[i];
		/* the same LUN back (same number, block size and identifier), not another disk under its number */
		if (gw_lun_gone(l) && l->info.lun == info->lun && l->dev.bs == info->cap.block_size &&
		    !strcmp(l->info.devid, info->devid)) {
			l->info = *info;
			atomic_store_explicit(&l->ro, g->ro || info->wp, memory_order_relaxed);
			blk_dev_set_capacity(&l->dev, info->cap.nblocks);
			bcache_dev_invalidate(l->cdev, blk_dev_size(&l->dev)); /* nothing dirty left (mark_gone); the LUN may be new */
			atomic_store_explicit(&l->gone, false, memory_order_release);
			return l;
		}
	}
	if (n >= GW_MAX_LUNS)
		return NULL;
	struct gw_lun *l = &g->luns[n];
	memset(l, 0, sizeof(*l));
	l->info = *info;
	snprintf(l->name, sizeof(l->name), "lun%u", info->lun);
	l->ino = 2 + n;
	l->ro = g->ro || info->wp;
	lun_attr_init(g, l);
	int rc = g->mp ? blk_dev_init_ops(&l->dev, g->mp, &blk_session_ops_mpath, g->pool, info,
					  g->max_io)
		       : blk_dev_init(&l->dev, g->s, g->pool, info, g->max_io);
	if (rc)
		return NULL;
	blk_dev_set_retry(&l->dev, g->retry, g->retry_budget_ms);
	if (g->cache) { /* a LUN that appeared after the mount gets the block cache too */
		struct bcache_backend be;
		bcache_blk_backend(&be, &l->dev);
		if (bcache_dev_add(g->cache, &be, &l->cdev))
			l->cdev = NULL; /* uncached, still usable */
	}
	atomic_store_explicit(&g->nluns, n + 1, memory_order_release);
	return l;
}
