/* SPDX-License-Identifier: MIT */
/*
 * Discovering what a target offers: REPORT LUNS and the per-LUN probe
 * (TEST UNIT READY, INQUIRY with VPD 0x00/0x80/0x83/0xB0/0xB2, READ
 * CAPACITY(16) with fallback to (10), MODE SENSE for the WP bit).
 * Synchronous: runs on the caller's thread, never on the event thread.
 * Payload goes through the caller's buffer (a pool slice).
 */
#ifndef ISERFUSE_LUN_H
#define ISERFUSE_LUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "initiator/scsi/scsi.h"
#include "initiator/session/session.h"

struct iscsi_lun_info {
	uint16_t lun;
	uint64_t lun_field;          /* BHS LUN field */
	struct scsi_inquiry inq;
	struct scsi_capacity cap;    /* valid for disks (inq.device_type == 0) */
	bool wp;                     /* write protected (MODE SENSE) */
	bool use16;                  /* READ CAPACITY(16) worked: prefer 16-byte CDBs for SYNCHRONIZE CACHE */
	bool have_block_limits, have_lbp;
	struct scsi_block_limits bl;
	struct scsi_lbp lbp;
	char serial[256];            /* VPD 0x80, "" if none */
	char devid[300];             /* scsi_designator_name of VPD 0x83, "" if none */
	/* VPD 0x83 logical-unit designators (association 0) of type NAA, EUI-64 and T10, in page order */
	struct scsi_designator lu_desig[4];
	size_t n_lu_desig;
	/*
	 * ALUA (SPC-4 §5.15): tpgs is the standard INQUIRY TPGS field (0 none,
	 * 1 implicit, 2 explicit, 3 both; = inq.tpgs); have_tpg when VPD 0x83
	 * named this path's target port group (association 1, type 5), tpg its
	 * id and rel_port the relative target port (type 4, 0 if absent).
	 */
	uint8_t tpgs;
	bool have_tpg;
	uint16_t tpg, rel_port;
};

/*
 * REPORT LUNS (SPC-4 §6.33) into luns[] (up to max, sorted as the target
 * sent them), *count set.  buf is a scratch payload buffer of buflen bytes
 * (>= 4096).  A list longer than the first allocation length (4096
 * bytes) is read again once with the length it needs (at most 64 KiB):
 * ISCSI_REPORT_LUNS_ROUNDS commands at most, however the target's
 * LUN LIST LENGTH grows.  Returns 0 or a negative errno (status/sense
 * mapped by scsi_status_to_errno).
 */
#define ISCSI_REPORT_LUNS_ROUNDS 2
int iscsi_report_luns(struct iscsi_session *s, void *buf, size_t buflen, uint16_t *luns, size_t max, size_t *count);

/*
 * Probe one LUN.  For a non-disk device only lun/lun_field/inq/tpgs are
 * filled.  For a disk the VPD 0x83 page also gives have_tpg/tpg/rel_port
 * (alua_port_ids, alua.h) from its first 8 designators.
 * buf: scratch payload buffer of buflen bytes (>= 4096).  Returns 0 or a
 * negative errno; UNIT ATTENTION and NOT READY (becoming ready) are retried.
 * -EMEDIUMTYPE: READ CAPACITY (SBC-4 §5.20, §5.21) reported a logical
 * block length that is not a power of two from 512 to 65536 bytes (0
 * included), the value left in out->cap.block_size.
 */
int iscsi_lun_probe(struct iscsi_session *s, uint16_t lun, void *buf, size_t buflen, struct iscsi_lun_info *out);

/*
 * iscsi_lun_probe, with every UNIT ATTENTION its commands meet (the
 * power-on one a reconnect brings, a capacity change) handed to on_ua (may
 * be NULL) before the command is retried, so that a probe that consumes it
 * does not hide it from those who must act on it (the block cache).
 */
int iscsi_lun_probe_ua(struct iscsi_session *s, uint16_t lun, void *buf, size_t buflen, struct iscsi_lun_info *out,
		       void (*on_ua)(void *arg, const struct scsi_sense *sense), void *arg);

