/* SPDX-License-Identifier: MIT */
/* SendTargets answer parsing (RFC 7143 Appendix C, §13.8). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "initiator/login/discovery.h"

/* Build "a\0b\0..." from a list of entries. */
static size_t build(char *buf, size_t cap, const char *const *entries, size_t n)
{
	size_t len = 0;
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(entries[i]) + 1;
		cr_assert(len + l <= cap);
		memcpy(buf + len, entries[i], l);
		len += l;
	}
	return len;
}

#define BUILD(buf, ...)                                                                                        \
	build(buf, sizeof(buf), (const char *const[]){__VA_ARGS__},                                            \
	      sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *))

static void portal_is(const struct iscsi_portal *p, const char *host, unsigned port, int tpgt, bool ipv6)
{
	cr_expect_str_eq(p->host, host);
	cr_expect_eq(p->port, port, "port %u, want %u", p->port, port);
	cr_expect_eq(p->tpgt, tpgt, "tpgt %d, want %d", p->tpgt, tpgt);
	cr_expect_eq(p->ipv6, ipv6);
}

Test(sendtargets, several_targets_several_portals)
{
	char buf[1024];
	size_t len = BUILD(buf, "TargetName=iqn.2026-11.org.example:one", "TargetAddress=10.0.0.1:3260,1",
			   "TargetAddress=10.0.0.2:3261,2", "TargetName=iqn.2026-11.org.example:two",
			   "TargetAlias=second", "TargetAddress=[fe80::1%eth0]:3262,3",
			   "TargetAddress=[2001:db8::5],4", "TargetAddress=storage.example.com",
			   "TargetName=eui.0123456789abcdef");
	struct iscsi_disc_list l;
	cr_assert_eq(iscsi_sendtargets_parse(buf, len, &l), 0);
	cr_assert_eq(l.ntargets, 3);
	cr_expect_not(l.truncated);
	cr_expect_eq(l.skipped, 0);
	cr_expect_str_eq(l.targets[0].name, "iqn.2026-11.org.example:one");
	cr_assert_eq(l.targets[0].nportals, 2);
	portal_is(&l.targets[0].portals[0], "10.0.0.1", 3260, 1, false);
	portal_is(&l.targets[0].portals[1], "10.0.0.2", 3261, 2, false);
	cr_expect_str_eq(l.targets[1].name, "iqn.2026-11.org.example:two");
	cr_assert_eq(l.targets[1].nportals, 3);
	portal_is(&l.targets[1].portals[0], "fe80::1%eth0", 3262, 3, true);
	portal_is(&l.targets[1].portals[1], "2001:db8::5", 3260, 4, true);
	portal_is(&l.targets[1].portals[2], "storage.example.com", 3260, -1, false);
	cr_expect_str_eq(l.targets[2].name, "eui.0123456789abcdef");
	cr_expect_eq(l.targets[2].nportals, 0);
	cr_expect_null(l.targets[2].portals);
	iscsi_disc_list_free(&l);
	cr_expect_eq(l.ntargets, 0);
	cr_expect_null(l.targets);
}

Test(sendtargets, empty_and_padding)
{
	struct iscsi_disc_list l;
	cr_assert_eq(iscsi_sendtargets_parse("", 0, &l), 0);
	cr_expect_eq(l.ntargets, 0);
	iscsi_disc_list_free(&l);

	char buf[128];
	size_t len = BUILD(buf, "TargetName=iqn.x:y", "TargetAddress=1.2.3.4:5,6");
	memset(buf + len, 0, 3); /* padding to a 4-byte boundary */
	cr_assert_eq(iscsi_sendtargets_parse(buf, len + 3, &l), 0);
	cr_assert_eq(l.ntargets, 1);
	cr_assert_eq(l.targets[0].nportals, 1);
	portal_is(&l.targets[0].portals[0], "1.2.3.4", 5, 6, false);
	iscsi_disc_list_free(&l);
}

