/* SPDX-License-Identifier: MIT */
/* initiator/lun/lun_ident.c: the identity of a LUN and the comparison of two paths' probes. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "initiator/lun/lun_ident.h"

static void desig(struct scsi_designator *d, uint8_t code_set, uint8_t type, const char *bytes, uint8_t len)
{
	memset(d, 0, sizeof(*d));
	d->code_set = code_set;
	d->association = 0;
	d->type = type;
	d->len = len;
	memcpy(d->id, bytes, len);
}

/* A disk as tgtd's probe reports it: NAA 6 + T10 vendor id, serial, 128 Ki blocks of 512 bytes. */
static void probe(struct iscsi_lun_info *info)
{
	memset(info, 0, sizeof(*info));
	info->lun = 1;
	info->inq.device_type = 0;
	info->cap.nblocks = 131072;
	info->cap.block_size = 512;
	snprintf(info->serial, sizeof(info->serial), "beaf11");
	desig(&info->lu_desig[0], 1, SCSI_DESIG_NAA, "\x60\x00\x0e\xd5\x3a\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb",
	      16);
	desig(&info->lu_desig[1], 2, SCSI_DESIG_T10, "IET     VIRTUAL-DISK beaf11", 27);
	info->n_lu_desig = 2;
}

static bool same(const struct iscsi_lun_info *x, const struct iscsi_lun_info *y, char *why, size_t cap)
{
	struct iscsi_lun_ident a, b;
	iscsi_lun_ident_from_info(x, &a);
	iscsi_lun_ident_from_info(y, &b);
	return iscsi_lun_ident_same(&a, &b, why, cap);
}

Test(lun_ident, from_info_copies_the_identity)
{
	struct iscsi_lun_info info;
	probe(&info);
	struct iscsi_lun_ident id;
	iscsi_lun_ident_from_info(&info, &id);
	cr_assert_eq(id.device_type, 0);
	cr_assert_str_eq(id.serial, "beaf11");
	cr_assert_eq(id.nblocks, 131072);
	cr_assert_eq(id.block_size, 512);
	cr_assert_eq(id.n_desig, 2);
	cr_assert_eq(id.desig[0].type, SCSI_DESIG_NAA);
	cr_assert_eq(id.desig[1].len, 27);
	/* a non-disk: no capacity taken */
	info.inq.device_type = 0x0c;
	iscsi_lun_ident_from_info(&info, &id);
	cr_assert_eq(id.nblocks, 0);
	cr_assert_eq(id.block_size, 0);
}

Test(lun_ident, identical)
{
	struct iscsi_lun_info a, b;
	probe(&a);
	probe(&b);
	char why[128] = "x";
	cr_assert(same(&a, &b, why, sizeof(why)));
	cr_assert_str_eq(why, "");
	cr_assert(same(&a, &b, NULL, 0));
}

Test(lun_ident, designators_reordered_are_the_same)
{
	struct iscsi_lun_info a, b;
	probe(&a);
	probe(&b);
	struct scsi_designator t = b.lu_desig[0];
	b.lu_desig[0] = b.lu_desig[1];
	b.lu_desig[1] = t;
	char why[128];
	cr_assert(same(&a, &b, why, sizeof(why)), "%s", why);
	cr_assert_str_eq(why, "");
	/* a duplicate does not make a different set */
	b.lu_desig[2] = b.lu_desig[0];
	b.n_lu_desig = 3;
	cr_assert(same(&a, &b, why, sizeof(why)), "%s", why);
}

