/* SPDX-License-Identifier: MIT */
/*
 * iSCSI URL parsing:
 *   iscsi://[user[%password]@]host[:port]/target-iqn[/lun][?key[=value]&...]
 *
 * Layout rules (RFC 3986 split, libiscsi field syntax):
 *  - the authority runs from "iscsi://" to the first '/' or '?'; the
 *    userinfo ends at its last '@', so a '/' or '?' inside a password must
 *    be written %2F / %3F;
 *  - the userinfo splits at its first '%' (libiscsi), or at its first ':'
 *    when it has no '%' (libiscsi accepts both); the user name therefore
 *    cannot contain '%', the password may use %XX escapes;
 *  - the path is target[/lun]; a trailing '/' without digits means "no LUN";
 *  - the query starts at the first '?' after the authority.
 * Error messages quote pieces of the URL only when it has no '@' and does
 * not mention a password, so a secret never ends up in a message.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* explicit_bzero */
#endif
#include "url.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "initiator/util/defaults.h"
#include "initiator/util/hex.h"

#define ISCSI_URL_LUN_MAX 16383u
#define ISCSI_URL_QUOTE_MAX 48 /* longest piece of input quoted in a message */

struct span {
	const char *p;
	size_t n;
};

struct ctx {
	char *err;
	size_t cap;
	bool quote_ok; /* pieces of the input may be quoted in err */
};

__attribute__((format(printf, 2, 3))) static int fail(struct ctx *c, const char *fmt, ...)
{
	if (c->err != NULL && c->cap > 0) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(c->err, c->cap, fmt, ap);
		va_end(ap);
		if (n < 0)
			c->err[0] = '\0';
	}
	return -EINVAL;
}

/* Fail with "<what> '<piece>'", or just "<what>" when quoting is unsafe. */
static int fail_quoted(struct ctx *c, const char *what, struct span s)
{
	char q[ISCSI_URL_QUOTE_MAX + 4];
	size_t n = s.n < ISCSI_URL_QUOTE_MAX ? s.n : ISCSI_URL_QUOTE_MAX;

	if (!c->quote_ok)
		return fail(c, "%s", what);
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s.p[i];
		q[i] = (ch > 0x20 && ch < 0x7f) ? (char)ch : '?';
	}
	if (n < s.n) {
		memcpy(q + n, "...", 3);
		n += 3;
	}
	q[n] = '\0';
	return fail(c, "%s '%s'", what, q);
}

static bool span_eq(struct span s, const char *lit)
{
	size_t n = strlen(lit);
	return s.n == n && memcmp(s.p, lit, n) == 0;
}

static const char *span_find(struct span s, char ch)
{
	return s.n ? memchr(s.p, ch, s.n) : NULL;
}

static const char *span_rfind(struct span s, char ch)
{
	for (size_t i = s.n; i > 0; i--)
		if (s.p[i - 1] == ch)
			return s.p + i - 1;
	return NULL;
}

static bool is_digit(unsigned char ch)
{
	return ch >= '0' && ch <= '9';
}

static bool is_alnum(unsigned char ch)
{
	return is_digit(ch) || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}

/* Decimal digits only, at least one; saturates instead of overflowing. */
static bool parse_dec(struct span s, uint32_t *out)
{
	uint32_t v = 0;

	if (s.n == 0)
		return false;
	for (size_t i = 0; i < s.n; i++) {
		unsigned char ch = (unsigned char)s.p[i];
		if (!is_digit(ch))
			return false;
		if (v < 1000000u)
			v = v * 10u + (uint32_t)(ch - '0');
		else
			v = UINT32_MAX;
	}
	*out = v;
	return true;
}

enum dec_result { DEC_OK, DEC_BAD_ESCAPE, DEC_TOO_LONG, DEC_BAD_CHAR };

/*
 * Percent-decode s into dst (cap bytes incl. NUL).  Decoded control
 * characters are refused; a space is refused unless allow_space; '/' is
 * refused unless allow_slash.
 */
static enum dec_result decode(struct span s, char *dst, size_t cap, bool allow_space, bool allow_slash)
{
	size_t o = 0;

	for (size_t i = 0; i < s.n; i++) {
		unsigned char ch = (unsigned char)s.p[i];
		if (ch == '%') {
			int hi = i + 1 < s.n ? hex_val((unsigned char)s.p[i + 1]) : -1;
			int lo = i + 2 < s.n ? hex_val((unsigned char)s.p[i + 2]) : -1;
			if (hi < 0 || lo < 0)
				return DEC_BAD_ESCAPE;
			ch = (unsigned char)(hi * 16 + lo);
			i += 2;
		}
		if (ch < 0x20 || ch == 0x7f || (ch == ' ' && !allow_space) || (ch == '/' && !allow_slash))
			return DEC_BAD_CHAR;
		if (o + 1 >= cap)
			return DEC_TOO_LONG;
		dst[o++] = (char)ch;
	}
	dst[o] = '\0';
	return DEC_OK;
}

