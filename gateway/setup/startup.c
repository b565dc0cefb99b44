/* SPDX-License-Identifier: MIT */
/* Start-up checks and the mount's source name (see startup.h). */
#define FUSE_USE_VERSION 312
#include "startup.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#define FUSE_DEFAULT_MAX_PAGES 256u /* the kernel's FUSE_MAX_MAX_PAGES before max_pages_limit */

/* /proc/self/mountinfo escapes blanks, tabs, newlines and backslashes as \ooo. */
static void unescape_octal(char *s)
{
	char *w = s;
	for (const char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' &&
		    r[3] <= '7') {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

/* The source of a fuse.iserfuse mount on `path` (a real path) into src; false if there is none. */
static bool iserfuse_mounted_on(const char *path, char *src, size_t cap)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char *line = NULL;
	size_t n = 0;
	bool found = false;
	if (!f)
		return false;
	while (!found && getline(&line, &n, f) > 0) {
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER */
		char *save = NULL, *mp = NULL;
		int i = 0;
		for (char *tok = strtok_r(line, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save), i++) {
			if (i == 4)
				mp = tok;
			if (strcmp(tok, "-") != 0)
				continue;
			char *type = strtok_r(NULL, " \n", &save);
			char *source = strtok_r(NULL, " \n", &save);
			if (mp && type && !strcmp(type, "fuse.iserfuse")) {
				unescape_octal(mp);
				if (!strcmp(mp, path)) {
					snprintf(src, cap, "%s", source ? source : "?");
					unescape_octal(src);
					found = true;
				}
			}
			break;
		}
	}
	free(line);
	fclose(f);
	return found;
}

/* One line for stat's or access's errno; a stale FUSE mount gets the way out. */
static void mountpoint_error(const char *where, const char *mnt, int e)
{
	if (e == ENOTCONN || e == ECONNABORTED)
		fprintf(stderr, "iserfuse: %smount point %s: %s (a FUSE mount whose daemon is gone: clear it with "
			"fusermount3 -u %s)\n", where, mnt, strerror(e), mnt);
	else
		fprintf(stderr, "iserfuse: %smount point %s: %s\n", where, mnt, strerror(e));
}

int gw_mountpoint_check(const char *where, const char *mnt)
{
	struct stat st;
	if (stat(mnt, &st)) {
		mountpoint_error(where, mnt, errno);
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "iserfuse: %smount point %s is not a directory\n", where, mnt);
		return -1;
	}
	struct statfs sfs;
	/*
	 * A stale mount's cached attributes can pass stat and access: statfs
	 * always asks the daemon.  Where the dead daemon served over io_uring,
	 * a request queued while its rings are torn down fails ECONNABORTED;
	 * the next one gets the connection's ENOTCONN.
	 */
	int frc = statfs(mnt, &sfs);
	if (frc && errno == ECONNABORTED)
		frc = statfs(mnt, &sfs);
	if (frc || access(mnt, X_OK)) {
		mountpoint_error(where, mnt, errno);
		return -1;
	}
	char real[PATH_MAX], src[512];
	if (realpath(mnt, real) && strcmp(real, "/") == 0) {
		/* a mount on the root is out of this process's sight (the live check could never see it) and hides the system */
		fprintf(stderr, "iserfuse: %smount point %s is the root directory: choose an empty directory\n", where, mnt);
		return -1;
	}
	if (realpath(mnt, real) && iserfuse_mounted_on(real, src, sizeof(src))) {
		fprintf(stderr, "iserfuse: %s%s already holds an iserfuse mount (%s): unmount it first (fusermount3 -u %s)\n",
			where, mnt, src, mnt);
		return -1;
	}
	return 0;
}

size_t gw_fuse_max_io(void)
{
	unsigned pages = FUSE_DEFAULT_MAX_PAGES;
	FILE *f = fopen("/proc/sys/fs/fuse/max_pages_limit", "r");
	if (f) {
		unsigned v;
		if (fscanf(f, "%u", &v) == 1 && v > 0)
			pages = v;
		fclose(f);
	}
	if (fuse_version() < 317 && pages > FUSE_DEFAULT_MAX_PAGES)
		pages = FUSE_DEFAULT_MAX_PAGES; /* older libfuse reads /dev/fuse into 256 pages */
	long ps = sysconf(_SC_PAGESIZE);
	return (size_t)pages * (size_t)(ps > 0 ? ps : 4096);
}

void gw_fsname_opt(const struct iscsi_url *u, char *out, size_t cap)
{
	char raw[ISCSI_URL_HOST_MAX + ISCSI_NAME_MAX + 64], lun[16] = "";
	bool v6 = strchr(u->host, ':') != NULL;
	if (u->lun >= 0)
		snprintf(lun, sizeof(lun), "/%d", u->lun);
	snprintf(raw, sizeof(raw), "iscsi://%s%s%s:%u/%s%s", v6 ? "[" : "", u->host, v6 ? "]" : "", u->port,
		 u->target, lun);
	size_t w = (size_t)snprintf(out, cap, "fsname=");
	for (const char *r = raw; *r && w + 3 < cap; r++) {
		if (*r == ',' || *r == '\\')
			out[w++] = '\\';
		out[w++] = *r;
	}
	if (w < cap)
		out[w] = '\0';
}
