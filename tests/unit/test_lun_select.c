/* SPDX-License-Identifier: MIT */
/* gateway/luns/lun_select.c: which LUNs of a REPORT LUNS list become files. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "gateway/luns/lun_select.h"

/* A fake target: per LUN number, what its probe returns. */
struct fake_lun {
	int probe_rc;
	uint8_t qualifier, device_type;
	uint32_t block_size;
	uint64_t nblocks;
};

struct fake {
	struct fake_lun lun[16];
	unsigned probes[16];      /* probes per LUN number */
	uint16_t skipped[16];     /* LUN numbers reported skipped, in order */
	enum gw_lun_verdict why[16];
	int probe_err[16];
	size_t nskipped;
	int stop_with;            /* skipped's return value */
};

static int fake_probe(void *arg, uint16_t lun, struct iscsi_lun_info *out)
{
	struct fake *f = arg;
	const struct fake_lun *d = &f->lun[lun];
	f->probes[lun]++;
	memset(out, 0, sizeof(*out));
	out->lun = lun;
	out->inq.qualifier = d->qualifier;
	out->inq.device_type = d->device_type;
	out->cap.block_size = d->block_size;
	out->cap.nblocks = d->nblocks;
	return d->probe_rc;
}

static int fake_skipped(void *arg, uint16_t lun, const struct iscsi_lun_info *info, enum gw_lun_verdict v,
			int probe_err)
{
	struct fake *f = arg;
	cr_assert_eq(info == NULL, v == GW_LUN_PROBE_FAILED && probe_err != -EMEDIUMTYPE);
	f->skipped[f->nskipped] = lun;
	f->why[f->nskipped] = v;
	f->probe_err[f->nskipped] = probe_err;
	f->nskipped++;
	return f->stop_with;
}

/* Every LUN number a disk of 1000 blocks of 512 bytes. */
static void all_disks(struct fake *f)
{
	memset(f, 0, sizeof(*f));
	for (int i = 0; i < 16; i++)
		f->lun[i] = (struct fake_lun){0, 0, 0, 512, 1000};
}

static ssize_t run(struct fake *f, const uint16_t *luns, size_t n, struct iscsi_lun_info *out, size_t max)
{
	struct gw_lun_select_ops ops = {fake_probe, fake_skipped, f};
	return gw_lun_select(luns, n, &ops, out, max);
}

Test(lun_select, order_kept)
{
	struct fake f;
	all_disks(&f);
	const uint16_t luns[] = {7, 2, 9, 0, 5};
	struct iscsi_lun_info out[8];
	cr_assert_eq(run(&f, luns, 5, out, 8), 5);
	for (int i = 0; i < 5; i++) {
		cr_assert_eq(out[i].lun, luns[i], "position %d: LUN %u, expected %u", i, out[i].lun, luns[i]);
		cr_assert_eq(out[i].cap.nblocks, 1000);
	}
	cr_assert_eq(f.nskipped, 0);
}

Test(lun_select, duplicates_probed_once)
{
	struct fake f;
	all_disks(&f);
	const uint16_t luns[] = {3, 1, 3, 3, 1, 4};
	struct iscsi_lun_info out[8];
	cr_assert_eq(run(&f, luns, 6, out, 8), 3);
	cr_assert_eq(out[0].lun, 3);
	cr_assert_eq(out[1].lun, 1);
	cr_assert_eq(out[2].lun, 4);
	cr_assert_eq(f.probes[3], 1);
	cr_assert_eq(f.probes[1], 1);
	cr_assert_eq(f.nskipped, 0, "a repeat is not a LUN left out");
}

Test(lun_select, unsupported_device_type)
{
	struct fake f;
	all_disks(&f);
	f.lun[1].device_type = 0x05; /* CD/DVD */
	f.lun[2].qualifier = 3;      /* nothing at this LUN */
	f.lun[3].device_type = 0x1f;
	f.lun[4].qualifier = 1;
	const uint16_t luns[] = {0, 1, 2, 3, 4, 5};
	struct iscsi_lun_info out[8];
	cr_assert_eq(run(&f, luns, 6, out, 8), 2);
	cr_assert_eq(out[0].lun, 0);
	cr_assert_eq(out[1].lun, 5);
	cr_assert_eq(f.nskipped, 4);
	cr_assert_eq(f.skipped[0], 1);
	cr_assert_eq(f.why[0], GW_LUN_NOT_DISK);
	cr_assert_eq(f.why[1], GW_LUN_NO_SUCH_LUN);
	cr_assert_eq(f.why[2], GW_LUN_NO_SUCH_LUN);
	cr_assert_eq(f.why[3], GW_LUN_NOT_DISK);
	cr_assert_eq(gw_lun_verdict_errno(GW_LUN_NOT_DISK), -ENODEV);
	cr_assert_eq(gw_lun_verdict_errno(GW_LUN_NO_SUCH_LUN), -ENXIO);
}

