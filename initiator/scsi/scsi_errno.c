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
 *   retry   the result of scsi_status_retry(): NO, or how a transient
 *           condition is retried (NOW, BACKOFF, WAIT; see scsi.h).
 *
 * ANY (0xff) is a wildcard, so a row cannot name the vendor-specific
 * ASC/ASCQ value 0xff itself; such sense data falls to the general row of
 * its key.
 */
#include "scsi.h"

#include <errno.h>

#define ANY 0xffu
#define NO SCSI_RETRY_NO
#define NOW SCSI_RETRY_NOW
#define BACKOFF SCSI_RETRY_BACKOFF
#define WAIT SCSI_RETRY_WAIT
#define NO_SENSE_DATA 0xfeu

struct errno_row {
	uint8_t status, key, asc, ascq;
	int err;
	uint8_t retry; /* enum scsi_retry */
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
	{ GOOD,         ANY,                         ANY,  ANY,  0,           NO    },
	{ COND_MET,     ANY,                         ANY,  ANY,  0,           NO    },

	/* CHECK CONDITION: decided by the sense data */
	{ CHECK,        NO_SENSE_DATA,               ANY,  ANY,  -EIO,        NO    },
	{ CHECK,        SCSI_SK_NOT_READY,           0x04, 0x01, -EAGAIN,     WAIT  }, /* LU becoming ready */
	{ CHECK,        SCSI_SK_NOT_READY,           0x04, 0x0a, -EAGAIN,     WAIT  }, /* asymmetric access state transition */
	{ CHECK,        SCSI_SK_NOT_READY,           0x3a, ANY,  -ENOMEDIUM,  NO    }, /* medium not present */
	{ CHECK,        SCSI_SK_NOT_READY,           ANY,  ANY,  -EIO,        NO    },
	{ CHECK,        SCSI_SK_MEDIUM_ERROR,        0x11, ANY,  -EIO,        NO    }, /* unrecovered read error */
	{ CHECK,        SCSI_SK_MEDIUM_ERROR,        ANY,  ANY,  -EIO,        NO    },
	{ CHECK,        SCSI_SK_HARDWARE_ERROR,      ANY,  ANY,  -EIO,        NO    },
	{ CHECK,        SCSI_SK_ILLEGAL_REQUEST,     0x20, ANY,  -EOPNOTSUPP, NO    }, /* invalid command opcode */
	{ CHECK,        SCSI_SK_ILLEGAL_REQUEST,     0x21, ANY,  -ENOSPC,     NO    }, /* LBA out of range */
	{ CHECK,        SCSI_SK_ILLEGAL_REQUEST,     0x24, ANY,  -EINVAL,     NO    }, /* invalid field in CDB */
	{ CHECK,        SCSI_SK_ILLEGAL_REQUEST,     0x25, ANY,  -ENXIO,      NO    }, /* LU not supported */
	{ CHECK,        SCSI_SK_ILLEGAL_REQUEST,     ANY,  ANY,  -EINVAL,     NO    },
	{ CHECK,        SCSI_SK_UNIT_ATTENTION,      ANY,  ANY,  -EAGAIN,     NOW   },
	{ CHECK,        SCSI_SK_DATA_PROTECT,        0x27, ANY,  -EROFS,      NO    }, /* write protected */
	{ CHECK,        SCSI_SK_DATA_PROTECT,        ANY,  ANY,  -EROFS,      NO    },
	{ CHECK,        SCSI_SK_ABORTED_COMMAND,     ANY,  ANY,  -EAGAIN,     NOW   },
	{ CHECK,        SCSI_SK_MISCOMPARE,          ANY,  ANY,  -EILSEQ,     NO    },
	{ CHECK,        SCSI_SK_BLANK_CHECK,         ANY,  ANY,  -ENODATA,    NO    },
	{ CHECK,        SCSI_SK_VOLUME_OVERFLOW,     ANY,  ANY,  -ENOSPC,     NO    },
	{ CHECK,        SCSI_SK_RECOVERED_ERROR,     ANY,  ANY,  0,           NO    },
	{ CHECK,        SCSI_SK_NO_SENSE,            ANY,  ANY,  0,           NO    },
	{ CHECK,        ANY,                         ANY,  ANY,  -EIO,        NO    }, /* vendor, copy aborted, reserved */

