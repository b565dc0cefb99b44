/* SPDX-License-Identifier: MIT */
/*
 * CHAP (RFC 7143 §12.1.3, RFC 1994): known-answer vectors for the four
 * hashes (expected values computed outside this code base, with Python's
 * hashlib and cross-checked with `openssl dgst`), binary value encodings
 * (RFC 7143 §6.1), challenge checks, and the security stage of a login
 * against a fake target that plays CHAP, one-way and mutual.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "initiator/login/chap.h"
#include "initiator/login/login.h"

static void unhex(const char *hex, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		cr_assert_eq(sscanf(hex + 2 * i, "%2x", &v), 1);
		out[i] = (uint8_t)v;
	}
}

static void check_kat(unsigned alg, uint8_t id, const char *secret, const uint8_t *chal, size_t chal_len,
		      const char *want_hex)
{
	uint8_t want[ISCSI_CHAP_DIGEST_MAX], got[ISCSI_CHAP_DIGEST_MAX];
	size_t n = strlen(want_hex) / 2;
	unhex(want_hex, want, n);
	cr_assert_eq(iscsi_chap_digest_len(alg), n);
	cr_assert_eq(iscsi_chap_response(alg, id, secret, strlen(secret), chal, chal_len, got), (int)n);
	cr_assert_eq(memcmp(got, want, n), 0, "CHAP_A=%u: wrong digest", alg);
}

/* H(0x07 || "secretpass12" || 0x10 0x11 ... 0x2f) */
Test(chap, known_answers_secretpass12)
{
	uint8_t chal[32];
	for (size_t i = 0; i < sizeof(chal); i++)
		chal[i] = (uint8_t)(0x10 + i);
	check_kat(ISCSI_CHAP_MD5, 7, "secretpass12", chal, sizeof(chal), "129792e9003b6a768f2fec6df20ec734");
	check_kat(ISCSI_CHAP_SHA1, 7, "secretpass12", chal, sizeof(chal), "e18dcb39d3c29daaf27716868011157820f73a3e");
	check_kat(ISCSI_CHAP_SHA256, 7, "secretpass12", chal, sizeof(chal),
		  "677ebf28bebdfc9d6799679493418d1fbcba12f3da9f4a12bd1f5a560af8a038");
	check_kat(ISCSI_CHAP_SHA3_256, 7, "secretpass12", chal, sizeof(chal),
		  "0c19fcb320a78a8bb5087064035f8f327b53604d573ee07c7fe920f425c00747");
}

/* H(0xff || "tgtsecret123" || (0x00 0xff) x 8) */
Test(chap, known_answers_id_255)
{
	uint8_t chal[16];
	for (size_t i = 0; i < sizeof(chal); i++)
		chal[i] = i % 2 ? 0xff : 0x00;
	check_kat(ISCSI_CHAP_MD5, 255, "tgtsecret123", chal, sizeof(chal), "2437bcce224c428e9213f80b79d67117");
	check_kat(ISCSI_CHAP_SHA1, 255, "tgtsecret123", chal, sizeof(chal), "d7a75bb2cdec306f083ed0480678798852ecdcff");
	check_kat(ISCSI_CHAP_SHA256, 255, "tgtsecret123", chal, sizeof(chal),
		  "32d5c8a13968b97e6c6492951199fd15e8e4d6f9f91348a5908e2bccb59df516");
	check_kat(ISCSI_CHAP_SHA3_256, 255, "tgtsecret123", chal, sizeof(chal),
		  "1ff6649436b1de829264031bb1e260e6aa50d35ffec424b10db79b8d35c51265");
}

/* The iSCSI CHAP example hash published by hashcat (mode 4800, password "hashcat"). */
Test(chap, known_answer_hashcat_md5)
{
	uint8_t chal[16];
	unhex("35343534373533343633383832343736", chal, sizeof(chal));
	check_kat(ISCSI_CHAP_MD5, 0xdc, "hashcat", chal, sizeof(chal), "aa4aaa1d52319525023c06a4873f4c51");
}