static int decode_field(struct ctx *c, struct span s, char *dst, size_t cap, const char *name, bool cred)
{
	switch (decode(s, dst, cap, cred, cred)) {
	case DEC_OK:
		return 0;
	case DEC_BAD_ESCAPE:
		return fail(c, "bad percent escape in %s (write '%%' as %%25)", name);
	case DEC_TOO_LONG:
		return fail(c, "%s too long (at most %zu bytes)", name, cap - 1);
	case DEC_BAD_CHAR:
		break;
	}
	return fail(c, "bad character in %s", name);
}

static int parse_userinfo(struct ctx *c, struct span ui, struct iscsi_url *out)
{
	const char *sep = span_find(ui, '%');
	struct span user = ui, pass = { ui.p + ui.n, 0 };

	if (sep == NULL)
		sep = span_find(ui, ':');
	if (sep != NULL) {
		user.n = (size_t)(sep - ui.p);
		pass.p = sep + 1;
		pass.n = ui.n - user.n - 1;
	}
	if (user.n == 0)
		return fail(c, "empty user name before '@'");
	if (decode_field(c, user, out->user, sizeof(out->user), "user name", true))
		return -EINVAL;
	return decode_field(c, pass, out->password, sizeof(out->password), "password", true);
}

static bool valid_ipv6(struct span s)
{
	const char *zone = span_find(s, '%');
	size_t alen = zone ? (size_t)(zone - s.p) : s.n;
	bool colon = false;

	if (alen == 0)
		return false;
	for (size_t i = 0; i < alen; i++) {
		unsigned char ch = (unsigned char)s.p[i];
		if (ch == ':')
			colon = true;
		else if (ch != '.' && hex_val(ch) < 0)
			return false;
	}
	if (!colon)
		return false;
	if (zone != NULL) {
		size_t zlen = s.n - alen - 1;
		if (zlen == 0)
			return false;
		for (size_t i = alen + 1; i < s.n; i++) {
			unsigned char ch = (unsigned char)s.p[i];
			if (!is_alnum(ch) && ch != '-' && ch != '_' && ch != '.')
				return false;
		}
	}
	return true;
}

static bool valid_hostname(struct span s)
{
	if (s.n == 0)
		return false;
	for (size_t i = 0; i < s.n; i++) {
		unsigned char ch = (unsigned char)s.p[i];
		if (!is_alnum(ch) && ch != '-' && ch != '.' && ch != '_')
			return false;
	}
	return true;
}

static int parse_hostport(struct ctx *c, struct span hp, struct iscsi_url *out)
{
	struct span host, port = { NULL, 0 };
	bool has_port = false;

	if (hp.n == 0)
		return fail(c, "missing host");
	if (hp.p[0] == '[') {
		struct span rest = { hp.p + 1, hp.n - 1 };
		const char *close = span_find(rest, ']');
		if (close == NULL)
			return fail(c, "unclosed '[' in host");
		host.p = hp.p + 1;
		host.n = (size_t)(close - host.p);
		size_t used = (size_t)(close - hp.p) + 1;
		if (used < hp.n) {
			if (hp.p[used] != ':')
				return fail(c, "unexpected characters after ']' in host");
			has_port = true;
			port.p = hp.p + used + 1;
			port.n = hp.n - used - 1;
		}
		if (host.n == 0)
			return fail(c, "missing host");
		if (!valid_ipv6(host))
			return fail(c, "bad IPv6 address in brackets");
	} else {
		const char *colon = span_find(hp, ':');
		host = hp;
		if (colon != NULL) {
			host.n = (size_t)(colon - hp.p);
			has_port = true;
			port.p = colon + 1;
			port.n = hp.n - host.n - 1;
			if (span_find(port, ':') != NULL)
				return fail(c, "IPv6 address must be in brackets");
		}
		if (host.n == 0)
			return fail(c, "missing host");
		if (!valid_hostname(host))
			return fail(c, "bad character in host name");
	}
	if (host.n >= sizeof(out->host))
		return fail(c, "host name too long (at most %zu bytes)", sizeof(out->host) - 1);
	memcpy(out->host, host.p, host.n);
	out->host[host.n] = '\0';

	out->port = ISCSI_PORT_DEFAULT;
	if (has_port) {
		uint32_t v;
		if (!parse_dec(port, &v) || v < 1 || v > 65535)
			return fail_quoted(c, "bad port", port);
		out->port = v;
	}
	return 0;
}

