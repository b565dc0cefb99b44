/* SPDX-License-Identifier: MIT */
/*
 * The link/route watcher (see netwatch.h).  The thread polls the netlink
 * socket (non-blocking) and an eventfd; netwatch_stop writes the eventfd
 * and joins.  Messages are parsed here: links from struct ifinfomsg and
 * its attributes, routes by libnl-route-3 (rtnl_route_parse).
 */
#include "netwatch.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <net/if.h>
#include <linux/rtnetlink.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/route/nexthop.h>
#include <netlink/route/route.h>

#include "initiator/util/thread.h"

/* Receive buffer: room for a burst (a link going down withdraws its routes one message each). */
#define NETWATCH_RCVBUF (1 << 20)

struct netwatch {
	struct nl_sock *sk; /* the thread's, after start */
	int efd;            /* stop request: written by netwatch_stop */
	netwatch_fn fn;
	void *arg;
	pthread_t thread;
};

static int parse_link(const struct nlmsghdr *nlh, struct netwatch_event *ev)
{
	struct nlattr *tb[IFLA_MAX + 1];
	if (!nlmsg_valid_hdr(nlh, sizeof(struct ifinfomsg)) ||
	    nlmsg_parse((struct nlmsghdr *)nlh, sizeof(struct ifinfomsg), tb, IFLA_MAX, NULL) < 0)
		return -EPROTO;
	const struct ifinfomsg *ifi = nlmsg_data(nlh);
	ev->kind = NETWATCH_LINK;
	ev->ifindex = ifi->ifi_index;
	ev->up = (ifi->ifi_flags & IFF_UP) != 0;
	ev->running = (ifi->ifi_flags & IFF_RUNNING) != 0;
	ev->removed = nlh->nlmsg_type == RTM_DELLINK;
	if (tb[IFLA_IFNAME])
		snprintf(ev->ifname, sizeof(ev->ifname), "%.*s", (int)nla_len(tb[IFLA_IFNAME]),
			 (const char *)nla_data(tb[IFLA_IFNAME]));
	return 0;
}

static int parse_route(const struct nlmsghdr *nlh, struct netwatch_event *ev)
{
	struct rtnl_route *route = NULL;
	if (!nlmsg_valid_hdr(nlh, sizeof(struct rtmsg)) || rtnl_route_parse((struct nlmsghdr *)nlh, &route) < 0)
		return -EPROTO;
	ev->kind = NETWATCH_ROUTE;
	ev->removed = nlh->nlmsg_type == RTM_DELROUTE;
	ev->family = rtnl_route_get_family(route);
	ev->table = rtnl_route_get_table(route);
	struct nl_addr *dst = rtnl_route_get_dst(route);
	if (dst) {
		ev->dst_len = nl_addr_get_prefixlen(dst);
		size_t len = nl_addr_get_len(dst);
		if (ev->family == AF_INET && len == 4) {
			struct sockaddr_in *sin = (struct sockaddr_in *)&ev->dst;
			sin->sin_family = AF_INET;
			memcpy(&sin->sin_addr, nl_addr_get_binary_addr(dst), 4);
		} else if (ev->family == AF_INET6 && len == 16) {
			struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ev->dst;
			sin6->sin6_family = AF_INET6;
			memcpy(&sin6->sin6_addr, nl_addr_get_binary_addr(dst), 16);
		} else {
			ev->dst.ss_family = (sa_family_t)ev->family; /* a default route: no address bytes */
		}
	}
	if (rtnl_route_get_nnexthops(route) > 0)
		ev->ifindex = rtnl_route_nh_get_ifindex(rtnl_route_nexthop_n(route, 0));
	rtnl_route_put(route);
	return 0;
}

int netwatch_parse(const struct nlmsghdr *nlh, struct netwatch_event *ev)
{
	memset(ev, 0, sizeof(*ev));
	switch (nlh->nlmsg_type) {
	case RTM_NEWLINK:
	case RTM_DELLINK:
		return parse_link(nlh, ev);
	case RTM_NEWROUTE:
	case RTM_DELROUTE:
		return parse_route(nlh, ev);
	default:
		return -ENOENT;
	}
}

static int on_valid(struct nl_msg *msg, void *arg)
{
	struct netwatch *w = arg;
	struct netwatch_event ev;
	if (netwatch_parse(nlmsg_hdr(msg), &ev) == 0)
		w->fn(w->arg, &ev);
	return NL_OK;
}

static void *watch_thread(void *arg)
{
	struct netwatch *w = arg;
	struct pollfd pfd[2] = {{.fd = nl_socket_get_fd(w->sk), .events = POLLIN}, {.fd = w->efd, .events = POLLIN}};
	for (;;) {
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[1].revents)
			break;
		if (!pfd[0].revents)
			continue;
		int rc = nl_recvmsgs_default(w->sk);
		if (rc == -NLE_NOMEM) { /* ENOBUFS: the kernel dropped messages for us */
			struct netwatch_event ev = {.kind = NETWATCH_OVERRUN};
			w->fn(w->arg, &ev);
		}
	}
	return NULL;
}

int netwatch_start(netwatch_fn fn, void *arg, struct netwatch **out)
{
	*out = NULL;
	struct netwatch *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->fn = fn;
	w->arg = arg;
	w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	int rc = w->efd < 0 ? -errno : 0;
	if (rc == 0 && !(w->sk = nl_socket_alloc()))
		rc = -ENOMEM;
	if (rc == 0) {
		nl_socket_disable_seq_check(w->sk);
		nl_socket_modify_cb(w->sk, NL_CB_VALID, NL_CB_CUSTOM, on_valid, w);
		if (nl_connect(w->sk, NETLINK_ROUTE) < 0 ||
		    nl_socket_add_memberships(w->sk, RTNLGRP_LINK, RTNLGRP_IPV4_ROUTE, RTNLGRP_IPV6_ROUTE, 0) < 0 ||
		    nl_socket_set_nonblocking(w->sk) < 0)
			rc = -EIO;
		else
			nl_socket_set_buffer_size(w->sk, NETWATCH_RCVBUF, 0); /* best effort: the default works too */
	}
	if (rc == 0) {
		int e = thread_start_quiet(&w->thread, watch_thread, w);
		rc = -e;
	}
	if (rc) {
		if (w->sk)
			nl_socket_free(w->sk);
		if (w->efd >= 0)
			close(w->efd);
		free(w);
		return rc;
	}
	*out = w;
	return 0;
}

void netwatch_stop(struct netwatch *w)
{
	if (!w)
		return;
	uint64_t one = 1;
	while (write(w->efd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
	pthread_join(w->thread, NULL);
	nl_socket_free(w->sk);
	close(w->efd);
	free(w);
}
