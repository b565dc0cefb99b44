/* SPDX-License-Identifier: MIT */
/*
 * gateway/settings/settings.c and mpath_opts.c: the multipath options from the
 * command line and the configuration file (portal=, multipath=, sessions=,
 * path_selector=) and their accessors.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/settings/settings.h"

#define URL "iscsi://198.51.100.1/iqn.2026-11.org.example:disk"

static char conf[64];

static void write_conf(const char *text)
{
	snprintf(conf, sizeof(conf), "/tmp/iserfuse-test-settings.XXXXXX");
	int fd = mkstemp(conf);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static void drop_conf(void)
{
	if (conf[0])
		unlink(conf);
}

/*
 * Parse and load "iserfuse -o config=CONF OPTS URL /mnt" (OPTS: one -o
 * argument, or NULL) into *o.  Returns what gw_settings_parse or, after
 * it, gw_settings_load returned.
 */
static int load(struct gw_settings *o, const char *opts)
{
	char cfg[96];
	snprintf(cfg, sizeof(cfg), "config=%s", conf);
	char *argv[8] = {"iserfuse", "-o", cfg};
	int argc = 3;
	if (opts) {
		argv[argc++] = "-o";
		argv[argc++] = (char *)opts;
	}
	argv[argc++] = URL;
	argv[argc++] = "/mnt";
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct gw_config c = {0};
	memset(o, 0, sizeof(*o));
	int rc = gw_settings_parse(o, &args);
	if (!rc)
		rc = gw_settings_load(o, &args, &c);
	gw_config_free(&c); /* as main's mount_free: whether the load worked or not */
	fuse_opt_free_args(&args);
	return rc;
}

Test(settings, defaults, .init = cr_redirect_stderr, .fini = drop_conf)
{
	struct gw_settings o;
	const struct gw_portal *p = NULL;
	write_conf("");
	cr_assert_eq(load(&o, NULL), 0);
	cr_expect_eq(gw_settings_portals(&o, &p), 0);
	cr_expect_not_null(p);
	cr_expect(gw_settings_multipath(&o));
	cr_expect_not(gw_settings_discover_portals(&o)); /* the target's portals only when asked */
	cr_expect_eq(gw_settings_num(&o, GW_OPT_SESSIONS), 1);
	cr_expect_eq(gw_settings_path_sel(&o), PATH_SEL_LEAST_OUTSTANDING);
	gw_settings_free(&o);
	cr_assert_eq(load(&o, "discover_portals=on"), 0);
	cr_expect(gw_settings_discover_portals(&o));
	gw_settings_free(&o);
	drop_conf();
	write_conf("options = discover_portals=on\n"); /* from the configuration file too; the command line wins */
	cr_assert_eq(load(&o, NULL), 0);
	cr_expect(gw_settings_discover_portals(&o));
	gw_settings_free(&o);
	cr_assert_eq(load(&o, "discover_portals=off"), 0);
	cr_expect_not(gw_settings_discover_portals(&o));
	gw_settings_free(&o);
}

/* One address is one portal however it is spelt: inet_aton's forms, IPv4-mapped IPv6. */
Test(settings, portals_compared_by_address, .init = cr_redirect_stderr, .fini = drop_conf)
{
	struct gw_settings o;
	const struct gw_portal *p;
	write_conf("");
	/* 0xc6336401 and [::ffff:198.51.100.1] are the URL's 198.51.100.1; the next four are 127.0.0.1 */
	cr_assert_eq(load(&o, "portal=0xc6336401,portal=[::ffff:198.51.100.1]:3260,portal=127.1,"
			      "portal=0x7f000001,portal=[::ffff:127.0.0.1],portal=0177.0.0.1:3260"),
		     0);
	cr_assert_eq(gw_settings_portals(&o, &p), 1);
	cr_expect_str_eq(p[0].host, "127.0.0.1"); /* the one spelling, whatever was given */
	cr_expect_eq(p[0].port, 3260);
	gw_settings_free(&o);
}

