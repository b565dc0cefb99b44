/* SPDX-License-Identifier: MIT */
/*
 * SCSI layer: CDB builders and response parsers for the commands iserfuse
 * issues (SPC-4, SBC-3), sense data in fixed and descriptor format, and the
 * one table that maps SCSI status and sense to a negative errno.
 *
 * Pure functions: no I/O, no allocation.  Every parser takes the buffer and
 * the number of valid bytes in it (the transfer length minus the residual)
 * and never reads past that; malformed or truncated data gives -EPROTO.
 */
#ifndef ISERFUSE_SCSI_H
#define ISERFUSE_SCSI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SCSI_CDB_MAX 16u
#define SCSI_SENSE_MAX 252u

/* SAM status codes */
enum scsi_status {
	SCSI_STATUS_GOOD = 0x00,
	SCSI_STATUS_CHECK_CONDITION = 0x02,
	SCSI_STATUS_CONDITION_MET = 0x04,
	SCSI_STATUS_BUSY = 0x08,
	SCSI_STATUS_RESERVATION_CONFLICT = 0x18,
	SCSI_STATUS_TASK_SET_FULL = 0x28,
	SCSI_STATUS_ACA_ACTIVE = 0x30,
	SCSI_STATUS_TASK_ABORTED = 0x40,
};

/* Sense keys (SPC-4 §4.5.6) */
enum scsi_sense_key {
	SCSI_SK_NO_SENSE = 0x0,
	SCSI_SK_RECOVERED_ERROR = 0x1,
	SCSI_SK_NOT_READY = 0x2,
	SCSI_SK_MEDIUM_ERROR = 0x3,
	SCSI_SK_HARDWARE_ERROR = 0x4,
	SCSI_SK_ILLEGAL_REQUEST = 0x5,
	SCSI_SK_UNIT_ATTENTION = 0x6,
	SCSI_SK_DATA_PROTECT = 0x7,
	SCSI_SK_BLANK_CHECK = 0x8,
	SCSI_SK_VENDOR_SPECIFIC = 0x9,
	SCSI_SK_COPY_ABORTED = 0xa,
	SCSI_SK_ABORTED_COMMAND = 0xb,
	SCSI_SK_VOLUME_OVERFLOW = 0xd,
	SCSI_SK_MISCOMPARE = 0xe,
};

/* Opcodes used */
enum scsi_opcode {
	SCSI_OP_TEST_UNIT_READY = 0x00,
	SCSI_OP_INQUIRY = 0x12,
	SCSI_OP_MODE_SENSE_6 = 0x1a,
	SCSI_OP_READ_CAPACITY_10 = 0x25,
	SCSI_OP_READ_10 = 0x28,
	SCSI_OP_WRITE_10 = 0x2a,
	SCSI_OP_SYNCHRONIZE_CACHE_10 = 0x35,
	SCSI_OP_UNMAP = 0x42,
	SCSI_OP_MODE_SENSE_10 = 0x5a,
	SCSI_OP_READ_16 = 0x88,
	SCSI_OP_WRITE_16 = 0x8a,
	SCSI_OP_SYNCHRONIZE_CACHE_16 = 0x91,
	SCSI_OP_WRITE_SAME_16 = 0x93,
	SCSI_OP_SERVICE_ACTION_IN_16 = 0x9e, /* READ CAPACITY(16) is SA 0x10, GET LBA STATUS SA 0x12 */
	SCSI_OP_REPORT_LUNS = 0xa0,
	SCSI_OP_MAINTENANCE_IN = 0xa3, /* REPORT TARGET PORT GROUPS is SA 0x0a */
};

/* Parsed sense data (SPC-4 §4.5) */
struct scsi_sense {
	uint8_t response_code;   /* 0x70/0x71 fixed, 0x72/0x73 descriptor */
	uint8_t key;             /* enum scsi_sense_key */
	uint8_t asc, ascq;
	bool info_valid;
	uint64_t info;           /* INFORMATION field / descriptor type 0 */
};

/* ---- CDB builders: fill `cdb` (16 bytes, unused tail zeroed), return its length in bytes ---- */