static int parse_path(struct ctx *c, struct span path, struct iscsi_url *out)
{
	struct span target = path;
	const char *slash = span_rfind(path, '/');

	out->lun = -1;
	if (slash != NULL) {
		struct span lun = { slash + 1, path.n - (size_t)(slash + 1 - path.p) };
		target.n = (size_t)(slash - path.p);
		if (lun.n > 0) {
			uint32_t v;
			if (!parse_dec(lun, &v) || v > ISCSI_URL_LUN_MAX)
				return fail_quoted(c, "bad LUN", lun);
			out->lun = (int)v;
		}
	}
	if (decode_field(c, target, out->target, sizeof(out->target), "target name", false))
		return -EINVAL;
	if (out->target[0] == '\0' && out->lun >= 0)
		return fail(c, "LUN given without a target name");
	return 0;
}

static int parse_digest(struct ctx *c, const char *name, struct span val, bool has_val, char *dst, size_t cap)
{
	static const char *const names[] = { "none", "crc32c", "none-crc32c", "crc32c-none" };

	if (!has_val || val.n == 0)
		return fail(c, "URL option '%s' needs a value", name);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		size_t n = strlen(names[i]);
		if (val.n == n && strncasecmp(val.p, names[i], n) == 0 && n < cap) {
			memcpy(dst, names[i], n + 1);
			return 0;
		}
	}
	return fail(c, "bad %s (expected none, crc32c, none-crc32c or crc32c-none)", name);
}

/* target_user / target_password: percent-decoded, non-empty, given once. */
static int parse_cred(struct ctx *c, const char *name, struct span val, bool has_val, char *dst, size_t cap)
{
	if (!has_val || val.n == 0)
		return fail(c, "URL option '%s' needs a value", name);
	if (dst[0] != '\0')
		return fail(c, "URL option '%s' given twice", name);
	return decode_field(c, val, dst, cap, name, true);
}

static int parse_query(struct ctx *c, struct span q, struct iscsi_url *out)
{
	const char *p = q.p, *end = q.p + q.n;

	while (p < end) {
		struct span item = { p, (size_t)(end - p) };
		const char *amp = span_find(item, '&');
		if (amp != NULL)
			item.n = (size_t)(amp - p);
		p = amp != NULL ? amp + 1 : end;
		if (item.n == 0)
			continue;

		struct span key = item, val = { item.p + item.n, 0 };
		const char *eq = span_find(item, '=');
		if (eq != NULL) {
			key.n = (size_t)(eq - item.p);
			val.p = eq + 1;
			val.n = item.n - key.n - 1;
		}

		int rc = 0;
		if (span_eq(key, "iser")) {
			if (eq != NULL)
				rc = fail(c, "URL option 'iser' takes no value");
			out->iser = true;
		} else if (span_eq(key, "header_digest")) {
			rc = parse_digest(c, "header_digest", val, eq != NULL, out->header_digest, sizeof(out->header_digest));
		} else if (span_eq(key, "data_digest")) {
			rc = parse_digest(c, "data_digest", val, eq != NULL, out->data_digest, sizeof(out->data_digest));
		} else if (span_eq(key, "target_user")) {
			rc = parse_cred(c, "target_user", val, eq != NULL, out->target_user, sizeof(out->target_user));
		} else if (span_eq(key, "target_password")) {
			rc = parse_cred(c, "target_password", val, eq != NULL, out->target_password,
					sizeof(out->target_password));
		} else {
			rc = fail_quoted(c, "unknown URL option", key);
		}
		if (rc)
			return rc;
	}
	return 0;
}

static bool may_quote(const char *text)
{
	static const char word[] = "password";

	if (strchr(text, '@') != NULL)
		return false;
	for (const char *p = text; *p; p++)
		if (strncasecmp(p, word, sizeof(word) - 1) == 0)
			return false;
	return true;
}