/*
 * The WP bit of the mode parameter header (SBC-4 §6.5.1): MODE SENSE(6),
 * or MODE SENSE(10) if that fails.  buf: scratch payload buffer of buflen
 * bytes (>= 512, else -EINVAL).  UNIT ATTENTIONs met on the way go to
 * on_ua (may be NULL) before the command is retried.  Sets *wp and
 * returns 0, or returns a negative errno (both commands failed) and leaves
 * *wp alone.
 */
int iscsi_lun_write_protect(struct iscsi_session *s, uint64_t lun_field, void *buf, size_t buflen, bool *wp,
			    void (*on_ua)(void *arg, const struct scsi_sense *sense), void *arg);

/*
 * The LUN's deallocated blocks (thin provisioning, SBC-3 §4.7), from GET
 * LBA STATUS (§5.8) walked from LBA 0 to nblocks, at most max_cmds
 * commands: what lies beyond the last answer counts as mapped.  buf:
 * scratch payload buffer of buflen bytes (>= 24).  UNIT ATTENTIONs go to
 * on_ua (may be NULL).  Sets *deallocated and returns 0, or returns a
 * negative errno (the command failed, -EPROTO for an answer that does not
 * start at the LBA asked about).
 */
int iscsi_lun_deallocated(struct iscsi_session *s, uint64_t lun_field, uint64_t nblocks, void *buf, size_t buflen,
			  unsigned max_cmds, uint64_t *deallocated,
			  void (*on_ua)(void *arg, const struct scsi_sense *sense), void *arg);

/* Which READ CAPACITY iscsi_lun_read_capacity sends. */
enum iscsi_read_capacity_mode {
	ISCSI_READ_CAPACITY_AUTO, /* (16), and (10) if that fails (the probe) */
	ISCSI_READ_CAPACITY_16,   /* (16) only: a LUN whose probe found it working */
	ISCSI_READ_CAPACITY_10,   /* (10) only */
};

/*
 * READ CAPACITY(16) (SBC-4 §5.21, SERVICE ACTION IN(16)) and/or
 * READ CAPACITY(10) (SBC-4 §5.20) of the LUN whose BHS LUN field is
 * lun_field, as mode says; *cap gets the number of logical blocks (last
 * LBA + 1) and the logical block length in bytes.  buf: scratch payload
 * buffer of buflen bytes (>= 32, else -EINVAL).  used16 (may be NULL) is
 * set, in the modes that try (16), to whether (16) answered.  UNIT
 * ATTENTIONs met on the way go to on_ua (may be NULL) before the command
 * is retried (iscsi_exec_retry_ua).  Synchronous, on the caller's thread.
 * Returns 0, -EMEDIUMTYPE for a logical block length of 0 (cap->block_size
 * 0), -EPROTO for a zero block count or a malformed answer, or another
 * negative errno (status/sense mapped by scsi_status_to_errno; -ENXIO:
 * the LUN is not there).
 */
int iscsi_lun_read_capacity(struct iscsi_session *s, uint64_t lun_field, enum iscsi_read_capacity_mode mode,
			    void *buf, size_t buflen, struct scsi_capacity *cap, bool *used16,
			    void (*on_ua)(void *arg, const struct scsi_sense *sense), void *arg);

/* How long a synchronous command keeps retrying BUSY, TASK SET FULL and becoming ready, ms. */
#define ISCSI_RETRY_BUDGET_MS 30000u

/*
 * Execute cmd synchronously, retrying transient failures as
 * scsi_status_retry() classes them: UNIT ATTENTION and ABORTED COMMAND at
 * once (up to 8 times), BUSY and TASK SET FULL with a doubling back-off,
 * NOT READY / becoming ready every 250 ms, both within
 * ISCSI_RETRY_BUDGET_MS (scsi_retry_delay_ms).  Blocks the caller; never
 * call it on the event thread.  Returns 0 on GOOD with *res filled, else a
 * negative errno (*res holds the last status and sense).
 */
int iscsi_exec_retry(struct iscsi_session *s, struct iscsi_cmd *cmd, struct iscsi_cmd_result *res);

/*
 * iscsi_exec_retry that also shows each UNIT ATTENTION it consumes to
 * on_ua(arg, sense) (may be NULL), on the caller's thread, before the retry.
 */
int iscsi_exec_retry_ua(struct iscsi_session *s, struct iscsi_cmd *cmd, struct iscsi_cmd_result *res,
			void (*on_ua)(void *arg, const struct scsi_sense *sense), void *arg);

#endif
