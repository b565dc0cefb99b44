/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "initiator/iser/iser.h"
#include "initiator/wire/text.h"

/* compare a buffer with a literal that contains NULs */
#define assert_bytes(buf, len, lit)                                                                  \
	do {                                                                                         \
		cr_assert_eq((len), sizeof(lit) - 1, "length %zu, expected %zu", (size_t)(len),     \
			     sizeof(lit) - 1);                                                       \
		cr_assert(memcmp((buf), (lit), sizeof(lit) - 1) == 0, "bytes differ");              \
	} while (0)

/* ---- iscsi_text_parse ---- */

struct collect {
	int n;
	char keys[8][80];
	char values[8][80];
	int stop_at; /* return 42 from this call (1-based), 0 = never */
};

static int collect_cb(void *arg, const char *key, const char *value)
{
	struct collect *c = arg;
	if (c->n < 8) {
		snprintf(c->keys[c->n], sizeof(c->keys[0]), "%s", key);
		snprintf(c->values[c->n], sizeof(c->values[0]), "%s", value);
	}
	c->n++;
	return c->stop_at == c->n ? 42 : 0;
}

static int parse_lit(const char *lit, size_t len, struct collect *c)
{
	static char buf[65536];
	cr_assert_leq(len, sizeof(buf));
	memcpy(buf, lit, len);
	return iscsi_text_parse(buf, len, collect_cb, c);
}
#define PARSE(lit, c) parse_lit((lit), sizeof(lit) - 1, (c))

Test(text_parse, good)
{
	struct collect c = { 0 };
	cr_assert_eq(PARSE("A=1\0Bee=two words\0C=\0D=x=y\0", &c), 0);
	cr_assert_eq(c.n, 4);
	cr_assert_str_eq(c.keys[0], "A");
	cr_assert_str_eq(c.values[0], "1");
	cr_assert_str_eq(c.keys[1], "Bee");
	cr_assert_str_eq(c.values[1], "two words");
	cr_assert_str_eq(c.keys[2], "C");
	cr_assert_str_eq(c.values[2], "");
	cr_assert_str_eq(c.keys[3], "D");
	cr_assert_str_eq(c.values[3], "x=y");
}

Test(text_parse, in_place)
{
	char buf[] = "K=V\0";
	struct collect c = { 0 };
	cr_assert_eq(iscsi_text_parse(buf, 4, collect_cb, &c), 0);
	cr_assert_eq(buf[1], '\0', "'=' becomes NUL");
	cr_assert_eq(c.n, 1);
}

Test(text_parse, padding_and_empty)
{
	struct collect c = { 0 };
	cr_assert_eq(PARSE("A=1\0\0\0\0", &c), 0);
	cr_assert_eq(c.n, 1);
	c = (struct collect){ 0 };
	cr_assert_eq(PARSE("A=1\0\0B=2\0", &c), 0, "stray NUL between pairs is skipped");
	cr_assert_eq(c.n, 2);
	c = (struct collect){ 0 };
	cr_assert_eq(PARSE("\0\0\0\0", &c), 0);
	cr_assert_eq(c.n, 0);
	cr_assert_eq(iscsi_text_parse(NULL, 0, collect_cb, &c), 0);
	char one = 0;
	cr_assert_eq(iscsi_text_parse(&one, 0, collect_cb, &c), 0);
	cr_assert_eq(c.n, 0);
}

Test(text_parse, missing_nul)
{
	struct collect c = { 0 };
	cr_assert_eq(PARSE("A=1\0B=2", &c), -EPROTO);
	cr_assert_eq(c.n, 0, "nothing reported from a malformed segment");
	cr_assert_eq(PARSE("A=1", &c), -EPROTO);
	cr_assert_eq(PARSE("A", &c), -EPROTO);
	/* the NUL lies just past len: must not be seen */
	char buf[] = "A=1";
	cr_assert_eq(iscsi_text_parse(buf, 3, collect_cb, &c), -EPROTO);
	cr_assert_eq(c.n, 0);
}

Test(text_parse, malformed_pairs)
{
	struct collect c = { 0 };
	cr_assert_eq(PARSE("A=1\0NoEquals\0", &c), -EPROTO);
	cr_assert_eq(PARSE("=value\0", &c), -EPROTO);
	cr_assert_eq(PARSE("A=1\0=\0", &c), -EPROTO);
	cr_assert_eq(c.n, 0);
}

Test(text_parse, key_length)
{
	char buf[256];
	struct collect c = { 0 };
	memset(buf, 'K', ISCSI_TEXT_KEY_MAX);
	memcpy(buf + ISCSI_TEXT_KEY_MAX, "=v", 3);
	cr_assert_eq(iscsi_text_parse(buf, ISCSI_TEXT_KEY_MAX + 3, collect_cb, &c), 0);
	cr_assert_eq(c.n, 1);
	memset(buf, 'K', ISCSI_TEXT_KEY_MAX + 1);
	memcpy(buf + ISCSI_TEXT_KEY_MAX + 1, "=v", 3);
	c = (struct collect){ 0 };
	cr_assert_eq(iscsi_text_parse(buf, ISCSI_TEXT_KEY_MAX + 4, collect_cb, &c), -EPROTO);
	cr_assert_eq(c.n, 0);
}

Test(text_parse, value_length)
{
	static char buf[ISCSI_TEXT_VALUE_MAX + 16];
	struct collect c = { 0 };
	memcpy(buf, "V=", 2);
	memset(buf + 2, 'v', ISCSI_TEXT_VALUE_MAX);
	buf[2 + ISCSI_TEXT_VALUE_MAX] = '\0';
	cr_assert_eq(iscsi_text_parse(buf, ISCSI_TEXT_VALUE_MAX + 3, collect_cb, &c), 0);
	cr_assert_eq(c.n, 1);
	memcpy(buf, "V=", 2);
	memset(buf + 2, 'v', ISCSI_TEXT_VALUE_MAX + 1);
	buf[3 + ISCSI_TEXT_VALUE_MAX] = '\0';
	c = (struct collect){ 0 };
	cr_assert_eq(iscsi_text_parse(buf, ISCSI_TEXT_VALUE_MAX + 4, collect_cb, &c), -EPROTO);
	cr_assert_eq(c.n, 0);
}

Test(text_parse, too_many_keys)
{
	static char buf[ISCSI_TEXT_MAX_KEYS * 4 + 8];
	struct collect c = { 0 };
	size_t len = 0;
	for (int i = 0; i < ISCSI_TEXT_MAX_KEYS; i++) {
		memcpy(buf + len, "k=v", 4);
		len += 4;
	}
	cr_assert_eq(iscsi_text_parse(buf, len, collect_cb, &c), 0);
	cr_assert_eq(c.n, ISCSI_TEXT_MAX_KEYS);
	len = 0;
	for (int i = 0; i < ISCSI_TEXT_MAX_KEYS + 1; i++) {
		memcpy(buf + len, "k=v", 4);
		len += 4;
	}
	c = (struct collect){ 0 };
	cr_assert_eq(iscsi_text_parse(buf, len, collect_cb, &c), -EPROTO);
	cr_assert_eq(c.n, 0);
}

