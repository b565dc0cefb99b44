/* SPDX-License-Identifier: MIT */
/*
 * Text keys and operational parameter negotiation (RFC 7143 §6, §13).
 *
 * Bookkeeping in struct iscsi_neg:
 *  - offered: one bit per key of enum key_id.  iscsi_neg_build_offer()
 *    cannot record what it sent (it only sees the config), so
 *    iscsi_neg_init() marks every key that iscsi_neg_build_offer() emits as
 *    offered.  A caller that sends no offer for some keys clears the
 *    corresponding bits (offered = 0: the target offers everything first).
 *  - answered: one bit per key of enum key_id that the target has sent,
 *    as an answer or as its own offer.  A key sent twice is a protocol
 *    error (§6.2).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strnlen */
#endif
#include "text.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

#define DSL_MIN 512u
#define DSL_MAX 16777215u

enum key_id {
	K_HEADER_DIGEST,
	K_DATA_DIGEST,
	K_MAX_RECV_DSL,
	K_MAX_BURST,
	K_FIRST_BURST,
	K_IMMEDIATE_DATA,
	K_INITIAL_R2T,
	K_MAX_OUTSTANDING_R2T,
	K_DATA_PDU_IN_ORDER,
	K_DATA_SEQ_IN_ORDER,
	K_TIME2WAIT,
	K_TIME2RETAIN,
	K_ERL,
	K_MAX_CONNECTIONS,
	K_COUNT
};

enum rule {
	R_DIGEST, /* list of CRC32C / None */
	R_DECL,   /* declarative number */
	R_MIN,    /* numerical, result is the minimum */
	R_MAX,    /* numerical, result is the maximum */
	R_AND,    /* Boolean AND */
	R_OR,     /* Boolean OR */
};

struct key_def {
	const char *name;
	enum rule rule;
	uint32_t lo, hi; /* legal range of numerical values */
};

/* In the order iscsi_neg_build_offer() sends them. */
static const struct key_def keys[K_COUNT] = {
	[K_HEADER_DIGEST] = { "HeaderDigest", R_DIGEST, 0, 0 },
	[K_DATA_DIGEST] = { "DataDigest", R_DIGEST, 0, 0 },
	[K_MAX_RECV_DSL] = { "MaxRecvDataSegmentLength", R_DECL, DSL_MIN, DSL_MAX },
	[K_MAX_BURST] = { "MaxBurstLength", R_MIN, DSL_MIN, DSL_MAX },
	[K_FIRST_BURST] = { "FirstBurstLength", R_MIN, DSL_MIN, DSL_MAX },
	[K_IMMEDIATE_DATA] = { "ImmediateData", R_AND, 0, 1 },
	[K_INITIAL_R2T] = { "InitialR2T", R_OR, 0, 1 },
	[K_MAX_OUTSTANDING_R2T] = { "MaxOutstandingR2T", R_MIN, 1, 65535 },
	[K_DATA_PDU_IN_ORDER] = { "DataPDUInOrder", R_OR, 0, 1 },
	[K_DATA_SEQ_IN_ORDER] = { "DataSequenceInOrder", R_OR, 0, 1 },
	[K_TIME2WAIT] = { "DefaultTime2Wait", R_MAX, 0, 3600 },
	[K_TIME2RETAIN] = { "DefaultTime2Retain", R_MIN, 0, 3600 },
	[K_ERL] = { "ErrorRecoveryLevel", R_MIN, 0, 2 },
	[K_MAX_CONNECTIONS] = { "MaxConnections", R_MIN, 1, 65535 },
};

/* Keys that belong to the security stage, the login itself, discovery or
 * the iSER transport (RFC 7145, negotiated by the transport layer). */
static const char *const ignored_keys[] = {
	"TargetName",
	"InitiatorName",
	"InitiatorAlias",
	"SessionType",
	"AuthMethod",
	"TargetAddress",
	"SendTargets",
	"CHAP_A",
	"CHAP_I",
	"CHAP_C",
	"CHAP_N",
	"CHAP_R",
	"RDMAExtensions",
	"TargetRecvDataSegmentLength",
	"InitiatorRecvDataSegmentLength",
	"MaxOutstandingUnexpectedPDUs",
};

