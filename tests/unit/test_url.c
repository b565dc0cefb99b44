/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "initiator/net/url.h"

static struct iscsi_url u;
static char err[256];

static void ok(const char *text, bool need_target)
{
	memset(err, 'x', sizeof(err));
	int rc = iscsi_url_parse(text, need_target, &u, err, sizeof(err));
	cr_assert_eq(rc, 0, "%s: rc %d (%s)", text, rc, err);
}

/* -EINVAL, a one-line non-empty message, and no trace of `secret` in it */
static void bad(const char *text, bool need_target, const char *secret)
{
	memset(err, 'x', sizeof(err));
	int rc = iscsi_url_parse(text, need_target, &u, err, sizeof(err));
	cr_assert_eq(rc, -EINVAL, "%s: rc %d", text, rc);
	cr_assert(memchr(err, '\0', sizeof(err)) != NULL, "%s: unterminated message", text);
	cr_assert_gt(strlen(err), 0, "%s: empty message", text);
	cr_assert_null(strchr(err, '\n'), "%s: multi-line message '%s'", text, err);
	if (secret != NULL)
		cr_assert_null(strstr(err, secret), "%s: message '%s' leaks the password", text, err);
	cr_assert_str_empty(u.password, "%s: password left in the output", text);
}

Test(url, full_with_lun)
{
	ok("iscsi://127.0.0.1:3261/iqn.2026-11.org.example:disk/1", true);
	cr_assert_str_eq(u.host, "127.0.0.1");
	cr_assert_eq(u.port, 3261);
	cr_assert_str_eq(u.target, "iqn.2026-11.org.example:disk");
	cr_assert_eq(u.lun, 1);
	cr_assert_not(u.iser);
	cr_assert_str_empty(u.user);
	cr_assert_str_empty(u.password);
	cr_assert_str_empty(u.header_digest);
	cr_assert_str_empty(u.data_digest);
}

Test(url, credentials)
{
	ok("iscsi://alice%s3cr3t@host.example.com/iqn.2001-04.com.example:t0/0", true);
	cr_assert_str_eq(u.user, "alice");
	cr_assert_str_eq(u.password, "s3cr3t");
	cr_assert_str_eq(u.host, "host.example.com");
	cr_assert_eq(u.port, 3260);
	cr_assert_str_eq(u.target, "iqn.2001-04.com.example:t0");
	cr_assert_eq(u.lun, 0);
	iscsi_url_wipe(&u);
	cr_assert_str_empty(u.user);
	cr_assert_str_empty(u.password);
	for (size_t i = 0; i < sizeof(u.password); i++)
		cr_assert_eq(u.password[i], 0);
	cr_assert_str_eq(u.host, "host.example.com", "wipe touches only credentials");
}

Test(url, credentials_without_password)
{
	ok("iscsi://bob@10.0.0.1/iqn.x:y", true);
	cr_assert_str_eq(u.user, "bob");
	cr_assert_str_empty(u.password);
	cr_assert_eq(u.lun, -1);
}

Test(url, credentials_colon_separator)
{
	/* libiscsi falls back to ':' when the userinfo has no '%' */
	ok("iscsi://bob:pw@10.0.0.1/iqn.x:y", true);
	cr_assert_str_eq(u.user, "bob");
	cr_assert_str_eq(u.password, "pw");
}

Test(url, password_with_escapes_and_at)
{
	ok("iscsi://user%p%40ss%2Fw%25rd@h/iqn.x:y/2", true);
	cr_assert_str_eq(u.user, "user");
	cr_assert_str_eq(u.password, "p@ss/w%rd");
	cr_assert_str_eq(u.host, "h");
	cr_assert_eq(u.lun, 2);
	/* a raw '@' in the password: the userinfo ends at the last '@' */
	ok("iscsi://user%p@ss@h/iqn.x:y", true);
	cr_assert_str_eq(u.password, "p@ss");
	cr_assert_str_eq(u.host, "h");
	/* password with ':' after the '%' separator */
	ok("iscsi://u%a:b@h/iqn.x:y", true);
	cr_assert_str_eq(u.user, "u");
	cr_assert_str_eq(u.password, "a:b");
}

