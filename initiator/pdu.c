/* SPDX-License-Identifier: MIT */
/*
 * iSCSI PDU codec (RFC 7143 §11).  See pdu.h for the API.
 *
 * Conventions used by this implementation:
 *
 *  - Every field an opcode defines is encoded from / decoded into the
 *    matching member of `h->u`.  Reserved bytes are always written as zero
 *    and ignored on receipt (RFC 7143 §11: receivers ignore reserved
 *    fields), so a decoded field that the opcode does not have is zero.
 *
 *  - I bit (byte 0, 0x40): only NOP-Out, SCSI Command, Task Management
 *    Request, Login Request, Text Request and Logout Request define it.
 *    A Login Request always carries I = 1 (§11.12), so encode sets it
 *    regardless of `immediate`.  For every other opcode the bit is written
 *    as zero and `immediate` is false after decode.
 *
 *  - byte 1 bit 7: for SCSI Command, Text Request/Response, Data-Out and
 *    Data-In it is the F bit, taken from / stored in `final`.  For the
 *    opcodes where the RFC fixes it to 1 (NOP-Out/In, Task Management,
 *    Logout, SNACK, SCSI Response, R2T, Async Message, Reject) encode
 *    always sets it and decode reports the received bit in `final`.  For
 *    Login Request/Response bit 7 is the T bit, which lives in
 *    `u.login.transit`; `final` is ignored by encode and false after decode.
 *
 *  - bytes 8..15: for opcodes with a LUN field (NOP-Out/In, SCSI Command,
 *    Task Management Request, Text Request/Response, Data-Out/In, SNACK,
 *    R2T, Async Message) they are `lun`.  For opcodes where they are
 *    reserved (SCSI Response, Task Management Response, Logout
 *    Request/Response, Reject) encode writes zero and decode sets lun = 0.
 *    For Login Request/Response they are ISID (8..13) and TSIH (14..15):
 *    encode uses u.login.isid/tsih and ignores `lun`; decode fills
 *    u.login.isid/tsih and also sets `lun` to the same eight raw bytes as
 *    a big-endian u64, which is convenient for logging.
 *
 *  - Values wider than their wire field (attr, csg/nsg, TMF function,
 *    logout reason, SNACK type) are masked to the field width on encode.
 */
#include "pdu.h"

#include <errno.h>
#include <string.h>

#include "be.h"

/* ---- opcode properties ------------------------------------------------- */

#define BHS_I_BIT 0x40u
#define BHS_F_BIT 0x80u

static bool opcode_known(uint8_t op)
{
	switch (op) {
	case ISCSI_OP_NOP_OUT:
	case ISCSI_OP_SCSI_CMD:
	case ISCSI_OP_TASK_MGMT_REQ:
	case ISCSI_OP_LOGIN_REQ:
	case ISCSI_OP_TEXT_REQ:
	case ISCSI_OP_DATA_OUT:
	case ISCSI_OP_LOGOUT_REQ:
	case ISCSI_OP_SNACK_REQ:
	case ISCSI_OP_NOP_IN:
	case ISCSI_OP_SCSI_RSP:
	case ISCSI_OP_TASK_MGMT_RSP:
	case ISCSI_OP_LOGIN_RSP:
	case ISCSI_OP_TEXT_RSP:
	case ISCSI_OP_DATA_IN:
	case ISCSI_OP_LOGOUT_RSP:
	case ISCSI_OP_R2T:
	case ISCSI_OP_ASYNC_MSG:
	case ISCSI_OP_REJECT:
		return true;
	default:
		return false;
	}
}

/* Opcodes whose byte 0 defines the I bit. */
static bool opcode_has_i_bit(uint8_t op)
{
	switch (op) {
	case ISCSI_OP_NOP_OUT:
	case ISCSI_OP_SCSI_CMD:
	case ISCSI_OP_TASK_MGMT_REQ:
	case ISCSI_OP_LOGIN_REQ:
	case ISCSI_OP_TEXT_REQ:
	case ISCSI_OP_LOGOUT_REQ:
		return true;
	default:
		return false;
	}
}

