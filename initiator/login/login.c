/* SPDX-License-Identifier: MIT */
/*
 * Login phase state machine (RFC 7143 §6.3, §11.12, §11.13).
 *
 *   SECURITY --(AuthMethod=None, T=1, NSG=1)--> OPERATIONAL
 *   OPERATIONAL --(our §13 offers, T=1, NSG=3)--> FULL FEATURE
 *
 * With CHAP credentials the security stage takes three exchanges
 * (RFC 7143 §12.1.3), T=0 until our answer:
 *
 *   I: AuthMethod=CHAP                      T: AuthMethod=CHAP
 *   I: CHAP_A=8,7,6,5                       T: CHAP_A=a CHAP_I=i CHAP_C=c
 *   I: CHAP_N CHAP_R [CHAP_I CHAP_C] (T=1)  T: [CHAP_N CHAP_R], T=1
 *
 * Only "CHAP" is offered then, never "CHAP,None": a target that would let
 * us in without authentication, or a mistyped configuration, fails
 * instead of silently skipping it.  Mutual CHAP fails closed: the login
 * goes on only once the target's CHAP_N and CHAP_R are verified.
 *
 * A target may answer without transiting (T=0): we then send the answers
 * we owe and ask again.  Text longer than what fits in one PDU travels in
 * several with the C bit, both ways.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* explicit_bzero */
#endif
#include "login.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "initiator/transport/cancel.h"
#include "initiator/util/log.h"
#include "initiator/wire/pdu.h"

#define LOGIN_PDU_DATA_MAX 8192u   /* MaxRecvDataSegmentLength during login (§13.12) */
#define LOGIN_TEXT_MAX 65536u      /* most text we accept in one login response sequence */
#define LOGIN_MAX_EXCHANGES 32
#define LOGIN_ITT 0x00001000u

#define CHAP_CRED_HINT                                                                                             \
	"give credentials (user%password@ in the URL, -o secret_file= or "                                          \
	"ISERFUSE_CHAP_USERNAME/ISERFUSE_CHAP_PASSWORD)"

static const uint8_t chap_default_algs[ISCSI_CHAP_ALGS_MAX] = {ISCSI_CHAP_SHA3_256, ISCSI_CHAP_SHA256,
							       ISCSI_CHAP_SHA1, ISCSI_CHAP_MD5};

void iscsi_isid_random(uint8_t isid[6])
{
	uint8_t r[5] = {0};
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
		for (size_t i = 0; i < sizeof(r); i++)
			r[i] = (uint8_t)rand();
	}
	isid[0] = 0x80 | (r[0] & 0x3f); /* T = 10b: random (§11.12.5) */
	isid[1] = r[1];
	isid[2] = r[2];
	isid[3] = r[3];
	isid[4] = r[4]; /* qualifier */
	isid[5] = 0x01;
}

const char *iscsi_login_status_str(uint8_t cls, uint8_t detail)
{
	static const struct {
		uint8_t cls, detail;
		const char *text;
	} table[] = {
		{0x00, 0x00, "success"},
		{0x01, 0x01, "target moved temporarily"},
		{0x01, 0x02, "target moved permanently"},
		{0x02, 0x00, "initiator error"},
		{0x02, 0x01, "authentication failed"},
		{0x02, 0x02, "authorization failure: initiator not allowed"},
		{0x02, 0x03, "target not found"},
		{0x02, 0x04, "target removed"},
		{0x02, 0x05, "unsupported iSCSI version"},
		{0x02, 0x06, "too many connections"},
		{0x02, 0x07, "missing parameter"},
		{0x02, 0x08, "cannot include connection in session"},
		{0x02, 0x09, "session type not supported"},
		{0x02, 0x0a, "session does not exist"},
		{0x02, 0x0b, "invalid request during login"},
		{0x03, 0x00, "target error"},
		{0x03, 0x01, "service unavailable"},
		{0x03, 0x02, "out of resources"},
	};
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (table[i].cls == cls && table[i].detail == detail)
			return table[i].text;
	return "unknown login status";
}

/* TargetAddress of a redirecting Login Response, kept for the caller. */
static int redirect_key(void *arg, const char *key, const char *value)
{
	struct iscsi_login_result *res = arg;
	if (strcmp(key, "TargetAddress") == 0)
		snprintf(res->target_address, sizeof(res->target_address), "%s", value);
	return 0;
}

