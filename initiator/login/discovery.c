/* SPDX-License-Identifier: MIT */
/*
 * SendTargets discovery (RFC 7143 §4.3, §11.10-11.11, Appendix C).
 *
 *   connect -> login (SessionType=Discovery) -> Text Request
 *   "SendTargets=All" -> Text Responses until F=1 (empty Text Requests
 *   carrying the target's TTT ask for the rest) -> Logout -> close
 *
 * All on the caller's thread with the transport's blocking send_pdu and
 * recv_pdu.
 */
#include "discovery.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "initiator/util/defaults.h"
#include "initiator/util/log.h"
#include "login.h"
#include "initiator/wire/pdu.h"

#define DISC_TEXT_ITT 0x00002000u
#define DISC_LOGOUT_ITT 0x00002001u
#define DISC_MAX_EXCHANGES 4096 /* PDUs received after the login: Text Responses and those skipped */

/* ---------------------------------------------------------------- parser */

static bool host_char_ok(char ch, bool ipv6)
{
	if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9'))
		return true;
	if (ch == '.' || ch == '-' || ch == '_')
		return true;
	return ipv6 && (ch == ':' || ch == '%');
}

/* Decimal number of 1..5 digits in [lo, hi] from s[0..n). */
static int parse_num(const char *s, size_t n, unsigned lo, unsigned hi, unsigned *out)
{
	unsigned v = 0;
	if (n == 0 || n > 5)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

int iscsi_portal_parse(const char *value, struct iscsi_portal *out)
{
	const char *p = value, *host, *end = value + strlen(value);
	size_t hlen;
	bool ipv6 = false;

	memset(out, 0, sizeof(*out));
	out->port = ISCSI_PORT_DEFAULT;
	out->tpgt = -1;

	/* The tag follows the last ',' (a host never holds one). */
	const char *comma = memchr(value, ',', (size_t)(end - value));
	if (comma) {
		unsigned tag;
		if (parse_num(comma + 1, (size_t)(end - comma - 1), 0, 65535, &tag))
			return -EINVAL;
		out->tpgt = (int)tag;
		end = comma;
	}
	if (p < end && *p == '[') {
		const char *close = memchr(p, ']', (size_t)(end - p));
		if (!close)
			return -EINVAL;
		host = p + 1;
		hlen = (size_t)(close - host);
		ipv6 = true;
		p = close + 1;
	} else {
		const char *colon = memchr(p, ':', (size_t)(end - p));
		host = p;
		if (colon && memchr(colon + 1, ':', (size_t)(end - colon - 1))) {
			/* Several ':' without brackets: a bare IPv6 address, no port. */
			hlen = (size_t)(end - p);
			ipv6 = true;
			p = end;
		} else {
			hlen = (size_t)((colon ? colon : end) - p);
			p = colon ? colon : end;
		}
	}
	if (p < end) {
		unsigned port;
		if (*p != ':' || parse_num(p + 1, (size_t)(end - p - 1), 1, 65535, &port))
			return -EINVAL;
		out->port = port;
	}
	if (hlen == 0 || hlen >= sizeof(out->host))
		return -EINVAL;
	for (size_t i = 0; i < hlen; i++)
		if (!host_char_ok(host[i], ipv6))
			return -EINVAL;
	memcpy(out->host, host, hlen);
	out->host[hlen] = '\0';
	out->ipv6 = ipv6;
	return 0;
}

void iscsi_portal_format(const struct iscsi_portal *p, char *out, size_t cap)
{
	char tag[16] = "";
	if (p->tpgt >= 0)
		snprintf(tag, sizeof(tag), ",%d", p->tpgt);
	if (p->ipv6)
		snprintf(out, cap, "[%s]:%u%s", p->host, p->port, tag);
	else
		snprintf(out, cap, "%s:%u%s", p->host, p->port, tag);
}

void iscsi_disc_list_free(struct iscsi_disc_list *l)
{
	for (size_t i = 0; i < l->ntargets; i++)
		free(l->targets[i].portals);
	free(l->targets);
	memset(l, 0, sizeof(*l));
}

size_t iscsi_disc_portals(const struct iscsi_disc_target *t, struct iscsi_portal *out,
			  struct iscsi_portal_addr *addrs, size_t cap)
{
	size_t n = 0;
	for (size_t i = 0; i < t->nportals && n < cap; i++) {
		struct iscsi_portal p = t->portals[i];
		struct iscsi_portal_addr a;
		if (iscsi_portal_addr_numeric(p.host, p.port, &a)) {
			log_debug("discovery: %s reports portal %s%s%s:%u, not a numeric address: skipped", t->name,
				  p.ipv6 ? "[" : "", p.host, p.ipv6 ? "]" : "", p.port);
			continue;
		}
		bool dup = false;
		for (size_t j = 0; j < n && !dup; j++) {
			struct iscsi_portal_addr b;
			dup = addrs ? iscsi_portal_addr_same(&a, &addrs[j])
				    : !iscsi_portal_addr_numeric(out[j].host, out[j].port, &b) &&
					      iscsi_portal_addr_same(&a, &b);
		}
		if (dup)
			continue;
		p.ipv6 = iscsi_portal_addr_host(&a, p.host, sizeof(p.host));
		struct iscsi_portal_addr back; /* the standard spelling must lead to the same address (a scope, say) */
		if (iscsi_portal_addr_numeric(p.host, p.port, &back) || !iscsi_portal_addr_same(&a, &back)) {
			log_debug("discovery: %s reports portal %s:%u, whose address cannot be written back: skipped",
				  t->name, p.host, p.port);
			continue;
		}
		out[n] = p;
		if (addrs)
			addrs[n] = a;
		n++;
	}
	return n;
}

bool iscsi_disc_lists(const struct iscsi_disc_list *l, const char *name, const struct iscsi_portal_addr *a)
{
	for (size_t t = 0; t < l->ntargets; t++) {
		if (strcasecmp(l->targets[t].name, name))
			continue;
		for (size_t i = 0; i < l->targets[t].nportals; i++) {
			struct iscsi_portal_addr b;
			const struct iscsi_portal *p = &l->targets[t].portals[i];
			if (!iscsi_portal_addr_numeric(p->host, p->port, &b) && iscsi_portal_addr_same(a, &b))
				return true;
		}
	}
	return false;
}

static bool name_ok(const char *v)
{
	size_t n = strlen(v);
	if (n == 0 || n >= ISCSI_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)v[i] <= 0x20 || (unsigned char)v[i] >= 0x7f)
			return false;
	return true;
}

