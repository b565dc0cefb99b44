/* SPDX-License-Identifier: MIT */
/*
 * The by-id/ link table (struct gw_link, g->links): one entry per name a
 * LUN is known by, from its VPD 0x83 designators (SPC-4 §7.8.6), named
 * like /dev/disk/by-id.  It follows the LUN table: built before the mount
 * (gw_byid_build), extended by the rescan thread when a LUN appears or
 * comes back (gw_byid_add_lun), never shrunk.  The FUSE side (byid.c)
 * reads it as plain data: an entry is there once g->nlinks (gw_nlinks)
 * covers it.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/gateway.h"

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

/* Only the rescan thread (or the main thread before the mount) adds: the entry is filled, then published. */
static void add_link(struct gw *g, const char *name, const struct gw_lun *l)
{
	size_t n = gw_nlinks(g);
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
