/* SPDX-License-Identifier: MIT */
/*
 * initiator/scsi/alua.c: ALUA state names and ranks, REPORT TARGET PORT GROUPS
 * data in both formats (and hostile variants of it), the port designators
 * of VPD 0x83 as LIO sends them, sense classes, the TPGS bits, the CDB.
 * Hostile inputs are copied into heap buffers of exactly their length, so
 * a read past len is an AddressSanitizer report in an ASan build.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "initiator/scsi/alua.h"

/* A heap copy of n bytes (n may be 0): reading past it is caught by ASan. */
static uint8_t *dup_exact(const uint8_t *src, size_t n)
{
	uint8_t *p = malloc(n ? n : 1);
	cr_assert_not_null(p);
	if (n)
		memcpy(p, src, n);
	return p;
}

static int parse_exact(const uint8_t *src, size_t n, struct alua_tpg *out, size_t max, size_t *count, uint8_t *itt)
{
	uint8_t *p = dup_exact(src, n);
	int rc = alua_parse_rtpg(p, n, out, max, count, itt);
	free(p);
	return rc;
}

Test(alua, state_names)
{
	cr_assert_str_eq(alua_state_name(ALUA_ACTIVE_OPTIMIZED), "active/optimized");
	cr_assert_str_eq(alua_state_name(ALUA_ACTIVE_NON_OPTIMIZED), "active/non-optimized");
	cr_assert_str_eq(alua_state_name(ALUA_STANDBY), "standby");
	cr_assert_str_eq(alua_state_name(ALUA_UNAVAILABLE), "unavailable");
	cr_assert_str_eq(alua_state_name(ALUA_LBA_DEPENDENT), "lba-dependent");
	cr_assert_str_eq(alua_state_name(ALUA_OFFLINE), "offline");
	cr_assert_str_eq(alua_state_name(ALUA_TRANSITIONING), "transitioning");
	cr_assert_str_eq(alua_state_name(ALUA_NONE), "none");
	cr_assert_str_eq(alua_state_name(5), "reserved");
	cr_assert_str_eq(alua_state_name(0xd), "reserved");
	cr_assert_str_eq(alua_state_name(-1), "reserved");
}

Test(alua, usable_and_rank)
{
	static const struct {
		int state;
		bool usable;
		int rank;
	} t[] = {
		{ALUA_ACTIVE_OPTIMIZED, true, 0},  {ALUA_NONE, true, 0},        {ALUA_ACTIVE_NON_OPTIMIZED, true, 1},
		{ALUA_LBA_DEPENDENT, true, 1},     {ALUA_STANDBY, false, 9},    {ALUA_UNAVAILABLE, false, 9},
		{ALUA_OFFLINE, false, 9},          {ALUA_TRANSITIONING, false, 9}, {7, false, 9},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		cr_assert_eq(alua_state_usable(t[i].state), t[i].usable, "state %d", t[i].state);
		cr_assert_eq(alua_state_rank(t[i].state), t[i].rank, "state %d", t[i].state);
	}
}

Test(alua, cdb_report_tpgs)
{
	uint8_t cdb[SCSI_CDB_MAX];
	memset(cdb, 0xee, sizeof(cdb));
	cr_assert_eq(scsi_cdb_report_tpgs(cdb, 0x01020304), 12);
	static const uint8_t want[SCSI_CDB_MAX] = {0xa3, 0x2a, 0, 0, 0, 0, 0x01, 0x02, 0x03, 0x04, 0, 0, 0, 0, 0, 0};
	cr_assert_arr_eq(cdb, want, sizeof(want));
	scsi_cdb_report_tpgs(cdb, 4096);
	cr_assert_eq(cdb[8], 0x10);
	cr_assert_eq(cdb[9], 0x00);
}

/*
 * Two TPGs as LIO answers with the extended header: TPG 1 active/optimized
 * and preferred, port 1; TPG 2 standby, ports 2 and 3; implicit transition
 * time 10 s.
 */