Test(chap, algorithms)
{
	uint8_t out[ISCSI_CHAP_DIGEST_MAX];
	cr_assert_eq(iscsi_chap_digest_len(5), 16);
	cr_assert_eq(iscsi_chap_digest_len(6), 20);
	cr_assert_eq(iscsi_chap_digest_len(7), 32);
	cr_assert_eq(iscsi_chap_digest_len(8), 32);
	cr_assert_eq(iscsi_chap_digest_len(4), 0);
	cr_assert_eq(iscsi_chap_digest_len(9), 0);
	cr_assert_eq(iscsi_chap_digest_len(128), 0);
	cr_assert_str_eq(iscsi_chap_alg_name(8), "SHA3-256");
	cr_assert_str_eq(iscsi_chap_alg_name(1), "unsupported");
	cr_assert_eq(iscsi_chap_response(9, 1, "s", 1, (const uint8_t *)"c", 1, out), -EINVAL);
}

Test(chap, decode_hex)
{
	uint8_t b[8];
	size_t n = 99;
	cr_assert_eq(iscsi_chap_decode("0x0102ff", b, sizeof(b), &n), 0);
	cr_assert_eq(n, 3);
	cr_assert(b[0] == 1 && b[1] == 2 && b[2] == 0xff);
	/* odd digit count: implied leading zero */
	cr_assert_eq(iscsi_chap_decode("0x102", b, sizeof(b), &n), 0);
	cr_assert_eq(n, 2);
	cr_assert(b[0] == 0x01 && b[1] == 0x02);
	cr_assert_eq(iscsi_chap_decode("0XaBcD", b, sizeof(b), &n), 0);
	cr_assert(n == 2 && b[0] == 0xab && b[1] == 0xcd);
	cr_assert_eq(iscsi_chap_decode("0x0102030405060708", b, sizeof(b), &n), 0);
	cr_assert_eq(n, 8);
	cr_assert_eq(iscsi_chap_decode("0x010203040506070809", b, sizeof(b), &n), -EMSGSIZE);
	cr_assert_eq(n, 0);
	cr_assert_eq(iscsi_chap_decode("0x", b, sizeof(b), &n), -EINVAL);
	cr_assert_eq(iscsi_chap_decode("0x12g4", b, sizeof(b), &n), -EINVAL);
	cr_assert_eq(iscsi_chap_decode("0x12 4", b, sizeof(b), &n), -EINVAL);
	cr_assert_eq(iscsi_chap_decode("1234", b, sizeof(b), &n), -EINVAL);
	cr_assert_eq(iscsi_chap_decode("0", b, sizeof(b), &n), -EINVAL);
	cr_assert_eq(iscsi_chap_decode("", b, sizeof(b), &n), -EINVAL);
	cr_assert_eq(iscsi_chap_decode("0y12", b, sizeof(b), &n), -EINVAL);
	cr_assert_eq(iscsi_chap_decode(NULL, b, sizeof(b), &n), -EINVAL);
}

Test(chap, decode_base64)
{
	uint8_t b[40];
	size_t n = 0;
	/* base64 of 0x10..0x2f */
	cr_assert_eq(iscsi_chap_decode("0bEBESExQVFhcYGRobHB0eHyAhIiMkJSYnKCkqKywtLi8=", b, sizeof(b), &n), 0);
	cr_assert_eq(n, 32);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(b[i], 0x10 + i);
	/* 0x01..0x10 (two '=') and 0x01..0x11 (one '=') */
	cr_assert_eq(iscsi_chap_decode("0BAQIDBAUGBwgJCgsMDQ4PEA==", b, sizeof(b), &n), 0);
	cr_assert_eq(n, 16);
	cr_assert(b[0] == 1 && b[15] == 16);
	cr_assert_eq(iscsi_chap_decode("0bAQIDBAUGBwgJCgsMDQ4PEBE=", b, sizeof(b), &n), 0);
	cr_assert_eq(n, 17);
	cr_assert(b[16] == 17);
	cr_assert_eq(iscsi_chap_decode("0bAQIDBAUGBwgJCgsMDQ4PEBE=", b, 16, &n), -EMSGSIZE);
	cr_assert_eq(iscsi_chap_decode("0bAQIDBAUGBwgJCgsMDQ4PEA", b, sizeof(b), &n), -EINVAL);  /* no padding */
	cr_assert_eq(iscsi_chap_decode("0bAQID BAUG", b, sizeof(b), &n), -EINVAL);               /* blank */
	cr_assert_eq(iscsi_chap_decode("0bAQ=D", b, sizeof(b), &n), -EINVAL);
	cr_assert_eq(iscsi_chap_decode("0bA===", b, sizeof(b), &n), -EINVAL);
	cr_assert_eq(iscsi_chap_decode("0bAQ*D", b, sizeof(b), &n), -EINVAL);
	cr_assert_eq(iscsi_chap_decode("0b", b, sizeof(b), &n), -EINVAL);
	cr_assert_eq(n, 0);
}

