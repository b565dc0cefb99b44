/* SPDX-License-Identifier: MIT */
/*
 * CHAP credentials: URL > secret file > environment, field by field.
 * Every buffer that held a secret is wiped before it is freed or goes out
 * of scope; messages name files, line numbers and keys, never values.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* explicit_bzero */
#endif
#include "credentials.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define SECRET_FILE_MAX 65536 /* bytes */

enum { F_USER, F_SECRET, F_MUTUAL_USER, F_MUTUAL_SECRET, F_COUNT };

static const char *const file_keys[F_COUNT] = {"username", "password", "mutual_username", "mutual_password"};
static const char *const env_keys[F_COUNT] = {"ISERFUSE_CHAP_USERNAME", "ISERFUSE_CHAP_PASSWORD",
					      "ISERFUSE_CHAP_MUTUAL_USERNAME", "ISERFUSE_CHAP_MUTUAL_PASSWORD"};

static char *field(struct iscsi_chap_creds *c, int f)
{
	switch (f) {
	case F_USER:
		return c->user;
	case F_SECRET:
		return c->secret;
	case F_MUTUAL_USER:
		return c->mutual_user;
	default:
		return c->mutual_secret;
	}
}

void gw_creds_to_session(struct iscsi_chap_creds *c, struct iscsi_session_config *sc)
{
	sc->chap = *c;
	iscsi_chap_creds_wipe(c);
}

static bool blank(char ch)
{
	return ch == ' ' || ch == '\t';
}

/* One "key = value" line (NUL-terminated, no newline) of the secret file. */
static int file_line(const char *where, const char *path, unsigned lineno, char *line, struct iscsi_chap_creds *from_file, bool seen[F_COUNT])
{
	char *p = line;
	while (blank(*p))
		p++;
	if (*p == '\0' || *p == '#')
		return 0;
	char *eq = strchr(p, '=');
	if (eq == NULL) {
		fprintf(stderr, "iserfuse: %ssecret_file %s line %u: expected 'key = value'\n", where, path, lineno);
		return -1;
	}
	char *kend = eq;
	while (kend > p && blank(kend[-1]))
		kend--;
	*kend = '\0';
	char *v = eq + 1;
	while (blank(*v))
		v++;
	size_t vlen = strlen(v);
	while (vlen > 0 && blank(v[vlen - 1]))
		vlen--;
	v[vlen] = '\0';

	int f;
	for (f = 0; f < F_COUNT; f++)
		if (strcmp(p, file_keys[f]) == 0)
			break;
	if (f == F_COUNT) {
		char key[41];
		size_t n = 0;
		for (const char *k = p; *k && n < sizeof(key) - 1; k++)
			key[n++] = (*k > 0x20 && *k < 0x7f) ? *k : '?';
		key[n] = '\0';
		fprintf(stderr,
			"iserfuse: %ssecret_file %s line %u: unknown key '%s' (username, password, mutual_username or "
			"mutual_password expected)\n",
			where, path, lineno, key);
		return -1;
	}
	if (seen[f]) {
		fprintf(stderr, "iserfuse: %ssecret_file %s line %u: %s given twice\n", where, path, lineno, file_keys[f]);
		return -1;
	}
	if (vlen == 0) {
		fprintf(stderr, "iserfuse: %ssecret_file %s line %u: empty %s\n", where, path, lineno, file_keys[f]);
		return -1;
	}
	if (vlen >= ISCSI_CRED_MAX) {
		fprintf(stderr, "iserfuse: %ssecret_file %s line %u: %s too long (at most %d bytes)\n", where, path, lineno,
			file_keys[f], ISCSI_CRED_MAX - 1);
		return -1;
	}
	seen[f] = true;
	memcpy(field(from_file, f), v, vlen + 1);
	return 0;
}

