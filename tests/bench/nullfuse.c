/* SPDX-License-Identifier: MIT */
/*
 * nullfuse: a null FUSE server, the floor of a FUSE round trip on this
 * machine (not a test, not installed).
 *
 *   nullfuse [--loop=dev|mt|uring] [--threads=N (1-1024)] MOUNTPOINT
 *
 * One file, /file, 1 GiB: READ answers zeroes from a static buffer, WRITE
 * answers its size and drops the data, nothing else is stored.  Low-level
 * libfuse API, as the gateway uses it.
 *
 *   --loop=dev  (default) one thread: fuse_session_receive_buf (a read(2)
 *               of /dev/fuse) and fuse_session_process_buf (the handler,
 *               whose reply is one writev(2)), in turn
 *   --loop=mt   libfuse's fuse_session_loop_mt (at most N threads, default
 *               16, as the gateway's default)
 *   --loop=uring  FUSE over io_uring (nullfuse_uring.c): one ring thread
 *               for the entries of every CPU queue, the --loop=dev loop
 *               for what stays on /dev/fuse; needs
 *               /sys/module/fuse/parameters/enable_uring = Y (exit 1 if not)
 *
 * Runs in the foreground until unmounted (fusermount3 -u) or SIGTERM/SIGINT.
 */
#define FUSE_USE_VERSION 312
#include <errno.h>
#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nullfuse_uring.h"

#define FILE_INO 2
#define FILE_NAME "file"
#define FILE_SIZE (1ull << 30)
#define MAX_IO (1u << 20)

static const char zeroes[MAX_IO];

static void fill_attr(fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = getuid();
	st->st_gid = getgid();
	if (ino == FUSE_ROOT_ID) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
	} else {
		st->st_mode = S_IFREG | 0644;
		st->st_nlink = 1;
		st->st_size = (off_t)FILE_SIZE;
		st->st_blksize = 4096;
		st->st_blocks = (blkcnt_t)(FILE_SIZE / 512);
	}
}

static void nf_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	conn->max_write = MAX_IO;
	conn->max_read = MAX_IO;
	conn->max_background = 128;
	conn->congestion_threshold = 96;
}

static void nf_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e = {0};
	if (parent != FUSE_ROOT_ID || strcmp(name, FILE_NAME)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	e.ino = FILE_INO;
	e.attr_timeout = 3600;
	e.entry_timeout = 3600;
	fill_attr(FILE_INO, &e.attr);
	fuse_reply_entry(req, &e);
}

static void nf_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	(void)fi;
	if (ino != FUSE_ROOT_ID && ino != FILE_INO) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fill_attr(ino, &st);
	fuse_reply_attr(req, &st, 3600);
}

/* Nothing changes: the size stays 1 GiB (fio may ftruncate to the size it has). */
static void nf_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi)
{
	(void)attr;
	(void)to_set;
	nf_getattr(req, ino, fi);
}

static void nf_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ino != FILE_INO) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	fi->keep_cache = 0;
	fuse_reply_open(req, fi);
}

static void nf_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	if (off < 0 || (uint64_t)off >= FILE_SIZE)
		size = 0;
	else if (size > FILE_SIZE - (uint64_t)off)
		size = (size_t)(FILE_SIZE - (uint64_t)off);
	fuse_reply_buf(req, zeroes, size < sizeof(zeroes) ? size : sizeof(zeroes));
}

static void nf_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	(void)ino;
	(void)buf;
	(void)off;
	(void)fi;
	fuse_reply_write(req, size);
}

static void nf_ok(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void nf_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)datasync;
	nf_ok(req, ino, fi);
}

static void nf_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ino != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	fuse_reply_open(req, fi);
}

static void nf_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	static const struct {
		const char *name;
		fuse_ino_t ino;
	} ents[] = {{".", FUSE_ROOT_ID}, {"..", FUSE_ROOT_ID}, {FILE_NAME, FILE_INO}};
	char buf[512];
	size_t len = 0;
	(void)ino;
	(void)fi;
	for (off_t i = off; i < (off_t)(sizeof(ents) / sizeof(ents[0])); i++) {
		struct stat st;
		fill_attr(ents[i].ino, &st);
		size_t n = fuse_add_direntry(req, buf + len, sizeof(buf) - len, ents[i].name, &st, i + 1);
		if (len + n > size || len + n > sizeof(buf))
			break;
		len += n;
	}
	fuse_reply_buf(req, buf, len);
}

static const struct fuse_lowlevel_ops nf_ops = {
	.init = nf_init,
	.lookup = nf_lookup,
	.getattr = nf_getattr,
	.setattr = nf_setattr,
	.open = nf_open,
	.read = nf_read,
	.write = nf_write,
	.flush = nf_ok,
	.release = nf_ok,
	.fsync = nf_fsync,
	.opendir = nf_opendir,
	.readdir = nf_readdir,
	.releasedir = nf_ok,
};

/* The --loop=dev loop: one request read, handled and answered at a time. */
static int loop_dev(struct fuse_session *se)
{
	struct fuse_buf buf = {0};
	int rc = 0;
	while (!fuse_session_exited(se)) {
		rc = fuse_session_receive_buf(se, &buf);
		if (rc == -EINTR)
			continue;
		if (rc <= 0)
			break;
		fuse_session_process_buf(se, &buf);
	}
	free(buf.mem);
	return rc < 0 && rc != -ENODEV ? 1 : 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: nullfuse [--loop=dev|mt|uring] [--threads=N] MOUNTPOINT\n");
}

int main(int argc, char **argv)
{
	const char *mnt = NULL;
	enum { LOOP_DEV, LOOP_MT, LOOP_URING } loop = LOOP_DEV;
	unsigned threads = 16;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--loop=dev")) {
			loop = LOOP_DEV;
		} else if (!strcmp(argv[i], "--loop=mt")) {
			loop = LOOP_MT;
		} else if (!strcmp(argv[i], "--loop=uring")) {
			loop = LOOP_URING;
		} else if (!strncmp(argv[i], "--threads=", 10)) {
			const char *v = argv[i] + 10;
			char *end;
			errno = 0;
			unsigned long t = strtoul(v, &end, 10);
			threads = *v >= '0' && *v <= '9' && !*end && !errno && t <= 1024 ? (unsigned)t : 0; /* 0: usage */
		} else if (argv[i][0] != '-' && !mnt) {
			mnt = argv[i];
		} else {
			usage();
			return 2;
		}
	}
	if (!mnt || !threads) {
		usage();
		return 2;
	}
	char *fargv[] = {argv[0], "-o", "fsname=nullfuse,subtype=nullfuse,max_read=1048576", NULL};
	struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
	struct fuse_session *se = fuse_session_new(&args, &nf_ops, sizeof(nf_ops), NULL);
	if (!se)
		return 1;
	int rc = 1;
	if (fuse_set_signal_handlers(se))
		goto out;
	if (fuse_session_mount(se, mnt))
		goto out_signals;
	if (loop == LOOP_URING && nf_uring_attach(se))
		goto out_unmount;
	if (loop == LOOP_MT) {
		struct fuse_loop_config *lc = fuse_loop_cfg_create();
		fuse_loop_cfg_set_max_threads(lc, threads);
		rc = fuse_session_loop_mt(se, lc) ? 1 : 0;
		fuse_loop_cfg_destroy(lc);
	} else {
		rc = loop_dev(se);
	}
	if (loop == LOOP_URING)
		nf_uring_end();
out_unmount:
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out:
	fuse_session_destroy(se);
	return rc;
}