static const uint8_t rtpg_ext[] = {
	0x00, 0x00, 0x00, 0x20,                 /* RETURN DATA LENGTH 32: bytes 4-7, then 12 + 16 */
	0x10, 0x0a, 0x00, 0x00,                 /* FORMAT TYPE 001b, IMPLICIT TRANSITION TIME 10 */
	0x80, 0x8f, 0x00, 0x01, 0x00, 0x02, 0x00, 0x01, /* PREF, AO; T|U|S|AN|AO; TPG 1; status 2; 1 port */
	0x00, 0x00, 0x00, 0x01,                 /* relative target port 1 */
	0x02, 0x0f, 0x00, 0x02, 0x00, 0x00, 0x00, 0x02, /* standby; U|S|AN|AO; TPG 2; 2 ports */
	0x00, 0x00, 0x00, 0x02,
	0x00, 0x00, 0x00, 0x03,
};

Test(alua, rtpg_extended_two_tpgs)
{
	struct alua_tpg t[4];
	size_t n = 99;
	uint8_t itt = 0xff;
	cr_assert_eq(parse_exact(rtpg_ext, sizeof(rtpg_ext), t, 4, &n, &itt), 0);
	cr_assert_eq(n, 2);
	cr_assert_eq(itt, 10);
	cr_assert_eq(t[0].tpg, 1);
	cr_assert_eq(t[0].state, ALUA_ACTIVE_OPTIMIZED);
	cr_assert(t[0].pref);
	cr_assert_eq(t[0].supported, ALUA_SUP_T | ALUA_SUP_U | ALUA_SUP_S | ALUA_SUP_AN | ALUA_SUP_AO);
	cr_assert_eq(t[0].status_code, 2);
	cr_assert_eq(t[0].nports, 1);
	cr_assert_eq(t[0].ports[0], 1);
	cr_assert_eq(t[1].tpg, 2);
	cr_assert_eq(t[1].state, ALUA_STANDBY);
	cr_assert(!t[1].pref);
	cr_assert_eq(t[1].supported, 0x0f);
	cr_assert_eq(t[1].status_code, 0);
	cr_assert_eq(t[1].nports, 2);
	cr_assert_eq(t[1].ports[0], 2);
	cr_assert_eq(t[1].ports[1], 3);
	/* max 1: the first only; a NULL time pointer is fine */
	cr_assert_eq(parse_exact(rtpg_ext, sizeof(rtpg_ext), t, 1, &n, NULL), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(t[0].tpg, 1);
}

Test(alua, rtpg_length_only_format)
{
	/* The same two TPGs, header 000b: RETURN DATA LENGTH 28 is the descriptors only */
	uint8_t b[4 + 28];
	memcpy(b, rtpg_ext, 4);
	b[3] = 28;
	memcpy(b + 4, rtpg_ext + 8, 28);
	b[4] = 0x01;          /* TPG 1 active/non-optimized, not preferred */
	b[16] = 0x0e;         /* TPG 2 offline */
	struct alua_tpg t[4];
	size_t n = 0;
	uint8_t itt = 0xff;
	cr_assert_eq(parse_exact(b, sizeof(b), t, 4, &n, &itt), 0);
	cr_assert_eq(n, 2);
	cr_assert_eq(itt, 0);
	cr_assert_eq(t[0].tpg, 1);
	cr_assert_eq(t[0].state, ALUA_ACTIVE_NON_OPTIMIZED);
	cr_assert(!t[0].pref);
	cr_assert_eq(t[0].ports[0], 1);
	cr_assert_eq(t[1].tpg, 2);
	cr_assert_eq(t[1].state, ALUA_OFFLINE);
	cr_assert_eq(t[1].nports, 2);
	cr_assert_eq(t[1].ports[1], 3);
}

Test(alua, rtpg_empty_lists)
{
	static const uint8_t none0[] = {0, 0, 0, 0};
	static const uint8_t none1[] = {0, 0, 0, 4, 0x10, 0x3c, 0, 0};
	struct alua_tpg t[1];
	size_t n = 9;
	uint8_t itt = 0;
	cr_assert_eq(parse_exact(none0, sizeof(none0), t, 1, &n, &itt), 0);
	cr_assert_eq(n, 0);
	cr_assert_eq(parse_exact(none1, sizeof(none1), t, 1, &n, &itt), 0);
	cr_assert_eq(n, 0);
	cr_assert_eq(itt, 60);
}

Test(alua, rtpg_cut_by_allocation_length)
{
	struct alua_tpg t[4];
	size_t n = 9;
	/* every prefix: never an error, only whole descriptors, never a read past len */
	for (size_t len = 4; len < sizeof(rtpg_ext); len++) {
		int rc = parse_exact(rtpg_ext, len, t, 4, &n, NULL);
		cr_assert_eq(rc, 0, "len %zu", len);
		cr_assert_eq(n, len < 20 ? 0u : 1u, "len %zu", len);
	}
	/* fewer than 4 bytes: no header */
	for (size_t len = 0; len < 4; len++)
		cr_assert_eq(parse_exact(rtpg_ext, len, t, 4, &n, NULL), -EPROTO, "len %zu", len);
	cr_assert_eq(n, 0);
	cr_assert_eq(alua_parse_rtpg(NULL, 64, t, 4, &n, NULL), -EPROTO);
	cr_assert_eq(alua_parse_rtpg(rtpg_ext, sizeof(rtpg_ext), t, 4, NULL, NULL), -EPROTO);
}

Test(alua, rtpg_descriptor_past_the_data)
{
	uint8_t b[sizeof(rtpg_ext)];
	struct alua_tpg t[4];
	size_t n = 9;
	/* TPG 2 claims 4 ports; RETURN DATA LENGTH ends after 2 (3 would end within the 4 bytes LIO leaves out) */
	memcpy(b, rtpg_ext, sizeof(b));
	b[27] = 4;
	cr_assert_eq(parse_exact(b, sizeof(b), t, 4, &n, NULL), -EPROTO);
	cr_assert_eq(n, 0);
	/* RETURN DATA LENGTH 5 bytes short of the last port descriptor (up to 4 is LIO's way, see below) */
	memcpy(b, rtpg_ext, sizeof(b));
	b[3] = 0x20 - 5;
	cr_assert_eq(parse_exact(b, sizeof(b), t, 4, &n, NULL), -EPROTO);
	/* a stray tail shorter than a descriptor header */
	memcpy(b, rtpg_ext, sizeof(b));
	b[3] = 0x20 - 16 + 4;  /* TPG 1, then 4 bytes */
	cr_assert_eq(parse_exact(b, sizeof(b), t, 4, &n, NULL), -EPROTO);
	/* extended header whose RETURN DATA LENGTH does not even cover it */
	static const uint8_t short_ext[] = {0, 0, 0, 2, 0x10, 0x05, 0, 0};
	cr_assert_eq(parse_exact(short_ext, sizeof(short_ext), t, 4, &n, NULL), -EPROTO);
}

Test(alua, rtpg_overlong_length_and_port_clamp)
{
	/* RETURN DATA LENGTH 0xffffffff, one descriptor with 255 ports of which 20 came */
	uint8_t b[8 + 8 + 4 * 20];
	memset(b, 0, sizeof(b));
	memset(b, 0xff, 4);
	b[4] = 0x10;
	b[8] = 0x01;
	b[10] = 0x12;
	b[11] = 0x34;
	b[15] = 255;
	for (int i = 0; i < 20; i++)
		b[16 + 4 * i + 3] = (uint8_t)(100 + i);
	struct alua_tpg t[2];
	size_t n = 9;
	/* the descriptor (8 + 1020 bytes) does not fit in what came: cut short, nothing decoded */
	cr_assert_eq(parse_exact(b, sizeof(b), t, 2, &n, NULL), 0);
	cr_assert_eq(n, 0);
	/* 20 ports announced and present: nports 20, the first 16 kept */
	b[15] = 20;
	b[0] = b[1] = b[2] = 0;
	b[3] = (uint8_t)(sizeof(b) - 4);
	cr_assert_eq(parse_exact(b, sizeof(b), t, 2, &n, NULL), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(t[0].tpg, 0x1234);
	cr_assert_eq(t[0].nports, 20);
	cr_assert_eq(t[0].ports[0], 100);
	cr_assert_eq(t[0].ports[15], 115);
}

Test(alua, rtpg_garbage_never_reads_past_len)
{
	/* random data with random lengths: 0 or -EPROTO, counts within bounds (ASan watches the reads) */
	uint32_t x = 20261201;
	struct alua_tpg t[8];
	for (int round = 0; round < 20000; round++) {
		uint8_t b[96];
		for (size_t i = 0; i < sizeof(b); i++) {
			x = x * 1103515245u + 12345u;
			b[i] = (uint8_t)(x >> 16);
		}
		size_t len = (x >> 8) % sizeof(b);
		if (round % 3 == 0 && len >= 4) {
			/* a plausible RETURN DATA LENGTH, so the walk goes somewhere */
			b[0] = b[1] = b[2] = 0;
			b[3] = (uint8_t)(len - 4 + (round % 7) - 3);
			b[7] = b[7] % 4;
		}
		size_t n = 99;
		uint8_t itt;
		int rc = parse_exact(b, len, t, 8, &n, &itt);
		cr_assert(rc == 0 || rc == -EPROTO);
		cr_assert(n <= 8 && n <= len / 8);
		for (size_t i = 0; i < n; i++)
			cr_assert(t[i].state <= 0x0f);
	}
}

/*
 * VPD 0x83 as LIO (target_core_spc.c) sends it for an iSCSI LUN: NAA
 * IEEE registered extended, T10 vendor id, relative target port (iSCSI
 * protocol id 5, PIV, association 1, type 4) = 2, target port group
 * (association 1, type 5) = 3, LU group (association 0, type 6), the
 * target port's SCSI name string and the target device's.
 */
static const uint8_t lio_vpd83[] = {
	0x00, 0x83, 0x00, 0x8c,
	0x01, 0x03, 0x00, 0x10,
	0x60, 0x01, 0x40, 0x5a, 0xbc, 0xde, 0xf0, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x12,
	0x02, 0x01, 0x00, 0x18,
	'L', 'I', 'O', '-', 'O', 'R', 'G', ' ', 'd', 'i', 's', 'k', '0', ':', 'a', 'b',
	'c', 'd', 'e', 'f', '0', '1', '2', '3',
	0x51, 0x94, 0x00, 0x04, 0x00, 0x00, 0x00, 0x02,
	0x51, 0x95, 0x00, 0x04, 0x00, 0x00, 0x00, 0x03,
	0x01, 0x06, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00,
	0x53, 0x98, 0x00, 0x20,
	'i', 'q', 'n', '.', '2', '0', '2', '6', '-', '1', '1', '.', 'o', 'r', 'g', ':',
	'x', ',', 't', ',', '0', 'x', '0', '0', '0', '1', 0, 0, 0, 0, 0, 0,
	0x53, 0xa8, 0x00, 0x1c,
	'i', 'q', 'n', '.', '2', '0', '2', '6', '-', '1', '1', '.', 'o', 'r', 'g', ':',
	'x', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};

Test(alua, port_ids_from_lio_vpd83)
{
	cr_assert_eq(sizeof(lio_vpd83), 4 + 0x8c);
	struct scsi_designator d[8];
	size_t n = 0;
	cr_assert_eq(scsi_parse_vpd_devid(lio_vpd83, sizeof(lio_vpd83), d, 8, &n), 0);
	cr_assert_eq(n, 7);
	uint16_t tpg = 0xffff, port = 0xffff;
	cr_assert_eq(alua_port_ids(d, n, &tpg, &port), 0);
	cr_assert_eq(tpg, 3);
	cr_assert_eq(port, 2);
	/* the LU designators are not taken for port ids: association 0 type 5 is ignored */
	d[3].association = 0;
	tpg = port = 0xffff;
	cr_assert_eq(alua_port_ids(d, n, &tpg, &port), -ENOENT);
	cr_assert_eq(tpg, 0xffff);
	/* TPG without a relative port designator: rel_port 0 */
	d[3].association = 1;
	d[2].type = SCSI_DESIG_VENDOR;
	cr_assert_eq(alua_port_ids(d, n, &tpg, &port), 0);
	cr_assert_eq(tpg, 3);
	cr_assert_eq(port, 0);
	/* a short TPG designator (fewer than 4 bytes) does not count */
	d[3].len = 2;
	cr_assert_eq(alua_port_ids(d, n, &tpg, &port), -ENOENT);
	cr_assert_eq(alua_port_ids(NULL, 0, &tpg, &port), -ENOENT);
	/* the LU name is still the NAA */
	char name[64];
	cr_assert_gt(scsi_designator_name(d, n, name, sizeof(name)), 0);
	cr_assert_str_eq(name, "36001405abcdef0123456789abcdef012");
}

Test(alua, classify_sense)
{
	static const struct {
		uint8_t key, asc, ascq;
		enum alua_sense_class want;
	} t[] = {
		{SCSI_SK_NOT_READY, 0x04, 0x0a, ALUA_SENSE_TRANSITIONING},
		{SCSI_SK_NOT_READY, 0x04, 0x0b, ALUA_SENSE_PATH},
		{SCSI_SK_NOT_READY, 0x04, 0x0c, ALUA_SENSE_PATH},
		{SCSI_SK_UNIT_ATTENTION, 0x2a, 0x06, ALUA_SENSE_CHANGED},
		{SCSI_SK_UNIT_ATTENTION, 0x2a, 0x07, ALUA_SENSE_CHANGED},
		{SCSI_SK_NOT_READY, 0x04, 0x01, ALUA_SENSE_OTHER},        /* becoming ready */
		{SCSI_SK_NOT_READY, 0x04, 0x0d, ALUA_SENSE_OTHER},
		{SCSI_SK_UNIT_ATTENTION, 0x2a, 0x09, ALUA_SENSE_OTHER},   /* capacity data has changed */
		{SCSI_SK_UNIT_ATTENTION, 0x29, 0x00, ALUA_SENSE_OTHER},
		{SCSI_SK_UNIT_ATTENTION, 0x04, 0x0b, ALUA_SENSE_OTHER},   /* ASC/ASCQ under the wrong key */
		{SCSI_SK_NOT_READY, 0x2a, 0x06, ALUA_SENSE_OTHER},
		{SCSI_SK_ILLEGAL_REQUEST, 0x20, 0x00, ALUA_SENSE_OTHER},
		{SCSI_SK_MEDIUM_ERROR, 0x11, 0x00, ALUA_SENSE_OTHER},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct scsi_sense s = {.response_code = 0x70, .key = t[i].key, .asc = t[i].asc, .ascq = t[i].ascq};
		cr_assert_eq(alua_classify_sense(&s), t[i].want, "row %zu", i);
	}
	cr_assert_eq(alua_classify_sense(NULL), ALUA_SENSE_OTHER);
	/* from real fixed-format sense bytes */
	static const uint8_t standby[18] = {0x70, 0, 0x02, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x04, 0x0b};
	struct scsi_sense s;
	cr_assert_eq(scsi_parse_sense(standby, sizeof(standby), &s), 0);
	cr_assert_eq(alua_classify_sense(&s), ALUA_SENSE_PATH);
}

Test(alua, inquiry_tpgs)
{
	uint8_t inq[36];
	memset(inq, 0, sizeof(inq));
	inq[4] = 31;
	memcpy(inq + 8, "LIO-ORG FILEIO          4.0 ", 28);
	for (unsigned v = 0; v < 4; v++) {
		inq[5] = (uint8_t)(0x80 | v << 4 | 0x08); /* SCCS and 3PC-like neighbours stay out */
		cr_assert_eq(scsi_inquiry_tpgs(inq, sizeof(inq)), v);
		struct scsi_inquiry q;
		cr_assert_eq(scsi_parse_inquiry(inq, sizeof(inq), &q), 0);
		cr_assert_eq(q.tpgs, v);
	}
	inq[5] = 0xcf; /* every other bit set */
	cr_assert_eq(scsi_inquiry_tpgs(inq, sizeof(inq)), 0);
	inq[5] = 0x10;
	cr_assert_eq(scsi_inquiry_tpgs(inq, 5), 0);
	cr_assert_eq(scsi_inquiry_tpgs(inq, 6), ALUA_TPGS_IMPLICIT);
	cr_assert_eq(scsi_inquiry_tpgs(NULL, 0), 0);
}

/*
 * LIO's answer (target_emulate_report_target_port_groups): the extended
 * header, but a RETURN DATA LENGTH of the descriptors only, without the
 * header's bytes 4-7.  Two groups of one port each, as the lab's LIO with
 * two portals sends them.
 */
Test(alua, rtpg_extended_header_length_without_its_own_bytes)
{
	uint8_t b[32] = {
		0, 0, 0, 24,              /* RETURN DATA LENGTH: the two descriptors only */
		0x10, 0x00, 0, 0,         /* FORMAT TYPE 001b, implicit transition time 0 */
		0x80, 0x0f, 0x00, 0x00,   /* PREF, active/optimized; supported; TPG 0 */
		0, 0x00, 0, 1,            /* status, vendor, 1 port */
		0, 0, 0, 1,               /* relative target port 1 */
		0x01, 0x0f, 0x00, 0x02,   /* active/non-optimized; TPG 2 */
		0, 0x00, 0, 1,
		0, 0, 0, 2,
	};
	struct alua_tpg t[4];
	size_t n = 0;
	cr_assert_eq(alua_parse_rtpg(b, sizeof(b), t, 4, &n, NULL), 0);
	cr_assert_eq(n, 2);
	cr_assert_eq(t[0].tpg, 0);
	cr_assert_eq(t[0].state, ALUA_ACTIVE_OPTIMIZED);
	cr_assert(t[0].pref);
	cr_assert_eq(t[1].tpg, 2);
	cr_assert_eq(t[1].state, ALUA_ACTIVE_NON_OPTIMIZED);
	cr_assert_eq(t[1].ports[0], 2);
	/* the same with the length SPC-4 asks for (28): the same answer */
	b[3] = 28;
	cr_assert_eq(alua_parse_rtpg(b, sizeof(b), t, 4, &n, NULL), 0);
	cr_assert_eq(n, 2);
	/* a descriptor more than 4 bytes past the length is still refused */
	b[3] = 20;
	cr_assert_eq(alua_parse_rtpg(b, sizeof(b), t, 4, &n, NULL), -EPROTO);
}

/*
 * LIO's transfer length is RETURN DATA LENGTH + 4 even with the extended
 * header: the last group's last port descriptor does not come.  The group
 * (its state) is still reported.
 */
Test(alua, rtpg_lio_transfer_cut_short)
{
	uint8_t b[28] = {
		0, 0, 0, 24, 0x10, 0, 0, 0,
		0x80, 0x0f, 0x00, 0x00, 0, 0, 0, 1, 0, 0, 0, 1, /* TPG 0 active/optimized, port 1 */
		0x02, 0x0f, 0x00, 0x02, 0, 0, 0, 1,             /* TPG 2 standby, its port cut off */
	};
	struct alua_tpg t[4];
	size_t n = 0;
	cr_assert_eq(alua_parse_rtpg(b, sizeof(b), t, 4, &n, NULL), 0);
	cr_assert_eq(n, 2);
	cr_assert_eq(t[1].tpg, 2);
	cr_assert_eq(t[1].state, ALUA_STANDBY);
	cr_assert_eq(t[1].nports, 1);
	cr_assert_eq(t[1].ports[0], 0); /* not read past the data */
}