Test(text_parse, callback_stops)
{
	struct collect c = { .stop_at = 2 };
	cr_assert_eq(PARSE("A=1\0B=2\0C=3\0", &c), 42);
	cr_assert_eq(c.n, 2);
}

static int null_cb(void *arg, const char *key, const char *value)
{
	(void)arg;
	(void)key;
	(void)value;
	return 0;
}

Test(text_parse, null_callback_arg)
{
	char buf[] = "A=1\0";
	cr_assert_eq(iscsi_text_parse(buf, 4, null_cb, NULL), 0);
	char buf2[] = "A=1\0";
	cr_assert_eq(iscsi_text_parse(buf2, 4, NULL, NULL), 0);
}

/* ---- iscsi_text_add ---- */

Test(text_add, appends)
{
	char buf[32];
	size_t len = 0;
	cr_assert_eq(iscsi_text_add(buf, sizeof(buf), &len, "Key", "Value"), 0);
	cr_assert_eq(iscsi_text_add(buf, sizeof(buf), &len, "X", ""), 0);
	assert_bytes(buf, len, "Key=Value\0X=\0");
}

Test(text_add, no_space)
{
	char buf[16];
	size_t len = 0;
	/* "Key=Value\0" is 10 bytes, "A=\0" 3 more */
	cr_assert_eq(iscsi_text_add(buf, 9, &len, "Key", "Value"), -ENOSPC);
	cr_assert_eq(len, 0);
	cr_assert_eq(iscsi_text_add(buf, 10, &len, "Key", "Value"), 0);
	cr_assert_eq(len, 10);
	cr_assert_eq(iscsi_text_add(buf, 12, &len, "A", ""), -ENOSPC);
	cr_assert_eq(len, 10);
	cr_assert_eq(iscsi_text_add(buf, 13, &len, "A", ""), 0);
	cr_assert_eq(len, 13);
	assert_bytes(buf, len, "Key=Value\0A=\0");
	size_t bogus = 100;
	cr_assert_eq(iscsi_text_add(buf, sizeof(buf), &bogus, "A", "B"), -ENOSPC);
	cr_assert_eq(iscsi_text_add(buf, 0, &len, "A", "B"), -ENOSPC);
}

/* ---- defaults and offer ---- */

Test(neg, config_default)
{
	struct iscsi_neg_config cfg;
	iscsi_neg_config_default(&cfg);
	cr_assert_not(cfg.header_digest_crc32c);
	cr_assert_not(cfg.data_digest_crc32c);
	cr_assert_eq(cfg.max_recv_dsl, 262144);
	cr_assert_eq(cfg.max_burst, 16777215);
	cr_assert_eq(cfg.first_burst, 262144);
	cr_assert(cfg.immediate_data);
	cr_assert_not(cfg.initial_r2t);
	cr_assert_eq(cfg.max_outstanding_r2t, 1);
	cr_assert_eq(cfg.default_time2wait, 2);
	cr_assert_eq(cfg.default_time2retain, 0);
}

static void assert_rfc_defaults(const struct iscsi_params *p)
{
	cr_assert_not(p->header_digest);
	cr_assert_not(p->data_digest);
	cr_assert_eq(p->max_recv_dsl, 8192);
	cr_assert_eq(p->max_xmit_dsl, 8192);
	cr_assert_eq(p->max_burst, 262144);
	cr_assert_eq(p->first_burst, 65536);
	cr_assert(p->immediate_data);
	cr_assert(p->initial_r2t);
	cr_assert_eq(p->max_outstanding_r2t, 1);
	cr_assert(p->data_pdu_in_order);
	cr_assert(p->data_seq_in_order);
	cr_assert_eq(p->default_time2wait, 2);
	cr_assert_eq(p->default_time2retain, 20);
	cr_assert_eq(p->erl, 0);
	cr_assert_eq(p->max_connections, 1);
}

Test(neg, rfc_defaults)
{
	struct iscsi_params p;
	memset(&p, 0xa5, sizeof(p));
	iscsi_params_rfc_defaults(&p);
	assert_rfc_defaults(&p);
	cr_assert_eq(p.target_portal_group_tag, 0);
	cr_assert_str_empty(p.target_alias);
}

Test(neg, offer_default)
{
	struct iscsi_neg_config cfg;
	char buf[1024];
	size_t len = 0;
	iscsi_neg_config_default(&cfg);
	cr_assert_eq(iscsi_neg_build_offer(&cfg, buf, sizeof(buf), &len), 0);
	assert_bytes(buf, len,
		     "HeaderDigest=None\0"
		     "DataDigest=None\0"
		     "MaxRecvDataSegmentLength=262144\0"
		     "MaxBurstLength=16777215\0"
		     "FirstBurstLength=262144\0"
		     "ImmediateData=Yes\0"
		     "InitialR2T=No\0"
		     "MaxOutstandingR2T=1\0"
		     "DataPDUInOrder=Yes\0"
		     "DataSequenceInOrder=Yes\0"
		     "DefaultTime2Wait=2\0"
		     "DefaultTime2Retain=0\0"
		     "ErrorRecoveryLevel=0\0"
		     "MaxConnections=1\0");
}

Test(neg, offer_custom_appends)
{
	struct iscsi_neg_config cfg = {
		.header_digest_crc32c = true,
		.data_digest_crc32c = true,
		.max_recv_dsl = 8192,
		.max_burst = 65536,
		.first_burst = 1048576, /* above max_burst: offered as max_burst */
		.immediate_data = false,
		.initial_r2t = true,
		.max_outstanding_r2t = 4,
		.default_time2wait = 0,
		.default_time2retain = 3600,
	};
	char buf[1024];
	size_t len = 0;
	cr_assert_eq(iscsi_text_add(buf, sizeof(buf), &len, "SessionType", "Normal"), 0);
	cr_assert_eq(iscsi_neg_build_offer(&cfg, buf, sizeof(buf), &len), 0);
	assert_bytes(buf, len,
		     "SessionType=Normal\0"
		     "HeaderDigest=CRC32C,None\0"
		     "DataDigest=CRC32C,None\0"
		     "MaxRecvDataSegmentLength=8192\0"
		     "MaxBurstLength=65536\0"
		     "FirstBurstLength=65536\0"
		     "ImmediateData=No\0"
		     "InitialR2T=Yes\0"
		     "MaxOutstandingR2T=4\0"
		     "DataPDUInOrder=Yes\0"
		     "DataSequenceInOrder=Yes\0"
		     "DefaultTime2Wait=0\0"
		     "DefaultTime2Retain=3600\0"
		     "ErrorRecoveryLevel=0\0"
		     "MaxConnections=1\0");
}