/* Read and check the secret file into from_file.  Returns 0 or -1 (printed). */
static int read_secret_file(const char *where, const char *path, struct iscsi_chap_creds *from_file)
{
	bool seen[F_COUNT] = {false};
	char *buf = NULL;
	size_t len = 0;
	int rc = -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		fprintf(stderr, "iserfuse: %ssecret_file %s: %s\n", where, path, strerror(errno));
		return -1;
	}
	struct stat st;
	if (fstat(fd, &st)) {
		fprintf(stderr, "iserfuse: %ssecret_file %s: %s\n", where, path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		fprintf(stderr, "iserfuse: %ssecret_file %s: not a regular file\n", where, path);
		goto out;
	}
	if (st.st_uid != getuid()) {
		fprintf(stderr, "iserfuse: %ssecret_file %s: owned by uid %u, not by you (uid %u)\n", where, path,
			(unsigned)st.st_uid, (unsigned)getuid());
		goto out;
	}
	if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		fprintf(stderr, "iserfuse: %ssecret_file %s: mode %04o lets group or other users in; chmod 600 it\n",
			where, path, (unsigned)(st.st_mode & 07777));
		goto out;
	}
	if (st.st_size > SECRET_FILE_MAX) {
		fprintf(stderr, "iserfuse: %ssecret_file %s: larger than %d bytes\n", where, path, SECRET_FILE_MAX);
		goto out;
	}
	buf = calloc(1, SECRET_FILE_MAX + 2);
	if (!buf) {
		fprintf(stderr, "iserfuse: out of memory\n");
		goto out;
	}
	for (;;) {
		ssize_t r = read(fd, buf + len, SECRET_FILE_MAX + 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			fprintf(stderr, "iserfuse: %ssecret_file %s: %s\n", where, path, strerror(errno));
			goto out;
		}
		if (r == 0)
			break;
		len += (size_t)r;
		if (len > SECRET_FILE_MAX) {
			fprintf(stderr, "iserfuse: %ssecret_file %s: larger than %d bytes\n", where, path, SECRET_FILE_MAX);
			goto out;
		}
	}
	if (memchr(buf, '\0', len) != NULL) {
		fprintf(stderr, "iserfuse: %ssecret_file %s: contains a NUL byte\n", where, path);
		goto out;
	}
	unsigned lineno = 0;
	for (char *line = buf; line < buf + len;) {
		char *nl = memchr(line, '\n', (size_t)(buf + len - line));
		char *next = nl ? nl + 1 : buf + len;
		if (nl)
			*nl = '\0';
		size_t n = strlen(line);
		if (n > 0 && line[n - 1] == '\r')
			line[n - 1] = '\0';
		if (file_line(where, path, ++lineno, line, from_file, seen))
			goto out;
		line = next;
	}
	rc = 0;
out:
	if (buf) {
		explicit_bzero(buf, SECRET_FILE_MAX + 2);
		free(buf);
	}
	close(fd);
	if (rc)
		iscsi_chap_creds_wipe(from_file);
	return rc;
}

/* Our side and the target's side: a name needs a secret and the other way round. */
static int check(const struct iscsi_chap_creds *c)
{
	static const char hint[] = "user%password@ in the URL, -o secret_file= or ISERFUSE_CHAP_PASSWORD";
	if (c->user[0] && !c->secret[0]) {
		fprintf(stderr, "iserfuse: CHAP user name given without a password (%s)\n", hint);
		return -1;
	}
	if (!c->user[0] && c->secret[0]) {
		fprintf(stderr, "iserfuse: CHAP password given without a user name\n");
		return -1;
	}
	if (c->mutual_user[0] != '\0' && !c->mutual_secret[0]) {
		fprintf(stderr, "iserfuse: mutual CHAP: the target's user name is given without its password\n");
		return -1;
	}
	if (!c->mutual_user[0] && c->mutual_secret[0]) {
		fprintf(stderr, "iserfuse: mutual CHAP: the target's password is given without its user name\n");
		return -1;
	}
	if (c->mutual_user[0] && !c->user[0]) {
		fprintf(stderr, "iserfuse: mutual CHAP needs the initiator's own CHAP user name and password too\n");
		return -1;
	}
	if (c->mutual_secret[0] && strcmp(c->secret, c->mutual_secret) == 0) {
		fprintf(stderr, "iserfuse: the target's CHAP password must differ from the initiator's "
				"(RFC 7143 §12.1.3)\n");
		return -1;
	}
	return 0;
}

