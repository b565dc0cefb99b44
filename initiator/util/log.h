/* SPDX-License-Identifier: MIT */
/*
 * One-line diagnostics.  Messages go to stderr (or to syslog once the
 * gateway has detached, see log_use_syslog).  Never log a secret.
 */
#ifndef ISERFUSE_LOG_H
#define ISERFUSE_LOG_H

#include <stdbool.h>
#include <stdint.h>

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

/*
 * Repeated lines are limited per key, a thing whose lines are counted
 * together (a session), and kind (the format string): of the lines a key's
 * threads log with one format, the first LOG_LIMIT_BURST of a
 * LOG_LIMIT_WINDOW_MS window are printed, the others counted.  The next
 * line of that kind after the window, or log_flush_key, prints the count
 * once as "N more like this, the last: LAST" (LAST the last one dropped,
 * at its level).  A target that floods the daemon with bogus PDUs thus
 * costs at most LOG_LIMIT_BURST + 1 lines per kind and second.
 */
#define LOG_LIMIT_BURST 5u
#define LOG_LIMIT_WINDOW_MS 1000
/*
 * The key of the lines the calling thread logs from now on (an event
 * thread: its session), NULL (the default) for none: lines without a key
 * are never limited.  Thread-local; cheap enough for every PDU.
 */
void log_set_thread_key(const void *key);
/* Print the counts of key's kinds whose window ended (the session's tick, about once a second). */
void log_flush_key(const void *key);
/* Print every count key has and forget key (before what it names is freed). */
void log_forget_key(const void *key);
/* The limiter's clock for tests (CLOCK_MONOTONIC ms; NULL: clk_now_ms).  Call before other threads log. */
void log_set_clock(int64_t (*fn)(void));

void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_err(...) log_msg(LOG_LVL_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

#endif
