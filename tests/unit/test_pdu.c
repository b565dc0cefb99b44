/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the iSCSI PDU codec (initiator/wire/pdu.c, RFC 7143 §11).
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "initiator/wire/pdu.h"

static const uint8_t all_opcodes[] = {
	ISCSI_OP_NOP_OUT,      ISCSI_OP_SCSI_CMD,   ISCSI_OP_TASK_MGMT_REQ,
	ISCSI_OP_LOGIN_REQ,    ISCSI_OP_TEXT_REQ,   ISCSI_OP_DATA_OUT,
	ISCSI_OP_LOGOUT_REQ,   ISCSI_OP_SNACK_REQ,  ISCSI_OP_NOP_IN,
	ISCSI_OP_SCSI_RSP,     ISCSI_OP_TASK_MGMT_RSP, ISCSI_OP_LOGIN_RSP,
	ISCSI_OP_TEXT_RSP,     ISCSI_OP_DATA_IN,    ISCSI_OP_LOGOUT_RSP,
	ISCSI_OP_R2T,          ISCSI_OP_ASYNC_MSG,  ISCSI_OP_REJECT,
};
#define N_OPCODES (sizeof(all_opcodes) / sizeof(all_opcodes[0]))

static bool is_known(unsigned op)
{
	for (size_t i = 0; i < N_OPCODES; i++)
		if (all_opcodes[i] == op)
			return true;
	return false;
}

/* ---- value generators: distinct, non-zero ------------------------------- */

struct gen {
	unsigned k;
	unsigned bools; /* bit pattern for boolean fields */
	unsigned bi;
};

static uint32_t g32(struct gen *g) { g->k++; return 0x10203040u + g->k * 0x01010101u; }
static uint16_t g16(struct gen *g) { g->k++; return (uint16_t)(0x1020u + g->k * 0x0101u); }
static uint8_t g8(struct gen *g) { g->k++; return (uint8_t)(0x10u + g->k); }
static bool gb(struct gen *g) { return (g->bools >> (g->bi++ % 16u)) & 1u; }

static bool has_i_bit(uint8_t op)
{
	return op == ISCSI_OP_NOP_OUT || op == ISCSI_OP_SCSI_CMD ||
	       op == ISCSI_OP_TASK_MGMT_REQ || op == ISCSI_OP_TEXT_REQ ||
	       op == ISCSI_OP_LOGOUT_REQ;
}

static bool has_f_bit(uint8_t op)
{
	return op == ISCSI_OP_SCSI_CMD || op == ISCSI_OP_TEXT_REQ ||
	       op == ISCSI_OP_TEXT_RSP || op == ISCSI_OP_DATA_OUT ||
	       op == ISCSI_OP_DATA_IN;
}

static bool lun_reserved(uint8_t op)
{
	return op == ISCSI_OP_SCSI_RSP || op == ISCSI_OP_TASK_MGMT_RSP ||
	       op == ISCSI_OP_LOGOUT_REQ || op == ISCSI_OP_LOGOUT_RSP ||
	       op == ISCSI_OP_REJECT;
}

/* Fill every field `op` defines with distinct non-zero values. */
static void fill(struct iscsi_bhs *h, uint8_t op, unsigned bools)
{
	struct gen g = { .k = bools & 0x0f, .bools = bools, .bi = 0 };

	memset(h, 0, sizeof(*h));
	h->opcode = op;
	if (op == ISCSI_OP_LOGIN_REQ)
		h->immediate = true; /* always 1 on the wire */
	else if (has_i_bit(op))
		h->immediate = gb(&g);
	if (has_f_bit(op))
		h->final = gb(&g);
	else if (op != ISCSI_OP_LOGIN_REQ && op != ISCSI_OP_LOGIN_RSP)
		h->final = true; /* fixed to 1 on the wire */
	h->ahs_len = g8(&g);
	h->dlen = g32(&g) & 0xffffffu;
	if (!lun_reserved(op))
		h->lun = ((uint64_t)g32(&g) << 32) | g32(&g);
	h->itt = g32(&g);

	switch (op) {
	case ISCSI_OP_SCSI_CMD:
		h->u.cmd.read = gb(&g);
		h->u.cmd.write = gb(&g);
		h->u.cmd.attr = ISCSI_ATTR_ACA + (bools & 1u);
		h->u.cmd.edtl = g32(&g);
		h->u.cmd.cmdsn = g32(&g);
		h->u.cmd.expstatsn = g32(&g);
		for (unsigned i = 0; i < 16; i++)
			h->u.cmd.cdb[i] = g8(&g);
		break;
	case ISCSI_OP_SCSI_RSP:
		h->u.rsp.bidi_overflow = gb(&g);
		h->u.rsp.bidi_underflow = gb(&g);
		h->u.rsp.overflow = gb(&g);
		h->u.rsp.underflow = gb(&g);
		h->u.rsp.response = g8(&g);
		h->u.rsp.status = g8(&g);
		h->u.rsp.snack_tag = g32(&g);
		h->u.rsp.statsn = g32(&g);
		h->u.rsp.expcmdsn = g32(&g);
		h->u.rsp.maxcmdsn = g32(&g);
		h->u.rsp.expdatasn = g32(&g);
		h->u.rsp.bidi_residual = g32(&g);
		h->u.rsp.residual = g32(&g);
		break;
	case ISCSI_OP_TASK_MGMT_REQ:
		h->u.tmf_req.function = (bools & 1u) ? ISCSI_TMF_TASK_REASSIGN : 0x7f;
		h->u.tmf_req.rtt = g32(&g);
		h->u.tmf_req.cmdsn = g32(&g);
		h->u.tmf_req.expstatsn = g32(&g);
		h->u.tmf_req.refcmdsn = g32(&g);
		h->u.tmf_req.expdatasn = g32(&g);
		break;
	case ISCSI_OP_TASK_MGMT_RSP:
		h->u.tmf_rsp.response = g8(&g);
		h->u.tmf_rsp.statsn = g32(&g);
		h->u.tmf_rsp.expcmdsn = g32(&g);
		h->u.tmf_rsp.maxcmdsn = g32(&g);
		break;
	case ISCSI_OP_DATA_OUT:
		h->u.data_out.ttt = g32(&g);
		h->u.data_out.expstatsn = g32(&g);
		h->u.data_out.datasn = g32(&g);
		h->u.data_out.offset = g32(&g);
		break;
	case ISCSI_OP_DATA_IN:
		h->u.data_in.ack = gb(&g);
		h->u.data_in.overflow = gb(&g);
		h->u.data_in.underflow = gb(&g);
		h->u.data_in.status_present = gb(&g);
		h->u.data_in.status = g8(&g);
		h->u.data_in.ttt = g32(&g);
		h->u.data_in.statsn = g32(&g);
		h->u.data_in.expcmdsn = g32(&g);
		h->u.data_in.maxcmdsn = g32(&g);
		h->u.data_in.datasn = g32(&g);
		h->u.data_in.offset = g32(&g);
		h->u.data_in.residual = g32(&g);
		break;
	case ISCSI_OP_R2T:
		h->u.r2t.ttt = g32(&g);
		h->u.r2t.statsn = g32(&g);
		h->u.r2t.expcmdsn = g32(&g);
		h->u.r2t.maxcmdsn = g32(&g);
		h->u.r2t.r2tsn = g32(&g);
		h->u.r2t.offset = g32(&g);
		h->u.r2t.length = g32(&g);
		break;
	case ISCSI_OP_ASYNC_MSG:
		h->u.async.statsn = g32(&g);
		h->u.async.expcmdsn = g32(&g);
		h->u.async.maxcmdsn = g32(&g);
		h->u.async.event = g8(&g);
		h->u.async.vcode = g8(&g);
		h->u.async.param1 = g16(&g);
		h->u.async.param2 = g16(&g);
		h->u.async.param3 = g16(&g);
		break;
	case ISCSI_OP_TEXT_REQ:
		h->u.text.cont = gb(&g);
		h->u.text.ttt = g32(&g);
		h->u.text.cmdsn = g32(&g);
		h->u.text.expstatsn = g32(&g);
		break;
	case ISCSI_OP_TEXT_RSP:
		h->u.text.cont = gb(&g);
		h->u.text.ttt = g32(&g);
		h->u.text.statsn = g32(&g);
		h->u.text.expcmdsn = g32(&g);
		h->u.text.maxcmdsn = g32(&g);
		break;
	case ISCSI_OP_LOGIN_REQ:
	case ISCSI_OP_LOGIN_RSP:
		h->u.login.transit = gb(&g);
		h->u.login.cont = gb(&g);
		h->u.login.csg = (bools & 1u) ? ISCSI_STAGE_OPERATIONAL : 2;
		h->u.login.nsg = (bools & 1u) ? ISCSI_STAGE_FULL_FEATURE : ISCSI_STAGE_OPERATIONAL;
		h->u.login.version_max = g8(&g);
		h->u.login.version_min = g8(&g);
		for (unsigned i = 0; i < 6; i++)
			h->u.login.isid[i] = g8(&g);
		h->u.login.tsih = g16(&g);
		/* decode reports the raw ISID+TSIH bytes as `lun` */
		h->lun = 0;
		for (unsigned i = 0; i < 6; i++)
			h->lun = (h->lun << 8) | h->u.login.isid[i];
		h->lun = (h->lun << 16) | h->u.login.tsih;
		if (op == ISCSI_OP_LOGIN_REQ) {
			h->u.login.cid = g16(&g);
			h->u.login.cmdsn = g32(&g);
			h->u.login.expstatsn = g32(&g);
		} else {
			h->u.login.statsn = g32(&g);
			h->u.login.expcmdsn = g32(&g);
			h->u.login.maxcmdsn = g32(&g);
			h->u.login.status_class = g8(&g);
			h->u.login.status_detail = g8(&g);
		}
		break;
	case ISCSI_OP_LOGOUT_REQ:
		h->u.logout.reason = (bools & 1u) ? 0x7f : 0x02;
		h->u.logout.cid = g16(&g);
		h->u.logout.cmdsn = g32(&g);
		h->u.logout.expstatsn = g32(&g);
		break;
	case ISCSI_OP_LOGOUT_RSP:
		h->u.logout.response = g8(&g);
		h->u.logout.statsn = g32(&g);
		h->u.logout.expcmdsn = g32(&g);
		h->u.logout.maxcmdsn = g32(&g);
		h->u.logout.time2wait = g16(&g);
		h->u.logout.time2retain = g16(&g);
		break;
	case ISCSI_OP_SNACK_REQ:
		h->u.snack.type = (bools & 1u) ? 0x0f : 0x03;
		h->u.snack.ttt = g32(&g);
		h->u.snack.expstatsn = g32(&g);
		h->u.snack.begrun = g32(&g);
		h->u.snack.runlength = g32(&g);
		break;
	case ISCSI_OP_REJECT:
		h->u.reject.reason = g8(&g);
		h->u.reject.statsn = g32(&g);
		h->u.reject.expcmdsn = g32(&g);
		h->u.reject.maxcmdsn = g32(&g);
		h->u.reject.datasn = g32(&g);
		break;
	case ISCSI_OP_NOP_OUT:
		h->u.nop.ttt = g32(&g);
		h->u.nop.cmdsn = g32(&g);
		h->u.nop.expstatsn = g32(&g);
		break;
	case ISCSI_OP_NOP_IN:
		h->u.nop.ttt = g32(&g);
		h->u.nop.statsn = g32(&g);
		h->u.nop.expcmdsn = g32(&g);
		h->u.nop.maxcmdsn = g32(&g);
		break;
	default:
		cr_assert_fail("fill: unexpected opcode 0x%02x", op);
	}
}