Test(sendtargets, many_portals_grow)
{
	static char buf[8192];
	size_t len = 0;
	len += (size_t)sprintf(buf + len, "TargetName=iqn.x:many") + 1;
	for (unsigned i = 0; i < ISCSI_DISC_MAX_PORTALS + 5; i++)
		len += (size_t)sprintf(buf + len, "TargetAddress=10.0.%u.%u:%u,%u", i / 200, i % 200, 3260 + i, i) + 1;
	struct iscsi_disc_list l;
	cr_assert_eq(iscsi_sendtargets_parse(buf, len, &l), 0);
	cr_assert_eq(l.ntargets, 1);
	cr_assert_eq(l.targets[0].nportals, ISCSI_DISC_MAX_PORTALS);
	cr_expect(l.truncated);
	for (unsigned i = 0; i < ISCSI_DISC_MAX_PORTALS; i++) {
		char host[32];
		snprintf(host, sizeof(host), "10.0.%u.%u", i / 200, i % 200);
		portal_is(&l.targets[0].portals[i], host, 3260 + i, (int)i, false);
	}
	iscsi_disc_list_free(&l);
}

Test(sendtargets, too_many_targets_are_dropped)
{
	size_t cap = (ISCSI_DISC_MAX_TARGETS + 10) * 64;
	char *buf = malloc(cap);
	size_t len = 0;
	cr_assert_not_null(buf);
	for (unsigned i = 0; i < ISCSI_DISC_MAX_TARGETS + 10; i++) {
		len += (size_t)sprintf(buf + len, "TargetName=iqn.x:t%u", i) + 1;
		len += (size_t)sprintf(buf + len, "TargetAddress=127.0.0.1:%u,1", 1000 + i) + 1;
	}
	struct iscsi_disc_list l;
	cr_assert_eq(iscsi_sendtargets_parse(buf, len, &l), 0);
	cr_expect_eq(l.ntargets, ISCSI_DISC_MAX_TARGETS);
	cr_expect(l.truncated);
	cr_expect_str_eq(l.targets[ISCSI_DISC_MAX_TARGETS - 1].name, "iqn.x:t1023");
	cr_expect_eq(l.targets[ISCSI_DISC_MAX_TARGETS - 1].nportals, 1);
	iscsi_disc_list_free(&l);
	free(buf);
}

Test(sendtargets, malformed_addresses_are_skipped)
{
	char buf[1024];
	size_t len = BUILD(buf, "TargetName=iqn.x:y", "TargetAddress=", "TargetAddress=:3260,1",
			   "TargetAddress=host:0,1", "TargetAddress=host:65536,1", "TargetAddress=host:12a",
			   "TargetAddress=host:3260,65536", "TargetAddress=host:3260,", "TargetAddress=[::1",
			   "TargetAddress=[::1]x", "TargetAddress=[]:3260", "TargetAddress=ho st:1",
			   "TargetAddress=host:3260,1,2", "TargetAddress=h/x", "TargetAddress=good:1,1");
	struct iscsi_disc_list l;
	cr_assert_eq(iscsi_sendtargets_parse(buf, len, &l), 0);
	cr_assert_eq(l.ntargets, 1);
	cr_expect_eq(l.skipped, 13, "skipped %zu", l.skipped);
	cr_assert_eq(l.targets[0].nportals, 1);
	portal_is(&l.targets[0].portals[0], "good", 1, 1, false);
	iscsi_disc_list_free(&l);
}

Test(sendtargets, bare_ipv6_without_port)
{
	struct iscsi_portal p;
	cr_assert_eq(iscsi_portal_parse("fe80::2,7", &p), 0);
	portal_is(&p, "fe80::2", 3260, 7, true);
	cr_assert_eq(iscsi_portal_parse("[::1]:3260", &p), 0);
	portal_is(&p, "::1", 3260, -1, true);
	char out[300];
	iscsi_portal_format(&p, out, sizeof(out));
	cr_expect_str_eq(out, "[::1]:3260");
	cr_assert_eq(iscsi_portal_parse("10.1.1.1:860,12", &p), 0);
	iscsi_portal_format(&p, out, sizeof(out));
	cr_expect_str_eq(out, "10.1.1.1:860,12");
	char longhost[400];
	memset(longhost, 'a', sizeof(longhost) - 1);
	longhost[sizeof(longhost) - 1] = '\0';
	cr_expect_eq(iscsi_portal_parse(longhost, &p), -EINVAL);
}

