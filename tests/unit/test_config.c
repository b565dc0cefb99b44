/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/settings/config.h"
#include "gateway/settings/options.h"

static char path[64];

static void write_conf(const char *text)
{
	snprintf(path, sizeof(path), "/tmp/iserfuse-test-conf.XXXXXX");
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static void drop_conf(void) { unlink(path); }

Test(config, global_keys_and_sections, .fini = drop_conf)
{
	struct gw_config c;
	write_conf("# comment\n; another\ninitiator_name = iqn.2026-11.org.example:gw\noptions = ro, queue_depth=8\n\n"
		   "[lab]\nurl = iscsi://192.0.2.10/iqn.2026-11.org.example:disk\nsecret_file = /etc/iserfuse/lab.secret\n"
		   "mountpoint = /srv/lab\noptions = umask=022\n[b-2.x]\nurl = iscsi://[2001:db8::1]/iqn.x\n");
	cr_assert_eq(gw_config_load(path, true, &c), 0);
	cr_assert_str_eq(c.initiator_name, "iqn.2026-11.org.example:gw");
	cr_assert_str_eq(c.options, "ro,queue_depth=8", "blanks around commas are dropped");
	cr_assert_eq(c.ntargets, 2);
	const struct gw_config_target *t = gw_config_find(&c, "lab");
	cr_assert_not_null(t);
	cr_assert_str_eq(t->url, "iscsi://192.0.2.10/iqn.2026-11.org.example:disk");
	cr_assert_str_eq(t->secret_file, "/etc/iserfuse/lab.secret");
	cr_assert_str_eq(t->mountpoint, "/srv/lab");
	cr_assert_str_eq(t->options, "umask=022");
	cr_assert_eq(t->line, 6);
	t = gw_config_find(&c, "b-2.x");
	cr_assert_not_null(t);
	cr_assert_null(t->secret_file);
	cr_assert_null(gw_config_find(&c, "nosuch"));
	gw_config_free(&c);
}

Test(config, missing_file)
{
	struct gw_config c;
	cr_assert_eq(gw_config_load("/nonexistent/iserfuse.conf", false, &c), 0, "optional: absent is fine");
	cr_assert_eq(c.ntargets, 0);
	cr_redirect_stderr();
	cr_assert_eq(gw_config_load("/nonexistent/iserfuse.conf", true, &c), -1);
}

static void expect_error(const char *text, const char *why)
{
	struct gw_config c;
	char want[256];
	write_conf(text);
	cr_redirect_stderr();
	cr_assert_eq(gw_config_load(path, true, &c), -1);
	fflush(stderr);
	snprintf(want, sizeof(want), "iserfuse: %s:%s\n", path, why);
	cr_assert_stderr_eq_str(want);
	cr_assert_eq(c.ntargets, 0, "nothing is kept on error");
}

Test(config, unknown_global_key, .fini = drop_conf)
{
	expect_error("\n\ncolour = blue\n", "3: unknown key 'colour' (global keys: initiator_name, options)");
}

Test(config, unknown_section_key, .fini = drop_conf)
{
	expect_error("[lab]\nurl = iscsi://h/t\nuser = x\n",
		     "3: unknown key 'user' in section [lab] (keys: url, secret_file, mountpoint, options)");
}

Test(config, duplicate_key, .fini = drop_conf)
{
	expect_error("[lab]\nurl = iscsi://h/t\nurl = iscsi://h/u\n", "3: key 'url' given twice in lab");
}

Test(config, empty_path, .fini = drop_conf)
{
	expect_error("[lab]\nurl = iscsi://h/t\nsecret_file =\n", "3: key 'secret_file' is empty: a path expected");
}

Test(config, empty_mountpoint, .fini = drop_conf)
{
	expect_error("[lab]\nurl = iscsi://h/t\n\nmountpoint = \n", "4: key 'mountpoint' is empty: a path expected");
}

Test(config, duplicate_section, .fini = drop_conf)
{
	expect_error("[lab]\nurl = iscsi://h/t\n[lab]\n", "3: section [lab] appears twice");
}

Test(config, bad_section_name, .fini = drop_conf)
{
	expect_error("[a b]\nurl = iscsi://h/t\n", "1: bad section name [a b]: letters, digits, '_', '-' and '.' expected");
}

Test(config, section_without_url, .fini = drop_conf)
{
	expect_error("[lab]\nmountpoint = /srv\n[other]\nurl = iscsi://h/t\n", "1: section [lab] has no url");
}

Test(config, syntax_error, .fini = drop_conf)
{
	expect_error("options = ro\njust words\n",
		     "2: syntax error: 'key = value', '[section]' or a comment expected");
}

Test(config, first_error_wins, .fini = drop_conf)
{
	expect_error("just words\n[lab]\nbad = 1\n",
		     "1: syntax error: 'key = value', '[section]' or a comment expected");
}

/* ---- the option table (gateway/settings/options.c) ---- */

Test(options, every_numeric_value_checked_against_its_range)
{
	static const struct {
		enum gw_opt_id id;
		const char *text;
		const char *msg; /* the one line, or NULL if the value is good */
		long long want;
	} cases[] = {
		{GW_OPT_LOGIN_TIMEOUT, "-5", "bad option 'login_timeout=-5': an integer in 1..3600 expected", 0},
		{GW_OPT_LOGIN_TIMEOUT, "0", "bad option 'login_timeout=0': an integer in 1..3600 expected", 0},
		{GW_OPT_LOGIN_TIMEOUT, "99999999999999999999",
		 "bad option 'login_timeout=99999999999999999999': an integer in 1..3600 expected", 0},
		{GW_OPT_LOGIN_TIMEOUT, "7", NULL, 7},
		{GW_OPT_QUEUE_DEPTH, "0", "bad option 'queue_depth=0': an integer in 1..4096 expected", 0},
		{GW_OPT_QUEUE_DEPTH, "4097", "bad option 'queue_depth=4097': an integer in 1..4096 expected", 0},
		{GW_OPT_MAX_IO_KIB, "0", "bad option 'max_io_kib=0': a multiple of 4 in 4..4096 expected", 0},
		{GW_OPT_MAX_IO_KIB, "6", "bad option 'max_io_kib=6': a multiple of 4 in 4..4096 expected", 0},
		{GW_OPT_MAX_IO_KIB, "1024", NULL, 1024},
		{GW_OPT_POOL_SLICES, "0", "bad option 'pool_slices=0': an integer in 2..4096 expected", 0},
		{GW_OPT_RESCAN_INTERVAL, "-1", "bad option 'rescan_interval=-1': an integer in 0..86400 expected", 0},
		{GW_OPT_RESCAN_INTERVAL, "0", NULL, 0},
		{GW_OPT_NOOP_INTERVAL, "1.5", "bad option 'noop_interval=1.5': an integer in 0..3600 expected", 0},
		{GW_OPT_NOOP_INTERVAL, " 5", "bad option 'noop_interval= 5': an integer in 0..3600 expected", 0},
		{GW_OPT_NOOP_TIMEOUT, "", "bad option 'noop_timeout=': an integer in 1..3600 expected", 0},
		{GW_OPT_CACHE_SIZE, "64M", NULL, 64ll << 20},
		{GW_OPT_CACHE_SIZE, "2T", "bad option 'cache_size=2T': a size in bytes (K, M, G suffixes) in 0..1024G expected", 0},
		{GW_OPT_CACHE_SIZE, "1025G", "bad option 'cache_size=1025G': a size in bytes (K, M, G suffixes) in 0..1024G expected", 0},
		{GW_OPT_CACHE_SIZE, "18446744073709551617K",
		 "bad option 'cache_size=18446744073709551617K': a size in bytes (K, M, G suffixes) in 0..1024G expected", 0},
		{GW_OPT_UMASK, "022", NULL, 022},
		{GW_OPT_UMASK, "0999", "bad option 'umask=0999': an octal mask in 0..0777 expected", 0},
		{GW_OPT_UMASK, "1000", "bad option 'umask=1000': an octal mask in 0..0777 expected", 0},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char err[256] = "";
		long long v = -12345;
		int rc = gw_opt_parse_num(cases[i].id, cases[i].text, &v, err, sizeof(err));
		if (cases[i].msg) {
			cr_expect_lt(rc, 0, "%s=%s accepted", gw_opts[cases[i].id].key, cases[i].text);
			cr_expect_str_eq(err, cases[i].msg);
			cr_expect_eq(v, -12345, "a bad value leaves the output alone");
		} else {
			cr_expect_eq(rc, 0, "%s=%s: %s", gw_opts[cases[i].id].key, cases[i].text, err);
			cr_expect_eq(v, cases[i].want);
		}
	}
}

Test(options, table_defaults_lie_in_their_ranges)
{
	for (int i = 0; i < GW_OPT_COUNT; i++) {
		const struct gw_opt *o = &gw_opts[i];
		cr_assert_not_null(o->key, "row %d is empty", i);
		cr_expect_not_null(o->help, "%s has no help", o->key);
		cr_expect_not_null(o->def_text, "%s has no default", o->key);
		cr_expect_eq(gw_opt_find(o->key), i);
		cr_expect_eq((o->kind != GW_OPT_STR && o->kind != GW_OPT_FLAG), i < GW_OPT_NUMERIC_COUNT,
			     "%s: numeric rows come first", o->key);
		if (i < GW_OPT_NUMERIC_COUNT && i != GW_OPT_POOL_SLICES) /* pool_slices: default queue_depth */
			cr_expect(o->def >= o->min && o->def <= o->max, "%s: default %lld outside %lld..%lld", o->key,
				  o->def, o->min, o->max);
	}
	cr_expect_eq(gw_opt_find("allow_other         allow access"), GW_OPT_ALLOW_OTHER);
	cr_expect_eq(gw_opt_find("frobnicate=1"), -1);
}
