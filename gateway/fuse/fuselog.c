/* SPDX-License-Identifier: MIT */
/* libfuse's messages through our log (see fuselog.h). */
#include "fuselog.h"

#define FUSE_USE_VERSION 312
#include <fuse_log.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "initiator/util/log.h"

static _Thread_local char *capture;
static _Thread_local size_t capture_cap;
/* libfuse writes some lines in pieces (fuse_log per word): a line is sent once its newline came */
static _Thread_local char pending[1024];
static _Thread_local size_t pending_len;

static void emit(enum fuse_log_level level, const char *line)
{
	if (capture) {
		if (!capture[0])
			snprintf(capture, capture_cap, "%s", line);
		return;
	}
	if (!line[0])
		return;
	enum log_level l = level <= FUSE_LOG_ERR       ? LOG_LVL_ERR
			   : level == FUSE_LOG_WARNING ? LOG_LVL_WARN
			   : level <= FUSE_LOG_INFO    ? LOG_LVL_INFO
						       : LOG_LVL_DEBUG;
	log_msg(l, "%s", line);
}

static void fuse_to_log(enum fuse_log_level level, const char *fmt, va_list ap)
{
	char piece[1024];
	vsnprintf(piece, sizeof(piece), fmt, ap);
	for (const char *p = piece; *p;) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		size_t room = sizeof(pending) - 1 - pending_len;
		memcpy(pending + pending_len, p, n < room ? n : room);
		pending_len += n < room ? n : room;
		pending[pending_len] = '\0';
		if (!nl)
			break;
		while (pending_len > 0 && pending[pending_len - 1] == '\r')
			pending[--pending_len] = '\0';
		emit(level, pending);
		pending_len = 0;
		pending[0] = '\0';
		p = nl + 1;
	}
}

void gw_fuselog_route(void)
{
	fuse_set_log_func(fuse_to_log);
}

void gw_fuselog_capture(char *buf, size_t cap)
{
	if (cap)
		fuse_set_log_func(fuse_to_log); /* also where nothing routed libfuse's log yet */
	capture = cap ? buf : NULL;
	capture_cap = cap;
	if (capture)
		capture[0] = '\0';
	pending_len = 0; /* a line begun outside the trial is not its message (nor the other way round) */
	pending[0] = '\0';
}
