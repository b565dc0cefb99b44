/* SPDX-License-Identifier: MIT */
/*
 * ALUA as our initiator sees it (initiator/scsi/alua.c, alua_query.c, the LUN
 * probe), for tests/malicious/alua.sh:
 *
 *   alua_probe HOST PORT TARGET LUN
 *
 * Logs in (TCP, no CHAP), then reads one command per line on stdin and
 * answers each with one line on stdout:
 *
 *   probe  iscsi_lun_probe: "tpgs T tpg G port P serial S devid D"
 *          (tpg/port "-" when VPD 0x83 named no TPG)
 *   query  iscsi_alua_query: "TPG STATE[,pref] ..." in the target's
 *          order (STATE as alua_state_name), "none" for an empty list,
 *          or "error NAME" (EOPNOTSUPP, EPROTO, ... from errno)
 *   tur    TEST UNIT READY, sent once (no retry: a UNIT ATTENTION is shown)
 *   read   READ(10) of LBA 0, 1 block of 512 bytes, sent once
 *          tur/read: "good", "check K/ASC/ASCQ CLASS" (hex, CLASS as
 *          alua_classify_sense: other, path, transitioning, changed),
 *          "status 0xSS" or "error NAME"
 *   quit   log out and exit 0
 *
 * Exit 1 when the login fails (a line on stderr), 2 on bad usage.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "initiator/lun/alua_query.h"
#include "initiator/scsi/alua.h"
#include "initiator/lun/lun.h"
#include "initiator/session/session.h"
#include "initiator/wire/text.h"
#include "initiator/transport/transport.h"

#define PROBE_TIMEOUT_MS 10000
#define PROBE_BUF 65536

static const char *err_name(int rc)
{
	switch (-rc) {
	case EOPNOTSUPP:
		return "EOPNOTSUPP";
	case EPROTO:
		return "EPROTO";
	case EIO:
		return "EIO";
	case EAGAIN:
		return "EAGAIN";
	case EINVAL:
		return "EINVAL";
	case ENXIO:
		return "ENXIO";
	default:
		return strerror(-rc);
	}
}

static void probe(struct iscsi_session *s, uint16_t lun, void *buf)
{
	struct iscsi_lun_info info;
	int rc = iscsi_lun_probe(s, lun, buf, PROBE_BUF, &info);
	if (rc) {
		printf("error %s\n", err_name(rc));
		return;
	}
	if (info.have_tpg)
		printf("tpgs %u tpg %u port %u serial %s devid %s\n", info.tpgs, info.tpg, info.rel_port,
		       info.serial[0] ? info.serial : "-", info.devid[0] ? info.devid : "-");
	else
		printf("tpgs %u tpg - port - serial %s devid %s\n", info.tpgs, info.serial[0] ? info.serial : "-",
		       info.devid[0] ? info.devid : "-");
}

static void query(struct iscsi_session *s, uint16_t lun, void *buf)
{
	struct alua_tpg t[8];
	size_t n = 0;
	int rc = iscsi_alua_query(s, scsi_lun_encode(lun), buf, PROBE_BUF, t, 8, &n);
	if (rc) {
		printf("error %s\n", err_name(rc));
		return;
	}
	if (n == 0)
		printf("none");
	for (size_t i = 0; i < n; i++)
		printf("%s%u %s%s", i ? " " : "", t[i].tpg, alua_state_name(t[i].state), t[i].pref ? ",pref" : "");
	printf("\n");
}

static void once(struct iscsi_session *s, uint16_t lun, void *buf, bool read)
{
	static const char *const cls[] = {"other", "path", "transitioning", "changed"};
	struct iscsi_cmd cmd = {.lun = scsi_lun_encode(lun), .dir = read ? ISCSI_DIR_READ : ISCSI_DIR_NONE,
				.buf = read ? buf : NULL, .len = read ? 512 : 0};
	struct iscsi_cmd_result res = {0};
	cmd.cdb_len = (uint8_t)(read ? scsi_cdb_read(cmd.cdb, 0, 1, false) : scsi_cdb_test_unit_ready(cmd.cdb));
	int rc = iscsi_session_exec(s, &cmd, &res);
	if (rc == 0)
		rc = res.err;
	if (rc) {
		printf("error %s\n", err_name(rc));
	} else if (res.status == SCSI_STATUS_GOOD) {
		printf("good\n");
	} else if (res.status == SCSI_STATUS_CHECK_CONDITION && res.has_sense) {
		printf("check %x/%02x/%02x %s\n", res.sense.key, res.sense.asc, res.sense.ascq,
		       cls[alua_classify_sense(&res.sense)]);
	} else {
		printf("status 0x%02x\n", res.status);
	}
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: %s HOST PORT TARGET LUN\n", argv[0]);
		return 2;
	}
	struct iscsi_session_config sc = {
		.transport = &iscsi_tcp_transport,
		.port = (unsigned)strtoul(argv[2], NULL, 10),
		.queue_depth = 4,
		.timeout_ms = PROBE_TIMEOUT_MS,
	};
	snprintf(sc.host, sizeof(sc.host), "%s", argv[1]);
	snprintf(sc.target_name, sizeof(sc.target_name), "%s", argv[3]);
	snprintf(sc.initiator_name, sizeof(sc.initiator_name), "iqn.2026-11.org.example:alua-probe");
	iscsi_neg_config_default(&sc.neg);
	uint16_t lun = (uint16_t)strtoul(argv[4], NULL, 10);
	void *buf = malloc(PROBE_BUF);
	if (!buf) {
		fprintf(stderr, "no memory\n");
		return 1;
	}
	struct iscsi_session *s = NULL;
	char err[512] = "";
	int rc = iscsi_session_open(&sc, &s, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "login: %s\n", err[0] ? err : strerror(-rc));
		free(buf);
		return 1;
	}
	char line[64];
	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\r\n")] = '\0';
		if (strcmp(line, "probe") == 0)
			probe(s, lun, buf);
		else if (strcmp(line, "query") == 0)
			query(s, lun, buf);
		else if (strcmp(line, "tur") == 0)
			once(s, lun, buf, false);
		else if (strcmp(line, "read") == 0)
			once(s, lun, buf, true);
		else if (strcmp(line, "quit") == 0)
			break;
		else
			printf("unknown command %s\n", line);
	}
	iscsi_session_close(s, PROBE_TIMEOUT_MS);
	free(buf);
	return 0;
}