int iscsi_target_address_parse(const char *value, char *host, size_t host_cap, unsigned *port)
{
	const char *p = value, *end;
	size_t n;
	if (*p == '[') {
		end = strchr(p, ']');
		if (!end)
			return -EINVAL;
		p++;
		n = (size_t)(end - p);
		end++;
	} else {
		end = p + strcspn(p, ":,");
		n = (size_t)(end - p);
	}
	if (n == 0 || n >= host_cap)
		return -EINVAL;
	memcpy(host, p, n);
	host[n] = '\0';
	*port = 3260;
	if (*end == ':') {
		char *stop = NULL;
		unsigned long v = strtoul(end + 1, &stop, 10);
		if (stop == end + 1 || v == 0 || v > 65535 || (*stop && *stop != ','))
			return -EINVAL;
		*port = (unsigned)v;
		end = stop;
	}
	if (*end && *end != ',')
		return -EINVAL;
	return 0;
}

static int status_errno(uint8_t cls, uint8_t detail)
{
	switch (cls) {
	case 0x01:
		return -EAGAIN;
	case 0x02:
		if (detail == 0x01 || detail == 0x02)
			return -EACCES;
		if (detail == 0x03 || detail == 0x04)
			return -ENOENT;
		return -EPROTO;
	case 0x03:
		return -EAGAIN;
	default:
		return -EPROTO;
	}
}

enum auth_state {
	AUTH_NONE_OFFERED, /* AuthMethod=None sent */
	AUTH_CHAP_OFFERED, /* AuthMethod=CHAP sent */
	AUTH_CHAP_A_SENT,  /* CHAP_A sent, waiting for CHAP_A, CHAP_I, CHAP_C */
	AUTH_CHAP_R_SENT,  /* our CHAP_N/CHAP_R (and challenge) sent */
	AUTH_DONE,
};

/* The CHAP keys of one response sequence: pointers into login_ctx.in. */
struct chap_keys {
	const char *a, *i, *c, *n, *r;
};

struct login_ctx {
	struct iscsi_transport *t;
	const struct iscsi_login_config *cfg;
	struct iscsi_login_result *res;
	struct iscsi_neg neg;
	uint8_t stage;
	bool have_statsn;
	uint32_t expstatsn;
	int64_t deadline;                 /* CLOCK_MONOTONIC ms: the whole login ends by then */
	unsigned nrsp;                    /* Login Responses received (ISCSI_LOGIN_RSP_MAX) */
	char *err;
	size_t err_cap;
	/* what we owe the target in the next request */
	char *out;
	size_t out_len;
	/* the target's accumulated response text */
	char *in;
	size_t in_len;
	bool auth_ok;
	/* CHAP */
	bool chap, mutual;
	bool transit;                     /* T bit of our next request */
	enum auth_state auth;
	bool chap_method;                 /* the target answered AuthMethod=CHAP */
	struct chap_keys keys;
	uint8_t algs[ISCSI_CHAP_ALGS_MAX];
	size_t nalgs;
	uint8_t alg;                      /* chosen CHAP_A */
	uint8_t my_id;                    /* our CHAP_I (mutual) */
	uint8_t my_chal[ISCSI_CHAP_DIGEST_MAX]; /* our challenge (mutual), drawn before the target's arrives */
	size_t my_chal_len;
};

/*
 * How long the next PDU may take: cfg->timeout_ms, or less as the login's
 * deadline nears.  0 with a reason in err when the deadline has passed or
 * the thread's cancel token fired (*rc then -ETIMEDOUT or -ECANCELED).
 */
static int pdu_budget(struct login_ctx *c, int *rc)
{
	if (iscsi_cancelled()) {
		snprintf(c->err, c->err_cap, "login: cancelled");
		*rc = -ECANCELED;
		return 0;
	}
	int64_t left = c->deadline - iscsi_now_ms();
	if (left <= 0) {
		snprintf(c->err, c->err_cap, "login: not complete within its deadline (%u Login Responses)", c->nrsp);
		*rc = -ETIMEDOUT;
		return 0;
	}
	return left < c->cfg->timeout_ms ? (int)left : c->cfg->timeout_ms;
}

static int send_req(struct login_ctx *c, bool transit, bool cont, uint8_t nsg, const char *data, uint32_t dlen)
{
	struct iscsi_bhs h = {0};
	uint8_t bhs[ISCSI_BHS_LEN];
	h.opcode = ISCSI_OP_LOGIN_REQ;
	h.immediate = true;
	h.dlen = dlen;
	h.itt = LOGIN_ITT;
	h.u.login.transit = transit;
	h.u.login.cont = cont;
	h.u.login.csg = c->stage;
	h.u.login.nsg = transit ? nsg : 0;
	memcpy(h.u.login.isid, c->cfg->isid, 6);
	h.u.login.tsih = c->cfg->tsih;
	h.u.login.cid = c->cfg->cid;
	h.u.login.cmdsn = c->cfg->cmdsn;
	h.u.login.expstatsn = c->expstatsn;
	iscsi_bhs_encode(&h, bhs);
	int rc = 0, ms = pdu_budget(c, &rc);
	if (!ms)
		return rc;
	rc = c->t->ops->send_pdu(c->t, bhs, data, dlen, ms);
	if (rc == -ECANCELED)
		snprintf(c->err, c->err_cap, "login: cancelled");
	else if (rc)
		snprintf(c->err, c->err_cap, "login: send failed: %s", strerror(-rc));
	return rc;
}

