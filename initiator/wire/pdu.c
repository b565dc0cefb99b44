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
 *
 * Layout: one table, bhs_ops[], indexed by opcode, gives each known opcode
 * its name, the common-field properties above (flags) and one enc_<op> /
 * dec_<op> pair for the opcode-specific bytes.  iscsi_bhs_encode/decode
 * do the common fields (bytes 0..19) and call the pair; an opcode with no
 * table entry is unknown.  The AHS helpers follow the codec.
 */
#include "pdu.h"

#include <errno.h>
#include <string.h>

#include "initiator/util/be.h"

#define BHS_I_BIT 0x40u
#define BHS_F_BIT 0x80u

/* ---- opcode-specific encoders (bytes 1..3 and 20..47) ------------------ */

/*
 * Each enc_<op> is called with out[] zeroed and the common fields already
 * written (out[1] holds the F bit where the opcode has one); it ORs in its
 * byte 1 flags and writes its own fields.
 */

/* SCSI Command, §11.3 */
static void enc_scsi_cmd(const struct iscsi_bhs *h, uint8_t *out)
{
	if (h->u.cmd.read)
		out[1] |= 0x40;
	if (h->u.cmd.write)
		out[1] |= 0x20;
	out[1] |= h->u.cmd.attr & 0x07;
	put_be32(out + 20, h->u.cmd.edtl);
	put_be32(out + 24, h->u.cmd.cmdsn);
	put_be32(out + 28, h->u.cmd.expstatsn);
	memcpy(out + 32, h->u.cmd.cdb, 16);
}

/* SCSI Response, §11.4 */
static void enc_scsi_rsp(const struct iscsi_bhs *h, uint8_t *out)
{
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
}

/* Task Management Function Request, §11.5 */
static void enc_tmf_req(const struct iscsi_bhs *h, uint8_t *out)
{
	out[1] |= h->u.tmf_req.function & 0x7f;
	put_be32(out + 20, h->u.tmf_req.rtt);
	put_be32(out + 24, h->u.tmf_req.cmdsn);
	put_be32(out + 28, h->u.tmf_req.expstatsn);
	put_be32(out + 32, h->u.tmf_req.refcmdsn);
	put_be32(out + 36, h->u.tmf_req.expdatasn);
}

/* Task Management Function Response, §11.6 */
static void enc_tmf_rsp(const struct iscsi_bhs *h, uint8_t *out)
{
	out[2] = h->u.tmf_rsp.response;
	put_be32(out + 24, h->u.tmf_rsp.statsn);
	put_be32(out + 28, h->u.tmf_rsp.expcmdsn);
	put_be32(out + 32, h->u.tmf_rsp.maxcmdsn);
}

/* SCSI Data-Out, §11.7.1 */
static void enc_data_out(const struct iscsi_bhs *h, uint8_t *out)
{
	put_be32(out + 20, h->u.data_out.ttt);
	put_be32(out + 28, h->u.data_out.expstatsn);
	put_be32(out + 36, h->u.data_out.datasn);
	put_be32(out + 40, h->u.data_out.offset);
}

/* SCSI Data-In, §11.7.2 */
static void enc_data_in(const struct iscsi_bhs *h, uint8_t *out)
{
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
}

/* Ready To Transfer (R2T), §11.8 */
static void enc_r2t(const struct iscsi_bhs *h, uint8_t *out)
{
	put_be32(out + 20, h->u.r2t.ttt);
	put_be32(out + 24, h->u.r2t.statsn);
	put_be32(out + 28, h->u.r2t.expcmdsn);
	put_be32(out + 32, h->u.r2t.maxcmdsn);
	put_be32(out + 36, h->u.r2t.r2tsn);
	put_be32(out + 40, h->u.r2t.offset);
	put_be32(out + 44, h->u.r2t.length);
}