Test(settings, portals_in_order_without_duplicates, .init = cr_redirect_stderr, .fini = drop_conf)
{
	struct gw_settings o;
	const struct gw_portal *p;
	write_conf("");
	/* the URL's own portal (198.51.100.1:3260) and repeats are kept out */
	cr_assert_eq(load(&o, "portal=203.0.113.1:3261,portal=[2001:db8::1],portal=198.51.100.1,"
			      "portal=203.0.113.1:3261,portal=[2001:db8:0::1]:3260,portal=san-b.example,"
			      "portal=SAN-B.example:3260,portal=198.51.100.1:3262,sessions=2,path_selector=round-robin,"
			      "multipath=on"),
		     0);
	cr_assert_eq(gw_settings_portals(&o, &p), 4);
	cr_expect_str_eq(p[0].host, "203.0.113.1");
	cr_expect_eq(p[0].port, 3261);
	cr_expect_str_eq(p[1].host, "2001:db8::1");
	cr_expect_eq(p[1].port, 3260);
	cr_expect_str_eq(p[2].host, "san-b.example");
	cr_expect_eq(p[2].port, 3260);
	cr_expect_str_eq(p[3].host, "198.51.100.1");
	cr_expect_eq(p[3].port, 3262);
	cr_expect_eq(gw_settings_num(&o, GW_OPT_SESSIONS), 2);
	cr_expect_eq(gw_settings_path_sel(&o), PATH_SEL_ROUND_ROBIN);
	cr_expect(gw_settings_multipath(&o));
	gw_settings_free(&o);
}

Test(settings, eight_portals_at_most, .init = cr_redirect_stderr, .fini = drop_conf)
{
	struct gw_settings o;
	const struct gw_portal *p;
	char opts[512] = "";
	write_conf("");
	for (int i = 1; i <= 8; i++)
		snprintf(opts + strlen(opts), sizeof(opts) - strlen(opts), "%sportal=203.0.113.%d", i > 1 ? "," : "", i);
	cr_assert_eq(load(&o, opts), 0);
	cr_expect_eq(gw_settings_portals(&o, &p), 8);
	cr_expect_str_eq(p[7].host, "203.0.113.8");
	gw_settings_free(&o);
	strcat(opts, ",portal=203.0.113.9");
	cr_expect_eq(load(&o, opts), -1);
	gw_settings_free(&o);
	fflush(stderr);
	cr_expect_stderr_eq_str("iserfuse: bad option 'portal=203.0.113.9': at most 8 portals\n");
}

Test(settings, bad_values_one_line_each, .init = cr_redirect_stderr, .fini = drop_conf)
{
	static const char *const bad[] = {
		"portal=203.0.113.1:0",  "portal=2001:db8::1", "portal=", "multipath=yes",
		"path_selector=fastest", "sessions=0",	       "sessions=9", "multipath=off,portal=203.0.113.1",
		"sessions",		 "cmd_timeout",	       "ro=1",	  "secret_file=",
		"log_file=",		 "discover_portals=yes", "multipath=off,discover_portals=on",
		"bogus=1",		 "ro,,bogus=1",
	};
	struct gw_settings o;
	write_conf("");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_expect_eq(load(&o, bad[i]), -1, "%s accepted", bad[i]);
		gw_settings_free(&o);
	}
	fflush(stderr);
	cr_expect_stderr_eq_str("iserfuse: bad option 'portal=203.0.113.1:0': bad port '0'\n"
				"iserfuse: bad option 'portal=2001:db8::1': IPv6 address must be in brackets\n"
				"iserfuse: bad option 'portal=': missing host\n"
				"iserfuse: bad option 'multipath=yes': on or off expected\n"
				"iserfuse: bad option 'path_selector=fastest': least-outstanding or round-robin expected\n"
				"iserfuse: bad option 'sessions=0': an integer in 1..8 expected\n"
				"iserfuse: bad option 'sessions=9': an integer in 1..8 expected\n"
				"iserfuse: bad option 'multipath=off': portal= needs multipath=on\n"
				"iserfuse: option 'sessions' needs a value: -o sessions=N\n"
				"iserfuse: option 'cmd_timeout' needs a value: -o cmd_timeout=S\n"
				"iserfuse: option 'ro=1' takes no value: -o ro\n"
				"iserfuse: bad option 'secret_file=': the path is empty\n"
				"iserfuse: bad option 'log_file=': the path is empty\n"
				"iserfuse: bad option 'discover_portals=yes': on or off expected\n"
				"iserfuse: bad option 'multipath=off': discover_portals=on needs multipath=on\n"
				"iserfuse: unknown option 'bogus=1'\n"
				"iserfuse: unknown option 'bogus=1'\n");
}