Test(neg, offer_clamps_out_of_range_config)
{
	struct iscsi_neg_config cfg;
	char buf[1024];
	size_t len = 0;
	iscsi_neg_config_default(&cfg);
	cfg.max_recv_dsl = 100;
	cfg.max_burst = 0xffffffffu;
	cfg.max_outstanding_r2t = 0;
	cfg.default_time2wait = 5000;
	cr_assert_eq(iscsi_neg_build_offer(&cfg, buf, sizeof(buf), &len), 0);
	cr_assert_not_null(memmem(buf, len, "\0MaxRecvDataSegmentLength=512\0", 30));
	cr_assert_not_null(memmem(buf, len, "\0MaxBurstLength=16777215\0", 25));
	cr_assert_not_null(memmem(buf, len, "\0MaxOutstandingR2T=1\0", 21));
	cr_assert_not_null(memmem(buf, len, "\0DefaultTime2Wait=3600\0", 23));
}

Test(neg, offer_no_space)
{
	struct iscsi_neg_config cfg;
	char buf[1024];
	iscsi_neg_config_default(&cfg);
	size_t full = 0;
	cr_assert_eq(iscsi_neg_build_offer(&cfg, buf, sizeof(buf), &full), 0);
	for (size_t cap = 0; cap < full; cap++) {
		size_t len = 0;
		cr_assert_eq(iscsi_neg_build_offer(&cfg, buf, cap, &len), -ENOSPC);
		cr_assert_eq(len, 0, "length restored");
	}
	size_t len = 0;
	cr_assert_eq(iscsi_neg_build_offer(&cfg, buf, full, &len), 0);
	cr_assert_eq(len, full);
}

/* ---- negotiation ---- */

static struct iscsi_neg n;
static char reply[4096];
static size_t reply_len;

static void start(const struct iscsi_neg_config *cfg)
{
	struct iscsi_neg_config def;
	if (cfg == NULL) {
		iscsi_neg_config_default(&def);
		cfg = &def;
	}
	iscsi_neg_init(&n, cfg);
	reply_len = 0;
	memset(reply, 0, sizeof(reply));
}

/* as if we had offered nothing: everything the target sends is its offer */
static void start_target_first(const struct iscsi_neg_config *cfg)
{
	start(cfg);
	n.offered = 0;
}

static int ap(const char *key, const char *value)
{
	return iscsi_neg_apply(&n, key, value, reply, sizeof(reply), &reply_len);
}

static struct iscsi_params fin(void)
{
	struct iscsi_params p;
	iscsi_neg_finish(&n, &p);
	return p;
}

Test(neg, init_state)
{
	start(NULL);
	struct iscsi_params p = fin();
	/* nothing answered: RFC defaults, except our own declaration and
	 * the Booleans our offer alone decides */
	cr_assert_eq(p.max_recv_dsl, 262144);
	cr_assert_eq(p.max_xmit_dsl, 8192);
	cr_assert_eq(p.max_burst, 262144);
	cr_assert_eq(p.first_burst, 65536);
	cr_assert(p.immediate_data);
	cr_assert(p.initial_r2t);
	cr_assert_eq(p.default_time2retain, 20);
	cr_assert_eq(reply_len, 0);
}

Test(neg, digests)
{
	struct iscsi_neg_config cfg;
	iscsi_neg_config_default(&cfg);
	cfg.header_digest_crc32c = true;
	cfg.data_digest_crc32c = true;

	start(&cfg);
	cr_assert_eq(ap("HeaderDigest", "CRC32C"), 0);
	cr_assert_eq(ap("DataDigest", "None"), 0);
	struct iscsi_params p = fin();
	cr_assert(p.header_digest);
	cr_assert_not(p.data_digest);

	start(&cfg);
	cr_assert_eq(ap("HeaderDigest", "None"), 0);
	cr_assert_eq(ap("DataDigest", "CRC32C"), 0);
	p = fin();
	cr_assert_not(p.header_digest);
	cr_assert(p.data_digest);
	cr_assert_eq(reply_len, 0);

	start(&cfg);
	cr_assert_eq(ap("HeaderDigest", "CRC32C,None"), -EPROTO, "a list is not an answer");
	cr_assert_eq(ap("DataDigest", "crc32c"), -EPROTO, "values are case sensitive");
	start(&cfg);
	cr_assert_eq(ap("HeaderDigest", "MD5"), -EPROTO);
	cr_assert_eq(ap("DataDigest", ""), -EPROTO);

	/* we offered None only */
	start(NULL);
	cr_assert_eq(ap("HeaderDigest", "CRC32C"), -EPROTO);
	cr_assert_eq(ap("DataDigest", "None"), 0);
	cr_assert_not(fin().data_digest);
}

Test(neg, max_recv_dsl_declarative)
{
	start(NULL);
	cr_assert_eq(ap("MaxRecvDataSegmentLength", "65536"), 0);
	cr_assert_eq(reply_len, 0, "declarative: no answer");
	struct iscsi_params p = fin();
	cr_assert_eq(p.max_xmit_dsl, 65536);
	cr_assert_eq(p.max_recv_dsl, 262144, "ours is unaffected");

	start(NULL);
	cr_assert_eq(ap("MaxRecvDataSegmentLength", "512"), 0);
	cr_assert_eq(fin().max_xmit_dsl, 512);
	start(NULL);
	cr_assert_eq(ap("MaxRecvDataSegmentLength", "16777215"), 0);
	cr_assert_eq(fin().max_xmit_dsl, 16777215);
	start(NULL);
	cr_assert_eq(ap("MaxRecvDataSegmentLength", "0x1000000"), -EPROTO);
	cr_assert_eq(ap("MaxRecvDataSegmentLength", "511"), -EPROTO);
	cr_assert_eq(ap("MaxRecvDataSegmentLength", "0"), -EPROTO);

	/* also when the target sends it before we offered anything */
	start_target_first(NULL);
	cr_assert_eq(ap("MaxRecvDataSegmentLength", "131072"), 0);
	cr_assert_eq(reply_len, 0);
	cr_assert_eq(fin().max_xmit_dsl, 131072);
	start_target_first(NULL);
	cr_assert_eq(ap("MaxRecvDataSegmentLength", "100"), -EPROTO);
}