Test(url, ipv4_default_port)
{
	ok("iscsi://192.168.1.20/iqn.2003-01.org.linux-iscsi.srv:sn.1234/3", true);
	cr_assert_str_eq(u.host, "192.168.1.20");
	cr_assert_eq(u.port, 3260);
	cr_assert_eq(u.lun, 3);
}

Test(url, ipv6_with_port)
{
	ok("iscsi://[fe80::1:2]:3262/iqn.x:y/7", true);
	cr_assert_str_eq(u.host, "fe80::1:2");
	cr_assert_eq(u.port, 3262);
	cr_assert_eq(u.lun, 7);
}

Test(url, ipv6_forms)
{
	ok("iscsi://[::1]/iqn.x:y", true);
	cr_assert_str_eq(u.host, "::1");
	cr_assert_eq(u.port, 3260);
	ok("iscsi://[::ffff:192.0.2.1]:860/iqn.x:y", true);
	cr_assert_str_eq(u.host, "::ffff:192.0.2.1");
	cr_assert_eq(u.port, 860);
	ok("iscsi://[fe80::1%eth0]/iqn.x:y", true);
	cr_assert_str_eq(u.host, "fe80::1%eth0");
	ok("iscsi://u%pw@[2001:db8::5]:3261/iqn.x:y/0", true);
	cr_assert_str_eq(u.host, "2001:db8::5");
	cr_assert_str_eq(u.password, "pw");
}

Test(url, hostname)
{
	ok("iscsi://storage-01.example.org:3260/iqn.2026-01.org.example:vol_a", true);
	cr_assert_str_eq(u.host, "storage-01.example.org");
	cr_assert_str_eq(u.target, "iqn.2026-01.org.example:vol_a");
	cr_assert_eq(u.lun, -1);
}

Test(url, port_edges)
{
	ok("iscsi://h:1/iqn.x:y", true);
	cr_assert_eq(u.port, 1);
	ok("iscsi://h:65535/iqn.x:y", true);
	cr_assert_eq(u.port, 65535);
}

Test(url, lun_forms)
{
	ok("iscsi://h/iqn.x:y/0", true);
	cr_assert_eq(u.lun, 0);
	ok("iscsi://h/iqn.x:y/16383", true);
	cr_assert_eq(u.lun, 16383);
	ok("iscsi://h/iqn.x:y", true);
	cr_assert_eq(u.lun, -1);
	ok("iscsi://h/iqn.x:y/", true);
	cr_assert_str_eq(u.target, "iqn.x:y");
	cr_assert_eq(u.lun, -1);
	ok("iscsi://h/iqn.x:y/007", true);
	cr_assert_eq(u.lun, 7);
}

Test(url, target_with_colons_and_other_formats)
{
	ok("iscsi://h/iqn.2026-11.org.example:a:b:c.d-e/5", true);
	cr_assert_str_eq(u.target, "iqn.2026-11.org.example:a:b:c.d-e");
	ok("iscsi://h/eui.02004567A425678D/1", true);
	cr_assert_str_eq(u.target, "eui.02004567A425678D");
	ok("iscsi://h/naa.52004567BA64678D", true);
	cr_assert_str_eq(u.target, "naa.52004567BA64678D");
}

Test(url, percent_escapes)
{
	/* the first '%' of the userinfo is the separator, later ones escape */
	ok("iscsi://us%p%61%73s@h/iqn.2026-11.org.example%3Adisk/1", true);
	cr_assert_str_eq(u.user, "us");
	cr_assert_str_eq(u.password, "pass");
	cr_assert_str_eq(u.target, "iqn.2026-11.org.example:disk");
	cr_assert_eq(u.lun, 1);
	ok("iscsi://h/iqn.x%3ay%2dz", true);
	cr_assert_str_eq(u.target, "iqn.x:y-z");
}