/* Asynchronous Message, §11.9 */
static void enc_async(const struct iscsi_bhs *h, uint8_t *out)
{
	put_be32(out + 24, h->u.async.statsn);
	put_be32(out + 28, h->u.async.expcmdsn);
	put_be32(out + 32, h->u.async.maxcmdsn);
	out[36] = h->u.async.event;
	out[37] = h->u.async.vcode;
	put_be16(out + 38, h->u.async.param1);
	put_be16(out + 40, h->u.async.param2);
	put_be16(out + 42, h->u.async.param3);
}

/* Text Request, §11.10 */
static void enc_text_req(const struct iscsi_bhs *h, uint8_t *out)
{
	if (h->u.text.cont)
		out[1] |= 0x40;
	put_be32(out + 20, h->u.text.ttt);
	put_be32(out + 24, h->u.text.cmdsn);
	put_be32(out + 28, h->u.text.expstatsn);
}

/* Text Response, §11.11 */
static void enc_text_rsp(const struct iscsi_bhs *h, uint8_t *out)
{
	if (h->u.text.cont)
		out[1] |= 0x40;
	put_be32(out + 20, h->u.text.ttt);
	put_be32(out + 24, h->u.text.statsn);
	put_be32(out + 28, h->u.text.expcmdsn);
	put_be32(out + 32, h->u.text.maxcmdsn);
}

/* Login Request/Response, the part they share: T C CSG NSG, versions, ISID, TSIH. */
static void enc_login_common(const struct iscsi_bhs *h, uint8_t *out)
{
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
}

/* Login Request, §11.12: the I bit is always 1 */
static void enc_login_req(const struct iscsi_bhs *h, uint8_t *out)
{
	out[0] |= BHS_I_BIT;
	enc_login_common(h, out);
	put_be16(out + 20, h->u.login.cid);
	put_be32(out + 24, h->u.login.cmdsn);
	put_be32(out + 28, h->u.login.expstatsn);
}

/* Login Response, §11.13 */
static void enc_login_rsp(const struct iscsi_bhs *h, uint8_t *out)
{
	enc_login_common(h, out);
	put_be32(out + 24, h->u.login.statsn);
	put_be32(out + 28, h->u.login.expcmdsn);
	put_be32(out + 32, h->u.login.maxcmdsn);
	out[36] = h->u.login.status_class;
	out[37] = h->u.login.status_detail;
}

/* Logout Request, §11.14 */
static void enc_logout_req(const struct iscsi_bhs *h, uint8_t *out)
{
	out[1] |= h->u.logout.reason & 0x7f;
	put_be16(out + 20, h->u.logout.cid);
	put_be32(out + 24, h->u.logout.cmdsn);
	put_be32(out + 28, h->u.logout.expstatsn);
}

/* Logout Response, §11.15 */
static void enc_logout_rsp(const struct iscsi_bhs *h, uint8_t *out)
{
	out[2] = h->u.logout.response;
	put_be32(out + 24, h->u.logout.statsn);
	put_be32(out + 28, h->u.logout.expcmdsn);
	put_be32(out + 32, h->u.logout.maxcmdsn);
	put_be16(out + 40, h->u.logout.time2wait);
	put_be16(out + 42, h->u.logout.time2retain);
}

/* SNACK Request, §11.16 */
static void enc_snack(const struct iscsi_bhs *h, uint8_t *out)
{
	out[1] |= h->u.snack.type & 0x0f;
	put_be32(out + 20, h->u.snack.ttt);
	put_be32(out + 28, h->u.snack.expstatsn);
	put_be32(out + 40, h->u.snack.begrun);
	put_be32(out + 44, h->u.snack.runlength);
}

/* Reject, §11.17 */
static void enc_reject(const struct iscsi_bhs *h, uint8_t *out)
{
	out[2] = h->u.reject.reason;
	put_be32(out + 24, h->u.reject.statsn);
	put_be32(out + 28, h->u.reject.expcmdsn);
	put_be32(out + 32, h->u.reject.maxcmdsn);
	put_be32(out + 36, h->u.reject.datasn);
}

