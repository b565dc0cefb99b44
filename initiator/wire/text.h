/* SPDX-License-Identifier: MIT */
/*
 * Text keys and operational parameter negotiation (RFC 7143 §6, §13).
 *
 * A text data segment is a sequence of "key=value\0" entries.  This module
 * builds our offers, parses what the target sends (accumulated across
 * PDUs with the C bit by the caller), applies the negotiation rule of each
 * key (list, min, max, AND, OR, declarative) and produces the answers we
 * owe for keys the target offered first.  Pure: no I/O, no allocation.
 */
#ifndef ISERFUSE_TEXT_H
#define ISERFUSE_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ISCSI_TEXT_KEY_MAX 63      /* §6.1: key names are at most 63 bytes */
#define ISCSI_TEXT_VALUE_MAX 8192  /* longest value we accept (§6.1 limits to 8192) */
#define ISCSI_TEXT_MAX_KEYS 512    /* most key=value pairs in one negotiation */

/* How a digest key is offered when CRC32C is wanted (RFC 7143 §13.1). */
enum iscsi_digest_pref {
	ISCSI_DIGEST_PREFER_CRC32C = 0, /* "CRC32C,None" */
	ISCSI_DIGEST_PREFER_NONE,       /* "None,CRC32C" */
	ISCSI_DIGEST_REQUIRE_CRC32C,    /* "CRC32C" alone: iscsi_neg_unmet() reports a refusal */
};

/* What the initiator wants to offer (our side of each key). */
struct iscsi_neg_config {
	bool header_digest_crc32c;   /* offer CRC32C (as the pref below says) instead of "None" */
	bool data_digest_crc32c;
	enum iscsi_digest_pref header_digest_pref, data_digest_pref; /* used when the bool is set */
	uint32_t max_recv_dsl;       /* our MaxRecvDataSegmentLength, bytes (512..2^24-1) */
	uint32_t max_burst;          /* MaxBurstLength offer, bytes */
	uint32_t first_burst;        /* FirstBurstLength offer, bytes */
	bool immediate_data;         /* ImmediateData offer */
	bool initial_r2t;            /* InitialR2T offer */
	uint32_t max_outstanding_r2t;
	uint32_t default_time2wait, default_time2retain; /* seconds */
	/*
	 * iSER (RFC 7145 §6.3): offer RDMAExtensions=Yes and declare
	 * InitiatorRecvDataSegmentLength (bytes we take in one SEND),
	 * TargetRecvDataSegmentLength (our offer for the most we send) and
	 * MaxOutstandingUnexpectedPDUs (unsolicited PDUs we can hold; 0 =
	 * unlimited).  Off: none of these keys is sent.
	 */
	bool rdma_extensions;
	uint32_t iser_initiator_recv_dsl, iser_target_recv_dsl, iser_max_unexpected;
};

/* Defaults we offer: MaxRecvDSL 256 KiB, MaxBurst 16 MiB, FirstBurst 256 KiB,
 * ImmediateData=Yes, InitialR2T=No, MaxOutstandingR2T=1, Time2Wait 2, Time2Retain 0. */
void iscsi_neg_config_default(struct iscsi_neg_config *cfg);

/*
 * Set how one digest key is offered (RFC 7143 §13.1) from a user's word:
 * "none" (offer None), "crc32c" (CRC32C alone, the login fails without
 * it), "auto" or "crc32c-none" (CRC32C,None), "none-crc32c" (None,CRC32C);
 * the last four are libiscsi's URL values.  Case-insensitive.  `data`
 * picks DataDigest, else HeaderDigest.  Returns 0, or -EINVAL for any
 * other word (cfg unchanged).
 */
int iscsi_neg_set_digest(struct iscsi_neg_config *cfg, bool data, const char *word);

/* Negotiated result, valid for the full feature phase. */
struct iscsi_params {
	bool header_digest, data_digest;  /* true = CRC32C */
	uint32_t max_recv_dsl;        /* what the target may send us, bytes (our declaration) */
	uint32_t max_xmit_dsl;        /* target's MaxRecvDataSegmentLength: most we may send, bytes */
	uint32_t max_burst, first_burst; /* bytes */
	bool immediate_data, initial_r2t;
	uint32_t max_outstanding_r2t;
	bool data_pdu_in_order, data_seq_in_order;
	uint32_t default_time2wait, default_time2retain; /* seconds */
	uint32_t erl, max_connections;
	uint16_t target_portal_group_tag;
	char target_alias[256];
	/* RDMAExtensions=Yes agreed: max_recv_dsl and max_xmit_dsl then hold
	 * InitiatorRecvDataSegmentLength and TargetRecvDataSegmentLength. */
	bool rdma_extensions;
	uint32_t max_unexpected;      /* the target's MaxOutstandingUnexpectedPDUs (0 = unlimited) */
};

