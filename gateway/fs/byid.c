/* SPDX-License-Identifier: MIT */
/*
 * The files of the mount that are not LUNs: the by-id/ directory of
 * symlinks named after the VPD 0x83 designators (SPC-4 §7.8.6) and the
 * attributes of .stats (its content: stats.c).  The link table follows
 * the LUN table: the links of a LUN that appears after the mount are added
 * by the rescan thread (gw_byid_add_lun), and those of a LUN that is gone
 * are hidden until it comes back.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gateway/gateway.h"

#define ATTR_TIMEOUT 1.0

static void hex_name(const char *prefix, const struct scsi_designator *d, char *out, size_t cap)
{
	size_t n = (size_t)snprintf(out, cap, "%s", prefix);
	for (size_t i = 0; i < d->len && n + 3 <= cap; i++)
		n += (size_t)snprintf(out + n, cap - n, "%02x", d->id[i]);
}

/* ASCII designator: runs of blanks become one '_', '/' becomes '-', the rest of non-printables go. */
static void ascii_name(const char *prefix, const struct scsi_designator *d, char *out, size_t cap)
{
	size_t n = (size_t)snprintf(out, cap, "%s", prefix), start = n;
	bool blank = false;
	for (size_t i = 0; i < d->len && d->id[i] && n + 2 <= cap; i++) {
		unsigned char ch = d->id[i];
		if (ch == ' ' || ch == '\t') {
			blank = true;
			continue;
		}
		if (ch < 0x21 || ch > 0x7e)
			continue;
		if (blank && n > start)
			out[n++] = '_';
		blank = false;
		out[n++] = ch == '/' ? '-' : (char)ch;
	}
	out[n] = '\0';
	if (n == start)
		out[0] = '\0';
}

static size_t nlinks(const struct gw *g) { return atomic_load_explicit(&g->nlinks, memory_order_acquire); }

/* Only the rescan thread (or the main thread before the mount) adds: the entry is filled, then published. */
static void add_link(struct gw *g, const char *name, const struct gw_lun *l)
{
	size_t n = nlinks(g);
	if (!name[0] || strlen(name) >= sizeof(g->links[0].name) || n >= GW_MAX_LINKS)
		return;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(g->links[i].name, name))
			return; /* two LUNs claim one id: the first keeps it */
	struct gw_link *k = &g->links[n];
	snprintf(k->name, sizeof(k->name), "%s", name);
	snprintf(k->target, sizeof(k->target), "../%s", l->name);
	k->lun = l;
	k->ino = GW_LINK_INO0 + n;
	atomic_store_explicit(&g->nlinks, n + 1, memory_order_release);
}

void gw_byid_add_lun(struct gw *g, const struct gw_lun *l)
{
	char name[sizeof(g->links[0].name) + sizeof(g->luns[0].info.devid)]; /* too long: skipped by add_link */
	const struct iscsi_lun_info *info = &l->info;
	if (!g->links)
		return;
	if (info->devid[0]) {
		snprintf(name, sizeof(name), "scsi-%s", info->devid);
		add_link(g, name, l);
	}
	for (size_t j = 0; j < info->n_lu_desig; j++) {
		const struct scsi_designator *d = &info->lu_desig[j];
		if (d->type == SCSI_DESIG_NAA && d->code_set == 1)
			hex_name("wwn-0x", d, name, sizeof(name));
		else if (d->type == SCSI_DESIG_EUI64 && d->code_set == 1)
			hex_name("eui-0x", d, name, sizeof(name));
		else if (d->type == SCSI_DESIG_T10 && (d->code_set == 2 || d->code_set == 3))
			ascii_name("t10-", d, name, sizeof(name));
		else
			continue;
		add_link(g, name, l);
	}
}

int gw_byid_build(struct gw *g)
{
	g->links = calloc(GW_MAX_LINKS, sizeof(*g->links));
	if (!g->links)
		return -ENOMEM;
	g->nlinks = 0;
	for (size_t i = 0, n = gw_nluns(g); i < n; i++)
		gw_byid_add_lun(g, &g->luns[i]);
	return 0;
}

void gw_byid_free(struct gw *g)
{
	free(g->links);
	g->links = NULL;
	g->nlinks = 0;
}

/* A link whose LUN the target no longer reports is hidden (its name may come back as another disk). */
static bool link_live(const struct gw_link *k)
{
	return !gw_lun_gone(k->lun);
}

static const struct gw_link *link_by_ino(struct gw *g, fuse_ino_t ino)
{
	if (ino < GW_LINK_INO0 || ino - GW_LINK_INO0 >= nlinks(g) || !link_live(&g->links[ino - GW_LINK_INO0]))
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
	for (size_t i = 0, n = nlinks(g); i < n; i++)
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
		char *text = NULL;
		size_t len = 0;
		st->st_mode = S_IFREG | (0444 & ~g->umask);
		if (gw_stats_render(g, &text, &len) == 0) /* so that tools which trust st_size read it all */
			st->st_size = (off_t)len;
		free(text);
	}
	return true;
}

void gw_byid_readdir(fuse_req_t req, struct gw *g, size_t size, off_t off)
{
	char buf[16384];
	size_t used = 0;
	if (size > sizeof(buf))
		size = sizeof(buf);
	for (off_t i = off, n = (off_t)nlinks(g); i < n + 2; i++) {
		struct stat st = {0};
		const char *name;
		if (i < 2) {
			name = i == 0 ? "." : "..";
			st.st_ino = i == 0 ? GW_BYID_INO : FUSE_ROOT_ID;
			st.st_mode = S_IFDIR;
		} else {
			if (!link_live(&g->links[i - 2]))
				continue;
			name = g->links[i - 2].name;
			st.st_ino = g->links[i - 2].ino;
			st.st_mode = S_IFLNK;
		}
		size_t n = fuse_add_direntry(req, buf + used, size - used, name, &st, i + 1);
		if (n > size - used)
			break;
		used += n;
	}
	fuse_reply_buf(req, buf, used);
}

void gw_readlink(fuse_req_t req, fuse_ino_t ino)
{
	const struct gw_link *k = link_by_ino(fuse_req_userdata(req), ino);
	if (!k)
		fuse_reply_err(req, EINVAL);
	else
		fuse_reply_readlink(req, k->target);
}
