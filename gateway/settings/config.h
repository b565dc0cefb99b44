/* SPDX-License-Identifier: MIT */
/*
 * The configuration file (/etc/iserfuse.conf or -o config=PATH), INI
 * syntax read with inih:
 *
 *   initiator_name = iqn...        (keys before the first section: global)
 *   options = ro,queue_depth=64    (default -o options for every mount)
 *   [lab]                          (a target: iserfuse lab, iserfuse@lab.service)
 *   url = iscsi://host/iqn...
 *   secret_file = /etc/iserfuse/lab.secret
 *   mountpoint = /srv/iscsi/lab
 *   options = noop_interval=10
 *
 * Unknown keys, duplicate keys, bad section names and sections without a
 * url are errors naming the file and line; the line of each key is kept,
 * so that a bad value found later (settings.c, main.c) names it too.
 */
#ifndef ISERFUSE_CONFIG_H
#define ISERFUSE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#define GW_CONFIG_DEFAULT "/etc/iserfuse.conf"

struct gw_config_target {
	char *name;        /* the section name */
	char *url;         /* required */
	char *secret_file; /* NULL if not set */
	char *mountpoint;  /* NULL if not set */
	char *options;     /* comma-separated -o options, NULL if not set */
	int line;          /* line of the [name] header */
	/* the line of each key (0 if not set): errors about a value name it */
	int url_line, secret_file_line, mountpoint_line, options_line;
};

struct gw_config {
	char *path;            /* the file read, NULL if none */
	char *initiator_name;  /* NULL if not set */
	char *options;         /* NULL if not set */
	int initiator_name_line, options_line; /* their lines, 0 if not set */
	struct gw_config_target *targets;
	size_t ntargets;
};

/*
 * Read `path` into *c (owned by the caller: gw_config_free).  With
 * must_exist false a file that is missing or that the caller may not read
 * is not an error (c stays empty).
 * Returns 0, or -1 after printing one line "iserfuse: PATH:LINE: why" (or
 * "iserfuse: PATH: why") on stderr.
 */
int gw_config_load(const char *path, bool must_exist, struct gw_config *c);

/* The section called name, or NULL. */
const struct gw_config_target *gw_config_find(const struct gw_config *c, const char *name);

void gw_config_free(struct gw_config *c);

#endif