/* NOP-Out, §11.18 */
static void enc_nop_out(const struct iscsi_bhs *h, uint8_t *out)
{
	put_be32(out + 20, h->u.nop.ttt);
	put_be32(out + 24, h->u.nop.cmdsn);
	put_be32(out + 28, h->u.nop.expstatsn);
}

/* NOP-In, §11.19 */
static void enc_nop_in(const struct iscsi_bhs *h, uint8_t *out)
{
	put_be32(out + 20, h->u.nop.ttt);
	put_be32(out + 24, h->u.nop.statsn);
	put_be32(out + 28, h->u.nop.expcmdsn);
	put_be32(out + 32, h->u.nop.maxcmdsn);
}

/* ---- opcode-specific decoders ------------------------------------------ */

/*
 * Each dec_<op> is called with *h zeroed and the common fields filled; it
 * reads its byte 1 flags and its own fields from in[].
 */

/* SCSI Command, §11.3 */
static void dec_scsi_cmd(const uint8_t *in, struct iscsi_bhs *h)
{
	h->u.cmd.read = in[1] & 0x40;
	h->u.cmd.write = in[1] & 0x20;
	h->u.cmd.attr = in[1] & 0x07;
	h->u.cmd.edtl = get_be32(in + 20);
	h->u.cmd.cmdsn = get_be32(in + 24);
	h->u.cmd.expstatsn = get_be32(in + 28);
	memcpy(h->u.cmd.cdb, in + 32, 16);
}

/* SCSI Response, §11.4 */
static void dec_scsi_rsp(const uint8_t *in, struct iscsi_bhs *h)
{
	h->u.rsp.bidi_overflow = in[1] & 0x10;
	h->u.rsp.bidi_underflow = in[1] & 0x08;
	h->u.rsp.overflow = in[1] & 0x04;
	h->u.rsp.underflow = in[1] & 0x02;
	h->u.rsp.response = in[2];
	h->u.rsp.status = in[3];
	h->u.rsp.snack_tag = get_be32(in + 20);
	h->u.rsp.statsn = get_be32(in + 24);
	h->u.rsp.expcmdsn = get_be32(in + 28);
	h->u.rsp.maxcmdsn = get_be32(in + 32);
	h->u.rsp.expdatasn = get_be32(in + 36);
	h->u.rsp.bidi_residual = get_be32(in + 40);
	h->u.rsp.residual = get_be32(in + 44);
}

/* Task Management Function Request, §11.5 */
static void dec_tmf_req(const uint8_t *in, struct iscsi_bhs *h)
{
	h->u.tmf_req.function = in[1] & 0x7f;
	h->u.tmf_req.rtt = get_be32(in + 20);
	h->u.tmf_req.cmdsn = get_be32(in + 24);
	h->u.tmf_req.expstatsn = get_be32(in + 28);
	h->u.tmf_req.refcmdsn = get_be32(in + 32);
	h->u.tmf_req.expdatasn = get_be32(in + 36);
}

/* Task Management Function Response, §11.6 */
static void dec_tmf_rsp(const uint8_t *in, struct iscsi_bhs *h)
{
	h->u.tmf_rsp.response = in[2];
	h->u.tmf_rsp.statsn = get_be32(in + 24);
	h->u.tmf_rsp.expcmdsn = get_be32(in + 28);
	h->u.tmf_rsp.maxcmdsn = get_be32(in + 32);
}

/* SCSI Data-Out, §11.7.1 */
static void dec_data_out(const uint8_t *in, struct iscsi_bhs *h)
{
	h->u.data_out.ttt = get_be32(in + 20);
	h->u.data_out.expstatsn = get_be32(in + 28);
	h->u.data_out.datasn = get_be32(in + 36);
	h->u.data_out.offset = get_be32(in + 40);
}