int gw_creds_load(struct iscsi_chap_creds *c, const struct iscsi_url *url, const char *secret_file, const char *where)
{
	struct iscsi_chap_creds from_file = {0};
	int rc = -1;

	iscsi_chap_creds_wipe(c);
	if (url->password[0] || url->target_password[0])
		fprintf(stderr, "iserfuse: warning: a password in the URL is visible to other users of this machine "
				"(ps, /proc); prefer -o secret_file= or ISERFUSE_CHAP_PASSWORD\n");
	/* 1. the URL */
	memcpy(c->user, url->user, sizeof(c->user));
	memcpy(c->secret, url->password, sizeof(c->secret));
	memcpy(c->mutual_user, url->target_user, sizeof(c->mutual_user));
	memcpy(c->mutual_secret, url->target_password, sizeof(c->mutual_secret));
	/* 2. the secret file */
	if (secret_file != NULL && read_secret_file(where ? where : "", secret_file, &from_file))
		goto out;
	for (int f = 0; f < F_COUNT; f++)
		if (!field(c, f)[0])
			memcpy(field(c, f), field(&from_file, f), ISCSI_CRED_MAX);
	/* 3. the environment, then out of it */
	for (int f = 0; f < F_COUNT; f++) {
		const char *v = getenv(env_keys[f]);
		if (v != NULL && v[0] && !field(c, f)[0]) {
			if (strlen(v) >= ISCSI_CRED_MAX) {
				fprintf(stderr, "iserfuse: %s too long (at most %d bytes)\n", env_keys[f],
					ISCSI_CRED_MAX - 1);
				goto out;
			}
			snprintf(field(c, f), ISCSI_CRED_MAX, "%s", v);
		}
	}
	rc = check(c);
out:
	for (int f = 0; f < F_COUNT; f++)
		unsetenv(env_keys[f]);
	iscsi_chap_creds_wipe(&from_file);
	if (rc)
		iscsi_chap_creds_wipe(c);
	return rc;
}

/* Overwrite s[0..n) with 'x'. */
static void cross_out(char *s, size_t n)
{
	memset(s, 'x', n);
}

void gw_creds_scrub_argv(int argc, char **argv)
{
	static const char scheme[] = "iscsi://";
	static const char tp[] = "target_password=";

	for (int i = 1; i < argc; i++) {
		char *a = argv[i];
		if (a == NULL || strncasecmp(a, scheme, sizeof(scheme) - 1) != 0)
			continue;
		char *auth = a + sizeof(scheme) - 1;
		size_t alen = strcspn(auth, "/?");
		/* userinfo: up to the last '@' of the authority; the password after its first '%' (or ':') */
		char *at = NULL;
		for (size_t k = alen; k > 0; k--) {
			if (auth[k - 1] == '@') {
				at = auth + k - 1;
				break;
			}
		}
		if (at != NULL) {
			size_t ulen = (size_t)(at - auth);
			char *sep = memchr(auth, '%', ulen);
			if (sep == NULL)
				sep = memchr(auth, ':', ulen);
			if (sep != NULL)
				cross_out(sep + 1, (size_t)(at - sep - 1));
		}
		/* query: every target_password=value */
		char *q = strchr(auth + alen, '?');
		for (char *p = q; p != NULL && (p = strstr(p, tp)) != NULL;) {
			if (p[-1] != '?' && p[-1] != '&') {
				p += sizeof(tp) - 1;
				continue;
			}
			p += sizeof(tp) - 1;
			size_t vlen = strcspn(p, "&");
			cross_out(p, vlen);
			p += vlen;
		}
	}
}
