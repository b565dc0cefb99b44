/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for URL parsing (initiator/net/url.c).
 *
 * Input: the URL text (it ends at the first NUL byte).  It is parsed with
 * need_target true and false, into error buffers of several sizes.  Checks:
 * every output string and the error are NUL-terminated within their
 * buffers; a success leaves the error empty and fields in range; a failure
 * leaves the output wiped; and the error never depends on a secret (the
 * password of the userinfo, the value of target_password): the same URL
 * with the letters and digits of its secrets rotated (escapes kept, so a
 * secret stays just as valid) must give the same result and the same
 * message.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "initiator/net/url.h"

#define CHECK(cond)                                                                   \
	do {                                                                              \
		if (!(cond))                                                              \
			__builtin_trap();                                                 \
	} while (0)

static void nul_within(const char *s, size_t cap)
{
	CHECK(memchr(s, '\0', cap) != NULL);
}

static bool is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

#define MAX_SECRETS 8

struct secret {
	size_t start, len;
};

/*
 * Where url.c finds secrets.  The authority runs from "://" to the first
 * '/' or '?', the userinfo ends at the authority's last '@', and the
 * password follows the userinfo's first '%' (or first ':' when there is no
 * '%').  The query starts at the first '?' after the authority; its items
 * are split at '&', and the value of a target_password item follows its
 * first '='.  Fills sec[] (non-empty secrets only) and returns how many;
 * *userinfo tells whether the first one is the userinfo password.
 */
static size_t find_secrets(const char *text, struct secret sec[MAX_SECRETS], bool *userinfo)
{
	static const char tp[] = "target_password=";
	const char *sep = strstr(text, "://");
	size_t n = 0;

	*userinfo = false;
	if (sep == NULL || (size_t)(sep - text) != 5)
		return 0;
	const char *auth = sep + 3;
	size_t alen = strcspn(auth, "/?");
	const char *at = NULL;
	for (size_t i = alen; i > 0; i--)
		if (auth[i - 1] == '@') {
			at = auth + i - 1;
			break;
		}
	if (at != NULL) {
		size_t ulen = (size_t)(at - auth);
		const char *p = memchr(auth, '%', ulen);
		if (p == NULL)
			p = memchr(auth, ':', ulen);
		if (p != NULL && p + 1 < at) {
			sec[n].start = (size_t)(p + 1 - text);
			sec[n].len = (size_t)(at - p - 1);
			n++;
			*userinfo = true;
		}
	}
	const char *q = strchr(auth + alen, '?');
	if (q == NULL)
		return n;
	for (const char *item = q + 1; *item && n < MAX_SECRETS;) {
		size_t ilen = strcspn(item, "&");
		if (ilen > sizeof(tp) - 1 && strncmp(item, tp, sizeof(tp) - 1) == 0) {
			sec[n].start = (size_t)(item + sizeof(tp) - 1 - text);
			sec[n].len = ilen - (sizeof(tp) - 1);
			n++;
		}
		item += ilen;
		if (*item == '&')
			item++;
	}
	return n;
}

/* Rotate letters and digits of the password; returns false if nothing changed. */
static bool rotate_password(char *text, size_t start, size_t len)
{
	bool changed = false;

	for (size_t i = start; i < start + len; i++) {
		char c = text[i];
		if (c == '%') {
			/* a valid escape is kept whole; after a bad one decoding stops */
			if (i + 2 < start + len && is_hex(text[i + 1]) && is_hex(text[i + 2])) {
				i += 2;
				continue;
			}
			break;
		}
		if (c >= 'a' && c <= 'z')
			text[i] = (char)('a' + (c - 'a' + 13) % 26);
		else if (c >= 'A' && c <= 'Z')
			text[i] = (char)('A' + (c - 'A' + 13) % 26);
		else if (c >= '0' && c <= '9')
			text[i] = (char)('0' + (c - '0' + 5) % 10);
		else
			continue;
		changed = true;
	}
	return changed;
}

