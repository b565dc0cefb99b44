/* SPDX-License-Identifier: MIT */
/*
 * iSCSI PDU codec: the 48-byte Basic Header Segment (BHS) of every opcode
 * the initiator sends or receives, AHS walking and data segment padding
 * (RFC 7143 §11).  Pure functions with no I/O, no allocation and no global
 * state, so they can be fuzzed and unit tested on their own.
 *
 * All multi-byte fields are big endian on the wire and host order in the
 * decoded structures below.  Sequence numbers, ITT and TTT are 32 bits.
 */
#ifndef ISERFUSE_PDU_H
#define ISERFUSE_PDU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ISCSI_BHS_LEN 48u
#define ISCSI_DIGEST_LEN 4u
#define ISCSI_RESERVED_TAG 0xffffffffu

/* RFC 7143 §11.2.1.2 */
enum iscsi_opcode {
	/* initiator opcodes */
	ISCSI_OP_NOP_OUT = 0x00,
	ISCSI_OP_SCSI_CMD = 0x01,
	ISCSI_OP_TASK_MGMT_REQ = 0x02,
	ISCSI_OP_LOGIN_REQ = 0x03,
	ISCSI_OP_TEXT_REQ = 0x04,
	ISCSI_OP_DATA_OUT = 0x05,
	ISCSI_OP_LOGOUT_REQ = 0x06,
	ISCSI_OP_SNACK_REQ = 0x10,
	/* target opcodes */
	ISCSI_OP_NOP_IN = 0x20,
	ISCSI_OP_SCSI_RSP = 0x21,
	ISCSI_OP_TASK_MGMT_RSP = 0x22,
	ISCSI_OP_LOGIN_RSP = 0x23,
	ISCSI_OP_TEXT_RSP = 0x24,
	ISCSI_OP_DATA_IN = 0x25,
	ISCSI_OP_LOGOUT_RSP = 0x26,
	ISCSI_OP_R2T = 0x31,
	ISCSI_OP_ASYNC_MSG = 0x32,
	ISCSI_OP_REJECT = 0x3f,
};

/* SCSI Command attributes (RFC 7143 §11.3.1, byte 1 bits 0-2) */
enum iscsi_task_attr {
	ISCSI_ATTR_UNTAGGED = 0,
	ISCSI_ATTR_SIMPLE = 1,
	ISCSI_ATTR_ORDERED = 2,
	ISCSI_ATTR_HEAD_OF_QUEUE = 3,
	ISCSI_ATTR_ACA = 4,
};

/* Login stages (RFC 7143 §11.12.3) */
enum iscsi_login_stage {
	ISCSI_STAGE_SECURITY = 0,
	ISCSI_STAGE_OPERATIONAL = 1,
	ISCSI_STAGE_FULL_FEATURE = 3,
};

/* Task management functions (RFC 7143 §11.5.1) */
enum iscsi_tmf {
	ISCSI_TMF_ABORT_TASK = 1,
	ISCSI_TMF_ABORT_TASK_SET = 2,
	ISCSI_TMF_CLEAR_ACA = 3,
	ISCSI_TMF_CLEAR_TASK_SET = 4,
	ISCSI_TMF_LUN_RESET = 5,
	ISCSI_TMF_TARGET_WARM_RESET = 6,
	ISCSI_TMF_TARGET_COLD_RESET = 7,
	ISCSI_TMF_TASK_REASSIGN = 8,
};

/*
 * Decoded BHS.  `opcode` selects which member of the union is valid.  The
 * common fields are filled for every opcode; fields an opcode does not have
 * are zero after decode and ignored by encode.
 */
