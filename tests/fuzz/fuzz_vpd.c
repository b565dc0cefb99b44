/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the SCSI response parsers (initiator/scsi/scsi.c):
 * standard INQUIRY, VPD pages 0x00, 0x80, 0x83 (and scsi_designator_name on
 * what it finds), 0xB0 and 0xB2, REPORT LUNS, READ CAPACITY(10)/(16) and
 * MODE SENSE(6)/(10), GET LBA STATUS parameter data.
 *
 * Input: the first byte selects the parser (its value modulo 12, in the
 * order of `enum sel`), the rest is the data-in buffer, parsed from an
 * exact-size copy so that any read past it is caught.  Output strings must
 * be NUL-terminated within their buffers and counts within their arrays.
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

enum sel {
	SEL_INQUIRY,
	SEL_VPD_SUPPORTED,
	SEL_VPD_SERIAL,
	SEL_VPD_DEVID,
	SEL_VPD_BLOCK_LIMITS,
	SEL_VPD_LBP,
	SEL_REPORT_LUNS,
	SEL_READ_CAPACITY10,
	SEL_READ_CAPACITY16,
	SEL_MODE_SENSE6,
	SEL_MODE_SENSE10,
	SEL_LBA_STATUS,
	SEL_COUNT
};

static void nul_within(const char *s, size_t cap)
{
	CHECK(memchr(s, '\0', cap) != NULL);
}

static void inquiry(const uint8_t *b, size_t len)
{
	struct scsi_inquiry q;
	int rc = scsi_parse_inquiry(b, len, &q);

	CHECK(rc == 0 || rc == -EPROTO);
	nul_within(q.vendor, sizeof(q.vendor));
	nul_within(q.product, sizeof(q.product));
	nul_within(q.revision, sizeof(q.revision));
	if (rc == 0) {
		CHECK(len >= 36);
		CHECK(q.device_type == (b[0] & 0x1f) && q.qualifier == (b[0] >> 5));
	}
}

static void vpd_supported(const uint8_t *b, size_t len)
{
	static const size_t maxes[] = { 0, 1, 8, 256 };

	for (size_t m = 0; m < sizeof(maxes) / sizeof(maxes[0]); m++) {
		uint8_t *pages = malloc(maxes[m] ? maxes[m] : 1);
		size_t count = 99;
		CHECK(pages != NULL);
		int rc = scsi_parse_vpd_supported(b, len, pages, maxes[m], &count);
		CHECK(rc == 0 || rc == -EPROTO);
		CHECK(count <= maxes[m]);
		if (rc != 0)
			CHECK(count == 0);
		for (size_t i = 0; i < count; i++)
			CHECK(pages[i] == b[4 + i]);
		free(pages);
	}
}

static void vpd_serial(const uint8_t *b, size_t len)
{
	static const size_t caps[] = { 1, 2, 9, 300 };

	for (size_t c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
		char *out = malloc(caps[c]);
		CHECK(out != NULL);
		int rc = scsi_parse_vpd_serial(b, len, out, caps[c]);
		CHECK(rc == 0 || rc == -EPROTO);
		nul_within(out, caps[c]);
		size_t n = strlen(out);
		if (n > 0)
			CHECK(out[0] != ' ' && out[n - 1] != ' ');
		for (size_t i = 0; i < n; i++)
			CHECK(out[i] >= 0x20 && out[i] < 0x7f);
		free(out);
	}
}

static void designator_name(const struct scsi_designator *d, size_t count)
{
	static const size_t caps[] = { 1, 2, 17, 33, 64, 520 };

	for (size_t c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
		char *out = malloc(caps[c]);
		CHECK(out != NULL);
		int r = scsi_designator_name(d, count, out, caps[c]);
		CHECK(r == -ENOENT || r == -ERANGE || r > 0);
		nul_within(out, caps[c]);
		if (r > 0) {
			CHECK((size_t)r < caps[c] && strlen(out) == (size_t)r);
			for (int i = 0; i < r; i++)
				CHECK(out[i] > 0x20 && out[i] < 0x7f && out[i] != '/');
		}
		free(out);
	}
	CHECK(scsi_designator_name(d, count, NULL, 0) == -ERANGE);
}

static void vpd_devid(const uint8_t *b, size_t len)
{
	static const size_t maxes[] = { 0, 1, 4, 64 };

	for (size_t m = 0; m < sizeof(maxes) / sizeof(maxes[0]); m++) {
		struct scsi_designator *d = malloc((maxes[m] ? maxes[m] : 1) * sizeof(*d));
		size_t count = 99;
		CHECK(d != NULL);
		int rc = scsi_parse_vpd_devid(b, len, d, maxes[m], &count);
		CHECK(rc == 0 || rc == -EPROTO);
		CHECK(count <= maxes[m]);
		if (rc != 0)
			CHECK(count == 0);
		for (size_t i = 0; i < count; i++)
			CHECK(d[i].code_set <= 0x0f && d[i].association <= 3 && d[i].type <= 0x0f);
		designator_name(d, count);
		free(d);
	}
}

static void block_limits(const uint8_t *b, size_t len)
{
	struct scsi_block_limits bl;
	int rc = scsi_parse_vpd_block_limits(b, len, &bl);

	CHECK(rc == 0 || rc == -EPROTO);
}

