/* SPDX-License-Identifier: MIT */
/*
 * The files of the mount that are not LUNs, as FUSE sees them: the by-id/
 * directory of symlinks (the link table is built and extended in
 * gateway/luns/byid_links.c; read here as plain data) and the attributes
 * of .stats (size 0; its content: stats.c).  The links of a LUN that is gone are
 * hidden until it comes back.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "fs_priv.h"

/* A link whose LUN the target no longer reports is hidden (its name may come back as another disk). */
static bool link_live(const struct gw_link *k)
{
	return !gw_lun_gone(k->lun);
}

static const struct gw_link *link_by_ino(struct gw *g, fuse_ino_t ino)
{
	if (ino < GW_LINK_INO0 || ino - GW_LINK_INO0 >= gw_nlinks(g) || !link_live(&g->links[ino - GW_LINK_INO0]))
		return NULL;
	return &g->links[ino - GW_LINK_INO0];
}

fuse_ino_t gw_extra_lookup(struct gw *g, fuse_ino_t parent, const char *name)
{
	if (parent == FUSE_ROOT_ID) {
		if (!strcmp(name, GW_STATS_NAME))
			return GW_STATS_INO;
		if (!strcmp(name, GW_BYID_NAME))
			return GW_BYID_INO;
		return 0;
	}
	if (parent != GW_BYID_INO)
		return 0;
	for (size_t i = 0, n = gw_nlinks(g); i < n; i++)
		if (!strcmp(g->links[i].name, name) && link_live(&g->links[i]))
			return g->links[i].ino;
	return 0;
}

bool gw_extra_attr(struct gw *g, fuse_ino_t ino, struct stat *st)
{
	const struct gw_link *k = link_by_ino(g, ino);
	if (ino != GW_STATS_INO && ino != GW_BYID_INO && !k)
		return false;
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = g->uid;
	st->st_gid = g->gid;
	st->st_atim = st->st_mtim = st->st_ctim = g->mtime;
	st->st_nlink = 1;
	if (ino == GW_BYID_INO) {
		st->st_mode = S_IFDIR | (0555 & ~g->umask);
		st->st_nlink = 2;
	} else if (k) {
		st->st_mode = S_IFLNK | 0777;
		st->st_size = (off_t)strlen(k->target);
	} else {
		/*
		 * .stats: size 0, as a /proc file's; its text is made at open
		 * (stats.c) and read with direct_io until EOF, so a stat or a
		 * lookup costs nothing and touches no counter.
		 */
		st->st_mode = S_IFREG | (0444 & ~g->umask);
	}
	return true;
}

/* by-id/'s entry j: link j, unless its LUN is gone. */
static bool byid_entry(const void *ctx, size_t j, const char **name, struct stat *st)
{
	const struct gw_link *k = &((const struct gw *)ctx)->links[j];
	if (!link_live(k))
		return false;
	*name = k->name;
	st->st_ino = k->ino;
	st->st_mode = S_IFLNK;
	return true;
}

void gw_byid_readdir(fuse_req_t req, struct gw *g, size_t size, off_t off)
{
	gw_reply_dir(req, GW_BYID_INO, ROOT_INO, size, off, gw_nlinks(g), byid_entry, g);
}

void gw_readlink(fuse_req_t req, fuse_ino_t ino)
{
	const struct gw_link *k = link_by_ino(gw_of(req), ino);
	if (!k)
		fuse_reply_err(req, EINVAL);
	else
		fuse_reply_readlink(req, k->target);
}
