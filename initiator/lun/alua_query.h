/* SPDX-License-Identifier: MIT */
/*
 * Asking a target for its ALUA data (SPC-4 §5.15, §6.36) through a
 * session: REPORT TARGET PORT GROUPS sent and parsed with alua.h.
 * Blocking, on the caller's thread (never an event thread).
 */
#ifndef ISERFUSE_ALUA_QUERY_H
#define ISERFUSE_ALUA_QUERY_H

#include <stddef.h>
#include <stdint.h>

#include "lun.h"
#include "initiator/scsi/alua.h"
#include "initiator/session/session.h"

/*
 * REPORT TARGET PORT GROUPS (extended header asked for) to the LU whose
 * BHS LUN field is lun_field, through iscsi_exec_retry (lun.h: UNIT
 * ATTENTION, BUSY, becoming ready are retried), the data into buf (the
 * caller's scratch of buflen bytes, e.g. a pool slice, >= 16 else
 * -EINVAL; at most 4096 bytes are asked for), then alua_parse_rtpg into
 * out[] (up to max), *count set.  Blocking: on the caller's thread, never
 * on an event thread.  Returns 0, -EOPNOTSUPP when the target answers
 * ILLEGAL REQUEST, INVALID COMMAND OPERATION CODE (20h/00h) or INVALID
 * FIELD IN CDB (24h/00h: MAINTENANCE IN without this service action),
 * -EPROTO for malformed data, or the exec error (a negative errno).
 */
int iscsi_alua_query(struct iscsi_session *s, uint64_t lun_field, void *buf, size_t buflen, struct alua_tpg *out,
		     size_t max, size_t *count);

/*
 * The ALUA state of the target port group of the path s leads through,
 * for the LUN probed as info (info->tpg from VPD 0x83): REPORT TARGET
 * PORT GROUPS through s into buf (buflen bytes of the caller's scratch, a
 * pool slice over iSER).  Returns 0 with *state, -ENOENT when the answer
 * does not list the group, or iscsi_alua_query's error.  Blocking.
 */
int iscsi_alua_path_state(struct iscsi_session *s, const struct iscsi_lun_info *info, void *buf, size_t buflen,
			  int *state);

#endif