Test(url, iser_and_digests)
{
	ok("iscsi://h/iqn.x:y/1?iser", true);
	cr_assert(u.iser);
	cr_assert_eq(u.lun, 1);
	ok("iscsi://h/iqn.x:y?header_digest=crc32c&data_digest=none", true);
	cr_assert_not(u.iser);
	cr_assert_str_eq(u.header_digest, "crc32c");
	cr_assert_str_eq(u.data_digest, "none");
	cr_assert_eq(u.lun, -1);
	ok("iscsi://h/iqn.x:y/2?iser&header_digest=none-crc32c&data_digest=crc32c-none", true);
	cr_assert(u.iser);
	cr_assert_str_eq(u.header_digest, "none-crc32c");
	cr_assert_str_eq(u.data_digest, "crc32c-none");
	ok("iscsi://h/iqn.x:y?header_digest=CRC32C", true);
	cr_assert_str_eq(u.header_digest, "crc32c");
	ok("iscsi://h/iqn.x:y?&iser&", true);
	cr_assert(u.iser);
}

Test(url, mutual_chap_credentials)
{
	ok("iscsi://alice%secretpass12@h/iqn.x:y/1?target_user=tgt&target_password=tgt%25secret%26123", true);
	cr_assert_str_eq(u.user, "alice");
	cr_assert_str_eq(u.password, "secretpass12");
	cr_assert_str_eq(u.target_user, "tgt");
	cr_assert_str_eq(u.target_password, "tgt%secret&123");
	cr_assert_eq(u.lun, 1);
	iscsi_url_wipe(&u);
	for (size_t i = 0; i < sizeof(u.target_password); i++)
		cr_assert(u.target_password[i] == 0 && u.target_user[i] == 0);
	ok("iscsi://h/iqn.x:y?target_password=p&iser&target_user=t", true);
	cr_assert(u.iser);
	cr_assert_str_eq(u.target_user, "t");
	cr_assert_str_eq(u.target_password, "p");
}

Test(url, scheme_case_insensitive)
{
	ok("ISCSI://h/iqn.x:y", true);
	cr_assert_str_eq(u.host, "h");
}

Test(url, discovery)
{
	ok("iscsi://h", false);
	cr_assert_str_eq(u.host, "h");
	cr_assert_str_empty(u.target);
	cr_assert_eq(u.lun, -1);
	ok("iscsi://h:3261/", false);
	cr_assert_eq(u.port, 3261);
	cr_assert_str_empty(u.target);
	ok("iscsi://[::1]:3261", false);
	cr_assert_str_eq(u.host, "::1");
	ok("iscsi://h?iser", false);
	cr_assert(u.iser);
	ok("iscsi://h/?iser", false);
	cr_assert(u.iser);
	ok("iscsi://h/iqn.x:y/4", false);
	cr_assert_str_eq(u.target, "iqn.x:y");
	cr_assert_eq(u.lun, 4);
}

Test(url, null_err_buffer)
{
	cr_assert_eq(iscsi_url_parse("http://h/x", true, &u, NULL, 0), -EINVAL);
	cr_assert_eq(iscsi_url_parse("iscsi://h/x", true, &u, NULL, 0), 0);
	char tiny[4];
	cr_assert_eq(iscsi_url_parse("iscsi://h:0/x", true, &u, tiny, sizeof(tiny)), -EINVAL);
	cr_assert_eq(strlen(tiny), 3);
	cr_assert_eq(iscsi_url_parse(NULL, true, &u, err, sizeof(err)), -EINVAL);
	cr_assert_eq(iscsi_url_parse("iscsi://h/x", true, NULL, err, sizeof(err)), -EINVAL);
}

Test(url, bad_scheme)
{
	bad("http://h/iqn.x:y", true, NULL);
	bad("iscsi:/h/iqn.x:y", true, NULL);
	bad("iser://h/iqn.x:y", true, NULL);
	bad("", true, NULL);
	bad("iscsi:", true, NULL);
}

Test(url, bad_host)
{
	bad("iscsi:///iqn.x:y", true, NULL);
	bad("iscsi://", false, NULL);
	bad("iscsi://:3260/iqn.x:y", true, NULL);
	bad("iscsi://u%pw@/iqn.x:y", true, "pw");
	bad("iscsi://[]/iqn.x:y", true, NULL);
	bad("iscsi://[::1/iqn.x:y", true, NULL);
	bad("iscsi://[::1", false, NULL);
	bad("iscsi://[::1]x/iqn.x:y", true, NULL);
	bad("iscsi://[::g]/iqn.x:y", true, NULL);
	bad("iscsi://[1.2.3.4]/iqn.x:y", true, NULL);
	bad("iscsi://[fe80::1%]/iqn.x:y", true, NULL);
	bad("iscsi://[fe80::1%e/0]/iqn.x:y", true, NULL);
	bad("iscsi://fe80::1/iqn.x:y", true, NULL);
	bad("iscsi://ho$t/iqn.x:y", true, NULL);
	bad("iscsi://h%41/iqn.x:y", true, NULL);
}