#define EQ(f) cr_expect_eq(a->f, b->f, "%s: field " #f ": 0x%llx != 0x%llx", \
			   iscsi_opcode_name(a->opcode), \
			   (unsigned long long)a->f, (unsigned long long)b->f)

/* Field-by-field comparison of the common fields and the active union member. */
static void expect_bhs_eq(const struct iscsi_bhs *a, const struct iscsi_bhs *b)
{
	EQ(opcode);
	EQ(immediate);
	EQ(final);
	EQ(ahs_len);
	EQ(dlen);
	EQ(lun);
	EQ(itt);
	switch (a->opcode) {
	case ISCSI_OP_SCSI_CMD:
		EQ(u.cmd.read); EQ(u.cmd.write); EQ(u.cmd.attr); EQ(u.cmd.edtl);
		EQ(u.cmd.cmdsn); EQ(u.cmd.expstatsn);
		cr_expect_arr_eq(a->u.cmd.cdb, b->u.cmd.cdb, 16);
		break;
	case ISCSI_OP_SCSI_RSP:
		EQ(u.rsp.bidi_overflow); EQ(u.rsp.bidi_underflow);
		EQ(u.rsp.overflow); EQ(u.rsp.underflow);
		EQ(u.rsp.response); EQ(u.rsp.status); EQ(u.rsp.snack_tag);
		EQ(u.rsp.statsn); EQ(u.rsp.expcmdsn); EQ(u.rsp.maxcmdsn);
		EQ(u.rsp.expdatasn); EQ(u.rsp.bidi_residual); EQ(u.rsp.residual);
		break;
	case ISCSI_OP_TASK_MGMT_REQ:
		EQ(u.tmf_req.function); EQ(u.tmf_req.rtt); EQ(u.tmf_req.cmdsn);
		EQ(u.tmf_req.expstatsn); EQ(u.tmf_req.refcmdsn); EQ(u.tmf_req.expdatasn);
		break;
	case ISCSI_OP_TASK_MGMT_RSP:
		EQ(u.tmf_rsp.response); EQ(u.tmf_rsp.statsn);
		EQ(u.tmf_rsp.expcmdsn); EQ(u.tmf_rsp.maxcmdsn);
		break;
	case ISCSI_OP_DATA_OUT:
		EQ(u.data_out.ttt); EQ(u.data_out.expstatsn);
		EQ(u.data_out.datasn); EQ(u.data_out.offset);
		break;
	case ISCSI_OP_DATA_IN:
		EQ(u.data_in.ack); EQ(u.data_in.overflow); EQ(u.data_in.underflow);
		EQ(u.data_in.status_present); EQ(u.data_in.status); EQ(u.data_in.ttt);
		EQ(u.data_in.statsn); EQ(u.data_in.expcmdsn); EQ(u.data_in.maxcmdsn);
		EQ(u.data_in.datasn); EQ(u.data_in.offset); EQ(u.data_in.residual);
		break;
	case ISCSI_OP_R2T:
		EQ(u.r2t.ttt); EQ(u.r2t.statsn); EQ(u.r2t.expcmdsn); EQ(u.r2t.maxcmdsn);
		EQ(u.r2t.r2tsn); EQ(u.r2t.offset); EQ(u.r2t.length);
		break;
	case ISCSI_OP_ASYNC_MSG:
		EQ(u.async.statsn); EQ(u.async.expcmdsn); EQ(u.async.maxcmdsn);
		EQ(u.async.event); EQ(u.async.vcode);
		EQ(u.async.param1); EQ(u.async.param2); EQ(u.async.param3);
		break;
	case ISCSI_OP_TEXT_REQ:
	case ISCSI_OP_TEXT_RSP:
		EQ(u.text.cont); EQ(u.text.ttt); EQ(u.text.cmdsn); EQ(u.text.expstatsn);
		EQ(u.text.statsn); EQ(u.text.expcmdsn); EQ(u.text.maxcmdsn);
		break;
	case ISCSI_OP_LOGIN_REQ:
	case ISCSI_OP_LOGIN_RSP:
		EQ(u.login.transit); EQ(u.login.cont); EQ(u.login.csg); EQ(u.login.nsg);
		EQ(u.login.version_max); EQ(u.login.version_min);
		cr_expect_arr_eq(a->u.login.isid, b->u.login.isid, 6);
		EQ(u.login.tsih); EQ(u.login.cid); EQ(u.login.cmdsn);
		EQ(u.login.expstatsn); EQ(u.login.statsn); EQ(u.login.expcmdsn);
		EQ(u.login.maxcmdsn); EQ(u.login.status_class); EQ(u.login.status_detail);
		break;
	case ISCSI_OP_LOGOUT_REQ:
	case ISCSI_OP_LOGOUT_RSP:
		EQ(u.logout.reason); EQ(u.logout.cid); EQ(u.logout.cmdsn);
		EQ(u.logout.expstatsn); EQ(u.logout.response); EQ(u.logout.statsn);
		EQ(u.logout.expcmdsn); EQ(u.logout.maxcmdsn);
		EQ(u.logout.time2wait); EQ(u.logout.time2retain);
		break;
	case ISCSI_OP_NOP_OUT:
	case ISCSI_OP_NOP_IN:
		EQ(u.nop.ttt); EQ(u.nop.cmdsn); EQ(u.nop.expstatsn);
		EQ(u.nop.statsn); EQ(u.nop.expcmdsn); EQ(u.nop.maxcmdsn);
		break;
	case ISCSI_OP_REJECT:
		EQ(u.reject.reason); EQ(u.reject.statsn); EQ(u.reject.expcmdsn);
		EQ(u.reject.maxcmdsn); EQ(u.reject.datasn);
		break;
	case ISCSI_OP_SNACK_REQ:
		EQ(u.snack.type); EQ(u.snack.ttt); EQ(u.snack.expstatsn);
		EQ(u.snack.begrun); EQ(u.snack.runlength);
		break;
	default:
		cr_assert_fail("unexpected opcode 0x%02x", a->opcode);
	}
}