/* Opcodes whose byte 1 bit 7 is a real F bit (not fixed to 1, not T). */
static bool opcode_has_f_bit(uint8_t op)
{
	switch (op) {
	case ISCSI_OP_SCSI_CMD:
	case ISCSI_OP_TEXT_REQ:
	case ISCSI_OP_TEXT_RSP:
	case ISCSI_OP_DATA_OUT:
	case ISCSI_OP_DATA_IN:
		return true;
	default:
		return false;
	}
}

static bool opcode_is_login(uint8_t op)
{
	return op == ISCSI_OP_LOGIN_REQ || op == ISCSI_OP_LOGIN_RSP;
}

/* Opcodes whose bytes 8..15 are a LUN (not reserved, not ISID/TSIH). */
static bool opcode_has_lun(uint8_t op)
{
	switch (op) {
	case ISCSI_OP_NOP_OUT:
	case ISCSI_OP_SCSI_CMD:
	case ISCSI_OP_TASK_MGMT_REQ:
	case ISCSI_OP_TEXT_REQ:
	case ISCSI_OP_DATA_OUT:
	case ISCSI_OP_SNACK_REQ:
	case ISCSI_OP_NOP_IN:
	case ISCSI_OP_TEXT_RSP:
	case ISCSI_OP_DATA_IN:
	case ISCSI_OP_R2T:
	case ISCSI_OP_ASYNC_MSG:
		return true;
	default:
		return false;
	}
}

/* ---- encode ------------------------------------------------------------ */