/* Receive one Login Response; append its text to c->in. */
static int recv_rsp(struct login_ctx *c, struct iscsi_bhs *h)
{
	uint8_t bhs[ISCSI_BHS_LEN];
	uint32_t dlen = 0;
	if (c->in_len + LOGIN_PDU_DATA_MAX > LOGIN_TEXT_MAX) {
		snprintf(c->err, c->err_cap, "login: target sent more than %u bytes of text", LOGIN_TEXT_MAX);
		return -EPROTO;
	}
	if (c->nrsp == ISCSI_LOGIN_RSP_MAX) {
		snprintf(c->err, c->err_cap, "login: not complete after %u Login Responses", c->nrsp);
		return -EPROTO;
	}
	int rc = 0, ms = pdu_budget(c, &rc);
	if (!ms)
		return rc;
	rc = c->t->ops->recv_pdu(c->t, bhs, c->in + c->in_len, LOGIN_PDU_DATA_MAX, &dlen, ms);
	if (rc == 0)
		c->nrsp++;
	if (rc) {
		if (rc == -ETIMEDOUT)
			snprintf(c->err, c->err_cap, "login: no answer from the target within %d ms", ms);
		else if (rc == -ECANCELED)
			snprintf(c->err, c->err_cap, "login: cancelled");
		else if (rc == -EPROTO)
			snprintf(c->err, c->err_cap, "login: malformed or over-long login response");
		else
			snprintf(c->err, c->err_cap, "login: connection closed by the target (%s)", strerror(-rc));
		return rc;
	}
	if (iscsi_bhs_decode(bhs, h) || h->opcode != ISCSI_OP_LOGIN_RSP) {
		snprintf(c->err, c->err_cap, "login: expected a Login Response, got %s", iscsi_opcode_name(bhs[0] & 0x3f));
		return -EPROTO;
	}
	if (h->itt != LOGIN_ITT) {
		snprintf(c->err, c->err_cap, "login: response with a foreign ITT 0x%08x", h->itt);
		return -EPROTO;
	}
	c->in_len += dlen;
	if (h->u.login.status_class != 0) {
		const char *what = iscsi_login_status_str(h->u.login.status_class, h->u.login.status_detail);
		snprintf(c->err, c->err_cap, "login to %s refused: %s (status 0x%02x%02x)",
			 c->cfg->target_name[0] ? c->cfg->target_name : "discovery", what,
			 h->u.login.status_class, h->u.login.status_detail);
		if (!c->chap && h->u.login.status_class == 0x02 && h->u.login.status_detail == 0x01) {
			size_t n = strlen(c->err);
			snprintf(c->err + n, c->err_cap - n, "; the target may require CHAP: %s", CHAP_CRED_HINT);
		}
		c->res->status_class = h->u.login.status_class;
		c->res->status_detail = h->u.login.status_detail;
		if (h->u.login.status_class == 0x01 && !h->u.login.cont)
			iscsi_text_parse(c->in, c->in_len, redirect_key, c->res); /* a malformed text leaves "" */
		return status_errno(h->u.login.status_class, h->u.login.status_detail);
	}
	if (h->u.login.version_max != 0 || h->u.login.version_min != 0) {
		snprintf(c->err, c->err_cap, "login: target speaks iSCSI version %u-%u, not 0",
			 h->u.login.version_min, h->u.login.version_max);
		return -EPROTO;
	}
	if (h->u.login.transit && h->u.login.cont) {
		snprintf(c->err, c->err_cap, "login: response has both T and C set");
		return -EPROTO;
	}
	c->expstatsn = h->u.login.statsn + 1;
	c->have_statsn = true;
	return 0;
}

/* One request sequence (split with C if needed), then the whole response sequence. */
static int exchange(struct login_ctx *c, bool transit, uint8_t nsg, struct iscsi_bhs *rsp)
{
	size_t off = 0;
	int rc;
	do {
		size_t chunk = c->out_len - off;
		bool more = chunk > LOGIN_PDU_DATA_MAX;
		if (more)
			chunk = LOGIN_PDU_DATA_MAX;
		rc = send_req(c, more ? false : transit, more, nsg, c->out + off, (uint32_t)chunk);
		if (rc)
			return rc;
		off += chunk;
		c->in_len = 0;
		rc = recv_rsp(c, rsp);
		if (rc)
			return rc;
		if (more && (c->in_len || rsp->u.login.transit)) {
			snprintf(c->err, c->err_cap, "login: target answered before our text was complete");
			return -EPROTO;
		}
	} while (off < c->out_len);
	/* The target's text continues while it sets C: ask for the rest with empty requests. */
	while (rsp->u.login.cont) {
		rc = send_req(c, false, false, 0, NULL, 0);
		if (rc)
			return rc;
		rc = recv_rsp(c, rsp);
		if (rc)
			return rc;
	}
	return 0;
}

