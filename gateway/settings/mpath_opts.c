/* SPDX-License-Identifier: MIT */
/*
 * The multipath options (multipath=, portal=, discover_portals=, sessions=,
 * path_selector=):
 * their checks and the portal list (see settings.h).  The multipath layer
 * reads them through the accessors; nothing here connects anywhere.
 */
#include "settings.h"

#include <errno.h>
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

int gw_mpath_opt(struct gw_settings *o, enum gw_opt_id id, const char *val, char *err, size_t cap)
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
		for (size_t i = 0; i < o->nportals; i++)
			if (same_portal(&o->portals[i], p.host, p.port))
				return 0; /* given twice: one path */
		if (o->nportals == GW_PORTALS_MAX) {
			snprintf(err, cap, "bad option '%s=%s': at most %d portals", key, val, GW_PORTALS_MAX);
			return -E2BIG;
		}
		o->portals[o->nportals++] = p;
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

int gw_mpath_settle(struct gw_settings *o)
{
	char where[GW_WHERE_MAX];
	if (o->nportals && !gw_settings_multipath(o)) {
		fprintf(stderr, "iserfuse: %sbad option 'multipath=off': portal= needs multipath=on\n",
			gw_settings_where(o, GW_OPT_MULTIPATH, where, sizeof(where)));
		return -1;
	}
	if (gw_settings_discover_portals(o) && !gw_settings_multipath(o)) {
		fprintf(stderr, "iserfuse: bad option 'multipath=off': discover_portals=on needs multipath=on\n");
		return -1;
	}
	if (gw_settings_num(o, GW_OPT_SESSIONS) > 1 && !gw_settings_multipath(o)) {
		fprintf(stderr, "iserfuse: %sbad option 'multipath=off': sessions=%lld needs multipath=on\n",
			gw_settings_where(o, GW_OPT_MULTIPATH, where, sizeof(where)), gw_settings_num(o, GW_OPT_SESSIONS));
		return -1;
	}
	/* The URL's portal is path 0 already; a URL that does not parse is main's to report. */
	struct iscsi_url u;
	if (!o->nportals || !o->url || iscsi_url_parse(o->url, false, &u, NULL, 0))
		return 0;
	size_t w = 0;
	for (size_t i = 0; i < o->nportals; i++)
		if (!same_portal(&o->portals[i], u.host, u.port))
			o->portals[w++] = o->portals[i];
	o->nportals = w;
	iscsi_url_wipe(&u);
	return 0;
}

size_t gw_settings_portals(const struct gw_settings *o, const struct gw_portal **out)
{
	*out = o->portals;
	return o->nportals;
}

bool gw_settings_multipath(const struct gw_settings *o)
{
	return !o->str[GW_OPT_MULTIPATH] || strcmp(o->str[GW_OPT_MULTIPATH], "off") != 0;
}

bool gw_settings_discover_portals(const struct gw_settings *o)
{
	return o->str[GW_OPT_DISCOVER_PORTALS] && strcmp(o->str[GW_OPT_DISCOVER_PORTALS], "on") == 0;
}

enum path_sel_policy gw_settings_path_sel(const struct gw_settings *o)
{
	enum path_sel_policy pol = PATH_SEL_LEAST_OUTSTANDING;
	if (o->str[GW_OPT_PATH_SELECTOR])
		path_sel_parse(o->str[GW_OPT_PATH_SELECTOR], &pol); /* checked by gw_mpath_opt */
	return pol;
}