Test(lun_select, block_size_over_the_maximum)
{
	struct fake f;
	all_disks(&f);
	f.lun[0].block_size = GW_BLOCK_SIZE_MAX; /* the largest allowed */
	f.lun[1].block_size = GW_BLOCK_SIZE_MAX * 2;
	const uint16_t luns[] = {0, 1, 2};
	struct iscsi_lun_info out[4];
	cr_assert_eq(run(&f, luns, 3, out, 4), 2);
	cr_assert_eq(out[0].lun, 0);
	cr_assert_eq(out[1].lun, 2);
	cr_assert_eq(f.nskipped, 1);
	cr_assert_eq(f.skipped[0], 1);
	cr_assert_eq(f.why[0], GW_LUN_BLOCK_SIZE);
	cr_assert_eq(gw_lun_verdict_errno(GW_LUN_BLOCK_SIZE), -ENOTSUP);
}

Test(lun_select, zero_and_too_large_sizes)
{
	struct fake f;
	all_disks(&f);
	f.lun[1].nblocks = 0;
	f.lun[2].block_size = 0;
	f.lun[3].nblocks = (uint64_t)INT64_MAX / 512 + 1; /* bytes past off_t */
	f.lun[4].nblocks = (uint64_t)INT64_MAX / 512;     /* just fits */
	const uint16_t luns[] = {1, 2, 3, 4};
	struct iscsi_lun_info out[4];
	cr_assert_eq(run(&f, luns, 4, out, 4), 1);
	cr_assert_eq(out[0].lun, 4);
	cr_assert_eq(f.nskipped, 3);
	cr_assert_eq(f.why[0], GW_LUN_ZERO_SIZE);
	cr_assert_eq(f.why[1], GW_LUN_ZERO_SIZE);
	cr_assert_eq(f.why[2], GW_LUN_TOO_LARGE);
	cr_assert_eq(gw_lun_verdict_errno(GW_LUN_TOO_LARGE), -EOVERFLOW);
}

Test(lun_select, probe_failure_skipped_or_fatal)
{
	struct fake f;
	all_disks(&f);
	f.lun[2].probe_rc = -EIO;
	const uint16_t luns[] = {1, 2, 3};
	struct iscsi_lun_info out[4];
	cr_assert_eq(run(&f, luns, 3, out, 4), 2);
	cr_assert_eq(out[0].lun, 1);
	cr_assert_eq(out[1].lun, 3);
	cr_assert_eq(f.why[0], GW_LUN_PROBE_FAILED);
	cr_assert_eq(f.probe_err[0], -EIO);

	/* skipped's errno ends the selection: nothing after the LUN is probed */
	all_disks(&f);
	f.lun[2].device_type = 0x01;
	f.stop_with = -ENODEV;
	cr_assert_eq(run(&f, luns, 3, out, 4), -ENODEV);
	cr_assert_eq(f.probes[3], 0);
}

Test(lun_select, room_limit)
{
	struct fake f;
	all_disks(&f);
	const uint16_t luns[] = {0, 1, 2, 3};
	struct iscsi_lun_info out[2];
	cr_assert_eq(run(&f, luns, 4, out, 2), 2);
	cr_assert_eq(out[1].lun, 1);
	cr_assert_eq(f.probes[2], 0);
}

Test(lun_select, unusable_block_length_named)
{
	struct fake f;
	all_disks(&f);
	f.lun[1].probe_rc = -EMEDIUMTYPE; /* iscsi_lun_probe: READ CAPACITY's block length 0 */
	f.lun[1].block_size = 0;
	f.lun[2].probe_rc = -EMEDIUMTYPE;
	f.lun[2].block_size = 1u << 20;
	const uint16_t luns[] = {1, 2};
	struct iscsi_lun_info out[2];
	cr_assert_eq(run(&f, luns, 2, out, 2), 0);
	cr_assert_eq(f.nskipped, 2);
	cr_assert_eq(f.why[0], GW_LUN_PROBE_FAILED);
	char why[128];
	struct iscsi_lun_info info = {.cap.block_size = 0};
	cr_assert_str_eq(gw_lun_probe_why(-EMEDIUMTYPE, &info, why, sizeof(why)),
			 "READ CAPACITY reports a logical block size of 0 bytes");
	info.cap.block_size = 1u << 20;
	cr_assert_str_eq(gw_lun_probe_why(-EMEDIUMTYPE, &info, why, sizeof(why)),
			 "READ CAPACITY reports a logical block size of 1048576 bytes");
	cr_assert_str_eq(gw_lun_probe_why(-EIO, NULL, why, sizeof(why)), strerror(EIO));
}