static int add_target(struct iscsi_disc_list *l, const char *name, size_t *cap)
{
	if (l->ntargets == *cap) {
		size_t ncap = *cap ? *cap * 2 : 8;
		struct iscsi_disc_target *t = realloc(l->targets, ncap * sizeof(*t));
		if (!t)
			return -ENOMEM;
		l->targets = t;
		*cap = ncap;
	}
	struct iscsi_disc_target *t = &l->targets[l->ntargets++];
	memset(t, 0, sizeof(*t));
	memcpy(t->name, name, strlen(name) + 1);
	return 0;
}

static int add_portal(struct iscsi_disc_target *t, const struct iscsi_portal *p)
{
	/* Grows in powers of two: a new array when nportals reaches one. */
	if ((t->nportals & (t->nportals - 1)) == 0) {
		size_t ncap = t->nportals ? t->nportals * 2 : 1;
		struct iscsi_portal *np = realloc(t->portals, ncap * sizeof(*np));
		if (!np)
			return -ENOMEM;
		t->portals = np;
	}
	t->portals[t->nportals++] = *p;
	return 0;
}

int iscsi_sendtargets_parse(const char *text, size_t len, struct iscsi_disc_list *out)
{
	size_t cap = 0, off = 0;
	bool dropping = false; /* the current target was dropped (limit): skip its portals */
	char name[ISCSI_NAME_MAX];
	int rc = 0;

	memset(out, 0, sizeof(*out));
	while (off < len) {
		const char *e = text + off;
		const char *nul = memchr(e, '\0', len - off);
		if (!nul) {
			rc = -EPROTO; /* last entry not terminated */
			goto fail;
		}
		size_t elen = (size_t)(nul - e);
		off += elen + 1;
		if (elen == 0)
			continue; /* padding */
		const char *eq = memchr(e, '=', elen);
		if (!eq || eq == e) {
			rc = -EPROTO;
			goto fail;
		}
		size_t klen = (size_t)(eq - e);
		const char *value = eq + 1;
		if (klen == 10 && memcmp(e, "TargetName", 10) == 0) {
			if (!name_ok(value)) {
				rc = -EPROTO;
				goto fail;
			}
			if (out->ntargets >= ISCSI_DISC_MAX_TARGETS) {
				out->truncated = true;
				dropping = true;
				continue;
			}
			dropping = false;
			memcpy(name, value, strlen(value) + 1);
			if ((rc = add_target(out, name, &cap)))
				goto fail;
		} else if (klen == 13 && memcmp(e, "TargetAddress", 13) == 0) {
			struct iscsi_portal p;
			if (out->ntargets == 0 && !dropping) {
				rc = -EPROTO;
				goto fail;
			}
			if (dropping)
				continue;
			if (iscsi_portal_parse(value, &p)) {
				out->skipped++;
				continue;
			}
			struct iscsi_disc_target *t = &out->targets[out->ntargets - 1];
			if (t->nportals >= ISCSI_DISC_MAX_PORTALS) {
				out->truncated = true;
				continue;
			}
			if ((rc = add_portal(t, &p)))
				goto fail;
		}
		/* Other keys (TargetAlias, X-...) are not needed. */
	}
	return 0;
fail:
	iscsi_disc_list_free(out);
	return rc;
}

