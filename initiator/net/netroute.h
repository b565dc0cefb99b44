/* SPDX-License-Identifier: MIT */
/*
 * The kernel's route to a portal, asked over rtnetlink with libnl-route-3
 * (an RTM_GETROUTE request for the destination, as `ip route get` sends):
 * the output interface, the preferred source address and the gateway.
 * Synchronous, on the caller's thread; one netlink socket per lookup,
 * closed before returning.  Thread-safe (no shared state).
 */
#ifndef ISERFUSE_NETROUTE_H
#define ISERFUSE_NETROUTE_H

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

struct iscsi_route {
	int family;                       /* AF_INET or AF_INET6 */
	bool local;                       /* RTN_LOCAL: the destination is an address of this host */
	int ifindex;                      /* output interface index */
	char ifname[IF_NAMESIZE];         /* its name ("lo" for local routes) */
	bool have_src, have_gateway;
	struct sockaddr_storage src;      /* preferred source address (RTA_PREFSRC), port 0 */
	struct sockaddr_storage gateway;  /* next hop (RTA_GATEWAY), port 0; only if have_gateway */
};

/*
 * The route to dst (AF_INET or AF_INET6; the port is ignored; an IPv6
 * scope id is passed as the output interface) into *out (cleared first).
 * Returns 0, -EAFNOSUPPORT for another family, -ENETUNREACH when the
 * kernel has no route (or an unreachable/prohibit/blackhole one:
 * -EHOSTUNREACH, -EACCES, -EINVAL as it answers), -ENODEV if the output
 * interface vanished before its name was read, or another negative errno
 * (the netlink socket).
 */
int iscsi_route_lookup(const struct sockaddr *dst, struct iscsi_route *out);

/*
 * r as `ip route get` words: "dev NAME src ADDR" plus " via GW" when there
 * is a gateway, " local" for a local route, into out (cap bytes).
 * Returns the length snprintf gives.
 */
int iscsi_route_format(const struct iscsi_route *r, char *out, size_t cap);

#endif
