/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the login exchange as a state machine
 * (initiator/login/login.c over text.c, chap.c, pdu.c): the input is the
 * sequence of Login Responses a target sends, one per Login Request, so a
 * hang or a bad path that lives in the sequence (continuations without
 * end, stages out of order, CHAP steps) is reached, not just one PDU.
 *
 * Input: byte 0 picks the configuration (bit 0: CHAP one-way, bit 1: also
 * mutual; bit 2: a discovery session; bit 3: CRC32C digests required);
 * then records, each answering the next request:
 *   flags (the Login Response's byte 1: T, C, CSG, NSG), status class,
 *   status detail, bits (0: a foreign ITT, 1: TSIH 0, 2: version 1,
 *   3: the opcode of a Text Response), text length (2 bytes, big-endian,
 *   at most 8192), that many bytes of text.
 * When the records run out the "connection" is closed (-ECONNRESET).
 *
 * Checks: the login ends (returns) after at most ISCSI_LOGIN_RSP_MAX
 * responses, with 0 or one of the documented errors; every request is a
 * Login Request with a data segment of at most 8192 bytes that parses as
 * text; on success the TSIH is set and the parameters are within the
 * RFC 7143 ranges.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "initiator/login/login.h"
#include "initiator/wire/pdu.h"
#include "initiator/wire/text.h"

#define CHECK(cond)                                                                   \
	do {                                                                              \
		if (!(cond))                                                              \
			__builtin_trap();                                                 \
	} while (0)

/* transport.h: CLOCK_MONOTONIC in milliseconds (tcp.c has the daemon's). */
int64_t iscsi_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct script {
	struct iscsi_transport base;
	const uint8_t *p;
	size_t left;
	uint32_t itt;
	unsigned sends, recvs;
};

static int count_cb(void *arg, const char *key, const char *value)
{
	(void)key;
	(void)value;
	(*(unsigned *)arg)++;
	return 0;
}

static int s_send(struct iscsi_transport *t, const uint8_t *bhs, const void *data, uint32_t dlen, int timeout_ms)
{
	struct script *s = (struct script *)t;
	struct iscsi_bhs h;
	CHECK(timeout_ms > 0);
	CHECK(iscsi_bhs_decode(bhs, &h) == 0);
	CHECK(h.opcode == ISCSI_OP_LOGIN_REQ);
	CHECK(dlen <= 8192 && h.dlen == dlen);
	CHECK(!h.u.login.transit || !h.u.login.cont);
	if (dlen) {
		char *copy = malloc(dlen);
		CHECK(copy);
		memcpy(copy, data, dlen);
		unsigned n = 0;
		/* a request split with C may end mid-pair: only a whole one must parse */
		if (!h.u.login.cont)
			CHECK(iscsi_text_parse(copy, dlen, count_cb, &n) == 0 || dlen == 8192);
		free(copy);
	}
	s->itt = h.itt;
	s->sends++;
	return 0;
}

static int s_recv(struct iscsi_transport *t, uint8_t *bhs, void *data, uint32_t cap, uint32_t *dlen, int timeout_ms)
{
	struct script *s = (struct script *)t;
	CHECK(timeout_ms > 0);
	if (s->left < 6)
		return -ECONNRESET;
	const uint8_t *r = s->p;
	uint32_t len = (uint32_t)((r[4] << 8) | r[5]);
	if (len > 8192)
		len = 8192;
	if (len > s->left - 6)
		len = (uint32_t)(s->left - 6);
	s->p += 6 + len;
	s->left -= 6 + len;
	s->recvs++;
	CHECK(s->recvs <= ISCSI_LOGIN_RSP_MAX);
	struct iscsi_bhs h = {0};
	h.opcode = r[3] & 8 ? ISCSI_OP_TEXT_RSP : ISCSI_OP_LOGIN_RSP;
	h.itt = r[3] & 1 ? s->itt ^ 0x10000u : s->itt;
	h.dlen = len;
	h.u.login.transit = r[0] & 0x80;
	h.u.login.cont = r[0] & 0x40;
	h.u.login.csg = (r[0] >> 2) & 3;
	h.u.login.nsg = r[0] & 3;
	h.u.login.status_class = r[1];
	h.u.login.status_detail = r[2];
	h.u.login.tsih = r[3] & 2 ? 0 : 0x77;
	h.u.login.version_max = r[3] & 4 ? 1 : 0;
	h.u.login.statsn = 100 + s->recvs;
	h.u.login.expcmdsn = 1;
	h.u.login.maxcmdsn = 32;
	if (h.opcode == ISCSI_OP_TEXT_RSP) {
		h.final = true;
		h.u.text.ttt = ISCSI_RESERVED_TAG;
		h.u.text.statsn = 100 + s->recvs;
	}
	if (iscsi_bhs_encode(&h, bhs))
		return -EPROTO;
	if (len > cap)
		return -EPROTO;
	memcpy(data, r + 6, len);
	*dlen = len;
	return 0;
}

static const struct iscsi_transport_ops script_ops = {.name = "script", .send_pdu = s_send, .recv_pdu = s_recv};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t mode = data[0];
	struct script s = {.base = {&script_ops}, .p = data + 1, .left = size - 1, .itt = 0};
	struct iscsi_login_config c = {0};
	strcpy(c.initiator_name, "iqn.2026-11.org.example:fuzz");
	if (!(mode & 4))
		strcpy(c.target_name, "iqn.2026-11.org.example:disk");
	c.isid[0] = 0x80;
	c.cmdsn = 1;
	c.timeout_ms = 60000;
	iscsi_neg_config_default(&c.neg);
	if (mode & 8) {
		c.neg.header_digest_crc32c = c.neg.data_digest_crc32c = true;
		c.neg.header_digest_pref = c.neg.data_digest_pref = ISCSI_DIGEST_REQUIRE_CRC32C;
	}
	if (mode & 1) {
		strcpy(c.chap.user, "user");
		strcpy(c.chap.secret, "secret-of-12-plus");
	}
	if ((mode & 3) == 3) {
		strcpy(c.chap.mutual_user, "target");
		strcpy(c.chap.mutual_secret, "other-secret-12-plus");
	}
	struct iscsi_login_result res;
	char err[256];
	int rc = iscsi_login(&s.base, &c, &res, err, sizeof(err));
	CHECK(s.recvs <= ISCSI_LOGIN_RSP_MAX);
	/* login.h's list; -ECONNRESET is this transport's "closed" */
	CHECK(rc == 0 || rc == -EACCES || rc == -EINVAL || rc == -ENOENT || rc == -EAGAIN || rc == -EPROTO ||
	      rc == -ETIMEDOUT || rc == -ECONNRESET || rc == -ENOMEM);
	CHECK(memchr(err, '\0', sizeof(err)) != NULL);
	if (rc == 0) {
		CHECK(res.tsih != 0);
		CHECK(res.params.max_recv_dsl >= 512 && res.params.max_recv_dsl <= 16777215);
		CHECK(res.params.max_xmit_dsl >= 512 && res.params.max_xmit_dsl <= 16777215);
		CHECK(res.params.max_burst >= 512 && res.params.max_burst <= 16777215);
		CHECK(res.params.first_burst >= 512 && res.params.first_burst <= res.params.max_burst);
	}
	iscsi_login_config_wipe(&c);
	return 0;
}