/* ---------------------------------------------------------------- exchange */

struct disc_ctx {
	struct iscsi_transport *t;
	int timeout_ms;
	int64_t deadline;           /* CLOCK_MONOTONIC ms: the SendTargets exchange (or the logout) ends by then */
	unsigned pdus;              /* PDUs received so far (DISC_MAX_EXCHANGES) */
	uint32_t cmdsn, expstatsn;
	uint16_t cid;
	char *err;
	size_t err_cap;
};

static int send_bhs(struct disc_ctx *c, const struct iscsi_bhs *h, const void *data, uint32_t dlen,
		    const char *what)
{
	uint8_t bhs[ISCSI_BHS_LEN];
	int rc = iscsi_bhs_encode(h, bhs);
	int64_t left = c->deadline - iscsi_now_ms();
	if (rc == 0 && left <= 0)
		rc = -ETIMEDOUT;
	if (rc == 0)
		rc = c->t->ops->send_pdu(c->t, bhs, data, dlen, left < c->timeout_ms ? (int)left : c->timeout_ms);
	if (rc)
		snprintf(c->err, c->err_cap, "discovery: sending the %s failed: %s", what, strerror(-rc));
	return rc;
}

/*
 * Receive the next PDU answering `itt` with opcode `want`: NOP-In without a
 * ping (TTT reserved) and Asynchronous Messages are skipped; a Reject or any
 * other PDU is -EPROTO; a data segment longer than cap bytes is -EMSGSIZE.
 */