int iscsi_bhs_encode(const struct iscsi_bhs *h, uint8_t out[ISCSI_BHS_LEN])
{
	const uint8_t op = h->opcode;

	if (!opcode_known(op) || h->dlen > 0xffffffu)
		return -EINVAL;

	memset(out, 0, ISCSI_BHS_LEN);

	/* common fields */
	out[0] = op;
	if (op == ISCSI_OP_LOGIN_REQ || (opcode_has_i_bit(op) && h->immediate))
		out[0] |= BHS_I_BIT;
	if (opcode_is_login(op))
		; /* bit 7 is T, set below */
	else if (opcode_has_f_bit(op))
		out[1] = h->final ? BHS_F_BIT : 0;
	else
		out[1] = BHS_F_BIT; /* fixed to 1 */
	out[4] = h->ahs_len;
	put_be24(out + 5, h->dlen);
	if (opcode_has_lun(op))
		put_be64(out + 8, h->lun);
	put_be32(out + 16, h->itt);

	switch (op) {
	case ISCSI_OP_SCSI_CMD: /* §11.3 */
		if (h->u.cmd.read)
			out[1] |= 0x40;
		if (h->u.cmd.write)
			out[1] |= 0x20;
		out[1] |= h->u.cmd.attr & 0x07;
		put_be32(out + 20, h->u.cmd.edtl);
		put_be32(out + 24, h->u.cmd.cmdsn);
		put_be32(out + 28, h->u.cmd.expstatsn);
		memcpy(out + 32, h->u.cmd.cdb, 16);
		break;

	case ISCSI_OP_SCSI_RSP: /* §11.4 */
		if (h->u.rsp.bidi_overflow)
			out[1] |= 0x10;
		if (h->u.rsp.bidi_underflow)
			out[1] |= 0x08;
		if (h->u.rsp.overflow)
			out[1] |= 0x04;
		if (h->u.rsp.underflow)
			out[1] |= 0x02;
		out[2] = h->u.rsp.response;
		out[3] = h->u.rsp.status;
		put_be32(out + 20, h->u.rsp.snack_tag);
		put_be32(out + 24, h->u.rsp.statsn);
		put_be32(out + 28, h->u.rsp.expcmdsn);
		put_be32(out + 32, h->u.rsp.maxcmdsn);
		put_be32(out + 36, h->u.rsp.expdatasn);
		put_be32(out + 40, h->u.rsp.bidi_residual);
		put_be32(out + 44, h->u.rsp.residual);
		break;

	case ISCSI_OP_TASK_MGMT_REQ: /* §11.5 */
		out[1] |= h->u.tmf_req.function & 0x7f;
		put_be32(out + 20, h->u.tmf_req.rtt);
		put_be32(out + 24, h->u.tmf_req.cmdsn);
		put_be32(out + 28, h->u.tmf_req.expstatsn);
		put_be32(out + 32, h->u.tmf_req.refcmdsn);
		put_be32(out + 36, h->u.tmf_req.expdatasn);
		break;

	case ISCSI_OP_TASK_MGMT_RSP: /* §11.6 */
		out[2] = h->u.tmf_rsp.response;
		put_be32(out + 24, h->u.tmf_rsp.statsn);
		put_be32(out + 28, h->u.tmf_rsp.expcmdsn);
		put_be32(out + 32, h->u.tmf_rsp.maxcmdsn);
		break;

	case ISCSI_OP_DATA_OUT: /* §11.7.1 */
		put_be32(out + 20, h->u.data_out.ttt);
		put_be32(out + 28, h->u.data_out.expstatsn);
		put_be32(out + 36, h->u.data_out.datasn);
		put_be32(out + 40, h->u.data_out.offset);
		break;

	case ISCSI_OP_DATA_IN: /* §11.7.2 */
		if (h->u.data_in.ack)
			out[1] |= 0x40;
		if (h->u.data_in.overflow)
			out[1] |= 0x04;
		if (h->u.data_in.underflow)
			out[1] |= 0x02;
		if (h->u.data_in.status_present)
			out[1] |= 0x01;
		out[3] = h->u.data_in.status;
		put_be32(out + 20, h->u.data_in.ttt);
		put_be32(out + 24, h->u.data_in.statsn);
		put_be32(out + 28, h->u.data_in.expcmdsn);
		put_be32(out + 32, h->u.data_in.maxcmdsn);
		put_be32(out + 36, h->u.data_in.datasn);
		put_be32(out + 40, h->u.data_in.offset);
		put_be32(out + 44, h->u.data_in.residual);
		break;

	case ISCSI_OP_R2T: /* §11.8 */
		put_be32(out + 20, h->u.r2t.ttt);
		put_be32(out + 24, h->u.r2t.statsn);
		put_be32(out + 28, h->u.r2t.expcmdsn);
		put_be32(out + 32, h->u.r2t.maxcmdsn);
		put_be32(out + 36, h->u.r2t.r2tsn);
		put_be32(out + 40, h->u.r2t.offset);
		put_be32(out + 44, h->u.r2t.length);
		break;

	case ISCSI_OP_ASYNC_MSG: /* §11.9 */
		put_be32(out + 24, h->u.async.statsn);
		put_be32(out + 28, h->u.async.expcmdsn);
		put_be32(out + 32, h->u.async.maxcmdsn);
		out[36] = h->u.async.event;
		out[37] = h->u.async.vcode;
		put_be16(out + 38, h->u.async.param1);
		put_be16(out + 40, h->u.async.param2);
		put_be16(out + 42, h->u.async.param3);
		break;

	case ISCSI_OP_TEXT_REQ: /* §11.10 */
		if (h->u.text.cont)
			out[1] |= 0x40;
		put_be32(out + 20, h->u.text.ttt);
		put_be32(out + 24, h->u.text.cmdsn);
		put_be32(out + 28, h->u.text.expstatsn);
		break;

	case ISCSI_OP_TEXT_RSP: /* §11.11 */
		if (h->u.text.cont)
			out[1] |= 0x40;
		put_be32(out + 20, h->u.text.ttt);
		put_be32(out + 24, h->u.text.statsn);
		put_be32(out + 28, h->u.text.expcmdsn);
		put_be32(out + 32, h->u.text.maxcmdsn);
		break;

	case ISCSI_OP_LOGIN_REQ: /* §11.12 */
	case ISCSI_OP_LOGIN_RSP: /* §11.13 */
		if (h->u.login.transit)
			out[1] |= 0x80;
		if (h->u.login.cont)
			out[1] |= 0x40;
		out[1] |= (uint8_t)((h->u.login.csg & 0x03) << 2);
		out[1] |= h->u.login.nsg & 0x03;
		out[2] = h->u.login.version_max;
		out[3] = h->u.login.version_min;
		memcpy(out + 8, h->u.login.isid, 6);
		put_be16(out + 14, h->u.login.tsih);
		if (op == ISCSI_OP_LOGIN_REQ) {
			put_be16(out + 20, h->u.login.cid);
			put_be32(out + 24, h->u.login.cmdsn);
			put_be32(out + 28, h->u.login.expstatsn);
		} else {
			put_be32(out + 24, h->u.login.statsn);
			put_be32(out + 28, h->u.login.expcmdsn);
			put_be32(out + 32, h->u.login.maxcmdsn);
			out[36] = h->u.login.status_class;
			out[37] = h->u.login.status_detail;
		}
		break;

	case ISCSI_OP_LOGOUT_REQ: /* §11.14 */
		out[1] |= h->u.logout.reason & 0x7f;
		put_be16(out + 20, h->u.logout.cid);
		put_be32(out + 24, h->u.logout.cmdsn);
		put_be32(out + 28, h->u.logout.expstatsn);
		break;

	case ISCSI_OP_LOGOUT_RSP: /* §11.15 */
		out[2] = h->u.logout.response;
		put_be32(out + 24, h->u.logout.statsn);
		put_be32(out + 28, h->u.logout.expcmdsn);
		put_be32(out + 32, h->u.logout.maxcmdsn);
		put_be16(out + 40, h->u.logout.time2wait);
		put_be16(out + 42, h->u.logout.time2retain);
		break;

	case ISCSI_OP_SNACK_REQ: /* §11.16 */
		out[1] |= h->u.snack.type & 0x0f;
		put_be32(out + 20, h->u.snack.ttt);
		put_be32(out + 28, h->u.snack.expstatsn);
		put_be32(out + 40, h->u.snack.begrun);
		put_be32(out + 44, h->u.snack.runlength);
		break;

	case ISCSI_OP_REJECT: /* §11.17 */
		out[2] = h->u.reject.reason;
		put_be32(out + 24, h->u.reject.statsn);
		put_be32(out + 28, h->u.reject.expcmdsn);
		put_be32(out + 32, h->u.reject.maxcmdsn);
		put_be32(out + 36, h->u.reject.datasn);
		break;

	case ISCSI_OP_NOP_OUT: /* §11.18 */
		put_be32(out + 20, h->u.nop.ttt);
		put_be32(out + 24, h->u.nop.cmdsn);
		put_be32(out + 28, h->u.nop.expstatsn);
		break;

	case ISCSI_OP_NOP_IN: /* §11.19 */
		put_be32(out + 20, h->u.nop.ttt);
		put_be32(out + 24, h->u.nop.statsn);
		put_be32(out + 28, h->u.nop.expcmdsn);
		put_be32(out + 32, h->u.nop.maxcmdsn);
		break;

	default: /* unreachable: opcode_known() checked above */
		return -EINVAL;
	}
	return 0;
}