/* ---- round trips -------------------------------------------------------- */

Test(pdu_bhs, roundtrip_every_opcode)
{
	/* all-ones, alternating, inverse alternating and all-zero boolean patterns */
	static const unsigned patterns[] = { 0xffffu, 0x5555u, 0xaaaau, 0x0000u };

	for (size_t p = 0; p < sizeof(patterns) / sizeof(patterns[0]); p++) {
		for (size_t i = 0; i < N_OPCODES; i++) {
			struct iscsi_bhs in, out;
			uint8_t wire[ISCSI_BHS_LEN], wire2[ISCSI_BHS_LEN];

			fill(&in, all_opcodes[i], patterns[p]);
			cr_assert_eq(iscsi_bhs_encode(&in, wire), 0, "encode %s",
				     iscsi_opcode_name(all_opcodes[i]));
			cr_expect_eq(iscsi_wire_opcode(wire), all_opcodes[i]);
			cr_assert_eq(iscsi_bhs_decode(wire, &out), 0, "decode %s",
				     iscsi_opcode_name(all_opcodes[i]));
			expect_bhs_eq(&in, &out);
			/* and back to identical bytes */
			cr_assert_eq(iscsi_bhs_encode(&out, wire2), 0);
			cr_expect_arr_eq(wire, wire2, ISCSI_BHS_LEN, "%s re-encode differs",
					 iscsi_opcode_name(all_opcodes[i]));
		}
	}
}

/* Every byte of an encoded BHS that the RFC reserves must be zero. */
Test(pdu_bhs, reserved_bytes_zero)
{
	/* bitmap of bytes that may be non-zero, per opcode (bit n = byte n) */
	static const struct {
		uint8_t op;
		uint64_t used;
	} layout[] = {
#define R(a, b) (((UINT64_C(1) << ((b) - (a) + 1)) - 1) << (a))
#define COMMON (R(0, 1) | R(4, 7) | R(16, 19))
		{ ISCSI_OP_NOP_OUT, COMMON | R(8, 15) | R(20, 31) },
		{ ISCSI_OP_SCSI_CMD, COMMON | R(8, 15) | R(20, 47) },
		{ ISCSI_OP_TASK_MGMT_REQ, COMMON | R(8, 15) | R(20, 39) },
		{ ISCSI_OP_LOGIN_REQ, COMMON | R(2, 3) | R(8, 15) | R(20, 21) | R(24, 31) },
		{ ISCSI_OP_TEXT_REQ, COMMON | R(8, 15) | R(20, 31) },
		{ ISCSI_OP_DATA_OUT, COMMON | R(8, 15) | R(20, 23) | R(28, 31) | R(36, 43) },
		{ ISCSI_OP_LOGOUT_REQ, COMMON | R(20, 21) | R(24, 31) },
		{ ISCSI_OP_SNACK_REQ, COMMON | R(8, 15) | R(20, 23) | R(28, 31) | R(40, 47) },
		{ ISCSI_OP_NOP_IN, COMMON | R(8, 15) | R(20, 35) },
		{ ISCSI_OP_SCSI_RSP, COMMON | R(2, 3) | R(20, 47) },
		{ ISCSI_OP_TASK_MGMT_RSP, COMMON | R(2, 2) | R(24, 35) },
		{ ISCSI_OP_LOGIN_RSP, COMMON | R(2, 3) | R(8, 15) | R(24, 37) },
		{ ISCSI_OP_TEXT_RSP, COMMON | R(8, 15) | R(20, 35) },
		{ ISCSI_OP_DATA_IN, COMMON | R(3, 3) | R(8, 15) | R(20, 47) },
		{ ISCSI_OP_LOGOUT_RSP, COMMON | R(2, 2) | R(24, 35) | R(40, 43) },
		{ ISCSI_OP_R2T, COMMON | R(8, 15) | R(20, 47) },
		{ ISCSI_OP_ASYNC_MSG, COMMON | R(8, 15) | R(24, 43) },
		{ ISCSI_OP_REJECT, COMMON | R(2, 2) | R(24, 39) },
#undef COMMON
#undef R
	};
	cr_assert_eq(sizeof(layout) / sizeof(layout[0]), N_OPCODES);

	for (size_t i = 0; i < N_OPCODES; i++) {
		struct iscsi_bhs h;
		uint8_t wire[ISCSI_BHS_LEN];
		uint8_t op = layout[i].op;

		fill(&h, op, 0xffffu);
		/* also set fields the opcode does not have: must be ignored */
		if (lun_reserved(op))
			h.lun = 0x0123456789abcdefull;
		cr_assert_eq(iscsi_bhs_encode(&h, wire), 0);
		for (unsigned b = 0; b < ISCSI_BHS_LEN; b++) {
			if (!(layout[i].used & (UINT64_C(1) << b)))
				cr_expect_eq(wire[b], 0, "%s: reserved byte %u = 0x%02x",
					     iscsi_opcode_name(op), b, wire[b]);
		}
	}
}

/* Bits the RFC fixes, and bits that must be ignored. */
Test(pdu_bhs, fixed_and_ignored_bits)
{
	static const uint8_t fixed_f[] = {
		ISCSI_OP_NOP_OUT, ISCSI_OP_TASK_MGMT_REQ, ISCSI_OP_LOGOUT_REQ,
		ISCSI_OP_SNACK_REQ, ISCSI_OP_NOP_IN, ISCSI_OP_SCSI_RSP,
		ISCSI_OP_TASK_MGMT_RSP, ISCSI_OP_LOGOUT_RSP, ISCSI_OP_R2T,
		ISCSI_OP_ASYNC_MSG, ISCSI_OP_REJECT,
	};
	struct iscsi_bhs h, d;
	uint8_t wire[ISCSI_BHS_LEN];

	for (size_t i = 0; i < sizeof(fixed_f); i++) {
		memset(&h, 0, sizeof(h));
		h.opcode = fixed_f[i];
		cr_assert_eq(iscsi_bhs_encode(&h, wire), 0);
		cr_expect_eq(wire[1] & 0x80, 0x80, "%s: byte 1 bit 7 must be 1",
			     iscsi_opcode_name(fixed_f[i]));
	}

	/* Login Request always has I = 1; the login T bit is not `final` */
	memset(&h, 0, sizeof(h));
	h.opcode = ISCSI_OP_LOGIN_REQ;
	h.final = true;
	cr_assert_eq(iscsi_bhs_encode(&h, wire), 0);
	cr_expect_eq(wire[0], 0x43);
	cr_expect_eq(wire[1], 0x00);
	h.u.login.transit = true;
	cr_assert_eq(iscsi_bhs_encode(&h, wire), 0);
	cr_expect_eq(wire[1], 0x80);
	cr_assert_eq(iscsi_bhs_decode(wire, &d), 0);
	cr_expect(d.u.login.transit);
	cr_expect_not(d.final);

	/* I bit not defined for target opcodes, Data-Out or SNACK */
	static const uint8_t no_i[] = { ISCSI_OP_DATA_OUT, ISCSI_OP_SNACK_REQ,
					ISCSI_OP_SCSI_RSP, ISCSI_OP_DATA_IN };
	for (size_t i = 0; i < sizeof(no_i); i++) {
		memset(&h, 0, sizeof(h));
		h.opcode = no_i[i];
		h.immediate = true;
		cr_assert_eq(iscsi_bhs_encode(&h, wire), 0);
		cr_expect_eq(wire[0], no_i[i]);
		wire[0] |= 0x40;
		cr_assert_eq(iscsi_bhs_decode(wire, &d), 0);
		cr_expect_eq(d.opcode, no_i[i]);
		cr_expect_not(d.immediate);
	}

	/* byte 0 bit 7 is reserved and ignored */
	memset(&h, 0, sizeof(h));
	h.opcode = ISCSI_OP_NOP_IN;
	cr_assert_eq(iscsi_bhs_encode(&h, wire), 0);
	wire[0] |= 0x80;
	cr_assert_eq(iscsi_bhs_decode(wire, &d), 0);
	cr_expect_eq(d.opcode, ISCSI_OP_NOP_IN);

	/* reserved LUN bytes of a SCSI Response are ignored on decode */
	memset(wire, 0, sizeof(wire));
	wire[0] = ISCSI_OP_SCSI_RSP;
	wire[1] = 0x80;
	memset(wire + 8, 0xee, 8);
	cr_assert_eq(iscsi_bhs_decode(wire, &d), 0);
	cr_expect_eq(d.lun, 0);

	/* out-of-range values are masked to their field width */
	memset(&h, 0, sizeof(h));
	h.opcode = ISCSI_OP_SCSI_CMD;
	h.u.cmd.attr = 0xff;
	cr_assert_eq(iscsi_bhs_encode(&h, wire), 0);
	cr_expect_eq(wire[1], 0x07);
	memset(&h, 0, sizeof(h));
	h.opcode = ISCSI_OP_LOGIN_RSP;
	h.u.login.csg = 0xff;
	h.u.login.nsg = 0xfc;
	cr_assert_eq(iscsi_bhs_encode(&h, wire), 0);
	cr_expect_eq(wire[1], 0x0c);
}