Test(sendtargets, garbage)
{
	struct iscsi_disc_list l;
	/* no terminating NUL */
	cr_expect_eq(iscsi_sendtargets_parse("TargetName=iqn.x:y", 18, &l), -EPROTO);
	cr_expect_eq(l.ntargets, 0);
	/* no '=' */
	cr_expect_eq(iscsi_sendtargets_parse("TargetName\0", 11, &l), -EPROTO);
	/* empty key */
	cr_expect_eq(iscsi_sendtargets_parse("=x\0", 3, &l), -EPROTO);
	/* address before any name */
	cr_expect_eq(iscsi_sendtargets_parse("TargetAddress=1.2.3.4\0", 22, &l), -EPROTO);
	/* empty, non-printable, over-long names; the list is empty after a failure */
	char buf[1024];
	size_t len = BUILD(buf, "TargetName=iqn.x:ok", "TargetAddress=1.1.1.1", "TargetName=");
	cr_expect_eq(iscsi_sendtargets_parse(buf, len, &l), -EPROTO);
	cr_expect_eq(l.ntargets, 0);
	cr_expect_null(l.targets);
	len = BUILD(buf, "TargetName=iqn.x:a\x01b");
	cr_expect_eq(iscsi_sendtargets_parse(buf, len, &l), -EPROTO);
	len = BUILD(buf, "TargetName=iqn.x:a b");
	cr_expect_eq(iscsi_sendtargets_parse(buf, len, &l), -EPROTO);
	memcpy(buf, "TargetName=", 11);
	memset(buf + 11, 'n', ISCSI_NAME_MAX);
	buf[11 + ISCSI_NAME_MAX] = '\0';
	cr_expect_eq(iscsi_sendtargets_parse(buf, 12 + ISCSI_NAME_MAX, &l), -EPROTO);
	/* the longest name that fits is fine */
	buf[11 + ISCSI_NAME_MAX - 1] = '\0';
	cr_assert_eq(iscsi_sendtargets_parse(buf, 11 + ISCSI_NAME_MAX, &l), 0);
	cr_expect_eq(strlen(l.targets[0].name), ISCSI_NAME_MAX - 1);
	iscsi_disc_list_free(&l);
	/* unknown keys are ignored */
	len = BUILD(buf, "X-foo=bar", "TargetName=iqn.x:y", "Foo=1");
	cr_assert_eq(iscsi_sendtargets_parse(buf, len, &l), 0);
	cr_expect_eq(l.ntargets, 1);
	iscsi_disc_list_free(&l);
}

/* Random bytes never crash the parser and never leak (run under ASan). */
Test(sendtargets, random_bytes)
{
	static const char *const pieces[] = {"TargetName=", "TargetAddress=", "iqn.x:", "[", "]", ":", ",",
					     "1",           "65535",          "\0",     "=",  "a", "::", "\x80"};
	unsigned seed = 12345;
	char buf[512];
	for (int iter = 0; iter < 20000; iter++) {
		size_t len = 0;
		while (len < sizeof(buf) - 16) {
			seed = seed * 1103515245u + 12345u;
			unsigned r = (seed >> 16) % 20;
			if (r >= sizeof(pieces) / sizeof(pieces[0])) {
				if (r == 19)
					break;
				buf[len++] = (char)(seed >> 8);
				continue;
			}
			size_t pl = strlen(pieces[r]);
			if (pl == 0) {
				buf[len++] = '\0';
				continue;
			}
			memcpy(buf + len, pieces[r], pl);
			len += pl;
		}
		struct iscsi_disc_list l;
		int rc = iscsi_sendtargets_parse(buf, len, &l);
		cr_assert(rc == 0 || rc == -EPROTO);
		if (rc)
			cr_assert_eq(l.ntargets, 0);
		for (size_t i = 0; i < l.ntargets; i++)
			for (size_t j = 0; j < l.targets[i].nportals; j++)
				cr_assert(l.targets[i].portals[j].port >= 1 && l.targets[i].portals[j].port <= 65535);
		iscsi_disc_list_free(&l);
	}
}