static uint32_t clamp32(uint32_t v, uint32_t lo, uint32_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* Our side of key `id`, forced into its legal range. */
static uint32_t our_value(const struct iscsi_neg_config *cfg, enum key_id id)
{
	const struct key_def *k = &keys[id];

	switch (id) {
	case K_HEADER_DIGEST:
		return cfg->header_digest_crc32c;
	case K_DATA_DIGEST:
		return cfg->data_digest_crc32c;
	case K_MAX_RECV_DSL:
		return clamp32(cfg->max_recv_dsl, k->lo, k->hi);
	case K_MAX_BURST:
		return clamp32(cfg->max_burst, k->lo, k->hi);
	case K_FIRST_BURST: {
		/* §13.14: FirstBurstLength must not exceed MaxBurstLength */
		uint32_t fb = clamp32(cfg->first_burst, k->lo, k->hi);
		uint32_t mb = our_value(cfg, K_MAX_BURST);
		return fb < mb ? fb : mb;
	}
	case K_IMMEDIATE_DATA:
		return cfg->immediate_data;
	case K_INITIAL_R2T:
		return cfg->initial_r2t;
	case K_MAX_OUTSTANDING_R2T:
		return clamp32(cfg->max_outstanding_r2t, k->lo, k->hi);
	case K_DATA_PDU_IN_ORDER:
	case K_DATA_SEQ_IN_ORDER:
		return 1;
	case K_TIME2WAIT:
		return clamp32(cfg->default_time2wait, k->lo, k->hi);
	case K_TIME2RETAIN:
		return clamp32(cfg->default_time2retain, k->lo, k->hi);
	case K_ERL:
		return 0; /* only ErrorRecoveryLevel 0 is implemented */
	case K_MAX_CONNECTIONS:
		return 1; /* one connection per session */
	case K_COUNT:
		break;
	}
	return 0;
}

static void set_param(struct iscsi_params *p, enum key_id id, uint32_t v)
{
	switch (id) {
	case K_HEADER_DIGEST:
		p->header_digest = v != 0;
		break;
	case K_DATA_DIGEST:
		p->data_digest = v != 0;
		break;
	case K_MAX_RECV_DSL:
		p->max_xmit_dsl = v; /* the target's declaration */
		break;
	case K_MAX_BURST:
		p->max_burst = v;
		break;
	case K_FIRST_BURST:
		p->first_burst = v;
		break;
	case K_IMMEDIATE_DATA:
		p->immediate_data = v != 0;
		break;
	case K_INITIAL_R2T:
		p->initial_r2t = v != 0;
		break;
	case K_MAX_OUTSTANDING_R2T:
		p->max_outstanding_r2t = v;
		break;
	case K_DATA_PDU_IN_ORDER:
		p->data_pdu_in_order = v != 0;
		break;
	case K_DATA_SEQ_IN_ORDER:
		p->data_seq_in_order = v != 0;
		break;
	case K_TIME2WAIT:
		p->default_time2wait = v;
		break;
	case K_TIME2RETAIN:
		p->default_time2retain = v;
		break;
	case K_ERL:
		p->erl = v;
		break;
	case K_MAX_CONNECTIONS:
		p->max_connections = v;
		break;
	case K_COUNT:
		break;
	}
}

/* Decimal or 0x/0X hexadecimal (§5.1); no sign, no blanks. */
static int parse_number(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
	uint64_t v = 0;
	unsigned base = 10;
	bool any = false;

	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
	}
	for (; *s; s++) {
		unsigned d;
		if (*s >= '0' && *s <= '9')
			d = (unsigned)(*s - '0');
		else if (base == 16 && *s >= 'a' && *s <= 'f')
			d = (unsigned)(*s - 'a' + 10);
		else if (base == 16 && *s >= 'A' && *s <= 'F')
			d = (unsigned)(*s - 'A' + 10);
		else
			return -EPROTO;
		any = true;
		if (v <= UINT32_MAX)
			v = v * base + d; /* past UINT32_MAX it only has to stay large */
	}
	if (!any || v < lo || v > hi)
		return -EPROTO;
	*out = (uint32_t)v;
	return 0;
}

