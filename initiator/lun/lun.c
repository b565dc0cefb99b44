/* SPDX-License-Identifier: MIT */
#include "lun.h"

#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "initiator/scsi/alua.h"
#include "initiator/util/clock.h"
#include "initiator/util/log.h"

int iscsi_exec_retry(struct iscsi_session *s, struct iscsi_cmd *cmd, struct iscsi_cmd_result *res)
{
	return iscsi_exec_retry_ua(s, cmd, res, NULL, NULL);
}

int iscsi_exec_retry_ua(struct iscsi_session *s, struct iscsi_cmd *cmd, struct iscsi_cmd_result *res,
			void (*on_ua)(void *arg, const struct scsi_sense *sense), void *arg)
{
	uint64_t t0 = 0;
	for (unsigned attempt = 0;; attempt++) {
		int rc = iscsi_session_exec(s, cmd, res);
		if (rc)
			return rc;
		rc = iscsi_cmd_result_errno(res);
		if (rc == 0 || res->err)
			return rc;
		const struct scsi_sense *sense = res->has_sense ? &res->sense : NULL;
		if (on_ua && sense && sense->key == SCSI_SK_UNIT_ATTENTION)
			on_ua(arg, sense);
		enum scsi_retry c = scsi_status_retry(res->status, sense);
		if (c == SCSI_RETRY_NO)
			return rc;
		if (attempt == 0)
			t0 = (uint64_t)clk_now_ms();
		int delay = scsi_retry_delay_ms(c, attempt, (uint64_t)clk_now_ms() - t0, ISCSI_RETRY_BUDGET_MS);
		if (delay < 0)
			return rc;
		if (delay)
			usleep((useconds_t)delay * 1000u);
	}
}

/* One command in (or none); UNIT ATTENTIONs it meets go to on_ua (may be NULL) before its retry. */
static int run_ua(struct iscsi_session *s, uint64_t lun_field, uint8_t *cdb, size_t cdb_len, void *buf,
		  uint32_t len, uint32_t *got, void (*on_ua)(void *arg, const struct scsi_sense *sense), void *arg)
{
	struct iscsi_cmd cmd = {.lun = lun_field, .cdb_len = (uint8_t)cdb_len, .buf = len ? buf : NULL, .len = len,
				.dir = len ? ISCSI_DIR_READ : ISCSI_DIR_NONE};
	struct iscsi_cmd_result res;
	memcpy(cmd.cdb, cdb, cdb_len);
	int rc = iscsi_exec_retry_ua(s, &cmd, &res, on_ua, arg);
	if (got)
		*got = rc ? 0 : res.xfer_len;
	return rc;
}

static int run(struct iscsi_session *s, uint64_t lun_field, uint8_t *cdb, size_t cdb_len, void *buf,
	       uint32_t len, uint32_t *got)
{
	return run_ua(s, lun_field, cdb, cdb_len, buf, len, got, NULL, NULL);
}

int iscsi_report_luns(struct iscsi_session *s, void *buf, size_t buflen, uint16_t *luns, size_t max, size_t *count)
{
	uint8_t cdb[SCSI_CDB_MAX];
	size_t cap = buflen > 65536 ? 65536 : buflen, total = 0;
	/* Start small: some targets (istgt) fail allocation lengths above their own buffer. */
	uint32_t len = cap > 4096 ? 4096 : (uint32_t)cap, got;
	for (int round = 1;; round++) {
		int rc = run(s, 0, cdb, scsi_cdb_report_luns(cdb, len), buf, len, &got);
		if (rc)
			return rc;
		rc = scsi_parse_report_luns(buf, got, luns, max, count, &total);
		if (rc)
			return rc;
		size_t need = 8 + total * 8;
		/* a list that keeps growing by a few entries is not chased one command at a time */
		if (need <= len || len >= cap || *count >= max || round == ISCSI_REPORT_LUNS_ROUNDS)
			break;
		len = (uint32_t)(need < cap ? need : cap);
	}
	if (total > *count)
		log_warn("target reports %zu LUNs, using the first %zu", total, *count);
	return 0;
}

