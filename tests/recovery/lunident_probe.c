/* SPDX-License-Identifier: MIT */
/*
 * A LUN's identity (initiator/lun/lun_ident.c) as a real target reports it,
 * for tests/recovery/lunident.sh:
 *
 *   lunident_probe save HOST PORT TARGET LUN FILE
 *       log in (TCP, no CHAP), probe LUN (iscsi_lun_probe), log out; write
 *       its struct iscsi_lun_ident to FILE (this build's layout) and print
 *       "type T serial S blocks N block_size B designators K"
 *   lunident_probe compare FILE_A FILE_B
 *       print "same" or the first difference iscsi_lun_ident_same names
 *
 * Exit 0, 1 on errors (a line on stderr), 4 when compare finds a difference.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "initiator/lun/lun.h"
#include "initiator/lun/lun_ident.h"
#include "cache/pool/pool.h"
#include "initiator/session/session.h"
#include "initiator/wire/text.h"
#include "initiator/transport/transport.h"

#define PROBE_TIMEOUT_MS 10000

static int save(const char *host, const char *port, const char *target, const char *lun, const char *file)
{
	struct iscsi_session_config sc = {
		.transport = &iscsi_tcp_transport,
		.port = (unsigned)strtoul(port, NULL, 10),
		.queue_depth = 4,
		.timeout_ms = PROBE_TIMEOUT_MS,
	};
	snprintf(sc.host, sizeof(sc.host), "%s", host);
	snprintf(sc.target_name, sizeof(sc.target_name), "%s", target);
	snprintf(sc.initiator_name, sizeof(sc.initiator_name), "iqn.2026-11.org.example:lunident");
	iscsi_neg_config_default(&sc.neg);
	struct buf_pool *pool;
	if (buf_pool_create(&pool, 64 * 1024, 1)) {
		fprintf(stderr, "no memory for the pool\n");
		return 1;
	}
	struct iscsi_session *s = NULL;
	char err[512] = "";
	int rc = iscsi_session_open(&sc, &s, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "login: %s\n", err[0] ? err : strerror(-rc));
		buf_pool_destroy(pool);
		return 1;
	}
	void *buf = buf_pool_get(pool, NULL);
	struct iscsi_lun_info info;
	rc = iscsi_lun_probe(s, (uint16_t)strtoul(lun, NULL, 10), buf, buf_pool_slice_size(pool), &info);
	buf_pool_put(pool, buf);
	iscsi_session_close(s, PROBE_TIMEOUT_MS);
	buf_pool_destroy(pool);
	if (rc) {
		fprintf(stderr, "probe of LUN %s: %s\n", lun, strerror(-rc));
		return 1;
	}
	struct iscsi_lun_ident id;
	iscsi_lun_ident_from_info(&info, &id);
	FILE *f = fopen(file, "wb");
	if (!f || fwrite(&id, sizeof(id), 1, f) != 1 || fclose(f)) {
		fprintf(stderr, "%s: %s\n", file, strerror(errno));
		return 1;
	}
	printf("type %u serial %s blocks %llu block_size %u designators %zu\n", id.device_type,
	       id.serial[0] ? id.serial : "-", (unsigned long long)id.nblocks, id.block_size, id.n_desig);
	return 0;
}

static int load(const char *file, struct iscsi_lun_ident *id)
{
	FILE *f = fopen(file, "rb");
	size_t n = f ? fread(id, sizeof(*id), 1, f) : 0;
	if (f)
		fclose(f);
	if (n != 1 || id->n_desig > ISCSI_LUN_IDENT_DESIG_MAX) {
		fprintf(stderr, "%s: not an identity saved by this build\n", file);
		return -1;
	}
	return 0;
}

static int compare(const char *fa, const char *fb)
{
	struct iscsi_lun_ident a, b;
	if (load(fa, &a) || load(fb, &b))
		return 1;
	char why[256];
	bool same = iscsi_lun_ident_same(&a, &b, why, sizeof(why));
	printf("%s\n", same ? "same" : why);
	return same ? 0 : 4;
}

int main(int argc, char **argv)
{
	if (argc == 7 && strcmp(argv[1], "save") == 0)
		return save(argv[2], argv[3], argv[4], argv[5], argv[6]);
	if (argc == 4 && strcmp(argv[1], "compare") == 0)
		return compare(argv[2], argv[3]);
	fprintf(stderr, "usage: %s save HOST PORT TARGET LUN FILE | compare FILE_A FILE_B\n", argv[0]);
	return 2;
}
