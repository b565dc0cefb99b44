/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the SendTargets answer (RFC 7143 Appendix C) and
 * the TargetAddress portal parser (§13.8) of initiator/login/discovery.c:
 * iscsi_sendtargets_parse, iscsi_portal_parse, iscsi_portal_format, and
 * what a mount would connect to of it (iscsi_disc_portals: numeric
 * addresses only, one per address; iscsi_disc_lists).
 *
 * Input: the first byte selects the parser (even: a SendTargets text
 * segment, "key=value\0..."; odd: one TargetAddress value, cut at its
 * first NUL), the rest is parsed from an exact-size copy so that any read
 * past it is caught.  Checks: the list within its limits, names and hosts
 * NUL-terminated and of the allowed characters, ports and tags in range,
 * every portal formats to a string that parses back to the same portal.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "initiator/login/discovery.h"
#include "initiator/net/portal_addr.h"

#define CHECK(cond)                                                                   \
	do {                                                                              \
		if (!(cond))                                                              \
			__builtin_trap();                                                 \
	} while (0)

/* transport.h: linked by the exchange in discovery.c, which is not run here (tcp.c has the daemon's). */
int64_t iscsi_now_ms(void)
{
	__builtin_trap();
}

static void check_portal(const struct iscsi_portal *p)
{
	size_t n = strnlen(p->host, sizeof(p->host));

	CHECK(n > 0 && n < sizeof(p->host));
	for (size_t i = 0; i < n; i++)
		CHECK(p->host[i] > 0x20 && p->host[i] < 0x7f && p->host[i] != ',' && p->host[i] != '[' &&
		      p->host[i] != ']' && (p->ipv6 || p->host[i] != ':'));
	CHECK(p->port >= 1 && p->port <= 65535);
	CHECK(p->tpgt >= -1 && p->tpgt <= 65535);

	/* formatted, it reads back the same */
	char s[ISCSI_URL_HOST_MAX + 32];
	struct iscsi_portal back;
	iscsi_portal_format(p, s, sizeof(s));
	CHECK(iscsi_portal_parse(s, &back) == 0);
	CHECK(strcmp(back.host, p->host) == 0 && back.port == p->port && back.tpgt == p->tpgt &&
	      back.ipv6 == p->ipv6);
}

static void sendtargets(const char *text, size_t len)
{
	struct iscsi_disc_list l;

	memset(&l, 0xa5, sizeof(l)); /* reset by the parser */
	int rc = iscsi_sendtargets_parse(text, len, &l);
	CHECK(rc == 0 || rc == -EPROTO || rc == -ENOMEM);
	if (rc != 0) {
		CHECK(l.ntargets == 0 && l.targets == NULL);
		return;
	}
	CHECK(l.ntargets <= ISCSI_DISC_MAX_TARGETS);
	CHECK((l.ntargets == 0) == (l.targets == NULL));
	for (size_t i = 0; i < l.ntargets; i++) {
		const struct iscsi_disc_target *t = &l.targets[i];
		size_t n = strnlen(t->name, sizeof(t->name));
		CHECK(n > 0 && n < sizeof(t->name));
		CHECK(memmem(text, len, t->name, n) != NULL);
		for (size_t k = 0; k < n; k++)
			CHECK(t->name[k] > 0x20 && t->name[k] < 0x7f);
		CHECK(t->nportals <= ISCSI_DISC_MAX_PORTALS);
		CHECK((t->nportals == 0) == (t->portals == NULL));
		for (size_t k = 0; k < t->nportals; k++)
			check_portal(&t->portals[k]);
		/* the portals a mount would connect to: numeric only, one per address, never more than reported */
		struct iscsi_portal use[ISCSI_DISC_MAX_PORTALS];
		struct iscsi_portal_addr addrs[ISCSI_DISC_MAX_PORTALS];
		size_t m = iscsi_disc_portals(t, use, addrs, ISCSI_DISC_MAX_PORTALS);
		CHECK(m <= t->nportals);
		for (size_t a = 0; a < m; a++) {
			struct iscsi_portal_addr again;
			CHECK(iscsi_portal_addr_numeric(use[a].host, use[a].port, &again) == 0);
			CHECK(iscsi_portal_addr_same(&again, &addrs[a]));
			CHECK(iscsi_disc_lists(&l, t->name, &addrs[a]));
			for (size_t b = 0; b < a; b++)
				CHECK(!iscsi_portal_addr_same(&addrs[a], &addrs[b]));
		}
	}
	iscsi_disc_list_free(&l);
	CHECK(l.ntargets == 0 && l.targets == NULL);
}

static void portal(const char *value)
{
	struct iscsi_portal p;
	int rc = iscsi_portal_parse(value, &p);

	CHECK(rc == 0 || rc == -EINVAL);
	if (rc == 0)
		check_portal(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 65536 + 1)
		return 0;
	size_t len = size - 1;
	if (data[0] % 2 == 0) {
		char *b = malloc(len ? len : 1);
		CHECK(b != NULL);
		if (len)
			memcpy(b, data + 1, len);
		sendtargets(len ? b : NULL, len);
		free(b);
	} else {
		const uint8_t *nul = memchr(data + 1, '\0', len);
		size_t n = nul ? (size_t)(nul - data - 1) : len;
		char *v = malloc(n + 1);
		CHECK(v != NULL);
		memcpy(v, data + 1, n);
		v[n] = '\0';
		portal(v);
		free(v);
	}
	return 0;
}