Test(url, bad_port)
{
	bad("iscsi://h:0/iqn.x:y", true, NULL);
	cr_assert_str_eq(err, "bad port '0'");
	bad("iscsi://h:65536/iqn.x:y", true, NULL);
	bad("iscsi://h:99999/iqn.x:y", true, NULL);
	cr_assert_str_eq(err, "bad port '99999'");
	bad("iscsi://h:abc/iqn.x:y", true, NULL);
	bad("iscsi://h:/iqn.x:y", true, NULL);
	bad("iscsi://h:0x10/iqn.x:y", true, NULL);
	bad("iscsi://h:-1/iqn.x:y", true, NULL);
	bad("iscsi://h:99999999999999999999999/iqn.x:y", true, NULL);
	bad("iscsi://[::1]:65536/iqn.x:y", true, NULL);
	bad("iscsi://[::1]:/iqn.x:y", true, NULL);
	/* with credentials in the URL, nothing of the URL is quoted */
	bad("iscsi://u:pass@h:65536/iqn.x:y", true, "pass");
	bad("iscsi://u:12/34@h/iqn.x:y", true, "12");
}

Test(url, missing_target)
{
	bad("iscsi://h", true, NULL);
	cr_assert_str_eq(err, "missing target name");
	bad("iscsi://h/", true, NULL);
	bad("iscsi://h:3260/?iser", true, NULL);
	bad("iscsi://u%topsecret@h/", true, "topsecret");
	bad("iscsi://h//3", false, NULL);
}

Test(url, bad_lun)
{
	bad("iscsi://h/iqn.x:y/16384", true, NULL);
	cr_assert_str_eq(err, "bad LUN '16384'");
	bad("iscsi://h/iqn.x:y/99999999999999999999", true, NULL);
	bad("iscsi://h/iqn.x:y/-1", true, NULL);
	bad("iscsi://h/iqn.x:y/1x", true, NULL);
	bad("iscsi://h/iqn.x:y/abc", true, NULL);
	bad("iscsi://h/iqn.x:y/0x1", true, NULL);
	bad("iscsi://h/a/b/1", true, NULL);
}

Test(url, bad_query)
{
	bad("iscsi://h/iqn.x:y?foo", true, NULL);
	cr_assert_str_eq(err, "unknown URL option 'foo'");
	bad("iscsi://h/iqn.x:y?iser&foo=bar", true, NULL);
	bad("iscsi://h/iqn.x:y?ISER", true, NULL);
	bad("iscsi://h/iqn.x:y?iser=1", true, NULL);
	bad("iscsi://h/iqn.x:y?header_digest", true, NULL);
	bad("iscsi://h/iqn.x:y?header_digest=", true, NULL);
	bad("iscsi://h/iqn.x:y?header_digest=md5", true, NULL);
	bad("iscsi://h/iqn.x:y?data_digest=crc32c,none", true, NULL);
	bad("iscsi://u%hunter2@h/iqn.x:y?foo", true, "hunter2");
	bad("iscsi://h/iqn.x:y?target_password=hunter2&x", true, "hunter2");
	bad("iscsi://h/iqn.x:y?target_user", true, NULL);
	bad("iscsi://h/iqn.x:y?target_password=", true, NULL);
	bad("iscsi://h/iqn.x:y?target_password=hunter2&target_password=hunter3", true, "hunter");
	bad("iscsi://h/iqn.x:y?target_password=hun%zzter2", true, "hun");
	cr_assert_str_empty(u.target_password);
	bad("iscsi://u:1?abc@h/t", false, "1?abc");
}