size_t scsi_cdb_test_unit_ready(uint8_t cdb[SCSI_CDB_MAX]);
/* INQUIRY (SPC-4 §6.6): evpd=false gives the standard data (page must be 0). alloc_len in bytes. */
size_t scsi_cdb_inquiry(uint8_t cdb[SCSI_CDB_MAX], bool evpd, uint8_t page, uint16_t alloc_len);
/* REPORT LUNS (SPC-4 §6.33), SELECT REPORT 0; alloc_len in bytes (>= 16). */
size_t scsi_cdb_report_luns(uint8_t cdb[SCSI_CDB_MAX], uint32_t alloc_len);
/* READ CAPACITY(10) (SBC-3 §5.15), 8 bytes of data. */
size_t scsi_cdb_read_capacity10(uint8_t cdb[SCSI_CDB_MAX]);
/* READ CAPACITY(16) (SBC-3 §5.16); alloc_len bytes (32 is enough). */
size_t scsi_cdb_read_capacity16(uint8_t cdb[SCSI_CDB_MAX], uint32_t alloc_len);
/*
 * READ (SBC-3 §5.8/§5.11) or WRITE (§5.32/§5.35) of `nblocks` logical
 * blocks at `lba`: the 10-byte form when lba <= 0xffffffff and nblocks <=
 * 0xffff, else the 16-byte form.  nblocks must be > 0.
 */
size_t scsi_cdb_read(uint8_t cdb[SCSI_CDB_MAX], uint64_t lba, uint32_t nblocks, bool fua);
size_t scsi_cdb_write(uint8_t cdb[SCSI_CDB_MAX], uint64_t lba, uint32_t nblocks, bool fua);
/* SYNCHRONIZE CACHE (SBC-3 §5.22/§5.23): 16-byte form if use16, else 10; nblocks 0 = to the end. */
size_t scsi_cdb_sync_cache(uint8_t cdb[SCSI_CDB_MAX], bool use16, uint64_t lba, uint32_t nblocks);
/* MODE SENSE(6) / (10) (SPC-4 §6.11/§6.12), PC=current, DBD set; alloc_len in bytes. */
size_t scsi_cdb_mode_sense6(uint8_t cdb[SCSI_CDB_MAX], uint8_t page, uint8_t subpage, uint8_t alloc_len);
size_t scsi_cdb_mode_sense10(uint8_t cdb[SCSI_CDB_MAX], uint8_t page, uint8_t subpage, uint16_t alloc_len);
/*
 * REPORT TARGET PORT GROUPS (SPC-4 §6.36): MAINTENANCE IN (0xA3), service
 * action 0x0A, PARAMETER DATA FORMAT 001b (the extended header, with the
 * implicit transition time); alloc_len in bytes (>= 4).  12-byte CDB.
 * Parsed by alua_parse_rtpg (alua.h).
 */
size_t scsi_cdb_report_tpgs(uint8_t cdb[SCSI_CDB_MAX], uint32_t alloc_len);

/* ---- Logical block provisioning (SBC-3 §4.7) ---- */

/* One UNMAP block descriptor (SBC-3 §5.28.2): nblocks logical blocks from lba. */
struct scsi_lba_range {
	uint64_t lba;
	uint32_t nblocks;
};

/* Bytes an UNMAP parameter list with n block descriptors takes: 8 + 16 * n. */
#define SCSI_UNMAP_PARAM_LEN(n) (8u + 16u * (size_t)(n))

/*
 * UNMAP (SBC-3 §5.28) with a parameter list of param_len bytes (as built
 * by scsi_build_unmap_param), ANCHOR 0, GROUP NUMBER 0.  10-byte CDB.
 */
size_t scsi_cdb_unmap(uint8_t cdb[SCSI_CDB_MAX], uint16_t param_len);
/*
 * The UNMAP parameter list (SBC-3 §5.28.2) for the n ranges into buf (cap
 * bytes): header (UNMAP DATA LENGTH, BLOCK DESCRIPTOR DATA LENGTH) and one
 * 16-byte descriptor per range.  Returns the list length in bytes, or 0
 * when n is 0, the list does not fit in cap or exceeds the 16-bit lengths.
 */
size_t scsi_build_unmap_param(uint8_t *buf, size_t cap, const struct scsi_lba_range *r, size_t n);
/*
 * WRITE SAME(16) (SBC-3 §5.43) of nblocks logical blocks at lba from one
 * block of data-out; unmap sets the UNMAP bit (the blocks may be
 * deallocated instead of written).  nblocks 0 means "to the end" on
 * targets with WSNZ 0: callers always pass > 0.  16-byte CDB.
 */