/* ---- fixed wire vectors -------------------------------------------------- */

/* Decode `wire`, then check that encoding the result gives the same bytes. */
static void decode_and_reencode(const uint8_t *wire, struct iscsi_bhs *h)
{
	uint8_t again[ISCSI_BHS_LEN];

	cr_assert_eq(iscsi_bhs_decode(wire, h), 0);
	cr_assert_eq(iscsi_bhs_encode(h, again), 0);
	cr_expect_arr_eq(again, wire, ISCSI_BHS_LEN);
}

Test(pdu_wire, scsi_cmd)
{
	/* READ(10) of 8 blocks, LUN 1, immediate, simple attribute */
	static const uint8_t wire[ISCSI_BHS_LEN] = {
		0x41, 0xc1, 0x00, 0x00, /* I|SCSI-Cmd, F|R|ATTR=SIMPLE */
		0x00, 0x00, 0x00, 0x00, /* AHS, DSL */
		0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* LUN */
		0x12, 0x34, 0x56, 0x78, /* ITT */
		0x00, 0x00, 0x10, 0x00, /* EDTL = 4096 */
		0x00, 0x00, 0x00, 0x2a, /* CmdSN */
		0x00, 0x00, 0x00, 0x07, /* ExpStatSN */
		0x28, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, /* CDB */
		0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	};
	struct iscsi_bhs h;

	decode_and_reencode(wire, &h);
	cr_expect_eq(h.opcode, ISCSI_OP_SCSI_CMD);
	cr_expect(h.immediate);
	cr_expect(h.final);
	cr_expect(h.u.cmd.read);
	cr_expect_not(h.u.cmd.write);
	cr_expect_eq(h.u.cmd.attr, ISCSI_ATTR_SIMPLE);
	cr_expect_eq(h.ahs_len, 0);
	cr_expect_eq(h.dlen, 0);
	cr_expect_eq(h.lun, 0x0001000000000000ull);
	cr_expect_eq(h.itt, 0x12345678u);
	cr_expect_eq(h.u.cmd.edtl, 4096u);
	cr_expect_eq(h.u.cmd.cmdsn, 42u);
	cr_expect_eq(h.u.cmd.expstatsn, 7u);
	cr_expect_eq(h.u.cmd.cdb[0], 0x28);
	cr_expect_eq(h.u.cmd.cdb[4], 0x10);
	cr_expect_eq(h.u.cmd.cdb[8], 0x08);

	/* write with data, ordered attribute */
	uint8_t w2[ISCSI_BHS_LEN];
	memcpy(w2, wire, sizeof(w2));
	w2[0] = 0x01;
	w2[1] = 0x22; /* W, ORDERED, not final */
	w2[5] = 0x00; w2[6] = 0x02; w2[7] = 0x00;
	decode_and_reencode(w2, &h);
	cr_expect_not(h.immediate);
	cr_expect_not(h.final);
	cr_expect_not(h.u.cmd.read);
	cr_expect(h.u.cmd.write);
	cr_expect_eq(h.u.cmd.attr, ISCSI_ATTR_ORDERED);
	cr_expect_eq(h.dlen, 512u);
}

Test(pdu_wire, scsi_rsp)
{
	static const uint8_t wire[ISCSI_BHS_LEN] = {
		0x21, 0x92, 0x00, 0x02, /* SCSI-Rsp, 1|o|U, response 0, CHECK CONDITION */
		0x00, 0x00, 0x00, 0x12, /* DSL = 18 (sense) */
		0, 0, 0, 0, 0, 0, 0, 0, /* reserved */
		0xde, 0xad, 0xbe, 0xef, /* ITT */
		0x00, 0x00, 0x00, 0x05, /* SNACK Tag */
		0x00, 0x00, 0x01, 0x00, /* StatSN */
		0x00, 0x00, 0x02, 0x00, /* ExpCmdSN */
		0x00, 0x00, 0x02, 0x40, /* MaxCmdSN */
		0x00, 0x00, 0x00, 0x03, /* ExpDataSN */
		0x00, 0x00, 0x00, 0x10, /* Bidi Read Residual */
		0x00, 0x00, 0x02, 0x00, /* Residual */
	};
	struct iscsi_bhs h;

	decode_and_reencode(wire, &h);
	cr_expect_eq(h.opcode, ISCSI_OP_SCSI_RSP);
	cr_expect(h.final);
	cr_expect_not(h.immediate);
	cr_expect(h.u.rsp.bidi_overflow);
	cr_expect_not(h.u.rsp.bidi_underflow);
	cr_expect_not(h.u.rsp.overflow);
	cr_expect(h.u.rsp.underflow);
	cr_expect_eq(h.u.rsp.response, 0);
	cr_expect_eq(h.u.rsp.status, 0x02);
	cr_expect_eq(h.dlen, 18u);
	cr_expect_eq(h.lun, 0);
	cr_expect_eq(h.itt, 0xdeadbeefu);
	cr_expect_eq(h.u.rsp.snack_tag, 5u);
	cr_expect_eq(h.u.rsp.statsn, 0x100u);
	cr_expect_eq(h.u.rsp.expcmdsn, 0x200u);
	cr_expect_eq(h.u.rsp.maxcmdsn, 0x240u);
	cr_expect_eq(h.u.rsp.expdatasn, 3u);
	cr_expect_eq(h.u.rsp.bidi_residual, 0x10u);
	cr_expect_eq(h.u.rsp.residual, 0x200u);

	uint8_t w2[ISCSI_BHS_LEN];
	memcpy(w2, wire, sizeof(w2));
	w2[1] = 0x8c; /* u|O */
	decode_and_reencode(w2, &h);
	cr_expect_not(h.u.rsp.bidi_overflow);
	cr_expect(h.u.rsp.bidi_underflow);
	cr_expect(h.u.rsp.overflow);
	cr_expect_not(h.u.rsp.underflow);
}