/* Empty items (",,", an empty options =) are skipped, as mount(8) does: libfuse never sees them. */
Test(settings, empty_items_skipped, .init = cr_redirect_stderr, .fini = drop_conf)
{
	static const char *const files[] = {"options =\n", "options = ro,,umask=022,\n", "options = ,\n"};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		write_conf(files[i]);
		char cfg[96];
		snprintf(cfg, sizeof(cfg), "config=%s", conf);
		char *argv[] = {"iserfuse", "-o", cfg, "-o", ",ro,,queue_depth=5,", URL, "/mnt"};
		struct fuse_args args = FUSE_ARGS_INIT(7, argv);
		struct gw_config c = {0};
		struct gw_settings o = {0};
		cr_assert_eq(gw_settings_parse(&o, &args), 0, "file %zu", i);
		cr_assert_eq(gw_settings_load(&o, &args, &c), 0, "file %zu", i);
		cr_expect_eq(gw_settings_num(&o, GW_OPT_QUEUE_DEPTH), 5);
		cr_expect(gw_settings_ro(&o));
		/* what main does next: libfuse takes every option that is left */
		struct fuse_cmdline_opts cmd = {0};
		cr_assert_eq(fuse_parse_cmdline(&args, &cmd), 0);
		static const struct fuse_lowlevel_ops ops;
		struct fuse_session *se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
		cr_expect_not_null(se, "file %zu: libfuse refused the options left", i);
		if (se)
			fuse_session_destroy(se);
		free(cmd.mountpoint);
		gw_config_free(&c);
		gw_settings_free(&o);
		fuse_opt_free_args(&args);
		drop_conf();
	}
	fflush(stderr);
	cr_expect_stderr_eq_str("");
}

Test(settings, multipath_off, .init = cr_redirect_stderr, .fini = drop_conf)
{
	struct gw_settings o;
	write_conf("");
	cr_assert_eq(load(&o, "multipath=off"), 0);
	cr_expect_not(gw_settings_multipath(&o));
	gw_settings_free(&o);
}

Test(settings, configuration_file, .init = cr_redirect_stderr, .fini = drop_conf)
{
	struct gw_settings o;
	const struct gw_portal *p;
	/* the file's portals when the command line has none; the command line's replace them */
	write_conf("options = portal=203.0.113.1, portal=203.0.113.2:3261, sessions=3, path_selector=round-robin\n");
	cr_assert_eq(load(&o, NULL), 0);
	cr_assert_eq(gw_settings_portals(&o, &p), 2);
	cr_expect_str_eq(p[0].host, "203.0.113.1");
	cr_expect_str_eq(p[1].host, "203.0.113.2");
	cr_expect_eq(p[1].port, 3261);
	cr_expect_eq(gw_settings_num(&o, GW_OPT_SESSIONS), 3);
	cr_expect_eq(gw_settings_path_sel(&o), PATH_SEL_ROUND_ROBIN);
	gw_settings_free(&o);
	cr_assert_eq(load(&o, "portal=[2001:db8::2]:3262,path_selector=least-outstanding"), 0);
	cr_assert_eq(gw_settings_portals(&o, &p), 1);
	cr_expect_str_eq(p[0].host, "2001:db8::2");
	cr_expect_eq(p[0].port, 3262);
	cr_expect_eq(gw_settings_num(&o, GW_OPT_SESSIONS), 3);
	cr_expect_eq(gw_settings_path_sel(&o), PATH_SEL_LEAST_OUTSTANDING);
	gw_settings_free(&o);
	drop_conf();
	/* a bad value in the file names the file; multipath=off there refuses the command line's portal */
	write_conf("options = path_selector=random\n");
	cr_expect_eq(load(&o, NULL), -1);
	gw_settings_free(&o);
	char want[256];
	snprintf(want, sizeof(want),
		 "iserfuse: %s:1: bad option 'path_selector=random': least-outstanding or round-robin expected\n",
		 conf);
	drop_conf();
	write_conf("# multipath off\n\noptions = multipath=off\n");
	cr_expect_eq(load(&o, "portal=203.0.113.1"), -1);
	gw_settings_free(&o);
	snprintf(want + strlen(want), sizeof(want) - strlen(want),
		 "iserfuse: %s:3: bad option 'multipath=off': portal= needs multipath=on\n", conf);
	fflush(stderr);
	cr_expect_stderr_eq_str(want);
}