Test(url, bad_escapes)
{
	bad("iscsi://h/iqn.x%3", true, NULL);
	bad("iscsi://h/iqn.x%zz", true, NULL);
	bad("iscsi://h/iqn.x%", true, NULL);
	bad("iscsi://u%pw%4@h/iqn.x:y", true, "pw");
	bad("iscsi://u%pw%00x@h/iqn.x:y", true, "pw");
	bad("iscsi://h/iqn.x%00y", true, NULL);
	bad("iscsi://h/iqn.x%20y", true, NULL);
	bad("iscsi://h/iqn.x%2Fy", true, NULL);
	bad("iscsi://h/iqn.x%0ay", true, NULL);
}

Test(url, control_and_whitespace)
{
	bad("iscsi://h/iqn.x y", true, NULL);
	bad("iscsi://h/iqn.x\ty", true, NULL);
	bad("iscsi://h/iqn.x:y\n", true, NULL);
	bad("iscsi://h\r/iqn.x:y", true, NULL);
	bad("iscsi://u%p\x01w@h/iqn.x:y", true, "p\x01w");
	bad("iscsi://h/iqn.x\x7fy", true, NULL);
	bad(" iscsi://h/iqn.x:y", true, NULL);
	bad("iscsi://u%p w@h/iqn.x:y", true, "p w");
}

Test(url, empty_user)
{
	bad("iscsi://@h/iqn.x:y", true, NULL);
	bad("iscsi://%secret@h/iqn.x:y", true, "secret");
}

static void fill(char *buf, size_t n, char c)
{
	memset(buf, c, n);
	buf[n] = '\0';
}

Test(url, field_lengths)
{
	char url[2048], field[1024];

	/* target: 223 bytes fit, 224 do not */
	fill(field, ISCSI_NAME_MAX - 1, 't');
	snprintf(url, sizeof(url), "iscsi://h/%s/1", field);
	ok(url, true);
	cr_assert_eq(strlen(u.target), ISCSI_NAME_MAX - 1);
	fill(field, ISCSI_NAME_MAX, 't');
	snprintf(url, sizeof(url), "iscsi://h/%s/1", field);
	bad(url, true, NULL);

	/* host: 255 fit, 256 do not */
	fill(field, ISCSI_URL_HOST_MAX - 1, 'h');
	snprintf(url, sizeof(url), "iscsi://%s/iqn.x:y", field);
	ok(url, true);
	fill(field, ISCSI_URL_HOST_MAX, 'h');
	snprintf(url, sizeof(url), "iscsi://%s/iqn.x:y", field);
	bad(url, true, NULL);
	fill(field, ISCSI_URL_HOST_MAX, 'a');
	snprintf(url, sizeof(url), "iscsi://[::%s]/iqn.x:y", field);
	bad(url, true, NULL);

	/* user and password: 255 fit, 256 do not */
	fill(field, ISCSI_CRED_MAX - 1, 'u');
	snprintf(url, sizeof(url), "iscsi://%s%%pw@h/iqn.x:y", field);
	ok(url, true);
	fill(field, ISCSI_CRED_MAX, 'u');
	snprintf(url, sizeof(url), "iscsi://%s%%pw@h/iqn.x:y", field);
	bad(url, true, "pw@");
	fill(field, ISCSI_CRED_MAX - 1, 'p');
	snprintf(url, sizeof(url), "iscsi://u%%%s@h/iqn.x:y", field);
	ok(url, true);
	cr_assert_eq(strlen(u.password), ISCSI_CRED_MAX - 1);
	fill(field, ISCSI_CRED_MAX, 'p');
	snprintf(url, sizeof(url), "iscsi://u%%%s@h/iqn.x:y", field);
	bad(url, true, "ppp");

	/* an escape counts as one decoded byte */
	char esc[3 * (ISCSI_CRED_MAX - 1) + 1];
	for (size_t i = 0; i < ISCSI_CRED_MAX - 1; i++)
		memcpy(esc + 3 * i, "%41", 3);
	esc[sizeof(esc) - 1] = '\0';
	snprintf(url, sizeof(url), "iscsi://u%%%s@h/iqn.x:y", esc);
	ok(url, true);
	cr_assert_eq(strlen(u.password), ISCSI_CRED_MAX - 1);

	/* very long quoted piece is cut */
	fill(field, 1000, '9');
	snprintf(url, sizeof(url), "iscsi://h:%s/iqn.x:y", field);
	bad(url, true, NULL);
	cr_assert_lt(strlen(err), 80);
}

