/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the logical block provisioning commands of
 * initiator/scsi/scsi.c (UNMAP, WRITE SAME(16), GET LBA STATUS: exact CDB and
 * parameter list bytes, the LBA status parser on what tgtd sends and on
 * lying data) and for the request planner of cache/blkio/discard.c.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "cache/blkio/discard.h"
#include "initiator/scsi/scsi.h"

static void expect_bytes(const uint8_t *got, size_t got_len, const uint8_t *want, size_t want_len, size_t span)
{
	cr_assert_eq(got_len, want_len, "length %zu, want %zu", got_len, want_len);
	for (size_t i = 0; i < span; i++) {
		uint8_t w = i < want_len ? want[i] : 0;

		cr_assert_eq(got[i], w, "byte %zu is 0x%02x, want 0x%02x", i, got[i], w);
	}
}

#define EXPECT_CDB(cdb, n, ...)                                                          \
	do {                                                                             \
		static const uint8_t want_[] = { __VA_ARGS__ };                          \
		expect_bytes((cdb), (n), want_, sizeof(want_), SCSI_CDB_MAX);            \
	} while (0)

/* ================= CDB builders ================= */

Test(cdb, unmap)
{
	uint8_t cdb[SCSI_CDB_MAX];

	memset(cdb, 0xa5, sizeof(cdb));
	size_t n = scsi_cdb_unmap(cdb, 0x0118);
	EXPECT_CDB(cdb, n, 0x42, 0, 0, 0, 0, 0, 0, 0x01, 0x18, 0);
}

Test(cdb, write_same16)
{
	uint8_t cdb[SCSI_CDB_MAX];

	memset(cdb, 0xa5, sizeof(cdb));
	size_t n = scsi_cdb_write_same16(cdb, 0x0102030405060708ull, 0x0a0b0c0d, false);
	EXPECT_CDB(cdb, n, 0x93, 0x00, 1, 2, 3, 4, 5, 6, 7, 8, 0x0a, 0x0b, 0x0c, 0x0d, 0, 0);
	n = scsi_cdb_write_same16(cdb, 7, 16, true);
	EXPECT_CDB(cdb, n, 0x93, 0x08, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 16, 0, 0);
}

Test(cdb, get_lba_status)
{
	uint8_t cdb[SCSI_CDB_MAX];

	memset(cdb, 0xa5, sizeof(cdb));
	size_t n = scsi_cdb_get_lba_status(cdb, 0x1122334455667788ull, 4096);
	EXPECT_CDB(cdb, n, 0x9e, 0x12, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0, 0, 0x10, 0, 0, 0);
}

/* ================= UNMAP parameter list ================= */

/* The deallocated blocks of a GET LBA STATUS answer, as statfs counts them. */
Test(lba_status, deallocated_count)
{
	const struct scsi_lba_status st[] = {
		{0, 100, SCSI_LBA_MAPPED}, {100, 50, SCSI_LBA_DEALLOCATED}, {150, 10, SCSI_LBA_ANCHORED},
		{160, 40, SCSI_LBA_DEALLOCATED}, {300, 8, SCSI_LBA_DEALLOCATED},
	};
	uint64_t next;
	/* anchored blocks hold their resources: used */
	cr_assert_eq(scsi_lba_status_deallocated(st, 5, 0, 1000, &next), 90);
	cr_assert_eq(next, 200); /* the gap at 200..300 is not described: the next command starts there */
	/* from the middle of a descriptor, and the end of the LUN cuts the last one */
	cr_assert_eq(scsi_lba_status_deallocated(st, 4, 120, 170, &next), 30 + 10);
	cr_assert_eq(next, 170);
	/* a descriptor wholly before `from` is skipped */
	cr_assert_eq(scsi_lba_status_deallocated(st + 4, 1, 300, 304, &next), 4);
	cr_assert_eq(next, 304);
	cr_assert_eq(scsi_lba_status_deallocated(st, 0, 7, 10, &next), 0);
	cr_assert_eq(next, 7);
}

Test(unmap_param, two_descriptors)
{
	uint8_t buf[64];
	const struct scsi_lba_range r[] = { { 0x10, 8 }, { 0x100000000ull, 0xffffffffu } };
	static const uint8_t want[] = {
		0x00, 0x26, 0x00, 0x20, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 8, 0, 0, 0, 0,
		0, 0, 0, 1, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0,
	};

	memset(buf, 0xa5, sizeof(buf));
	size_t n = scsi_build_unmap_param(buf, sizeof(buf), r, 2);
	cr_assert_eq(n, SCSI_UNMAP_PARAM_LEN(2));
	expect_bytes(buf, n, want, sizeof(want), sizeof(want));
	cr_assert_eq(buf[40], 0xa5, "wrote past the list");
}

