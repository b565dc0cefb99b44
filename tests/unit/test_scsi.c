/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for initiator/scsi/scsi.c and initiator/scsi/scsi_errno.c: exact CDB
 * bytes, parsers fed with what a Linux tgtd returns and with truncated or
 * lying data, and every row of the status/sense -> errno table.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "initiator/scsi/scsi.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static void expect_cdb(const uint8_t *cdb, size_t got_len, const uint8_t *want, size_t want_len)
{
	cr_assert_eq(got_len, want_len, "CDB length %zu, want %zu", got_len, want_len);
	for (size_t i = 0; i < SCSI_CDB_MAX; i++) {
		uint8_t w = i < want_len ? want[i] : 0;

		cr_assert_eq(cdb[i], w, "CDB byte %zu is 0x%02x, want 0x%02x", i, cdb[i], w);
	}
}

#define EXPECT_CDB(cdb, n, ...)                                                          \
	do {                                                                             \
		static const uint8_t want_[] = { __VA_ARGS__ };                          \
		expect_cdb((cdb), (n), want_, sizeof(want_));                            \
	} while (0)

/* A CDB buffer full of junk, to check the builders zero the tail. */
static void dirty(uint8_t cdb[SCSI_CDB_MAX])
{
	memset(cdb, 0xa5, SCSI_CDB_MAX);
}

/* ================= CDB builders ================= */

Test(cdb, test_unit_ready)
{
	uint8_t c[SCSI_CDB_MAX];

	dirty(c);
	EXPECT_CDB(c, scsi_cdb_test_unit_ready(c), 0, 0, 0, 0, 0, 0);
}

Test(cdb, inquiry_standard)
{
	uint8_t c[SCSI_CDB_MAX];

	dirty(c);
	EXPECT_CDB(c, scsi_cdb_inquiry(c, false, 0, 96), 0x12, 0x00, 0x00, 0x00, 0x60, 0x00);
	/* a page code without EVPD is invalid: not sent */
	dirty(c);
	EXPECT_CDB(c, scsi_cdb_inquiry(c, false, 0x83, 36), 0x12, 0x00, 0x00, 0x00, 0x24, 0x00);
}

Test(cdb, inquiry_evpd)
{
	uint8_t c[SCSI_CDB_MAX];

	dirty(c);
	EXPECT_CDB(c, scsi_cdb_inquiry(c, true, 0x83, 0x1234), 0x12, 0x01, 0x83, 0x12, 0x34, 0x00);
	dirty(c);
	EXPECT_CDB(c, scsi_cdb_inquiry(c, true, 0xb0, 0xffff), 0x12, 0x01, 0xb0, 0xff, 0xff, 0x00);
}

Test(cdb, report_luns)
{
	uint8_t c[SCSI_CDB_MAX];

	dirty(c);
	EXPECT_CDB(c, scsi_cdb_report_luns(c, 0x01020304), 0xa0, 0, 0, 0, 0, 0, 0x01, 0x02, 0x03, 0x04, 0, 0);
	dirty(c);
	EXPECT_CDB(c, scsi_cdb_report_luns(c, 4096), 0xa0, 0, 0, 0, 0, 0, 0x00, 0x00, 0x10, 0x00, 0, 0);
}

Test(cdb, read_capacity)
{
	uint8_t c[SCSI_CDB_MAX];

	dirty(c);
	EXPECT_CDB(c, scsi_cdb_read_capacity10(c), 0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0);
	dirty(c);
	EXPECT_CDB(c, scsi_cdb_read_capacity16(c, 32), 0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0);
	dirty(c);
	EXPECT_CDB(c, scsi_cdb_read_capacity16(c, 0xa1b2c3d4), 0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0xa1, 0xb2,
		   0xc3, 0xd4, 0, 0);
}

Test(cdb, read10)
{
	uint8_t c[SCSI_CDB_MAX];

	dirty(c);
	EXPECT_CDB(c, scsi_cdb_read(c, 0x12345678, 0x100, false), 0x28, 0x00, 0x12, 0x34, 0x56, 0x78, 0x00, 0x01,
		   0x00, 0x00);
	dirty(c);
	EXPECT_CDB(c, scsi_cdb_read(c, 0, 1, true), 0x28, 0x08, 0, 0, 0, 0, 0, 0x00, 0x01, 0);
	/* the largest that still fits the 10-byte form */
	dirty(c);
	EXPECT_CDB(c, scsi_cdb_read(c, 0xffffffffu, 0xffff, false), 0x28, 0, 0xff, 0xff, 0xff, 0xff, 0, 0xff, 0xff,
		   0);
}

Test(cdb, read16_switch)
{
	uint8_t c[SCSI_CDB_MAX];

	dirty(c);
	EXPECT_CDB(c, scsi_cdb_read(c, 0x100000000ull, 1, false), 0x88, 0x00, 0, 0, 0, 0x01, 0, 0, 0, 0, 0, 0, 0,
		   0x01, 0, 0);
	dirty(c);
	EXPECT_CDB(c, scsi_cdb_read(c, 0, 0x10000, false), 0x88, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x01, 0x00,
		   0x00, 0, 0);
	dirty(c);
	EXPECT_CDB(c, scsi_cdb_read(c, 0x0102030405060708ull, 0x0a0b0c0d, true), 0x88, 0x08, 0x01, 0x02, 0x03,
		   0x04, 0x05, 0x06, 0x07, 0x08, 0x0a, 0x0b, 0x0c, 0x0d, 0, 0);
}

Test(cdb, write10_and_16)
{
	uint8_t c[SCSI_CDB_MAX];

	dirty(c);
	EXPECT_CDB(c, scsi_cdb_write(c, 0x00abcdef, 8, false), 0x2a, 0x00, 0x00, 0xab, 0xcd, 0xef, 0, 0x00, 0x08,
		   0);
	dirty(c);
	EXPECT_CDB(c, scsi_cdb_write(c, 0x00abcdef, 8, true), 0x2a, 0x08, 0x00, 0xab, 0xcd, 0xef, 0, 0x00, 0x08,
		   0);
	dirty(c);
	EXPECT_CDB(c, scsi_cdb_write(c, 0xffffffffu, 0xffff, true), 0x2a, 0x08, 0xff, 0xff, 0xff, 0xff, 0, 0xff,
		   0xff, 0);
	dirty(c);
	EXPECT_CDB(c, scsi_cdb_write(c, 0x100000000ull, 0xffff, true), 0x8a, 0x08, 0, 0, 0, 0x01, 0, 0, 0, 0, 0,
		   0, 0xff, 0xff, 0, 0);
	dirty(c);
	EXPECT_CDB(c, scsi_cdb_write(c, 0xffffffffu, 0x10000, false), 0x8a, 0x00, 0, 0, 0, 0, 0xff, 0xff, 0xff,
		   0xff, 0x00, 0x01, 0x00, 0x00, 0, 0);
}

Test(cdb, sync_cache10)
{
	uint8_t c[SCSI_CDB_MAX];

	dirty(c);
	EXPECT_CDB(c, scsi_cdb_sync_cache(c, false, 0, 0), 0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0);
	dirty(c);
	EXPECT_CDB(c, scsi_cdb_sync_cache(c, false, 0x11223344, 0x5566), 0x35, 0, 0x11, 0x22, 0x33, 0x44, 0, 0x55,
		   0x66, 0);
}

Test(cdb, sync_cache10_widens_out_of_range)
{
	uint8_t c[SCSI_CDB_MAX];

	/* count too large: "to the end" from the same LBA */
	dirty(c);
	EXPECT_CDB(c, scsi_cdb_sync_cache(c, false, 0x10, 0x10000), 0x35, 0, 0, 0, 0, 0x10, 0, 0, 0, 0);
	/* LBA too large: the whole medium */
	dirty(c);
	EXPECT_CDB(c, scsi_cdb_sync_cache(c, false, 0x100000000ull, 8), 0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0);
}