static int parse(struct ctx *c, const char *text, bool need_target, struct iscsi_url *out)
{
	static const char scheme[] = "iscsi://";
	const size_t slen = sizeof(scheme) - 1;

	if (strncasecmp(text, scheme, slen) != 0)
		return fail(c, "URL must start with iscsi://");
	for (const char *p = text; *p; p++) {
		unsigned char ch = (unsigned char)*p;
		if (ch <= 0x20 || ch == 0x7f)
			return fail(c, "URL contains whitespace or control characters");
	}

	struct span rest = { text + slen, strlen(text) - slen };

	/* authority: up to the first '/' or '?' */
	size_t alen = strcspn(rest.p, "/?");
	struct span auth = { rest.p, alen };
	struct span tail = { rest.p + alen, rest.n - alen };

	const char *at = span_rfind(auth, '@');
	struct span hp = auth;
	if (at != NULL) {
		struct span ui = { auth.p, (size_t)(at - auth.p) };
		hp.p = at + 1;
		hp.n = auth.n - ui.n - 1;
		if (parse_userinfo(c, ui, out))
			return -EINVAL;
	}
	if (parse_hostport(c, hp, out))
		return -EINVAL;

	struct span path = { tail.p, 0 }, query = { tail.p + tail.n, 0 };
	bool has_query = false;
	if (tail.n > 0 && tail.p[0] == '/') {
		path.p = tail.p + 1;
		path.n = tail.n - 1;
	}
	const char *qm = span_find(path.n ? path : tail, '?');
	if (qm != NULL) {
		has_query = true;
		if (path.n)
			path.n = (size_t)(qm - path.p);
		query.p = qm + 1;
		query.n = (size_t)(tail.p + tail.n - query.p);
	}
	if (parse_path(c, path, out))
		return -EINVAL;
	if (need_target && out->target[0] == '\0')
		return fail(c, "missing target name");
	if (has_query && parse_query(c, query, out))
		return -EINVAL;
	return 0;
}

int iscsi_url_parse(const char *text, bool need_target, struct iscsi_url *out, char *err, size_t err_cap)
{
	struct ctx c = { err, err_cap, false };

	if (err != NULL && err_cap > 0)
		err[0] = '\0';
	if (out == NULL)
		return fail(&c, "no output structure");
	memset(out, 0, sizeof(*out));
	out->lun = -1;
	if (text == NULL)
		return fail(&c, "no URL");
	c.quote_ok = may_quote(text);

	int rc = parse(&c, text, need_target, out);
	if (rc) {
		explicit_bzero(out, sizeof(*out));
		out->lun = -1;
	}
	return rc;
}

int iscsi_hostport_parse(const char *text, char *host, unsigned *port, char *err, size_t err_cap)
{
	struct ctx c = { err, err_cap, true }; /* a portal holds no secret: quoting is safe */
	struct iscsi_url u;

	if (err != NULL && err_cap > 0)
		err[0] = '\0';
	if (text == NULL || host == NULL || port == NULL)
		return fail(&c, "no portal");
	for (const char *p = text; *p; p++) {
		unsigned char ch = (unsigned char)*p;
		if (ch <= 0x20 || ch == 0x7f)
			return fail(&c, "portal contains whitespace or control characters");
		if (ch == '@' || ch == '/' || ch == '?')
			return fail(&c, "host[:port] or [v6-address][:port] expected");
	}
	memset(&u, 0, sizeof(u));
	if (parse_hostport(&c, (struct span){ text, strlen(text) }, &u))
		return -EINVAL;
	memcpy(host, u.host, sizeof(u.host));
	*port = u.port;
	return 0;
}

void iscsi_url_wipe(struct iscsi_url *u)
{
	if (u == NULL)
		return;
	explicit_bzero(u->user, sizeof(u->user));
	explicit_bzero(u->password, sizeof(u->password));
	explicit_bzero(u->target_user, sizeof(u->target_user));
	explicit_bzero(u->target_password, sizeof(u->target_password));
}

static bool all_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (hex_val((unsigned char)s[i]) < 0)
			return false;
	return s[n] == '\0';
}

/* "YYYY-MM." and a naming authority (RFC 7143 §4.2.7.4, iqn-format) */
static bool iqn_date_ok(const char *s)
{
	for (int i = 0; i < 8; i++)
		if (i == 4 ? s[i] != '-' : i == 7 ? s[i] != '.' : !isdigit((unsigned char)s[i]))
			return false;
	return s[8] != '\0';
}

int iscsi_name_check(const char *name, char *err, size_t cap)
{
	size_t n = strlen(name);
	const char *why = NULL;
	if (n == 0)
		why = "empty";
	else if (n >= ISCSI_NAME_MAX)
		why = "longer than 223 bytes";
	else if (strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.:") != n)
		why = "only letters, digits, '-', '.' and ':' are allowed";
	else if (!strncasecmp(name, "iqn.", 4))
		why = iqn_date_ok(name + 4) ? NULL
					    : "iqn. names go on with a date and a naming authority (iqn.YYYY-MM.domain[:id])";
	else if (!strncasecmp(name, "eui.", 4))
		why = all_hex(name + 4, 16) ? NULL : "eui. names go on with 16 hex digits";
	else if (!strncasecmp(name, "naa.", 4))
		why = all_hex(name + 4, 16) || all_hex(name + 4, 32) ? NULL : "naa. names go on with 16 or 32 hex digits";
	else
		why = "an iqn., eui. or naa. name expected";
	if (!why)
		return 0;
	snprintf(err, cap, "%s", why);
	return -EINVAL;
}
