/* SPDX-License-Identifier: MIT */
/*
 * rtnetlink route lookup (see netroute.h): an RTM_GETROUTE request with
 * RTA_DST (and RTA_OIF for a scoped IPv6 address) built and sent with
 * libnl-3, the answer parsed by libnl-route-3 (rtnl_route_parse).  The
 * kernel's error is kept as an errno (libnl's own error codes lose
 * ENETUNREACH).
 */
#include "netroute.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <linux/rtnetlink.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/route/nexthop.h>
#include <netlink/route/route.h>

/* What the receive callbacks leave. */
struct lookup {
	struct iscsi_route *out;
	int err;    /* the kernel's negative errno, or a parse failure */
	bool done;  /* a route or an error arrived */
	uint8_t type;
};

/* An nl_addr into a sockaddr_storage of family (port 0).  false if it does not fit. */
static bool addr_to_sockaddr(struct nl_addr *a, int family, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (!a || nl_addr_get_family(a) != family)
		return false;
	if (family == AF_INET && nl_addr_get_len(a) == 4) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;
		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr, nl_addr_get_binary_addr(a), 4);
		return true;
	}
	if (family == AF_INET6 && nl_addr_get_len(a) == 16) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_addr, nl_addr_get_binary_addr(a), 16);
		return true;
	}
	return false;
}

static int on_route(struct nl_msg *msg, void *arg)
{
	struct lookup *lk = arg;
	struct rtnl_route *route = NULL;
	if (lk->done)
		return NL_SKIP;
	if (nlmsg_hdr(msg)->nlmsg_type != RTM_NEWROUTE || rtnl_route_parse(nlmsg_hdr(msg), &route) < 0) {
		lk->err = -EPROTO;
		lk->done = true;
		return NL_STOP;
	}
	struct iscsi_route *out = lk->out;
	lk->type = rtnl_route_get_type(route);
	out->local = lk->type == RTN_LOCAL;
	out->have_src = addr_to_sockaddr(rtnl_route_get_pref_src(route), out->family, &out->src);
	if (rtnl_route_get_nnexthops(route) > 0) {
		struct rtnl_nexthop *nh = rtnl_route_nexthop_n(route, 0);
		out->ifindex = rtnl_route_nh_get_ifindex(nh);
		out->have_gateway = addr_to_sockaddr(rtnl_route_nh_get_gateway(nh), out->family, &out->gateway);
	}
	rtnl_route_put(route);
	lk->done = true;
	return NL_OK;
}

static int on_error(struct sockaddr_nl *nla, struct nlmsgerr *e, void *arg)
{
	(void)nla;
	struct lookup *lk = arg;
	if (!lk->done) {
		lk->err = e->error < 0 ? e->error : -EPROTO;
		lk->done = true;
	}
	return NL_STOP;
}

/* The request: struct rtmsg for one host address, RTA_DST, RTA_OIF if oif. */
static struct nl_msg *build_request(int family, const void *addr, size_t alen, int oif)
{
	struct nl_msg *msg = nlmsg_alloc_simple(RTM_GETROUTE, NLM_F_REQUEST);
	if (!msg)
		return NULL;
	struct rtmsg rtm = {
		.rtm_family = (unsigned char)family,
		.rtm_dst_len = (unsigned char)(alen * 8),
	};
	if (nlmsg_append(msg, &rtm, sizeof(rtm), NLMSG_ALIGNTO) < 0 || nla_put(msg, RTA_DST, (int)alen, addr) < 0 ||
	    (oif && nla_put_u32(msg, RTA_OIF, (uint32_t)oif) < 0)) {
		nlmsg_free(msg);
		return NULL;
	}
	return msg;
}

int iscsi_route_lookup(const struct sockaddr *dst, struct iscsi_route *out)
{
	memset(out, 0, sizeof(*out));
	const void *addr;
	size_t alen;
	int oif = 0;
	if (dst->sa_family == AF_INET) {
		addr = &((const struct sockaddr_in *)dst)->sin_addr;
		alen = 4;
	} else if (dst->sa_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)dst;
		addr = &sin6->sin6_addr;
		alen = 16;
		oif = (int)sin6->sin6_scope_id;
	} else {
		return -EAFNOSUPPORT;
	}
	out->family = dst->sa_family;

	struct nl_sock *sk = nl_socket_alloc();
	if (!sk)
		return -ENOMEM;
	int rc = nl_connect(sk, NETLINK_ROUTE);
	if (rc < 0) {
		nl_socket_free(sk);
		return -EIO;
	}
	nl_socket_disable_auto_ack(sk); /* the answer alone: a route or an error */
	struct lookup lk = {.out = out};
	struct nl_msg *msg = build_request(dst->sa_family, addr, alen, oif);
	if (!msg) {
		rc = -ENOMEM;
		goto out;
	}
	nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, on_route, &lk);
	nl_socket_modify_err_cb(sk, NL_CB_CUSTOM, on_error, &lk);
	rc = nl_send_auto(sk, msg);
	nlmsg_free(msg);
	if (rc < 0) {
		rc = -EIO;
		goto out;
	}
	/* one answer: a RTM_NEWROUTE or an error message */
	while (!lk.done) {
		rc = nl_recvmsgs_default(sk);
		if (rc < 0 && !lk.done) {
			rc = -EIO;
			goto out;
		}
	}
	rc = lk.err;
	if (rc == 0 && out->ifindex <= 0)
		rc = -ENETUNREACH; /* a route without an output interface (multipath-only answers) */
	if (rc == 0 && !if_indextoname((unsigned)out->ifindex, out->ifname))
		rc = -ENODEV;
out:
	nl_socket_free(sk);
	if (rc)
		memset(out, 0, sizeof(*out));
	return rc;
}

static const char *ntop(const struct sockaddr_storage *ss, char *buf, size_t cap)
{
	const void *a = ss->ss_family == AF_INET ? (const void *)&((const struct sockaddr_in *)ss)->sin_addr
						: (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr;
	if (!inet_ntop(ss->ss_family, a, buf, (socklen_t)cap))
		snprintf(buf, cap, "?");
	return buf;
}

int iscsi_route_format(const struct iscsi_route *r, char *out, size_t cap)
{
	char src[INET6_ADDRSTRLEN] = "-", gw[INET6_ADDRSTRLEN] = "";
	if (r->have_src)
		ntop(&r->src, src, sizeof(src));
	if (r->have_gateway)
		ntop(&r->gateway, gw, sizeof(gw));
	return snprintf(out, cap, "dev %s src %s%s%s%s", r->ifname, src, r->have_gateway ? " via " : "", gw,
			r->local ? " local" : "");
}