/* ---- decode ------------------------------------------------------------ */

int iscsi_bhs_decode(const uint8_t in[ISCSI_BHS_LEN], struct iscsi_bhs *h)
{
	const uint8_t op = in[0] & 0x3f;
	const uint8_t b1 = in[1];

	memset(h, 0, sizeof(*h));
	if (!opcode_known(op))
		return -EPROTO;

	/* common fields */
	h->opcode = op;
	h->immediate = opcode_has_i_bit(op) && (in[0] & BHS_I_BIT);
	h->final = !opcode_is_login(op) && (b1 & BHS_F_BIT);
	h->ahs_len = in[4];
	h->dlen = get_be24(in + 5);
	if (opcode_has_lun(op) || opcode_is_login(op))
		h->lun = get_be64(in + 8);
	h->itt = get_be32(in + 16);

	switch (op) {
	case ISCSI_OP_SCSI_CMD:
		h->u.cmd.read = b1 & 0x40;
		h->u.cmd.write = b1 & 0x20;
		h->u.cmd.attr = b1 & 0x07;
		h->u.cmd.edtl = get_be32(in + 20);
		h->u.cmd.cmdsn = get_be32(in + 24);
		h->u.cmd.expstatsn = get_be32(in + 28);
		memcpy(h->u.cmd.cdb, in + 32, 16);
		break;

	case ISCSI_OP_SCSI_RSP:
		h->u.rsp.bidi_overflow = b1 & 0x10;
		h->u.rsp.bidi_underflow = b1 & 0x08;
		h->u.rsp.overflow = b1 & 0x04;
		h->u.rsp.underflow = b1 & 0x02;
		h->u.rsp.response = in[2];
		h->u.rsp.status = in[3];
		h->u.rsp.snack_tag = get_be32(in + 20);
		h->u.rsp.statsn = get_be32(in + 24);
		h->u.rsp.expcmdsn = get_be32(in + 28);
		h->u.rsp.maxcmdsn = get_be32(in + 32);
		h->u.rsp.expdatasn = get_be32(in + 36);
		h->u.rsp.bidi_residual = get_be32(in + 40);
		h->u.rsp.residual = get_be32(in + 44);
		break;

	case ISCSI_OP_TASK_MGMT_REQ:
		h->u.tmf_req.function = b1 & 0x7f;
		h->u.tmf_req.rtt = get_be32(in + 20);
		h->u.tmf_req.cmdsn = get_be32(in + 24);
		h->u.tmf_req.expstatsn = get_be32(in + 28);
		h->u.tmf_req.refcmdsn = get_be32(in + 32);
		h->u.tmf_req.expdatasn = get_be32(in + 36);
		break;

	case ISCSI_OP_TASK_MGMT_RSP:
		h->u.tmf_rsp.response = in[2];
		h->u.tmf_rsp.statsn = get_be32(in + 24);
		h->u.tmf_rsp.expcmdsn = get_be32(in + 28);
		h->u.tmf_rsp.maxcmdsn = get_be32(in + 32);
		break;

	case ISCSI_OP_DATA_OUT:
		h->u.data_out.ttt = get_be32(in + 20);
		h->u.data_out.expstatsn = get_be32(in + 28);
		h->u.data_out.datasn = get_be32(in + 36);
		h->u.data_out.offset = get_be32(in + 40);
		break;

	case ISCSI_OP_DATA_IN:
		h->u.data_in.ack = b1 & 0x40;
		h->u.data_in.overflow = b1 & 0x04;
		h->u.data_in.underflow = b1 & 0x02;
		h->u.data_in.status_present = b1 & 0x01;
		h->u.data_in.status = in[3];
		h->u.data_in.ttt = get_be32(in + 20);
		h->u.data_in.statsn = get_be32(in + 24);
		h->u.data_in.expcmdsn = get_be32(in + 28);
		h->u.data_in.maxcmdsn = get_be32(in + 32);
		h->u.data_in.datasn = get_be32(in + 36);
		h->u.data_in.offset = get_be32(in + 40);
		h->u.data_in.residual = get_be32(in + 44);
		break;

	case ISCSI_OP_R2T:
		h->u.r2t.ttt = get_be32(in + 20);
		h->u.r2t.statsn = get_be32(in + 24);
		h->u.r2t.expcmdsn = get_be32(in + 28);
		h->u.r2t.maxcmdsn = get_be32(in + 32);
		h->u.r2t.r2tsn = get_be32(in + 36);
		h->u.r2t.offset = get_be32(in + 40);
		h->u.r2t.length = get_be32(in + 44);
		break;

	case ISCSI_OP_ASYNC_MSG:
		h->u.async.statsn = get_be32(in + 24);
		h->u.async.expcmdsn = get_be32(in + 28);
		h->u.async.maxcmdsn = get_be32(in + 32);
		h->u.async.event = in[36];
		h->u.async.vcode = in[37];
		h->u.async.param1 = get_be16(in + 38);
		h->u.async.param2 = get_be16(in + 40);
		h->u.async.param3 = get_be16(in + 42);
		break;

	case ISCSI_OP_TEXT_REQ:
		h->u.text.cont = b1 & 0x40;
		h->u.text.ttt = get_be32(in + 20);
		h->u.text.cmdsn = get_be32(in + 24);
		h->u.text.expstatsn = get_be32(in + 28);
		break;

	case ISCSI_OP_TEXT_RSP:
		h->u.text.cont = b1 & 0x40;
		h->u.text.ttt = get_be32(in + 20);
		h->u.text.statsn = get_be32(in + 24);
		h->u.text.expcmdsn = get_be32(in + 28);
		h->u.text.maxcmdsn = get_be32(in + 32);
		break;

	case ISCSI_OP_LOGIN_REQ:
	case ISCSI_OP_LOGIN_RSP:
		h->u.login.transit = b1 & 0x80;
		h->u.login.cont = b1 & 0x40;
		h->u.login.csg = (b1 >> 2) & 0x03;
		h->u.login.nsg = b1 & 0x03;
		h->u.login.version_max = in[2];
		h->u.login.version_min = in[3];
		memcpy(h->u.login.isid, in + 8, 6);
		h->u.login.tsih = get_be16(in + 14);
		if (op == ISCSI_OP_LOGIN_REQ) {
			h->u.login.cid = get_be16(in + 20);
			h->u.login.cmdsn = get_be32(in + 24);
			h->u.login.expstatsn = get_be32(in + 28);
		} else {
			h->u.login.statsn = get_be32(in + 24);
			h->u.login.expcmdsn = get_be32(in + 28);
			h->u.login.maxcmdsn = get_be32(in + 32);
			h->u.login.status_class = in[36];
			h->u.login.status_detail = in[37];
		}
		break;

	case ISCSI_OP_LOGOUT_REQ:
		h->u.logout.reason = b1 & 0x7f;
		h->u.logout.cid = get_be16(in + 20);
		h->u.logout.cmdsn = get_be32(in + 24);
		h->u.logout.expstatsn = get_be32(in + 28);
		break;

	case ISCSI_OP_LOGOUT_RSP:
		h->u.logout.response = in[2];
		h->u.logout.statsn = get_be32(in + 24);
		h->u.logout.expcmdsn = get_be32(in + 28);
		h->u.logout.maxcmdsn = get_be32(in + 32);
		h->u.logout.time2wait = get_be16(in + 40);
		h->u.logout.time2retain = get_be16(in + 42);
		break;

	case ISCSI_OP_SNACK_REQ:
		h->u.snack.type = b1 & 0x0f;
		h->u.snack.ttt = get_be32(in + 20);
		h->u.snack.expstatsn = get_be32(in + 28);
		h->u.snack.begrun = get_be32(in + 40);
		h->u.snack.runlength = get_be32(in + 44);
		break;

	case ISCSI_OP_REJECT:
		h->u.reject.reason = in[2];
		h->u.reject.statsn = get_be32(in + 24);
		h->u.reject.expcmdsn = get_be32(in + 28);
		h->u.reject.maxcmdsn = get_be32(in + 32);
		h->u.reject.datasn = get_be32(in + 36);
		break;

	case ISCSI_OP_NOP_OUT:
		h->u.nop.ttt = get_be32(in + 20);
		h->u.nop.cmdsn = get_be32(in + 24);
		h->u.nop.expstatsn = get_be32(in + 28);
		break;

	case ISCSI_OP_NOP_IN:
		h->u.nop.ttt = get_be32(in + 20);
		h->u.nop.statsn = get_be32(in + 24);
		h->u.nop.expcmdsn = get_be32(in + 28);
		h->u.nop.maxcmdsn = get_be32(in + 32);
		break;

	default: /* unreachable: opcode_known() checked above */
		memset(h, 0, sizeof(*h));
		return -EPROTO;
	}
	return 0;
}

