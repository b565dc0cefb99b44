/* SPDX-License-Identifier: MIT */
/*
 * iSCSI URL parsing, the syntax of libiscsi and QEMU:
 *   iscsi://[user[%password]@]host[:port]/target-iqn[/lun][?key=value&...]
 * host is a name, an IPv4 address or an IPv6 address in brackets; port
 * defaults to 3260.  Query keys: `iser` (no value), header_digest,
 * data_digest, target_user and target_password (the name and secret the
 * target must prove for mutual CHAP, RFC 7143 §12.1.3).
 */
#ifndef ISERFUSE_URL_H
#define ISERFUSE_URL_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#define ISCSI_URL_HOST_MAX 256
#define ISCSI_NAME_MAX 224 /* RFC 7143 §4.2.7.1: iSCSI names are at most 223 bytes */
#define ISCSI_CRED_MAX 256

struct iscsi_url {
	char host[ISCSI_URL_HOST_MAX]; /* without brackets */
	unsigned port;                 /* 1..65535 */
	char target[ISCSI_NAME_MAX];   /* target IQN/EUI/NAA name; empty for a discovery URL */
	int lun;                       /* -1 when the URL names no LUN, else 0..16383 */
	bool iser;                     /* "?iser" given */
	char user[ISCSI_CRED_MAX];     /* CHAP user, "" if none */
	char password[ISCSI_CRED_MAX]; /* CHAP secret, "" if none */
	char target_user[ISCSI_CRED_MAX];     /* mutual CHAP: the target's name, "" if none */
	char target_password[ISCSI_CRED_MAX]; /* mutual CHAP: the target's secret, "" if none */
	char header_digest[32];        /* query value, "" if not given */
	char data_digest[32];
};

/*
 * Parse `text` into `out`.  `need_target`: a target name is required (a
 * mount); false allows "iscsi://host[:port][/]" (discovery).  Percent
 * escapes (%XX) in the target and credentials (also target_user and
 * target_password) are decoded; those two need a non-empty value.
 * Returns 0, or -EINVAL with a one-line reason in `err` (cap bytes, may be
 * NULL).  Never reads past the string, never overflows a field: a field too
 * long is -EINVAL.
 */
int iscsi_url_parse(const char *text, bool need_target, struct iscsi_url *out, char *err, size_t err_cap);

/*
 * A portal in messages, "host:port" or "[v6-address]:port" (RFC 3986
 * section 3.2.2): printf("... " ISCSI_HOSTPORT_FMT " ...", ISCSI_HOSTPORT_ARGS(host, port)).
 * host is evaluated more than once.
 */
#define ISCSI_HOSTPORT_FMT "%s%s%s:%u"
#define ISCSI_HOSTPORT_ARGS(host, port) \
	(strchr((host), ':') ? "[" : ""), (host), (strchr((host), ':') ? "]" : ""), (unsigned)(port)

/*
 * Parse a portal written "host[:port]" or "[v6-address][:port]" (the
 * authority of an iSCSI URL without userinfo, RFC 3986 section 3.2.2)
 * into host (ISCSI_URL_HOST_MAX bytes, without brackets) and *port
 * (1..65535, default 3260).  Returns 0, or -EINVAL with a one-line reason
 * in `err` (cap bytes, may be NULL); host and *port are then untouched.
 */
int iscsi_hostport_parse(const char *text, char *host, unsigned *port, char *err, size_t err_cap);

/* Wipe the credentials in `u`, mutual ones included (explicit_bzero). */
void iscsi_url_wipe(struct iscsi_url *u);

/*
 * Is `name` a well-formed iSCSI name (RFC 7143 §4.2.7): "iqn." followed by
 * a date and a naming authority, "eui." and 16 hex digits, or "naa." and
 * 16 or 32 hex digits; at most 223 bytes of letters, digits, '-', '.' and
 * ':' (the prefix in either case).  Returns 0, or -EINVAL with a one-line
 * reason in `err` (cap bytes).
 */
int iscsi_name_check(const char *name, char *err, size_t cap);

#endif
