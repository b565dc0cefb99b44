/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the ALUA parsers a target feeds (initiator/scsi/alua.c):
 * REPORT TARGET PORT GROUPS parameter data (alua_parse_rtpg) and the port
 * ids of VPD 0x83 (scsi_parse_vpd_devid, then alua_port_ids, as a LUN
 * probe does).
 *
 * Input: the first byte selects the parser (even: RTPG, odd: VPD 0x83),
 * the rest is the data-in buffer, parsed from an exact-size copy so that
 * any read past it is caught.  Checks: counts within the arrays, the same
 * descriptors whatever the array size, states and names in range, ids
 * taken from a designator that is there.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "initiator/scsi/alua.h"
#include "initiator/scsi/scsi.h"

#define CHECK(cond)                                                                   \
	do {                                                                              \
		if (!(cond))                                                              \
			__builtin_trap();                                                 \
	} while (0)

#define BIG 1024

static void check_tpg(const struct alua_tpg *t)
{
	CHECK(t->state <= 0x0f && t->status_code <= 0xff && t->nports <= 255);
	CHECK(alua_state_name(t->state) != NULL);
	int rank = alua_state_rank(t->state);
	CHECK(rank == 0 || rank == 1 || rank == 9);
	CHECK(alua_state_usable(t->state) == (rank < 9));
	for (size_t i = t->nports; i < ALUA_TPG_PORTS_MAX; i++)
		CHECK(t->ports[i] == 0);
}

static void rtpg(const uint8_t *b, size_t len)
{
	static const size_t maxes[] = { 0, 1, 16 };
	static struct alua_tpg all[BIG];
	size_t total = 99;
	uint8_t itt = 99;
	int rc = alua_parse_rtpg(b, len, all, BIG, &total, &itt);

	CHECK(rc == 0 || rc == -EPROTO);
	CHECK(total <= BIG && total <= (len >= 8 ? (len - 4) / 8 : 0));
	if (rc != 0)
		CHECK(total == 0);
	if (len < 5 || ((b[4] >> 4) & 7) != 1)
		CHECK(itt == 0);
	for (size_t i = 0; i < total; i++)
		check_tpg(&all[i]);

	/* fewer slots: the first descriptors, the same; none: only counted as none */
	for (size_t m = 0; m < sizeof(maxes) / sizeof(maxes[0]); m++) {
		struct alua_tpg *t = malloc((maxes[m] ? maxes[m] : 1) * sizeof(*t));
		size_t c = 99;
		CHECK(t != NULL);
		CHECK(alua_parse_rtpg(b, len, t, maxes[m], &c, NULL) == rc);
		CHECK(c == (total < maxes[m] ? total : maxes[m]));
		for (size_t i = 0; i < c; i++)
			CHECK(memcmp(&t[i], &all[i], sizeof(*t)) == 0);
		free(t);
	}
	size_t c = 99;
	CHECK(alua_parse_rtpg(b, len, NULL, 0, &c, NULL) == rc && c == 0);
	CHECK(alua_parse_rtpg(b, len, all, BIG, NULL, NULL) == -EPROTO);
}

static void port_ids(const uint8_t *b, size_t len)
{
	struct scsi_designator d[8];
	size_t n = 99;
	int rc = scsi_parse_vpd_devid(b, len, d, 8, &n);

	CHECK(rc == 0 || rc == -EPROTO);
	CHECK(n <= 8);
	uint16_t tpg = 0xabcd, rel = 0xabcd;
	int r = alua_port_ids(d, n, &tpg, &rel);
	CHECK(r == 0 || r == -ENOENT);
	if (r != 0) {
		CHECK(tpg == 0xabcd && rel == 0xabcd);
		for (size_t i = 0; i < n; i++)
			CHECK(d[i].association != 1 || d[i].type != SCSI_DESIG_TPG || d[i].len < 4);
		return;
	}
	/* the first TPG designator of the target port holds the id */
	size_t i = 0;
	while (i < n && !(d[i].association == 1 && d[i].type == SCSI_DESIG_TPG && d[i].len >= 4))
		i++;
	CHECK(i < n && tpg == (uint16_t)(d[i].id[2] << 8 | d[i].id[3]));
	bool have_rel = false;
	for (i = 0; i < n; i++)
		if (d[i].association == 1 && d[i].type == SCSI_DESIG_RELATIVE_PORT && d[i].len >= 4 &&
		    rel == (uint16_t)(d[i].id[2] << 8 | d[i].id[3]))
			have_rel = true;
	CHECK(have_rel || rel == 0);
	CHECK(alua_port_ids(d, n, NULL, NULL) == 0);
	CHECK(alua_port_ids(NULL, n, &tpg, &rel) == -ENOENT);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 65536 + 1)
		return 0;
	size_t len = size - 1;
	uint8_t *b = malloc(len ? len : 1);
	CHECK(b != NULL);
	if (len)
		memcpy(b, data + 1, len);
	if (data[0] % 2 == 0)
		rtpg(len ? b : NULL, len);
	else
		port_ids(len ? b : NULL, len);
	free(b);
	return 0;
}