/* ---- AHS (§11.2.2) ----------------------------------------------------- */

/*
 * Wire form of one AHS:
 *
 *   byte 0-1  AHSLength (big endian): bytes from the AHS-Specific byte on,
 *             i.e. excluding AHSLength and AHSType, excluding padding
 *   byte 2    AHSType
 *   byte 3..  AHS-Specific, AHSLength bytes
 *   padding   up to the next 4-byte boundary
 *
 * So one AHS occupies 3 + AHSLength bytes rounded up to a multiple of 4.
 */
#define AHS_HDR_LEN 3u

/*
 * `cb` may be NULL, in which case the area is only validated.  An empty
 * area (len == 0) is valid and `ahs` is not read.
 */
int iscsi_ahs_walk(const uint8_t *ahs, size_t len,
		   int (*cb)(void *arg, uint8_t type, const uint8_t *value, size_t value_len),
		   void *arg)
{
	size_t off = 0;

	while (off < len) {
		size_t left = len - off;
		size_t vlen, total;

		if (left < AHS_HDR_LEN)
			return -EPROTO;
		vlen = get_be16(ahs + off);
		/* vlen <= 65535, so this cannot overflow size_t */
		total = AHS_HDR_LEN + vlen;
		total += (4u - (total & 3u)) & 3u;
		if (total > left)
			return -EPROTO;
		if (cb) {
			int rc = cb(arg, ahs[off + 2], ahs + off + AHS_HDR_LEN, vlen);

			if (rc)
				return rc;
		}
		off += total;
	}
	return 0;
}