static int parse(const char *text, bool need_target, size_t err_cap, struct iscsi_url *u, char *err_copy)
{
	char *err = malloc(err_cap ? err_cap : 1);

	CHECK(err != NULL);
	memset(err, 'x', err_cap ? err_cap : 1);
	int rc = iscsi_url_parse(text, need_target, u, err_cap ? err : NULL, err_cap);
	CHECK(rc == 0 || rc == -EINVAL);

	nul_within(u->host, sizeof(u->host));
	nul_within(u->target, sizeof(u->target));
	nul_within(u->user, sizeof(u->user));
	nul_within(u->password, sizeof(u->password));
	nul_within(u->target_user, sizeof(u->target_user));
	nul_within(u->target_password, sizeof(u->target_password));
	nul_within(u->header_digest, sizeof(u->header_digest));
	nul_within(u->data_digest, sizeof(u->data_digest));
	if (err_cap) {
		nul_within(err, err_cap);
		if (rc == 0)
			CHECK(err[0] == '\0');
		else
			CHECK(err_cap == 1 || err[0] != '\0');
	}
	if (rc == 0) {
		CHECK(u->host[0] != '\0');
		CHECK(u->port >= 1 && u->port <= 65535);
		CHECK(u->lun >= -1 && u->lun <= 16383);
		if (need_target)
			CHECK(u->target[0] != '\0');
		if (u->lun >= 0)
			CHECK(u->target[0] != '\0');
		if (u->password[0] != '\0')
			CHECK(u->user[0] != '\0');
	} else {
		/* nothing of a refused URL, credentials included, is left behind */
		static const struct iscsi_url zero = { .lun = -1 };
		CHECK(memcmp(u, &zero, sizeof(*u)) == 0);
	}
	if (err_copy != NULL) {
		if (err_cap)
			strcpy(err_copy, err);
		else
			err_copy[0] = '\0';
	}
	free(err);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct iscsi_url u, v;
	static const size_t caps[] = { 0, 1, 12, 256 };
	char msg[256], msg2[256];

	if (size > 4096)
		return 0;
	char *text = malloc(size + 1);
	CHECK(text != NULL);
	memcpy(text, data, size);
	text[size] = '\0';

	struct secret sec[MAX_SECRETS];
	bool has_pw;
	size_t nsec = find_secrets(text, sec, &has_pw);
	bool rotated[MAX_SECRETS] = { false };
	char *rot = NULL;
	if (nsec > 0) {
		bool any = false;
		rot = strdup(text);
		CHECK(rot != NULL);
		for (size_t i = 0; i < nsec; i++)
			any |= rotated[i] = rotate_password(rot, sec[i].start, sec[i].len);
		if (!any) {
			free(rot);
			rot = NULL;
		}
	}

	for (int nt = 0; nt < 2; nt++) {
		int rc = 0;
		for (size_t c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
			int r = parse(text, nt, caps[c], &u, caps[c] == 256 ? msg : NULL);
			if (c > 0)
				CHECK(r == rc);
			rc = r;
		}
		if (rc == 0 && has_pw)
			CHECK(u.password[0] != '\0');
		if (rot != NULL) {
			int r2 = parse(rot, nt, 256, &v, msg2);
			CHECK(r2 == rc);
			CHECK(strcmp(msg, msg2) == 0);
			if (rc == 0) {
				CHECK(strcmp(u.host, v.host) == 0 && strcmp(u.target, v.target) == 0);
				CHECK(u.port == v.port && u.lun == v.lun && strcmp(u.user, v.user) == 0);
				CHECK(strcmp(u.target_user, v.target_user) == 0);
			}
		}
		/* a secret with nothing to rotate: at least it is not quoted
		 * (8 bytes or more, so that it cannot match a fixed message) */
		for (size_t i = 0; i < nsec && rc != 0; i++) {
			if (rotated[i] || sec[i].len < 8)
				continue;
			char *pw = strndup(text + sec[i].start, sec[i].len);
			CHECK(pw != NULL);
			CHECK(strstr(msg, pw) == NULL);
			free(pw);
		}
		iscsi_url_wipe(&u);
		CHECK(u.user[0] == '\0' && u.password[0] == '\0');
		CHECK(u.target_user[0] == '\0' && u.target_password[0] == '\0');
	}
	free(rot);
	free(text);
	return 0;
}