/* SCSI Data-In, §11.7.2 */
static void dec_data_in(const uint8_t *in, struct iscsi_bhs *h)
{
	h->u.data_in.ack = in[1] & 0x40;
	h->u.data_in.overflow = in[1] & 0x04;
	h->u.data_in.underflow = in[1] & 0x02;
	h->u.data_in.status_present = in[1] & 0x01;
	h->u.data_in.status = in[3];
	h->u.data_in.ttt = get_be32(in + 20);
	h->u.data_in.statsn = get_be32(in + 24);
	h->u.data_in.expcmdsn = get_be32(in + 28);
	h->u.data_in.maxcmdsn = get_be32(in + 32);
	h->u.data_in.datasn = get_be32(in + 36);
	h->u.data_in.offset = get_be32(in + 40);
	h->u.data_in.residual = get_be32(in + 44);
}

/* Ready To Transfer (R2T), §11.8 */
static void dec_r2t(const uint8_t *in, struct iscsi_bhs *h)
{
	h->u.r2t.ttt = get_be32(in + 20);
	h->u.r2t.statsn = get_be32(in + 24);
	h->u.r2t.expcmdsn = get_be32(in + 28);
	h->u.r2t.maxcmdsn = get_be32(in + 32);
	h->u.r2t.r2tsn = get_be32(in + 36);
	h->u.r2t.offset = get_be32(in + 40);
	h->u.r2t.length = get_be32(in + 44);
}

/* Asynchronous Message, §11.9 */
static void dec_async(const uint8_t *in, struct iscsi_bhs *h)
{
	h->u.async.statsn = get_be32(in + 24);
	h->u.async.expcmdsn = get_be32(in + 28);
	h->u.async.maxcmdsn = get_be32(in + 32);
	h->u.async.event = in[36];
	h->u.async.vcode = in[37];
	h->u.async.param1 = get_be16(in + 38);
	h->u.async.param2 = get_be16(in + 40);
	h->u.async.param3 = get_be16(in + 42);
}

/* Text Request, §11.10 */
static void dec_text_req(const uint8_t *in, struct iscsi_bhs *h)
{
	h->u.text.cont = in[1] & 0x40;
	h->u.text.ttt = get_be32(in + 20);
	h->u.text.cmdsn = get_be32(in + 24);
	h->u.text.expstatsn = get_be32(in + 28);
}

/* Text Response, §11.11 */
static void dec_text_rsp(const uint8_t *in, struct iscsi_bhs *h)
{
	h->u.text.cont = in[1] & 0x40;
	h->u.text.ttt = get_be32(in + 20);
	h->u.text.statsn = get_be32(in + 24);
	h->u.text.expcmdsn = get_be32(in + 28);
	h->u.text.maxcmdsn = get_be32(in + 32);
}

/* Login Request/Response, the part they share (see enc_login_common). */
static void dec_login_common(const uint8_t *in, struct iscsi_bhs *h)
{
	h->u.login.transit = in[1] & 0x80;
	h->u.login.cont = in[1] & 0x40;
	h->u.login.csg = (in[1] >> 2) & 0x03;
	h->u.login.nsg = in[1] & 0x03;
	h->u.login.version_max = in[2];
	h->u.login.version_min = in[3];
	memcpy(h->u.login.isid, in + 8, 6);
	h->u.login.tsih = get_be16(in + 14);
}

/* Login Request, §11.12 */
static void dec_login_req(const uint8_t *in, struct iscsi_bhs *h)
{
	dec_login_common(in, h);
	h->u.login.cid = get_be16(in + 20);
	h->u.login.cmdsn = get_be32(in + 24);
	h->u.login.expstatsn = get_be32(in + 28);
}

/* Login Response, §11.13 */
static void dec_login_rsp(const uint8_t *in, struct iscsi_bhs *h)
{
	dec_login_common(in, h);
	h->u.login.statsn = get_be32(in + 24);
	h->u.login.expcmdsn = get_be32(in + 28);
	h->u.login.maxcmdsn = get_be32(in + 32);
	h->u.login.status_class = in[36];
	h->u.login.status_detail = in[37];
}

/* Logout Request, §11.14 */
static void dec_logout_req(const uint8_t *in, struct iscsi_bhs *h)
{
	h->u.logout.reason = in[1] & 0x7f;
	h->u.logout.cid = get_be16(in + 20);
	h->u.logout.cmdsn = get_be32(in + 24);
	h->u.logout.expstatsn = get_be32(in + 28);
}