Test(pdu_wire, data_in)
{
	static const uint8_t wire[ISCSI_BHS_LEN] = {
		0x25, 0x83, 0x00, 0x00, /* Data-In, F|U|S, status GOOD */
		0x00, 0x00, 0x10, 0x00, /* DSL = 4096 */
		0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* LUN */
		0x00, 0x00, 0x00, 0x09, /* ITT */
		0xff, 0xff, 0xff, 0xff, /* TTT */
		0x00, 0x00, 0x00, 0x11, /* StatSN */
		0x00, 0x00, 0x00, 0x22, /* ExpCmdSN */
		0x00, 0x00, 0x00, 0x33, /* MaxCmdSN */
		0x00, 0x00, 0x00, 0x04, /* DataSN */
		0x00, 0x01, 0x00, 0x00, /* Buffer Offset */
		0x00, 0x00, 0x08, 0x00, /* Residual */
	};
	struct iscsi_bhs h;

	decode_and_reencode(wire, &h);
	cr_expect_eq(h.opcode, ISCSI_OP_DATA_IN);
	cr_expect(h.final);
	cr_expect_not(h.u.data_in.ack);
	cr_expect_not(h.u.data_in.overflow);
	cr_expect(h.u.data_in.underflow);
	cr_expect(h.u.data_in.status_present);
	cr_expect_eq(h.u.data_in.status, 0);
	cr_expect_eq(h.dlen, 4096u);
	cr_expect_eq(h.lun, 0x0002000000000000ull);
	cr_expect_eq(h.itt, 9u);
	cr_expect_eq(h.u.data_in.ttt, ISCSI_RESERVED_TAG);
	cr_expect_eq(h.u.data_in.statsn, 0x11u);
	cr_expect_eq(h.u.data_in.expcmdsn, 0x22u);
	cr_expect_eq(h.u.data_in.maxcmdsn, 0x33u);
	cr_expect_eq(h.u.data_in.datasn, 4u);
	cr_expect_eq(h.u.data_in.offset, 0x10000u);
	cr_expect_eq(h.u.data_in.residual, 0x800u);

	uint8_t w2[ISCSI_BHS_LEN];
	memcpy(w2, wire, sizeof(w2));
	w2[1] = 0x44; /* A|O, not final, no status */
	w2[3] = 0x00;
	decode_and_reencode(w2, &h);
	cr_expect_not(h.final);
	cr_expect(h.u.data_in.ack);
	cr_expect(h.u.data_in.overflow);
	cr_expect_not(h.u.data_in.underflow);
	cr_expect_not(h.u.data_in.status_present);
}

Test(pdu_wire, r2t)
{
	static const uint8_t wire[ISCSI_BHS_LEN] = {
		0x31, 0x80, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00,
		0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* LUN */
		0x00, 0x00, 0x00, 0x01, /* ITT */
		0x00, 0x00, 0x00, 0x02, /* TTT */
		0x00, 0x00, 0x00, 0x03, /* StatSN */
		0x00, 0x00, 0x00, 0x04, /* ExpCmdSN */
		0x00, 0x00, 0x00, 0x05, /* MaxCmdSN */
		0x00, 0x00, 0x00, 0x06, /* R2TSN */
		0x00, 0x00, 0x00, 0x07, /* Buffer Offset */
		0x00, 0x00, 0x00, 0x08, /* Desired Data Transfer Length */
	};
	struct iscsi_bhs h;

	decode_and_reencode(wire, &h);
	cr_expect_eq(h.opcode, ISCSI_OP_R2T);
	cr_expect(h.final);
	cr_expect_eq(h.lun, 0x0003000000000000ull);
	cr_expect_eq(h.itt, 1u);
	cr_expect_eq(h.u.r2t.ttt, 2u);
	cr_expect_eq(h.u.r2t.statsn, 3u);
	cr_expect_eq(h.u.r2t.expcmdsn, 4u);
	cr_expect_eq(h.u.r2t.maxcmdsn, 5u);
	cr_expect_eq(h.u.r2t.r2tsn, 6u);
	cr_expect_eq(h.u.r2t.offset, 7u);
	cr_expect_eq(h.u.r2t.length, 8u);
}

Test(pdu_wire, login_rsp)
{
	static const uint8_t wire[ISCSI_BHS_LEN] = {
		0x23, 0x87, 0x00, 0x00, /* Login-Rsp, T, CSG=1, NSG=3, ver 0/0 */
		0x00, 0x00, 0x00, 0x34, /* DSL = 52 */
		0x80, 0x12, 0x34, 0x56, 0x78, 0x9a, /* ISID */
		0x00, 0x2b, /* TSIH */
		0x00, 0x00, 0x00, 0x01, /* ITT */
		0x00, 0x00, 0x00, 0x00, /* reserved */
		0x00, 0x00, 0x00, 0x0a, /* StatSN */
		0x00, 0x00, 0x00, 0x0b, /* ExpCmdSN */
		0x00, 0x00, 0x00, 0x0c, /* MaxCmdSN */
		0x02, 0x01, 0x00, 0x00, /* Status-Class 2, Status-Detail 1 */
		0, 0, 0, 0, 0, 0, 0, 0,
	};
	static const uint8_t isid[6] = { 0x80, 0x12, 0x34, 0x56, 0x78, 0x9a };
	struct iscsi_bhs h;

	decode_and_reencode(wire, &h);
	cr_expect_eq(h.opcode, ISCSI_OP_LOGIN_RSP);
	cr_expect_not(h.final);
	cr_expect(h.u.login.transit);
	cr_expect_not(h.u.login.cont);
	cr_expect_eq(h.u.login.csg, ISCSI_STAGE_OPERATIONAL);
	cr_expect_eq(h.u.login.nsg, ISCSI_STAGE_FULL_FEATURE);
	cr_expect_eq(h.u.login.version_max, 0);
	cr_expect_eq(h.u.login.version_min, 0);
	cr_expect_eq(h.dlen, 52u);
	cr_expect_arr_eq(h.u.login.isid, isid, 6);
	cr_expect_eq(h.u.login.tsih, 0x2bu);
	cr_expect_eq(h.lun, 0x80123456789a002bull);
	cr_expect_eq(h.itt, 1u);
	cr_expect_eq(h.u.login.statsn, 10u);
	cr_expect_eq(h.u.login.expcmdsn, 11u);
	cr_expect_eq(h.u.login.maxcmdsn, 12u);
	cr_expect_eq(h.u.login.status_class, 2u);
	cr_expect_eq(h.u.login.status_detail, 1u);

	/* C bit, security stage → operational, version max/active */
	uint8_t w2[ISCSI_BHS_LEN];
	memcpy(w2, wire, sizeof(w2));
	w2[1] = 0x41;
	w2[2] = 0x01;
	w2[3] = 0x00;
	decode_and_reencode(w2, &h);
	cr_expect_not(h.u.login.transit);
	cr_expect(h.u.login.cont);
	cr_expect_eq(h.u.login.csg, ISCSI_STAGE_SECURITY);
	cr_expect_eq(h.u.login.nsg, ISCSI_STAGE_OPERATIONAL);
	cr_expect_eq(h.u.login.version_max, 1);
}

Test(pdu_wire, login_req_encode)
{
	static const uint8_t expect[ISCSI_BHS_LEN] = {
		0x43, 0x81, 0x00, 0x00, /* I|Login-Req, T, CSG=0, NSG=1 */
		0x00, 0x00, 0x01, 0x00, /* DSL = 256 */
		0x40, 0x00, 0x01, 0x37, 0x00, 0x00, /* ISID */
		0x00, 0x00, /* TSIH */
		0x00, 0x00, 0x00, 0x00, /* ITT */
		0x00, 0x01, 0x00, 0x00, /* CID */
		0x00, 0x00, 0x00, 0x01, /* CmdSN */
		0x00, 0x00, 0x00, 0x00, /* ExpStatSN */
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	};
	struct iscsi_bhs h;
	uint8_t wire[ISCSI_BHS_LEN];

	memset(&h, 0, sizeof(h));
	h.opcode = ISCSI_OP_LOGIN_REQ;
	h.dlen = 256;
	h.lun = 0xffffffffffffffffull; /* ignored for login */
	h.u.login.transit = true;
	h.u.login.csg = ISCSI_STAGE_SECURITY;
	h.u.login.nsg = ISCSI_STAGE_OPERATIONAL;
	memcpy(h.u.login.isid, (const uint8_t[6]){ 0x40, 0x00, 0x01, 0x37, 0x00, 0x00 }, 6);
	h.u.login.cid = 1;
	h.u.login.cmdsn = 1;
	cr_assert_eq(iscsi_bhs_encode(&h, wire), 0);
	cr_expect_arr_eq(wire, expect, ISCSI_BHS_LEN);
}