Test(chap, encode_hex)
{
	const uint8_t b[] = {0x00, 0x7f, 0xa5, 0xff};
	char out[11];
	cr_assert_eq(iscsi_chap_encode_hex(b, sizeof(b), out, sizeof(out)), 0);
	cr_assert_str_eq(out, "0x007fa5ff");
	cr_assert_eq(iscsi_chap_encode_hex(b, sizeof(b), out, sizeof(out) - 1), -ENOSPC);
	cr_assert_str_eq(out, "");
	cr_assert_eq(iscsi_chap_encode_hex(b, 0, out, 3), 0);
	cr_assert_str_eq(out, "0x");
	/* round trip */
	uint8_t back[4];
	size_t n;
	cr_assert_eq(iscsi_chap_encode_hex(b, sizeof(b), out, sizeof(out)), 0);
	cr_assert_eq(iscsi_chap_decode(out, back, sizeof(back), &n), 0);
	cr_assert(n == 4 && memcmp(back, b, 4) == 0);
}

Test(chap, parse_id)
{
	uint8_t id = 1;
	cr_assert_eq(iscsi_chap_parse_id("0", &id), 0);
	cr_assert_eq(id, 0);
	cr_assert_eq(iscsi_chap_parse_id("255", &id), 0);
	cr_assert_eq(id, 255);
	cr_assert_eq(iscsi_chap_parse_id("0x1f", &id), 0);
	cr_assert_eq(id, 0x1f);
	cr_assert_eq(iscsi_chap_parse_id("0XFF", &id), 0);
	cr_assert_eq(id, 0xff);
	cr_assert_eq(iscsi_chap_parse_id("256", &id), -EINVAL);
	cr_assert_eq(iscsi_chap_parse_id("0x100", &id), -EINVAL);
	cr_assert_eq(iscsi_chap_parse_id("", &id), -EINVAL);
	cr_assert_eq(iscsi_chap_parse_id("0x", &id), -EINVAL);
	cr_assert_eq(iscsi_chap_parse_id("-1", &id), -EINVAL);
	cr_assert_eq(iscsi_chap_parse_id("1a", &id), -EINVAL);
	cr_assert_eq(iscsi_chap_parse_id("99999999999999999999", &id), -EINVAL);
}

Test(chap, challenge_checks)
{
	uint8_t a[ISCSI_CHAP_CHALLENGE_MAX + 1] = {0}, b[32];
	for (size_t i = 0; i < sizeof(b); i++)
		a[i] = b[i] = (uint8_t)(i * 7 + 1);
	/* too short, shortest, longest, too long */
	cr_assert_eq(iscsi_chap_check_challenge(a, 15, NULL, 0), -ERANGE);
	cr_assert_eq(iscsi_chap_check_challenge(a, 0, NULL, 0), -ERANGE);
	cr_assert_eq(iscsi_chap_check_challenge(a, 16, NULL, 0), 0);
	cr_assert_eq(iscsi_chap_check_challenge(a, ISCSI_CHAP_CHALLENGE_MAX, NULL, 0), 0);
	cr_assert_eq(iscsi_chap_check_challenge(a, ISCSI_CHAP_CHALLENGE_MAX + 1, NULL, 0), -ERANGE);
	/* reflection: the peer's challenge is ours */
	cr_assert_eq(iscsi_chap_check_challenge(a, 32, b, 32), -EACCES);
	cr_assert_eq(iscsi_chap_check_challenge(a, 16, b, 32), 0);
	b[31] ^= 1;
	cr_assert_eq(iscsi_chap_check_challenge(a, 32, b, 32), 0);
	cr_assert(iscsi_chap_equal(a, a, 32));
	cr_assert_not(iscsi_chap_equal(a, b, 32));
}