static int add(struct login_ctx *c, const char *key, const char *value)
{
	int rc = iscsi_text_add(c->out, LOGIN_TEXT_MAX, &c->out_len, key, value);
	if (rc)
		snprintf(c->err, c->err_cap, "login: too much text to send");
	return rc;
}

/* The target's answer to our AuthMethod offer (RFC 7143 §12). */
static int auth_method(struct login_ctx *c, const char *value)
{
	if (!c->chap) {
		if (strcmp(value, "None") == 0) {
			c->auth_ok = true;
			return 0;
		}
		if (strcmp(value, "CHAP") == 0)
			snprintf(c->err, c->err_cap, "login: target requires CHAP: %s", CHAP_CRED_HINT);
		else if (strcmp(value, "Reject") == 0)
			snprintf(c->err, c->err_cap,
				 "login: target refused AuthMethod=None (it probably requires CHAP): %s", CHAP_CRED_HINT);
		else
			snprintf(c->err, c->err_cap, "login: target requires AuthMethod=%.32s, which is not supported",
				 value);
		return -EACCES;
	}
	if (strcmp(value, "CHAP") == 0) {
		if (c->auth != AUTH_CHAP_OFFERED) {
			snprintf(c->err, c->err_cap, "login: target repeated AuthMethod during CHAP");
			return -EPROTO;
		}
		c->chap_method = true;
		return 0;
	}
	if (strcmp(value, "Reject") == 0 || strcmp(value, "None") == 0)
		snprintf(c->err, c->err_cap, "login: target refused AuthMethod=CHAP (answered %s)", value);
	else
		snprintf(c->err, c->err_cap, "login: target answered AuthMethod=%.32s to our offer of CHAP", value);
	return -EACCES;
}

/* Remember a CHAP key of this response sequence; chap_step acts on them. */
static int chap_key(struct login_ctx *c, const char *key, const char *value)
{
	const char **slot = NULL;
	if (strcmp(key, "CHAP_A") == 0)
		slot = &c->keys.a;
	else if (strcmp(key, "CHAP_I") == 0)
		slot = &c->keys.i;
	else if (strcmp(key, "CHAP_C") == 0)
		slot = &c->keys.c;
	else if (strcmp(key, "CHAP_N") == 0)
		slot = &c->keys.n;
	else if (strcmp(key, "CHAP_R") == 0)
		slot = &c->keys.r;
	if (slot == NULL) {
		/* An unknown CHAP_ key: answer NotUnderstood (§6.2). */
		if (iscsi_text_add(c->out, LOGIN_TEXT_MAX, &c->out_len, key, "NotUnderstood")) {
			snprintf(c->err, c->err_cap, "login: too much text to send");
			return -ENOSPC;
		}
		return 0;
	}
	if (!c->chap) {
		snprintf(c->err, c->err_cap, "login: target sent %s without CHAP being negotiated", key);
		return -EPROTO;
	}
	if (*slot != NULL) {
		snprintf(c->err, c->err_cap, "login: target sent %s twice", key);
		return -EPROTO;
	}
	*slot = value;
	return 0;
}

/* CHAP_A=8,7,6,5 (our list): the target's choice must be one of them. */
static int chap_offer_algs(struct login_ctx *c)
{
	char list[4 * ISCSI_CHAP_ALGS_MAX + 1] = "";
	size_t len = 0;
	for (size_t i = 0; i < c->nalgs; i++)
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%u", i ? "," : "", c->algs[i]);
	return add(c, "CHAP_A", list);
}

static int chap_choose_alg(struct login_ctx *c, const char *value)
{
	char *end = NULL;
	if (strcmp(value, "Reject") == 0) {
		snprintf(c->err, c->err_cap, "login: target supports none of our CHAP algorithms (SHA3-256, SHA-256, "
					   "SHA-1, MD5)");
		return -EACCES;
	}
	errno = 0;
	unsigned long v = value[0] >= '0' && value[0] <= '9' ? strtoul(value, &end, 10) : 0;
	if (end == NULL || *end != '\0' || errno || v > 255) {
		snprintf(c->err, c->err_cap, "login: target sent a malformed CHAP_A");
		return -EPROTO;
	}
	for (size_t i = 0; i < c->nalgs; i++) {
		if (c->algs[i] == v) {
			c->alg = (uint8_t)v;
			c->res->chap_alg = c->alg;
			return 0;
		}
	}
	snprintf(c->err, c->err_cap, "login: target chose CHAP_A=%lu, which we did not offer", v);
	return -EPROTO;
}