static void lbp(const uint8_t *b, size_t len)
{
	struct scsi_lbp l;
	int rc = scsi_parse_vpd_lbp(b, len, &l);

	CHECK(rc == 0 || rc == -EPROTO);
	CHECK(l.provisioning_type <= 7);
}

static void report_luns(const uint8_t *b, size_t len)
{
	static const size_t maxes[] = { 0, 1, 16, 1024 };

	for (size_t m = 0; m < sizeof(maxes) / sizeof(maxes[0]); m++) {
		uint16_t *luns = malloc((maxes[m] ? maxes[m] : 1) * sizeof(*luns));
		size_t count = 99, total = 99;
		CHECK(luns != NULL);
		int rc = scsi_parse_report_luns(b, len, luns, maxes[m], &count, &total);
		CHECK(rc == 0 || rc == -EPROTO);
		CHECK(count <= maxes[m] && count <= total);
		CHECK(count <= (len >= 8 ? (len - 8) / 8 : 0));
		for (size_t i = 0; i < count; i++) {
			CHECK(luns[i] <= 16383);
			/* a LUN number encodes to an 8-byte LUN that decodes back */
			uint64_t enc = scsi_lun_encode(luns[i]);
			uint8_t e[8];
			for (int k = 0; k < 8; k++)
				e[k] = (uint8_t)(enc >> (56 - 8 * k));
			uint8_t list[16] = { 0, 0, 0, 8 };
			memcpy(list + 8, e, 8);
			uint16_t back;
			size_t bc, bt;
			CHECK(scsi_parse_report_luns(list, sizeof(list), &back, 1, &bc, &bt) == 0);
			CHECK(bc == 1 && bt == 1 && back == luns[i]);
		}
		free(luns);
	}
}

static void capacity(const uint8_t *b, size_t len, bool use16)
{
	struct scsi_capacity c;
	int rc = use16 ? scsi_parse_read_capacity16(b, len, &c) : scsi_parse_read_capacity10(b, len, &c);

	CHECK(rc == 0 || rc == -EPROTO || (rc == -EMEDIUMTYPE && c.block_size == 0));
	if (rc == 0)
		CHECK(c.block_size != 0 && c.nblocks != 0);
}

static void mode_sense(const uint8_t *b, size_t len, bool use10)
{
	bool wp = true;
	int rc = use10 ? scsi_parse_mode_sense10_wp(b, len, &wp) : scsi_parse_mode_sense6_wp(b, len, &wp);

	CHECK(rc == 0 || rc == -EPROTO);
	if (rc != 0)
		CHECK(!wp);
}

/* Descriptors decoded lie inside the data, are ascending and never empty. */
static void lba_status(const uint8_t *b, size_t len)
{
	static const size_t maxes[] = { 0, 1, 4, 300 };

	for (size_t m = 0; m < sizeof(maxes) / sizeof(maxes[0]); m++) {
		struct scsi_lba_status *d = malloc((maxes[m] ? maxes[m] : 1) * sizeof(*d));
		size_t count = 99;
		bool more = true;
		CHECK(d != NULL);
		int rc = scsi_parse_lba_status(b, len, d, maxes[m], &count, &more);
		CHECK(rc == 0 || rc == -EPROTO);
		if (rc != 0)
			CHECK(count == 0);
		CHECK(count <= maxes[m]);
		CHECK(count == 0 || 8 + 16 * count <= len);
		for (size_t i = 0; i < count; i++) {
			CHECK(d[i].nblocks > 0 && d[i].lba + d[i].nblocks > d[i].lba);
			CHECK(d[i].status <= 0x0f);
			if (i > 0)
				CHECK(d[i].lba >= d[i - 1].lba + d[i - 1].nblocks);
		}
		free(d);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 65536 + 1)
		return 0;

	enum sel sel = (enum sel)(data[0] % SEL_COUNT);
	size_t len = size - 1;
	uint8_t *b = malloc(len ? len : 1);
	CHECK(b != NULL);
	if (len)
		memcpy(b, data + 1, len);
	const uint8_t *buf = len ? b : NULL;

	switch (sel) {
	case SEL_INQUIRY:
		inquiry(buf, len);
		break;
	case SEL_VPD_SUPPORTED:
		vpd_supported(buf, len);
		break;
	case SEL_VPD_SERIAL:
		vpd_serial(buf, len);
		break;
	case SEL_VPD_DEVID:
		vpd_devid(buf, len);
		break;
	case SEL_VPD_BLOCK_LIMITS:
		block_limits(buf, len);
		break;
	case SEL_VPD_LBP:
		lbp(buf, len);
		break;
	case SEL_REPORT_LUNS:
		report_luns(buf, len);
		break;
	case SEL_READ_CAPACITY10:
		capacity(buf, len, false);
		break;
	case SEL_READ_CAPACITY16:
		capacity(buf, len, true);
		break;
	case SEL_MODE_SENSE6:
		mode_sense(buf, len, false);
		break;
	case SEL_MODE_SENSE10:
		mode_sense(buf, len, true);
		break;
	case SEL_LBA_STATUS:
		lba_status(buf, len);
		break;
	case SEL_COUNT:
		break;
	}
	free(b);
	return 0;
}