size_t scsi_cdb_write_same16(uint8_t cdb[SCSI_CDB_MAX], uint64_t lba, uint32_t nblocks, bool unmap);
/* GET LBA STATUS (SBC-3 §5.8): status from lba on; alloc_len bytes (>= 24 for one descriptor). */
size_t scsi_cdb_get_lba_status(uint8_t cdb[SCSI_CDB_MAX], uint64_t lba, uint32_t alloc_len);

enum scsi_provisioning_status {
	SCSI_LBA_MAPPED = 0,      /* mapped (or unknown) */
	SCSI_LBA_DEALLOCATED = 1,
	SCSI_LBA_ANCHORED = 2,
};
struct scsi_lba_status {      /* one LBA status descriptor (SBC-3 §5.8.2) */
	uint64_t lba;
	uint32_t nblocks;         /* > 0 */
	uint8_t status;           /* enum scsi_provisioning_status (other values kept as sent) */
};
/*
 * GET LBA STATUS parameter data (SBC-3 §5.8.2): the descriptors in order
 * (up to max), *count set, *more set when the PARAMETER DATA LENGTH
 * announces descriptors beyond what len (or max) held.  -EPROTO when the
 * header is missing, PARAMETER DATA LENGTH is not 4 + 16 * n, a
 * descriptor has zero blocks or an extent wrapping past 2^64, or the
 * descriptors are not in ascending, non-overlapping LBA order.
 */
int scsi_parse_lba_status(const uint8_t *buf, size_t len, struct scsi_lba_status *out, size_t max,
			  size_t *count, bool *more);
/*
 * Of the n descriptors st (in the order scsi_parse_lba_status checked),
 * the blocks in [from, end) that are deallocated (SBC-3 §4.7.4.3:
 * PROVISIONING STATUS 1; anchored ones hold their resources and count as
 * used), counted from `from` on as long as the descriptors cover the range
 * without a gap.  *next gets the first LBA they do not cover (end at
 * most): where the next GET LBA STATUS starts.
 */
uint64_t scsi_lba_status_deallocated(const struct scsi_lba_status *st, size_t n, uint64_t from, uint64_t end,
				     uint64_t *next);

/* ---- Parsers ---- */

struct scsi_inquiry {
	uint8_t qualifier;       /* peripheral qualifier (bits 7-5 of byte 0) */
	uint8_t device_type;     /* peripheral device type (bits 4-0): 0 = disk, 0x0c = controller */
	bool removable;
	uint8_t version;
	uint8_t tpgs;            /* TPGS (byte 5 bits 5-4): 0 no ALUA, 1 implicit, 2 explicit, 3 both */
	char vendor[9], product[17], revision[5]; /* NUL-terminated, trailing spaces trimmed */
};
/* Standard INQUIRY data (SPC-4 §6.6.2); needs at least 36 bytes. */
int scsi_parse_inquiry(const uint8_t *buf, size_t len, struct scsi_inquiry *out);
/*
 * The TPGS field of standard INQUIRY data (SPC-4 §6.6.2, byte 5 bits 5-4:
 * target port group support, ALUA §5.15): 0 none, 1 implicit ALUA only,
 * 2 explicit only, 3 both.  0 when fewer than 6 bytes are given (len
 * valid bytes in buf, buf may be NULL then).
 */
unsigned scsi_inquiry_tpgs(const uint8_t *buf, size_t len);

/* VPD 0x00 supported pages (SPC-4 §7.8.14): fills pages[] (up to max), sets *count. */
int scsi_parse_vpd_supported(const uint8_t *buf, size_t len, uint8_t *pages, size_t max, size_t *count);

/* VPD 0x80 unit serial number (SPC-4 §7.8.15) into out (cap bytes, NUL-terminated, trimmed). */
int scsi_parse_vpd_serial(const uint8_t *buf, size_t len, char *out, size_t cap);

enum scsi_designator_type {
	SCSI_DESIG_VENDOR = 0, SCSI_DESIG_T10 = 1, SCSI_DESIG_EUI64 = 2, SCSI_DESIG_NAA = 3,
	SCSI_DESIG_RELATIVE_PORT = 4, SCSI_DESIG_TPG = 5, SCSI_DESIG_LUG = 6, SCSI_DESIG_MD5 = 7,
	SCSI_DESIG_SCSI_NAME = 8,
};
struct scsi_designator {
	uint8_t code_set;        /* 1 binary, 2 ASCII, 3 UTF-8 */
	uint8_t association;     /* 0 = logical unit, 1 = target port, 2 = target device */
	uint8_t type;            /* enum scsi_designator_type */
	uint8_t len;             /* bytes in id */
	uint8_t id[255];
};
/*
 * VPD 0x83 device identification (SPC-4 §7.8.6): the designators in page
 * order (up to max), *count set.  A descriptor running past the page is
 * -EPROTO.
 */
