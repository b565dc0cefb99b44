/* SPDX-License-Identifier: MIT */
/*
 * A portal's address (RFC 7143 §13.8: host, port), for telling portals
 * apart by the address they lead to rather than by how they are spelt:
 * 127.0.0.1, 127.1, 0x7f000001 and ::ffff:127.0.0.1 are one portal.
 *
 * Two ways to get one: iscsi_portal_addr_numeric takes numeric addresses
 * only and never asks a name service (for anything a target sends);
 * iscsi_portal_addr_resolve also resolves host names (for the names a
 * user gives).  Pure otherwise: no connection is made.
 */
#ifndef ISERFUSE_PORTAL_ADDR_H
#define ISERFUSE_PORTAL_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* Room for any canonical numeric host, scope id included ("fe80::1%eth0"). */
#define ISCSI_PORTAL_ADDR_HOST_MAX 64

struct iscsi_portal_addr {
	struct sockaddr_storage ss; /* AF_INET, or AF_INET6 (never an IPv4-mapped one) */
	socklen_t len;
};

/*
 * host (an address; IPv6 without brackets, a %scope allowed) and port
 * (1..65535) as an address, without any name lookup (getaddrinfo with
 * AI_NUMERICHOST | AI_NUMERICSERV): the spellings inet_aton takes (127.1,
 * 0x7f000001, 0177.0.0.1) are IPv4 addresses, and an IPv4-mapped IPv6
 * address (::ffff:a.b.c.d) is folded to IPv4.  Returns 0 with *out
 * filled, or -EINVAL: host is not a numeric address (a host name among
 * them), or the port is out of range.
 */
int iscsi_portal_addr_numeric(const char *host, unsigned port, struct iscsi_portal_addr *out);

/*
 * As iscsi_portal_addr_numeric, but a host name is resolved too
 * (getaddrinfo, the first TCP address it gives): only for names the user
 * gave.  Blocks for as long as the name service takes.  Returns 0, or
 * -EINVAL (bad port), -ENOENT (the name does not resolve, or the lookup
 * failed).
 */
int iscsi_portal_addr_resolve(const char *host, unsigned port, struct iscsi_portal_addr *out);

/* Whether a and b are the same address and port (IPv6: the scope id too). */
bool iscsi_portal_addr_same(const struct iscsi_portal_addr *a, const struct iscsi_portal_addr *b);

/*
 * a's address in its one numeric spelling (inet_ntop: "127.0.0.1",
 * "2001:db8::1", "fe80::1%eth0"; IPv6 without brackets) into host (cap
 * bytes, ISCSI_PORTAL_ADDR_HOST_MAX is enough).  Returns whether it is
 * IPv6.
 */
bool iscsi_portal_addr_host(const struct iscsi_portal_addr *a, char *host, size_t cap);

#endif