Test(chap, random_challenges_differ)
{
	uint8_t a[32], b[32];
	cr_assert_eq(iscsi_chap_random(a, sizeof(a)), 0);
	cr_assert_eq(iscsi_chap_random(b, sizeof(b)), 0);
	cr_assert_neq(memcmp(a, b, sizeof(a)), 0);
}

/* ---- the security stage against a fake CHAP target ---- */

#define FT_MAX 12

struct ft {
	struct iscsi_transport base;
	/* the target's configuration */
	const char *user, *secret;        /* the initiator account it checks */
	const char *tuser, *tsecret;      /* what it answers a mutual challenge with */
	unsigned alg;                     /* what it picks; 0: the first we offer */
	const char *chal_text;            /* CHAP_C to send; NULL: 0x10..0x2f */
	const char *alg_text, *id_text;   /* overrides; "" leaves the key out */
	bool transit_early;               /* T=1 in the answer to AuthMethod=CHAP */
	bool wrong_mutual, omit_mutual;
	const char *mutual_name;          /* CHAP_N it gives; NULL: tuser */
	/* what happened */
	int nsent;
	struct iscsi_bhs sent[FT_MAX];
	char sent_text[FT_MAX][4096];
	uint32_t sent_len[FT_MAX];
	char reply[4096];
	size_t reply_len;
	struct iscsi_bhs rsp;
	bool verified;                    /* the initiator's CHAP_R was right */
};

static const char *find(struct ft *f, int i, const char *key)
{
	size_t kl = strlen(key);
	for (uint32_t off = 0; off < f->sent_len[i]; off += (uint32_t)strlen(f->sent_text[i] + off) + 1)
		if (strncmp(f->sent_text[i] + off, key, kl) == 0 && f->sent_text[i][off + kl] == '=')
			return f->sent_text[i] + off + kl + 1;
	return NULL;
}

static void put(struct ft *f, const char *key, const char *value)
{
	cr_assert_eq(iscsi_text_add(f->reply, sizeof(f->reply), &f->reply_len, key, value), 0);
}

static const uint8_t *default_chal(void)
{
	static uint8_t c[32];
	for (size_t i = 0; i < sizeof(c); i++)
		c[i] = (uint8_t)(0x10 + i);
	return c;
}