Test(unmap_param, refuses)
{
	uint8_t buf[40];
	const struct scsi_lba_range r[2] = { { 0, 1 }, { 2, 1 } };

	cr_assert_eq(scsi_build_unmap_param(buf, sizeof(buf), r, 0), 0);
	cr_assert_eq(scsi_build_unmap_param(buf, 39, r, 2), 0, "does not fit");
	cr_assert_eq(scsi_build_unmap_param(NULL, 40, r, 2), 0);
	/* 4096 descriptors would need a PARAMETER LIST LENGTH above 0xffff */
	cr_assert_eq(scsi_build_unmap_param(buf, SIZE_MAX, r, 4096), 0);
}

/* ================= GET LBA STATUS ================= */

/* What tgtd 1.0.85 sends for a 64 KiB 512-byte LUN with data in its first 8 KiB: two descriptors. */
static const uint8_t tgtd_lba_status[] = {
	0, 0, 0, 0x24, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0x70, 1, 0, 0, 0,
};

Test(lba_status, tgtd)
{
	struct scsi_lba_status d[4];
	size_t c;
	bool more = true;

	cr_assert_eq(scsi_parse_lba_status(tgtd_lba_status, sizeof(tgtd_lba_status), d, 4, &c, &more), 0);
	cr_assert_eq(c, 2);
	cr_assert_not(more);
	cr_assert(d[0].lba == 0 && d[0].nblocks == 16 && d[0].status == SCSI_LBA_MAPPED);
	cr_assert(d[1].lba == 16 && d[1].nblocks == 0x70 && d[1].status == SCSI_LBA_DEALLOCATED);
}

Test(lba_status, cut_short_by_allocation_length)
{
	struct scsi_lba_status d[4];
	size_t c;
	bool more;

	/* a descriptor half there is not decoded; the header says there is more */
	cr_assert_eq(scsi_parse_lba_status(tgtd_lba_status, 30, d, 4, &c, &more), 0);
	cr_assert_eq(c, 1);
	cr_assert(more);
	/* only the header */
	cr_assert_eq(scsi_parse_lba_status(tgtd_lba_status, 8, d, 4, &c, &more), 0);
	cr_assert_eq(c, 0);
	cr_assert(more);
	/* the caller's array is the limit */
	cr_assert_eq(scsi_parse_lba_status(tgtd_lba_status, sizeof(tgtd_lba_status), d, 1, &c, &more), 0);
	cr_assert_eq(c, 1);
	cr_assert(more);
}

Test(lba_status, bad)
{
	struct scsi_lba_status d[4];
	uint8_t b[sizeof(tgtd_lba_status)];
	size_t c = 9;
	bool more;

	cr_assert_eq(scsi_parse_lba_status(tgtd_lba_status, 7, d, 4, &c, &more), -EPROTO, "no header");
	cr_assert_eq(c, 0);
	cr_assert_eq(scsi_parse_lba_status(NULL, 40, d, 4, &c, &more), -EPROTO);

	memcpy(b, tgtd_lba_status, sizeof(b));
	b[3] = 0x23; /* not 4 + 16 * n */
	cr_assert_eq(scsi_parse_lba_status(b, sizeof(b), d, 4, &c, &more), -EPROTO);
	b[3] = 0x02;
	cr_assert_eq(scsi_parse_lba_status(b, sizeof(b), d, 4, &c, &more), -EPROTO);

	memcpy(b, tgtd_lba_status, sizeof(b));
	b[19] = 0; /* zero blocks */
	cr_assert_eq(scsi_parse_lba_status(b, sizeof(b), d, 4, &c, &more), -EPROTO);

	memcpy(b, tgtd_lba_status, sizeof(b));
	b[31] = 0x0f; /* second starts inside the first */
	cr_assert_eq(scsi_parse_lba_status(b, sizeof(b), d, 4, &c, &more), -EPROTO);
	cr_assert_eq(c, 0);

	memcpy(b, tgtd_lba_status, sizeof(b));
	memset(b + 24, 0xff, 8); /* extent wrapping past 2^64 */
	cr_assert_eq(scsi_parse_lba_status(b, sizeof(b), d, 4, &c, &more), -EPROTO);
}

/* ================= cache/blkio/discard.c planner ================= */

/* What tgtd 1.0.85 reports for a LUN with thin_provisioning=1. */
static struct iscsi_lun_info tgtd_thin(void)
{
	struct iscsi_lun_info i;

	memset(&i, 0, sizeof(i));
	i.use16 = true;
	i.cap.block_size = 512;
	i.cap.nblocks = 131072;
	i.cap.lbpme = i.cap.lbprz = true;
	i.have_lbp = true;
	i.lbp.lbpu = i.lbp.lbpws = i.lbp.lbpws10 = i.lbp.lbprz = true;
	i.have_block_limits = true;
	i.bl.max_unmap_lba_count = 0xffffffffu;
	i.bl.max_unmap_desc_count = 0xffffffffu;
	return i;
}