/* Logout Response, §11.15 */
static void dec_logout_rsp(const uint8_t *in, struct iscsi_bhs *h)
{
	h->u.logout.response = in[2];
	h->u.logout.statsn = get_be32(in + 24);
	h->u.logout.expcmdsn = get_be32(in + 28);
	h->u.logout.maxcmdsn = get_be32(in + 32);
	h->u.logout.time2wait = get_be16(in + 40);
	h->u.logout.time2retain = get_be16(in + 42);
}

/* SNACK Request, §11.16 */
static void dec_snack(const uint8_t *in, struct iscsi_bhs *h)
{
	h->u.snack.type = in[1] & 0x0f;
	h->u.snack.ttt = get_be32(in + 20);
	h->u.snack.expstatsn = get_be32(in + 28);
	h->u.snack.begrun = get_be32(in + 40);
	h->u.snack.runlength = get_be32(in + 44);
}

/* Reject, §11.17 */
static void dec_reject(const uint8_t *in, struct iscsi_bhs *h)
{
	h->u.reject.reason = in[2];
	h->u.reject.statsn = get_be32(in + 24);
	h->u.reject.expcmdsn = get_be32(in + 28);
	h->u.reject.maxcmdsn = get_be32(in + 32);
	h->u.reject.datasn = get_be32(in + 36);
}

/* NOP-Out, §11.18 */
static void dec_nop_out(const uint8_t *in, struct iscsi_bhs *h)
{
	h->u.nop.ttt = get_be32(in + 20);
	h->u.nop.cmdsn = get_be32(in + 24);
	h->u.nop.expstatsn = get_be32(in + 28);
}

/* NOP-In, §11.19 */
static void dec_nop_in(const uint8_t *in, struct iscsi_bhs *h)
{
	h->u.nop.ttt = get_be32(in + 20);
	h->u.nop.statsn = get_be32(in + 24);
	h->u.nop.expcmdsn = get_be32(in + 28);
	h->u.nop.maxcmdsn = get_be32(in + 32);
}

/* ---- the opcode table (§11.2.1.2) -------------------------------------- */

#define OPF_I 0x01u     /* byte 0 defines the I bit */
#define OPF_F 0x02u     /* byte 1 bit 7 is a real F bit (else fixed to 1) */
#define OPF_LOGIN 0x04u /* byte 1 bit 7 is T; bytes 8..15 are ISID and TSIH */
#define OPF_LUN 0x08u   /* bytes 8..15 are a LUN (else reserved, or ISID/TSIH) */

struct bhs_op {
	const char *name;  /* for logs; NULL: the opcode is unknown */
	uint8_t flags;     /* OPF_* */
	void (*enc)(const struct iscsi_bhs *h, uint8_t *out);
	void (*dec)(const uint8_t *in, struct iscsi_bhs *h);
};

