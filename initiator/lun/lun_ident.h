/* SPDX-License-Identifier: MIT */
/*
 * The identity of a LUN as multipath needs it: two paths lead to the same
 * logical unit only if they report the same VPD 0x83 logical-unit
 * designators (SPC-4 §7.8.6, association 0: NAA, EUI-64, T10), the same
 * unit serial number (VPD 0x80, SPC-4 §7.8.15), the same peripheral device
 * type (standard INQUIRY, SPC-4 §6.6.2) and, for a disk, the same READ
 * CAPACITY (SBC-4 §5.20/§5.21: number of logical blocks and logical block
 * length).  Built from a probe result (struct iscsi_lun_info, lun.h).
 * Pure: no I/O, no locks; values are copied, nothing is owned.
 */
#ifndef ISERFUSE_LUN_IDENT_H
#define ISERFUSE_LUN_IDENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lun.h"
#include "initiator/scsi/scsi.h"

#define ISCSI_LUN_IDENT_DESIG_MAX 4

struct iscsi_lun_ident {
	uint8_t device_type;  /* peripheral device type: 0 = disk */
	char serial[256];     /* VPD 0x80 PRODUCT SERIAL NUMBER, "" if none */
	uint64_t nblocks;     /* logical blocks (disks only, else 0) */
	uint32_t block_size;  /* logical block length, bytes (disks only, else 0) */
	struct scsi_designator desig[ISCSI_LUN_IDENT_DESIG_MAX]; /* LU designators, page order */
	size_t n_desig;
};

/*
 * The identity of the probed LUN info into *out (cleared first): device
 * type, serial, the LU designators, and for a disk (device type 0) the
 * capacity and block size.
 */
void iscsi_lun_ident_from_info(const struct iscsi_lun_info *info, struct iscsi_lun_ident *out);

/*
 * Whether a and b identify the same logical unit.  Compared in this
 * order, the first difference ending it: the designator sets (as sets:
 * order and duplicates do not matter; a designator equals another when
 * code set, association, type, length and bytes all match), the serial,
 * the device type, then for disks the number of blocks and the block
 * length.  why (cap bytes, may be NULL/0) gets "" when they are the same,
 * else a one-line reason naming the difference and both values (such as
 * "capacity: 131072 vs 262144 blocks"), truncated to cap.
 */
bool iscsi_lun_ident_same(const struct iscsi_lun_ident *a, const struct iscsi_lun_ident *b, char *why, size_t cap);

/*
 * Whether the identity names the logical unit worldwide, so that two
 * targets cannot both report it: some LU designator is an NAA IEEE
 * Extended, Registered or Registered Extended one (NAA 2, 5, 6; SPC-4
 * §7.8.6.6) or an EUI-64 based one (§7.8.6.5) with a company ID other than
 * 0, a SCSI name string (§7.8.6.11), or a T10 vendor ID based one
 * (§7.8.6.4) whose vendor specific part holds the unit serial number.  An
 * NAA Locally Assigned (3) designator, a T10 vendor ID without the serial,
 * a vendor specific or MD5 one, or none at all does not (tgtd derives its
 * designators and serial from the target id and LUN number: two tgtd
 * processes give the same).  why (cap bytes, may be NULL/0) gets what the
 * identity rests on when it is not unique, such as "NAA 6 with company ID
 * 0, NAA 3 (locally assigned), T10 without the serial".
 */
bool iscsi_lun_ident_unique(const struct iscsi_lun_ident *id, char *why, size_t cap);

#endif
