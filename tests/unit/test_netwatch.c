/* SPDX-License-Identifier: MIT */
/*
 * initiator/net/netwatch.c: rtnetlink link and route messages parsed into
 * events, and the watcher's start and stop (no root: the changes
 * themselves are made by tests/recovery/netroute.sh).
 */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <linux/rtnetlink.h>
#include <netlink/msg.h>
#include <string.h>
#include <time.h>

#include "initiator/net/netwatch.h"

Test(netwatch, link_down_and_up)
{
	struct nl_msg *m = nlmsg_alloc_simple(RTM_NEWLINK, 0);
	struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC, .ifi_index = 7, .ifi_flags = IFF_UP | IFF_BROADCAST};
	cr_assert_eq(nlmsg_append(m, &ifi, sizeof(ifi), NLMSG_ALIGNTO), 0);
	cr_assert_eq(nla_put_string(m, IFLA_IFNAME, "veth-a"), 0);
	struct netwatch_event ev;
	cr_assert_eq(netwatch_parse(nlmsg_hdr(m), &ev), 0);
	cr_assert_eq(ev.kind, NETWATCH_LINK);
	cr_assert_eq(ev.ifindex, 7);
	cr_assert_str_eq(ev.ifname, "veth-a");
	cr_assert(ev.up);
	cr_assert_not(ev.running);
	cr_assert_not(ev.removed);
	nlmsg_free(m);

	m = nlmsg_alloc_simple(RTM_DELLINK, 0);
	ifi.ifi_flags = 0;
	ifi.ifi_index = 9;
	cr_assert_eq(nlmsg_append(m, &ifi, sizeof(ifi), NLMSG_ALIGNTO), 0);
	cr_assert_eq(netwatch_parse(nlmsg_hdr(m), &ev), 0);
	cr_assert_eq(ev.ifindex, 9);
	cr_assert_str_eq(ev.ifname, "");
	cr_assert_not(ev.up);
	cr_assert(ev.removed);
	nlmsg_free(m);
}

Test(netwatch, route_removed)
{
	struct nl_msg *m = nlmsg_alloc_simple(RTM_DELROUTE, 0);
	struct rtmsg rtm = {.rtm_family = AF_INET, .rtm_dst_len = 24, .rtm_table = RT_TABLE_MAIN,
			    .rtm_type = RTN_UNICAST};
	cr_assert_eq(nlmsg_append(m, &rtm, sizeof(rtm), NLMSG_ALIGNTO), 0);
	struct in_addr dst;
	inet_pton(AF_INET, "192.0.2.0", &dst);
	cr_assert_eq(nla_put(m, RTA_DST, 4, &dst), 0);
	cr_assert_eq(nla_put_u32(m, RTA_OIF, 5), 0);
	cr_assert_eq(nla_put_u32(m, RTA_TABLE, RT_TABLE_MAIN), 0);
	struct netwatch_event ev;
	cr_assert_eq(netwatch_parse(nlmsg_hdr(m), &ev), 0);
	cr_assert_eq(ev.kind, NETWATCH_ROUTE);
	cr_assert(ev.removed);
	cr_assert_eq(ev.family, AF_INET);
	cr_assert_eq(ev.dst_len, 24);
	cr_assert_eq(ev.table, RT_TABLE_MAIN);
	cr_assert_eq(ev.ifindex, 5);
	cr_assert_eq(((struct sockaddr_in *)&ev.dst)->sin_addr.s_addr, dst.s_addr);
	nlmsg_free(m);
}

Test(netwatch, default_route_v6_added)
{
	struct nl_msg *m = nlmsg_alloc_simple(RTM_NEWROUTE, 0);
	struct rtmsg rtm = {.rtm_family = AF_INET6, .rtm_dst_len = 0, .rtm_table = RT_TABLE_MAIN,
			    .rtm_type = RTN_UNICAST};
	cr_assert_eq(nlmsg_append(m, &rtm, sizeof(rtm), NLMSG_ALIGNTO), 0);
	cr_assert_eq(nla_put_u32(m, RTA_OIF, 2), 0);
	struct netwatch_event ev;
	cr_assert_eq(netwatch_parse(nlmsg_hdr(m), &ev), 0);
	cr_assert_eq(ev.kind, NETWATCH_ROUTE);
	cr_assert_not(ev.removed);
	cr_assert_eq(ev.family, AF_INET6);
	cr_assert_eq(ev.dst_len, 0);
	cr_assert_eq(ev.ifindex, 2);
	nlmsg_free(m);
}

Test(netwatch, other_and_short_messages)
{
	struct nl_msg *m = nlmsg_alloc_simple(RTM_NEWADDR, 0);
	struct netwatch_event ev;
	cr_assert_eq(netwatch_parse(nlmsg_hdr(m), &ev), -ENOENT);
	nlmsg_free(m);
	/* a RTM_NEWLINK without its struct ifinfomsg */
	m = nlmsg_alloc_simple(RTM_NEWLINK, 0);
	cr_assert_eq(netwatch_parse(nlmsg_hdr(m), &ev), -EPROTO);
	nlmsg_free(m);
	m = nlmsg_alloc_simple(RTM_DELROUTE, 0);
	cr_assert_eq(netwatch_parse(nlmsg_hdr(m), &ev), -EPROTO);
	nlmsg_free(m);
}

static void count(void *arg, const struct netwatch_event *ev)
{
	(void)ev;
	__atomic_add_fetch((int *)arg, 1, __ATOMIC_RELAXED);
}

Test(netwatch, start_and_stop_promptly)
{
	int n = 0;
	for (int i = 0; i < 3; i++) {
		struct netwatch *w = NULL;
		cr_assert_eq(netwatch_start(count, &n, &w), 0);
		cr_assert_not_null(w);
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		netwatch_stop(w);
		clock_gettime(CLOCK_MONOTONIC, &b);
		long ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
		cr_assert_lt(ms, 100, "stop took %ld ms", ms);
	}
	netwatch_stop(NULL);
}
