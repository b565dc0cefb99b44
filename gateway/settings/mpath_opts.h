/* SPDX-License-Identifier: MIT */
/*
 * The multipath options (multipath=, portal=, discover_portals=, sessions=,
 * path_selector=): their checks and the portal list.  settings.c calls
 * these with the values it holds; nothing here reads the settings, and
 * nothing here connects anywhere.
 */
#ifndef ISERFUSE_MPATH_OPTS_H
#define ISERFUSE_MPATH_OPTS_H

#include <stdbool.h>
#include <stddef.h>

#include "initiator/mpath/path_select.h"
#include "initiator/net/url.h"
#include "options.h"

/* Most -o portal= a mount takes (the URL's portal not counted). */
#define GW_PORTALS_MAX 8

/* One -o portal=HOST[:PORT]. */
struct gw_portal {
	char host[ISCSI_URL_HOST_MAX]; /* a name or an address, IPv6 without brackets */
	unsigned port;                 /* 1..65535, 3260 when not given */
};

/* The -o portal= list: portals[0..n), in the order given, no duplicates. */
struct gw_portals {
	struct gw_portal portals[GW_PORTALS_MAX];
	size_t n;
};

/*
 * Check `val`, the value of string option `id` as fuse_opt found it.
 * portal= is parsed (iscsi_hostport_parse) (a numeric address rewritten
 * in its one spelling: 127.1 becomes 127.0.0.1) and added to *list unless
 * it is there already; multipath= and discover_portals= must be on or
 * off, path_selector= a word path_sel_parse takes; other ids pass.
 * Returns 0, or -EINVAL (-E2BIG: a ninth portal) with one line in err (cap
 * bytes): "bad option 'KEY=VAL': why".
 */
int gw_mpath_opt(struct gw_portals *list, enum gw_opt_id id, const char *val, char *err, size_t cap);

/* The multipath options in effect, as gw_mpath_settle checks them. */
struct gw_mpath_given {
	const char *multipath;        /* -o multipath= as given, NULL if not */
	const char *discover_portals; /* -o discover_portals= as given, NULL if not */
	long long sessions;           /* -o sessions= in effect */
	const char *multipath_where;  /* where multipath= came from: "PATH:LINE: " or "" (gw_settings_where) */
	const char *url;              /* the URL as given, NULL if none */
};

/*
 * Once the command line and the configuration file are merged: portal=,
 * discover_portals=on and sessions= above 1 need multipath=on, and a
 * portal of *list that is the URL's own (by address: 127.1 is 127.0.0.1)
 * is dropped.  Returns 0, or -1 after printing one line.
 */
int gw_mpath_settle(const struct gw_mpath_given *g, struct gw_portals *list);

/* multipath= value (NULL: not given) in effect: true unless "off". */
bool gw_mpath_on(const char *multipath);

/* discover_portals= value (NULL: not given) in effect: true only for "on". */
bool gw_mpath_discover_on(const char *discover_portals);

/* path_selector= value (NULL: not given, or checked by gw_mpath_opt): PATH_SEL_LEAST_OUTSTANDING unless given. */
enum path_sel_policy gw_mpath_path_sel(const char *path_selector);

#endif
