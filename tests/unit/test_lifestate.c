/* SPDX-License-Identifier: MIT */
/*
 * What a worker hands on to the next one (gateway/handover/lifestate.c) and
 * the request notes of a worker that takes over (gateway/fuse/fuse_resume.c):
 * the state memfd, the --worker value, the LUN table's order and check,
 * the file handle tags, the resent count and the saved INIT request.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/fuse/fuse_resume.h"
#include "gateway/handover/lifestate.h"

static struct gw_life_state *state;
static int state_fd;

static void setup(void)
{
	state_fd = gw_life_state_create(&state);
	cr_assert_geq(state_fd, 0);
	char val[64];
	snprintf(val, sizeof(val), "0,-1,%d,-1,-1", state_fd);
	char *argv[] = {"iserfuse", GW_WORKER_FLAG, val, "-f", "url", "mnt", NULL};
	int argc = 6;
	cr_assert_eq(gw_life_from_argv(&argc, argv), 0);
	cr_assert_eq(argc, 4);
	cr_assert_str_eq(argv[1], "-f");
	cr_assert_str_eq(argv[3], "mnt");
	cr_assert_null(argv[4]);
}

TestSuite(lifestate, .init = setup);

Test(lifestate, state_and_worker_value)
{
	cr_assert(gw_life.worker);
	cr_assert_eq(gw_life.n, 0u);
	cr_assert_eq((state->isid[0] & 0xc0), 0x80, "a random-type ISID (RFC 7143 §11.12.5)");
	cr_assert_eq(gw_fh_gen, 1);
	char *bad[] = {"iserfuse", GW_WORKER_FLAG, "junk", NULL};
	int argc = 3;
	cr_assert_eq(gw_life_from_argv(&argc, bad), -1);
	char *plain[] = {"iserfuse", "-f", "url", "mnt", NULL};
	argc = 4;
	cr_assert_eq(gw_life_from_argv(&argc, plain), 0);
	cr_assert_eq(argc, 4);
}

Test(lifestate, file_handle_tags)
{
	int x;
	uint64_t fh = gw_fh_make(&x);
	cr_assert_eq(gw_fh_ptr(fh), &x);
	cr_assert_eq(gw_fh_make(NULL), 0u);
	gw_fh_gen = 2; /* the next worker */
	cr_assert_null(gw_fh_ptr(fh), "an earlier worker's handle is not dereferenced");
	cr_assert_neq(gw_fh_ptr(gw_fh_make(&x)), NULL);
	gw_fh_gen = 1;
}

static void lun(struct iscsi_lun_info *in, uint16_t n, const char *serial)
{
	memset(in, 0, sizeof(*in));
	in->lun = n;
	in->cap.block_size = 512;
	snprintf(in->serial, sizeof(in->serial), "%s", serial);
}

Test(lifestate, lun_table_order_and_check)
{
	struct gw g = {0};
	g.luns = calloc(GW_MAX_LUNS, sizeof(*g.luns));
	lun(&g.luns[0].info, 3, "s3");
	lun(&g.luns[1].info, 1, "s1");
	atomic_store(&g.nluns, 2);
	gw_life_luns_save(&g);
	cr_assert_eq(state->nluns, 2u);

	gw_life.n = 1; /* a restarted worker: REPORT LUNS gives 1, 2, 3 now */
	struct iscsi_lun_info infos[3];
	lun(&infos[0], 1, "s1");
	lun(&infos[1], 2, "s2");
	lun(&infos[2], 3, "s3");
	gw_life_luns_order(infos, 3);
	cr_assert_eq(infos[0].lun, 3);
	cr_assert_eq(infos[1].lun, 1);
	cr_assert_eq(infos[2].lun, 2, "a LUN the table does not hold comes after");

	char why[256];
	cr_assert_eq(gw_life_luns_check(&g, why, sizeof(why)), 0);
	snprintf(g.luns[1].info.serial, sizeof(g.luns[1].info.serial), "other");
	cr_assert_eq(gw_life_luns_check(&g, why, sizeof(why)), -ENODEV);
	cr_assert(strstr(why, "lun1 is another device"), "%s", why);
	atomic_store(&g.nluns, 1);
	cr_assert_eq(gw_life_luns_check(&g, why, sizeof(why)), -ENODEV);
	cr_assert(strstr(why, "no longer reported"), "%s", why);
	gw_life.n = 0;
	free(g.luns);
}

Test(lifestate, resent_count_and_init_saved)
{
	struct {
		struct fuse_in_header h;
		struct fuse_init_in i;
	} init = {{.len = sizeof(init), .opcode = FUSE_INIT, .unique = 2}, {.major = 7, .minor = 40}};
	struct fuse_in_header rd = {.len = sizeof(rd), .opcode = FUSE_READ, .unique = 4 | GW_FUSE_UNIQUE_RESEND};
	gw_resume_note(&init, sizeof(init));
	cr_assert_eq(atomic_load(&state->init_len), sizeof(init));
	cr_assert_eq(memcmp(state->init, &init, sizeof(init)), 0);
	gw_resume_note(&rd, sizeof(rd));
	rd.unique = 6;
	gw_resume_note(&rd, sizeof(rd));
	cr_assert_eq(atomic_load(&state->resent), 1u, "only the request marked FUSE_UNIQUE_RESEND");
	init.h.unique = 8; /* a second INIT (never sent by the kernel) does not replace the first */
	gw_resume_note(&init, sizeof(init));
	cr_assert_eq(((struct fuse_in_header *)state->init)->unique, 2u);
}

Test(lifestate, resend_write_error_is_returned)
{
	int fd = open("/dev/null", O_RDONLY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(gw_resume_resend(fd), -EBADF);
	close(fd);
}
