/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for sense data and the status -> errno table
 * (initiator/scsi/scsi.c, initiator/scsi/scsi_errno.c).
 *
 * Input: sense data as carried after the SenseLength of a SCSI Response.
 * It is parsed from an exact-size copy, then every SAM status is mapped to
 * an errno with that sense and with no sense; the sense is used as parsed
 * even when the parser refused it (callers still use the key).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "initiator/scsi/scsi.h"

#define CHECK(cond)                                                                   \
	do {                                                                              \
		if (!(cond))                                                              \
			__builtin_trap();                                                 \
	} while (0)

static void map(unsigned status, const struct scsi_sense *sense)
{
	int e = scsi_status_to_errno((uint8_t)status, sense);
	bool retry = scsi_status_retryable((uint8_t)status, sense);

	CHECK(e <= 0 && e > -4096);
	if (status == SCSI_STATUS_GOOD || status == SCSI_STATUS_CONDITION_MET)
		CHECK(e == 0 && !retry);
	if (retry)
		CHECK(e != 0);
	if (status == SCSI_STATUS_BUSY || status == SCSI_STATUS_TASK_SET_FULL)
		CHECK(retry);
	if (status == SCSI_STATUS_CHECK_CONDITION && sense == NULL)
		CHECK(e == -EIO && !retry);
	/* the retry class agrees with the retry column; UNIT ATTENTION events only from a usable UA sense */
	enum scsi_retry c = scsi_status_retry((uint8_t)status, sense);
	CHECK((c != SCSI_RETRY_NO) == retry);
	CHECK(scsi_retry_delay_ms(c, 0, 0, 30000) >= 0 || !retry);
	unsigned ev = scsi_ua_event(sense);
	CHECK((ev & ~(unsigned)(SCSI_UA_CAPACITY | SCSI_UA_LUNS | SCSI_UA_PROBE | SCSI_UA_MEDIUM)) == 0);
	if (ev)
		CHECK(sense && sense->key == SCSI_SK_UNIT_ATTENTION);
}

/* Every SAM status code (obsolete ones included) and two that are none. */
static const uint8_t statuses[] = { 0x00, 0x02, 0x04, 0x08, 0x10, 0x14, 0x18, 0x22,
				    0x28, 0x30, 0x40, 0x01, 0xff };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct scsi_sense s;

	if (size > 4096)
		return 0;
	uint8_t *copy = malloc(size ? size : 1);
	CHECK(copy != NULL);
	if (size)
		memcpy(copy, data, size);

	int rc = scsi_parse_sense(size ? copy : NULL, size, &s);
	CHECK(rc == 0 || rc == -EPROTO);
	if (size == 0) {
		CHECK(rc == -EPROTO);
	} else {
		CHECK(s.response_code == (copy[0] & 0x7f));
	}
	CHECK(s.key <= 0x0f);
	if (rc == 0) {
		CHECK(s.response_code >= 0x70 && s.response_code <= 0x73);
		if (s.response_code <= 0x71) {
			CHECK(size >= 14);
			CHECK(s.key == (copy[2] & 0x0f) && s.asc == copy[12] && s.ascq == copy[13]);
		} else {
			CHECK(size >= 8);
			CHECK(s.key == (copy[1] & 0x0f) && s.asc == copy[2] && s.ascq == copy[3]);
		}
	}
	if (s.response_code < 0x70 || s.response_code > 0x73) {
		/* an unknown format leaves nothing but the response code */
		CHECK(rc == -EPROTO && s.key == 0 && s.asc == 0 && s.ascq == 0 && !s.info_valid);
	}

	/* the same sense must map the same way twice */
	struct scsi_sense again;
	CHECK(scsi_parse_sense(size ? copy : NULL, size, &again) == rc);
	CHECK(memcmp(&s, &again, sizeof(s)) == 0);

	for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
		unsigned status = statuses[i];

		map(status, &s);
		map(status, NULL);
		/* unusable sense data maps like no sense data */
		if (s.response_code < 0x70 || s.response_code > 0x73)
			CHECK(scsi_status_to_errno((uint8_t)status, &s) == scsi_status_to_errno((uint8_t)status, NULL));
	}
	free(copy);
	return 0;
}
