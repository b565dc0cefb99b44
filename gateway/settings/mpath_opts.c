/* SPDX-License-Identifier: MIT */
/*
 * The multipath options (multipath=, portal=, discover_portals=, sessions=,
 * path_selector=): their checks and the portal list (see mpath_opts.h).
 * settings.c hands in what it holds; nothing here reads the settings or
 * connects anywhere.
 */
#include "mpath_opts.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "initiator/net/portal_addr.h"

/*
 * Is p the portal host:port?  Two numeric addresses compare as addresses
 * (iscsi_portal_addr_numeric: ::1 and 0::1, 127.0.0.1, 127.1 and
 * ::ffff:127.0.0.1 are one), anything else as text, ignoring case (host
 * names, RFC 4343; the path thread compares names by what they resolve
 * to).  Nothing is looked up here.
 */
static bool same_portal(const struct gw_portal *p, const char *host, unsigned port)
{
	struct iscsi_portal_addr a, b;
	if (p->port != port)
		return false;
	if (!iscsi_portal_addr_numeric(p->host, port, &a) && !iscsi_portal_addr_numeric(host, port, &b))
		return iscsi_portal_addr_same(&a, &b);
	return !strcasecmp(p->host, host);
}

/* on or off, else one line into err. */
static int on_off(const char *key, const char *val, char *err, size_t cap)
{
	if (strcmp(val, "on") && strcmp(val, "off")) {
		snprintf(err, cap, "bad option '%s=%s': on or off expected", key, val);
		return -EINVAL;
	}
	return 0;
}

int gw_mpath_opt(struct gw_portals *list, enum gw_opt_id id, const char *val, char *err, size_t cap)
{
	const char *key = gw_opts[id].key;
	enum path_sel_policy pol;
	char why[160];

	switch (id) {
	case GW_OPT_PORTAL: {
		struct gw_portal p;
		if (iscsi_hostport_parse(val, p.host, &p.port, why, sizeof(why))) {
			snprintf(err, cap, "bad option '%s=%s': %s", key, val, why);
			return -EINVAL;
		}
		struct iscsi_portal_addr a; /* a numeric one in its one spelling: 127.1 is 127.0.0.1 */
		if (!iscsi_portal_addr_numeric(p.host, p.port, &a))
			iscsi_portal_addr_host(&a, p.host, sizeof(p.host));
		for (size_t i = 0; i < list->n; i++)
			if (same_portal(&list->portals[i], p.host, p.port))
				return 0; /* given twice: one path */
		if (list->n == GW_PORTALS_MAX) {
			snprintf(err, cap, "bad option '%s=%s': at most %d portals", key, val, GW_PORTALS_MAX);
			return -E2BIG;
		}
		list->portals[list->n++] = p;
		return 0;
	}
	case GW_OPT_MULTIPATH:
	case GW_OPT_DISCOVER_PORTALS:
		return on_off(key, val, err, cap);
	case GW_OPT_PATH_SELECTOR:
		if (path_sel_parse(val, &pol)) {
			snprintf(err, cap, "bad option '%s=%s': least-outstanding or round-robin expected", key, val);
			return -EINVAL;
		}
		return 0;
	default:
		return 0;
	}
}

int gw_mpath_settle(const struct gw_mpath_given *g, struct gw_portals *list)
{
	bool multipath = gw_mpath_on(g->multipath);
	if (list->n && !multipath) {
		fprintf(stderr, "iserfuse: %sbad option 'multipath=off': portal= needs multipath=on\n", g->multipath_where);
		return -1;
	}
	if (gw_mpath_discover_on(g->discover_portals) && !multipath) {
		fprintf(stderr, "iserfuse: bad option 'multipath=off': discover_portals=on needs multipath=on\n");
		return -1;
	}
	if (g->sessions > 1 && !multipath) {
		fprintf(stderr, "iserfuse: %sbad option 'multipath=off': sessions=%lld needs multipath=on\n",
			g->multipath_where, g->sessions);
		return -1;
	}
	/* The URL's portal is path 0 already; a URL that does not parse is main's to report. */
	struct iscsi_url u;
	if (!list->n || !g->url || iscsi_url_parse(g->url, false, &u, NULL, 0))
		return 0;
	size_t w = 0;
	for (size_t i = 0; i < list->n; i++)
		if (!same_portal(&list->portals[i], u.host, u.port))
			list->portals[w++] = list->portals[i];
	list->n = w;
	iscsi_url_wipe(&u);
	return 0;
}

bool gw_mpath_on(const char *multipath) { return !multipath || strcmp(multipath, "off") != 0; }

bool gw_mpath_discover_on(const char *discover_portals)
{
	return discover_portals && strcmp(discover_portals, "on") == 0;
}

enum path_sel_policy gw_mpath_path_sel(const char *path_selector)
{
	enum path_sel_policy pol = PATH_SEL_LEAST_OUTSTANDING;
	if (path_selector)
		path_sel_parse(path_selector, &pol); /* checked by gw_mpath_opt */
	return pol;
}
