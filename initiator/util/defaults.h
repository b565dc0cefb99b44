/* SPDX-License-Identifier: MIT */
/*
 * The initiator's defaults and limits, each written once: the session,
 * the multipath set and the iSER context apply them, the daemon's option
 * table (gateway/settings/options.c) offers and shows them (-o, --help),
 * block I/O starts from them.  Each is a bare decimal literal, so the
 * option table can print it as --help's "(default N)".
 */
#ifndef ISERFUSE_DEFAULTS_H
#define ISERFUSE_DEFAULTS_H

/* Task slots of a session (or iSER context) whose config gives 0 (-o queue_depth). */
#define ISCSI_QUEUE_DEPTH_DEFAULT 128
/* Most task slots: a session clamps to it, a multipath set refuses more (-o queue_depth's top). */
#define ISCSI_QUEUE_DEPTH_MAX 4096

/*
 * The connect and login timeout when none is given, in seconds
 * (-o login_timeout=, --list): the whole of iscsi_connect_login
 * (RFC 7143 §6) must be over within it.
 */
#define ISCSI_LOGIN_TIMEOUT_DEFAULT_S 15

/*
 * A command unanswered this long, in seconds, gets ABORT TASK (RFC 7143
 * §11.5.1) (-o cmd_timeout=); block I/O's retry budget until one is set.
 */
#define ISCSI_CMD_TIMEOUT_DEFAULT_S 30

/* Keep-alive (RFC 7143 §11.18), in seconds: a NOP-Out after this long idle (-o noop_interval=). */
#define ISCSI_NOOP_INTERVAL_DEFAULT_S 5
/* ... and no answer this long after it drops the connection (-o noop_timeout=; a session given none). */
#define ISCSI_NOOP_TIMEOUT_DEFAULT_S 5

/* After a connection loss, commands still pending this long, in seconds, fail (-o replacement_timeout=). */
#define ISCSI_REPLACEMENT_TIMEOUT_DEFAULT_S 120

/* The well-known iSCSI TCP port (RFC 7143 §13.8): a URL or a SendTargets address that names none. */
#define ISCSI_PORT_DEFAULT 3260u

#endif