Test(neg, numbers)
{
	static const struct {
		const char *v;
		int rc;
		uint32_t want;
	} cases[] = {
		{ "4096", 0, 4096 },      { "0x1000", 0, 4096 },   { "0X1000", 0, 4096 },
		{ "0x0000000000000000001000", 0, 4096 },            { "0004096", 0, 4096 },
		{ "0xfFfF", 0, 65535 },   { "", -EPROTO, 0 },      { "0x", -EPROTO, 0 },
		{ "-1", -EPROTO, 0 },     { "+4096", -EPROTO, 0 }, { " 4096", -EPROTO, 0 },
		{ "4096 ", -EPROTO, 0 },  { "4k", -EPROTO, 0 },    { "1e4", -EPROTO, 0 },
		{ "0b1000", -EPROTO, 0 }, { "0x1g", -EPROTO, 0 },  { "99999999999999999999999", -EPROTO, 0 },
		{ "0xffffffffffffffffffff", -EPROTO, 0 },          { "4294967808", -EPROTO, 0 },
		{ "511", -EPROTO, 0 },    { "Yes", -EPROTO, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		start(NULL);
		cr_assert_eq(ap("MaxBurstLength", cases[i].v), cases[i].rc, "'%s'", cases[i].v);
		if (cases[i].rc == 0)
			cr_assert_eq(fin().max_burst, cases[i].want, "'%s'", cases[i].v);
	}
}

Test(neg, min_keys_answers)
{
	start(NULL);
	cr_assert_eq(ap("MaxBurstLength", "262144"), 0);
	cr_assert_eq(ap("FirstBurstLength", "65536"), 0);
	cr_assert_eq(ap("MaxOutstandingR2T", "1"), 0);
	cr_assert_eq(ap("DefaultTime2Retain", "0"), 0);
	cr_assert_eq(ap("ErrorRecoveryLevel", "0"), 0);
	cr_assert_eq(ap("MaxConnections", "1"), 0);
	cr_assert_eq(reply_len, 0);
	struct iscsi_params p = fin();
	cr_assert_eq(p.max_burst, 262144);
	cr_assert_eq(p.first_burst, 65536);
	cr_assert_eq(p.max_outstanding_r2t, 1);
	cr_assert_eq(p.default_time2retain, 0);
	cr_assert_eq(p.erl, 0);
	cr_assert_eq(p.max_connections, 1);

	/* an answer equal to our offer is fine, above it is not */
	start(NULL);
	cr_assert_eq(ap("MaxBurstLength", "16777215"), 0);
	cr_assert_eq(ap("FirstBurstLength", "262144"), 0);
	p = fin();
	cr_assert_eq(p.max_burst, 16777215);
	cr_assert_eq(p.first_burst, 262144);

	struct iscsi_neg_config cfg;
	iscsi_neg_config_default(&cfg);
	cfg.max_burst = 65536;
	cfg.first_burst = 16384;
	cfg.max_outstanding_r2t = 8;
	cfg.default_time2retain = 60;
	start(&cfg);
	cr_assert_eq(ap("MaxBurstLength", "65537"), -EPROTO);
	cr_assert_eq(ap("FirstBurstLength", "16385"), -EPROTO);
	cr_assert_eq(ap("MaxOutstandingR2T", "9"), -EPROTO);
	cr_assert_eq(ap("DefaultTime2Retain", "61"), -EPROTO);
	cr_assert_eq(ap("ErrorRecoveryLevel", "1"), -EPROTO);
	cr_assert_eq(ap("MaxConnections", "2"), -EPROTO);
	start(&cfg);
	cr_assert_eq(ap("MaxOutstandingR2T", "0"), -EPROTO, "below the legal range");
	cr_assert_eq(ap("MaxBurstLength", "256"), -EPROTO);
	cr_assert_eq(ap("MaxConnections", "0"), -EPROTO);
	start(&cfg);
	cr_assert_eq(ap("MaxOutstandingR2T", "3"), 0);
	cr_assert_eq(ap("DefaultTime2Retain", "30"), 0);
	cr_assert_eq(ap("MaxBurstLength", "8192"), 0);
	p = fin();
	cr_assert_eq(p.max_outstanding_r2t, 3);
	cr_assert_eq(p.default_time2retain, 30);
	cr_assert_eq(p.max_burst, 8192);
	cr_assert_eq(p.first_burst, 8192, "RFC default 65536 clamped to MaxBurstLength");
}

Test(neg, time2wait_max)
{
	struct iscsi_neg_config cfg;
	iscsi_neg_config_default(&cfg);
	cfg.default_time2wait = 5;
	start(&cfg);
	cr_assert_eq(ap("DefaultTime2Wait", "4"), -EPROTO, "below our offer");
	start(&cfg);
	cr_assert_eq(ap("DefaultTime2Wait", "3601"), -EPROTO);
	start(&cfg);
	cr_assert_eq(ap("DefaultTime2Wait", "10"), 0);
	cr_assert_eq(fin().default_time2wait, 10);
	start(&cfg);
	cr_assert_eq(ap("DefaultTime2Wait", "5"), 0);
	cr_assert_eq(fin().default_time2wait, 5);

	start_target_first(&cfg);
	cr_assert_eq(ap("DefaultTime2Wait", "1"), 0);
	assert_bytes(reply, reply_len, "DefaultTime2Wait=5\0");
	cr_assert_eq(fin().default_time2wait, 5);
	start_target_first(&cfg);
	cr_assert_eq(ap("DefaultTime2Wait", "20"), 0);
	assert_bytes(reply, reply_len, "DefaultTime2Wait=20\0");
	cr_assert_eq(fin().default_time2wait, 20);
	start_target_first(&cfg);
	cr_assert_eq(ap("DefaultTime2Wait", "4000"), -EPROTO);
	cr_assert_eq(reply_len, 0);
}

Test(neg, booleans_answered)
{
	struct iscsi_neg_config cfg;
	iscsi_neg_config_default(&cfg); /* ImmediateData=Yes, InitialR2T=No */

	start(&cfg);
	cr_assert_eq(ap("ImmediateData", "No"), 0);
	cr_assert_eq(ap("InitialR2T", "No"), 0);
	cr_assert_eq(ap("DataPDUInOrder", "No"), 0);
	cr_assert_eq(ap("DataSequenceInOrder", "No"), 0);
	struct iscsi_params p = fin();
	cr_assert_not(p.immediate_data);
	cr_assert_not(p.initial_r2t);
	cr_assert(p.data_pdu_in_order, "we offered Yes to an OR key");
	cr_assert(p.data_seq_in_order);

	start(&cfg);
	cr_assert_eq(ap("ImmediateData", "Yes"), 0);
	cr_assert_eq(ap("InitialR2T", "Yes"), 0);
	p = fin();
	cr_assert(p.immediate_data);
	cr_assert(p.initial_r2t);

	cfg.immediate_data = false;
	cfg.initial_r2t = true;
	start(&cfg);
	cr_assert_eq(ap("ImmediateData", "Yes"), 0, "AND with our No: result No, not an error");
	cr_assert_eq(ap("InitialR2T", "No"), 0, "OR with our Yes: result Yes, not an error");
	p = fin();
	cr_assert_not(p.immediate_data);
	cr_assert(p.initial_r2t);

	/* answers are optional when our offer decides (§6.2.2) */
	start(&cfg);
	p = fin();
	cr_assert_not(p.immediate_data);
	cr_assert(p.initial_r2t);

	start(&cfg);
	cr_assert_eq(ap("ImmediateData", "yes"), -EPROTO);
	cr_assert_eq(ap("InitialR2T", "True"), -EPROTO);
	cr_assert_eq(ap("DataPDUInOrder", "1"), -EPROTO);
	cr_assert_eq(ap("DataSequenceInOrder", ""), -EPROTO);
	cr_assert_eq(ap("InitialR2T", "Yes "), -EPROTO);
}

Test(neg, special_answers_keep_defaults)
{
	struct iscsi_neg_config cfg;
	iscsi_neg_config_default(&cfg);
	cfg.header_digest_crc32c = true;
	cfg.data_digest_crc32c = true;
	start(&cfg);
	cr_assert_eq(ap("HeaderDigest", "Reject"), 0);
	cr_assert_eq(ap("DataDigest", "Irrelevant"), 0);
	cr_assert_eq(ap("MaxBurstLength", "NotUnderstood"), 0);
	cr_assert_eq(ap("FirstBurstLength", "Reject"), 0);
	cr_assert_eq(ap("ImmediateData", "Irrelevant"), 0);
	cr_assert_eq(ap("InitialR2T", "Reject"), 0);
	cr_assert_eq(ap("MaxOutstandingR2T", "NotUnderstood"), 0);
	cr_assert_eq(ap("DefaultTime2Wait", "Reject"), 0);
	cr_assert_eq(ap("DefaultTime2Retain", "Irrelevant"), 0);
	cr_assert_eq(ap("ErrorRecoveryLevel", "NotUnderstood"), 0);
	cr_assert_eq(ap("MaxConnections", "Reject"), 0);
	cr_assert_eq(ap("MaxRecvDataSegmentLength", "Irrelevant"), 0);
	cr_assert_eq(reply_len, 0);
	struct iscsi_params p = fin();
	cr_assert_not(p.header_digest);
	cr_assert_not(p.data_digest);
	cr_assert_eq(p.max_burst, 262144);
	cr_assert_eq(p.first_burst, 65536);
	cr_assert(p.immediate_data);
	cr_assert(p.initial_r2t);
	cr_assert_eq(p.max_outstanding_r2t, 1);
	cr_assert_eq(p.default_time2wait, 2);
	cr_assert_eq(p.default_time2retain, 20);
	cr_assert_eq(p.max_xmit_dsl, 8192);

	/* similar words are values, not the special constants */
	start(&cfg);
	cr_assert_eq(ap("MaxBurstLength", "reject"), -EPROTO);
}

Test(neg, duplicate_key)
{
	start(NULL);
	cr_assert_eq(ap("MaxBurstLength", "65536"), 0);
	cr_assert_eq(ap("MaxBurstLength", "65536"), -EPROTO);
	cr_assert_eq(ap("MaxRecvDataSegmentLength", "8192"), 0);
	cr_assert_eq(ap("MaxRecvDataSegmentLength", "8192"), -EPROTO);
	/* a bad value is not recorded: the key still counts as unanswered */
	cr_assert_eq(ap("FirstBurstLength", "x"), -EPROTO);
	cr_assert_eq(ap("FirstBurstLength", "4096"), 0);
}

Test(neg, target_first_min)
{
	start_target_first(NULL);
	cr_assert_eq(ap("MaxBurstLength", "262144"), 0);
	cr_assert_eq(ap("FirstBurstLength", "1048576"), 0);
	cr_assert_eq(ap("MaxOutstandingR2T", "16"), 0);
	cr_assert_eq(ap("DefaultTime2Retain", "20"), 0);
	cr_assert_eq(ap("ErrorRecoveryLevel", "2"), 0);
	cr_assert_eq(ap("MaxConnections", "8"), 0);
	assert_bytes(reply, reply_len,
		     "MaxBurstLength=262144\0"
		     "FirstBurstLength=262144\0"
		     "MaxOutstandingR2T=1\0"
		     "DefaultTime2Retain=0\0"
		     "ErrorRecoveryLevel=0\0"
		     "MaxConnections=1\0");
	struct iscsi_params p = fin();
	cr_assert_eq(p.max_burst, 262144);
	cr_assert_eq(p.first_burst, 262144);
	cr_assert_eq(p.max_outstanding_r2t, 1);
	cr_assert_eq(p.default_time2retain, 0);
	cr_assert_eq(p.erl, 0);
	cr_assert_eq(p.max_connections, 1);

	/* theirs smaller than ours, and hex */
	start_target_first(NULL);
	cr_assert_eq(ap("MaxBurstLength", "0x2000"), 0);
	assert_bytes(reply, reply_len, "MaxBurstLength=8192\0");
	cr_assert_eq(fin().max_burst, 8192);

	start_target_first(NULL);
	cr_assert_eq(ap("MaxBurstLength", "100"), -EPROTO);
	cr_assert_eq(ap("ErrorRecoveryLevel", "3"), -EPROTO);
	cr_assert_eq(ap("MaxConnections", "0"), -EPROTO);
	cr_assert_eq(ap("MaxOutstandingR2T", "65536"), -EPROTO);
	cr_assert_eq(reply_len, 0);
}

Test(neg, target_first_booleans)
{
	start_target_first(NULL); /* ImmediateData=Yes, InitialR2T=No */
	cr_assert_eq(ap("InitialR2T", "No"), 0);
	cr_assert_eq(ap("ImmediateData", "No"), 0);
	cr_assert_eq(ap("DataPDUInOrder", "No"), 0);
	cr_assert_eq(ap("DataSequenceInOrder", "Yes"), 0);
	assert_bytes(reply, reply_len,
		     "InitialR2T=No\0"
		     "ImmediateData=No\0"
		     "DataPDUInOrder=Yes\0"
		     "DataSequenceInOrder=Yes\0");
	struct iscsi_params p = fin();
	cr_assert_not(p.initial_r2t);
	cr_assert_not(p.immediate_data);
	cr_assert(p.data_pdu_in_order);
	cr_assert(p.data_seq_in_order);

	start_target_first(NULL);
	cr_assert_eq(ap("InitialR2T", "Yes"), 0);
	cr_assert_eq(ap("ImmediateData", "Yes"), 0);
	assert_bytes(reply, reply_len, "InitialR2T=Yes\0ImmediateData=Yes\0");
	p = fin();
	cr_assert(p.initial_r2t);
	cr_assert(p.immediate_data);

	start_target_first(NULL);
	cr_assert_eq(ap("InitialR2T", "maybe"), -EPROTO);
	cr_assert_eq(reply_len, 0);
}

Test(neg, target_first_digests)
{
	struct iscsi_neg_config cfg;
	iscsi_neg_config_default(&cfg);
	cfg.header_digest_crc32c = true;

	start_target_first(&cfg);
	cr_assert_eq(ap("HeaderDigest", "CRC32C,None"), 0);
	cr_assert_eq(ap("DataDigest", "CRC32C,None"), 0);
	assert_bytes(reply, reply_len, "HeaderDigest=CRC32C\0DataDigest=None\0");
	struct iscsi_params p = fin();
	cr_assert(p.header_digest);
	cr_assert_not(p.data_digest);

	start_target_first(&cfg);
	cr_assert_eq(ap("HeaderDigest", "None,CRC32C"), 0);
	cr_assert_eq(ap("DataDigest", "CRC32C"), 0);
	assert_bytes(reply, reply_len, "HeaderDigest=None\0DataDigest=Reject\0");
	p = fin();
	cr_assert_not(p.header_digest);
	cr_assert_not(p.data_digest);

	start_target_first(&cfg);
	cr_assert_eq(ap("HeaderDigest", "X-vendor,CRC32C"), 0, "unknown list values are skipped");
	assert_bytes(reply, reply_len, "HeaderDigest=CRC32C\0");

	start_target_first(&cfg);
	cr_assert_eq(ap("HeaderDigest", "CRC32C,,None"), -EPROTO);
	cr_assert_eq(ap("DataDigest", ""), -EPROTO);
	cr_assert_eq(ap("DataDigest", "None,"), -EPROTO);
	cr_assert_eq(reply_len, 0);
}

Test(neg, unknown_keys)
{
	start(NULL);
	cr_assert_eq(ap("X-com.example.Foo", "1"), 0);
	cr_assert_eq(ap("X#Bar", "abc"), 0);
	cr_assert_eq(ap("SomeFutureKey", "Yes"), 0);
	cr_assert_eq(ap("TaskReporting", "ResponseFence"), 0);
	assert_bytes(reply, reply_len,
		     "X-com.example.Foo=NotUnderstood\0"
		     "X#Bar=NotUnderstood\0"
		     "SomeFutureKey=NotUnderstood\0"
		     "TaskReporting=NotUnderstood\0");
	/* a special value to a key we never sent is not answered */
	reply_len = 0;
	cr_assert_eq(ap("SomeFutureKey2", "NotUnderstood"), 0);
	cr_assert_eq(reply_len, 0);
	/* key names are case sensitive */
	cr_assert_eq(ap("maxburstlength", "512"), 0);
	assert_bytes(reply, reply_len, "maxburstlength=NotUnderstood\0");
}

Test(neg, rfc3720_markers)
{
	start(NULL);
	cr_assert_eq(ap("IFMarker", "No"), 0);
	cr_assert_eq(ap("OFMarker", "Yes"), 0);
	cr_assert_eq(ap("OFMarkInt", "2048~8192"), 0);
	cr_assert_eq(ap("IFMarkInt", "2048"), 0);
	assert_bytes(reply, reply_len,
		     "IFMarker=No\0"
		     "OFMarker=No\0"
		     "OFMarkInt=Irrelevant\0"
		     "IFMarkInt=Irrelevant\0");
}

Test(neg, ignored_and_declarative_keys)
{
	start(NULL);
	cr_assert_eq(ap("TargetName", "iqn.x:y"), 0);
	cr_assert_eq(ap("InitiatorName", "iqn.a:b"), 0);
	cr_assert_eq(ap("SessionType", "Normal"), 0);
	cr_assert_eq(ap("AuthMethod", "None"), 0);
	cr_assert_eq(ap("TargetAddress", "10.0.0.1:3260,1"), 0);
	cr_assert_eq(ap("TargetAddress", "10.0.0.2:3260,1"), 0);
	cr_assert_eq(ap("CHAP_A", "5"), 0);
	cr_assert_eq(ap("TargetAlias", "My Disk"), 0);
	cr_assert_eq(ap("TargetPortalGroupTag", "7"), 0);
	cr_assert_eq(reply_len, 0);
	struct iscsi_params p = fin();
	cr_assert_str_eq(p.target_alias, "My Disk");
	cr_assert_eq(p.target_portal_group_tag, 7);

	start(NULL);
	cr_assert_eq(ap("TargetPortalGroupTag", "65536"), -EPROTO);
	cr_assert_eq(ap("TargetPortalGroupTag", "x"), -EPROTO);
	cr_assert_eq(ap("TargetPortalGroupTag", "0xffff"), 0);
	cr_assert_eq(fin().target_portal_group_tag, 65535);
}

Test(neg, long_alias_truncated)
{
	char alias[600];
	memset(alias, 'a', sizeof(alias) - 1);
	alias[sizeof(alias) - 1] = '\0';
	start(NULL);
	cr_assert_eq(ap("TargetAlias", alias), 0);
	struct iscsi_params p = fin();
	cr_assert_eq(strlen(p.target_alias), sizeof(p.target_alias) - 1);

	/* a two-byte UTF-8 sequence straddling the cut is dropped whole */
	memset(alias, 'a', 254);
	memcpy(alias + 254, "\xc3\xa9tail", 7);
	start(NULL);
	cr_assert_eq(ap("TargetAlias", alias), 0);
	p = fin();
	cr_assert_eq(strlen(p.target_alias), 254);
}

Test(neg, reply_no_space)
{
	char small[10];
	size_t len = 0;
	start_target_first(NULL);
	cr_assert_eq(iscsi_neg_apply(&n, "InitialR2T", "No", small, sizeof(small), &len), -ENOSPC);
	cr_assert_eq(len, 0);
	cr_assert_eq(iscsi_neg_apply(&n, "X-Foo", "1", small, sizeof(small), &len), -ENOSPC);
	cr_assert_eq(iscsi_neg_apply(&n, "OFMarker", "No", NULL, 0, NULL), -ENOSPC);
	/* nothing owed: no buffer needed */
	cr_assert_eq(iscsi_neg_apply(&n, "MaxRecvDataSegmentLength", "8192", NULL, 0, NULL), 0);
	start(NULL);
	cr_assert_eq(iscsi_neg_apply(&n, "MaxBurstLength", "8192", NULL, 0, NULL), 0);
	cr_assert_eq(iscsi_neg_apply(NULL, "MaxBurstLength", "8192", NULL, 0, NULL), -EPROTO);
	cr_assert_eq(iscsi_neg_apply(&n, NULL, "8192", NULL, 0, NULL), -EPROTO);
	cr_assert_eq(iscsi_neg_apply(&n, "A", NULL, NULL, 0, NULL), -EPROTO);
}

Test(neg, finish_clamps_first_burst)
{
	start(NULL);
	cr_assert_eq(ap("MaxBurstLength", "16384"), 0);
	cr_assert_eq(ap("FirstBurstLength", "65536"), 0);
	struct iscsi_params p = fin();
	cr_assert_eq(p.max_burst, 16384);
	cr_assert_eq(p.first_burst, 16384);
	/* unanswered MaxBurstLength keeps 262144, larger than no answer */
	start(NULL);
	cr_assert_eq(ap("FirstBurstLength", "262144"), 0);
	p = fin();
	cr_assert_eq(p.max_burst, 262144);
	cr_assert_eq(p.first_burst, 262144);
	iscsi_neg_finish(&n, NULL);
}

struct apply_ctx {
	struct iscsi_neg *n;
	char *reply;
	size_t cap;
	size_t *len;
};

static int apply_cb(void *arg, const char *key, const char *value)
{
	struct apply_ctx *a = arg;
	return iscsi_neg_apply(a->n, key, value, a->reply, a->cap, a->len);
}

Test(neg, tgtd_login_response)
{
	static const char rsp[] = "HeaderDigest=None\0DataDigest=None\0DefaultTime2Wait=2\0DefaultTime2Retain=0\0"
				  "IFMarker=No\0OFMarker=No\0ErrorRecoveryLevel=0\0InitialR2T=No\0"
				  "ImmediateData=Yes\0MaxBurstLength=262144\0FirstBurstLength=65536\0"
				  "MaxOutstandingR2T=1\0MaxConnections=1\0DataPDUInOrder=Yes\0"
				  "DataSequenceInOrder=Yes\0MaxRecvDataSegmentLength=8192\0";
	char buf[sizeof(rsp) + 3];
	memcpy(buf, rsp, sizeof(rsp) - 1);
	memset(buf + sizeof(rsp) - 1, 0, 4); /* PDU padding */

	struct iscsi_neg_config cfg;
	iscsi_neg_config_default(&cfg);
	cfg.header_digest_crc32c = true;
	cfg.data_digest_crc32c = true;
	start(&cfg);

	struct apply_ctx a = { &n, reply, sizeof(reply), &reply_len };
	cr_assert_eq(iscsi_text_parse(buf, sizeof(buf), apply_cb, &a), 0);
	assert_bytes(reply, reply_len, "IFMarker=No\0OFMarker=No\0");

	struct iscsi_params p = fin();
	cr_assert_not(p.header_digest);
	cr_assert_not(p.data_digest);
	cr_assert_eq(p.max_recv_dsl, 262144);
	cr_assert_eq(p.max_xmit_dsl, 8192);
	cr_assert_eq(p.max_burst, 262144);
	cr_assert_eq(p.first_burst, 65536);
	cr_assert(p.immediate_data);
	cr_assert_not(p.initial_r2t);
	cr_assert_eq(p.max_outstanding_r2t, 1);
	cr_assert(p.data_pdu_in_order);
	cr_assert(p.data_seq_in_order);
	cr_assert_eq(p.default_time2wait, 2);
	cr_assert_eq(p.default_time2retain, 0);
	cr_assert_eq(p.erl, 0);
	cr_assert_eq(p.max_connections, 1);
}

Test(neg, lio_style_response)
{
	/* a target that answers with its own MaxRecvDSL and larger values */
	static const char rsp[] = "HeaderDigest=CRC32C\0DataDigest=None\0MaxRecvDataSegmentLength=262144\0"
				  "MaxBurstLength=1048576\0FirstBurstLength=65536\0ImmediateData=Yes\0"
				  "InitialR2T=Yes\0MaxOutstandingR2T=1\0DefaultTime2Wait=2\0"
				  "DefaultTime2Retain=0\0ErrorRecoveryLevel=0\0MaxConnections=1\0"
				  "TargetPortalGroupTag=1\0X-com.vendor.Thing=on\0";
	char buf[sizeof(rsp)];
	memcpy(buf, rsp, sizeof(rsp));

	struct iscsi_neg_config cfg;
	iscsi_neg_config_default(&cfg);
	cfg.header_digest_crc32c = true;
	start(&cfg);
	struct apply_ctx a = { &n, reply, sizeof(reply), &reply_len };
	cr_assert_eq(iscsi_text_parse(buf, sizeof(buf) - 1, apply_cb, &a), 0);
	assert_bytes(reply, reply_len, "X-com.vendor.Thing=NotUnderstood\0");
	struct iscsi_params p = fin();
	cr_assert(p.header_digest);
	cr_assert_not(p.data_digest);
	cr_assert_eq(p.max_xmit_dsl, 262144);
	cr_assert_eq(p.max_burst, 1048576);
	cr_assert(p.initial_r2t);
	cr_assert(p.data_pdu_in_order, "unanswered, our Yes for OR decides");
	cr_assert_eq(p.target_portal_group_tag, 1);
}

/* ---- digest preferences (-o header_digest=..., URL header_digest=...) ---- */

Test(neg, set_digest_words)
{
	struct iscsi_neg_config cfg;
	iscsi_neg_config_default(&cfg);

	cr_assert_eq(iscsi_neg_set_digest(&cfg, false, "crc32c"), 0);
	cr_assert(cfg.header_digest_crc32c);
	cr_assert_eq(cfg.header_digest_pref, ISCSI_DIGEST_REQUIRE_CRC32C);
	cr_assert_not(cfg.data_digest_crc32c, "only the header digest changes");

	cr_assert_eq(iscsi_neg_set_digest(&cfg, true, "AUTO"), 0, "case-insensitive");
	cr_assert(cfg.data_digest_crc32c);
	cr_assert_eq(cfg.data_digest_pref, ISCSI_DIGEST_PREFER_CRC32C);
	cr_assert_eq(iscsi_neg_set_digest(&cfg, true, "crc32c-none"), 0);
	cr_assert_eq(cfg.data_digest_pref, ISCSI_DIGEST_PREFER_CRC32C);
	cr_assert_eq(iscsi_neg_set_digest(&cfg, true, "none-crc32c"), 0);
	cr_assert(cfg.data_digest_crc32c);
	cr_assert_eq(cfg.data_digest_pref, ISCSI_DIGEST_PREFER_NONE);
	cr_assert_eq(iscsi_neg_set_digest(&cfg, false, "none"), 0);
	cr_assert_not(cfg.header_digest_crc32c);

	cr_assert_eq(iscsi_neg_set_digest(&cfg, false, "md5"), -EINVAL);
	cr_assert_eq(iscsi_neg_set_digest(&cfg, false, ""), -EINVAL);
	cr_assert_eq(iscsi_neg_set_digest(&cfg, false, "crc32c,none"), -EINVAL);
	cr_assert_eq(iscsi_neg_set_digest(&cfg, false, NULL), -EINVAL);
	cr_assert_not(cfg.header_digest_crc32c, "a bad word changes nothing");
	cr_assert(cfg.data_digest_crc32c);
}

Test(neg, offer_digest_preferences)
{
	struct iscsi_neg_config cfg;
	char buf[1024];
	size_t len = 0;
	iscsi_neg_config_default(&cfg);
	cr_assert_eq(iscsi_neg_set_digest(&cfg, false, "crc32c"), 0);
	cr_assert_eq(iscsi_neg_set_digest(&cfg, true, "none-crc32c"), 0);
	cr_assert_eq(iscsi_neg_build_offer(&cfg, buf, sizeof(buf), &len), 0);
	static const char want[] = "HeaderDigest=CRC32C\0DataDigest=None,CRC32C\0";
	cr_assert_geq(len, sizeof(want) - 1);
	cr_assert(memcmp(buf, want, sizeof(want) - 1) == 0, "offer starts %s / %s", buf, buf + strlen(buf) + 1);
}

Test(neg, required_digest)
{
	struct iscsi_neg_config cfg;
	const char *key = NULL;
	iscsi_neg_config_default(&cfg);
	cr_assert_eq(iscsi_neg_set_digest(&cfg, false, "crc32c"), 0);
	cr_assert_eq(iscsi_neg_set_digest(&cfg, true, "crc32c"), 0);

	/* accepted */
	start(&cfg);
	cr_assert_eq(ap("HeaderDigest", "CRC32C"), 0);
	cr_assert_eq(ap("DataDigest", "CRC32C"), 0);
	struct iscsi_params p = fin();
	cr_assert(p.header_digest);
	cr_assert(p.data_digest);
	cr_assert_eq(iscsi_neg_unmet(&cfg, &p, &key), 0);

	/* refused with Reject, or with a None we did not list */
	start(&cfg);
	cr_assert_eq(ap("HeaderDigest", "Reject"), 0);
	cr_assert_eq(ap("DataDigest", "CRC32C"), 0);
	p = fin();
	cr_assert_eq(iscsi_neg_unmet(&cfg, &p, &key), -ENOTSUP);
	cr_assert_str_eq(key, "HeaderDigest");
	start(&cfg);
	cr_assert_eq(ap("HeaderDigest", "CRC32C"), 0);
	cr_assert_eq(ap("DataDigest", "None"), 0);
	p = fin();
	cr_assert_eq(iscsi_neg_unmet(&cfg, &p, &key), -ENOTSUP);
	cr_assert_str_eq(key, "DataDigest");

	/* never answered: the default None */
	start(&cfg);
	p = fin();
	cr_assert_eq(iscsi_neg_unmet(&cfg, &p, NULL), -ENOTSUP);

	/* the target offers first: None is not acceptable, so Reject */
	start_target_first(&cfg);
	cr_assert_eq(ap("HeaderDigest", "None,CRC32C"), 0);
	cr_assert_eq(ap("DataDigest", "None"), 0);
	assert_bytes(reply, reply_len, "HeaderDigest=CRC32C\0DataDigest=Reject\0");
	p = fin();
	cr_assert(p.header_digest);
	cr_assert_not(p.data_digest);
	cr_assert_eq(iscsi_neg_unmet(&cfg, &p, &key), -ENOTSUP);
	cr_assert_str_eq(key, "DataDigest");

	/* not required: nothing is unmet */
	iscsi_neg_config_default(&cfg);
	cr_assert_eq(iscsi_neg_set_digest(&cfg, false, "auto"), 0);
	start(&cfg);
	cr_assert_eq(ap("HeaderDigest", "None"), 0);
	p = fin();
	cr_assert_eq(iscsi_neg_unmet(&cfg, &p, &key), 0);
	cr_assert_eq(iscsi_neg_unmet(NULL, &p, &key), 0);
}

Test(neg, prefer_none_answers)
{
	struct iscsi_neg_config cfg;
	iscsi_neg_config_default(&cfg);
	cr_assert_eq(iscsi_neg_set_digest(&cfg, false, "none-crc32c"), 0);
	start(&cfg);
	cr_assert_eq(ap("HeaderDigest", "CRC32C"), 0, "CRC32C is in our list");
	cr_assert(fin().header_digest);
	start(&cfg);
	cr_assert_eq(ap("HeaderDigest", "None"), 0);
	cr_assert_not(fin().header_digest);
}

/* RFC 7145 §6.3: the iSER keys offered, answered, and replacing MaxRecvDataSegmentLength. */
Test(neg_iser, keys_offered_and_applied)
{
	struct iscsi_neg_config cfg;
	iscsi_neg_config_default(&cfg);
	cfg.rdma_extensions = true;
	cfg.iser_initiator_recv_dsl = 8192;
	cfg.iser_target_recv_dsl = 65536;
	cfg.iser_max_unexpected = 8;
	char buf[2048];
	size_t len = 0;
	cr_assert_eq(iscsi_neg_build_offer(&cfg, buf, sizeof(buf), &len), 0);
	cr_assert(memmem(buf, len, "RDMAExtensions=Yes", 19) != NULL);
	cr_assert(memmem(buf, len, "InitiatorRecvDataSegmentLength=8192", 36) != NULL);
	cr_assert(memmem(buf, len, "TargetRecvDataSegmentLength=65536", 34) != NULL);
	cr_assert(memmem(buf, len, "MaxOutstandingUnexpectedPDUs=8", 31) != NULL);

	struct iscsi_neg n;
	char reply[256];
	size_t rl = 0;
	iscsi_neg_init(&n, &cfg);
	cr_assert_eq(iscsi_neg_apply(&n, "RDMAExtensions", "Yes", reply, sizeof(reply), &rl), 0);
	cr_assert_eq(iscsi_neg_apply(&n, "TargetRecvDataSegmentLength", "262144", reply, sizeof(reply), &rl), 0);
	cr_assert_eq(iscsi_neg_apply(&n, "InitiatorRecvDataSegmentLength", "4096", reply, sizeof(reply), &rl), 0);
	cr_assert_eq(iscsi_neg_apply(&n, "MaxOutstandingUnexpectedPDUs", "0", reply, sizeof(reply), &rl), 0);
	cr_assert_eq(iscsi_neg_apply(&n, "MaxRecvDataSegmentLength", "262144", reply, sizeof(reply), &rl), 0);
	cr_assert_eq(iscsi_neg_apply(&n, "TargetRecvDataSegmentLength", "x", reply, sizeof(reply), &rl), -EPROTO);
	struct iscsi_params p;
	iscsi_neg_finish(&n, &p);
	cr_assert(p.rdma_extensions);
	cr_assert_eq(p.max_xmit_dsl, 65536);  /* the smaller of the two */
	cr_assert_eq(p.max_recv_dsl, 4096);
	cr_assert_eq(p.max_unexpected, 0);
	cr_assert_eq(rl, 0); /* nothing owed */
}

/* The iSER offer asks for InitialR2T=Yes: whatever the target says, no
 * unsolicited Data-Out follows a write's immediate data. */
Test(neg_iser, initial_r2t_yes)
{
	struct iscsi_neg_config cfg;
	iscsi_neg_config_default(&cfg);
	iser_neg_config(&cfg);
	char buf[2048];
	size_t len = 0;
	cr_assert_eq(iscsi_neg_build_offer(&cfg, buf, sizeof(buf), &len), 0);
	cr_assert(memmem(buf, len, "InitialR2T=Yes", 15) != NULL);
	cr_assert(memmem(buf, len, "ImmediateData=Yes", 18) != NULL);

	struct iscsi_neg n;
	char reply[256];
	size_t rl = 0;
	iscsi_neg_init(&n, &cfg);
	cr_assert_eq(iscsi_neg_apply(&n, "RDMAExtensions", "Yes", reply, sizeof(reply), &rl), 0);
	cr_assert_eq(iscsi_neg_apply(&n, "InitialR2T", "No", reply, sizeof(reply), &rl), 0);
	cr_assert_eq(iscsi_neg_apply(&n, "ImmediateData", "Yes", reply, sizeof(reply), &rl), 0);
	struct iscsi_params p;
	iscsi_neg_finish(&n, &p);
	cr_assert(p.initial_r2t);
	cr_assert(p.immediate_data);
}

/* Without the offer, the iSER keys are ignored and nothing changes. */
Test(neg_iser, ignored_without_offer)
{
	struct iscsi_neg n;
	char reply[256];
	size_t rl = 0;
	iscsi_neg_init(&n, NULL);
	cr_assert_eq(iscsi_neg_apply(&n, "RDMAExtensions", "Yes", reply, sizeof(reply), &rl), 0);
	cr_assert_eq(iscsi_neg_apply(&n, "TargetRecvDataSegmentLength", "4096", reply, sizeof(reply), &rl), 0);
	struct iscsi_params p;
	iscsi_neg_finish(&n, &p);
	cr_assert(!p.rdma_extensions);
	cr_assert_eq(p.max_xmit_dsl, 8192); /* RFC 7143 default MaxRecvDataSegmentLength */
}
