/* SPDX-License-Identifier: MIT */
/*
 * One-line diagnostics.  Messages go to stderr (or to syslog once the
 * gateway has detached, see log_use_syslog).  Never log a secret.
 */
#ifndef ISERFUSE_LOG_H
#define ISERFUSE_LOG_H

#include <stdbool.h>

enum log_level { LOG_LVL_ERR = 0, LOG_LVL_WARN = 1, LOG_LVL_INFO = 2, LOG_LVL_DEBUG = 3 };

/* Messages above `level` are dropped; default LOG_LVL_WARN. */
void log_set_level(enum log_level level);
/*
 * A place for messages other than stderr and syslog (the daemon's journal
 * or log file): fn gets each line that passes the level, context included,
 * without "iserfuse: " and newline; it must be thread-safe.  NULL: back to
 * stderr (or syslog).  Call before other threads log.
 */
typedef void (*log_sink_fn)(enum log_level level, const char *line);
void log_set_sink(log_sink_fn fn);
/* Send messages to syslog(3) instead of stderr (after daemonizing). */
void log_use_syslog(bool on);
/*
 * Name every following line after ctx (the target name; NULL or "" for
 * none): "iserfuse: CTX: message".  Call before other threads log.
 */
void log_set_context(const char *ctx);
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_err(...) log_msg(LOG_LVL_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

#endif
