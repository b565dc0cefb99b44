/* SPDX-License-Identifier: MIT */
#include "lun_select.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

enum gw_lun_verdict gw_lun_verdict(const struct iscsi_lun_info *info)
{
	if (info->inq.qualifier != 0 || info->inq.device_type != 0)
		return info->inq.qualifier == 3 || info->inq.device_type == 0x1f ? GW_LUN_NO_SUCH_LUN : GW_LUN_NOT_DISK;
	if (info->cap.block_size > GW_BLOCK_SIZE_MAX)
		return GW_LUN_BLOCK_SIZE;
	if (info->cap.nblocks == 0 || info->cap.block_size == 0)
		return GW_LUN_ZERO_SIZE;
	if (info->cap.nblocks > (uint64_t)INT64_MAX / info->cap.block_size)
		return GW_LUN_TOO_LARGE;
	return GW_LUN_OK;
}

int gw_lun_verdict_errno(enum gw_lun_verdict v)
{
	switch (v) {
	case GW_LUN_OK:
		return 0;
	case GW_LUN_NO_SUCH_LUN:
		return -ENXIO;
	case GW_LUN_NOT_DISK:
		return -ENODEV;
	case GW_LUN_BLOCK_SIZE:
		return -ENOTSUP;
	case GW_LUN_TOO_LARGE:
		return -EOVERFLOW;
	case GW_LUN_PROBE_FAILED:
	case GW_LUN_ZERO_SIZE:
		break;
	}
	return -EPROTO;
}

const char *gw_lun_probe_why(int probe_err, const struct iscsi_lun_info *info, char *buf, size_t cap)
{
	if (probe_err == -EMEDIUMTYPE && info)
		snprintf(buf, cap, "READ CAPACITY reports a logical block size of %u bytes", info->cap.block_size);
	else
		snprintf(buf, cap, "%s", strerror(-probe_err));
	return buf;
}

ssize_t gw_lun_select(const uint16_t *luns, size_t n, const struct gw_lun_select_ops *ops,
		      struct iscsi_lun_info *out, size_t max)
{
	size_t kept = 0;
	for (size_t i = 0; i < n && kept < max; i++) {
		bool dup = false;
		for (size_t j = 0; j < i && !dup; j++)
			dup = luns[j] == luns[i];
		if (dup)
			continue; /* one file per LUN, however often the target lists it */
		struct iscsi_lun_info *info = &out[kept];
		int prc = ops->probe(ops->arg, luns[i], info);
		enum gw_lun_verdict v = prc ? GW_LUN_PROBE_FAILED : gw_lun_verdict(info);
		if (v == GW_LUN_OK) {
			kept++;
			continue;
		}
		/* an unusable block length (-EMEDIUMTYPE) is in info: the reason names it */
		int rc = ops->skipped ? ops->skipped(ops->arg, luns[i], prc && prc != -EMEDIUMTYPE ? NULL : info, v, prc) : 0;
		if (rc)
			return rc;
	}
	return (ssize_t)kept;
}
