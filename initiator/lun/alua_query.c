/* SPDX-License-Identifier: MIT */
/*
 * REPORT TARGET PORT GROUPS over a session (see alua.h): one synchronous
 * command on the caller's thread, its data parsed by alua_parse_rtpg.
 */
#include "alua_query.h"

#include <errno.h>
#include <string.h>

#include "lun.h"

/* What REPORT TARGET PORT GROUPS may ask for: 4096 bytes hold hundreds of TPGs. */
#define ALUA_RTPG_ALLOC_MAX 4096u

int iscsi_alua_query(struct iscsi_session *s, uint64_t lun_field, void *buf, size_t buflen, struct alua_tpg *out,
		     size_t max, size_t *count)
{
	uint32_t len = buflen > ALUA_RTPG_ALLOC_MAX ? ALUA_RTPG_ALLOC_MAX : (uint32_t)buflen;
	struct iscsi_cmd cmd = {.lun = lun_field, .buf = buf, .len = len, .dir = ISCSI_DIR_READ};
	struct iscsi_cmd_result res = {0};

	if (count)
		*count = 0;
	if (!s || !buf || buflen < 16 || !count)
		return -EINVAL;
	cmd.cdb_len = (uint8_t)scsi_cdb_report_tpgs(cmd.cdb, len);
	int rc = iscsi_exec_retry(s, &cmd, &res);
	if (rc) {
		/* a target without ALUA: no MAINTENANCE IN, or not this service action */
		if (res.err == 0 && res.status == SCSI_STATUS_CHECK_CONDITION && res.has_sense &&
		    res.sense.key == SCSI_SK_ILLEGAL_REQUEST && (res.sense.asc == 0x20 || res.sense.asc == 0x24))
			return -EOPNOTSUPP;
		return rc;
	}
	return alua_parse_rtpg(buf, res.xfer_len > len ? len : res.xfer_len, out, max, count, NULL);
}

int iscsi_alua_path_state(struct iscsi_session *s, const struct iscsi_lun_info *info, void *buf, size_t buflen,
			  int *state)
{
	struct alua_tpg tpgs[16];
	size_t n = 0;
	int rc = iscsi_alua_query(s, info->lun_field, buf, buflen, tpgs, 16, &n);
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++)
		if (tpgs[i].tpg == info->tpg) {
			*state = tpgs[i].state;
			return 0;
		}
	return -ENOENT;
}
