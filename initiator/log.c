/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>

static enum log_level max_level = LOG_LVL_WARN;
static bool to_syslog;
static log_sink_fn sink;
static char context[240];

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

void log_msg(enum log_level level, const char *fmt, ...)
{
	static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
	char line[512];
	va_list ap;
	if (level > max_level)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (sink) {
		char full[sizeof(context) + sizeof(line)];
		snprintf(full, sizeof(full), "%s%s", context, line);
		sink(level, full);
	} else if (to_syslog)
		syslog(prio[level], "%s%s", context, line);
	else
		fprintf(stderr, "iserfuse: %s%s\n", context, line);
}
