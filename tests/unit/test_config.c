/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../gateway/config.h"

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