/* The target's CHAP_A, CHAP_I, CHAP_C: answer with CHAP_N, CHAP_R (and our challenge). */
static int chap_answer(struct login_ctx *c)
{
	const struct iscsi_login_config *cfg = c->cfg;
	uint8_t *chal = NULL;
	uint8_t digest[ISCSI_CHAP_DIGEST_MAX];
	char hex[2 * ISCSI_CHAP_DIGEST_MAX + 3];
	size_t chal_len = 0;
	uint8_t id;
	int rc;

	if (!c->keys.a || !c->keys.i || !c->keys.c) {
		snprintf(c->err, c->err_cap, "login: target's CHAP challenge lacks %s",
			 !c->keys.a ? "CHAP_A" : !c->keys.i ? "CHAP_I" : "CHAP_C");
		return -EPROTO;
	}
	if (c->keys.n || c->keys.r) {
		snprintf(c->err, c->err_cap, "login: target sent CHAP_N/CHAP_R before our answer");
		return -EPROTO;
	}
	if ((rc = chap_choose_alg(c, c->keys.a)))
		return rc;
	if (iscsi_chap_parse_id(c->keys.i, &id)) {
		snprintf(c->err, c->err_cap, "login: target sent a malformed CHAP_I");
		return -EPROTO;
	}
	chal = malloc(ISCSI_CHAP_CHALLENGE_MAX);
	if (!chal) {
		snprintf(c->err, c->err_cap, "out of memory");
		return -ENOMEM;
	}
	rc = iscsi_chap_decode(c->keys.c, chal, ISCSI_CHAP_CHALLENGE_MAX, &chal_len);
	if (rc == -EMSGSIZE) {
		snprintf(c->err, c->err_cap, "login: target's CHAP_C is longer than %u bytes", ISCSI_CHAP_CHALLENGE_MAX);
		rc = -EACCES;
		goto out;
	}
	if (rc) {
		snprintf(c->err, c->err_cap, "login: target sent a malformed CHAP_C");
		rc = -EPROTO;
		goto out;
	}
	size_t dlen = iscsi_chap_digest_len(c->alg);
	if (c->mutual)
		c->my_chal_len = dlen > ISCSI_CHAP_CHALLENGE_MIN ? dlen : ISCSI_CHAP_CHALLENGE_MIN;
	rc = iscsi_chap_check_challenge(chal, chal_len, c->mutual ? c->my_chal : NULL, c->my_chal_len);
	if (rc == -ERANGE) {
		snprintf(c->err, c->err_cap, "login: target's CHAP_C is %zu bytes, outside %u..%u", chal_len,
			 ISCSI_CHAP_CHALLENGE_MIN, ISCSI_CHAP_CHALLENGE_MAX);
		rc = -EACCES;
		goto out;
	}
	if (rc) {
		snprintf(c->err, c->err_cap, "login: target's CHAP_C reflects our own challenge");
		rc = -EACCES;
		goto out;
	}
	rc = iscsi_chap_response(c->alg, id, cfg->chap.secret, strlen(cfg->chap.secret), chal, chal_len, digest);
	if (rc < 0) {
		snprintf(c->err, c->err_cap, "login: CHAP %s is not available", iscsi_chap_alg_name(c->alg));
		goto out;
	}
	iscsi_chap_encode_hex(digest, (size_t)rc, hex, sizeof(hex));
	if ((rc = add(c, "CHAP_N", cfg->chap.user)) || (rc = add(c, "CHAP_R", hex)))
		goto out;
	if (c->mutual) {
		char idtext[4];
		snprintf(idtext, sizeof(idtext), "%u", c->my_id);
		iscsi_chap_encode_hex(c->my_chal, c->my_chal_len, hex, sizeof(hex));
		if ((rc = add(c, "CHAP_I", idtext)) || (rc = add(c, "CHAP_C", hex)))
			goto out;
	}
	log_info("CHAP: %s%s, answered as %s", iscsi_chap_alg_name(c->alg), c->mutual ? ", mutual" : "",
		 cfg->chap.user);
	c->auth = AUTH_CHAP_R_SENT;
	c->transit = true;
out:
	explicit_bzero(digest, sizeof(digest));
	explicit_bzero(hex, sizeof(hex));
	explicit_bzero(chal, ISCSI_CHAP_CHALLENGE_MAX);
	free(chal);
	return rc;
}

