/* SPDX-License-Identifier: MIT */
/*
 * The one table of iserfuse's -o options: key, kind, default, allowed
 * range and help text.  The command line and the configuration file's
 * `options =` (both through fuse_opt, main.c), --help and the man page's
 * OPTIONS (checked by the cli suite against --help) all follow it.
 */
#ifndef ISERFUSE_OPTIONS_H
#define ISERFUSE_OPTIONS_H

#include <stdio.h>

enum gw_opt_kind {
	GW_OPT_INT,   /* decimal integer in [min, max] */
	GW_OPT_OCTAL, /* octal integer in [min, max] (umask) */
	GW_OPT_SIZE,  /* bytes with an optional K, M or G suffix (1024-based), in [min, max] */
	GW_OPT_STR,   /* any text; its values are checked where it is used */
	GW_OPT_FLAG,  /* no value */
};

/* Indexes into gw_opts[] (the numeric ones first). */
enum gw_opt_id {
	GW_OPT_QUEUE_DEPTH,
	GW_OPT_MAX_IO_KIB,
	GW_OPT_POOL_SLICES,
	GW_OPT_LOGIN_TIMEOUT,
	GW_OPT_CMD_TIMEOUT,
	GW_OPT_NOOP_INTERVAL,
	GW_OPT_NOOP_TIMEOUT,
	GW_OPT_REPLACEMENT_TIMEOUT,
	GW_OPT_RESCAN_INTERVAL,
	GW_OPT_CACHE_SIZE,
	GW_OPT_UMASK,
	GW_OPT_MAX_THREADS,
	GW_OPT_SESSIONS,
	GW_OPT_IO_THREADS,
	GW_OPT_NUMERIC_COUNT, /* the entries before this one have numeric values */
	GW_OPT_CONFIG = GW_OPT_NUMERIC_COUNT,
	GW_OPT_INITIATOR_NAME,
	GW_OPT_RO,
	GW_OPT_HEADER_DIGEST,
	GW_OPT_DATA_DIGEST,
	GW_OPT_SECRET_FILE,
	GW_OPT_LOG_LEVEL,
	GW_OPT_LOG_FILE,
	GW_OPT_TRANSPORT,
	GW_OPT_WRITEBACK,
	GW_OPT_ALLOW_OTHER,
	GW_OPT_MULTIPATH,
	GW_OPT_PORTAL,
	GW_OPT_DISCOVER_PORTALS,
	GW_OPT_PATH_SELECTOR,
	GW_OPT_IO_URING,
	GW_OPT_EVENT_LOOP,
	GW_OPT_ACCEPT_UNLISTED_PORTALS,
	GW_OPT_COUNT,
};

struct gw_opt {
	const char *key;         /* "queue_depth" */
	enum gw_opt_kind kind;
	const char *arg;         /* the value's name in --help ("N", "S", "PATH"); NULL for a flag */
	long long def;           /* default value (numeric kinds) */
	const char *def_text;    /* default as shown ("128", "queue_depth", "off") */
	long long min, max;      /* allowed range (numeric kinds), inclusive */
	long long step;          /* the value must be a multiple of this (0 or 1: any) */
	int to_fuse;             /* also handed to libfuse (ro, allow_other) */
	const char *help;        /* help text; '\n' starts a continuation line */
};

extern const struct gw_opt gw_opts[GW_OPT_COUNT];

/*
 * Parse `text`, the value of numeric option `id`, into *out.  Overflow,
 * trailing characters, a value out of [min, max] or not a multiple of
 * step are errors.  Returns 0, or -EINVAL (-ERANGE for out of range or
 * overflow) with one line in err (cap bytes): "bad option 'KEY=TEXT': ...
 * expected" naming the allowed range.
 */
int gw_opt_parse_num(enum gw_opt_id id, const char *text, long long *out, char *err, size_t cap);

/*
 * The option named by "key=value" or "key": its id, or -1 when the table
 * has no such key.
 */
int gw_opt_find(const char *arg);

/* --help's iserfuse part: one entry per table row, "-o key=ARG  help (default D)". */
void gw_opts_help(FILE *f);

#endif