static void probe_vpd(struct iscsi_session *s, struct iscsi_lun_info *o, uint8_t *buf, uint32_t len)
{
	uint8_t cdb[SCSI_CDB_MAX], pages[64];
	size_t npages = 0;
	uint32_t got;
	if (len > 4096)
		len = 4096;
	if (run(s, o->lun_field, cdb, scsi_cdb_inquiry(cdb, true, 0x00, (uint16_t)len), buf, len, &got) ||
	    scsi_parse_vpd_supported(buf, got, pages, sizeof(pages), &npages))
		return;
	for (size_t i = 0; i < npages; i++) {
		uint8_t pg = pages[i];
		if (pg != 0x80 && pg != 0x83 && pg != 0xb0 && pg != 0xb2)
			continue;
		if (run(s, o->lun_field, cdb, scsi_cdb_inquiry(cdb, true, pg, (uint16_t)len), buf, len, &got))
			continue;
		if (pg == 0x80) {
			scsi_parse_vpd_serial(buf, got, o->serial, sizeof(o->serial));
		} else if (pg == 0x83) {
			struct scsi_designator d[8];
			size_t nd = 0;
			if (scsi_parse_vpd_devid(buf, got, d, 8, &nd) == 0 &&
			    scsi_designator_name(d, nd, o->devid, sizeof(o->devid)) < 0)
				o->devid[0] = '\0';
			for (size_t j = 0; j < nd && o->n_lu_desig < 4; j++)
				if (d[j].association == 0 && (d[j].type == SCSI_DESIG_NAA || d[j].type == SCSI_DESIG_EUI64 ||
							      d[j].type == SCSI_DESIG_T10))
					o->lu_desig[o->n_lu_desig++] = d[j];
			o->have_tpg = alua_port_ids(d, nd, &o->tpg, &o->rel_port) == 0;
		} else if (pg == 0xb0) {
			o->have_block_limits = scsi_parse_vpd_block_limits(buf, got, &o->bl) == 0;
		} else {
			o->have_lbp = scsi_parse_vpd_lbp(buf, got, &o->lbp) == 0;
		}
	}
}

int iscsi_lun_probe(struct iscsi_session *s, uint16_t lun, void *buf, size_t buflen, struct iscsi_lun_info *out)
{
	return iscsi_lun_probe_ua(s, lun, buf, buflen, out, NULL, NULL);
}

int iscsi_lun_probe_ua(struct iscsi_session *s, uint16_t lun, void *vbuf, size_t buflen, struct iscsi_lun_info *o,
		       void (*on_ua)(void *arg, const struct scsi_sense *sense), void *arg)
{
	uint8_t cdb[SCSI_CDB_MAX], *buf = vbuf;
	uint32_t got, len = buflen > 4096 ? 4096 : (uint32_t)buflen;
	int rc;

	memset(o, 0, sizeof(*o));
	o->lun = lun;
	o->lun_field = scsi_lun_encode(lun);
	if ((rc = run(s, o->lun_field, cdb, scsi_cdb_inquiry(cdb, false, 0, 96), buf, 96, &got)))
		return rc;
	if ((rc = scsi_parse_inquiry(buf, got, &o->inq)))
		return rc;
	o->tpgs = o->inq.tpgs;
	if (o->inq.qualifier != 0 || o->inq.device_type != 0)
		return 0;
	/* TEST UNIT READY consumes the power-on UNIT ATTENTION (INQUIRY never reports one, SPC-4 §5.14): on_ua hears of it. */
	if ((rc = run_ua(s, o->lun_field, cdb, scsi_cdb_test_unit_ready(cdb), NULL, 0, NULL, on_ua, arg)))
		return rc;
	probe_vpd(s, o, buf, len);

	if ((rc = iscsi_lun_read_capacity(s, o->lun_field, ISCSI_READ_CAPACITY_AUTO, buf, len, &o->cap, &o->use16,
					  on_ua, arg)))
		return rc;
	if (o->cap.block_size < 512 || o->cap.block_size > 65536 || (o->cap.block_size & (o->cap.block_size - 1)))
		return -EMEDIUMTYPE; /* o->cap.block_size says which */

	if (iscsi_lun_write_protect(s, o->lun_field, buf, buflen, &o->wp, on_ua, arg))
		o->wp = false; /* no mode pages: assume writable, writes will say otherwise */
	return 0;
}