/* Mutual CHAP: the target's CHAP_N and CHAP_R must be right (fail closed). */
static int chap_verify_target(struct login_ctx *c)
{
	const struct iscsi_login_config *cfg = c->cfg;
	uint8_t want[ISCSI_CHAP_DIGEST_MAX], got[ISCSI_CHAP_DIGEST_MAX];
	size_t got_len = 0;
	int rc;

	if (!c->keys.n || !c->keys.r) {
		snprintf(c->err, c->err_cap, "login: mutual CHAP: the target did not answer our challenge");
		return -EACCES;
	}
	if (strcmp(c->keys.n, cfg->chap.mutual_user) != 0) {
		snprintf(c->err, c->err_cap,
			 "login: mutual CHAP: the target's answer is wrong (CHAP_N is not the configured mutual user)");
		return -EACCES;
	}
	rc = iscsi_chap_response(c->alg, c->my_id, cfg->chap.mutual_secret, strlen(cfg->chap.mutual_secret),
				 c->my_chal, c->my_chal_len, want);
	if (rc > 0 && iscsi_chap_decode(c->keys.r, got, sizeof(got), &got_len) == 0 && got_len == (size_t)rc &&
	    iscsi_chap_equal(got, want, got_len))
		rc = 0;
	else
		rc = -EACCES;
	explicit_bzero(want, sizeof(want));
	explicit_bzero(got, sizeof(got));
	if (rc) {
		snprintf(c->err, c->err_cap, "login: mutual CHAP: the target's answer is wrong");
		return rc;
	}
	log_info("CHAP: the target proved its identity as %s", cfg->chap.mutual_user);
	return 0;
}

/* After each response sequence of the security stage with CHAP: the next step. */
static int chap_step(struct login_ctx *c)
{
	int rc = 0;
	switch (c->auth) {
	case AUTH_CHAP_OFFERED:
		if (!c->chap_method) {
			snprintf(c->err, c->err_cap, "login: target did not answer our AuthMethod=CHAP");
			return -EPROTO;
		}
		if (c->keys.a || c->keys.i || c->keys.c || c->keys.n || c->keys.r) {
			snprintf(c->err, c->err_cap, "login: target sent CHAP keys before our CHAP_A");
			return -EPROTO;
		}
		if (c->mutual) {
			/* Drawn now, before the target's challenge, so that a reflection shows. */
			if ((rc = iscsi_chap_random(c->my_chal, sizeof(c->my_chal))) ||
			    (rc = iscsi_chap_random(&c->my_id, 1))) {
				snprintf(c->err, c->err_cap, "login: no random bytes for our CHAP challenge: %s",
					 strerror(-rc));
				return rc;
			}
		}
		if ((rc = chap_offer_algs(c)))
			return rc;
		c->auth = AUTH_CHAP_A_SENT;
		return 0;
	case AUTH_CHAP_A_SENT:
		return chap_answer(c);
	case AUTH_CHAP_R_SENT:
		if (c->mutual && (rc = chap_verify_target(c)))
			return rc;
		c->auth = AUTH_DONE;
		c->auth_ok = true;
		return 0;
	default:
		return 0;
	}
}

/* Credentials: both or neither of user and secret, in each direction. */
static int chap_setup(struct login_ctx *c)
{
	const struct iscsi_login_config *cfg = c->cfg;
	bool user = cfg->chap.user[0], secret = cfg->chap.secret[0];
	bool muser = cfg->chap.mutual_user[0], msecret = cfg->chap.mutual_secret[0];

	if (user != secret || muser != msecret) {
		snprintf(c->err, c->err_cap, "login: CHAP needs both a user name and a secret%s",
			 muser != msecret ? " for mutual authentication" : "");
		return -EINVAL;
	}
	if (msecret && !secret) {
		snprintf(c->err, c->err_cap, "login: mutual CHAP needs our own CHAP user and secret too");
		return -EINVAL;
	}
	if (msecret && strcmp(cfg->chap.secret, cfg->chap.mutual_secret) == 0) {
		snprintf(c->err, c->err_cap,
			 "login: the mutual CHAP secret must differ from the initiator's (RFC 7143 §12.1.3)");
		return -EINVAL;
	}
	c->chap = secret;
	c->mutual = msecret;
	c->auth = c->chap ? AUTH_CHAP_OFFERED : AUTH_NONE_OFFERED;
	c->transit = !c->chap;
	for (size_t i = 0; i < ISCSI_CHAP_ALGS_MAX && cfg->chap_algs[i]; i++) {
		if (!iscsi_chap_digest_len(cfg->chap_algs[i])) {
			snprintf(c->err, c->err_cap, "login: CHAP algorithm %u is not supported", cfg->chap_algs[i]);
			return -EINVAL;
		}
		c->algs[c->nalgs++] = cfg->chap_algs[i];
	}
	if (c->nalgs == 0) {
		memcpy(c->algs, chap_default_algs, sizeof(c->algs));
		c->nalgs = ISCSI_CHAP_ALGS_MAX;
	}
	return 0;
}

