/* SPDX-License-Identifier: MIT */
/*
 * Login phase state machine (RFC 7143 §6.3, §11.12, §11.13).
 *
 *   SECURITY --(AuthMethod=None, T=1, NSG=1)--> OPERATIONAL
 *   OPERATIONAL --(our §13 offers, T=1, NSG=3)--> FULL FEATURE
 *
 * A target may answer without transiting (T=0): we then send the answers
 * we owe and ask again.  Text longer than what fits in one PDU travels in
 * several with the C bit, both ways.
 */
#include "login.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "log.h"
#include "pdu.h"

#define LOGIN_PDU_DATA_MAX 8192u   /* MaxRecvDataSegmentLength during login (§13.12) */
#define LOGIN_TEXT_MAX 65536u      /* most text we accept in one login response sequence */
#define LOGIN_MAX_EXCHANGES 32
#define LOGIN_ITT 0x00001000u

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

struct login_ctx {
	struct iscsi_transport *t;
	const struct iscsi_login_config *cfg;
	struct iscsi_login_result *res;
	struct iscsi_neg neg;
	uint8_t stage;
	bool have_statsn;
	uint32_t expstatsn;
	char *err;
	size_t err_cap;
	/* what we owe the target in the next request */
	char *out;
	size_t out_len;
	/* the target's accumulated response text */
	char *in;
	size_t in_len;
	bool auth_ok;
};

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
	int rc = c->t->ops->send_pdu(c->t, bhs, data, dlen, c->cfg->timeout_ms);
	if (rc)
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
	int rc = c->t->ops->recv_pdu(c->t, bhs, c->in + c->in_len, LOGIN_PDU_DATA_MAX, &dlen, c->cfg->timeout_ms);
	if (rc) {
		if (rc == -ETIMEDOUT)
			snprintf(c->err, c->err_cap, "login: no answer from the target within %d ms", c->cfg->timeout_ms);
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
		c->res->status_class = h->u.login.status_class;
		c->res->status_detail = h->u.login.status_detail;
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

static int apply_key(void *arg, const char *key, const char *value)
{
	struct login_ctx *c = arg;
	if (strcmp(key, "AuthMethod") == 0) {
		if (strcmp(value, "None") != 0) {
			snprintf(c->err, c->err_cap, "login: target requires AuthMethod=%s, which is not supported", value);
			return -EACCES;
		}
		c->auth_ok = true;
		return 0;
	}
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
	c.out = malloc(LOGIN_TEXT_MAX);
	c.in = malloc(LOGIN_TEXT_MAX);
	if (!c.out || !c.in) {
		snprintf(err, err_cap, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	iscsi_neg_init(&c.neg, &cfg->neg);
	c.stage = ISCSI_STAGE_SECURITY;

	if ((rc = add(&c, "InitiatorName", cfg->initiator_name)) ||
	    (rc = add(&c, "SessionType", discovery ? "Discovery" : "Normal")) ||
	    (!discovery && (rc = add(&c, "TargetName", cfg->target_name))) ||
	    (rc = add(&c, "AuthMethod", "None")))
		goto out;

	for (int round = 0;; round++) {
		if (round == LOGIN_MAX_EXCHANGES) {
			snprintf(err, err_cap, "login: no agreement after %d exchanges", round);
			rc = -EPROTO;
			goto out;
		}
		uint8_t nsg = c.stage == ISCSI_STAGE_SECURITY ? ISCSI_STAGE_OPERATIONAL : ISCSI_STAGE_FULL_FEATURE;
		rc = exchange(&c, true, nsg, &rsp);
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
		rc = iscsi_text_parse(c.in, c.in_len, apply_key, &c);
		if (rc) {
			if (rc == -EPROTO && !strstr(err, "login:"))
				snprintf(err, err_cap, "login: malformed text from the target");
			goto out;
		}
		if (!rsp.u.login.transit)
			continue; /* the target wants another round in this stage */
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
		 "ImmediateData %s, InitialR2T %s",
		 discovery ? "discovery" : cfg->target_name, res->tsih, res->params.max_recv_dsl,
		 res->params.max_xmit_dsl, res->params.max_burst, res->params.first_burst,
		 res->params.immediate_data ? "Yes" : "No", res->params.initial_r2t ? "Yes" : "No");
out:
	free(c.out);
	free(c.in);
	return rc;
}