static int ft_send(struct iscsi_transport *t, const uint8_t *bhs, const void *data, uint32_t dlen, int timeout_ms)
{
	struct ft *f = (struct ft *)t;
	(void)timeout_ms;
	cr_assert_lt(f->nsent, FT_MAX);
	int i = f->nsent++;
	cr_assert_eq(iscsi_bhs_decode(bhs, &f->sent[i]), 0);
	cr_assert_lt(dlen, sizeof(f->sent_text[0]));
	memcpy(f->sent_text[i], data, dlen);
	f->sent_text[i][dlen] = '\0';
	f->sent_len[i] = dlen;

	/* Build the answer now, from what was sent. */
	struct iscsi_bhs *r = &f->rsp;
	memset(r, 0, sizeof(*r));
	f->reply_len = 0;
	r->opcode = ISCSI_OP_LOGIN_RSP;
	r->itt = f->sent[i].itt;
	r->u.login.csg = f->sent[i].u.login.csg;
	r->u.login.tsih = 0x1234;
	r->u.login.statsn = 100 + (uint32_t)i;
	r->u.login.expcmdsn = 1;
	r->u.login.maxcmdsn = 32;
	if (f->sent[i].u.login.csg == ISCSI_STAGE_OPERATIONAL) {
		r->u.login.transit = true;
		r->u.login.nsg = ISCSI_STAGE_FULL_FEATURE;
		return 0;
	}
	const char *am = find(f, i, "AuthMethod"), *ca = find(f, i, "CHAP_A"), *cn = find(f, i, "CHAP_N");
	if (am) {
		if (strcmp(am, "None") == 0 || strstr(am, "CHAP") == NULL) {
			r->u.login.status_class = 0x02;
			r->u.login.status_detail = 0x01;
			return 0;
		}
		put(f, "AuthMethod", "CHAP");
		if (f->transit_early) {
			r->u.login.transit = true;
			r->u.login.nsg = ISCSI_STAGE_OPERATIONAL;
		}
	} else if (ca) {
		char a[8];
		snprintf(a, sizeof(a), "%u", f->alg ? f->alg : (unsigned)(ca[0] - '0'));
		if (!f->alg)
			f->alg = (unsigned)(ca[0] - '0');
		if (!f->alg_text || f->alg_text[0])
			put(f, "CHAP_A", f->alg_text ? f->alg_text : a);
		if (!f->id_text || f->id_text[0])
			put(f, "CHAP_I", f->id_text ? f->id_text : "42");
		if (f->chal_text) {
			if (f->chal_text[0])
				put(f, "CHAP_C", f->chal_text);
		} else {
			char hex[70];
			cr_assert_eq(iscsi_chap_encode_hex(default_chal(), 32, hex, sizeof(hex)), 0);
			put(f, "CHAP_C", hex);
		}
	} else if (cn) {
		uint8_t want[ISCSI_CHAP_DIGEST_MAX], got[ISCSI_CHAP_DIGEST_MAX];
		size_t n = 0;
		int dl = iscsi_chap_response(f->alg, 42, f->secret, strlen(f->secret), default_chal(), 32, want);
		const char *cr = find(f, i, "CHAP_R");
		f->verified = strcmp(cn, f->user) == 0 && cr && iscsi_chap_decode(cr, got, sizeof(got), &n) == 0 &&
			      (int)n == dl && memcmp(got, want, n) == 0;
		if (!f->verified) {
			r->u.login.status_class = 0x02;
			r->u.login.status_detail = 0x01;
			return 0;
		}
		const char *ci = find(f, i, "CHAP_I"), *cc = find(f, i, "CHAP_C");
		if (ci && cc && !f->omit_mutual) {
			uint8_t id, chal[ISCSI_CHAP_CHALLENGE_MAX], resp[ISCSI_CHAP_DIGEST_MAX];
			size_t cl;
			char hex[2 * ISCSI_CHAP_DIGEST_MAX + 3];
			cr_assert_eq(iscsi_chap_parse_id(ci, &id), 0);
			cr_assert_eq(iscsi_chap_decode(cc, chal, sizeof(chal), &cl), 0);
			cr_assert_geq(cl, 16);
			cr_assert_eq(cl, iscsi_chap_digest_len(f->alg) < 16 ? 16 : iscsi_chap_digest_len(f->alg));
			int rl = iscsi_chap_response(f->alg, id, f->tsecret, strlen(f->tsecret), chal, cl, resp);
			if (f->wrong_mutual)
				resp[0] ^= 1;
			cr_assert_eq(iscsi_chap_encode_hex(resp, (size_t)rl, hex, sizeof(hex)), 0);
			put(f, "CHAP_N", f->mutual_name ? f->mutual_name : f->tuser);
			put(f, "CHAP_R", hex);
		}
		r->u.login.transit = true;
		r->u.login.nsg = ISCSI_STAGE_OPERATIONAL;
	}
	return 0;
}

static int ft_recv(struct iscsi_transport *t, uint8_t *bhs, void *data, uint32_t cap, uint32_t *dlen, int timeout_ms)
{
	struct ft *f = (struct ft *)t;
	(void)timeout_ms;
	f->rsp.dlen = (uint32_t)f->reply_len;
	cr_assert_eq(iscsi_bhs_encode(&f->rsp, bhs), 0);
	cr_assert_leq(f->reply_len, cap);
	memcpy(data, f->reply, f->reply_len);
	*dlen = (uint32_t)f->reply_len;
	return 0;
}

static const struct iscsi_transport_ops ft_ops = {.name = "fake-chap", .send_pdu = ft_send, .recv_pdu = ft_recv};

