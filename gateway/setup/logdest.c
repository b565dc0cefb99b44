/* SPDX-License-Identifier: MIT */
/* Where a daemon in the background sends its messages (see startup.h). */
#include "startup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <systemd/sd-journal.h>
#include <time.h>
#include <unistd.h>

#include "initiator/util/log.h"

#define JOURNAL_SOCKET "/run/systemd/journal/socket"
#define SYSLOG_SOCKET "/dev/log"

static enum { DEST_NONE, DEST_FILE, DEST_JOURNAL, DEST_SYSLOG } dest;
static int log_fd = -1;
static char dest_name[4200];

static void file_sink(enum log_level level, const char *line)
{
	static const char *const names[] = {"error", "warning", "info", "debug"};
	char buf[1024], when[40];
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S%z", &tm);
	int n = snprintf(buf, sizeof(buf), "%s iserfuse[%d]: %s: %s\n", when, (int)getpid(), names[level], line);
	if (n > (int)sizeof(buf) - 1) {
		n = (int)sizeof(buf) - 1;
		buf[n - 1] = '\n';
	}
	if (write(log_fd, buf, (size_t)n) < 0) /* O_APPEND: one write per line keeps lines whole */
		return;
}

static void journal_sink(enum log_level level, const char *line)
{
	static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
	sd_journal_send("MESSAGE=iserfuse: %s", line, "PRIORITY=%d", prio[level], "SYSLOG_IDENTIFIER=iserfuse",
			"SYSLOG_FACILITY=%d", LOG_DAEMON >> 3, NULL);
}

int gw_logdest_prepare(const char *where, const char *log_file)
{
	if (log_file) {
		log_fd = open(log_file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
		if (log_fd < 0) {
			fprintf(stderr, "iserfuse: %sbad option 'log_file=%s': %s\n", where, log_file, strerror(errno));
			return -1;
		}
		dest = DEST_FILE;
		snprintf(dest_name, sizeof(dest_name), "messages go to %s", log_file);
	} else if (!access(JOURNAL_SOCKET, W_OK)) {
		dest = DEST_JOURNAL;
		snprintf(dest_name, sizeof(dest_name), "messages go to the systemd journal (journalctl -t iserfuse)");
	} else if (!access(SYSLOG_SOCKET, W_OK)) {
		dest = DEST_SYSLOG;
		snprintf(dest_name, sizeof(dest_name), "messages go to syslog (facility daemon, tag iserfuse)");
	} else {
		dest = DEST_NONE;
		snprintf(dest_name, sizeof(dest_name),
			 "messages are lost: no systemd journal and no syslog here (-o log_file=PATH keeps them)");
	}
	return 0;
}

const char *gw_logdest_name(void)
{
	return dest_name;
}

void gw_logdest_activate(void)
{
	switch (dest) {
	case DEST_FILE:
		log_set_sink(file_sink);
		break;
	case DEST_JOURNAL:
		log_set_sink(journal_sink);
		break;
	case DEST_SYSLOG:
	case DEST_NONE:
		log_use_syslog(true);
		break;
	}
}

void gw_logdest_notice(const char *line)
{
	if (dest == DEST_FILE)
		file_sink(LOG_LVL_INFO, line);
	else if (dest == DEST_JOURNAL)
		journal_sink(LOG_LVL_INFO, line);
	else if (dest == DEST_SYSLOG)
		syslog(LOG_NOTICE, "%s", line);
}