static int recv_answer(struct disc_ctx *c, uint8_t want, uint32_t itt, struct iscsi_bhs *h, void *data,
		       uint32_t cap, uint32_t *dlen, const char *what)
{
	uint8_t bhs[ISCSI_BHS_LEN];
	while (c->pdus < DISC_MAX_EXCHANGES) {
		int64_t left = c->deadline - iscsi_now_ms();
		int ms = left < c->timeout_ms ? (int)left : c->timeout_ms;
		int rc = ms > 0 ? c->t->ops->recv_pdu(c->t, bhs, data, cap, dlen, ms) : -ETIMEDOUT;
		c->pdus++;
		if (rc) {
			if (rc == -ETIMEDOUT)
				snprintf(c->err, c->err_cap, "discovery: no %s from the target within %d ms", what,
					 c->timeout_ms);
			else if (rc == -EPROTO) {
				snprintf(c->err, c->err_cap, "discovery: over-long %s (more than %u bytes)", what, cap);
				rc = -EMSGSIZE;
			} else
				snprintf(c->err, c->err_cap, "discovery: connection lost waiting for the %s (%s)", what,
					 strerror(-rc));
			return rc;
		}
		if (iscsi_bhs_decode(bhs, h)) {
			snprintf(c->err, c->err_cap, "discovery: malformed PDU (opcode 0x%02x)", iscsi_wire_opcode(bhs));
			return -EPROTO;
		}
		if (h->opcode == ISCSI_OP_ASYNC_MSG)
			continue;
		if (h->opcode == ISCSI_OP_NOP_IN && h->u.nop.ttt == ISCSI_RESERVED_TAG)
			continue;
		if (h->opcode == ISCSI_OP_REJECT) {
			snprintf(c->err, c->err_cap, "discovery: the target rejected the request (reason 0x%02x)",
				 h->u.reject.reason);
			return -EPROTO;
		}
		if (h->opcode != want || h->itt != itt) {
			snprintf(c->err, c->err_cap, "discovery: expected a %s, got %s (ITT 0x%08x)", what,
				 iscsi_opcode_name(h->opcode), h->itt);
			return -EPROTO;
		}
		return 0;
	}
	snprintf(c->err, c->err_cap, "discovery: no %s within %d PDUs", what, DISC_MAX_EXCHANGES);
	return -EPROTO;
}

/* SendTargets=All and its continuation; the whole answer into text (*len bytes). */
static int send_targets(struct disc_ctx *c, uint32_t max_recv_dsl, char *text, size_t *len)
{
	static const char req[] = "SendTargets=All"; /* sizeof includes the NUL */
	uint32_t ttt = ISCSI_RESERVED_TAG;
	*len = 0;
	for (int round = 0;; round++) {
		if (round == DISC_MAX_EXCHANGES) {
			snprintf(c->err, c->err_cap, "discovery: answer not complete after %d Text Responses", round);
			return -EPROTO;
		}
		struct iscsi_bhs h = {0};
		h.opcode = ISCSI_OP_TEXT_REQ;
		h.final = true;
		h.itt = DISC_TEXT_ITT;
		h.dlen = round == 0 ? (uint32_t)sizeof(req) : 0;
		h.u.text.ttt = ttt;
		h.u.text.cmdsn = c->cmdsn;
		h.u.text.expstatsn = c->expstatsn;
		int rc = send_bhs(c, &h, round == 0 ? req : NULL, h.dlen, "Text Request");
		if (rc)
			return rc;
		c->cmdsn++; /* not immediate: each request takes a CmdSN */

		size_t room = ISCSI_DISC_TEXT_MAX - *len;
		uint32_t cap = room < max_recv_dsl ? (uint32_t)room : max_recv_dsl, dlen = 0;
		rc = recv_answer(c, ISCSI_OP_TEXT_RSP, DISC_TEXT_ITT, &h, text + *len, cap, &dlen, "Text Response");
		if (rc) {
			if (rc == -EMSGSIZE && cap < max_recv_dsl) {
				snprintf(c->err, c->err_cap, "discovery: the target list is longer than %u bytes",
					 ISCSI_DISC_TEXT_MAX);
				rc = -EMSGSIZE;
			}
			return rc;
		}
		*len += dlen;
		c->expstatsn = h.u.text.statsn + 1;
		if (h.final && h.u.text.cont) {
			snprintf(c->err, c->err_cap, "discovery: Text Response with both F and C set");
			return -EPROTO;
		}
		if (h.final)
			return 0;
		if (h.u.text.ttt == ISCSI_RESERVED_TAG) {
			snprintf(c->err, c->err_cap, "discovery: Text Response continues without a Target Transfer Tag");
			return -EPROTO;
		}
		ttt = h.u.text.ttt;
	}
}