bool iscsi_login_chap_retry(struct iscsi_login_config *cfg, const struct iscsi_login_result *res)
{
	if (res->chap_alg != ISCSI_CHAP_SHA256 || res->status_class != 0x02 || res->status_detail > 0x01)
		return false;
	uint8_t algs[ISCSI_CHAP_ALGS_MAX] = {0};
	const uint8_t *from = cfg->chap_algs[0] ? cfg->chap_algs : chap_default_algs;
	size_t n = 0, total = 0;
	for (size_t i = 0; i < ISCSI_CHAP_ALGS_MAX && from[i]; i++, total++)
		if (from[i] != ISCSI_CHAP_SHA256)
			algs[n++] = from[i];
	if (n == 0 || n == total)
		return false;
	memcpy(cfg->chap_algs, algs, sizeof(algs));
	return true;
}

void iscsi_login_config_wipe(struct iscsi_login_config *cfg)
{
	iscsi_chap_creds_wipe(&cfg->chap);
}

static int apply_key(void *arg, const char *key, const char *value)
{
	struct login_ctx *c = arg;
	if (strcmp(key, "AuthMethod") == 0)
		return auth_method(c, value);
	if (c->stage == ISCSI_STAGE_SECURITY && strncmp(key, "CHAP_", 5) == 0)
		return chap_key(c, key, value);
	if (strcmp(key, "TargetAddress") == 0)
		return 0; /* redirection is handled through the status class */
	int rc = iscsi_neg_apply(&c->neg, key, value, c->out, LOGIN_TEXT_MAX, &c->out_len);
	if (rc == -EPROTO)
		snprintf(c->err, c->err_cap, "login: target sent an illegal value for %s", key);
	else if (rc)
		snprintf(c->err, c->err_cap, "login: cannot answer key %s", key);
	return rc;
}

int iscsi_login(struct iscsi_transport *t, const struct iscsi_login_config *cfg,
		struct iscsi_login_result *res, char *err, size_t err_cap)
{
	struct login_ctx c = {.t = t, .cfg = cfg, .res = res, .err = err, .err_cap = err_cap};
	struct iscsi_bhs rsp;
	bool discovery = cfg->target_name[0] == '\0';
	bool offered = false;
	int rc = 0;