Test(pdu_wire, logout_async_reject)
{
	static const uint8_t logout_rsp[ISCSI_BHS_LEN] = {
		0x26, 0x80, 0x02, 0x00, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0,
		0x00, 0x00, 0x00, 0x44, 0, 0, 0, 0,
		0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02,
		0x00, 0x00, 0x00, 0x03, 0, 0, 0, 0,
		0x00, 0x02, 0x00, 0x14, 0, 0, 0, 0,
	};
	static const uint8_t async[ISCSI_BHS_LEN] = {
		0x32, 0x80, 0x00, 0x00, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0,
		0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0,
		0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02,
		0x00, 0x00, 0x00, 0x03, 0x01, 0x00, 0x00, 0x05,
		0x00, 0x06, 0x00, 0x07, 0, 0, 0, 0,
	};
	static const uint8_t reject[ISCSI_BHS_LEN] = {
		0x3f, 0x80, 0x09, 0x00, 0x00, 0x00, 0x00, 0x30,
		0, 0, 0, 0, 0, 0, 0, 0,
		0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0,
		0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02,
		0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x04,
		0, 0, 0, 0, 0, 0, 0, 0,
	};
	struct iscsi_bhs h;

	decode_and_reencode(logout_rsp, &h);
	cr_expect_eq(h.u.logout.response, 2);
	cr_expect_eq(h.itt, 0x44u);
	cr_expect_eq(h.u.logout.statsn, 1u);
	cr_expect_eq(h.u.logout.expcmdsn, 2u);
	cr_expect_eq(h.u.logout.maxcmdsn, 3u);
	cr_expect_eq(h.u.logout.time2wait, 2u);
	cr_expect_eq(h.u.logout.time2retain, 20u);

	decode_and_reencode(async, &h);
	cr_expect_eq(h.itt, ISCSI_RESERVED_TAG);
	cr_expect_eq(h.u.async.statsn, 1u);
	cr_expect_eq(h.u.async.event, 1u);
	cr_expect_eq(h.u.async.vcode, 0u);
	cr_expect_eq(h.u.async.param1, 5u);
	cr_expect_eq(h.u.async.param2, 6u);
	cr_expect_eq(h.u.async.param3, 7u);

	decode_and_reencode(reject, &h);
	cr_expect_eq(h.u.reject.reason, 9u);
	cr_expect_eq(h.dlen, 48u);
	cr_expect_eq(h.u.reject.statsn, 1u);
	cr_expect_eq(h.u.reject.expcmdsn, 2u);
	cr_expect_eq(h.u.reject.maxcmdsn, 3u);
	cr_expect_eq(h.u.reject.datasn, 4u);
}

/* ---- lengths and opcodes ------------------------------------------------- */

Test(pdu_bhs, dlen_24bit_bounds)
{
	struct iscsi_bhs h, d;
	uint8_t wire[ISCSI_BHS_LEN];
	static const uint32_t ok[] = { 0, 1, 0xff, 0x100, 0xffff, 0x10000, 0xfffffe, 0xffffff };
	static const uint32_t bad[] = { 0x1000000, 0x1000001, 0x7fffffff, 0xffffffff };

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		memset(&h, 0, sizeof(h));
		h.opcode = ISCSI_OP_DATA_OUT;
		h.dlen = ok[i];
		cr_assert_eq(iscsi_bhs_encode(&h, wire), 0);
		cr_expect_eq(iscsi_wire_dlen(wire), ok[i]);
		cr_expect_eq(wire[4], 0);
		cr_assert_eq(iscsi_bhs_decode(wire, &d), 0);
		cr_expect_eq(d.dlen, ok[i]);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&h, 0, sizeof(h));
		h.opcode = ISCSI_OP_DATA_OUT;
		h.dlen = bad[i];
		cr_expect_eq(iscsi_bhs_encode(&h, wire), -EINVAL, "dlen 0x%x", bad[i]);
	}

	/* dlen bytes are exactly 5..7, big endian */
	memset(&h, 0, sizeof(h));
	h.opcode = ISCSI_OP_NOP_OUT;
	h.dlen = 0xabcdef;
	h.ahs_len = 0x12;
	cr_assert_eq(iscsi_bhs_encode(&h, wire), 0);
	cr_expect_eq(wire[4], 0x12);
	cr_expect_eq(wire[5], 0xab);
	cr_expect_eq(wire[6], 0xcd);
	cr_expect_eq(wire[7], 0xef);
}

Test(pdu_bhs, unknown_opcodes)
{
	uint8_t wire[ISCSI_BHS_LEN];
	struct iscsi_bhs h;
	unsigned rejected = 0;

	for (unsigned op = 0; op < 0x40; op++) {
		for (unsigned hi = 0; hi < 4; hi++) { /* byte 0 bits 6-7 */
			memset(wire, 0xa5, sizeof(wire));
			wire[0] = (uint8_t)(op | (hi << 6));
			int rc = iscsi_bhs_decode(wire, &h);
			if (is_known(op)) {
				cr_expect_eq(rc, 0, "opcode 0x%02x", op);
				cr_expect_eq(h.opcode, op);
			} else {
				cr_expect_eq(rc, -EPROTO, "opcode 0x%02x", op);
				rejected++;
			}
		}
		memset(&h, 0, sizeof(h));
		h.opcode = (uint8_t)op;
		cr_expect_eq(iscsi_bhs_encode(&h, wire), is_known(op) ? 0 : -EINVAL,
			     "encode opcode 0x%02x", op);
	}
	cr_expect_eq(rejected, (0x40 - N_OPCODES) * 4);

	/* an opcode carrying the I bit or above 6 bits is not an opcode */
	static const uint8_t bad[] = { 0x40, 0x41, 0x80, 0xff, 0x3e, 0x07, 0x11 };
	for (size_t i = 0; i < sizeof(bad); i++) {
		memset(&h, 0, sizeof(h));
		h.opcode = bad[i];
		cr_expect_eq(iscsi_bhs_encode(&h, wire), -EINVAL, "opcode 0x%02x", bad[i]);
	}
}

Test(pdu_bhs, decode_zeroes_unused_fields)
{
	uint8_t wire[ISCSI_BHS_LEN];
	struct iscsi_bhs h;

	/* a NOP-In with garbage in every reserved byte */
	memset(wire, 0xff, sizeof(wire));
	wire[0] = ISCSI_OP_NOP_IN;
	memset(&h, 0x5a, sizeof(h));
	cr_assert_eq(iscsi_bhs_decode(wire, &h), 0);
	cr_expect_not(h.immediate);
	cr_expect(h.final);
	cr_expect_eq(h.u.nop.ttt, 0xffffffffu);
	cr_expect_eq(h.u.nop.cmdsn, 0);
	cr_expect_eq(h.u.nop.expstatsn, 0);
	cr_expect_eq(h.u.nop.maxcmdsn, 0xffffffffu);

	/* rejected PDUs leave a zeroed structure */
	wire[0] = 0x3e;
	memset(&h, 0x5a, sizeof(h));
	cr_assert_eq(iscsi_bhs_decode(wire, &h), -EPROTO);
	cr_expect_eq(h.opcode, 0);
	cr_expect_eq(h.itt, 0);
	cr_expect_eq(h.dlen, 0);
}

Test(pdu_misc, opcode_names)
{
	for (size_t i = 0; i < N_OPCODES; i++) {
		const char *n = iscsi_opcode_name(all_opcodes[i]);
		cr_assert_not_null(n);
		cr_expect_str_neq(n, "unknown");
		for (size_t j = 0; j < i; j++)
			cr_expect_str_neq(n, iscsi_opcode_name(all_opcodes[j]));
	}
	cr_expect_str_eq(iscsi_opcode_name(ISCSI_OP_SCSI_CMD), "SCSI-Cmd");
	cr_expect_str_eq(iscsi_opcode_name(ISCSI_OP_DATA_IN), "Data-In");
	cr_expect_str_eq(iscsi_opcode_name(0x07), "unknown");
	cr_expect_str_eq(iscsi_opcode_name(0x41), "unknown");
	cr_expect_str_eq(iscsi_opcode_name(0xff), "unknown");
}

