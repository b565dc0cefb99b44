/* SPDX-License-Identifier: MIT */
/*
 * Which LUNs become files: the one choice shared by the start-up
 * (main.c's LUN step, before the mount) and the rescan thread (rescan.c,
 * LUNs that appear later).  A LUN becomes a file when REPORT LUNS (SPC-4
 * §6.33) lists it for the first time in the list, its probe worked, and
 * it is a direct-access block device (SPC-4 §6.6.2: peripheral qualifier
 * 0, device type 00h) with a logical block length of at most
 * GW_BLOCK_SIZE_MAX and a non-zero capacity (SBC-4 §5.20/§5.21) whose
 * size in bytes fits off_t.  Pure: no session, no FUSE, no locks.
 */
#ifndef ISERFUSE_LUN_SELECT_H
#define ISERFUSE_LUN_SELECT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "initiator/lun/lun.h"

/* The largest logical block length in bytes a LUN file may have (the pool's slices leave room for 4 of them). */
#define GW_BLOCK_SIZE_MAX 4096u

/* Why a LUN is or is not a file. */
enum gw_lun_verdict {
	GW_LUN_OK,
	GW_LUN_PROBE_FAILED, /* the probe returned an error */
	GW_LUN_NO_SUCH_LUN,  /* peripheral qualifier 3 or device type 1Fh: nothing at this LUN */
	GW_LUN_NOT_DISK,     /* another qualifier or device type */
	GW_LUN_BLOCK_SIZE,   /* logical block length over GW_BLOCK_SIZE_MAX */
	GW_LUN_ZERO_SIZE,    /* no logical block, or a zero block length */
	GW_LUN_TOO_LARGE,    /* the size in bytes would not fit off_t */
};

/*
 * The verdict on one probed LUN (iscsi_lun_probe's output), from the
 * INQUIRY data (SPC-4 §6.6.2) and the READ CAPACITY data (SBC-4
 * §5.20/§5.21) only.  Never GW_LUN_PROBE_FAILED.
 */
enum gw_lun_verdict gw_lun_verdict(const struct iscsi_lun_info *info);

/* The negative errno a start-up that asked for this one LUN fails with (0 for GW_LUN_OK). */
int gw_lun_verdict_errno(enum gw_lun_verdict v);

/* How gw_lun_select probes a LUN and reports one it leaves out. */
struct gw_lun_select_ops {
	/* Fill *out for LUN lun; 0 or a negative errno (the LUN is left out). */
	int (*probe)(void *arg, uint16_t lun, struct iscsi_lun_info *out);
	/*
	 * A LUN left out: v says why; info is the probe's output (for
	 * GW_LUN_PROBE_FAILED, with probe_err its errno, NULL unless that is
	 * -EMEDIUMTYPE: an unusable block length).  Returns 0 to go
	 * on, or a negative errno that ends the selection.  May be NULL.
	 */
	int (*skipped)(void *arg, uint16_t lun, const struct iscsi_lun_info *info, enum gw_lun_verdict v,
		       int probe_err);
	void *arg;
};

/*
 * Why a probe failed, in words, into buf (cap bytes), returned: the
 * logical block length READ CAPACITY reported for -EMEDIUMTYPE (info, as
 * given to skipped), else strerror.
 */
const char *gw_lun_probe_why(int probe_err, const struct iscsi_lun_info *info, char *buf, size_t cap);

/*
 * The LUNs among luns[0..n) (REPORT LUNS order) that become files, in
 * that order, each probed once even when listed twice, into out[0..max).
 * Returns how many were kept, or the negative errno ops->skipped ended
 * the selection with.
 */
ssize_t gw_lun_select(const uint16_t *luns, size_t n, const struct gw_lun_select_ops *ops,
		      struct iscsi_lun_info *out, size_t max);

#endif