	memset(res, 0, sizeof(*res));
	c.deadline = cfg->deadline_ms ? cfg->deadline_ms : iscsi_now_ms() + cfg->timeout_ms;
	c.out = malloc(LOGIN_TEXT_MAX);
	c.in = malloc(LOGIN_TEXT_MAX);
	if (!c.out || !c.in) {
		snprintf(err, err_cap, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	iscsi_neg_init(&c.neg, &cfg->neg);
	c.stage = ISCSI_STAGE_SECURITY;
	if ((rc = chap_setup(&c)))
		goto out;

	if ((rc = add(&c, "InitiatorName", cfg->initiator_name)) ||
	    (rc = add(&c, "SessionType", discovery ? "Discovery" : "Normal")) ||
	    (!discovery && (rc = add(&c, "TargetName", cfg->target_name))) ||
	    (rc = add(&c, "AuthMethod", c.chap ? "CHAP" : "None")))
		goto out;

	for (int round = 0;; round++) {
		if (round == LOGIN_MAX_EXCHANGES) {
			snprintf(err, err_cap, "login: no agreement after %d exchanges", round);
			rc = -EPROTO;
			goto out;
		}
		uint8_t nsg = c.stage == ISCSI_STAGE_SECURITY ? ISCSI_STAGE_OPERATIONAL : ISCSI_STAGE_FULL_FEATURE;
		rc = exchange(&c, c.transit, nsg, &rsp);
		if (rc)
			goto out;
		if (rsp.u.login.csg != c.stage) {
			snprintf(err, err_cap, "login: target answered for stage %u while we are in stage %u",
				 rsp.u.login.csg, c.stage);
			rc = -EPROTO;
			goto out;
		}
		if (res->tsih == 0)
			res->tsih = rsp.u.login.tsih;
		c.out_len = 0;
		memset(&c.keys, 0, sizeof(c.keys));
		rc = iscsi_text_parse(c.in, c.in_len, apply_key, &c);
		if (rc) {
			if (rc == -EPROTO && !strstr(err, "login:"))
				snprintf(err, err_cap, "login: malformed text from the target");
			goto out;
		}
		if (c.stage == ISCSI_STAGE_SECURITY && c.chap && (rc = chap_step(&c)))
			goto out;
		if (!rsp.u.login.transit)
			continue; /* the target wants another round in this stage */
		if (c.stage == ISCSI_STAGE_SECURITY && c.chap && c.auth != AUTH_DONE) {
			snprintf(err, err_cap, "login: target ended the security stage before CHAP was complete");
			rc = -EACCES;
			goto out;
		}
		if (rsp.u.login.nsg == ISCSI_STAGE_FULL_FEATURE) {
			if (c.stage == ISCSI_STAGE_SECURITY && !offered) {
				/* Straight to full feature: all keys keep their defaults. */
				log_info("target skipped operational negotiation");
			}
			break;
		}
		if (rsp.u.login.nsg != ISCSI_STAGE_OPERATIONAL || c.stage != ISCSI_STAGE_SECURITY) {
			snprintf(err, err_cap, "login: target asked for an impossible stage %u", rsp.u.login.nsg);
			rc = -EPROTO;
			goto out;
		}
		c.stage = ISCSI_STAGE_OPERATIONAL;
		if (!offered) {
			rc = iscsi_neg_build_offer(&cfg->neg, c.out, LOGIN_TEXT_MAX, &c.out_len);
			if (rc) {
				snprintf(err, err_cap, "login: offer too long");
				goto out;
			}
			offered = true;
		}
	}
	iscsi_neg_finish(&c.neg, &res->params);
	const char *unmet = NULL;
	if (iscsi_neg_unmet(&cfg->neg, &res->params, &unmet)) {
		snprintf(err, err_cap, "login: the target refused %s=CRC32C, which was required", unmet);
		rc = -EPROTO;
		goto out;
	}
	if (rsp.u.login.tsih == 0) {
		snprintf(err, err_cap, "login: target completed the login without a TSIH");
		rc = -EPROTO;
		goto out;
	}
	res->tsih = rsp.u.login.tsih;
	res->expstatsn = c.expstatsn;
	res->expcmdsn = rsp.u.login.expcmdsn;
	res->maxcmdsn = rsp.u.login.maxcmdsn;
	log_info("logged in to %s: TSIH %u, MaxRecvDataSegmentLength %u/%u, MaxBurstLength %u, FirstBurstLength %u, "
		 "ImmediateData %s, InitialR2T %s, HeaderDigest %s, DataDigest %s",
		 discovery ? "discovery" : cfg->target_name, res->tsih, res->params.max_recv_dsl,
		 res->params.max_xmit_dsl, res->params.max_burst, res->params.first_burst,
		 res->params.immediate_data ? "Yes" : "No", res->params.initial_r2t ? "Yes" : "No",
		 res->params.header_digest ? "CRC32C" : "None", res->params.data_digest ? "CRC32C" : "None");
out:
	explicit_bzero(c.my_chal, sizeof(c.my_chal));
	if (c.out)
		explicit_bzero(c.out, LOGIN_TEXT_MAX);
	if (c.in)
		explicit_bzero(c.in, LOGIN_TEXT_MAX);
	free(c.out);
	free(c.in);
	return rc;
}

int iscsi_connect_login(const struct iscsi_transport_ops *ops, void *ctx, const char *host, unsigned port,
			struct iscsi_login_config *cfg, struct iscsi_login_result *res, struct iscsi_transport **out,
			char *err, size_t err_cap)
{
	int64_t saved_deadline = cfg->deadline_ms;
	if (!cfg->deadline_ms)
		cfg->deadline_ms = iscsi_now_ms() + cfg->timeout_ms;
	for (bool retried = false;; retried = true) {
		struct iscsi_transport *t = NULL;
		memset(res, 0, sizeof(*res));
		int64_t left = cfg->deadline_ms - iscsi_now_ms();
		int rc = left <= 0 ? -ETIMEDOUT : iscsi_cancelled() ? -ECANCELED : 0;
		if (rc) {
			snprintf(err, err_cap, "cannot connect to %s:%u: %s", host, port,
				 rc == -ETIMEDOUT ? "no time left before the login deadline" : "cancelled");
		} else {
			rc = ops->connect(&t, ctx, host, port, left < cfg->timeout_ms ? (int)left : cfg->timeout_ms, err,
					  err_cap);
		}
		if (rc) {
			cfg->deadline_ms = saved_deadline;
			return rc;
		}
		rc = iscsi_login(t, cfg, res, err, err_cap);
		if (rc == 0) {
			cfg->deadline_ms = saved_deadline;
			*out = t;
			return 0;
		}
		t->ops->shutdown(t);
		t->ops->destroy(t);
		if (retried || !iscsi_login_chap_retry(cfg, res)) {
			cfg->deadline_ms = saved_deadline;
			return rc;
		}
		/* The target took CHAP_A=7 for SHA-1 (see iscsi_login_chap_retry): once more without it. */
		log_info("login with CHAP SHA-256 refused; retrying without CHAP_A=7");
	}
}
