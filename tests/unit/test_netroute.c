/* SPDX-License-Identifier: MIT */
/* initiator/net/netroute.c: RTM_GETROUTE lookups of the loopback routes (no root, no network). */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>

#include "initiator/net/netroute.h"

static struct sockaddr_in v4(const char *text)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(3260)};
	cr_assert_eq(inet_pton(AF_INET, text, &sin.sin_addr), 1);
	return sin;
}

static const char *src_text(const struct iscsi_route *r, char *buf, size_t cap)
{
	const void *a = r->family == AF_INET ? (const void *)&((const struct sockaddr_in *)&r->src)->sin_addr
					     : (const void *)&((const struct sockaddr_in6 *)&r->src)->sin6_addr;
	return inet_ntop(r->family, a, buf, (socklen_t)cap);
}

Test(netroute, loopback_v4)
{
	struct sockaddr_in dst = v4("127.0.0.1");
	struct iscsi_route r;
	cr_assert_eq(iscsi_route_lookup((struct sockaddr *)&dst, &r), 0);
	cr_assert_eq(r.family, AF_INET);
	cr_assert(r.local);
	cr_assert_str_eq(r.ifname, "lo");
	cr_assert_eq(r.ifindex, (int)if_nametoindex("lo"));
	cr_assert(r.have_src);
	char buf[64];
	cr_assert_str_eq(src_text(&r, buf, sizeof(buf)), "127.0.0.1");
	cr_assert_not(r.have_gateway);
	char line[128];
	iscsi_route_format(&r, line, sizeof(line));
	cr_assert_str_eq(line, "dev lo src 127.0.0.1 local");
}

Test(netroute, loopback_other_address_has_src_127_0_0_1)
{
	struct sockaddr_in dst = v4("127.0.0.2");
	struct iscsi_route r;
	cr_assert_eq(iscsi_route_lookup((struct sockaddr *)&dst, &r), 0);
	cr_assert(r.local);
	cr_assert_str_eq(r.ifname, "lo");
	char buf[64];
	cr_assert_str_eq(src_text(&r, buf, sizeof(buf)), "127.0.0.1");
}

Test(netroute, loopback_v6)
{
	struct sockaddr_in6 dst = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
	struct iscsi_route r;
	int rc = iscsi_route_lookup((struct sockaddr *)&dst, &r);
	if (rc == -ENETUNREACH || rc == -EHOSTUNREACH)
		cr_skip_test("no IPv6 loopback route here");
	cr_assert_eq(rc, 0, "rc %d", rc);
	cr_assert_eq(r.family, AF_INET6);
	cr_assert(r.local);
	cr_assert_str_eq(r.ifname, "lo");
	char buf[64];
	cr_assert(r.have_src);
	cr_assert_str_eq(src_text(&r, buf, sizeof(buf)), "::1");
}

Test(netroute, other_families_are_refused)
{
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	struct iscsi_route r;
	r.ifindex = 7;
	cr_assert_eq(iscsi_route_lookup((struct sockaddr *)&un, &r), -EAFNOSUPPORT);
	cr_assert_eq(r.ifindex, 0);
}

Test(netroute, format_with_gateway)
{
	struct iscsi_route r = {.family = AF_INET, .ifindex = 3, .have_src = true, .have_gateway = true};
	snprintf(r.ifname, sizeof(r.ifname), "eth0");
	struct sockaddr_in *s = (struct sockaddr_in *)&r.src, *g = (struct sockaddr_in *)&r.gateway;
	s->sin_family = g->sin_family = AF_INET;
	inet_pton(AF_INET, "198.51.100.2", &s->sin_addr);
	inet_pton(AF_INET, "198.51.100.1", &g->sin_addr);
	char line[128];
	iscsi_route_format(&r, line, sizeof(line));
	cr_assert_str_eq(line, "dev eth0 src 198.51.100.2 via 198.51.100.1");
}