	/* other status codes: sense data, if any, is not looked at */
	{ BUSY,         ANY,                         ANY,  ANY,  -EBUSY,      BACKOFF },
	{ TSET_FULL,    ANY,                         ANY,  ANY,  -EAGAIN,     BACKOFF },
	{ RESV_CONFL,   ANY,                         ANY,  ANY,  -EACCES,     NO    },
	{ ACA_ACTIVE,   ANY,                         ANY,  ANY,  -EIO,        NO    },
	{ TASK_ABORTED, ANY,                         ANY,  ANY,  -ECANCELED,  NO    },

	/* anything else */
	{ ANY,          ANY,                         ANY,  ANY,  -EIO,        NO    },
};

#undef GOOD
#undef COND_MET
#undef CHECK
#undef BUSY
#undef TSET_FULL
#undef RESV_CONFL
#undef ACA_ACTIVE
#undef TASK_ABORTED
#undef NO
#undef NOW
#undef BACKOFF
#undef WAIT

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
	return lookup(status, sense)->retry != SCSI_RETRY_NO;
}

enum scsi_retry scsi_status_retry(uint8_t status, const struct scsi_sense *sense)
{
	return (enum scsi_retry)lookup(status, sense)->retry;
}

#define RETRY_NOW_MAX 8u
#define RETRY_BACKOFF_MAX 16u
#define RETRY_BACKOFF_FIRST_MS 10u
#define RETRY_BACKOFF_CAP_MS 1000u
#define RETRY_WAIT_MS 250u

int scsi_retry_delay_ms(enum scsi_retry c, unsigned attempt, uint64_t elapsed_ms, uint64_t budget_ms)
{
	switch (c) {
	case SCSI_RETRY_NOW:
		return attempt < RETRY_NOW_MAX ? 0 : -1;
	case SCSI_RETRY_BACKOFF: {
		if (attempt >= RETRY_BACKOFF_MAX)
			return -1;
		unsigned ms = attempt < 7 ? RETRY_BACKOFF_FIRST_MS << attempt : RETRY_BACKOFF_CAP_MS;
		if (ms > RETRY_BACKOFF_CAP_MS)
			ms = RETRY_BACKOFF_CAP_MS;
		return elapsed_ms + ms <= budget_ms ? (int)ms : -1;
	}
	case SCSI_RETRY_WAIT:
		return elapsed_ms + RETRY_WAIT_MS <= budget_ms ? (int)RETRY_WAIT_MS : -1;
	default:
		return -1;
	}
}

unsigned scsi_ua_event(const struct scsi_sense *sense)
{
	if (!sense_usable(sense) || sense->key != SCSI_SK_UNIT_ATTENTION)
		return 0;
	switch (sense->asc) {
	case 0x2a:
		if (sense->ascq == 0x09)
			return SCSI_UA_CAPACITY | SCSI_UA_MEDIUM;
		return sense->ascq == 0x01 ? SCSI_UA_PROBE : 0; /* reservations, priorities: nothing to re-read */
	case 0x3f:
		if (sense->ascq == 0x0e)
			return SCSI_UA_LUNS;
		if (sense->ascq == 0x03)
			return SCSI_UA_PROBE | SCSI_UA_MEDIUM;
		return sense->ascq == 0x01 ? SCSI_UA_PROBE : 0;
	case 0x28: /* not ready to ready change, medium may have changed */
	case 0x29: /* power on, reset, bus device reset, I_T nexus loss */
		return SCSI_UA_PROBE | SCSI_UA_MEDIUM;
	default:
		return 0;
	}
}
