/* SPDX-License-Identifier: MIT */
/*
 * Link and route changes from the kernel: an rtnetlink socket (libnl-3)
 * subscribed to RTNLGRP_LINK, RTNLGRP_IPV4_ROUTE and RTNLGRP_IPV6_ROUTE,
 * read on a thread of its own (started with thread_start_quiet, so it
 * never takes a stop signal) that calls the caller's function once per
 * change.  The watcher owns its socket, its eventfd and its thread; the
 * caller owns the watcher (netwatch_start .. netwatch_stop).
 */
#ifndef ISERFUSE_NETWATCH_H
#define ISERFUSE_NETWATCH_H

#include <linux/netlink.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

/* Interface names are IFNAMSIZ (16) bytes with the NUL; <net/if.h> and <linux/if.h> cannot both be included. */

enum netwatch_kind {
	NETWATCH_LINK,    /* RTM_NEWLINK / RTM_DELLINK */
	NETWATCH_ROUTE,   /* RTM_NEWROUTE / RTM_DELROUTE */
	NETWATCH_OVERRUN, /* the socket's receive buffer overflowed (ENOBUFS): changes were lost, look again */
};

struct netwatch_event {
	enum netwatch_kind kind;
	int ifindex;               /* link: the interface; route: the first next hop's output interface, 0 if none */
	char ifname[16];           /* link: IFLA_IFNAME, "" if the message had none */
	bool up;                   /* link: IFF_UP (administratively up) */
	bool running;              /* link: IFF_RUNNING (operationally up: carrier, dormant off) */
	bool removed;              /* link: RTM_DELLINK; route: RTM_DELROUTE (else added or changed) */
	int family;                /* route: AF_INET or AF_INET6 */
	struct sockaddr_storage dst; /* route: destination prefix address (all zero for a default route) */
	unsigned dst_len;          /* route: prefix length, bits */
	uint32_t table;            /* route: routing table (RT_TABLE_MAIN = 254, RT_TABLE_LOCAL = 255) */
};

/*
 * Called on the watcher's thread, once per event, in the kernel's order.
 * It must return soon (it holds up the next events) and must not call
 * netwatch_stop on its own watcher.  ev is valid during the call only.
 */
typedef void (*netwatch_fn)(void *arg, const struct netwatch_event *ev);

struct netwatch;

/*
 * Open the socket, join the three groups and start the thread; events
 * from changes made after it returns reach fn(arg, ev).  *out gets the
 * watcher.  Returns 0, or a negative errno (-ENOMEM, -EIO for a netlink
 * socket that cannot be opened or subscribed, pthread_create's error
 * negated); nothing is left running on failure.
 */
int netwatch_start(netwatch_fn fn, void *arg, struct netwatch **out);

/*
 * Stop the thread (woken through its eventfd, then joined: no call of fn
 * is running or will start once this returns), close the socket, free w.
 * w may be NULL.  Never call it from fn.
 */
void netwatch_stop(struct netwatch *w);

/*
 * One rtnetlink message into *ev (cleared first): RTM_NEWLINK/DELLINK and
 * RTM_NEWROUTE/DELROUTE.  Returns 0, -ENOENT for another message type,
 * -EPROTO for a message too short or malformed.  Pure; what the thread
 * uses, public for the tests.
 */
int netwatch_parse(const struct nlmsghdr *nlh, struct netwatch_event *ev);

#endif
