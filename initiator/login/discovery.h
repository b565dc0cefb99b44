/* SPDX-License-Identifier: MIT */
/*
 * SendTargets discovery (RFC 7143 §4.3, §11.10-11.11, §13.8, Appendix C):
 * log in to a portal with SessionType=Discovery, ask SendTargets=All,
 * collect the TargetName / TargetAddress list, log out.
 *
 * Runs on the caller's thread over the transport's blocking
 * send_pdu/recv_pdu; no event thread is started.  Everything the target
 * sends is bounded: total text, targets, portals per target, name and host
 * lengths.
 */
#ifndef ISERFUSE_DISCOVERY_H
#define ISERFUSE_DISCOVERY_H

#include <stdbool.h>
#include <stddef.h>

#include "chap.h"
#include "initiator/net/portal_addr.h"
#include "initiator/wire/text.h"
#include "initiator/transport/transport.h"
#include "initiator/net/url.h"

#define ISCSI_DISC_TEXT_MAX (1024u * 1024u) /* most SendTargets text accepted, bytes */
#define ISCSI_DISC_MAX_TARGETS 1024u        /* targets kept; more are dropped (truncated) */
#define ISCSI_DISC_MAX_PORTALS 32u          /* portals kept per target; more are dropped */

/* One TargetAddress (§13.8): host (no brackets), port, portal group tag. */
struct iscsi_portal {
	char host[ISCSI_URL_HOST_MAX];
	unsigned port;                 /* 1..65535; 3260 when the address names none */
	int tpgt;                      /* 0..65535, or -1 when the address names none */
	bool ipv6;                     /* the host was given in brackets (or holds ':') */
};

struct iscsi_disc_target {
	char name[ISCSI_NAME_MAX];
	size_t nportals;
	struct iscsi_portal *portals;  /* nportals entries (NULL when 0) */
};

struct iscsi_disc_list {
	size_t ntargets;
	struct iscsi_disc_target *targets; /* ntargets entries (NULL when 0) */
	bool truncated;                /* more targets or portals than the limits above were sent */
	size_t skipped;                /* malformed TargetAddress entries that were ignored */
};

struct iscsi_discovery_config {
	const struct iscsi_transport_ops *transport;
	void *transport_ctx;           /* passed to transport->connect (NULL for TCP) */
	char host[ISCSI_URL_HOST_MAX];
	unsigned port;
	char initiator_name[ISCSI_NAME_MAX];
	struct iscsi_neg_config neg;
	int timeout_ms;                /* connect, and each PDU exchange */
	/*
	 * CHAP credentials for the discovery login (RFC 7143 §12.1.3), as in
	 * struct iscsi_login_config; all "" for AuthMethod=None.  Owned by the
	 * caller, who wipes them.
	 */
	struct iscsi_chap_creds chap;
};

/*
 * Connect to cfg->host:port, log in with SessionType=Discovery, send
 * SendTargets=All (following the target's text continuation until F=1,
 * at most ISCSI_DISC_TEXT_MAX bytes in all), parse the answer into *out,
 * log out (reason 0, §11.14) and close.  A failed logout after a complete
 * answer is not an error.
 *
 * On success returns 0 and *out is owned by the caller
 * (iscsi_disc_list_free).  On failure *out is empty and the return is a
 * negative errno with a one-line reason in err: the connect and login
 * errors of iscsi_login (-ECONNREFUSED, -ETIMEDOUT, -EACCES, ...),
 * -EPROTO (a malformed or unexpected answer, a Reject), -EMSGSIZE (more
 * than ISCSI_DISC_TEXT_MAX bytes of text, or a PDU longer than our
 * MaxRecvDataSegmentLength), -ENOMEM.
 */
int iscsi_discover(const struct iscsi_discovery_config *cfg, struct iscsi_disc_list *out, char *err,
		   size_t err_cap);

/*
 * Parse a SendTargets answer (RFC 7143 Appendix C): `len` bytes of
 * "key=value\0" entries.  Each TargetName= starts a target; the
 * TargetAddress= entries after it are its portals, in the form
 * host[:port][,tpgt] or [ipv6][:port][,tpgt] (§13.8; no port: 3260).
 * Other keys are ignored; NUL padding is skipped.  Pure: no I/O.
 *
 * Returns 0 with *out filled (owned by the caller, iscsi_disc_list_free;
 * it is reset first, so it must not hold a list), or a negative errno with
 * *out empty: -EPROTO for an entry without '=' or without its terminating
 * NUL, an empty, over-long (>= ISCSI_NAME_MAX bytes) or non-printable
 * TargetName, a TargetAddress before any TargetName; -ENOMEM.  A malformed
 * TargetAddress is skipped (counted in out->skipped); targets or portals
 * beyond the limits are dropped (out->truncated).
 */
int iscsi_sendtargets_parse(const char *text, size_t len, struct iscsi_disc_list *out);

/*
 * Parse one TargetAddress value (§13.8) into *out.  Returns 0, or -EINVAL
 * (empty or over-long host, bad characters, port not in 1..65535, tpgt not
 * in 0..65535, anything trailing).
 */
int iscsi_portal_parse(const char *value, struct iscsi_portal *out);

/* Format a portal as host:port[,tpgt] ([host] for IPv6) into out (cap bytes). */
void iscsi_portal_format(const struct iscsi_portal *p, char *out, size_t cap);

/*
 * The portals target t reports for itself (its TargetAddress entries,
 * RFC 7143 §13.8), as
 * the daemon may use them: only numeric addresses (iscsi_portal_addr_numeric:
 * no name a target sends is ever looked up), each host rewritten in its
 * one numeric spelling (127.1, 0x7f000001 and [::ffff:127.0.0.1] all
 * become 127.0.0.1, ipv6 false), a portal whose address and port came
 * already dropped (the first one's tag kept), in the order sent.  A host
 * name or anything else that is not a numeric address is skipped with a
 * debug line.  At most cap portals into out, their addresses into addrs
 * (cap entries; NULL: not wanted).  Returns how many.
 *
 * The one place a SendTargets answer becomes portals to connect to: the
 * mount's discover_portals=on, --list, and any check of whether a portal
 * is one the target lists (compare with iscsi_portal_addr_same, or
 * iscsi_disc_lists).
 */
size_t iscsi_disc_portals(const struct iscsi_disc_target *t, struct iscsi_portal *out,
			  struct iscsi_portal_addr *addrs, size_t cap);

/*
 * Whether target `name` (compared without case, RFC 7143 §4.2.7.1) of list
 * l reports a portal at address a, by iscsi_disc_portals' rules (numeric
 * addresses only, compared by address, not by spelling).
 */
bool iscsi_disc_lists(const struct iscsi_disc_list *l, const char *name, const struct iscsi_portal_addr *a);

/* Free what a list holds and empty it (safe on an empty list). */
void iscsi_disc_list_free(struct iscsi_disc_list *l);

#endif
