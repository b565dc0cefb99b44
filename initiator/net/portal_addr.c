/* SPDX-License-Identifier: MIT */
/* Portal addresses (see portal_addr.h). */
#include "portal_addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

/* getaddrinfo's first TCP address into out, an IPv4-mapped IPv6 one folded to IPv4. */
static int lookup(const char *host, unsigned port, int flags, struct iscsi_portal_addr *out)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = flags | AI_NUMERICSERV};
	struct addrinfo *ai = NULL;
	char service[8];

	memset(out, 0, sizeof(*out));
	if (port == 0 || port > 65535)
		return -EINVAL;
	snprintf(service, sizeof(service), "%u", port);
	if (getaddrinfo(host, service, &hints, &ai) || !ai)
		return (flags & AI_NUMERICHOST) ? -EINVAL : -ENOENT;
	int rc = 0;
	if (ai->ai_family == AF_INET6 && ai->ai_addrlen >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ai->ai_addr;
		if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
			struct sockaddr_in *s4 = (struct sockaddr_in *)&out->ss;
			s4->sin_family = AF_INET;
			s4->sin_port = s6->sin6_port;
			memcpy(&s4->sin_addr, &s6->sin6_addr.s6_addr[12], 4);
			out->len = sizeof(*s4);
		} else {
			memcpy(&out->ss, s6, sizeof(*s6));
			out->len = sizeof(*s6);
		}
	} else if (ai->ai_family == AF_INET && ai->ai_addrlen >= sizeof(struct sockaddr_in)) {
		memcpy(&out->ss, ai->ai_addr, sizeof(struct sockaddr_in));
		out->len = sizeof(struct sockaddr_in);
	} else {
		rc = (flags & AI_NUMERICHOST) ? -EINVAL : -ENOENT;
	}
	freeaddrinfo(ai);
	return rc;
}

int iscsi_portal_addr_numeric(const char *host, unsigned port, struct iscsi_portal_addr *out)
{
	return lookup(host, port, AI_NUMERICHOST, out);
}

int iscsi_portal_addr_resolve(const char *host, unsigned port, struct iscsi_portal_addr *out)
{
	int rc = iscsi_portal_addr_numeric(host, port, out);
	if (rc == 0 || port == 0 || port > 65535)
		return rc;
	return lookup(host, port, 0, out);
}

bool iscsi_portal_addr_same(const struct iscsi_portal_addr *a, const struct iscsi_portal_addr *b)
{
	if (a->ss.ss_family != b->ss.ss_family)
		return false;
	if (a->ss.ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)&a->ss, *y = (const void *)&b->ss;
		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	if (a->ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *x = (const void *)&a->ss, *y = (const void *)&b->ss;
		return x->sin6_port == y->sin6_port && x->sin6_scope_id == y->sin6_scope_id &&
		       !memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr));
	}
	return false;
}

bool iscsi_portal_addr_host(const struct iscsi_portal_addr *a, char *host, size_t cap)
{
	char buf[INET6_ADDRSTRLEN] = "?", scope[IF_NAMESIZE + 2] = "";
	if (a->ss.ss_family == AF_INET) {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)&a->ss)->sin_addr, buf, sizeof(buf));
		snprintf(host, cap, "%s", buf);
		return false;
	}
	const struct sockaddr_in6 *s6 = (const void *)&a->ss;
	inet_ntop(AF_INET6, &s6->sin6_addr, buf, sizeof(buf));
	if (s6->sin6_scope_id) {
		char ifname[IF_NAMESIZE];
		if (if_indextoname(s6->sin6_scope_id, ifname))
			snprintf(scope, sizeof(scope), "%%%s", ifname);
		else
			snprintf(scope, sizeof(scope), "%%%u", (unsigned)s6->sin6_scope_id);
	}
	snprintf(host, cap, "%s%s", buf, scope);
	return true;
}