struct iscsi_bhs {
	uint8_t opcode;        /* enum iscsi_opcode, without the I bit */
	bool immediate;        /* I bit (byte 0 bit 6), initiator opcodes only */
	bool final;            /* F bit (byte 1 bit 7) */
	uint8_t ahs_len;       /* TotalAHSLength, in 4-byte words */
	uint32_t dlen;         /* DataSegmentLength in bytes (24 bits) */
	uint64_t lun;          /* bytes 8..15 as a big-endian u64 (LUN field) */
	uint32_t itt;          /* Initiator Task Tag (bytes 16..19) */
	union {
		struct { /* ISCSI_OP_SCSI_CMD, §11.3 */
			bool read, write;
			uint8_t attr;          /* enum iscsi_task_attr */
			uint32_t edtl;         /* Expected Data Transfer Length, bytes */
			uint32_t cmdsn, expstatsn;
			uint8_t cdb[16];
		} cmd;
		struct { /* ISCSI_OP_SCSI_RSP, §11.4 */
			bool bidi_overflow, bidi_underflow, overflow, underflow; /* o u O U */
			uint8_t response, status;
			uint32_t snack_tag, statsn, expcmdsn, maxcmdsn;
			uint32_t expdatasn, bidi_residual, residual;
		} rsp;
		struct { /* ISCSI_OP_TASK_MGMT_REQ, §11.5 */
			uint8_t function;      /* enum iscsi_tmf */
			uint32_t rtt, cmdsn, expstatsn, refcmdsn, expdatasn;
		} tmf_req;
		struct { /* ISCSI_OP_TASK_MGMT_RSP, §11.6 */
			uint8_t response;
			uint32_t statsn, expcmdsn, maxcmdsn;
		} tmf_rsp;
		struct { /* ISCSI_OP_DATA_OUT, §11.7.1 */
			uint32_t ttt, expstatsn, datasn, offset;
		} data_out;
		struct { /* ISCSI_OP_DATA_IN, §11.7.2 */
			bool ack, overflow, underflow, status_present; /* A O U S */
			uint8_t status;
			uint32_t ttt, statsn, expcmdsn, maxcmdsn, datasn, offset, residual;
		} data_in;
		struct { /* ISCSI_OP_R2T, §11.8 */
			uint32_t ttt, statsn, expcmdsn, maxcmdsn, r2tsn, offset, length;
		} r2t;
		struct { /* ISCSI_OP_ASYNC_MSG, §11.9 */
			uint32_t statsn, expcmdsn, maxcmdsn;
			uint8_t event, vcode;
			uint16_t param1, param2, param3;
		} async;
		struct { /* ISCSI_OP_TEXT_REQ / ISCSI_OP_TEXT_RSP, §11.10-11 */
			bool cont;             /* C bit */
			uint32_t ttt, cmdsn, expstatsn;   /* request */
			uint32_t statsn, expcmdsn, maxcmdsn; /* response */
		} text;
		struct { /* ISCSI_OP_LOGIN_REQ / ISCSI_OP_LOGIN_RSP, §11.12-13 */
			bool transit, cont;    /* T and C bits */
			uint8_t csg, nsg;      /* enum iscsi_login_stage */
			uint8_t version_max, version_min; /* req: max/min; rsp: max/active */
			uint8_t isid[6];
			uint16_t tsih;
			uint16_t cid;          /* request */
			uint32_t cmdsn, expstatsn;      /* request */
			uint32_t statsn, expcmdsn, maxcmdsn; /* response */
			uint8_t status_class, status_detail; /* response */
		} login;
		struct { /* ISCSI_OP_LOGOUT_REQ / ISCSI_OP_LOGOUT_RSP, §11.14-15 */
			uint8_t reason;        /* request: reason code */
			uint16_t cid;          /* request */
			uint32_t cmdsn, expstatsn;      /* request */
			uint8_t response;      /* response */
			uint32_t statsn, expcmdsn, maxcmdsn; /* response */
			uint16_t time2wait, time2retain;     /* response */
		} logout;
		struct { /* ISCSI_OP_NOP_OUT / ISCSI_OP_NOP_IN, §11.18-19 */
			uint32_t ttt;
			uint32_t cmdsn, expstatsn;      /* NOP-Out */
			uint32_t statsn, expcmdsn, maxcmdsn; /* NOP-In */
		} nop;
		struct { /* ISCSI_OP_REJECT, §11.17 */
			uint8_t reason;
			uint32_t statsn, expcmdsn, maxcmdsn, datasn;
		} reject;
		struct { /* ISCSI_OP_SNACK_REQ, §11.16 */
			uint8_t type;
			uint32_t ttt, expstatsn, begrun, runlength;
		} snack;
	} u;
};

