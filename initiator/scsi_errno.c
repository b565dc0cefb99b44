/* SPDX-License-Identifier: MIT */
/*
 * SCSI status and sense data -> negative errno: the one table.
 *
 * Each row is { status, sense key, ASC, ASCQ, errno, retry }.  The table is
 * scanned top to bottom and the first matching row wins, so specific rows
 * (an ASC/ASCQ pair) come before the general row for their sense key, and
 * the catch-all rows come last.
 *
 *   status  a SAM status byte, or ANY.
 *   key     a sense key, ANY (matches with or without sense data), or
 *           NO_SENSE_DATA (matches only when no usable sense data came:
 *           `sense` is NULL or its response code is not 0x70-0x73).
 *   asc,    an exact value, or ANY.  A row with a specific key, ASC or ASCQ
 *   ascq    never matches when there is no usable sense data.
 *   errno   the result of scsi_status_to_errno(); 0 means success.
 *   retry   the result of scsi_status_retryable(): the condition is
 *           transient and the command may be reissued as is.
 *
 * ANY (0xff) is a wildcard, so a row cannot name the vendor-specific
 * ASC/ASCQ value 0xff itself; such sense data falls to the general row of
 * its key.
 */
#include "scsi.h"

#include <errno.h>

#define ANY 0xffu
#define NO_SENSE_DATA 0xfeu

struct errno_row {
	uint8_t status, key, asc, ascq;
	int err;
	bool retry;
};

/* short names for the status column */
#define GOOD SCSI_STATUS_GOOD
#define COND_MET SCSI_STATUS_CONDITION_MET
#define CHECK SCSI_STATUS_CHECK_CONDITION
#define BUSY SCSI_STATUS_BUSY
#define TSET_FULL SCSI_STATUS_TASK_SET_FULL
#define RESV_CONFL SCSI_STATUS_RESERVATION_CONFLICT
#define ACA_ACTIVE SCSI_STATUS_ACA_ACTIVE
#define TASK_ABORTED SCSI_STATUS_TASK_ABORTED

static const struct errno_row errno_table[] = {
	/* status       key                          asc   ascq  errno        retry */
	{ GOOD,         ANY,                         ANY,  ANY,  0,           false },
	{ COND_MET,     ANY,                         ANY,  ANY,  0,           false },

	/* CHECK CONDITION: decided by the sense data */
	{ CHECK,        NO_SENSE_DATA,               ANY,  ANY,  -EIO,        false },
	{ CHECK,        SCSI_SK_NOT_READY,           0x04, 0x01, -EAGAIN,     true  }, /* LU becoming ready */
	{ CHECK,        SCSI_SK_NOT_READY,           0x3a, ANY,  -ENOMEDIUM,  false }, /* medium not present */
	{ CHECK,        SCSI_SK_NOT_READY,           ANY,  ANY,  -EIO,        false },
	{ CHECK,        SCSI_SK_MEDIUM_ERROR,        0x11, ANY,  -EIO,        false }, /* unrecovered read error */
	{ CHECK,        SCSI_SK_MEDIUM_ERROR,        ANY,  ANY,  -EIO,        false },
	{ CHECK,        SCSI_SK_HARDWARE_ERROR,      ANY,  ANY,  -EIO,        false },
	{ CHECK,        SCSI_SK_ILLEGAL_REQUEST,     0x20, ANY,  -EOPNOTSUPP, false }, /* invalid command opcode */
	{ CHECK,        SCSI_SK_ILLEGAL_REQUEST,     0x21, ANY,  -ENOSPC,     false }, /* LBA out of range */
	{ CHECK,        SCSI_SK_ILLEGAL_REQUEST,     0x24, ANY,  -EINVAL,     false }, /* invalid field in CDB */
	{ CHECK,        SCSI_SK_ILLEGAL_REQUEST,     0x25, ANY,  -ENXIO,      false }, /* LU not supported */
	{ CHECK,        SCSI_SK_ILLEGAL_REQUEST,     ANY,  ANY,  -EINVAL,     false },
	{ CHECK,        SCSI_SK_UNIT_ATTENTION,      ANY,  ANY,  -EAGAIN,     true  },
	{ CHECK,        SCSI_SK_DATA_PROTECT,        0x27, ANY,  -EROFS,      false }, /* write protected */
	{ CHECK,        SCSI_SK_DATA_PROTECT,        ANY,  ANY,  -EROFS,      false },
	{ CHECK,        SCSI_SK_ABORTED_COMMAND,     ANY,  ANY,  -EAGAIN,     true  },
	{ CHECK,        SCSI_SK_MISCOMPARE,          ANY,  ANY,  -EILSEQ,     false },
	{ CHECK,        SCSI_SK_BLANK_CHECK,         ANY,  ANY,  -ENODATA,    false },
	{ CHECK,        SCSI_SK_VOLUME_OVERFLOW,     ANY,  ANY,  -ENOSPC,     false },
	{ CHECK,        SCSI_SK_RECOVERED_ERROR,     ANY,  ANY,  0,           false },
	{ CHECK,        SCSI_SK_NO_SENSE,            ANY,  ANY,  0,           false },
	{ CHECK,        ANY,                         ANY,  ANY,  -EIO,        false }, /* vendor, copy aborted, reserved */

	/* other status codes: sense data, if any, is not looked at */
	{ BUSY,         ANY,                         ANY,  ANY,  -EBUSY,      true  },
	{ TSET_FULL,    ANY,                         ANY,  ANY,  -EAGAIN,     true  },
	{ RESV_CONFL,   ANY,                         ANY,  ANY,  -EACCES,     false },
	{ ACA_ACTIVE,   ANY,                         ANY,  ANY,  -EIO,        false },
	{ TASK_ABORTED, ANY,                         ANY,  ANY,  -ECANCELED,  false },

	/* anything else */
	{ ANY,          ANY,                         ANY,  ANY,  -EIO,        false },
};

#undef GOOD
#undef COND_MET
#undef CHECK
#undef BUSY
#undef TSET_FULL
#undef RESV_CONFL
#undef ACA_ACTIVE
#undef TASK_ABORTED

static bool sense_usable(const struct scsi_sense *sense)
{
	return sense && sense->response_code >= 0x70 && sense->response_code <= 0x73;
}

static bool row_matches(const struct errno_row *r, uint8_t status, const struct scsi_sense *sense)
{
	bool have = sense_usable(sense);

	if (r->status != ANY && r->status != status)
		return false;
	if (r->key == NO_SENSE_DATA)
		return !have;
	if (r->key != ANY && (!have || r->key != sense->key))
		return false;
	if (r->asc != ANY && (!have || r->asc != sense->asc))
		return false;
	if (r->ascq != ANY && (!have || r->ascq != sense->ascq))
		return false;
	return true;
}

static const struct errno_row *lookup(uint8_t status, const struct scsi_sense *sense)
{
	size_t n = sizeof(errno_table) / sizeof(errno_table[0]);

	for (size_t i = 0; i < n; i++)
		if (row_matches(&errno_table[i], status, sense))
			return &errno_table[i];
	return &errno_table[n - 1];
}

int scsi_status_to_errno(uint8_t status, const struct scsi_sense *sense)
{
	return lookup(status, sense)->err;
}

bool scsi_status_retryable(uint8_t status, const struct scsi_sense *sense)
{
	return lookup(status, sense)->retry;
}