int scsi_parse_vpd_devid(const uint8_t *buf, size_t len, struct scsi_designator *out, size_t max, size_t *count);
/*
 * The LU designator (association 0) that udev's scsi_id takes for
 * ID_SERIAL, formatted as it does, so that /dev/disk/by-id/scsi-<name>
 * and this name agree.  The preference, over all the designators in turn,
 * binary before ASCII within each: NAA IEEE Registered Extended (NAA 6),
 * IEEE Registered (NAA 5), any other NAA (3, locally assigned), EUI-64,
 * T10 vendor ID; designators in UTF-8, vendor-specific and SCSI name
 * strings are not used.  Binary: the designator type digit ("3" NAA, "2"
 * EUI-64, "1" T10) and lowercase hex.  ASCII: the type digit and the text
 * to its first NUL, outer blanks dropped, each run of blanks one '_',
 * characters other than letters, digits and "#+-.:=@_" as '_'.  Returns
 * the string length, -ENOENT if none, -ERANGE if out (cap bytes) is too
 * small (out is "" then).
 */
int scsi_designator_name(const struct scsi_designator *d, size_t count, char *out, size_t cap);

struct scsi_block_limits {  /* VPD 0xB0 (SBC-3 §6.6.4), values in blocks; 0 = not reported */
	uint32_t max_xfer_len, opt_xfer_len, max_unmap_lba_count, max_unmap_desc_count;
	uint32_t unmap_granularity;
	uint64_t max_write_same_len;
};
int scsi_parse_vpd_block_limits(const uint8_t *buf, size_t len, struct scsi_block_limits *out);

struct scsi_lbp {           /* VPD 0xB2 logical block provisioning (SBC-3 §6.6.7) */
	bool lbpu, lbpws, lbpws10, anc_sup, lbprz;
	uint8_t provisioning_type;
};
int scsi_parse_vpd_lbp(const uint8_t *buf, size_t len, struct scsi_lbp *out);

/*
 * REPORT LUNS data (SPC-4 §6.33): decodes each 8-byte LUN into a LUN
 * number: peripheral (single level, method 00b, bus 0) and flat (method
 * 01b) addressing, 14 bits.  Other methods are skipped.  Fills luns[] (up to
 * max), *count = number decoded; *total = number of entries the target says
 * it has (LUN LIST LENGTH / 8), so a caller can retry with a larger buffer.
 */
int scsi_parse_report_luns(const uint8_t *buf, size_t len, uint16_t *luns, size_t max, size_t *count, size_t *total);
/* Encode a LUN number as the 8-byte BHS LUN field (peripheral for < 256, flat otherwise), big endian u64. */
uint64_t scsi_lun_encode(uint16_t lun);
/*
 * The LUN number of an 8-byte BHS LUN field (SAM-5 §4.7): single level,
 * peripheral addressing on bus 0 or flat space addressing, as
 * scsi_lun_encode writes them.  Returns the number (0..16383), or -EINVAL
 * for any other form.
 */
int scsi_lun_decode(uint64_t field);

struct scsi_capacity {
	uint64_t nblocks;        /* number of logical blocks (RETURNED LBA + 1) */
	uint32_t block_size;     /* logical block length in bytes */
	uint8_t lbppbe;          /* logical blocks per physical block exponent (16 only) */
	bool lbpme, lbprz;       /* (16 only) */
};
/*
 * READ CAPACITY (10) and (16) parameter data (SBC-4 §5.20, §5.21) of len
 * bytes into *out.  0; -EMEDIUMTYPE for a complete answer whose logical
 * block length is 0 (out->block_size is 0 then); -EPROTO for a short
 * answer or, (16), a last LBA of 2^64 - 1.
 */
int scsi_parse_read_capacity10(const uint8_t *buf, size_t len, struct scsi_capacity *out);
int scsi_parse_read_capacity16(const uint8_t *buf, size_t len, struct scsi_capacity *out);

/* WP bit of the mode parameter header (SBC-3 §6.5.1 DEVICE-SPECIFIC PARAMETER bit 7). */
int scsi_parse_mode_sense6_wp(const uint8_t *buf, size_t len, bool *wp);
int scsi_parse_mode_sense10_wp(const uint8_t *buf, size_t len, bool *wp);