static int parse_bool(const char *s, uint32_t *out)
{
	if (strcmp(s, "Yes") == 0)
		*out = 1;
	else if (strcmp(s, "No") == 0)
		*out = 0;
	else
		return -EPROTO;
	return 0;
}

static const char *bool_str(uint32_t v)
{
	return v ? "Yes" : "No";
}

static char *fmt_u32(char buf[static 11], uint32_t v)
{
	char *p = buf + 10;
	*p = '\0';
	do {
		*--p = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	return p;
}

static bool is_special(const char *v)
{
	return strcmp(v, "Reject") == 0 || strcmp(v, "Irrelevant") == 0 || strcmp(v, "NotUnderstood") == 0;
}

static enum iscsi_digest_pref digest_pref(const struct iscsi_neg_config *cfg, enum key_id id)
{
	return id == K_DATA_DIGEST ? cfg->data_digest_pref : cfg->header_digest_pref;
}

/* Our list for a digest key that includes CRC32C. */
static const char *digest_offer(enum iscsi_digest_pref pref)
{
	switch (pref) {
	case ISCSI_DIGEST_PREFER_NONE:
		return "None,CRC32C";
	case ISCSI_DIGEST_REQUIRE_CRC32C:
		return "CRC32C";
	case ISCSI_DIGEST_PREFER_CRC32C:
	default:
		return "CRC32C,None";
	}
}

void iscsi_neg_config_default(struct iscsi_neg_config *cfg)
{
	if (cfg == NULL)
		return;
	memset(cfg, 0, sizeof(*cfg));
	cfg->header_digest_crc32c = false;
	cfg->data_digest_crc32c = false;
	cfg->max_recv_dsl = 262144;
	cfg->max_burst = 16777215; /* 16 MiB - 1: the largest legal value */
	cfg->first_burst = 262144;
	cfg->immediate_data = true;
	cfg->initial_r2t = false;
	cfg->max_outstanding_r2t = 1;
	cfg->default_time2wait = 2;
	cfg->default_time2retain = 0;
}

void iscsi_params_rfc_defaults(struct iscsi_params *p)
{
	if (p == NULL)
		return;
	memset(p, 0, sizeof(*p));
	p->header_digest = false;
	p->data_digest = false;
	p->max_recv_dsl = 8192;
	p->max_xmit_dsl = 8192;
	p->max_burst = 262144;
	p->first_burst = 65536;
	p->immediate_data = true;
	p->initial_r2t = true;
	p->max_outstanding_r2t = 1;
	p->data_pdu_in_order = true;
	p->data_seq_in_order = true;
	p->default_time2wait = 2;
	p->default_time2retain = 20;
	p->erl = 0;
	p->max_connections = 1;
	p->target_portal_group_tag = 0;
	p->target_alias[0] = '\0';
}

int iscsi_text_add(char *buf, size_t cap, size_t *len, const char *key, const char *value)
{
	if (len == NULL || key == NULL || value == NULL)
		return -EINVAL;
	if (buf == NULL || *len > cap)
		return -ENOSPC;

	size_t kl = strlen(key), vl = strlen(value);
	size_t room = cap - *len;
	/* kl + 1 + vl + 1 <= room, written so that nothing can wrap */
	if (kl >= room || vl >= room - kl || room - kl - vl < 2)
		return -ENOSPC;

	char *p = buf + *len;
	memcpy(p, key, kl);
	p[kl] = '=';
	memcpy(p + kl + 1, value, vl);
	p[kl + 1 + vl] = '\0';
	*len += kl + vl + 2;
	return 0;
}

/* The iSER keys of RFC 7145 §6.3, after the others. */
static int build_iser_offer(const struct iscsi_neg_config *cfg, char *buf, size_t cap, size_t *len)
{
	char num[11];
	int rc = iscsi_text_add(buf, cap, len, "RDMAExtensions", "Yes");
	if (!rc)
		rc = iscsi_text_add(buf, cap, len, "InitiatorRecvDataSegmentLength",
				    fmt_u32(num, clamp32(cfg->iser_initiator_recv_dsl, DSL_MIN, DSL_MAX)));
	if (!rc)
		rc = iscsi_text_add(buf, cap, len, "TargetRecvDataSegmentLength",
				    fmt_u32(num, clamp32(cfg->iser_target_recv_dsl, DSL_MIN, DSL_MAX)));
	if (!rc)
		rc = iscsi_text_add(buf, cap, len, "MaxOutstandingUnexpectedPDUs", fmt_u32(num, cfg->iser_max_unexpected));
	return rc;
}

int iscsi_neg_build_offer(const struct iscsi_neg_config *cfg, char *buf, size_t cap, size_t *len)
{
	if (cfg == NULL || len == NULL)
		return -EINVAL;

	size_t start = *len;
	if (cfg->rdma_extensions) {
		int rc = build_iser_offer(cfg, buf, cap, len);
		if (rc) {
			*len = start;
			return rc;
		}
	}
	for (int id = 0; id < K_COUNT; id++) {
		const struct key_def *k = &keys[id];
		uint32_t v = our_value(cfg, (enum key_id)id);
		char num[11];
		const char *s;

		switch (k->rule) {
		case R_DIGEST:
			s = v ? digest_offer(digest_pref(cfg, (enum key_id)id)) : "None";
			break;
		case R_AND:
		case R_OR:
			s = bool_str(v);
			break;
		default:
			s = fmt_u32(num, v);
			break;
		}
		int rc = iscsi_text_add(buf, cap, len, k->name, s);
		if (rc) {
			*len = start;
			return rc;
		}
	}
	return 0;
}

int iscsi_text_parse(char *data, size_t len, int (*cb)(void *arg, const char *key, const char *value), void *arg)
{
	size_t end = len;

	if (data == NULL)
		return len ? -EPROTO : 0;
	while (end > 0 && data[end - 1] == '\0')
		end--;
	if (end == 0)
		return 0;
	if (end == len)
		return -EPROTO; /* the last entry has no NUL terminator */

	/* Validate everything first: cb sees nothing of a malformed segment.
	 * Every entry in [0, end) is terminated by a NUL at or before data[end].
	 * Empty entries (stray NULs between pairs) are skipped. */
	size_t pairs = 0;
	for (size_t pos = 0; pos < end;) {
		const char *s = data + pos;
		size_t n = strnlen(s, end - pos);
		if (n == 0) {
			pos++;
			continue;
		}
		const char *eq = memchr(s, '=', n);
		if (eq == NULL)
			return -EPROTO;
		size_t kl = (size_t)(eq - s), vl = n - kl - 1;
		if (kl == 0 || kl > ISCSI_TEXT_KEY_MAX || vl > ISCSI_TEXT_VALUE_MAX)
			return -EPROTO;
		if (++pairs > ISCSI_TEXT_MAX_KEYS)
			return -EPROTO;
		pos += n + 1;
	}

	for (size_t pos = 0; pos < end;) {
		char *s = data + pos;
		size_t n = strnlen(s, end - pos);
		if (n == 0) {
			pos++;
			continue;
		}
		char *eq = memchr(s, '=', n);
		*eq = '\0';
		if (cb != NULL) {
			int rc = cb(arg, s, eq + 1);
			if (rc)
				return rc;
		}
		pos += n + 1;
	}
	return 0;
}

void iscsi_neg_init(struct iscsi_neg *n, const struct iscsi_neg_config *cfg)
{
	if (n == NULL)
		return;
	memset(n, 0, sizeof(*n));
	if (cfg != NULL)
		n->cfg = *cfg;
	else
		iscsi_neg_config_default(&n->cfg);
	iscsi_params_rfc_defaults(&n->params);
	/* our MaxRecvDataSegmentLength is a declaration: it holds once sent */
	n->params.max_recv_dsl = our_value(&n->cfg, K_MAX_RECV_DSL);
	n->offered = (1u << K_COUNT) - 1u;
	n->answered = 0;
}

static int reply_add(char *reply, size_t cap, size_t *reply_len, const char *key, const char *value)
{
	if (reply == NULL || reply_len == NULL)
		return -ENOSPC;
	return iscsi_text_add(reply, cap, reply_len, key, value);
}

/* The target answered a key we offered. */
static int apply_answer(struct iscsi_neg *n, enum key_id id, const char *value)
{
	const struct key_def *k = &keys[id];
	uint32_t ours = our_value(&n->cfg, id), v;

	if (is_special(value))
		return 0; /* Reject / Irrelevant / NotUnderstood: keep the default */

	switch (k->rule) {
	case R_DIGEST:
		if (strcmp(value, "None") == 0)
			v = 0;
		else if (ours && strcmp(value, "CRC32C") == 0)
			v = 1;
		else
			return -EPROTO; /* not one of the values we listed */
		break;
	case R_DECL:
		if (parse_number(value, k->lo, k->hi, &v))
			return -EPROTO;
		break;
	case R_MIN:
		if (parse_number(value, k->lo, k->hi, &v) || v > ours)
			return -EPROTO;
		break;
	case R_MAX:
		if (parse_number(value, k->lo, k->hi, &v) || v < ours)
			return -EPROTO;
		break;
	case R_AND:
		if (parse_bool(value, &v))
			return -EPROTO;
		v = v && ours;
		break;
	case R_OR:
		if (parse_bool(value, &v))
			return -EPROTO;
		v = v || ours;
		break;
	default:
		return -EPROTO;
	}
	set_param(&n->params, id, v);
	return 0;
}

/* Pick the first value of the target's digest list that we support. */
static int select_digest(const char *list, bool crc_ok, bool none_ok, const char **sel)
{
	const char *p = list;

	*sel = NULL;
	for (;;) {
		size_t l = strcspn(p, ",");
		if (l == 0)
			return -EPROTO; /* empty list element */
		if (*sel == NULL) {
			if (none_ok && l == 4 && memcmp(p, "None", 4) == 0)
				*sel = "None";
			else if (crc_ok && l == 6 && memcmp(p, "CRC32C", 6) == 0)
				*sel = "CRC32C";
		}
		if (p[l] == '\0')
			return 0;
		p += l + 1;
	}
}

/* The target offered a key first (or declared one). */
static int apply_offer(struct iscsi_neg *n, enum key_id id, const char *value, char *reply, size_t cap,
		       size_t *reply_len)
{
	const struct key_def *k = &keys[id];
	uint32_t ours = our_value(&n->cfg, id), v, r;
	char num[11];
	const char *answer;
	int rc;

	if (is_special(value))
		return 0; /* a response to something we never sent: nothing to do */

	switch (k->rule) {
	case R_DIGEST: {
		const char *sel;
		bool none_ok = !ours || digest_pref(&n->cfg, id) != ISCSI_DIGEST_REQUIRE_CRC32C;
		if (select_digest(value, ours != 0, none_ok, &sel))
			return -EPROTO;
		answer = sel != NULL ? sel : "Reject";
		r = sel != NULL && strcmp(sel, "CRC32C") == 0;
		break;
	}
	case R_DECL:
		if (parse_number(value, k->lo, k->hi, &v))
			return -EPROTO;
		set_param(&n->params, id, v);
		return 0; /* no answer owed */
	case R_MIN:
	case R_MAX:
		if (parse_number(value, k->lo, k->hi, &v))
			return -EPROTO;
		r = k->rule == R_MIN ? (v < ours ? v : ours) : (v > ours ? v : ours);
		answer = fmt_u32(num, r);
		break;
	case R_AND:
	case R_OR:
		if (parse_bool(value, &v))
			return -EPROTO;
		r = k->rule == R_AND ? (v && ours) : (v || ours);
		answer = bool_str(r);
		break;
	default:
		return -EPROTO;
	}
	rc = reply_add(reply, cap, reply_len, k->name, answer);
	if (rc)
		return rc;
	set_param(&n->params, id, r);
	return 0;
}

static void set_alias(struct iscsi_params *p, const char *value)
{
	size_t l = strnlen(value, sizeof(p->target_alias) - 1);

	/* when truncating, do not cut a UTF-8 sequence in half */
	if (value[l] != '\0')
		while (l > 0 && ((unsigned char)value[l] & 0xc0) == 0x80)
			l--;
	memcpy(p->target_alias, value, l);
	p->target_alias[l] = '\0';
}

/*
 * The iSER keys (RFC 7145 §6.3) when we offered RDMAExtensions=Yes.
 * Returns 1 for a key that is not one of them, else 0 or -EPROTO/-ENOSPC.
 * TargetRecvDataSegmentLength and InitiatorRecvDataSegmentLength are
 * declarations of each side's limit (the smaller one holds either way);
 * MaxOutstandingUnexpectedPDUs is the target's own declaration.
 */
static int apply_iser_key(struct iscsi_neg *n, const char *key, const char *value, char *reply, size_t cap,
			  size_t *reply_len)
{
	uint32_t v;
	(void)reply;
	(void)cap;
	(void)reply_len;
	if (strcmp(key, "RDMAExtensions") == 0) {
		if (is_special(value))
			return 0;
		if (parse_bool(value, &v))
			return -EPROTO;
		n->params.rdma_extensions = v != 0;
		return 0;
	}
	if (strcmp(key, "TargetRecvDataSegmentLength") == 0) {
		if (is_special(value))
			return 0;
		if (parse_number(value, DSL_MIN, DSL_MAX, &v))
			return -EPROTO;
		uint32_t ours = clamp32(n->cfg.iser_target_recv_dsl, DSL_MIN, DSL_MAX);
		n->iser_trdsl = v < ours ? v : ours;
		return 0;
	}
	if (strcmp(key, "InitiatorRecvDataSegmentLength") == 0) {
		if (is_special(value))
			return 0;
		if (parse_number(value, DSL_MIN, DSL_MAX, &v))
			return -EPROTO;
		uint32_t ours = clamp32(n->cfg.iser_initiator_recv_dsl, DSL_MIN, DSL_MAX);
		n->iser_irdsl = v < ours ? v : ours;
		return 0;
	}
	if (strcmp(key, "MaxOutstandingUnexpectedPDUs") == 0) {
		if (is_special(value))
			return 0;
		if (parse_number(value, 0, UINT32_MAX, &v))
			return -EPROTO;
		n->params.max_unexpected = v;
		return 0;
	}
	return 1;
}

int iscsi_neg_apply(struct iscsi_neg *n, const char *key, const char *value, char *reply, size_t cap,
		    size_t *reply_len)
{
	if (n == NULL || key == NULL || value == NULL)
		return -EPROTO;
	if (n->cfg.rdma_extensions) {
		int rc = apply_iser_key(n, key, value, reply, cap, reply_len);
		if (rc <= 0)
			return rc;
	}

	for (int i = 0; i < K_COUNT; i++) {
		if (strcmp(key, keys[i].name) != 0)
			continue;
		uint32_t bit = 1u << i;
		int rc;
		if (n->answered & bit)
			return -EPROTO; /* §6.2: a key is negotiated once */
		if (n->offered & bit)
			rc = apply_answer(n, (enum key_id)i, value);
		else
			rc = apply_offer(n, (enum key_id)i, value, reply, cap, reply_len);
		if (rc == 0)
			n->answered |= bit;
		return rc;
	}

	if (strcmp(key, "TargetAlias") == 0) {
		set_alias(&n->params, value);
		return 0;
	}
	if (strcmp(key, "TargetPortalGroupTag") == 0) {
		uint32_t v;
		if (parse_number(value, 0, 65535, &v))
			return -EPROTO;
		n->params.target_portal_group_tag = (uint16_t)v;
		return 0;
	}
	for (size_t i = 0; i < sizeof(ignored_keys) / sizeof(ignored_keys[0]); i++)
		if (strcmp(key, ignored_keys[i]) == 0)
			return 0;

	if (is_special(value))
		return 0; /* a response to a key someone else offered: not ours */

	/* RFC 3720 markers, still offered by some targets: we use none */
	if (strcmp(key, "OFMarker") == 0 || strcmp(key, "IFMarker") == 0)
		return reply_add(reply, cap, reply_len, key, "No");
	if (strcmp(key, "OFMarkInt") == 0 || strcmp(key, "IFMarkInt") == 0)
		return reply_add(reply, cap, reply_len, key, "Irrelevant");

	return reply_add(reply, cap, reply_len, key, "NotUnderstood");
}

void iscsi_neg_finish(struct iscsi_neg *n, struct iscsi_params *out)
{
	if (n == NULL)
		return;

	/* §6.2.2: an answer is optional when our offer alone decides a
	 * Boolean (No for AND, Yes for OR), so apply that result here. */
	for (int i = 0; i < K_COUNT; i++) {
		uint32_t ours = our_value(&n->cfg, (enum key_id)i);
		if (!(n->offered & (1u << i)))
			continue;
		if ((keys[i].rule == R_AND && !ours) || (keys[i].rule == R_OR && ours))
			set_param(&n->params, (enum key_id)i, ours);
	}
	if (n->params.first_burst > n->params.max_burst)
		n->params.first_burst = n->params.max_burst;
	if (n->cfg.rdma_extensions && n->params.rdma_extensions) {
		/* RFC 7145 §6.3: these replace MaxRecvDataSegmentLength (default 8192 each) */
		n->params.max_recv_dsl = n->iser_irdsl ? n->iser_irdsl : 8192;
		n->params.max_xmit_dsl = n->iser_trdsl ? n->iser_trdsl : 8192;
	}
	if (out != NULL)
		*out = n->params;
}

int iscsi_neg_set_digest(struct iscsi_neg_config *cfg, bool data, const char *word)
{
	static const struct {
		const char *word;
		bool crc32c;
		enum iscsi_digest_pref pref;
	} words[] = {
		{ "none", false, ISCSI_DIGEST_PREFER_CRC32C },
		{ "crc32c", true, ISCSI_DIGEST_REQUIRE_CRC32C },
		{ "auto", true, ISCSI_DIGEST_PREFER_CRC32C },
		{ "crc32c-none", true, ISCSI_DIGEST_PREFER_CRC32C },
		{ "none-crc32c", true, ISCSI_DIGEST_PREFER_NONE },
	};

	if (cfg == NULL || word == NULL)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		if (strcasecmp(word, words[i].word) != 0)
			continue;
		if (data) {
			cfg->data_digest_crc32c = words[i].crc32c;
			cfg->data_digest_pref = words[i].pref;
		} else {
			cfg->header_digest_crc32c = words[i].crc32c;
			cfg->header_digest_pref = words[i].pref;
		}
		return 0;
	}
	return -EINVAL;
}

int iscsi_neg_unmet(const struct iscsi_neg_config *cfg, const struct iscsi_params *p, const char **key)
{
	const char *unmet = NULL;

	if (cfg == NULL || p == NULL)
		return 0;
	if (cfg->header_digest_crc32c && cfg->header_digest_pref == ISCSI_DIGEST_REQUIRE_CRC32C && !p->header_digest)
		unmet = keys[K_HEADER_DIGEST].name;
	else if (cfg->data_digest_crc32c && cfg->data_digest_pref == ISCSI_DIGEST_REQUIRE_CRC32C && !p->data_digest)
		unmet = keys[K_DATA_DIGEST].name;
	if (unmet == NULL)
		return 0;
	if (key != NULL)
		*key = unmet;
	return -ENOTSUP;
}
