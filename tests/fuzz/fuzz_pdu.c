/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the PDU codec (initiator/wire/pdu.c).
 *
 * Input: 48 bytes of BHS, then an AHS area.  The BHS is decoded; a BHS that
 * decodes is encoded again and decoded a second time, and both decodes must
 * agree, and the encoded form may only keep bits of the input (reserved
 * fields become zero) apart from the bits the encoder fixes (I on a Login
 * Request, F on the opcodes whose F bit is always 1).  The AHS area is
 * walked twice (all of it, and the part TotalAHSLength announces); every
 * AHS handed to the callback must lie inside the area and must encode back
 * to the same header and value bytes.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "initiator/wire/pdu.h"

#define CHECK(cond)                                                                   \
	do {                                                                              \
		if (!(cond))                                                              \
			__builtin_trap();                                                 \
	} while (0)

struct walk {
	const uint8_t *area;
	size_t len;
	size_t seen; /* AHS bytes accounted for, padding included */
	unsigned count;
};

static int ahs_cb(void *arg, uint8_t type, const uint8_t *value, size_t value_len)
{
	struct walk *w = arg;
	uint8_t enc[3 + 65535 + 3];
	volatile uint8_t sink = 0;

	/* the value lies inside the area, after its 3-byte header */
	CHECK(value >= w->area + 3 && value <= w->area + w->len);
	CHECK(value_len <= (size_t)(w->area + w->len - value));
	CHECK(value_len <= 0xffff);
	CHECK(value[-1] == type);
	for (size_t i = 0; i < value_len; i++)
		sink ^= value[i];
	(void)sink;

	int n = iscsi_ahs_encode(type, value, value_len, enc, sizeof(enc));
	CHECK(n > 0 && n % 4 == 0 && (size_t)n >= 3 + value_len && (size_t)n < 3 + value_len + 4);
	CHECK(memcmp(enc, value - 3, 3 + value_len) == 0);
	for (size_t i = 3 + value_len; i < (size_t)n; i++)
		CHECK(enc[i] == 0);
	/* too small a buffer is refused, never overrun */
	uint8_t *tight = malloc((size_t)n - 1 + 1);
	CHECK(tight != NULL);
	CHECK(iscsi_ahs_encode(type, value, value_len, tight, (size_t)n - 1) == -ENOSPC);
	free(tight);

	w->seen += (size_t)n;
	w->count++;
	return 0;
}

static void walk(const uint8_t *area, size_t len)
{
	struct walk w = { area, len, 0, 0 };
	int rc = iscsi_ahs_walk(area, len, ahs_cb, &w);

	CHECK(rc == 0 || rc == -EPROTO);
	if (rc == 0)
		CHECK(w.seen == len);
	else
		CHECK(w.seen < len || len == 0);
	CHECK(iscsi_ahs_walk(area, len, NULL, NULL) == rc);
}

/* Opcodes whose byte 1 bit 7 the encoder always sets. */
static bool f_fixed(uint8_t op)
{
	switch (op) {
	case ISCSI_OP_SCSI_CMD:
	case ISCSI_OP_TEXT_REQ:
	case ISCSI_OP_TEXT_RSP:
	case ISCSI_OP_DATA_OUT:
	case ISCSI_OP_DATA_IN:
	case ISCSI_OP_LOGIN_REQ:
	case ISCSI_OP_LOGIN_RSP:
		return false;
	default:
		return true;
	}
}

static void bhs(const uint8_t *in)
{
	struct iscsi_bhs h1, h2;
	uint8_t out[ISCSI_BHS_LEN];

	int rc = iscsi_bhs_decode(in, &h1);
	const char *name = iscsi_opcode_name(in[0] & 0x3f);
	CHECK(name != NULL && name[0] != '\0');
	CHECK(iscsi_wire_opcode(in) == (in[0] & 0x3f));
	if (rc != 0) {
		CHECK(rc == -EPROTO);
		CHECK(strcmp(name, "unknown") == 0);
		return;
	}
	CHECK(h1.opcode == iscsi_wire_opcode(in));
	CHECK(h1.dlen == iscsi_wire_dlen(in) && h1.dlen <= 0xffffff);
	CHECK(h1.ahs_len * 4u == iscsi_wire_ahs_bytes(in));
	CHECK(h1.itt == iscsi_wire_itt(in));
	CHECK(iscsi_pad_len(h1.dlen) < 4 && (h1.dlen + iscsi_pad_len(h1.dlen)) % 4 == 0);

	memset(out, 0xa5, sizeof(out));
	CHECK(iscsi_bhs_encode(&h1, out) == 0);

	/* encode keeps only bits of the input, except the bits it fixes */
	for (size_t i = 0; i < ISCSI_BHS_LEN; i++) {
		uint8_t extra = out[i] & (uint8_t)~in[i];
		if (i == 0 && h1.opcode == ISCSI_OP_LOGIN_REQ)
			extra &= (uint8_t)~0x40;
		if (i == 1 && f_fixed(h1.opcode))
			extra &= (uint8_t)~0x80;
		CHECK(extra == 0);
	}

	CHECK(iscsi_bhs_decode(out, &h2) == 0);
	/* what the encoder fixes, the first decode reported as received */
	if (h1.opcode == ISCSI_OP_LOGIN_REQ)
		h1.immediate = true;
	if (f_fixed(h1.opcode))
		h1.final = true;
	CHECK(memcmp(&h1, &h2, sizeof(h1)) == 0);

	/* a second round trip is the identity on the wire form */
	uint8_t again[ISCSI_BHS_LEN];
	CHECK(iscsi_bhs_encode(&h2, again) == 0);
	CHECK(memcmp(out, again, sizeof(out)) == 0);

	/* a dlen wider than 24 bits is refused */
	h2.dlen = 0x1000000;
	CHECK(iscsi_bhs_encode(&h2, again) == -EINVAL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < ISCSI_BHS_LEN)
		return 0;

	/* an exact-size copy, so that any read past the BHS is caught */
	uint8_t *in = malloc(ISCSI_BHS_LEN);
	CHECK(in != NULL);
	memcpy(in, data, ISCSI_BHS_LEN);
	bhs(in);

	const uint8_t *area = data + ISCSI_BHS_LEN;
	size_t len = size - ISCSI_BHS_LEN;
	walk(len ? area : NULL, len);
	size_t announced = iscsi_wire_ahs_bytes(in);
	if (announced > 0 && announced <= len && announced != len)
		walk(area, announced);
	free(in);
	return 0;
}
