/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>

#include "clock.h"

#define LINE_MAX_LEN 512
#define LIMIT_SLOTS 128 /* (key, kind) pairs followed at once; the oldest window gives way */

static enum log_level max_level = LOG_LVL_WARN;
static bool to_syslog;
static log_sink_fn sink;
static char context[240];

/* The limiter: one slot per (key, kind) seen within its window. */
struct limit_slot {
	const void *key; /* NULL: free */
	const char *kind; /* the format string */
	enum log_level level;
	int64_t start_ms; /* the window began */
	unsigned passed, suppressed;
	char last[LINE_MAX_LEN]; /* the last line suppressed */
};

static _Thread_local const void *thread_key;
static pthread_mutex_t limit_lock = PTHREAD_MUTEX_INITIALIZER;
static struct limit_slot slots[LIMIT_SLOTS];
static int64_t (*now_fn)(void);

void log_set_level(enum log_level level) { max_level = level; }

void log_set_context(const char *ctx)
{
	snprintf(context, sizeof(context), "%s%s", ctx ? ctx : "", ctx && ctx[0] ? ": " : "");
}

void log_set_sink(log_sink_fn fn) { sink = fn; }

void log_use_syslog(bool on)
{
	if (on && !to_syslog)
		openlog("iserfuse", LOG_PID, LOG_DAEMON);
	to_syslog = on;
}

void log_set_thread_key(const void *key) { thread_key = key; }

void log_set_clock(int64_t (*fn)(void)) { now_fn = fn; }

static void emit(enum log_level level, const char *line)
{
	static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
	if (sink) {
		char full[sizeof(context) + LINE_MAX_LEN + 32];
		snprintf(full, sizeof(full), "%s%s", context, line);
		sink(level, full);
	} else if (to_syslog)
		syslog(prio[level], "%s%s", context, line);
	else
		fprintf(stderr, "iserfuse: %s%s\n", context, line);
}

/* The summary of a slot's suppressed lines into out (cap bytes); false when there is none. Lock held. */
static bool summary(struct limit_slot *sl, char *out, size_t cap, enum log_level *level)
{
	if (sl->suppressed == 0)
		return false;
	snprintf(out, cap, "%u more like this, the last: %s", sl->suppressed, sl->last);
	*level = sl->level;
	sl->suppressed = 0;
	return true;
}

/*
 * Take one line of (key, kind) at now: *pass says whether to print it;
 * returns true with a summary in sum when the slot's last window
 * suppressed lines (printed before the line).  Lock held.
 */
static bool limit_admit(const void *key, const char *kind, enum log_level level, const char *line, int64_t now,
			bool *pass, char *sum, size_t cap, enum log_level *sum_level)
{
	struct limit_slot *sl = NULL, *oldest = NULL, *free_slot = NULL;
	bool have_sum = false;

	for (size_t i = 0; i < LIMIT_SLOTS && !sl; i++) {
		struct limit_slot *c = &slots[i];
		if (!c->key) {
			if (!free_slot)
				free_slot = c;
		} else if (c->key == key && (c->kind == kind || strcmp(c->kind, kind) == 0)) {
			sl = c;
		} else if (!oldest || c->start_ms < oldest->start_ms) {
			oldest = c;
		}
	}
	if (sl && now - sl->start_ms >= LOG_LIMIT_WINDOW_MS) {
		have_sum = summary(sl, sum, cap, sum_level);
		sl->start_ms = now;
		sl->passed = 0;
	} else if (!sl) {
		sl = free_slot ? free_slot : oldest;
		if (sl->key)
			have_sum = summary(sl, sum, cap, sum_level); /* evicted: its count is told now */
		memset(sl, 0, sizeof(*sl));
		sl->key = key;
		sl->kind = kind;
		sl->start_ms = now;
	}
	sl->level = level;
	*pass = sl->passed < LOG_LIMIT_BURST;
	if (*pass) {
		sl->passed++;
	} else {
		sl->suppressed++;
		snprintf(sl->last, sizeof(sl->last), "%s", line);
	}
	return have_sum;
}

static int64_t now_ms(void)
{
	return now_fn ? now_fn() : clk_now_ms();
}

/* Print the summaries of key's slots (every slot when key is NULL) whose window ended, or all when `all`; free them. */
static void flush(const void *key, bool all)
{
	for (;;) {
		char sum[LINE_MAX_LEN + 64];
		enum log_level level = LOG_LVL_ERR;
		bool have = false;
		int64_t now = now_ms();

		pthread_mutex_lock(&limit_lock);
		for (size_t i = 0; i < LIMIT_SLOTS && !have; i++) {
			struct limit_slot *sl = &slots[i];
			if (!sl->key || (key && sl->key != key) || (!all && now - sl->start_ms < LOG_LIMIT_WINDOW_MS))
				continue;
			have = summary(sl, sum, sizeof(sum), &level);
			sl->key = NULL;
		}
		pthread_mutex_unlock(&limit_lock);
		if (!have)
			return;
		emit(level, sum);
	}
}

void log_flush_key(const void *key) { flush(key, false); }

void log_forget_key(const void *key) { flush(key, true); }

void log_msg(enum log_level level, const char *fmt, ...)
{
	char line[LINE_MAX_LEN];
	va_list ap;
	if (level > max_level)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	const void *key = thread_key;
	if (key) {
		char sum[LINE_MAX_LEN + 64];
		enum log_level sum_level = LOG_LVL_ERR;
		bool pass = true;
		int64_t now = now_ms();

		pthread_mutex_lock(&limit_lock);
		bool have_sum = limit_admit(key, fmt, level, line, now, &pass, sum, sizeof(sum), &sum_level);
		pthread_mutex_unlock(&limit_lock);
		if (have_sum)
			emit(sum_level, sum);
		if (!pass)
			return;
	}
	emit(level, line);
}