Test(cdb, sync_cache16)
{
	uint8_t c[SCSI_CDB_MAX];

	dirty(c);
	EXPECT_CDB(c, scsi_cdb_sync_cache(c, true, 0, 0), 0x91, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
	dirty(c);
	EXPECT_CDB(c, scsi_cdb_sync_cache(c, true, 0x0102030405060708ull, 0x11223344), 0x91, 0, 0x01, 0x02, 0x03,
		   0x04, 0x05, 0x06, 0x07, 0x08, 0x11, 0x22, 0x33, 0x44, 0, 0);
}

Test(cdb, mode_sense6)
{
	uint8_t c[SCSI_CDB_MAX];

	dirty(c);
	EXPECT_CDB(c, scsi_cdb_mode_sense6(c, 0x3f, 0x00, 0xff), 0x1a, 0x08, 0x3f, 0x00, 0xff, 0x00);
	dirty(c);
	EXPECT_CDB(c, scsi_cdb_mode_sense6(c, 0x08, 0x00, 192), 0x1a, 0x08, 0x08, 0x00, 0xc0, 0x00);
	/* PC bits (7-6 of byte 2) stay 00b even if the page code carries them */
	dirty(c);
	EXPECT_CDB(c, scsi_cdb_mode_sense6(c, 0xca, 0xff, 4), 0x1a, 0x08, 0x0a, 0xff, 0x04, 0x00);
}

Test(cdb, mode_sense10)
{
	uint8_t c[SCSI_CDB_MAX];

	dirty(c);
	EXPECT_CDB(c, scsi_cdb_mode_sense10(c, 0x3f, 0xff, 0x1234), 0x5a, 0x08, 0x3f, 0xff, 0, 0, 0, 0x12, 0x34,
		   0);
	dirty(c);
	EXPECT_CDB(c, scsi_cdb_mode_sense10(c, 0x08, 0, 8), 0x5a, 0x08, 0x08, 0, 0, 0, 0, 0x00, 0x08, 0);
}

/* ================= INQUIRY ================= */

/* Standard INQUIRY data as tgtd returns it for a disk LUN (additional length 59). */
static const uint8_t tgt_inquiry[64] = {
	0x00, 0x00, 0x05, 0x42, 0x3b, 0x00, 0x00, 0x02,
	'I', 'E', 'T', ' ', ' ', ' ', ' ', ' ',
	'V', 'I', 'R', 'T', 'U', 'A', 'L', '-', 'D', 'I', 'S', 'K', ' ', ' ', ' ', ' ',
	'0', '0', '0', '1',
	[58] = 0x00, 0x40, 0x09, 0x60, 0x03, 0x00,
};

Test(inquiry, tgtd)
{
	struct scsi_inquiry q;

	cr_assert_eq(scsi_parse_inquiry(tgt_inquiry, sizeof(tgt_inquiry), &q), 0);
	cr_assert_eq(q.qualifier, 0);
	cr_assert_eq(q.device_type, 0);
	cr_assert_not(q.removable);
	cr_assert_eq(q.version, 5);
	cr_assert_str_eq(q.vendor, "IET");
	cr_assert_str_eq(q.product, "VIRTUAL-DISK");
	cr_assert_str_eq(q.revision, "0001");
}

Test(inquiry, fields)
{
	uint8_t b[36];
	struct scsi_inquiry q;

	memcpy(b, tgt_inquiry, sizeof(b));
	b[0] = 0x7f; /* qualifier 011b, type 0x1f: no LU */
	b[1] = 0x80;
	b[4] = 31;
	memcpy(b + 8, "ACME\0\0\0\0", 8);
	memcpy(b + 16, "0123456789abcdef", 16);
	memcpy(b + 32, "r\x01 \0", 4);
	cr_assert_eq(scsi_parse_inquiry(b, sizeof(b), &q), 0);
	cr_assert_eq(q.qualifier, 3);
	cr_assert_eq(q.device_type, 0x1f);
	cr_assert(q.removable);
	cr_assert_str_eq(q.vendor, "ACME");
	cr_assert_str_eq(q.product, "0123456789abcdef");
	cr_assert_str_eq(q.revision, "r"); /* non-printables and padding trimmed */
}

Test(inquiry, cut_by_allocation_length)
{
	struct scsi_inquiry q;

	/* 36 bytes asked, additional length still says 59: fine */
	cr_assert_eq(scsi_parse_inquiry(tgt_inquiry, 36, &q), 0);
	cr_assert_str_eq(q.product, "VIRTUAL-DISK");
}

Test(inquiry, too_short_or_lying)
{
	uint8_t b[64];
	struct scsi_inquiry q;

	cr_assert_eq(scsi_parse_inquiry(tgt_inquiry, 35, &q), -EPROTO);
	cr_assert_eq(scsi_parse_inquiry(tgt_inquiry, 4, &q), -EPROTO);
	cr_assert_eq(scsi_parse_inquiry(tgt_inquiry, 0, &q), -EPROTO);
	cr_assert_eq(scsi_parse_inquiry(NULL, 64, &q), -EPROTO);
	/* additional length says the data stops before the product id */
	memcpy(b, tgt_inquiry, sizeof(b));
	b[4] = 20;
	cr_assert_eq(scsi_parse_inquiry(b, sizeof(b), &q), -EPROTO);
	b[4] = 30;
	cr_assert_eq(scsi_parse_inquiry(b, sizeof(b), &q), -EPROTO);
	b[4] = 31;
	cr_assert_eq(scsi_parse_inquiry(b, sizeof(b), &q), 0);
}

/* ================= VPD 0x00 ================= */

static const uint8_t tgt_vpd00[] = { 0x00, 0x00, 0x00, 0x06, 0x00, 0x80, 0x83, 0x86, 0xb0, 0xb2 };

Test(vpd, supported_pages)
{
	uint8_t pages[16];
	size_t n = 99;

	cr_assert_eq(scsi_parse_vpd_supported(tgt_vpd00, sizeof(tgt_vpd00), pages, ARRAY_SIZE(pages), &n), 0);
	cr_assert_eq(n, 6);
	cr_assert_arr_eq(pages, ((uint8_t[]){ 0x00, 0x80, 0x83, 0x86, 0xb0, 0xb2 }), 6);
}

Test(vpd, supported_pages_truncated_and_limited)
{
	uint8_t pages[16];
	size_t n = 99;

	/* cut by the allocation length */
	cr_assert_eq(scsi_parse_vpd_supported(tgt_vpd00, 7, pages, ARRAY_SIZE(pages), &n), 0);
	cr_assert_eq(n, 3);
	cr_assert_arr_eq(pages, ((uint8_t[]){ 0x00, 0x80, 0x83 }), 3);
	/* caller's array smaller than the list */
	cr_assert_eq(scsi_parse_vpd_supported(tgt_vpd00, sizeof(tgt_vpd00), pages, 2, &n), 0);
	cr_assert_eq(n, 2);
	/* page length shorter than the bytes transferred: trust the page length */
	uint8_t b[sizeof(tgt_vpd00)];
	memcpy(b, tgt_vpd00, sizeof(b));
	b[3] = 2;
	cr_assert_eq(scsi_parse_vpd_supported(b, sizeof(b), pages, ARRAY_SIZE(pages), &n), 0);
	cr_assert_eq(n, 2);
	/* page length claiming far more than sent: decode what came */
	b[2] = 0xff;
	cr_assert_eq(scsi_parse_vpd_supported(b, sizeof(b), pages, ARRAY_SIZE(pages), &n), 0);
	cr_assert_eq(n, 6);
}

Test(vpd, supported_pages_bad)
{
	uint8_t pages[16];
	size_t n = 99;
	uint8_t b[sizeof(tgt_vpd00)];

	cr_assert_eq(scsi_parse_vpd_supported(tgt_vpd00, 3, pages, ARRAY_SIZE(pages), &n), -EPROTO);
	cr_assert_eq(n, 0);
	memcpy(b, tgt_vpd00, sizeof(b));
	b[1] = 0x80; /* wrong page */
	cr_assert_eq(scsi_parse_vpd_supported(b, sizeof(b), pages, ARRAY_SIZE(pages), &n), -EPROTO);
	cr_assert_eq(scsi_parse_vpd_supported(NULL, 10, pages, ARRAY_SIZE(pages), &n), -EPROTO);
}

/* ================= VPD 0x80 ================= */

Test(vpd, serial)
{
	static const uint8_t b[] = { 0x00, 0x80, 0x00, 0x10, 'b', 'e', 'a', 'f', '1', '1', ' ', ' ', ' ', ' ', ' ',
				     ' ', ' ', ' ', ' ', ' ' };
	char s[64];

	cr_assert_eq(scsi_parse_vpd_serial(b, sizeof(b), s, sizeof(s)), 0);
	cr_assert_str_eq(s, "beaf11");
}

Test(vpd, serial_padding_and_junk)
{
	static const uint8_t b[] = { 0x00, 0x80, 0x00, 0x0a, ' ', ' ', 'S', 'N', '\x07', '4', '2', '\0', '\0', ' ' };
	char s[64];

	cr_assert_eq(scsi_parse_vpd_serial(b, sizeof(b), s, sizeof(s)), 0);
	cr_assert_str_eq(s, "SN 42");
}

Test(vpd, serial_truncated)
{
	static const uint8_t b[] = { 0x00, 0x80, 0x00, 0x08, 'A', 'B', 'C', 'D', 'E', 'F', 'G', 'H' };
	char s[64];
	char small[4];

	/* page length larger than what came */
	cr_assert_eq(scsi_parse_vpd_serial(b, 7, s, sizeof(s)), 0);
	cr_assert_str_eq(s, "ABC");
	/* lying page length pointing past the buffer */
	uint8_t l[sizeof(b)];
	memcpy(l, b, sizeof(l));
	l[2] = 0xff;
	cr_assert_eq(scsi_parse_vpd_serial(l, sizeof(l), s, sizeof(s)), 0);
	cr_assert_str_eq(s, "ABCDEFGH");
	/* small output buffer: truncated, still terminated */
	cr_assert_eq(scsi_parse_vpd_serial(b, sizeof(b), small, sizeof(small)), 0);
	cr_assert_str_eq(small, "ABC");
	/* empty page */
	cr_assert_eq(scsi_parse_vpd_serial(b, 4, s, sizeof(s)), 0);
	cr_assert_str_eq(s, "");
}

Test(vpd, serial_bad)
{
	static const uint8_t b[] = { 0x00, 0x83, 0x00, 0x02, 'A', 'B' };
	char s[8];

	cr_assert_eq(scsi_parse_vpd_serial(b, sizeof(b), s, sizeof(s)), -EPROTO);
	cr_assert_str_eq(s, "");
	cr_assert_eq(scsi_parse_vpd_serial(b, 2, s, sizeof(s)), -EPROTO);
	cr_assert_eq(scsi_parse_vpd_serial(b, sizeof(b), s, 0), -EINVAL);
}

/* ================= VPD 0x83 ================= */

/*
 * A tgtd-like device identification page: T10 vendor id "IET     00010001",
 * NAA 6 registered extended, then a relative target port (association 1)
 * and the iSCSI target name (SCSI name string, association 2).
 */
static const uint8_t tgt_vpd83[] = {
	0x00, 0x83, 0x00, 0x54,
	/* T10 vendor id, ASCII, LU */
	0x02, 0x01, 0x00, 0x10, 'I', 'E', 'T', ' ', ' ', ' ', ' ', ' ', '0', '0', '0', '1', '0', '0', '0', '1',
	/* NAA, binary, LU */
	0x01, 0x03, 0x00, 0x10, 0x60, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0e, 0x00, 0x00, 0x00, 0x00,
	0x01, 0x00, 0x01,
	/* relative target port, iSCSI, PIV, target port */
	0x51, 0x94, 0x00, 0x04, 0x00, 0x00, 0x00, 0x01,
	/* SCSI name string, UTF-8, iSCSI, PIV, target device */
	0x53, 0xa8, 0x00, 0x20, 'i', 'q', 'n', '.', '2', '0', '0', '1', '-', '0', '4', '.', 'c', 'o', 'm', '.',
	'e', 'x', 'a', 'm', 'p', 'l', 'e', ':', 'd', 'i', 's', 'k', '1', 0, 0, 0,
};

Test(vpd, devid_tgtd)
{
	struct scsi_designator d[8];
	size_t n = 99;
	char name[128];

	cr_assert_eq(sizeof(tgt_vpd83), 4 + 0x54);
	cr_assert_eq(scsi_parse_vpd_devid(tgt_vpd83, sizeof(tgt_vpd83), d, ARRAY_SIZE(d), &n), 0);
	cr_assert_eq(n, 4);
	cr_assert_eq(d[0].code_set, 2);
	cr_assert_eq(d[0].association, 0);
	cr_assert_eq(d[0].type, SCSI_DESIG_T10);
	cr_assert_eq(d[0].len, 16);
	cr_assert_arr_eq(d[0].id, "IET     00010001", 16);
	cr_assert_eq(d[1].code_set, 1);
	cr_assert_eq(d[1].association, 0);
	cr_assert_eq(d[1].type, SCSI_DESIG_NAA);
	cr_assert_eq(d[1].len, 16);
	cr_assert_eq(d[1].id[0], 0x60);
	cr_assert_eq(d[1].id[15], 0x01);
	cr_assert_eq(d[2].association, 1);
	cr_assert_eq(d[2].type, SCSI_DESIG_RELATIVE_PORT);
	cr_assert_eq(d[2].len, 4);
	cr_assert_eq(d[3].code_set, 3);
	cr_assert_eq(d[3].association, 2);
	cr_assert_eq(d[3].type, SCSI_DESIG_SCSI_NAME);
	cr_assert_eq(d[3].len, 32);

	cr_assert_eq(scsi_designator_name(d, n, name, sizeof(name)), 33);
	cr_assert_str_eq(name, "360000000000000000e00000000010001");
}

Test(vpd, devid_limited_by_max)
{
	struct scsi_designator d[2];
	size_t n = 99;

	cr_assert_eq(scsi_parse_vpd_devid(tgt_vpd83, sizeof(tgt_vpd83), d, ARRAY_SIZE(d), &n), 0);
	cr_assert_eq(n, 2);
	cr_assert_eq(d[1].type, SCSI_DESIG_NAA);
	cr_assert_eq(scsi_parse_vpd_devid(tgt_vpd83, sizeof(tgt_vpd83), NULL, 0, &n), 0);
	cr_assert_eq(n, 0);
}

Test(vpd, devid_truncated_by_allocation_length)
{
	struct scsi_designator d[8];
	size_t n = 99;

	/* cut in the middle of the NAA descriptor: only the T10 one */
	cr_assert_eq(scsi_parse_vpd_devid(tgt_vpd83, 30, d, ARRAY_SIZE(d), &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(d[0].type, SCSI_DESIG_T10);
	/* cut in the middle of a descriptor header */
	cr_assert_eq(scsi_parse_vpd_devid(tgt_vpd83, 22, d, ARRAY_SIZE(d), &n), 0);
	cr_assert_eq(n, 0);
	/* exactly two descriptors */
	cr_assert_eq(scsi_parse_vpd_devid(tgt_vpd83, 4 + 20 + 20, d, ARRAY_SIZE(d), &n), 0);
	cr_assert_eq(n, 2);
	/* header only */
	cr_assert_eq(scsi_parse_vpd_devid(tgt_vpd83, 4, d, ARRAY_SIZE(d), &n), 0);
	cr_assert_eq(n, 0);
}

Test(vpd, devid_lying_lengths)
{
	struct scsi_designator d[8];
	size_t n = 99;
	uint8_t b[sizeof(tgt_vpd83)];

	/* last designator claims more than the page holds */
	memcpy(b, tgt_vpd83, sizeof(b));
	b[4 + 20 + 20 + 8 + 3] = 0x21;
	cr_assert_eq(scsi_parse_vpd_devid(b, sizeof(b), d, ARRAY_SIZE(d), &n), -EPROTO);
	/* first designator runs past a (shorter) page length */
	memcpy(b, tgt_vpd83, sizeof(b));
	b[3] = 0x10;
	cr_assert_eq(scsi_parse_vpd_devid(b, sizeof(b), d, ARRAY_SIZE(d), &n), -EPROTO);
	/* page ends inside a descriptor header */
	b[3] = 0x16;
	cr_assert_eq(scsi_parse_vpd_devid(b, sizeof(b), d, ARRAY_SIZE(d), &n), -EPROTO);
	/* designator length 255 in a short buffer */
	{
		static const uint8_t l[] = { 0x00, 0x83, 0x00, 0x08, 0x01, 0x03, 0x00, 0xff, 0x60, 0x01, 0x02, 0x03 };

		cr_assert_eq(scsi_parse_vpd_devid(l, sizeof(l), d, ARRAY_SIZE(d), &n), -EPROTO);
	}
	/* wrong page, short header */
	memcpy(b, tgt_vpd83, sizeof(b));
	b[1] = 0x80;
	cr_assert_eq(scsi_parse_vpd_devid(b, sizeof(b), d, ARRAY_SIZE(d), &n), -EPROTO);
	cr_assert_eq(scsi_parse_vpd_devid(tgt_vpd83, 3, d, ARRAY_SIZE(d), &n), -EPROTO);
	cr_assert_eq(n, 0);
}

Test(vpd, devid_max_length_designator)
{
	uint8_t b[4 + 4 + 255];
	struct scsi_designator d[1];
	size_t n = 0;

	memset(b, 0x5a, sizeof(b));
	b[0] = 0x00;
	b[1] = 0x83;
	b[2] = 0x01;
	b[3] = 0x03; /* 259 */
	b[4] = 0x01;
	b[5] = 0x00;
	b[6] = 0x00;
	b[7] = 0xff;
	cr_assert_eq(scsi_parse_vpd_devid(b, sizeof(b), d, 1, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(d[0].len, 255);
	cr_assert_eq(d[0].id[254], 0x5a);
}

/* ================= designator name ================= */

static struct scsi_designator desig(uint8_t assoc, uint8_t type, uint8_t code_set, const void *id, uint8_t len)
{
	struct scsi_designator d;

	memset(&d, 0, sizeof(d));
	d.association = assoc;
	d.type = type;
	d.code_set = code_set;
	d.len = len;
	memcpy(d.id, id, len);
	return d;
}

static const uint8_t naa6[16] = { 0x60, 0x01, 0x40, 0x5a, 0xbc, 0xde, 0xf0, 0x12,
				  0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x12 };
static const uint8_t eui64[8] = { 0x00, 0x25, 0x38, 0x5a, 0x71, 0xb0, 0x20, 0xFF };

Test(designator, naa_preferred)
{
	struct scsi_designator d[4];
	char s[64];

	d[0] = desig(0, SCSI_DESIG_T10, 2, "LIO-ORG disk1", 13);
	d[1] = desig(0, SCSI_DESIG_EUI64, 1, eui64, 8);
	d[2] = desig(0, SCSI_DESIG_NAA, 1, naa6, 16);
	d[3] = desig(2, SCSI_DESIG_SCSI_NAME, 3, "iqn.x", 5);
	cr_assert_eq(scsi_designator_name(d, 4, s, sizeof(s)), 33);
	cr_assert_str_eq(s, "36001405abcdef0123456789abcdef012");
}

Test(designator, eui64_over_t10)
{
	struct scsi_designator d[3];
	char s[64];

	d[0] = desig(0, SCSI_DESIG_T10, 2, "LIO-ORG disk1", 13);
	d[1] = desig(1, SCSI_DESIG_NAA, 1, naa6, 16); /* target port NAA: not the LU's */
	d[2] = desig(0, SCSI_DESIG_EUI64, 1, eui64, 8);
	cr_assert_eq(scsi_designator_name(d, 3, s, sizeof(s)), 17);
	cr_assert_str_eq(s, "20025385a71b020ff");
}

Test(designator, t10_ascii)
{
	struct scsi_designator d[2];
	char s[64];

	d[0] = desig(2, SCSI_DESIG_SCSI_NAME, 3, "iqn.2001-04.com.example:t", 25);
	d[1] = desig(0, SCSI_DESIG_T10, 2, "  IET     0001/2\x01\0\0x", 20);
	cr_assert_eq(scsi_designator_name(d, 2, s, sizeof(s)), 12);
	cr_assert_str_eq(s, "1IET_0001_2_"); /* as udev: one '_' per run of blanks, '/' and \x01 as '_', up to the NUL */
}

/* scsi_designator_name of the n designators d is want. */
static void expect_name(const struct scsi_designator *d, size_t n, const char *want)
{
	char s[64];
	cr_assert_eq(scsi_designator_name(d, n, s, sizeof(s)), (int)strlen(want), "want %s", want);
	cr_assert_str_eq(s, want);
}

/*
 * tgtd's VPD 0x83 page, in its order: NAA 3 (locally assigned), NAA 6 (IEEE
 * Registered Extended), T10.  udev's scsi_id names the disk after the NAA 6
 * one: /dev/disk/by-id/scsi-360000000000000000e00000000010001.
 */
Test(designator, udev_order_on_tgtd)
{
	static const uint8_t naa3[8] = { 0x30, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x01 };
	static const uint8_t naa6t[16] = { 0x60, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
					   0x0e, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01 };
	struct scsi_designator d[3];

	d[0] = desig(0, SCSI_DESIG_NAA, 1, naa3, 8);
	d[1] = desig(0, SCSI_DESIG_NAA, 1, naa6t, 16);
	d[2] = desig(0, SCSI_DESIG_T10, 2, "IET     00010001", 16);
	expect_name(d, 3, "360000000000000000e00000000010001");
	/* without the NAA 6: the locally assigned NAA before the T10 ID */
	d[1] = d[2];
	expect_name(d, 2, "33000000010000001");
	expect_name(d + 1, 1, "1IET_00010001");
}

/* udev's id_search_list, each step against the ones after it, the better one given last. */
Test(designator, udev_order_each_step)
{
	static const uint8_t naa5[8] = { 0x50, 0x01, 0x40, 0x5a, 0xbc, 0xde, 0xf0, 0x12 };
	static const uint8_t naa3[8] = { 0x30, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x01 };
	static const uint8_t t10[4] = { 0xde, 0xad, 0xbe, 0xef };
	const struct {
		struct scsi_designator worse, better;
		const char *want;
	} steps[] = {
		/* NAA 6 in ASCII (udev reads the NAA nibble of the first byte: '6' is 0x36) loses to NAA 5 */
		{ desig(0, SCSI_DESIG_NAA, 2, "6001", 4), desig(0, SCSI_DESIG_NAA, 1, naa5, 8), "35001405abcdef012" },
		{ desig(0, SCSI_DESIG_NAA, 1, naa3, 8), desig(0, SCSI_DESIG_NAA, 1, naa5, 8), "35001405abcdef012" },
		/* binary before ASCII within a type */
		{ desig(0, SCSI_DESIG_EUI64, 2, "eui", 3), desig(0, SCSI_DESIG_EUI64, 1, eui64, 8), "20025385a71b020ff" },
		/* an ASCII NAA before any EUI-64 */
		{ desig(0, SCSI_DESIG_EUI64, 1, eui64, 8), desig(0, SCSI_DESIG_NAA, 2, "3abc", 4), "33abc" },
		/* a binary T10 ID in hex, before an ASCII one */
		{ desig(0, SCSI_DESIG_T10, 2, "IET", 3), desig(0, SCSI_DESIG_T10, 1, t10, 4), "1deadbeef" },
	};
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		struct scsi_designator d[2] = { steps[i].worse, steps[i].better };
		expect_name(d, 2, steps[i].want);
	}
}

Test(designator, scsi_name_and_utf8_not_used)
{
	struct scsi_designator d[2];
	char s[64];

	d[0] = desig(1, SCSI_DESIG_T10, 2, "PORT", 4);
	d[1] = desig(0, SCSI_DESIG_SCSI_NAME, 3, "naa.600140512345678\0\0\0", 22);
	cr_assert_eq(scsi_designator_name(d, 2, s, sizeof(s)), -ENOENT);
	d[0] = desig(0, SCSI_DESIG_T10, 3, "UTF8", 4);
	cr_assert_eq(scsi_designator_name(d, 1, s, sizeof(s)), -ENOENT);
}

Test(designator, blank_t10_is_its_digit)
{
	struct scsi_designator d[2];
	char s[64];

	d[0] = desig(0, SCSI_DESIG_T10, 2, "   \0", 4);
	d[1] = desig(0, SCSI_DESIG_SCSI_NAME, 3, "eui.0025385a", 12);
	cr_assert_eq(scsi_designator_name(d, 2, s, sizeof(s)), 1);
	cr_assert_str_eq(s, "1");
}

Test(designator, none)
{
	struct scsi_designator d[3];
	char s[64];

	d[0] = desig(1, SCSI_DESIG_NAA, 1, naa6, 16);
	d[1] = desig(0, SCSI_DESIG_RELATIVE_PORT, 1, "\0\0\0\1", 4);
	d[2] = desig(0, SCSI_DESIG_VENDOR, 2, "vendor", 6);
	cr_assert_eq(scsi_designator_name(d, 3, s, sizeof(s)), -ENOENT);
	cr_assert_str_eq(s, "");
	cr_assert_eq(scsi_designator_name(d, 0, s, sizeof(s)), -ENOENT);
	cr_assert_eq(scsi_designator_name(NULL, 0, s, sizeof(s)), -ENOENT);
}

Test(designator, output_too_small)
{
	struct scsi_designator d[1];
	char s[64];

	d[0] = desig(0, SCSI_DESIG_NAA, 1, naa6, 16);
	cr_assert_eq(scsi_designator_name(d, 1, s, 33), -ERANGE);
	cr_assert_eq(scsi_designator_name(d, 1, s, 34), 33);
	d[0] = desig(0, SCSI_DESIG_T10, 2, "ABCDEF", 6);
	cr_assert_eq(scsi_designator_name(d, 1, s, 7), -ERANGE);
	cr_assert_eq(scsi_designator_name(d, 1, s, 8), 7);
	cr_assert_eq(scsi_designator_name(d, 1, s, 0), -ERANGE);
}

/* Found by tests/fuzz/fuzz_vpd.c: an ASCII designator too long for the
 * output returned -ERANGE with the bytes it had copied and no NUL. */
Test(designator, output_too_small_leaves_empty_string)
{
	/* the first designator of tgtd's VPD 0x83 page: T10 "IET     00010001" */
	static const uint8_t page[] = { 0x00, 0x83, 0x00, 0x28, 0x02, 0x01, 0x00, 0x24, 'I', 'E', 'T', ' ',
					' ', ' ', ' ', ' ', '0', '0', '0', '1', '0', '0', '0', '1' };
	uint8_t buf[44] = { 0 };
	struct scsi_designator d[1];
	size_t n;
	char s[8];

	memcpy(buf, page, sizeof(page));
	cr_assert_eq(scsi_parse_vpd_devid(buf, sizeof(buf), d, 1, &n), 0);
	cr_assert_eq(n, 1);
	for (size_t cap = 1; cap <= sizeof(s); cap++) {
		memset(s, 'x', sizeof(s));
		cr_assert_eq(scsi_designator_name(d, n, s, cap), -ERANGE, "cap %zu", cap);
		cr_assert_eq(s[0], '\0', "cap %zu", cap);
	}
}

/* ================= VPD 0xB0 / 0xB2 ================= */

static const uint8_t vpd_b0[64] = {
	0x00, 0xb0, 0x00, 0x3c,
	0x00, 0x00, 0x00, 0x08,           /* WSNZ, max compare and write 8, optimal xfer granularity 8 */
	0x00, 0x00, 0x40, 0x00,           /* max transfer length 16384 */
	0x00, 0x00, 0x08, 0x00,           /* optimal transfer length 2048 */
	0x00, 0x00, 0x00, 0x00,           /* max prefetch */
	0x00, 0x40, 0x00, 0x00,           /* max unmap LBA count 0x400000 */
	0x00, 0x00, 0x01, 0x00,           /* max unmap descriptor count 256 */
	0x00, 0x00, 0x00, 0x08,           /* optimal unmap granularity 8 */
	0x80, 0x00, 0x00, 0x00,           /* UGAVALID, alignment 0 */
	0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, /* max write same length 0x100000000 */
};

Test(vpd, block_limits)
{
	struct scsi_block_limits bl;

	cr_assert_eq(scsi_parse_vpd_block_limits(vpd_b0, sizeof(vpd_b0), &bl), 0);
	cr_assert_eq(bl.max_xfer_len, 16384);
	cr_assert_eq(bl.opt_xfer_len, 2048);
	cr_assert_eq(bl.max_unmap_lba_count, 0x400000);
	cr_assert_eq(bl.max_unmap_desc_count, 256);
	cr_assert_eq(bl.unmap_granularity, 8);
	cr_assert_eq(bl.max_write_same_len, 0x100000000ull);
}

Test(vpd, block_limits_short_page)
{
	struct scsi_block_limits bl;
	uint8_t b[sizeof(vpd_b0)];

	/* SBC-2 style 16-byte page (page length 0x0c) in a 64-byte transfer */
	memcpy(b, vpd_b0, sizeof(b));
	b[3] = 0x0c;
	cr_assert_eq(scsi_parse_vpd_block_limits(b, sizeof(b), &bl), 0);
	cr_assert_eq(bl.max_xfer_len, 16384);
	cr_assert_eq(bl.opt_xfer_len, 2048);
	cr_assert_eq(bl.max_unmap_lba_count, 0);
	cr_assert_eq(bl.max_unmap_desc_count, 0);
	cr_assert_eq(bl.unmap_granularity, 0);
	cr_assert_eq(bl.max_write_same_len, 0);
	/* cut by the allocation length in the middle of a field */
	cr_assert_eq(scsi_parse_vpd_block_limits(vpd_b0, 43, &bl), 0);
	cr_assert_eq(bl.unmap_granularity, 8);
	cr_assert_eq(bl.max_write_same_len, 0);
	cr_assert_eq(scsi_parse_vpd_block_limits(vpd_b0, 10, &bl), 0);
	cr_assert_eq(bl.max_xfer_len, 0);
	cr_assert_eq(scsi_parse_vpd_block_limits(vpd_b0, 4, &bl), 0);
	cr_assert_eq(bl.opt_xfer_len, 0);
}

Test(vpd, block_limits_bad)
{
	struct scsi_block_limits bl;
	uint8_t b[sizeof(vpd_b0)];

	cr_assert_eq(scsi_parse_vpd_block_limits(vpd_b0, 3, &bl), -EPROTO);
	memcpy(b, vpd_b0, sizeof(b));
	b[1] = 0xb2;
	cr_assert_eq(scsi_parse_vpd_block_limits(b, sizeof(b), &bl), -EPROTO);
	cr_assert_eq(bl.max_xfer_len, 0);
}

Test(vpd, lbp)
{
	static const uint8_t b[] = { 0x00, 0xb2, 0x00, 0x04, 0x00, 0xe6, 0x02, 0x00 };
	struct scsi_lbp l;

	cr_assert_eq(scsi_parse_vpd_lbp(b, sizeof(b), &l), 0);
	cr_assert(l.lbpu);
	cr_assert(l.lbpws);
	cr_assert(l.lbpws10);
	cr_assert(l.lbprz);
	cr_assert(l.anc_sup);
	cr_assert_eq(l.provisioning_type, 2);
}

Test(vpd, lbp_bits)
{
	uint8_t b[] = { 0x00, 0xb2, 0x00, 0x04, 0x00, 0x80, 0xf9, 0x00 };
	struct scsi_lbp l;

	cr_assert_eq(scsi_parse_vpd_lbp(b, sizeof(b), &l), 0);
	cr_assert(l.lbpu);
	cr_assert_not(l.lbpws);
	cr_assert_not(l.lbpws10);
	cr_assert_not(l.lbprz);
	cr_assert_not(l.anc_sup);
	cr_assert_eq(l.provisioning_type, 1);
	b[5] = 0x48; /* LBPWS + an SBC-4 LBPRZ value with bit 2 clear */
	cr_assert_eq(scsi_parse_vpd_lbp(b, sizeof(b), &l), 0);
	cr_assert(l.lbpws);
	cr_assert_not(l.lbprz);
	/* cut before the provisioning type */
	b[5] = 0x24;
	cr_assert_eq(scsi_parse_vpd_lbp(b, 6, &l), 0);
	cr_assert(l.lbpws10);
	cr_assert(l.lbprz);
	cr_assert_eq(l.provisioning_type, 0);
}

Test(vpd, lbp_bad)
{
	uint8_t b[] = { 0x00, 0xb2, 0x00, 0x04, 0x00, 0xe6, 0x02, 0x00 };
	struct scsi_lbp l;

	cr_assert_eq(scsi_parse_vpd_lbp(b, 5, &l), -EPROTO);
	b[3] = 0x01; /* page length stops before byte 5 */
	cr_assert_eq(scsi_parse_vpd_lbp(b, sizeof(b), &l), -EPROTO);
	cr_assert_not(l.lbpu);
	b[3] = 0x04;
	b[1] = 0xb0;
	cr_assert_eq(scsi_parse_vpd_lbp(b, sizeof(b), &l), -EPROTO);
}

/* ================= REPORT LUNS ================= */

/* LUN 0, 1 (peripheral), 300 (flat), 0x3fff (flat), a bus-1 peripheral,
 * a logical unit addressed one, and a two-level one (skipped) */
static const uint8_t rl[8 + 7 * 8] = {
	0x00, 0x00, 0x00, 0x38, 0, 0, 0, 0,
	0x00, 0x00, 0, 0, 0, 0, 0, 0,
	0x00, 0x01, 0, 0, 0, 0, 0, 0,
	0x41, 0x2c, 0, 0, 0, 0, 0, 0,
	0x7f, 0xff, 0, 0, 0, 0, 0, 0,
	0x01, 0x02, 0, 0, 0, 0, 0, 0,
	0x80, 0x05, 0, 0, 0, 0, 0, 0,
	0x00, 0x02, 0x00, 0x03, 0, 0, 0, 0,
};

Test(report_luns, tgtd_two_luns)
{
	/* tgtd: the controller LUN 0 and a disk at LUN 1 */
	static const uint8_t b[] = { 0x00, 0x00, 0x00, 0x10, 0, 0, 0, 0, 0x00, 0x00, 0, 0, 0, 0, 0, 0,
				     0x00, 0x01, 0, 0, 0, 0, 0, 0 };
	uint16_t l[8];
	size_t n = 99, t = 99;

	cr_assert_eq(scsi_parse_report_luns(b, sizeof(b), l, ARRAY_SIZE(l), &n, &t), 0);
	cr_assert_eq(n, 2);
	cr_assert_eq(t, 2);
	cr_assert_eq(l[0], 0);
	cr_assert_eq(l[1], 1);
}

Test(report_luns, peripheral_and_flat)
{
	uint16_t l[16];
	size_t n = 99, t = 99;

	cr_assert_eq(scsi_parse_report_luns(rl, sizeof(rl), l, ARRAY_SIZE(l), &n, &t), 0);
	cr_assert_eq(t, 7);
	cr_assert_eq(n, 4);
	cr_assert_eq(l[0], 0);
	cr_assert_eq(l[1], 1);
	cr_assert_eq(l[2], 300);
	cr_assert_eq(l[3], 0x3fff);
}

Test(report_luns, truncated_list)
{
	uint16_t l[16];
	size_t n = 99, t = 99;

	/* the target has 7 but only 16 bytes (one entry) came back */
	cr_assert_eq(scsi_parse_report_luns(rl, 16, l, ARRAY_SIZE(l), &n, &t), 0);
	cr_assert_eq(t, 7);
	cr_assert_eq(n, 1);
	cr_assert_eq(l[0], 0);
	/* a partial entry is ignored */
	cr_assert_eq(scsi_parse_report_luns(rl, 8 + 8 + 8 + 5, l, ARRAY_SIZE(l), &n, &t), 0);
	cr_assert_eq(n, 2);
	/* header only */
	cr_assert_eq(scsi_parse_report_luns(rl, 8, l, ARRAY_SIZE(l), &n, &t), 0);
	cr_assert_eq(n, 0);
	cr_assert_eq(t, 7);
	/* the caller's array is the limit */
	cr_assert_eq(scsi_parse_report_luns(rl, sizeof(rl), l, 3, &n, &t), 0);
	cr_assert_eq(n, 3);
	cr_assert_eq(l[2], 300);
}

Test(report_luns, list_length_shorter_than_data)
{
	uint16_t l[16];
	size_t n = 99, t = 99;
	uint8_t b[sizeof(rl)];

	memcpy(b, rl, sizeof(b));
	b[3] = 0x10; /* two entries; the rest of the buffer is not part of the list */
	cr_assert_eq(scsi_parse_report_luns(b, sizeof(b), l, ARRAY_SIZE(l), &n, &t), 0);
	cr_assert_eq(t, 2);
	cr_assert_eq(n, 2);
	b[3] = 0x00;
	cr_assert_eq(scsi_parse_report_luns(b, sizeof(b), l, ARRAY_SIZE(l), &n, &t), 0);
	cr_assert_eq(t, 0);
	cr_assert_eq(n, 0);
	/* a huge claimed length */
	b[0] = 0xff;
	b[1] = 0xff;
	b[2] = 0xff;
	b[3] = 0xf8;
	cr_assert_eq(scsi_parse_report_luns(b, sizeof(b), l, ARRAY_SIZE(l), &n, &t), 0);
	cr_assert_eq(t, 0xfffffff8u / 8);
	cr_assert_eq(n, 4);
}

Test(report_luns, bad)
{
	uint16_t l[16];
	size_t n = 99, t = 99;
	uint8_t b[sizeof(rl)];

	cr_assert_eq(scsi_parse_report_luns(rl, 7, l, ARRAY_SIZE(l), &n, &t), -EPROTO);
	cr_assert_eq(n, 0);
	cr_assert_eq(t, 0);
	cr_assert_eq(scsi_parse_report_luns(NULL, 64, l, ARRAY_SIZE(l), &n, &t), -EPROTO);
	memcpy(b, rl, sizeof(b));
	b[3] = 0x3c; /* not a multiple of 8 */
	cr_assert_eq(scsi_parse_report_luns(b, sizeof(b), l, ARRAY_SIZE(l), &n, &t), -EPROTO);
}

Test(report_luns, lun_encode)
{
	cr_assert_eq(scsi_lun_encode(0), 0);
	cr_assert_eq(scsi_lun_encode(1), 0x0001000000000000ull);
	cr_assert_eq(scsi_lun_encode(255), 0x00ff000000000000ull);
	cr_assert_eq(scsi_lun_encode(256), 0x4100000000000000ull);
	cr_assert_eq(scsi_lun_encode(300), 0x412c000000000000ull);
	cr_assert_eq(scsi_lun_encode(0x3fff), 0x7fff000000000000ull);
	for (unsigned lun = 0; lun <= 0x3fff; lun++)
		cr_assert_eq(scsi_lun_decode(scsi_lun_encode((uint16_t)lun)), (int)lun);
	cr_assert_eq(scsi_lun_decode(0x0101000000000000ull), -EINVAL); /* peripheral, bus 1 */
	cr_assert_eq(scsi_lun_decode(0x0001000100000000ull), -EINVAL); /* a second level */
	cr_assert_eq(scsi_lun_decode(0x8001000000000000ull), -EINVAL); /* logical unit addressing */
}

Test(report_luns, lun_encode_round_trip)
{
	static const uint16_t in[] = { 0, 1, 17, 255, 256, 257, 1000, 0x3ffe, 0x3fff };
	uint8_t b[8 + 8 * ARRAY_SIZE(in)];
	uint16_t out[ARRAY_SIZE(in)];
	size_t n, t;

	memset(b, 0, sizeof(b));
	b[3] = (uint8_t)(8 * ARRAY_SIZE(in));
	for (size_t i = 0; i < ARRAY_SIZE(in); i++) {
		uint64_t v = scsi_lun_encode(in[i]);

		for (int k = 0; k < 8; k++)
			b[8 + 8 * i + k] = (uint8_t)(v >> (56 - 8 * k));
	}
	cr_assert_eq(scsi_parse_report_luns(b, sizeof(b), out, ARRAY_SIZE(out), &n, &t), 0);
	cr_assert_eq(n, ARRAY_SIZE(in));
	cr_assert_arr_eq(out, in, sizeof(in));
}

/* ================= READ CAPACITY ================= */

Test(capacity, rc10)
{
	/* 1 GiB of 512-byte blocks */
	static const uint8_t b[] = { 0x00, 0x1f, 0xff, 0xff, 0x00, 0x00, 0x02, 0x00 };
	struct scsi_capacity c;

	cr_assert_eq(scsi_parse_read_capacity10(b, sizeof(b), &c), 0);
	cr_assert_eq(c.nblocks, 0x200000);
	cr_assert_eq(c.block_size, 512);
	cr_assert_eq(c.lbppbe, 0);
	cr_assert_not(c.lbpme);
	cr_assert_not(c.lbprz);
}

Test(capacity, rc10_too_big)
{
	static const uint8_t b[] = { 0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x10, 0x00 };
	struct scsi_capacity c;

	/* the caller sees nblocks > 0xffffffff and asks READ CAPACITY(16) */
	cr_assert_eq(scsi_parse_read_capacity10(b, sizeof(b), &c), 0);
	cr_assert_eq(c.nblocks, 0x100000000ull);
	cr_assert_eq(c.block_size, 4096);
}

Test(capacity, rc10_bad)
{
	static const uint8_t b[] = { 0x00, 0x1f, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00 };
	struct scsi_capacity c;

	cr_assert_eq(scsi_parse_read_capacity10(b, sizeof(b), &c), -EMEDIUMTYPE); /* block length 0 */
	cr_assert_eq(c.block_size, 0);
	cr_assert_eq(scsi_parse_read_capacity10(b, 7, &c), -EPROTO);
	cr_assert_eq(scsi_parse_read_capacity10(NULL, 8, &c), -EPROTO);
}

Test(capacity, rc16)
{
	static const uint8_t b[32] = {
		0x00, 0x00, 0x00, 0x01, 0x23, 0x45, 0x67, 0x89, /* last LBA */
		0x00, 0x00, 0x02, 0x00,                         /* 512 */
		0x01,                                           /* PROT_EN: ignored */
		0x03,                                           /* LBPPBE 3: 4K physical */
		0xc0, 0x00,                                     /* LBPME, LBPRZ */
	};
	struct scsi_capacity c;

	cr_assert_eq(scsi_parse_read_capacity16(b, sizeof(b), &c), 0);
	cr_assert_eq(c.nblocks, 0x12345678aull);
	cr_assert_eq(c.block_size, 512);
	cr_assert_eq(c.lbppbe, 3);
	cr_assert(c.lbpme);
	cr_assert(c.lbprz);
}

Test(capacity, rc16_partial)
{
	uint8_t b[32] = { 0, 0, 0, 0, 0, 0, 0x0f, 0xff, 0x00, 0x00, 0x10, 0x00, 0x00, 0xf2, 0x80 };
	struct scsi_capacity c;

	cr_assert_eq(scsi_parse_read_capacity16(b, sizeof(b), &c), 0);
	cr_assert_eq(c.nblocks, 0x1000);
	cr_assert_eq(c.block_size, 4096);
	cr_assert_eq(c.lbppbe, 2);
	cr_assert(c.lbpme);
	cr_assert_not(c.lbprz);
	/* only the first 12 bytes came back */
	cr_assert_eq(scsi_parse_read_capacity16(b, 12, &c), 0);
	cr_assert_eq(c.nblocks, 0x1000);
	cr_assert_eq(c.lbppbe, 0);
	cr_assert_not(c.lbpme);
	cr_assert_eq(scsi_parse_read_capacity16(b, 14, &c), 0);
	cr_assert_eq(c.lbppbe, 2);
	cr_assert_not(c.lbpme);
}

Test(capacity, rc16_bad)
{
	uint8_t b[32] = { 0, 0, 0, 0, 0, 0, 0x0f, 0xff, 0x00, 0x00, 0x00, 0x00 };
	struct scsi_capacity c;

	cr_assert_eq(scsi_parse_read_capacity16(b, sizeof(b), &c), -EMEDIUMTYPE); /* block length 0 */
	cr_assert_eq(c.block_size, 0);
	b[10] = 0x02;
	cr_assert_eq(scsi_parse_read_capacity16(b, 11, &c), -EPROTO);
	memset(b, 0xff, 8); /* last LBA 2^64-1: nblocks would wrap */
	cr_assert_eq(scsi_parse_read_capacity16(b, sizeof(b), &c), -EPROTO);
	cr_assert_eq(scsi_parse_read_capacity16(NULL, 32, &c), -EPROTO);
}

/* ================= MODE SENSE ================= */

Test(mode_sense, ms6)
{
	/* tgtd answer to MODE SENSE(6) page 0x3f with DBD, header only part */
	uint8_t b[] = { 0x03, 0x00, 0x00, 0x00 };
	bool wp = true;

	cr_assert_eq(scsi_parse_mode_sense6_wp(b, sizeof(b), &wp), 0);
	cr_assert_not(wp);
	b[2] = 0x80;
	cr_assert_eq(scsi_parse_mode_sense6_wp(b, sizeof(b), &wp), 0);
	cr_assert(wp);
	b[2] = 0x10; /* DPOFUA only */
	cr_assert_eq(scsi_parse_mode_sense6_wp(b, sizeof(b), &wp), 0);
	cr_assert_not(wp);
}

Test(mode_sense, ms6_with_pages_and_descriptor)
{
	uint8_t b[4 + 8 + 20] = { 0x1f, 0x00, 0x90, 0x08 };
	bool wp = false;

	b[12] = 0x08;
	b[13] = 0x12;
	cr_assert_eq(scsi_parse_mode_sense6_wp(b, sizeof(b), &wp), 0);
	cr_assert(wp);
	/* truncated by the allocation length: header is enough */
	cr_assert_eq(scsi_parse_mode_sense6_wp(b, 4, &wp), 0);
	cr_assert(wp);
}

Test(mode_sense, ms6_bad)
{
	uint8_t b[] = { 0x03, 0x00, 0x80, 0x00 };
	bool wp = true;

	cr_assert_eq(scsi_parse_mode_sense6_wp(b, 3, &wp), -EPROTO);
	cr_assert_not(wp);
	b[0] = 0x02; /* mode data shorter than its header */
	cr_assert_eq(scsi_parse_mode_sense6_wp(b, sizeof(b), &wp), -EPROTO);
	b[0] = 0x0b;
	b[3] = 0x10; /* block descriptors past the mode data */
	cr_assert_eq(scsi_parse_mode_sense6_wp(b, sizeof(b), &wp), -EPROTO);
	cr_assert_eq(scsi_parse_mode_sense6_wp(NULL, 4, &wp), -EPROTO);
}

Test(mode_sense, ms10)
{
	uint8_t b[] = { 0x00, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00 };
	bool wp = true;

	cr_assert_eq(scsi_parse_mode_sense10_wp(b, sizeof(b), &wp), 0);
	cr_assert_not(wp);
	b[3] = 0x80;
	cr_assert_eq(scsi_parse_mode_sense10_wp(b, sizeof(b), &wp), 0);
	cr_assert(wp);
	/* WP in byte 2 is the medium type for MODE SENSE(10): not WP */
	b[2] = 0x80;
	b[3] = 0x00;
	cr_assert_eq(scsi_parse_mode_sense10_wp(b, sizeof(b), &wp), 0);
	cr_assert_not(wp);
	/* a long mode data length, cut short by the allocation length */
	b[0] = 0x01;
	b[3] = 0x80;
	cr_assert_eq(scsi_parse_mode_sense10_wp(b, sizeof(b), &wp), 0);
	cr_assert(wp);
}

Test(mode_sense, ms10_bad)
{
	uint8_t b[] = { 0x00, 0x06, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00 };
	bool wp = true;

	cr_assert_eq(scsi_parse_mode_sense10_wp(b, 7, &wp), -EPROTO);
	cr_assert_not(wp);
	b[1] = 0x05;
	cr_assert_eq(scsi_parse_mode_sense10_wp(b, sizeof(b), &wp), -EPROTO);
	b[1] = 0x0e;
	b[7] = 0x10; /* 16 bytes of block descriptors in 8 bytes of mode data after the header */
	cr_assert_eq(scsi_parse_mode_sense10_wp(b, sizeof(b), &wp), -EPROTO);
	b[7] = 0x08;
	cr_assert_eq(scsi_parse_mode_sense10_wp(b, sizeof(b), &wp), 0);
	cr_assert(wp);
}

/* ================= sense data ================= */

Test(sense, fixed_tgtd)
{
	/* tgtd sense_data_build(): ILLEGAL REQUEST, INVALID FIELD IN CDB */
	static const uint8_t s[18] = { 0x70, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00,
				       0x00, 0x00, 0x24, 0x00, 0x00, 0x00, 0x00, 0x00 };
	struct scsi_sense ss;

	cr_assert_eq(scsi_parse_sense(s, sizeof(s), &ss), 0);
	cr_assert_eq(ss.response_code, 0x70);
	cr_assert_eq(ss.key, SCSI_SK_ILLEGAL_REQUEST);
	cr_assert_eq(ss.asc, 0x24);
	cr_assert_eq(ss.ascq, 0x00);
	cr_assert_not(ss.info_valid);
	cr_assert_eq(ss.info, 0);
}

Test(sense, fixed_with_information)
{
	/* deferred error, VALID, MEDIUM ERROR at LBA 0x00123456, 11/04 */
	static const uint8_t s[18] = { 0xf1, 0x00, 0x03, 0x00, 0x12, 0x34, 0x56, 0x0a, 0x00, 0x00,
				       0x00, 0x00, 0x11, 0x04, 0x00, 0x00, 0x00, 0x00 };
	struct scsi_sense ss;

	cr_assert_eq(scsi_parse_sense(s, sizeof(s), &ss), 0);
	cr_assert_eq(ss.response_code, 0x71);
	cr_assert_eq(ss.key, SCSI_SK_MEDIUM_ERROR);
	cr_assert_eq(ss.asc, 0x11);
	cr_assert_eq(ss.ascq, 0x04);
	cr_assert(ss.info_valid);
	cr_assert_eq(ss.info, 0x00123456);
	/* exactly 14 bytes is enough */
	cr_assert_eq(scsi_parse_sense(s, 14, &ss), 0);
	cr_assert_eq(ss.ascq, 0x04);
}

Test(sense, fixed_short)
{
	static const uint8_t s[18] = { 0x70, 0x00, 0x06, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00,
				       0x00, 0x00, 0x29, 0x00, 0x00, 0x00, 0x00, 0x00 };
	struct scsi_sense ss;

	/* too short for ASC/ASCQ: -EPROTO, but the key is still there */
	cr_assert_eq(scsi_parse_sense(s, 3, &ss), -EPROTO);
	cr_assert_eq(ss.response_code, 0x70);
	cr_assert_eq(ss.key, SCSI_SK_UNIT_ATTENTION);
	cr_assert_eq(ss.asc, 0);
	cr_assert_eq(scsi_parse_sense(s, 13, &ss), -EPROTO);
	cr_assert_eq(ss.key, SCSI_SK_UNIT_ATTENTION);
	cr_assert_eq(ss.asc, 0x29);
	cr_assert_eq(ss.ascq, 0);
	cr_assert_eq(scsi_parse_sense(s, 2, &ss), -EPROTO);
	cr_assert_eq(ss.key, 0);
}

Test(sense, fixed_lying_additional_length)
{
	uint8_t s[18] = { 0x70, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
			  0x00, 0x00, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00 };
	struct scsi_sense ss;

	/* additional sense length 0: ASC/ASCQ are not part of the sense data */
	cr_assert_eq(scsi_parse_sense(s, sizeof(s), &ss), -EPROTO);
	cr_assert_eq(ss.key, SCSI_SK_NOT_READY);
	cr_assert_eq(ss.asc, 0);
	cr_assert_eq(ss.ascq, 0);
	s[7] = 0x06;
	cr_assert_eq(scsi_parse_sense(s, sizeof(s), &ss), 0);
	cr_assert_eq(ss.asc, 0x04);
	cr_assert_eq(ss.ascq, 0x01);
	/* additional length past the buffer: use what came */
	s[7] = 0xf4;
	cr_assert_eq(scsi_parse_sense(s, sizeof(s), &ss), 0);
	cr_assert_eq(ss.ascq, 0x01);
}

Test(sense, descriptor_with_information)
{
	/* MEDIUM ERROR 11/00 with an information descriptor (LBA 0x1_0000_0010) */
	static const uint8_t s[] = { 0x72, 0x03, 0x11, 0x00, 0x00, 0x00, 0x00, 0x0c,
				     0x00, 0x0a, 0x80, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x10 };
	struct scsi_sense ss;

	cr_assert_eq(scsi_parse_sense(s, sizeof(s), &ss), 0);
	cr_assert_eq(ss.response_code, 0x72);
	cr_assert_eq(ss.key, SCSI_SK_MEDIUM_ERROR);
	cr_assert_eq(ss.asc, 0x11);
	cr_assert_eq(ss.ascq, 0x00);
	cr_assert(ss.info_valid);
	cr_assert_eq(ss.info, 0x100000010ull);
}

Test(sense, descriptor_several)
{
	/* a sense-key-specific descriptor (type 2) first, then the information one; deferred */
	static const uint8_t s[] = { 0x73, 0x0b, 0x47, 0x03, 0x00, 0x00, 0x00, 0x14,
				     0x02, 0x06, 0x00, 0x00, 0x80, 0x00, 0x05, 0x00,
				     0x00, 0x0a, 0x80, 0x00, 0, 0, 0, 0, 0, 0, 0x12, 0x34 };
	struct scsi_sense ss;

	cr_assert_eq(scsi_parse_sense(s, sizeof(s), &ss), 0);
	cr_assert_eq(ss.response_code, 0x73);
	cr_assert_eq(ss.key, SCSI_SK_ABORTED_COMMAND);
	cr_assert_eq(ss.asc, 0x47);
	cr_assert_eq(ss.ascq, 0x03);
	cr_assert(ss.info_valid);
	cr_assert_eq(ss.info, 0x1234);
}

Test(sense, descriptor_no_info)
{
	static const uint8_t s[] = { 0x72, 0x06, 0x29, 0x00, 0x00, 0x00, 0x00, 0x00 };
	uint8_t nv[] = { 0x72, 0x03, 0x11, 0x00, 0x00, 0x00, 0x00, 0x0c,
			 0x00, 0x0a, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0x10 };
	struct scsi_sense ss;

	cr_assert_eq(scsi_parse_sense(s, sizeof(s), &ss), 0);
	cr_assert_eq(ss.key, SCSI_SK_UNIT_ATTENTION);
	cr_assert_eq(ss.asc, 0x29);
	cr_assert_not(ss.info_valid);
	/* information descriptor with VALID clear */
	cr_assert_eq(scsi_parse_sense(nv, sizeof(nv), &ss), 0);
	cr_assert_not(ss.info_valid);
	/* a too-short information descriptor is ignored */
	nv[7] = 0x06;
	nv[9] = 0x04;
	cr_assert_eq(scsi_parse_sense(nv, 14, &ss), 0);
	cr_assert_not(ss.info_valid);
}

Test(sense, descriptor_truncated_and_lying)
{
	uint8_t s[] = { 0x72, 0x03, 0x11, 0x00, 0x00, 0x00, 0x00, 0x0c,
			0x00, 0x0a, 0x80, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x10 };
	struct scsi_sense ss;

	/* cut short: header fields, no info */
	cr_assert_eq(scsi_parse_sense(s, 15, &ss), 0);
	cr_assert_eq(ss.key, SCSI_SK_MEDIUM_ERROR);
	cr_assert_eq(ss.asc, 0x11);
	cr_assert_not(ss.info_valid);
	cr_assert_eq(scsi_parse_sense(s, 9, &ss), 0);
	cr_assert_not(ss.info_valid);
	/* fewer than 8 bytes */
	cr_assert_eq(scsi_parse_sense(s, 7, &ss), -EPROTO);
	/* descriptor longer than the additional sense length says */
	s[7] = 0x08;
	cr_assert_eq(scsi_parse_sense(s, sizeof(s), &ss), -EPROTO);
	cr_assert_eq(ss.key, SCSI_SK_MEDIUM_ERROR);
	/* additional sense length ends inside a descriptor header */
	s[7] = 0x01;
	cr_assert_eq(scsi_parse_sense(s, sizeof(s), &ss), -EPROTO);
	/* descriptor length 0xff */
	s[7] = 0x0c;
	s[9] = 0xff;
	cr_assert_eq(scsi_parse_sense(s, sizeof(s), &ss), -EPROTO);
	/* additional sense length far beyond the buffer: what came is decoded */
	s[7] = 0xff;
	s[9] = 0x0a;
	cr_assert_eq(scsi_parse_sense(s, sizeof(s), &ss), 0);
	cr_assert(ss.info_valid);
	cr_assert_eq(ss.info, 0x100000010ull);
	cr_assert_eq(scsi_parse_sense(s, sizeof(s) - 1, &ss), 0);
	cr_assert_not(ss.info_valid);
}

Test(sense, garbage)
{
	static const uint8_t zero[18] = { 0 };
	static const uint8_t vendor[18] = { 0x7f, 0x00, 0x05 };
	static const uint8_t old[18] = { 0x74, 0x00, 0x05 };
	struct scsi_sense ss;

	cr_assert_eq(scsi_parse_sense(zero, sizeof(zero), &ss), -EPROTO);
	cr_assert_eq(scsi_parse_sense(vendor, sizeof(vendor), &ss), -EPROTO);
	cr_assert_eq(scsi_parse_sense(old, sizeof(old), &ss), -EPROTO);
	cr_assert_eq(scsi_parse_sense(zero, 0, &ss), -EPROTO);
	cr_assert_eq(scsi_parse_sense(NULL, 18, &ss), -EPROTO);
	cr_assert_eq(ss.key, 0);
	cr_assert_eq(ss.response_code, 0);
}

Test(sense, every_length_of_random_bytes)
{
	/* a cheap fuzz: every prefix of pseudo-random buffers with each response code */
	uint8_t b[SCSI_SENSE_MAX];
	uint32_t x = 12345;
	struct scsi_sense ss;

	for (int round = 0; round < 200; round++) {
		for (size_t i = 0; i < sizeof(b); i++) {
			x = x * 1103515245u + 12345u;
			b[i] = (uint8_t)(x >> 16);
		}
		b[0] = (uint8_t)(0x70 + round % 4);
		if (round % 3 == 0)
			b[7] = (uint8_t)(round % 40);
		for (size_t n = 0; n <= sizeof(b); n++) {
			int r = scsi_parse_sense(b, n, &ss);

			cr_assert(r == 0 || r == -EPROTO);
		}
	}
}

Test(vpd, every_length_of_random_bytes)
{
	uint8_t b[300];
	uint32_t x = 777;
	struct scsi_designator d[4];
	struct scsi_block_limits bl;
	struct scsi_lbp lbp;
	struct scsi_inquiry q;
	struct scsi_capacity cap;
	uint16_t luns[8];
	uint8_t pages[8];
	char s[64];
	size_t c, t;
	bool wp;

	for (int round = 0; round < 100; round++) {
		for (size_t i = 0; i < sizeof(b); i++) {
			x = x * 1103515245u + 12345u;
			b[i] = (uint8_t)(x >> 16);
		}
		b[2] = (uint8_t)(round % 2);
		for (size_t n = 0; n <= sizeof(b); n++) {
			b[1] = 0x83;
			(void)scsi_parse_vpd_devid(b, n, d, ARRAY_SIZE(d), &c);
			cr_assert_leq(c, ARRAY_SIZE(d));
			if (c)
				(void)scsi_designator_name(d, c, s, sizeof(s));
			b[1] = 0xb0;
			(void)scsi_parse_vpd_block_limits(b, n, &bl);
			b[1] = 0xb2;
			(void)scsi_parse_vpd_lbp(b, n, &lbp);
			b[1] = 0x00;
			(void)scsi_parse_vpd_supported(b, n, pages, ARRAY_SIZE(pages), &c);
			cr_assert_leq(c, ARRAY_SIZE(pages));
			b[1] = 0x80;
			(void)scsi_parse_vpd_serial(b, n, s, sizeof(s));
			cr_assert_lt(strlen(s), sizeof(s));
			(void)scsi_parse_inquiry(b, n, &q);
			(void)scsi_parse_read_capacity10(b, n, &cap);
			(void)scsi_parse_read_capacity16(b, n, &cap);
			(void)scsi_parse_mode_sense6_wp(b, n, &wp);
			(void)scsi_parse_mode_sense10_wp(b, n, &wp);
			(void)scsi_parse_report_luns(b, n, luns, ARRAY_SIZE(luns), &c, &t);
			cr_assert_leq(c, ARRAY_SIZE(luns));
		}
	}
}

/* ================= status / sense -> errno ================= */

static struct scsi_sense mk(uint8_t key, uint8_t asc, uint8_t ascq)
{
	struct scsi_sense s;

	memset(&s, 0, sizeof(s));
	s.response_code = 0x70;
	s.key = key;
	s.asc = asc;
	s.ascq = ascq;
	return s;
}

struct errno_case {
	uint8_t status;
	bool has_sense;
	uint8_t key, asc, ascq;
	int err;
	bool retry;
};

#define CC SCSI_STATUS_CHECK_CONDITION

static const struct errno_case errno_cases[] = {
	{ SCSI_STATUS_GOOD, false, 0, 0, 0, 0, false },
	{ SCSI_STATUS_GOOD, true, SCSI_SK_MEDIUM_ERROR, 0x11, 0, 0, false },
	{ SCSI_STATUS_CONDITION_MET, false, 0, 0, 0, 0, false },
	{ CC, false, 0, 0, 0, -EIO, false },
	{ CC, true, SCSI_SK_NOT_READY, 0x04, 0x01, -EAGAIN, true },
	{ CC, true, SCSI_SK_NOT_READY, 0x04, 0x02, -EIO, false },
	{ CC, true, SCSI_SK_NOT_READY, 0x04, 0x03, -EIO, false },
	{ CC, true, SCSI_SK_NOT_READY, 0x3a, 0x00, -ENOMEDIUM, false },
	{ CC, true, SCSI_SK_NOT_READY, 0x3a, 0x02, -ENOMEDIUM, false },
	{ CC, true, SCSI_SK_NOT_READY, 0x00, 0x00, -EIO, false },
	{ CC, true, SCSI_SK_MEDIUM_ERROR, 0x11, 0x00, -EIO, false },
	{ CC, true, SCSI_SK_MEDIUM_ERROR, 0x0c, 0x00, -EIO, false },
	{ CC, true, SCSI_SK_HARDWARE_ERROR, 0x44, 0x00, -EIO, false },
	{ CC, true, SCSI_SK_ILLEGAL_REQUEST, 0x20, 0x00, -EOPNOTSUPP, false },
	{ CC, true, SCSI_SK_ILLEGAL_REQUEST, 0x21, 0x00, -ENOSPC, false },
	{ CC, true, SCSI_SK_ILLEGAL_REQUEST, 0x24, 0x00, -EINVAL, false },
	{ CC, true, SCSI_SK_ILLEGAL_REQUEST, 0x25, 0x00, -ENXIO, false },
	{ CC, true, SCSI_SK_ILLEGAL_REQUEST, 0x26, 0x00, -EINVAL, false },
	{ CC, true, SCSI_SK_ILLEGAL_REQUEST, 0xff, 0xff, -EINVAL, false },
	{ CC, true, SCSI_SK_UNIT_ATTENTION, 0x29, 0x00, -EAGAIN, true },
	{ CC, true, SCSI_SK_UNIT_ATTENTION, 0x2a, 0x09, -EAGAIN, true },
	{ CC, true, SCSI_SK_DATA_PROTECT, 0x27, 0x00, -EROFS, false },
	{ CC, true, SCSI_SK_DATA_PROTECT, 0x00, 0x00, -EROFS, false },
	{ CC, true, SCSI_SK_BLANK_CHECK, 0x00, 0x00, -ENODATA, false },
	{ CC, true, SCSI_SK_VENDOR_SPECIFIC, 0x80, 0x00, -EIO, false },
	{ CC, true, SCSI_SK_COPY_ABORTED, 0x00, 0x00, -EIO, false },
	{ CC, true, SCSI_SK_ABORTED_COMMAND, 0x47, 0x03, -EAGAIN, true },
	{ CC, true, 0x0c, 0x00, 0x00, -EIO, false },
	{ CC, true, SCSI_SK_VOLUME_OVERFLOW, 0x00, 0x00, -ENOSPC, false },
	{ CC, true, SCSI_SK_MISCOMPARE, 0x1d, 0x00, -EILSEQ, false },
	{ CC, true, 0x0f, 0x00, 0x00, -EIO, false },
	{ CC, true, SCSI_SK_RECOVERED_ERROR, 0x17, 0x01, 0, false },
	{ CC, true, SCSI_SK_NO_SENSE, 0x00, 0x00, 0, false },
	{ SCSI_STATUS_BUSY, false, 0, 0, 0, -EBUSY, true },
	{ SCSI_STATUS_BUSY, true, SCSI_SK_ILLEGAL_REQUEST, 0x24, 0, -EBUSY, true },
	{ SCSI_STATUS_TASK_SET_FULL, false, 0, 0, 0, -EAGAIN, true },
	{ SCSI_STATUS_RESERVATION_CONFLICT, false, 0, 0, 0, -EACCES, false },
	{ SCSI_STATUS_ACA_ACTIVE, false, 0, 0, 0, -EIO, false },
	{ SCSI_STATUS_TASK_ABORTED, false, 0, 0, 0, -ECANCELED, false },
	{ 0x10, false, 0, 0, 0, -EIO, false }, /* obsolete INTERMEDIATE */
	{ 0x22, false, 0, 0, 0, -EIO, false }, /* obsolete COMMAND TERMINATED */
	{ 0xff, true, SCSI_SK_UNIT_ATTENTION, 0, 0, -EIO, false },
};

#undef CC

Test(errno_table, every_row)
{
	for (size_t i = 0; i < ARRAY_SIZE(errno_cases); i++) {
		const struct errno_case *c = &errno_cases[i];
		struct scsi_sense s = mk(c->key, c->asc, c->ascq);
		const struct scsi_sense *sp = c->has_sense ? &s : NULL;

		cr_expect_eq(scsi_status_to_errno(c->status, sp), c->err,
			     "case %zu: status 0x%02x key 0x%x %02x/%02x: %d, want %d", i, c->status, c->key, c->asc,
			     c->ascq, scsi_status_to_errno(c->status, sp), c->err);
		cr_expect_eq(scsi_status_retryable(c->status, sp), c->retry,
			     "case %zu: status 0x%02x key 0x%x %02x/%02x: retryable wrong", i, c->status, c->key,
			     c->asc, c->ascq);
	}
}

Test(errno_table, unusable_sense_is_no_sense)
{
	struct scsi_sense s;

	/* what scsi_parse_sense leaves after rejecting the response code */
	memset(&s, 0, sizeof(s));
	cr_assert_eq(scsi_status_to_errno(SCSI_STATUS_CHECK_CONDITION, &s), -EIO);
	cr_assert_not(scsi_status_retryable(SCSI_STATUS_CHECK_CONDITION, &s));
	s.response_code = 0x7f;
	s.key = SCSI_SK_UNIT_ATTENTION;
	cr_assert_eq(scsi_status_to_errno(SCSI_STATUS_CHECK_CONDITION, &s), -EIO);
	/* descriptor format counts */
	s.response_code = 0x72;
	cr_assert_eq(scsi_status_to_errno(SCSI_STATUS_CHECK_CONDITION, &s), -EAGAIN);
	cr_assert(scsi_status_retryable(SCSI_STATUS_CHECK_CONDITION, &s));
}

Test(errno_table, from_parsed_sense)
{
	static const uint8_t ua[18] = { 0x70, 0x00, 0x06, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00,
					0x00, 0x00, 0x29, 0x00, 0x00, 0x00, 0x00, 0x00 };
	static const uint8_t lba[] = { 0x72, 0x05, 0x21, 0x00, 0x00, 0x00, 0x00, 0x00 };
	struct scsi_sense s;

	cr_assert_eq(scsi_parse_sense(ua, sizeof(ua), &s), 0);
	cr_assert_eq(scsi_status_to_errno(SCSI_STATUS_CHECK_CONDITION, &s), -EAGAIN);
	cr_assert(scsi_status_retryable(SCSI_STATUS_CHECK_CONDITION, &s));
	/* a short fixed sense still yields the key */
	cr_assert_eq(scsi_parse_sense(ua, 3, &s), -EPROTO);
	cr_assert_eq(scsi_status_to_errno(SCSI_STATUS_CHECK_CONDITION, &s), -EAGAIN);
	cr_assert_eq(scsi_parse_sense(lba, sizeof(lba), &s), 0);
	cr_assert_eq(scsi_status_to_errno(SCSI_STATUS_CHECK_CONDITION, &s), -ENOSPC);
	cr_assert_not(scsi_status_retryable(SCSI_STATUS_CHECK_CONDITION, &s));
}

/* ---- retry classes, back-off and UNIT ATTENTION events ---- */

Test(retry, classes)
{
	struct scsi_sense s = mk(SCSI_SK_UNIT_ATTENTION, 0x29, 0x00);
	cr_assert_eq(scsi_status_retry(SCSI_STATUS_CHECK_CONDITION, &s), SCSI_RETRY_NOW);
	s = mk(SCSI_SK_ABORTED_COMMAND, 0x47, 0x03);
	cr_assert_eq(scsi_status_retry(SCSI_STATUS_CHECK_CONDITION, &s), SCSI_RETRY_NOW);
	s = mk(SCSI_SK_NOT_READY, 0x04, 0x01);
	cr_assert_eq(scsi_status_retry(SCSI_STATUS_CHECK_CONDITION, &s), SCSI_RETRY_WAIT);
	s = mk(SCSI_SK_NOT_READY, 0x04, 0x0a);
	cr_assert_eq(scsi_status_retry(SCSI_STATUS_CHECK_CONDITION, &s), SCSI_RETRY_WAIT);
	cr_assert_eq(scsi_status_to_errno(SCSI_STATUS_CHECK_CONDITION, &s), -EAGAIN);
	s = mk(SCSI_SK_NOT_READY, 0x04, 0x02); /* initializing command required: not transient */
	cr_assert_eq(scsi_status_retry(SCSI_STATUS_CHECK_CONDITION, &s), SCSI_RETRY_NO);
	cr_assert_eq(scsi_status_retry(SCSI_STATUS_BUSY, NULL), SCSI_RETRY_BACKOFF);
	cr_assert_eq(scsi_status_retry(SCSI_STATUS_TASK_SET_FULL, NULL), SCSI_RETRY_BACKOFF);
	cr_assert_eq(scsi_status_retry(SCSI_STATUS_GOOD, NULL), SCSI_RETRY_NO);
	cr_assert_eq(scsi_status_retry(SCSI_STATUS_RESERVATION_CONFLICT, NULL), SCSI_RETRY_NO);
}

Test(retry, delays)
{
	/* NOW: 8 immediate retries, then give up */
	for (unsigned a = 0; a < 8; a++)
		cr_assert_eq(scsi_retry_delay_ms(SCSI_RETRY_NOW, a, 0, 30000), 0);
	cr_assert_eq(scsi_retry_delay_ms(SCSI_RETRY_NOW, 8, 0, 30000), -1);
	/* BACKOFF: 10, 20, 40, ... capped at 1000, 16 tries, within the budget */
	cr_assert_eq(scsi_retry_delay_ms(SCSI_RETRY_BACKOFF, 0, 0, 30000), 10);
	cr_assert_eq(scsi_retry_delay_ms(SCSI_RETRY_BACKOFF, 1, 10, 30000), 20);
	cr_assert_eq(scsi_retry_delay_ms(SCSI_RETRY_BACKOFF, 6, 630, 30000), 640);
	cr_assert_eq(scsi_retry_delay_ms(SCSI_RETRY_BACKOFF, 7, 1270, 30000), 1000);
	cr_assert_eq(scsi_retry_delay_ms(SCSI_RETRY_BACKOFF, 15, 9270, 30000), 1000);
	cr_assert_eq(scsi_retry_delay_ms(SCSI_RETRY_BACKOFF, 16, 10270, 30000), -1);
	cr_assert_eq(scsi_retry_delay_ms(SCSI_RETRY_BACKOFF, 3, 995, 1000), -1);
	/* WAIT: every 250 ms while within the budget */
	cr_assert_eq(scsi_retry_delay_ms(SCSI_RETRY_WAIT, 0, 0, 30000), 250);
	cr_assert_eq(scsi_retry_delay_ms(SCSI_RETRY_WAIT, 100, 29750, 30000), 250);
	cr_assert_eq(scsi_retry_delay_ms(SCSI_RETRY_WAIT, 100, 29751, 30000), -1);
	cr_assert_eq(scsi_retry_delay_ms(SCSI_RETRY_NO, 0, 0, 30000), -1);
}

Test(retry, unit_attention_events)
{
	/* MEDIUM: the LU's data may have changed, cached reads go to it again */
	struct scsi_sense s = mk(SCSI_SK_UNIT_ATTENTION, 0x2a, 0x09);
	cr_assert_eq(scsi_ua_event(&s), SCSI_UA_CAPACITY | SCSI_UA_MEDIUM);
	s = mk(SCSI_SK_UNIT_ATTENTION, 0x3f, 0x0e);
	cr_assert_eq(scsi_ua_event(&s), SCSI_UA_LUNS);
	s = mk(SCSI_SK_UNIT_ATTENTION, 0x29, 0x00);
	cr_assert_eq(scsi_ua_event(&s), SCSI_UA_PROBE | SCSI_UA_MEDIUM);
	s = mk(SCSI_SK_UNIT_ATTENTION, 0x29, 0x07);
	cr_assert_eq(scsi_ua_event(&s), SCSI_UA_PROBE | SCSI_UA_MEDIUM);
	s = mk(SCSI_SK_UNIT_ATTENTION, 0x28, 0x00);
	cr_assert_eq(scsi_ua_event(&s), SCSI_UA_PROBE | SCSI_UA_MEDIUM);
	s = mk(SCSI_SK_UNIT_ATTENTION, 0x2a, 0x01); /* mode parameters: the data is the same */
	cr_assert_eq(scsi_ua_event(&s), SCSI_UA_PROBE);
	s = mk(SCSI_SK_UNIT_ATTENTION, 0x3f, 0x01); /* microcode */
	cr_assert_eq(scsi_ua_event(&s), SCSI_UA_PROBE);
	s = mk(SCSI_SK_UNIT_ATTENTION, 0x3f, 0x03);
	cr_assert_eq(scsi_ua_event(&s), SCSI_UA_PROBE | SCSI_UA_MEDIUM);
	s = mk(SCSI_SK_UNIT_ATTENTION, 0x2a, 0x03); /* reservations preempted: nothing to re-read */
	cr_assert_eq(scsi_ua_event(&s), 0);
	s = mk(SCSI_SK_NOT_READY, 0x2a, 0x09); /* not a UNIT ATTENTION */
	cr_assert_eq(scsi_ua_event(&s), 0);
	cr_assert_eq(scsi_ua_event(NULL), 0);
	memset(&s, 0, sizeof(s)); /* unusable sense */
	s.key = SCSI_SK_UNIT_ATTENTION;
	s.asc = 0x2a;
	s.ascq = 0x09;
	cr_assert_eq(scsi_ua_event(&s), 0);
}