/* RFC 7143 defaults for every key (§13), used before/without negotiation. */
void iscsi_params_rfc_defaults(struct iscsi_params *p);

/* Appends "key=value\0" to buf (capacity cap, used *len bytes). Returns 0 or -ENOSPC. */
int iscsi_text_add(char *buf, size_t cap, size_t *len, const char *key, const char *value);

/*
 * Build every operational key the initiator offers (RFC 7143 §13.2-13.17:
 * HeaderDigest, DataDigest, MaxRecvDataSegmentLength, MaxBurstLength,
 * FirstBurstLength, ImmediateData, InitialR2T, MaxOutstandingR2T,
 * DataPDUInOrder=Yes, DataSequenceInOrder=Yes, DefaultTime2Wait,
 * DefaultTime2Retain, ErrorRecoveryLevel=0, MaxConnections=1).  Appended
 * to buf as in iscsi_text_add.  Returns 0 or -ENOSPC.
 */
int iscsi_neg_build_offer(const struct iscsi_neg_config *cfg, char *buf, size_t cap, size_t *len);

/*
 * Split a text data segment (`len` bytes) into pairs and call
 * cb(arg, key, value) for each (both NUL-terminated, within `data`, which is
 * modified in place: '=' becomes NUL).  A trailing entry without its NUL
 * terminator, a key without '=', an empty or over-long key
 * (> ISCSI_TEXT_KEY_MAX) or value (> ISCSI_TEXT_VALUE_MAX), or more than
 * ISCSI_TEXT_MAX_KEYS pairs is -EPROTO.  A non-zero return of cb stops and
 * is returned.  Padding NULs at the end are ignored.
 */
int iscsi_text_parse(char *data, size_t len, int (*cb)(void *arg, const char *key, const char *value), void *arg);

/* State across one negotiation (one login's operational stage). */
struct iscsi_neg {
	struct iscsi_neg_config cfg;
	struct iscsi_params params;   /* result so far: starts as RFC defaults */
	uint32_t offered;             /* bitmask of keys we offered (internal) */
	uint32_t answered;            /* bitmask of offered keys the target answered (internal) */
	uint32_t iser_irdsl, iser_trdsl; /* iSER lengths answered, 0 = not yet (internal) */
};

void iscsi_neg_init(struct iscsi_neg *n, const struct iscsi_neg_config *cfg);

/*
 * Apply one key=value received from the target (RFC 7143 §6.2, §13).
 *  - An answer to a key we offered: checked against our offer (a value out
 *    of the allowed result, e.g. a MaxBurstLength above ours or a digest we
 *    did not list, is -EPROTO); "Reject", "Irrelevant" and "NotUnderstood"
 *    keep the default.
 *  - A key the target offers first (or a declarative one such as its
 *    MaxRecvDataSegmentLength, TargetAlias, TargetPortalGroupTag): the
 *    result is computed by the key's rule and, when an answer is owed, the
 *    answer "key=value\0" is appended to reply (cap, *reply_len).  Unknown
 *    keys are answered NotUnderstood; X- and X# keys too.
 *  - Keys only meaningful in the security stage or login (TargetAddress,
 *    TargetName, AuthMethod, TSIH-related) are ignored here (return 0).
 * Returns 0, -EPROTO (malformed/illegal value), or -ENOSPC (reply full).
 */
int iscsi_neg_apply(struct iscsi_neg *n, const char *key, const char *value,
		    char *reply, size_t cap, size_t *reply_len);

/*
 * Finish: keys we offered that the target never answered keep their RFC
 * defaults; checks FirstBurstLength <= MaxBurstLength (clamps it).
 * Copies the result to *out.
 */
void iscsi_neg_finish(struct iscsi_neg *n, struct iscsi_params *out);

/*
 * After iscsi_neg_finish: does the result meet what cfg requires?  A digest
 * offered with ISCSI_DIGEST_REQUIRE_CRC32C must have come out CRC32C
 * (a target that answers None, Reject, or never answers, refuses it).
 * Returns 0, or -ENOTSUP with the first unmet key's name ("HeaderDigest"
 * or "DataDigest", a static string) in *key when key is not NULL.
 */
int iscsi_neg_unmet(const struct iscsi_neg_config *cfg, const struct iscsi_params *p, const char **key);

#endif