/*
 * Sense data, fixed (0x70/0x71) or descriptor (0x72/0x73) format
 * (SPC-4 §4.5.2, §4.5.3).  `len` is the number of sense bytes (as carried
 * after the 2-byte SenseLength in an iSCSI SCSI Response).  Returns 0,
 * or -EPROTO for an unknown response code or fewer bytes than the format
 * needs (8 for descriptor, 14 for fixed; a shorter fixed sense still gives
 * the key if byte 2 is present).
 */
int scsi_parse_sense(const uint8_t *sense, size_t len, struct scsi_sense *out);

/*
 * THE status/sense -> errno table (one place).  Returns 0 for GOOD and
 * CONDITION MET, a negative errno otherwise; `sense` may be NULL when no
 * sense data came.  See scsi_errno.c for the table.
 */
int scsi_status_to_errno(uint8_t status, const struct scsi_sense *sense);

/* True when the failure is worth retrying: scsi_status_retry() != SCSI_RETRY_NO. */
bool scsi_status_retryable(uint8_t status, const struct scsi_sense *sense);

/*
 * How a failed command may be retried (SAM-5 §5.3, SPC-4 §4.5.2, §5.14):
 *   SCSI_RETRY_NO       not transient: report the errno.
 *   SCSI_RETRY_NOW      reissue at once (UNIT ATTENTION: the condition is
 *                       consumed by the report; ABORTED COMMAND).
 *   SCSI_RETRY_BACKOFF  reissue after a growing delay (BUSY, TASK SET FULL).
 *   SCSI_RETRY_WAIT     reissue at a steady pace until a time budget runs
 *                       out (NOT READY, LOGICAL UNIT IS IN PROCESS OF
 *                       BECOMING READY, 04h/01h).
 */
enum scsi_retry { SCSI_RETRY_NO = 0, SCSI_RETRY_NOW, SCSI_RETRY_BACKOFF, SCSI_RETRY_WAIT };

/* The retry class of a status and its sense data (the table's retry column); sense may be NULL. */
enum scsi_retry scsi_status_retry(uint8_t status, const struct scsi_sense *sense);

/*
 * Delay in milliseconds before retry number `attempt` (0 for the first) of
 * class c, or -1 to give up.  elapsed_ms: time since the first failure;
 * budget_ms: how long SCSI_RETRY_WAIT and SCSI_RETRY_BACKOFF may keep
 * trying (the command timeout).  NOW: 0 up to 8 times.  BACKOFF: 10 ms
 * doubling to 1 s, up to 16 times.  WAIT: 250 ms while within the budget.
 */
int scsi_retry_delay_ms(enum scsi_retry c, unsigned attempt, uint64_t elapsed_ms, uint64_t budget_ms);

/*
 * What a UNIT ATTENTION tells the initiator to look at again (SPC-4 Annex
 * F ASC/ASCQ assignments); a bit mask, 0 for none or for other sense.
 *   SCSI_UA_CAPACITY  CAPACITY DATA HAS CHANGED (2Ah/09h): READ CAPACITY.
 *   SCSI_UA_LUNS      REPORTED LUNS DATA HAS CHANGED (3Fh/0Eh): REPORT LUNS.
 *   SCSI_UA_PROBE     the LU's parameters may differ: power on, reset, bus
 *                     device reset (29h/xx), not ready to ready / medium
 *                     may have changed (28h/00h), mode parameters changed
 *                     (2Ah/01h), inquiry data has changed (3Fh/03h),
 *                     microcode changed (3Fh/01h): READ CAPACITY and
 *                     MODE SENSE again.
 *   SCSI_UA_MEDIUM    the LU's data may have changed other than by our
 *                     writes, so cached reads must go to it again: not
 *                     ready to ready / medium may have changed (28h/xx),
 *                     power on / reset / I_T nexus loss (29h/xx: the
 *                     target may have restarted with other data), capacity
 *                     data has changed (2Ah/09h: often a LUN re-created),
 *                     inquiry data has changed (3Fh/03h).  (REPORTED LUNS
 *                     DATA HAS CHANGED concerns other LUNs: a LUN may have
 *                     been re-created under its number.)
 */
enum { SCSI_UA_CAPACITY = 1u << 0, SCSI_UA_LUNS = 1u << 1, SCSI_UA_PROBE = 1u << 2, SCSI_UA_MEDIUM = 1u << 3 };
unsigned scsi_ua_event(const struct scsi_sense *sense);

#endif
