/* SPDX-License-Identifier: MIT */
/*
 * The daemon's settings: the command line (fuse_opt, against the option
 * table of options.h) merged with the configuration file (config.h), the
 * command line winning; --help's text; the checks of the values that
 * fuse_opt cannot make (log_level, initiator_name, the digests).
 */
#ifndef ISERFUSE_SETTINGS_H
#define ISERFUSE_SETTINGS_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdio.h>

#include "initiator/mpath/path_select.h"
#include "initiator/wire/text.h"
#include "initiator/net/url.h"
#include "config.h"
#include "mpath_opts.h"
#include "options.h"

struct gw_settings {
	char *url;                          /* the URL (or section name) as given, owned; may hold a password */
	char *str[GW_OPT_COUNT];            /* the string options' values, NULL if not given */
	long long num[GW_OPT_NUMERIC_COUNT]; /* the numeric options' values, checked against the table */
	bool given[GW_OPT_COUNT];           /* set by the command line or the configuration file */
	int nonopts;
	int show_help, show_version;
	int list; /* --list: discovery, no mount */
	bool ro_off; /* the last of ro and rw was rw (given[GW_OPT_RO] is set by either) */
	struct gw_portals portals; /* -o portal=, in the order given, no duplicates (mpath_opts.h) */
	/*
	 * Where values came from: the configuration file's line of each
	 * option (its options = line, or its own key's), of the URL (the
	 * section's url =) and of the mount point; 0 for the command line.
	 */
	int line[GW_OPT_COUNT];
	int url_line, mountpoint_line;
	char *conf_path; /* the configuration file read, owned; NULL if none */
};

/* gw_settings_where's id for the URL and for the mount point. */
#define GW_WHERE_URL (-1)
#define GW_WHERE_MOUNTPOINT (-2)
/* Room for gw_settings_where's text. */
#define GW_WHERE_MAX 4200

/*
 * The prefix of an error about a value: "PATH:LINE: " when option id (or
 * GW_WHERE_URL, GW_WHERE_MOUNTPOINT) came from the configuration file,
 * else "".  Written into buf (cap bytes, GW_WHERE_MAX is enough), which it
 * returns.
 */
const char *gw_settings_where(const struct gw_settings *o, int id, char *buf, size_t cap);

/*
 * Parse the command line in args into o (zeroed by the caller): the table's
 * -o options, the fixed words (fstab's, rw, -h, -V, --list) and the URL;
 * the FUSE options and the mount point stay in args for libfuse.  Empty
 * -o items are skipped (as mount(8) does).  A numeric option out of its
 * range fails here, and so does an option libfuse does not take either
 * ("unknown option 'X'").  Returns 0, or -1 after
 * printing one line.
 */
int gw_settings_parse(struct gw_settings *o, struct fuse_args *args);

/*
 * The configuration file (-o config=PATH, else GW_CONFIG_DEFAULT if it
 * exists) into conf and o.  A first argument that is not a URL names a
 * section: its url replaces it, its mountpoint is used when none is
 * given.  The file's options (global, then the section's) apply where the
 * command line gave none; FUSE options from it go before the command
 * line's in args.  Then log_level takes effect and initiator_name is
 * checked (RFC 7143 §4.2.7).  Returns 0, or -1 after printing one line.
 */
int gw_settings_load(struct gw_settings *o, struct fuse_args *args, struct gw_config *conf);

/* An option's value: what was given, else the table's default. */
long long gw_settings_num(const struct gw_settings *o, enum gw_opt_id id);

/* -o ro in effect (the last of ro and rw was ro). */
bool gw_settings_ro(const struct gw_settings *o);

/*
 * HeaderDigest/DataDigest offers (RFC 7143 §13.1) into neg, from the URL's
 * header_digest/data_digest, then from -o header_digest=/data_digest=,
 * which win.  Returns 0, or -1 after printing why.
 */
int gw_settings_digests(struct iscsi_neg_config *neg, const struct iscsi_url *url, const struct gw_settings *o);

/*
 * The -o portal= portals, in the order given (the command line's, else the
 * configuration file's), none twice and none the URL's own portal, into
 * *out (owned by o, valid while o is).  Returns how many (0..GW_PORTALS_MAX).
 */
size_t gw_settings_portals(const struct gw_settings *o, const struct gw_portal **out);

/* -o multipath= in effect: true unless multipath=off. */
bool gw_settings_multipath(const struct gw_settings *o);

/*
 * -o discover_portals= in effect: true only with discover_portals=on (the
 * portals the target reports through SendTargets become paths too).
 */
bool gw_settings_discover_portals(const struct gw_settings *o);

/* -o path_selector= in effect (PATH_SEL_LEAST_OUTSTANDING unless given). */
enum path_sel_policy gw_settings_path_sel(const struct gw_settings *o);

/* --help: our usage and options to stdout, then libfuse's less the ones the table shows. */
void gw_settings_help(void);

/* Free what o owns, the URL wiped first (it may hold a password). */
void gw_settings_free(struct gw_settings *o);

#endif