/* Every error about a value from the configuration file names the file and the line it is on. */
Test(settings, file_errors_name_file_and_line, .init = cr_redirect_stderr, .fini = drop_conf)
{
	static const char *const files[] = {
		"# the global options\noptions = ro, queue_depth=0\n[lab]\nurl = iscsi://h/iqn.2026-11.org.example:x\n",
		"options = ro\n[lab]\nurl = iscsi://h/iqn.2026-11.org.example:x\n\noptions = cmd_timeout\n",
		"options = ro\n[lab]\noptions = sessions=2\nurl = iscsi://h/iqn.2026-11.org.example:x\n"
		"options = multipath=off\n",
		"\noptions = log_level=loud\n[lab]\nurl = iscsi://h/iqn.2026-11.org.example:x\n",
		"initiator_name = iqn.2026-11.org.example:ok\ninitiator_name = x\n",
		"\n\ninitiator_name = not an iqn\n[lab]\nurl = iscsi://h/iqn.2026-11.org.example:x\n",
		"options = ro\n[lab]\nurl = iscsi://h/iqn.2026-11.org.example:x\noptions = config=/x\n",
		"[lab]\nurl = iscsi://h/iqn.2026-11.org.example:x\noptions = multipath=off,sessions=2\n",
		"\n\noptions = ro,,frobnicate\n[lab]\nurl = iscsi://h/iqn.2026-11.org.example:x\n",
		"options = ro\n[lab]\nurl = iscsi://h/iqn.2026-11.org.example:x\noptions = -f\n",
		"options = header_digest=crc32c\n[lab]\n\noptions = data_digest=md5\nurl = iscsi://h/iqn.2026-11.org.example:x\n",
	};
	static const char *const want[] = {
		":2: bad option 'queue_depth=0': an integer in 1..4096 expected",
		":5: option 'cmd_timeout' needs a value: -o cmd_timeout=S",
		":5: key 'options' given twice in lab",
		":2: bad option 'log_level=loud': error, warn, info or debug expected",
		":2: key 'initiator_name' given twice in the global part",
		":3: bad option 'initiator_name=not an iqn': only letters, digits, '-', '.' and ':' are allowed (RFC 7143 §4.2.7)",
		":4: config=, --list, --help and --version belong on the command line",
		":3: bad option 'multipath=off': sessions=2 needs multipath=on",
		":3: unknown option 'frobnicate'",
		":4: unknown option '-f'",
		"",
	};
	char expected[4096] = "";
	struct gw_settings o;
	struct iscsi_neg_config neg;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		write_conf(files[i]);
		char cfg[96];
		snprintf(cfg, sizeof(cfg), "config=%s", conf);
		char *argv[] = {"iserfuse", "-o", cfg, "lab", "/mnt"};
		struct fuse_args args = FUSE_ARGS_INIT(5, argv);
		struct gw_config c = {0};
		memset(&o, 0, sizeof(o));
		int rc = gw_settings_parse(&o, &args);
		if (!rc)
			rc = gw_settings_load(&o, &args, &c);
		if (want[i][0]) {
			cr_expect_eq(rc, -1, "file %zu accepted", i);
			snprintf(expected + strlen(expected), sizeof(expected) - strlen(expected), "iserfuse: %s%s\n",
				 conf, want[i]);
		} else {
			/* the digests are checked later, against the URL's: the option's line, not the section's */
			cr_expect_eq(rc, 0);
			iscsi_neg_config_default(&neg);
			struct iscsi_url u = {0};
			cr_expect_eq(gw_settings_digests(&neg, &u, &o), -1);
			snprintf(expected + strlen(expected), sizeof(expected) - strlen(expected),
				 "iserfuse: %s:4: bad option 'data_digest=md5': none, crc32c or auto expected\n", conf);
		}
		gw_config_free(&c);
		gw_settings_free(&o);
		fuse_opt_free_args(&args);
		drop_conf();
	}
	fflush(stderr);
	cr_expect_stderr_eq_str(expected);
}