/* Logout, reason 0 (close the session), §11.14; failures only logged. */
static void logout(struct disc_ctx *c)
{
	struct iscsi_bhs h = {0};
	char buf[512];
	uint32_t dlen;
	c->deadline = iscsi_now_ms() + c->timeout_ms;
	c->pdus = 0;
	h.opcode = ISCSI_OP_LOGOUT_REQ;
	h.immediate = true;
	h.final = true;
	h.itt = DISC_LOGOUT_ITT;
	h.u.logout.reason = 0;
	h.u.logout.cid = c->cid;
	h.u.logout.cmdsn = c->cmdsn;
	h.u.logout.expstatsn = c->expstatsn;
	if (send_bhs(c, &h, NULL, 0, "Logout Request") ||
	    recv_answer(c, ISCSI_OP_LOGOUT_RSP, DISC_LOGOUT_ITT, &h, buf, sizeof(buf), &dlen, "Logout Response")) {
		log_debug("%s", c->err);
		c->err[0] = '\0';
		return;
	}
	if (h.u.logout.response != 0)
		log_debug("discovery: Logout Response %u", h.u.logout.response);
}

int iscsi_discover(const struct iscsi_discovery_config *cfg, struct iscsi_disc_list *out, char *err,
		   size_t err_cap)
{
	struct iscsi_transport *t = NULL;
	struct iscsi_login_config lc = {0};
	struct iscsi_login_result lr;
	char *text = NULL;
	size_t len = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	text = malloc(ISCSI_DISC_TEXT_MAX);
	if (!text) {
		snprintf(err, err_cap, "out of memory");
		return -ENOMEM;
	}
	snprintf(lc.initiator_name, sizeof(lc.initiator_name), "%s", cfg->initiator_name);
	lc.target_name[0] = '\0'; /* SessionType=Discovery */
	iscsi_isid_random(lc.isid);
	lc.cmdsn = 1;
	lc.neg = cfg->neg;
	lc.timeout_ms = cfg->timeout_ms;
	lc.chap = cfg->chap;
	rc = iscsi_connect_login(cfg->transport, cfg->transport_ctx, cfg->host, cfg->port, &lc, &lr, &t, err, err_cap);
	iscsi_login_config_wipe(&lc);
	if (rc)
		goto out;

	/* the whole SendTargets answer within one timeout, however many PDUs the target splits it into */
	struct disc_ctx c = {.t = t, .timeout_ms = cfg->timeout_ms, .deadline = iscsi_now_ms() + cfg->timeout_ms,
			     .cmdsn = lr.expcmdsn,
			     .expstatsn = lr.expstatsn, .cid = lc.cid, .err = err, .err_cap = err_cap};
	uint32_t mrdsl = lr.params.max_recv_dsl ? lr.params.max_recv_dsl : 8192;
	rc = send_targets(&c, mrdsl, text, &len);
	if (rc)
		goto out_close;
	rc = iscsi_sendtargets_parse(text, len, out);
	if (rc) {
		snprintf(err, err_cap, "discovery: malformed SendTargets answer from " ISCSI_HOSTPORT_FMT,
			 ISCSI_HOSTPORT_ARGS(cfg->host, cfg->port));
		goto out_close;
	}
	if (out->truncated)
		log_warn("discovery: the target list was cut at %u targets and %u portals each",
			 ISCSI_DISC_MAX_TARGETS, ISCSI_DISC_MAX_PORTALS);
	if (out->skipped)
		log_warn("discovery: %zu malformed TargetAddress entries ignored", out->skipped);
	logout(&c);
out_close:
	t->ops->shutdown(t);
	t->ops->destroy(t);
out:
	free(text);
	return rc;
}