/*
 * Encode `h` into the 48-byte wire form `out` (RFC 7143 §11).  Reserved
 * fields are written as zero.  Returns 0, or -EINVAL for an unknown opcode
 * or a dlen that does not fit 24 bits.
 */
int iscsi_bhs_encode(const struct iscsi_bhs *h, uint8_t out[ISCSI_BHS_LEN]);

/*
 * Decode the 48-byte wire form `in` into `h` (every field of `h` is
 * overwritten).  Returns 0, or -EPROTO for an opcode an initiator must
 * not receive or does not know.  Decoding does not validate lengths against
 * negotiated limits: the caller does.
 */
int iscsi_bhs_decode(const uint8_t in[ISCSI_BHS_LEN], struct iscsi_bhs *h);

/* Peek helpers on the wire form, no validation. */
static inline uint8_t iscsi_wire_opcode(const uint8_t *bhs) { return bhs[0] & 0x3f; }
static inline uint32_t iscsi_wire_dlen(const uint8_t *bhs)
{
	return ((uint32_t)bhs[5] << 16) | ((uint32_t)bhs[6] << 8) | bhs[7];
}
static inline uint32_t iscsi_wire_ahs_bytes(const uint8_t *bhs) { return (uint32_t)bhs[4] * 4u; }
static inline uint32_t iscsi_wire_itt(const uint8_t *bhs)
{
	return ((uint32_t)bhs[16] << 24) | ((uint32_t)bhs[17] << 16) | ((uint32_t)bhs[18] << 8) | bhs[19];
}

/* Bytes of padding after a data segment of `len` bytes (0..3), §11.1. */
static inline uint32_t iscsi_pad_len(uint32_t len) { return (4u - (len & 3u)) & 3u; }

/* AHS types (§11.2.2) */
enum iscsi_ahs_type {
	ISCSI_AHS_EXTENDED_CDB = 1,
	ISCSI_AHS_BIDI_READ_LEN = 2,
};

/*
 * Walk an AHS area of `len` bytes (TotalAHSLength * 4).  For each AHS calls
 * cb(arg, type, value, value_len) where value_len is AHSLength (bytes, no
 * padding); a non-zero return from cb stops the walk and is returned.
 * Returns 0 when the area is consumed exactly, or -EPROTO when an AHS
 * length runs past the area (§11.2.2).
 */
int iscsi_ahs_walk(const uint8_t *ahs, size_t len,
		   int (*cb)(void *arg, uint8_t type, const uint8_t *value, size_t value_len),
		   void *arg);

/*
 * Encode one AHS of `type` with `value_len` bytes of value into `out`
 * (capacity `cap` bytes), padded to a 4-byte boundary.  Returns the bytes
 * written, or -ENOSPC / -EINVAL (value_len > 65535).
 */
int iscsi_ahs_encode(uint8_t type, const uint8_t *value, size_t value_len,
		     uint8_t *out, size_t cap);

/* Name of an opcode for logs ("SCSI-Cmd", "Data-In", ...); never NULL. */
const char *iscsi_opcode_name(uint8_t opcode);

/* Serial number arithmetic (RFC 1982, as RFC 7143 §4.2.2.1 requires). */
static inline bool iscsi_sn_lt(uint32_t a, uint32_t b) { return a != b && (int32_t)(a - b) < 0; }
static inline bool iscsi_sn_le(uint32_t a, uint32_t b) { return (int32_t)(a - b) <= 0; }

#endif