Test(lun_ident, one_designator_differs)
{
	struct iscsi_lun_info a, b;
	probe(&a);
	probe(&b);
	b.lu_desig[0].id[15] = 0xbc;
	char why[128];
	cr_assert_not(same(&a, &b, why, sizeof(why)));
	cr_assert_str_eq(why, "designator NAA 60000ed53a112233445566778899aabb only on the first");
	/* one more on the second path only */
	probe(&b);
	desig(&b.lu_desig[2], 1, SCSI_DESIG_EUI64, "\x00\x11\x22\x33\x44\x55\x66\x77", 8);
	b.n_lu_desig = 3;
	cr_assert_not(same(&a, &b, why, sizeof(why)));
	cr_assert_str_eq(why, "designator EUI-64 0011223344556677 only on the second");
	/* same bytes, another code set: different */
	probe(&b);
	b.lu_desig[1].code_set = 3;
	cr_assert_not(same(&a, &b, why, sizeof(why)));
	cr_assert_str_eq(why, "designator T10 IET     VIRTUAL-DISK beaf11 only on the first");
	/* a T10 id padded with NULs and spaces is shown without them */
	probe(&b);
	desig(&b.lu_desig[1], 2, SCSI_DESIG_T10, "IET     00010001 \0\0\0", 20);
	cr_assert_not(same(&a, &b, why, sizeof(why)));
	cr_assert_str_eq(why, "designator T10 IET     VIRTUAL-DISK beaf11 only on the first");
	cr_assert(same(&b, &b, why, sizeof(why)));
	iscsi_lun_ident_same(&(struct iscsi_lun_ident){0}, &(struct iscsi_lun_ident){.n_desig = 1, .desig = {b.lu_desig[1]}},
			     why, sizeof(why));
	cr_assert_str_eq(why, "designator T10 IET     00010001 only on the second");
}

Test(lun_ident, serial_differs)
{
	struct iscsi_lun_info a, b;
	probe(&a);
	probe(&b);
	snprintf(b.serial, sizeof(b.serial), "beaf12");
	char why[128];
	cr_assert_not(same(&a, &b, why, sizeof(why)));
	cr_assert_str_eq(why, "serial: \"beaf11\" vs \"beaf12\"");
}

Test(lun_ident, device_type_differs)
{
	struct iscsi_lun_info a, b;
	probe(&a);
	probe(&b);
	b.inq.device_type = 0x05;
	char why[128];
	cr_assert_not(same(&a, &b, why, sizeof(why)));
	cr_assert_str_eq(why, "device type: 0x00 vs 0x05");
}

Test(lun_ident, capacity_differs)
{
	struct iscsi_lun_info a, b;
	probe(&a);
	probe(&b);
	b.cap.nblocks = 262144;
	char why[128];
	cr_assert_not(same(&a, &b, why, sizeof(why)));
	cr_assert_str_eq(why, "capacity: 131072 vs 262144 blocks");
	/* non-disks: capacity is not part of the identity */
	a.inq.device_type = b.inq.device_type = 0x0c;
	cr_assert(same(&a, &b, why, sizeof(why)), "%s", why);
}

Test(lun_ident, block_size_differs)
{
	struct iscsi_lun_info a, b;
	probe(&a);
	probe(&b);
	b.cap.block_size = 4096;
	char why[128];
	cr_assert_not(same(&a, &b, why, sizeof(why)));
	cr_assert_str_eq(why, "block size: 512 vs 4096 bytes");
}

Test(lun_ident, first_difference_wins_and_why_truncates)
{
	struct iscsi_lun_info a, b;
	probe(&a);
	probe(&b);
	snprintf(b.serial, sizeof(b.serial), "other");
	b.cap.block_size = 4096;
	char why[10];
	cr_assert_not(same(&a, &b, why, sizeof(why)));
	cr_assert_str_eq(why, "serial: \"");
}

Test(lun_ident, no_designators_on_either_side)
{
	struct iscsi_lun_info a, b;
	probe(&a);
	probe(&b);
	a.n_lu_desig = b.n_lu_desig = 0;
	char why[128];
	cr_assert(same(&a, &b, why, sizeof(why)));
	b.n_lu_desig = 1;
	cr_assert_not(same(&a, &b, why, sizeof(why)));
	cr_assert_str_eq(why, "designator NAA 60000ed53a112233445566778899aabb only on the second");
}

/* The identity of info with its designators replaced by d[0..n). */
static bool unique(const struct scsi_designator *d, size_t n, const char *serial, char *why, size_t cap)
{
	struct iscsi_lun_info info;
	probe(&info);
	memcpy(info.lu_desig, d, n * sizeof(*d));
	info.n_lu_desig = n;
	snprintf(info.serial, sizeof(info.serial), "%s", serial);
	struct iscsi_lun_ident id;
	iscsi_lun_ident_from_info(&info, &id);
	return iscsi_lun_ident_unique(&id, why, cap);
}