static const struct bhs_op bhs_ops[64] = {
	/* initiator opcodes */
	[ISCSI_OP_NOP_OUT] = {"NOP-Out", OPF_I | OPF_LUN, enc_nop_out, dec_nop_out},
	[ISCSI_OP_SCSI_CMD] = {"SCSI-Cmd", OPF_I | OPF_F | OPF_LUN, enc_scsi_cmd, dec_scsi_cmd},
	[ISCSI_OP_TASK_MGMT_REQ] = {"Task-Mgmt-Req", OPF_I | OPF_LUN, enc_tmf_req, dec_tmf_req},
	[ISCSI_OP_LOGIN_REQ] = {"Login-Req", OPF_I | OPF_LOGIN, enc_login_req, dec_login_req},
	[ISCSI_OP_TEXT_REQ] = {"Text-Req", OPF_I | OPF_F | OPF_LUN, enc_text_req, dec_text_req},
	[ISCSI_OP_DATA_OUT] = {"Data-Out", OPF_F | OPF_LUN, enc_data_out, dec_data_out},
	[ISCSI_OP_LOGOUT_REQ] = {"Logout-Req", OPF_I, enc_logout_req, dec_logout_req},
	[ISCSI_OP_SNACK_REQ] = {"SNACK-Req", OPF_LUN, enc_snack, dec_snack},
	/* target opcodes */
	[ISCSI_OP_NOP_IN] = {"NOP-In", OPF_LUN, enc_nop_in, dec_nop_in},
	[ISCSI_OP_SCSI_RSP] = {"SCSI-Rsp", 0, enc_scsi_rsp, dec_scsi_rsp},
	[ISCSI_OP_TASK_MGMT_RSP] = {"Task-Mgmt-Rsp", 0, enc_tmf_rsp, dec_tmf_rsp},
	[ISCSI_OP_LOGIN_RSP] = {"Login-Rsp", OPF_LOGIN, enc_login_rsp, dec_login_rsp},
	[ISCSI_OP_TEXT_RSP] = {"Text-Rsp", OPF_F | OPF_LUN, enc_text_rsp, dec_text_rsp},
	[ISCSI_OP_DATA_IN] = {"Data-In", OPF_F | OPF_LUN, enc_data_in, dec_data_in},
	[ISCSI_OP_LOGOUT_RSP] = {"Logout-Rsp", 0, enc_logout_rsp, dec_logout_rsp},
	[ISCSI_OP_R2T] = {"R2T", OPF_LUN, enc_r2t, dec_r2t},
	[ISCSI_OP_ASYNC_MSG] = {"Async-Msg", OPF_LUN, enc_async, dec_async},
	[ISCSI_OP_REJECT] = {"Reject", 0, enc_reject, dec_reject},
};

/* The table entry of opcode `op`, or NULL when `op` is not one we know. */
static const struct bhs_op *bhs_op(uint8_t op)
{
	if (op >= sizeof(bhs_ops) / sizeof(bhs_ops[0]) || !bhs_ops[op].name)
		return NULL;
	return &bhs_ops[op];
}

/* ---- encode / decode --------------------------------------------------- */

int iscsi_bhs_encode(const struct iscsi_bhs *h, uint8_t out[ISCSI_BHS_LEN])
{
	const struct bhs_op *d = bhs_op(h->opcode);

	if (!d || h->dlen > 0xffffffu)
		return -EINVAL;

	memset(out, 0, ISCSI_BHS_LEN);

	/* common fields; enc_login_req sets the Login Request's fixed I bit */
	out[0] = h->opcode;
	if ((d->flags & OPF_I) && h->immediate)
		out[0] |= BHS_I_BIT;
	if (d->flags & OPF_LOGIN)
		; /* bit 7 is T, set by the opcode's encoder */
	else if (d->flags & OPF_F)
		out[1] = h->final ? BHS_F_BIT : 0;
	else
		out[1] = BHS_F_BIT; /* fixed to 1 */
	out[4] = h->ahs_len;
	put_be24(out + 5, h->dlen);
	if (d->flags & OPF_LUN)
		put_be64(out + 8, h->lun);
	put_be32(out + 16, h->itt);

	d->enc(h, out);
	return 0;
}

int iscsi_bhs_decode(const uint8_t in[ISCSI_BHS_LEN], struct iscsi_bhs *h)
{
	const uint8_t op = in[0] & 0x3f;
	const struct bhs_op *d = bhs_op(op);

	memset(h, 0, sizeof(*h));
	if (!d)
		return -EPROTO;

	/* common fields */
	h->opcode = op;
	h->immediate = (d->flags & OPF_I) && (in[0] & BHS_I_BIT);
	h->final = !(d->flags & OPF_LOGIN) && (in[1] & BHS_F_BIT);
	h->ahs_len = in[4];
	h->dlen = get_be24(in + 5);
	if (d->flags & (OPF_LUN | OPF_LOGIN))
		h->lun = get_be64(in + 8);
	h->itt = get_be32(in + 16);

	d->dec(in, h);
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
	const struct bhs_op *d = bhs_op(opcode);

	return d ? d->name : "unknown";
}