Test(discard, caps_tgtd_thin)
{
	struct iscsi_lun_info i = tgtd_thin();
	struct discard_caps c;

	discard_caps_from_info(&c, &i);
	cr_assert(c.unmap && c.ws_unmap && c.lbprz && c.lba_status);
	cr_assert_eq(c.max_unmap_blocks, 0xffffffffu);
	cr_assert_eq(c.max_ws_blocks, 0xffffu, "no MAXIMUM WRITE SAME LENGTH: the default");
	cr_assert_eq(discard_first_method(&c, true), DISCARD_UNMAP);
	cr_assert_eq(discard_first_method(&c, false), DISCARD_WS, "zeroing keeps the blocks allocated");
}

Test(discard, caps_thick)
{
	struct iscsi_lun_info i = tgtd_thin();
	struct discard_caps c;

	/* tgtd without thin provisioning: no LBPME, no LBPU/LBPWS */
	i.cap.lbpme = i.cap.lbprz = false;
	memset(&i.lbp, 0, sizeof(i.lbp));
	discard_caps_from_info(&c, &i);
	cr_assert(!c.unmap && !c.ws_unmap && !c.lbprz && !c.lba_status);
	cr_assert_eq(discard_first_method(&c, true), DISCARD_WS);
	cr_assert_eq(discard_fallback(&c, DISCARD_WS), DISCARD_WRITE);
	cr_assert_eq(discard_fallback(&c, DISCARD_WRITE), DISCARD_WRITE);
}

Test(discard, unmap_needs_lbprz_and_counts)
{
	struct iscsi_lun_info i = tgtd_thin();
	struct discard_caps c;

	/* deallocated blocks not guaranteed to read as zeroes: punching writes zeroes */
	i.cap.lbprz = false;
	i.lbp.lbprz = false;
	discard_caps_from_info(&c, &i);
	cr_assert_eq(discard_first_method(&c, true), DISCARD_WS);

	/* MAXIMUM UNMAP LBA COUNT 0: UNMAP not implemented, WRITE SAME with UNMAP is */
	i = tgtd_thin();
	i.bl.max_unmap_lba_count = 0;
	discard_caps_from_info(&c, &i);
	cr_assert_not(c.unmap);
	cr_assert_eq(discard_first_method(&c, true), DISCARD_WS_UNMAP);
	cr_assert_eq(discard_fallback(&c, DISCARD_WS_UNMAP), DISCARD_WS);

	i = tgtd_thin();
	i.bl.max_unmap_desc_count = 0;
	discard_caps_from_info(&c, &i);
	cr_assert_not(c.unmap);

	/* UNMAP refused at run time: WRITE SAME with UNMAP next */
	i = tgtd_thin();
	discard_caps_from_info(&c, &i);
	cr_assert_eq(discard_fallback(&c, DISCARD_UNMAP), DISCARD_WS_UNMAP);
}

Test(discard, chunks)
{
	struct iscsi_lun_info i = tgtd_thin();
	struct discard_caps c;

	i.bl.max_unmap_lba_count = 2048;
	i.bl.max_write_same_len = 0x1000;
	discard_caps_from_info(&c, &i);
	cr_assert_eq(discard_chunk(&c, DISCARD_UNMAP, 5000, 256), 2048);
	cr_assert_eq(discard_chunk(&c, DISCARD_UNMAP, 100, 256), 100);
	cr_assert_eq(discard_chunk(&c, DISCARD_WS_UNMAP, 1ull << 40, 256), 0x1000);
	cr_assert_eq(discard_chunk(&c, DISCARD_WS, 0x800, 256), 0x800);
	cr_assert_eq(discard_chunk(&c, DISCARD_WRITE, 5000, 256), 256);
	cr_assert_eq(discard_chunk(&c, DISCARD_WRITE, 5000, 0), 1, "never 0");

	/* a huge MAXIMUM WRITE SAME LENGTH is capped to the 32-bit CDB field */
	i.bl.max_write_same_len = 1ull << 40;
	discard_caps_from_info(&c, &i);
	cr_assert_eq(discard_chunk(&c, DISCARD_WS, 1ull << 41, 256), 0xffffffffu);
	/* the whole range of a 2^32-block UNMAP limit goes in one descriptor */
	i.bl.max_unmap_lba_count = 0xffffffffu;
	discard_caps_from_info(&c, &i);
	cr_assert_eq(discard_chunk(&c, DISCARD_UNMAP, 1ull << 33, 256), 0xffffffffu);
}