/* Every opcode's log name, exactly (the names come from the opcode table). */
Test(pdu_misc, opcode_names_exact)
{
	static const struct { uint8_t op; const char *name; } want[] = {
		{ ISCSI_OP_NOP_OUT, "NOP-Out" },
		{ ISCSI_OP_SCSI_CMD, "SCSI-Cmd" },
		{ ISCSI_OP_TASK_MGMT_REQ, "Task-Mgmt-Req" },
		{ ISCSI_OP_LOGIN_REQ, "Login-Req" },
		{ ISCSI_OP_TEXT_REQ, "Text-Req" },
		{ ISCSI_OP_DATA_OUT, "Data-Out" },
		{ ISCSI_OP_LOGOUT_REQ, "Logout-Req" },
		{ ISCSI_OP_SNACK_REQ, "SNACK-Req" },
		{ ISCSI_OP_NOP_IN, "NOP-In" },
		{ ISCSI_OP_SCSI_RSP, "SCSI-Rsp" },
		{ ISCSI_OP_TASK_MGMT_RSP, "Task-Mgmt-Rsp" },
		{ ISCSI_OP_LOGIN_RSP, "Login-Rsp" },
		{ ISCSI_OP_TEXT_RSP, "Text-Rsp" },
		{ ISCSI_OP_DATA_IN, "Data-In" },
		{ ISCSI_OP_LOGOUT_RSP, "Logout-Rsp" },
		{ ISCSI_OP_R2T, "R2T" },
		{ ISCSI_OP_ASYNC_MSG, "Async-Msg" },
		{ ISCSI_OP_REJECT, "Reject" },
	};

	cr_assert_eq(sizeof(want) / sizeof(want[0]), N_OPCODES);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_expect_str_eq(iscsi_opcode_name(want[i].op), want[i].name, "opcode 0x%02x", want[i].op);
	/* every other value of the byte is unknown, the I-bit forms included */
	for (unsigned op = 0; op < 0x100; op++)
		if (!is_known(op))
			cr_expect_str_eq(iscsi_opcode_name((uint8_t)op), "unknown", "opcode 0x%02x", op);
}

Test(pdu_misc, pad_len)
{
	cr_expect_eq(iscsi_pad_len(0), 0);
	cr_expect_eq(iscsi_pad_len(1), 3);
	cr_expect_eq(iscsi_pad_len(2), 2);
	cr_expect_eq(iscsi_pad_len(3), 1);
	cr_expect_eq(iscsi_pad_len(4), 0);
	cr_expect_eq(iscsi_pad_len(5), 3);
	cr_expect_eq(iscsi_pad_len(0xffffff), 1);
	cr_expect_eq(iscsi_pad_len(0xfffffffcu), 0);
	cr_expect_eq(iscsi_pad_len(0xffffffffu), 1);
	for (uint32_t n = 0; n < 64; n++)
		cr_expect_eq((n + iscsi_pad_len(n)) % 4, 0);
}

Test(pdu_misc, wire_peek)
{
	struct iscsi_bhs h;
	uint8_t wire[ISCSI_BHS_LEN];

	memset(&h, 0, sizeof(h));
	h.opcode = ISCSI_OP_SCSI_CMD;
	h.immediate = true;
	h.ahs_len = 255;
	h.dlen = 0x123456;
	h.itt = 0xcafef00du;
	cr_assert_eq(iscsi_bhs_encode(&h, wire), 0);
	cr_expect_eq(wire[0], 0x41);
	cr_expect_eq(iscsi_wire_opcode(wire), ISCSI_OP_SCSI_CMD);
	cr_expect_eq(iscsi_wire_ahs_bytes(wire), 1020u);
	cr_expect_eq(iscsi_wire_dlen(wire), 0x123456u);
	cr_expect_eq(iscsi_wire_itt(wire), 0xcafef00du);

	static const uint8_t raw[ISCSI_BHS_LEN] = {
		0xff, 0, 0, 0, 0x01, 0xff, 0xff, 0xff,
		0, 0, 0, 0, 0, 0, 0, 0,
		0xff, 0xff, 0xff, 0xfe,
	};
	cr_expect_eq(iscsi_wire_opcode(raw), 0x3f);
	cr_expect_eq(iscsi_wire_ahs_bytes(raw), 4u);
	cr_expect_eq(iscsi_wire_dlen(raw), 0xffffffu);
	cr_expect_eq(iscsi_wire_itt(raw), 0xfffffffeu);
}

/* ---- AHS ------------------------------------------------------------------ */

struct ahs_seen {
	unsigned n;
	uint8_t type[8];
	size_t len[8];
	uint8_t first[8];
	int stop_at; /* return non-zero at this index, -1 never */
};

static int ahs_cb(void *arg, uint8_t type, const uint8_t *value, size_t value_len)
{
	struct ahs_seen *s = arg;

	cr_assert_lt(s->n, 8u);
	s->type[s->n] = type;
	s->len[s->n] = value_len;
	s->first[s->n] = value_len ? value[0] : 0;
	s->n++;
	if (s->stop_at >= 0 && (unsigned)s->stop_at + 1 == s->n)
		return 42;
	return 0;
}

Test(pdu_ahs, walk_good)
{
	/* Bidirectional Read Expected Data Transfer Length AHS (length 5)
	 * followed by an Extended CDB AHS holding CDB bytes 16..19 (length 5) */
	static const uint8_t area[16] = {
		0x00, 0x05, ISCSI_AHS_BIDI_READ_LEN, 0x00, 0x00, 0x01, 0x00, 0x00,
		0x00, 0x05, ISCSI_AHS_EXTENDED_CDB, 0x00, 0xa0, 0xa1, 0xa2, 0xa3,
	};
	struct ahs_seen s = { .stop_at = -1 };

	cr_expect_eq(iscsi_ahs_walk(area, sizeof(area), ahs_cb, &s), 0);
	cr_assert_eq(s.n, 2u);
	cr_expect_eq(s.type[0], ISCSI_AHS_BIDI_READ_LEN);
	cr_expect_eq(s.len[0], 5u);
	cr_expect_eq(s.first[0], 0x00); /* AHS-Specific (reserved) byte */
	cr_expect_eq(s.type[1], ISCSI_AHS_EXTENDED_CDB);
	cr_expect_eq(s.len[1], 5u);

	/* padding: length 1 and length 0 each take one word */
	static const uint8_t padded[8] = {
		0x00, 0x01, 0x07, 0x99,
		0x00, 0x00, 0x08, 0x00,
	};
	memset(&s, 0, sizeof(s));
	s.stop_at = -1;
	cr_expect_eq(iscsi_ahs_walk(padded, sizeof(padded), ahs_cb, &s), 0);
	cr_assert_eq(s.n, 2u);
	cr_expect_eq(s.type[0], 7);
	cr_expect_eq(s.len[0], 1u);
	cr_expect_eq(s.first[0], 0x99);
	cr_expect_eq(s.type[1], 8);
	cr_expect_eq(s.len[1], 0u);

	/* empty area */
	memset(&s, 0, sizeof(s));
	s.stop_at = -1;
	cr_expect_eq(iscsi_ahs_walk(NULL, 0, ahs_cb, &s), 0);
	cr_expect_eq(s.n, 0u);

	/* callback return value stops the walk */
	memset(&s, 0, sizeof(s));
	s.stop_at = 0;
	cr_expect_eq(iscsi_ahs_walk(area, sizeof(area), ahs_cb, &s), 42);
	cr_expect_eq(s.n, 1u);

	/* NULL callback only validates */
	cr_expect_eq(iscsi_ahs_walk(area, sizeof(area), NULL, NULL), 0);
}

Test(pdu_ahs, walk_truncated)
{
	static const uint8_t area[16] = {
		0x00, 0x05, ISCSI_AHS_BIDI_READ_LEN, 0x00, 0x00, 0x01, 0x00, 0x00,
		0x00, 0x05, ISCSI_AHS_EXTENDED_CDB, 0x00, 0xa0, 0xa1, 0xa2, 0xa3,
	};
	/* every prefix that is not a whole sequence of AHSs is rejected */
	for (size_t len = 1; len < sizeof(area); len++) {
		/* exact-size heap copy so an over-read trips the sanitizer */
		uint8_t *buf = malloc(len);
		cr_assert_not_null(buf);
		memcpy(buf, area, len);
		struct ahs_seen s = { .stop_at = -1 };
		int rc = iscsi_ahs_walk(buf, len, ahs_cb, &s);
		if (len == 8) {
			cr_expect_eq(rc, 0);
		} else {
			cr_expect_eq(rc, -EPROTO, "len %zu", len);
		}
		free(buf);
	}
}