int iscsi_lun_read_capacity(struct iscsi_session *s, uint64_t lun_field, enum iscsi_read_capacity_mode mode,
			    void *vbuf, size_t buflen, struct scsi_capacity *cap, bool *used16,
			    void (*on_ua)(void *arg, const struct scsi_sense *sense), void *arg)
{
	uint8_t cdb[SCSI_CDB_MAX], *buf = vbuf;
	uint32_t got;
	int rc = -EINVAL;
	if (buflen < 32)
		return -EINVAL;
	if (mode != ISCSI_READ_CAPACITY_10) {
		rc = run_ua(s, lun_field, cdb, scsi_cdb_read_capacity16(cdb, 32), buf, 32, &got, on_ua, arg);
		if (rc == 0)
			rc = scsi_parse_read_capacity16(buf, got, cap);
		if (used16)
			*used16 = rc == 0;
	}
	if (rc && mode != ISCSI_READ_CAPACITY_16) {
		rc = run_ua(s, lun_field, cdb, scsi_cdb_read_capacity10(cdb), buf, 8, &got, on_ua, arg);
		if (rc == 0)
			rc = scsi_parse_read_capacity10(buf, got, cap);
	}
	if (rc == 0 && cap->nblocks == 0)
		rc = -EPROTO;
	return rc;
}

int iscsi_lun_write_protect(struct iscsi_session *s, uint64_t lun_field, void *vbuf, size_t buflen, bool *wp,
			    void (*on_ua)(void *arg, const struct scsi_sense *sense), void *arg)
{
	uint8_t cdb[SCSI_CDB_MAX], *buf = vbuf;
	uint32_t got;
	bool v = false;
	if (buflen < 512)
		return -EINVAL;
	int rc = run_ua(s, lun_field, cdb, scsi_cdb_mode_sense6(cdb, 0x3f, 0, 255), buf, 255, &got, on_ua, arg);
	if (rc == 0)
		rc = scsi_parse_mode_sense6_wp(buf, got, &v);
	if (rc) {
		rc = run_ua(s, lun_field, cdb, scsi_cdb_mode_sense10(cdb, 0x3f, 0, 512), buf, 512, &got, on_ua, arg);
		if (rc == 0)
			rc = scsi_parse_mode_sense10_wp(buf, got, &v);
	}
	if (rc == 0)
		*wp = v;
	return rc;
}

int iscsi_lun_deallocated(struct iscsi_session *s, uint64_t lun_field, uint64_t nblocks, void *vbuf, size_t buflen,
			  unsigned max_cmds, uint64_t *deallocated,
			  void (*on_ua)(void *arg, const struct scsi_sense *sense), void *arg)
{
	struct scsi_lba_status st[64];
	uint8_t cdb[SCSI_CDB_MAX], *buf = vbuf;
	uint32_t len = buflen > 8 + 16 * 64 ? 8 + 16 * 64 : (uint32_t)buflen, got;
	uint64_t lba = 0, sum = 0;
	if (len < 24)
		return -EINVAL;
	for (unsigned c = 0; c < max_cmds && lba < nblocks; c++) {
		size_t n = 0;
		bool more;
		int rc = run_ua(s, lun_field, cdb, scsi_cdb_get_lba_status(cdb, lba, len), buf, len, &got, on_ua, arg);
		if (rc == 0)
			rc = scsi_parse_lba_status(buf, got, st, 64, &n, &more);
		if (rc)
			return rc;
		if (n == 0 || st[0].lba != lba)
			return -EPROTO; /* the first descriptor starts at the LBA asked about (§5.8.2) */
		uint64_t next;
		sum += scsi_lba_status_deallocated(st, n, lba, nblocks, &next);
		if (next <= lba)
			return -EPROTO;
		lba = next;
	}
	*deallocated = sum;
	return 0;
}
