/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gateway/gateway.h"
#include "initiator/util/log.h"

#define NAME_PREFIX "iqn.2026-11.org.iserfuse:"

static int mkdir_p(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0755) && errno != EEXIST) {
			*p = '/';
			return -errno;
		}
		*p = '/';
	}
	if (mkdir(path, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

static void make_name(char *out, size_t cap)
{
	uint8_t r[6] = {0};
	char host[64] = "host";
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		memset(r, 0x5a, sizeof(r));
	gethostname(host, sizeof(host) - 1);
	for (char *p = host; *p; p++) /* iSCSI names: lowercase, no odd characters */
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p - 'A' + 'a');
		else if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.'))
			*p = '-';
	snprintf(out, cap, NAME_PREFIX "%s-%02x%02x%02x%02x%02x%02x", host, r[0], r[1], r[2], r[3], r[4], r[5]);
}

int gw_default_initiator_name(char *out, size_t cap)
{
	char dir[4096], path[4200];
	const char *env = getenv("STATE_DIRECTORY");
	if (env && *env)
		snprintf(dir, sizeof(dir), "%s", env);
	else if (geteuid() == 0)
		snprintf(dir, sizeof(dir), "/var/lib/iserfuse");
	else if ((env = getenv("XDG_STATE_HOME")) && *env)
		snprintf(dir, sizeof(dir), "%s/iserfuse", env);
	else if ((env = getenv("HOME")) && *env)
		snprintf(dir, sizeof(dir), "%s/.local/state/iserfuse", env);
	else {
		make_name(out, cap);
		return -ENOENT;
	}
	snprintf(path, sizeof(path), "%s/initiatorname", dir);
	FILE *f = fopen(path, "r");
	if (f) {
		char line[300];
		if (fgets(line, sizeof(line), f)) {
			line[strcspn(line, "\r\n")] = '\0';
			if (strncmp(line, "InitiatorName=", 14) == 0 && line[14]) {
				snprintf(out, cap, "%s", line + 14);
				fclose(f);
				return 0;
			}
		}
		fclose(f);
	}
	make_name(out, cap);
	int rc = mkdir_p(dir);
	if (rc)
		return rc;
	char tmp[4300];
	snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	dprintf(fd, "InitiatorName=%s\n", out);
	close(fd);
	if (rename(tmp, path)) {
		unlink(tmp);
		return -errno;
	}
	return 0;
}

void gw_initiator_name_or_warn(char *out, size_t cap)
{
	int rc = gw_default_initiator_name(out, cap);
	if (rc)
		log_warn("cannot keep the generated initiator name in a state directory ($STATE_DIRECTORY, "
			 "$XDG_STATE_HOME or $HOME: %s); using %s this time and another at the next start: "
			 "-o initiator_name= gives a name a target's ACL can allow",
			 strerror(-rc), out);
}