/*
 * The portals a target reports, as the daemon may use them: numeric
 * addresses only (a name is skipped, never looked up), each in its one
 * spelling, one address once (inet_aton's forms and IPv4-mapped IPv6 are
 * the IPv4 address), the first one's tag kept.
 */
Test(sendtargets, reported_portals_numeric_and_by_address)
{
	char buf[1024];
	size_t len = BUILD(buf, "TargetName=iqn.2026-11.org.example:a", "TargetAddress=127.0.0.1:3260,1",
			   "TargetAddress=127.1:3260,2", "TargetAddress=0x7f000001:3260,3",
			   "TargetAddress=[::ffff:127.0.0.1]:3260,4", "TargetAddress=0177.0.0.1,5",
			   "TargetAddress=san.example:3260,1", "TargetAddress=localhost:3261,1",
			   "TargetAddress=[::ffff:192.0.2.7]:3262,2", "TargetAddress=[2001:DB8:0::1]:3260,1",
			   "TargetAddress=[2001:db8::1],9", "TargetAddress=127.0.0.1:3261,1");
	struct iscsi_disc_list l;
	cr_assert_eq(iscsi_sendtargets_parse(buf, len, &l), 0);
	cr_assert_eq(l.targets[0].nportals, 11);
	struct iscsi_portal out[ISCSI_DISC_MAX_PORTALS];
	struct iscsi_portal_addr addrs[ISCSI_DISC_MAX_PORTALS];
	size_t n = iscsi_disc_portals(&l.targets[0], out, addrs, ISCSI_DISC_MAX_PORTALS);
	cr_assert_eq(n, 4);
	portal_is(&out[0], "127.0.0.1", 3260, 1, false);
	portal_is(&out[1], "192.0.2.7", 3262, 2, false);
	portal_is(&out[2], "2001:db8::1", 3260, 1, true);
	portal_is(&out[3], "127.0.0.1", 3261, 1, false);
	cr_expect_eq(iscsi_disc_portals(&l.targets[0], out, NULL, 2), 2); /* cap, no addresses wanted */

	/* iscsi_disc_lists: by address, the name without case; names the target sent never match */
	struct iscsi_portal_addr a;
	cr_assert_eq(iscsi_portal_addr_numeric("127.1", 3261, &a), 0);
	cr_expect(iscsi_disc_lists(&l, "IQN.2026-11.org.example:A", &a));
	cr_assert_eq(iscsi_portal_addr_numeric("::ffff:192.0.2.7", 3262, &a), 0);
	cr_expect(iscsi_disc_lists(&l, "iqn.2026-11.org.example:a", &a));
	cr_assert_eq(iscsi_portal_addr_numeric("192.0.2.7", 3260, &a), 0);
	cr_expect_not(iscsi_disc_lists(&l, "iqn.2026-11.org.example:a", &a)); /* another port */
	cr_assert_eq(iscsi_portal_addr_numeric("127.0.0.1", 3260, &a), 0);
	cr_expect_not(iscsi_disc_lists(&l, "iqn.2026-11.org.example:b", &a));
	iscsi_disc_list_free(&l);

	cr_expect_eq(iscsi_portal_addr_numeric("san.example", 3260, &a), -EINVAL);
	cr_expect_eq(iscsi_portal_addr_numeric("localhost", 3260, &a), -EINVAL);
	cr_expect_eq(iscsi_portal_addr_numeric("127.0.0.1", 0, &a), -EINVAL);
	cr_expect_eq(iscsi_portal_addr_numeric("127.0.0.1", 65536, &a), -EINVAL);
	char host[ISCSI_PORTAL_ADDR_HOST_MAX];
	cr_assert_eq(iscsi_portal_addr_numeric("0x7f000001", 3260, &a), 0);
	cr_expect_not(iscsi_portal_addr_host(&a, host, sizeof(host)));
	cr_expect_str_eq(host, "127.0.0.1");
}