int iscsi_ahs_encode(uint8_t type, const uint8_t *value, size_t value_len,
		     uint8_t *out, size_t cap)
{
	size_t total;

	if (value_len > 0xffffu)
		return -EINVAL;
	total = AHS_HDR_LEN + value_len;
	total += (4u - (total & 3u)) & 3u;
	if (total > cap)
		return -ENOSPC;

	put_be16(out, (uint16_t)value_len);
	out[2] = type;
	if (value_len)
		memcpy(out + AHS_HDR_LEN, value, value_len);
	memset(out + AHS_HDR_LEN + value_len, 0, total - AHS_HDR_LEN - value_len);
	return (int)total;
}

/* ---- names ------------------------------------------------------------- */

const char *iscsi_opcode_name(uint8_t opcode)
{
	switch (opcode) {
	case ISCSI_OP_NOP_OUT:		return "NOP-Out";
	case ISCSI_OP_SCSI_CMD:		return "SCSI-Cmd";
	case ISCSI_OP_TASK_MGMT_REQ:	return "Task-Mgmt-Req";
	case ISCSI_OP_LOGIN_REQ:	return "Login-Req";
	case ISCSI_OP_TEXT_REQ:		return "Text-Req";
	case ISCSI_OP_DATA_OUT:		return "Data-Out";
	case ISCSI_OP_LOGOUT_REQ:	return "Logout-Req";
	case ISCSI_OP_SNACK_REQ:	return "SNACK-Req";
	case ISCSI_OP_NOP_IN:		return "NOP-In";
	case ISCSI_OP_SCSI_RSP:		return "SCSI-Rsp";
	case ISCSI_OP_TASK_MGMT_RSP:	return "Task-Mgmt-Rsp";
	case ISCSI_OP_LOGIN_RSP:	return "Login-Rsp";
	case ISCSI_OP_TEXT_RSP:		return "Text-Rsp";
	case ISCSI_OP_DATA_IN:		return "Data-In";
	case ISCSI_OP_LOGOUT_RSP:	return "Logout-Rsp";
	case ISCSI_OP_R2T:		return "R2T";
	case ISCSI_OP_ASYNC_MSG:	return "Async-Msg";
	case ISCSI_OP_REJECT:		return "Reject";
	default:			return "unknown";
	}
}