Test(pdu_ahs, walk_length_past_end)
{
	/* AHSLength 6 needs 3 + 6 + 3 pad = 12 bytes, area has 8 */
	static const uint8_t a1[8] = { 0x00, 0x06, 0x01, 0, 0, 0, 0, 0 };
	/* AHSLength 0xffff */
	static const uint8_t a2[4] = { 0xff, 0xff, 0x01, 0 };
	/* second AHS runs past the end */
	static const uint8_t a3[12] = { 0x00, 0x01, 0x01, 0, 0x00, 0x09, 0x02, 0, 0, 0, 0, 0 };
	/* AHSLength exactly fills, but the padding would not fit (len not %4) */
	static const uint8_t a4[6] = { 0x00, 0x03, 0x01, 1, 2, 3 };
	struct ahs_seen s;

	memset(&s, 0, sizeof(s));
	s.stop_at = -1;
	cr_expect_eq(iscsi_ahs_walk(a1, sizeof(a1), ahs_cb, &s), -EPROTO);
	cr_expect_eq(s.n, 0u);
	cr_expect_eq(iscsi_ahs_walk(a2, sizeof(a2), ahs_cb, &s), -EPROTO);
	cr_expect_eq(s.n, 0u);
	cr_expect_eq(iscsi_ahs_walk(a3, sizeof(a3), ahs_cb, &s), -EPROTO);
	cr_expect_eq(s.n, 1u); /* first one was fine */
	memset(&s, 0, sizeof(s));
	s.stop_at = -1;
	cr_expect_eq(iscsi_ahs_walk(a4, sizeof(a4), ahs_cb, &s), -EPROTO);
	cr_expect_eq(s.n, 0u);
}

/* Pseudo-random areas in exact-size buffers: never over-reads (ASan). */
Test(pdu_ahs, walk_random_bounds)
{
	uint32_t x = 0x2545f491u;

	for (unsigned iter = 0; iter < 20000; iter++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		size_t len = 1 + x % 24;
		uint8_t *buf = malloc(len);
		cr_assert_not_null(buf);
		for (size_t i = 0; i < len; i++) {
			x ^= x << 13;
			x ^= x >> 17;
			x ^= x << 5;
			/* keep lengths small most of the time so walks go deep */
			buf[i] = (i % 4 == 0) ? (uint8_t)(x & 1) : (uint8_t)x;
		}
		int rc = iscsi_ahs_walk(buf, len, NULL, NULL);
		cr_expect(rc == 0 || rc == -EPROTO);
		free(buf);
	}
}

Test(pdu_ahs, encode)
{
	uint8_t out[16];
	static const uint8_t val[5] = { 0x00, 0x00, 0x01, 0x00, 0x00 };

	memset(out, 0xaa, sizeof(out));
	cr_assert_eq(iscsi_ahs_encode(ISCSI_AHS_BIDI_READ_LEN, val, 5, out, sizeof(out)), 8);
	static const uint8_t e1[8] = { 0x00, 0x05, 0x02, 0x00, 0x00, 0x01, 0x00, 0x00 };
	cr_expect_arr_eq(out, e1, 8);
	cr_expect_eq(out[8], 0xaa); /* nothing written past the AHS */

	/* padding bytes are zeroed */
	memset(out, 0xaa, sizeof(out));
	cr_assert_eq(iscsi_ahs_encode(9, (const uint8_t[]){ 0x11, 0x22 }, 2, out, sizeof(out)), 8);
	static const uint8_t e2[8] = { 0x00, 0x02, 0x09, 0x11, 0x22, 0, 0, 0 };
	cr_expect_arr_eq(out, e2, 8);

	/* length 1 and 0 fit one word */
	cr_expect_eq(iscsi_ahs_encode(1, (const uint8_t[]){ 7 }, 1, out, 4), 4);
	cr_expect_eq(iscsi_ahs_encode(1, NULL, 0, out, 4), 4);
	cr_expect_eq(out[0], 0);
	cr_expect_eq(out[1], 0);
	cr_expect_eq(out[3], 0);

	/* capacity and size limits */
	cr_expect_eq(iscsi_ahs_encode(2, val, 5, out, 7), -ENOSPC);
	cr_expect_eq(iscsi_ahs_encode(2, val, 1, out, 3), -ENOSPC);
	cr_expect_eq(iscsi_ahs_encode(2, val, 0, out, 0), -ENOSPC);
	cr_expect_eq(iscsi_ahs_encode(2, val, 65536, out, sizeof(out)), -EINVAL);

	/* encode → walk round trip, including the largest AHS */
	size_t big_len = 65535;
	size_t cap = 3 + big_len + iscsi_pad_len(3 + big_len) + 8;
	uint8_t *area = malloc(cap);
	uint8_t *big = malloc(big_len);
	cr_assert_not_null(area);
	cr_assert_not_null(big);
	for (size_t i = 0; i < big_len; i++)
		big[i] = (uint8_t)(i * 7);
	int n1 = iscsi_ahs_encode(ISCSI_AHS_EXTENDED_CDB, big, big_len, area, cap);
	cr_assert_eq(n1, 65540);
	int n2 = iscsi_ahs_encode(ISCSI_AHS_BIDI_READ_LEN, val, 5, area + n1, cap - (size_t)n1);
	cr_assert_eq(n2, 8);
	struct ahs_seen s = { .stop_at = -1 };
	cr_expect_eq(iscsi_ahs_walk(area, (size_t)(n1 + n2), ahs_cb, &s), 0);
	cr_assert_eq(s.n, 2u);
	cr_expect_eq(s.type[0], ISCSI_AHS_EXTENDED_CDB);
	cr_expect_eq(s.len[0], big_len);
	cr_expect_eq(s.type[1], ISCSI_AHS_BIDI_READ_LEN);
	cr_expect_eq(s.len[1], 5u);
	cr_expect_eq(memcmp(area + 3, big, big_len), 0);
	free(big);
	free(area);
}

/* ---- serial numbers -------------------------------------------------------- */

Test(pdu_sn, arithmetic)
{
	cr_expect(iscsi_sn_lt(1, 2));
	cr_expect_not(iscsi_sn_lt(2, 1));
	cr_expect_not(iscsi_sn_lt(5, 5));
	cr_expect(iscsi_sn_le(5, 5));
	cr_expect(iscsi_sn_le(1, 2));
	cr_expect_not(iscsi_sn_le(2, 1));

	/* across the wrap */
	cr_expect(iscsi_sn_lt(0xffffffffu, 0));
	cr_expect_not(iscsi_sn_lt(0, 0xffffffffu));
	cr_expect(iscsi_sn_lt(0xfffffff0u, 0x10u));
	cr_expect(iscsi_sn_le(0xfffffff0u, 0x10u));
	cr_expect_not(iscsi_sn_le(0x10u, 0xfffffff0u));
	cr_expect(iscsi_sn_le(0xffffffffu, 0xffffffffu));

	/* the largest forward distance, 2^31 - 1 */
	cr_expect(iscsi_sn_lt(0, 0x7fffffffu));
	cr_expect_not(iscsi_sn_lt(0x7fffffffu, 0));
	cr_expect(iscsi_sn_lt(0x80000000u, 0xffffffffu));
	cr_expect(iscsi_sn_lt(0x7fffffffu, 0x80000000u));
	cr_expect(iscsi_sn_lt(0xc0000000u, 0x3fffffffu));
	cr_expect_not(iscsi_sn_lt(0x3fffffffu, 0xc0000000u));

	/* a window of commands straddling the wrap stays ordered */
	uint32_t base = 0xfffffffau;
	for (uint32_t i = 0; i < 12; i++) {
		cr_expect(iscsi_sn_lt(base + i, base + i + 1), "i=%u", i);
		cr_expect(iscsi_sn_le(base + i, base + i + 1), "i=%u", i);
		cr_expect_not(iscsi_sn_lt(base + i + 1, base + i), "i=%u", i);
	}
}