Test(lun_ident, unique_when_a_designator_names_the_lu_worldwide)
{
	static const struct {
		uint8_t code_set, type;
		const char *bytes;
		uint8_t len;
		const char *serial;
	} cases[] = {
		/* NAA 6 with a company ID (LIO: 00-14-05), NAA 5 and NAA 2 with one */
		{1, SCSI_DESIG_NAA, "\x60\x01\x40\x5f\xa4\xe0\x00\x01\x00\x00\x00\x00\x00\x00\x00\xa1", 16, ""},
		{1, SCSI_DESIG_NAA, "\x50\x01\x40\x5f\xa4\xe0\x00\x01", 8, ""},
		{1, SCSI_DESIG_NAA, "\x20\x00\x00\x14\x05\x00\x00\x01", 8, ""},
		/* EUI-64 with a company ID, a SCSI name string */
		{1, SCSI_DESIG_EUI64, "\x00\x14\x05\x33\x44\x55\x66\x77", 8, ""},
		{3, SCSI_DESIG_SCSI_NAME, "naa.6001405fa4e00001", 20, ""},
		/* a T10 vendor ID holding the unit serial number (spaces around it trimmed) */
		{2, SCSI_DESIG_T10, "LIO-ORG disk0 5fa4e0001", 23, "  5fa4e0001 "},
	};
	struct scsi_designator d[2];
	char why[160];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		desig(&d[0], cases[i].code_set, cases[i].type, cases[i].bytes, cases[i].len);
		cr_assert(unique(d, 1, cases[i].serial, why, sizeof(why)), "case %zu: %s", i, why);
	}
	/* one worldwide designator is enough */
	desig(&d[0], 1, SCSI_DESIG_NAA, "\x30\x00\x00\x01\x00\x00\x00\x01", 8);
	desig(&d[1], 1, SCSI_DESIG_NAA, "\x60\x01\x40\x5f\xa4\xe0\x00\x01\x00\x00\x00\x00\x00\x00\x00\xa1", 16);
	cr_assert(unique(d, 2, "", why, sizeof(why)));
}

Test(lun_ident, not_unique_as_tgtd_reports_it)
{
	struct scsi_designator d[3];
	char why[160];
	/* tgtd 1.0.x: T10 "IET" + tid/lun, NAA 3 and NAA 6 with company ID 0, serial "beaf11" */
	desig(&d[0], 2, SCSI_DESIG_T10, "IET     00010001", 16);
	desig(&d[1], 1, SCSI_DESIG_NAA, "\x30\x00\x00\x01\x00\x00\x00\x01", 8);
	desig(&d[2], 1, SCSI_DESIG_NAA, "\x60\x00\x00\x00\x00\x00\x0e\x00\x00\x00\x00\x01\x00\x01\x00\x00", 16);
	cr_assert_not(unique(d, 3, "beaf11", why, sizeof(why)));
	cr_assert_str_eq(why, "T10 vendor ID without the serial, NAA 3 (locally assigned), NAA 6 with company ID 0");
	/* EUI-64 with company ID 0, vendor specific, MD5 */
	desig(&d[0], 1, SCSI_DESIG_EUI64, "\x00\x00\x00\x33\x44\x55\x66\x77", 8);
	desig(&d[1], 1, SCSI_DESIG_VENDOR, "\x01\x02", 2);
	desig(&d[2], 1, SCSI_DESIG_MD5, "0123456789abcdef", 16);
	cr_assert_not(unique(d, 3, "", why, sizeof(why)));
	cr_assert_str_eq(why, "EUI-64 with company ID 0, designator type 0, designator type 7");
	/* a T10 vendor ID and an empty serial; nothing at all */
	desig(&d[0], 2, SCSI_DESIG_T10, "IET     00010001", 16);
	cr_assert_not(unique(d, 1, "", why, sizeof(why)));
	cr_assert_not(unique(d, 0, "", why, sizeof(why)));
	cr_assert_str_eq(why, "no designator");
	cr_assert_not(unique(d, 0, "", NULL, 0));
}