static struct ft target(void)
{
	struct ft f = {.base = {&ft_ops}, .user = "alice", .secret = "secretpass12", .tuser = "tgt",
		       .tsecret = "tgtsecret123"};
	return f;
}

static struct iscsi_login_config config(bool mutual)
{
	struct iscsi_login_config c = {0};
	strcpy(c.initiator_name, "iqn.2026-11.org.example:init");
	strcpy(c.target_name, "iqn.2026-11.org.example:disk");
	c.isid[0] = 0x80;
	c.cmdsn = 1;
	c.timeout_ms = 1000;
	iscsi_neg_config_default(&c.neg);
	strcpy(c.chap.user, "alice");
	strcpy(c.chap.secret, "secretpass12");
	if (mutual) {
		strcpy(c.chap.mutual_user, "tgt");
		strcpy(c.chap.mutual_secret, "tgtsecret123");
	}
	return c;
}

static int login(struct ft *f, struct iscsi_login_config *c, char *err, size_t cap)
{
	struct iscsi_login_result r;
	int rc = iscsi_login(&f->base, c, &r, err, cap);
	if (rc == 0)
		cr_assert_eq(r.chap_alg, f->alg);
	/* No secret ever reaches the message. */
	cr_assert_null(strstr(err, "secretpass12"));
	cr_assert_null(strstr(err, "tgtsecret123"));
	return rc;
}