Test(url, failure_clears_output)
{
	ok("iscsi://u%pw@h/iqn.x:y/1", true);
	bad("iscsi://u%pw@h:0/iqn.x:y/1", true, "pw");
	cr_assert_str_empty(u.user);
	cr_assert_str_empty(u.host);
	cr_assert_eq(u.lun, -1);
}

Test(url, iscsi_name_check)
{
	char e[160], longname[300];
	const char *good[] = {"iqn.2026-11.org.example:disk", "IQN.2001-04.com.example", "iqn.1994-05.com.redhat:a1b2",
			      "eui.02004567A425678D", "naa.52004567BA64678D", "naa.62004567BA64678D0123456789ABCDEF"};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		cr_expect_eq(iscsi_name_check(good[i], e, sizeof(e)), 0, "%s: %s", good[i], e);
	const char *bad_names[] = {"",	       "notaniqn",	   "iqn.2026-11.org.example:a b", "iqn.26-11.org",
				   "iqn.2026-11.", "iqn.2026-1x.org", "eui.12345",			  "eui.02004567A425678DX",
				   "naa.xyz",      "naa.52004567BA64", "iqn.2026-11.org/x"};
	for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
		e[0] = '\0';
		cr_expect_eq(iscsi_name_check(bad_names[i], e, sizeof(e)), -EINVAL, "'%s' accepted", bad_names[i]);
		cr_expect_neq(e[0], '\0', "'%s': no reason", bad_names[i]);
	}
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	memcpy(longname, "iqn.2026-11.org.x:", 18);
	cr_expect_eq(iscsi_name_check(longname, e, sizeof(e)), -EINVAL);
	longname[223] = '\0'; /* 223 bytes: the largest name */
	cr_expect_eq(iscsi_name_check(longname, e, sizeof(e)), 0, "%s", e);
}

Test(url, hostport_parse)
{
	char host[ISCSI_URL_HOST_MAX], e[160];
	unsigned port = 0;
	static const struct {
		const char *text, *host;
		unsigned port;
	} good[] = {
		{"198.51.100.1", "198.51.100.1", 3260},
		{"198.51.100.1:3261", "198.51.100.1", 3261},
		{"[2001:db8::1]", "2001:db8::1", 3260},
		{"[2001:db8::1]:860", "2001:db8::1", 860},
		{"[fe80::1%eth0]:3260", "fe80::1%eth0", 3260},
		{"san-a.example", "san-a.example", 3260},
		{"san-a.example:65535", "san-a.example", 65535},
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		cr_expect_eq(iscsi_hostport_parse(good[i].text, host, &port, e, sizeof(e)), 0, "%s: %s", good[i].text, e);
		cr_expect_str_eq(host, good[i].host, "%s", good[i].text);
		cr_expect_eq(port, good[i].port, "%s: port %u", good[i].text, port);
	}
	static const struct {
		const char *text, *why;
	} bad[] = {
		{"", "missing host"},
		{":3260", "missing host"},
		{"2001:db8::1", "IPv6 address must be in brackets"},
		{"[2001:db8::1", "unclosed '[' in host"},
		{"host:0", "bad port '0'"},
		{"host:65536", "bad port '65536'"},
		{"host:x", "bad port 'x'"},
		{"user@host", "host[:port] or [v6-address][:port] expected"},
		{"host/iqn", "host[:port] or [v6-address][:port] expected"},
		{"ho st", "portal contains whitespace or control characters"},
		{"ho$t", "bad character in host name"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		strcpy(host, "untouched");
		port = 7;
		cr_expect_eq(iscsi_hostport_parse(bad[i].text, host, &port, e, sizeof(e)), -EINVAL, "'%s' accepted", bad[i].text);
		cr_expect_str_eq(e, bad[i].why, "'%s'", bad[i].text);
		cr_expect_str_eq(host, "untouched");
		cr_expect_eq(port, 7u);
	}
}