Test(chap_login, one_way_sha3_is_the_first_choice)
{
	struct ft f = target();
	struct iscsi_login_config c = config(false);
	char err[256] = "";
	cr_assert_eq(login(&f, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert(f.verified);
	cr_assert_eq(f.alg, 8);
	/* 1: AuthMethod=CHAP only, T=0 */
	cr_assert_str_eq(find(&f, 0, "AuthMethod"), "CHAP");
	cr_assert_not(f.sent[0].u.login.transit);
	/* 2: our algorithms, most preferred first, T=0 */
	cr_assert_str_eq(find(&f, 1, "CHAP_A"), "8,7,6,5");
	cr_assert_not(f.sent[1].u.login.transit);
	/* 3: the answer, T=1 NSG=1, no challenge of ours */
	cr_assert_str_eq(find(&f, 2, "CHAP_N"), "alice");
	cr_assert(f.sent[2].u.login.transit);
	cr_assert_eq(f.sent[2].u.login.nsg, 1);
	cr_assert_null(find(&f, 2, "CHAP_C"));
	cr_assert_null(find(&f, 2, "CHAP_I"));
	/* 4: operational */
	cr_assert_eq(f.sent[3].u.login.csg, 1);
	cr_assert_eq(f.nsent, 4);
}

Test(chap_login, one_way_each_algorithm)
{
	for (unsigned alg = 5; alg <= 8; alg++) {
		struct ft f = target();
		f.alg = alg;
		struct iscsi_login_config c = config(false);
		char err[256] = "";
		cr_assert_eq(login(&f, &c, err, sizeof(err)), 0, "CHAP_A=%u: %s", alg, err);
		cr_assert(f.verified);
	}
}

Test(chap_login, wrong_secret_is_authentication_failed)
{
	struct ft f = target();
	f.secret = "another-secret";
	struct iscsi_login_config c = config(false);
	char err[256] = "";
	cr_assert_eq(login(&f, &c, err, sizeof(err)), -EACCES);
	cr_assert(strstr(err, "authentication failed"), "%s", err);
	cr_assert_null(strstr(err, "give credentials"), "%s", err);
}

Test(chap_login, mutual_each_algorithm)
{
	for (unsigned alg = 5; alg <= 8; alg++) {
		struct ft f = target();
		f.alg = alg;
		struct iscsi_login_config c = config(true);
		char err[256] = "";
		cr_assert_eq(login(&f, &c, err, sizeof(err)), 0, "CHAP_A=%u: %s", alg, err);
		cr_assert_not_null(find(&f, 2, "CHAP_I"));
		cr_assert_not_null(find(&f, 2, "CHAP_C"));
	}
}

Test(chap_login, mutual_wrong_answer_fails_closed)
{
	struct ft f = target();
	f.wrong_mutual = true;
	struct iscsi_login_config c = config(true);
	char err[256] = "";
	cr_assert_eq(login(&f, &c, err, sizeof(err)), -EACCES);
	cr_assert(strstr(err, "mutual CHAP: the target's answer is wrong"), "%s", err);
	cr_assert_eq(f.nsent, 3); /* nothing after the target's answer */
}

Test(chap_login, mutual_wrong_secret_configured)
{
	struct ft f = target();
	struct iscsi_login_config c = config(true);
	strcpy(c.chap.mutual_secret, "not-the-target");
	char err[256] = "";
	cr_assert_eq(login(&f, &c, err, sizeof(err)), -EACCES);
	cr_assert(strstr(err, "mutual CHAP: the target's answer is wrong"), "%s", err);
}

Test(chap_login, mutual_wrong_name)
{
	struct ft f = target();
	f.mutual_name = "mallory";
	struct iscsi_login_config c = config(true);
	char err[256] = "";
	cr_assert_eq(login(&f, &c, err, sizeof(err)), -EACCES);
	cr_assert(strstr(err, "mutual CHAP: the target's answer is wrong"), "%s", err);
}

Test(chap_login, mutual_without_an_answer)
{
	struct ft f = target();
	f.omit_mutual = true;
	struct iscsi_login_config c = config(true);
	char err[256] = "";
	cr_assert_eq(login(&f, &c, err, sizeof(err)), -EACCES);
	cr_assert(strstr(err, "mutual CHAP"), "%s", err);
	cr_assert_eq(f.nsent, 3);
}

Test(chap_login, challenge_too_short)
{
	struct ft f = target();
	f.chal_text = "0x000102030405060708090a0b0c0d0e"; /* 15 bytes */
	struct iscsi_login_config c = config(false);
	char err[256] = "";
	cr_assert_eq(login(&f, &c, err, sizeof(err)), -EACCES);
	cr_assert(strstr(err, "CHAP_C"), "%s", err);
	cr_assert_eq(f.nsent, 2); /* no answer sent */
}

Test(chap_login, challenge_too_long)
{
	static char text[2 + 2 * 1025 + 1];
	strcpy(text, "0x");
	for (int i = 0; i < 1025; i++)
		strcat(text, "ab");
	struct ft f = target();
	f.chal_text = text;
	struct iscsi_login_config c = config(false);
	char err[256] = "";
	cr_assert_eq(login(&f, &c, err, sizeof(err)), -EACCES);
	cr_assert(strstr(err, "longer than 1024"), "%s", err);
}

Test(chap_login, challenge_in_base64)
{
	struct ft f = target();
	f.chal_text = "0bEBESExQVFhcYGRobHB0eHyAhIiMkJSYnKCkqKywtLi8="; /* 0x10..0x2f */
	struct iscsi_login_config c = config(false);
	char err[256] = "";
	cr_assert_eq(login(&f, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert(f.verified);
}

Test(chap_login, malformed_challenge)
{
	struct ft f = target();
	f.chal_text = "0x12zz";
	struct iscsi_login_config c = config(false);
	char err[256] = "";
	cr_assert_eq(login(&f, &c, err, sizeof(err)), -EPROTO);
}

Test(chap_login, unsupported_or_unoffered_algorithm)
{
	struct ft f = target();
	f.alg_text = "9";
	struct iscsi_login_config c = config(false);
	char err[256] = "";
	cr_assert_eq(login(&f, &c, err, sizeof(err)), -EPROTO);
	cr_assert(strstr(err, "CHAP_A=9"), "%s", err);

	struct ft g = target();
	g.alg_text = "5";
	c = config(false);
	c.chap_algs[0] = 8;
	c.chap_algs[1] = 7;
	cr_assert_eq(login(&g, &c, err, sizeof(err)), -EPROTO);
	cr_assert_str_eq(find(&g, 1, "CHAP_A"), "8,7");

	struct ft h = target();
	h.alg_text = "Reject";
	c = config(false);
	cr_assert_eq(login(&h, &c, err, sizeof(err)), -EACCES);
}

Test(chap_login, missing_keys)
{
	struct iscsi_login_config c = config(false);
	char err[256] = "";
	struct ft f = target();
	f.id_text = "";
	cr_assert_eq(login(&f, &c, err, sizeof(err)), -EPROTO);
	cr_assert(strstr(err, "CHAP_I"), "%s", err);
	struct ft g = target();
	g.chal_text = "";
	cr_assert_eq(login(&g, &c, err, sizeof(err)), -EPROTO);
	cr_assert(strstr(err, "CHAP_C"), "%s", err);
	struct ft h = target();
	h.alg_text = "";
	cr_assert_eq(login(&h, &c, err, sizeof(err)), -EPROTO);
	cr_assert(strstr(err, "CHAP_A"), "%s", err);
	struct ft k = target();
	k.id_text = "300";
	cr_assert_eq(login(&k, &c, err, sizeof(err)), -EPROTO);
}

Test(chap_login, target_may_not_skip_chap)
{
	struct ft f = target();
	f.transit_early = true;
	struct iscsi_login_config c = config(false);
	char err[256] = "";
	cr_assert_eq(login(&f, &c, err, sizeof(err)), -EACCES);
	cr_assert(strstr(err, "before CHAP"), "%s", err);
}

Test(chap_login, without_credentials_a_chap_target_says_so)
{
	struct ft f = target();
	struct iscsi_login_config c = config(false);
	c.chap.user[0] = c.chap.secret[0] = '\0';
	char err[512] = "";
	/* The fake refuses AuthMethod=None with 0x0201. */
	cr_assert_eq(login(&f, &c, err, sizeof(err)), -EACCES);
	cr_assert(strstr(err, "authentication failed"), "%s", err);
	cr_assert(strstr(err, "ISERFUSE_CHAP_USERNAME"), "%s", err);
	cr_assert_str_eq(find(&f, 0, "AuthMethod"), "None");
}

Test(chap_login, inconsistent_credentials)
{
	struct ft f = target();
	char err[256] = "";
	struct iscsi_login_config c = config(false);
	c.chap.secret[0] = '\0';
	cr_assert_eq(login(&f, &c, err, sizeof(err)), -EINVAL);
	c = config(true);
	c.chap.mutual_user[0] = '\0';
	cr_assert_eq(login(&f, &c, err, sizeof(err)), -EINVAL);
	c = config(true);
	strcpy(c.chap.mutual_secret, c.chap.secret);
	cr_assert_eq(login(&f, &c, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, "differ"), "%s", err);
	c = config(false);
	c.chap_algs[0] = 9;
	cr_assert_eq(login(&f, &c, err, sizeof(err)), -EINVAL);
	cr_assert_eq(f.nsent, 0);
}

Test(chap_login, retry_without_sha256)
{
	struct iscsi_login_config c = config(false);
	struct iscsi_login_result r = {0};
	r.chap_alg = 7;
	r.status_class = 2;
	r.status_detail = 0;
	cr_assert(iscsi_login_chap_retry(&c, &r));
	cr_assert_eq(c.chap_algs[0], 8);
	cr_assert_eq(c.chap_algs[1], 6);
	cr_assert_eq(c.chap_algs[2], 5);
	cr_assert_eq(c.chap_algs[3], 0);
	/* not twice, not for another algorithm, not for another refusal */
	cr_assert_not(iscsi_login_chap_retry(&c, &r));
	c = config(false);
	r.chap_alg = 8;
	cr_assert_not(iscsi_login_chap_retry(&c, &r));
	r.chap_alg = 7;
	r.status_detail = 3;
	cr_assert_not(iscsi_login_chap_retry(&c, &r));
	r.status_class = 0;
	r.status_detail = 0;
	cr_assert_not(iscsi_login_chap_retry(&c, &r));
}

Test(chap_login, wipe)
{
	struct iscsi_login_config c = config(true);
	iscsi_login_config_wipe(&c);
	for (size_t i = 0; i < sizeof(c.chap.secret); i++)
		cr_assert(c.chap.secret[i] == 0 && c.chap.mutual_secret[i] == 0 && c.chap.user[i] == 0 &&
			  c.chap.mutual_user[i] == 0);
}
