/* SPDX-License-Identifier: MIT */
/*
 * iserfuse [options] URL MOUNTPOINT
 *
 * Order of work, so that every failure comes before anything is mounted:
 * parse options and URL (fuse_opt; settings.c tries each FUSE option on
 * libfuse), fork unless -f (the parent waits for the child's "mounted"),
 * connect and log in, probe the LUNs, create the pool, mount, wait until
 * the kernel completed FUSE INIT (live_watch), report success, detach,
 * serve.  On unmount or SIGTERM/SIGINT/SIGHUP: leave the
 * loop, stop the rescans, unmount, drain, SYNCHRONIZE CACHE every LUN
 * written, Logout, exit 0 (1 if a SYNCHRONIZE CACHE failed; a second stop
 * signal exits 2 at once).
 *
 * The process started (after the fork) is the supervisor
 * (life/supervisor.c): it runs the steps after the fork in a worker, this
 * binary again with --worker, and starts another when one dies; the mount
 * and its /dev/fuse descriptor stay.  A restarted worker takes the mount
 * over instead of mounting (mount_resume): same ISID, same LUNs, the
 * saved FUSE INIT replayed, FUSE_NOTIFY_RESEND.
 *
 * main runs the steps below in that order on one struct mount; each step
 * prints its own error.  The pieces live in settings.c (options and the
 * configuration file), pool_setup.c (the pool and the block cache),
 * daemon.c (the fork and the wait for the live mount), lun_select.c
 * (which LUNs become files) and stop.c (signals and the shutdown).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "initiator/iser/iser.h"
#include "initiator/util/defaults.h"
#include "initiator/util/log.h"
#include "initiator/util/thread.h"
#include "initiator/transport/transport.h"
#include "initiator/net/url.h"
#include "gateway/settings/credentials.h"
#include "gateway/setup/daemon.h"
#include "gateway/fuse/fuse_io.h"
#include "gateway/fuse/fuse_loop.h"
#include "gateway/fuse/fuselog.h"
#include "gateway/fuse/fuse_uring.h"
#include "gateway.h"
#include "gateway/luns/lun_select.h"
#include "gateway/handover/lifestate.h"
#include "gateway/life/paths.h"
#include "gateway/life/rescan.h"
#include "supervisor.h"
#include "gateway/fuse/fuse_resume.h"
#include "gateway/setup/pool_setup.h"
#include "gateway/settings/settings.h"
#include "gateway/setup/startup.h"
#include "stop.h"
#include "gateway/setup/transport_pick.h"

/* Everything one mount holds, from the command line to the close. */
struct mount {
	struct fuse_args args;          /* the command line, for fuse_opt and libfuse */
	struct gw_settings o;
	struct gw_config conf;
	struct fuse_cmdline_opts cmd;   /* libfuse's: mount point, -f, -d, -s (clone_fd, max_idle_threads unused) */
	struct iscsi_url url;
	enum gw_transport tmode;
	enum gw_uring_mode umode;       /* -o io_uring= */
	struct iscsi_chap_creds creds;
	struct gw_pool_plan plan;
	struct gw g;
	struct iser_ctx *iser;          /* NULL over TCP */
	struct fuse_session *se;
	struct gw_live_watch watch;
	struct gw_sync_batch *sync;     /* gw_stop's, freed by gw_stop_close */
	int ready_fd;                   /* the parent's pipe until the watcher has it; -1 in the foreground */
	char err[512];
	bool give_up;                   /* a restarted worker found other LUNs: GW_WORKER_EXIT_GIVE_UP */
	bool no_target;                 /* the login failed: a restarted worker exits GW_WORKER_EXIT_NO_TARGET */
};

/* The start-up's LUN selection: probes on the session, reasons logged (or, for the URL's one LUN, fatal). */
struct open_luns_ctx {
	struct gw *g;
	const struct iscsi_url *url;
	void *scratch;
	char *err;
	size_t err_cap;
};

static int open_luns_probe(void *arg, uint16_t lun, struct iscsi_lun_info *out)
{
	struct open_luns_ctx *c = arg;
	return iscsi_lun_probe(gw_ctl(c->g), lun, c->scratch, buf_pool_slice_size(c->g->pool), out);
}

static int open_luns_skipped(void *arg, uint16_t lun, const struct iscsi_lun_info *info, enum gw_lun_verdict v,
			     int probe_err)
{
	struct open_luns_ctx *c = arg;
	bool fatal = c->url->lun >= 0;
	switch (v) {
	case GW_LUN_PROBE_FAILED: {
		char why[128];
		gw_lun_probe_why(probe_err, info, why, sizeof(why));
		if (fatal) {
			snprintf(c->err, c->err_cap, "lun%u: %s", lun, why);
			return probe_err;
		}
		log_warn("lun%u: probe failed (%s), skipped", lun, why);
		return 0;
	}
	case GW_LUN_NO_SUCH_LUN:
	case GW_LUN_NOT_DISK:
		if (fatal && v == GW_LUN_NO_SUCH_LUN)
			snprintf(c->err, c->err_cap, "lun%u does not exist on %s", lun, c->url->target);
		else if (fatal)
			snprintf(c->err, c->err_cap, "lun%u is not a disk (peripheral device type 0x%02x)", lun,
				 info->inq.device_type);
		else
			log_info("lun%u: peripheral device type 0x%02x, not a disk: skipped", lun, info->inq.device_type);
		break;
	case GW_LUN_BLOCK_SIZE:
		log_warn("lun%u: %u-byte blocks are not supported, skipped", lun, info->cap.block_size);
		if (fatal)
			snprintf(c->err, c->err_cap, "lun%u: %u-byte blocks are not supported", lun, info->cap.block_size);
		break;
	case GW_LUN_ZERO_SIZE:
	case GW_LUN_TOO_LARGE:
		/* The size in bytes would not fit off_t (or would wrap). */
		snprintf(c->err, c->err_cap, "lun%u: capacity of %llu blocks of %u bytes is too large", lun,
			 (unsigned long long)info->cap.nblocks, info->cap.block_size);
		if (!fatal) {
			log_warn("%s, skipped", c->err);
			c->err[0] = '\0';
		}
		break;
	case GW_LUN_OK:
		break;
	}
	return fatal ? gw_lun_verdict_errno(v) : 0;
}

static int open_luns(struct gw *g, const struct iscsi_url *url, char *err, size_t err_cap)
{
	uint16_t luns[GW_MAX_LUNS];
	size_t nluns = 0;
	struct iscsi_lun_info *infos = calloc(GW_MAX_LUNS, sizeof(*infos));
	void *scratch = buf_pool_get(g->pool, NULL);
	int rc = 0;

	if (!infos) {
		rc = -ENOMEM;
		goto out;
	}
	if (url->lun >= 0) {
		luns[0] = (uint16_t)url->lun;
		nluns = 1;
	} else if ((rc = iscsi_report_luns(gw_ctl(g), scratch, buf_pool_slice_size(g->pool), luns, GW_MAX_LUNS, &nluns))) {
		snprintf(err, err_cap, "REPORT LUNS failed: %s", strerror(-rc));
		goto out;
	}
	struct open_luns_ctx ctx = {g, url, scratch, err, err_cap};
	struct gw_lun_select_ops ops = {open_luns_probe, open_luns_skipped, &ctx};
	ssize_t ndisk = gw_lun_select(luns, nluns, &ops, infos, GW_MAX_LUNS);
	if (ndisk < 0) {
		rc = (int)ndisk;
		goto out;
	}
	if (ndisk == 0) {
		snprintf(err, err_cap, "target %s has no disk LUN", url->target);
		rc = -ENODEV;
		goto out;
	}
	gw_life_luns_order(infos, (size_t)ndisk); /* a restarted worker: each inode names the LUN it named */
	/* Every slot up front: the rescan thread adds LUNs while FUSE handlers read the table. */
	g->luns = calloc(GW_MAX_LUNS, sizeof(*g->luns));
	if (!g->luns) {
		rc = -ENOMEM;
		goto out;
	}
	for (ssize_t i = 0; i < ndisk; i++) {
		struct gw_lun *l = gw_lun_add(g, &infos[i]);
		if (!l) {
			rc = -ENOMEM;
			snprintf(err, err_cap, "lun%u: %s", infos[i].lun, strerror(-rc));
			goto out;
		}
		log_info("%s: %s %s, %llu blocks of %u bytes%s", l->name, infos[i].inq.vendor, infos[i].inq.product,
			 (unsigned long long)infos[i].cap.nblocks, infos[i].cap.block_size,
			 infos[i].wp ? ", write protected" : "");
	}
out:
	if (rc && !err[0])
		snprintf(err, err_cap, "%s", strerror(-rc));
	buf_pool_put(g->pool, scratch);
	free(infos);
	return rc;
}

/*
 * SCSI Async Event (RFC 7143 §11.9.1, AsyncEvent 0), on the event thread:
 * a UNIT ATTENTION carried this way prompts the same rescan as one on a
 * command's status.  The retry queue (and its hook) may not exist yet.
 */
static void async_sense(void *arg, uint64_t lun, const struct scsi_sense *sense)
{
	struct gw *g = arg;
	struct blk_retry *q = atomic_load_explicit(&g->retry, memory_order_acquire);
	if (sense && sense->key == SCSI_SK_UNIT_ATTENTION)
		blk_retry_note_ua(q, lun, sense);
}

/* ---- the start-up steps ---- */

/*
 * The command line and the configuration file into m->o.  Returns -1 to
 * go on, or the exit status (>= 0) when there is nothing to mount
 * (--help and --version: 0, --list: gw_list's, an error: 1).
 */
static int mount_settings(struct mount *m, int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: iserfuse [options] URL MOUNTPOINT (iserfuse --help lists the options)\n");
		return 1;
	}
	if (gw_settings_parse(&m->o, &m->args))
		return 1;
	gw_creds_scrub_argv(argc, argv); /* o.url keeps the only copy of any password */
	if (m->o.show_version) {
		gw_print_version(stdout);
		return 0;
	}
	if (m->o.show_help) {
		gw_settings_help();
		return 0;
	}
	if (gw_settings_load(&m->o, &m->args, &m->conf))
		return 1; /* nothing started yet */
	if (m->o.list) {
		/* Discovery only: no mount point, no FUSE session. */
		if (m->o.nonopts || !m->o.url) {
			fprintf(stderr, "iserfuse: --list takes one URL, iscsi://host[:port], and no mount point\n");
			return 1;
		}
		char uw[GW_WHERE_MAX], sw[GW_WHERE_MAX];
		return gw_list(m->o.url, gw_settings_where(&m->o, GW_WHERE_URL, uw, sizeof(uw)),
			       m->o.str[GW_OPT_INITIATOR_NAME], (unsigned)gw_settings_num(&m->o, GW_OPT_LOGIN_TIMEOUT),
			       m->o.str[GW_OPT_SECRET_FILE], gw_settings_where(&m->o, GW_OPT_SECRET_FILE, sw, sizeof(sw)),
			       gw_settings_discover_portals(&m->o));
	}
	return -1;
}

/*
 * The mount point, the URL, the transport, the credentials, the digests
 * and the log's destination, all checked before anything starts.
 * Returns 0, or -1 after printing one line.
 */
static int mount_check(struct mount *m)
{
	struct gw_settings *o = &m->o;
	char where[GW_WHERE_MAX];
	if (fuse_parse_cmdline(&m->args, &m->cmd) != 0)
		return -1;
	if (!o->url || !m->cmd.mountpoint) {
		fprintf(stderr, "iserfuse: %s; usage: iserfuse [options] URL MOUNTPOINT (iserfuse --help lists the options)\n",
			!o->url ? "missing URL and mount point" : "missing mount point");
		return -1;
	}
	if (iscsi_url_parse(o->url, true, &m->url, m->err, sizeof(m->err))) {
		fprintf(stderr, "iserfuse: %sbad URL: %s\n", gw_settings_where(o, GW_WHERE_URL, where, sizeof(where)), m->err);
		return -1;
	}
	if (gw_transport_parse(o->str[GW_OPT_TRANSPORT], m->url.iser, &m->tmode)) {
		fprintf(stderr, "iserfuse: %sbad option 'transport=%s': auto, iser or tcp expected (not tcp with ?iser)\n",
			gw_settings_where(o, GW_OPT_TRANSPORT, where, sizeof(where)), o->str[GW_OPT_TRANSPORT]);
		return -1;
	}
	if (gw_uring_mode_parse(o->str[GW_OPT_IO_URING], &m->umode)) {
		fprintf(stderr, "iserfuse: %sbad option 'io_uring=%s': auto, on or off expected\n",
			gw_settings_where(o, GW_OPT_IO_URING, where, sizeof(where)), o->str[GW_OPT_IO_URING]);
		return -1;
	}
	const char *loop = o->str[GW_OPT_EVENT_LOOP];
	if (loop && strcmp(loop, "uring") && strcmp(loop, "poll")) {
		fprintf(stderr, "iserfuse: %sbad option 'event_loop=%s': uring or poll expected\n",
			gw_settings_where(o, GW_OPT_EVENT_LOOP, where, sizeof(where)), loop);
		return -1;
	}
	iscsi_tcp_set_ring(!loop || !strcmp(loop, "uring"));
	/* given neither on the command line nor in the configuration file: the environment's, if any */
	const char *uenv = getenv("ISERFUSE_IO_URING");
	if (!o->str[GW_OPT_IO_URING] && uenv && *uenv && gw_uring_mode_parse(uenv, &m->umode)) {
		fprintf(stderr, "iserfuse: bad ISERFUSE_IO_URING '%s': auto, on or off expected\n", uenv);
		return -1;
	}
	explicit_bzero(o->url, strlen(o->url));
	log_set_context(m->url.target); /* every line names the target (and the LUN where it is about one) */
	if (gw_creds_load(&m->creds, &m->url, o->str[GW_OPT_SECRET_FILE],
			  gw_settings_where(o, GW_OPT_SECRET_FILE, where, sizeof(where))))
		return -1;
	iscsi_url_wipe(&m->url);
	struct iscsi_neg_config digest_check;
	iscsi_neg_config_default(&digest_check);
	if (gw_settings_digests(&digest_check, &m->url, o))
		return -1; /* a bad digest option fails before anything starts */
	if (gw_life.n == 0) { /* a restarted worker's mount point is the live mount: not looked into */
		if (gw_mountpoint_check(gw_settings_where(o, GW_WHERE_MOUNTPOINT, where, sizeof(where)), m->cmd.mountpoint))
			return -1;
		struct stat st;
		if (stat(m->cmd.mountpoint, &st))
			return -1;
		m->watch.under = st.st_dev;
	}
	if (m->cmd.debug)
		log_set_level(LOG_LVL_DEBUG);
	if (!m->cmd.foreground &&
	    gw_logdest_prepare(gw_settings_where(o, GW_OPT_LOG_FILE, where, sizeof(where)), o->str[GW_OPT_LOG_FILE]))
		return -1;
	if (!m->cmd.foreground && gw_life.n) /* the terminal was left by the first worker */
		gw_logdest_activate();
	return 0;
}

/*
 * The gateway's settings, the pool's plan and the FUSE session (the FUSE
 * options were each tried on libfuse by gw_settings_parse and
 * gw_settings_load).  Returns 0 or -1.
 */
static int mount_fuse_session(struct mount *m)
{
	const struct gw_settings *o = &m->o;
	struct gw *g = &m->g;
	/* Every numeric option was checked against its range by gw_settings_parse. */
	size_t max_io = (size_t)gw_settings_num(o, GW_OPT_MAX_IO_KIB) * 1024;
	size_t kernel_max_io = gw_fuse_max_io();
	if (max_io > kernel_max_io) {
		log_warn("max_io_kib=%zu is more than this kernel's FUSE allows (/proc/sys/fs/fuse/max_pages_limit): "
			 "using %zu", max_io / 1024, kernel_max_io / 1024);
		max_io = kernel_max_io;
	}
	unsigned long long cache_bytes = (unsigned long long)gw_settings_num(o, GW_OPT_CACHE_SIZE);
	gw_pool_plan(&m->plan, (unsigned)gw_settings_num(o, GW_OPT_QUEUE_DEPTH),
		     o->given[GW_OPT_POOL_SLICES] ? gw_settings_num(o, GW_OPT_POOL_SLICES) : 0, max_io, cache_bytes);
	g->max_io = max_io;
	g->writeback = o->given[GW_OPT_WRITEBACK] && cache_bytes;
	g->ro = gw_settings_ro(o);
	g->uid = getuid();
	g->gid = getgid();
	g->umask = (mode_t)gw_settings_num(o, GW_OPT_UMASK);
	clock_gettime(CLOCK_REALTIME, &g->mtime);

	char maxread[64], fsname[3 * (ISCSI_URL_HOST_MAX + ISCSI_NAME_MAX) + 64];
	snprintf(maxread, sizeof(maxread), "-omax_read=%zu", max_io);
	fuse_opt_add_arg(&m->args, maxread);
	fuse_opt_add_arg(&m->args, "-osubtype=iserfuse");
	/* the kernel checks every file's mode, the directory's and .stats's too (with allow_other) */
	fuse_opt_add_arg(&m->args, "-odefault_permissions");
	gw_fsname_opt(&m->url, fsname, sizeof(fsname)); /* findmnt and df show the URL, without credentials */
	fuse_opt_add_arg(&m->args, "-o");
	fuse_opt_add_arg(&m->args, fsname);
	m->se = fuse_session_new(&m->args, &gw_ops, sizeof(gw_ops), g);
	if (!m->se)
		return -1;
	g->se = m->se;
	g->url_lun = m->url.lun;
	return 0;
}

/*
 * The pool, then the session (connect and log in, RFC 7143 §6), then the
 * retry queue.  On failure before the session exists, the pool is
 * destroyed here; returns -1 then, -2 when the session is open (the
 * caller closes it), 0 on success.
 */
static int mount_connect(struct mount *m)
{
	const struct gw_settings *o = &m->o;
	struct gw *g = &m->g;
	unsigned login_timeout = (unsigned)gw_settings_num(o, GW_OPT_LOGIN_TIMEOUT);
	struct iscsi_session_config sc = {
		.transport = &iscsi_tcp_transport,
		.port = m->url.port,
		.queue_depth = (unsigned)gw_settings_num(o, GW_OPT_QUEUE_DEPTH),
		.timeout_ms = (int)login_timeout * 1000,
		.cmd_timeout_ms = (int)gw_settings_num(o, GW_OPT_CMD_TIMEOUT) * 1000,
		.noop_interval_ms = (int)gw_settings_num(o, GW_OPT_NOOP_INTERVAL) * 1000,
		.noop_timeout_ms = (int)gw_settings_num(o, GW_OPT_NOOP_TIMEOUT) * 1000,
		.replacement_timeout_ms = (int)gw_settings_num(o, GW_OPT_REPLACEMENT_TIMEOUT) * 1000,
	};
	snprintf(sc.host, sizeof(sc.host), "%s", m->url.host);
	snprintf(g->portal_host, sizeof(g->portal_host), "%s", m->url.host);
	g->portal_port = m->url.port;
	snprintf(sc.target_name, sizeof(sc.target_name), "%s", m->url.target);
	if (o->str[GW_OPT_INITIATOR_NAME])
		snprintf(sc.initiator_name, sizeof(sc.initiator_name), "%s", o->str[GW_OPT_INITIATOR_NAME]);
	else
		gw_initiator_name_or_warn(sc.initiator_name, sizeof(sc.initiator_name));
	if (gw_life.st) /* every worker logs in with the same ISID: a restart reinstates the session */
		memcpy(sc.isid, gw_life.st->isid, sizeof(sc.isid));
	iscsi_neg_config_default(&sc.neg);
	if (gw_settings_digests(&sc.neg, &m->url, o))
		return -1;
	if (gw_pool_create(g, &m->plan)) {
		iscsi_chap_creds_wipe(&sc.chap);
		return -1;
	}
	gw_pool_rx_setup(g, &m->plan); /* the FUSE readers receive into payload slices */
	gw_creds_to_session(&m->creds, &sc);
	sc.on_async_sense = async_sense;
	sc.async_arg = g;
	if (gw_paths_begin(g, o, &sc)) {
		iscsi_chap_creds_wipe(&sc.chap);
		buf_pool_destroy(g->pool);
		g->pool = NULL;
		return -1;
	}
	sigset_t oldmask;
	thread_quiet_begin(&oldmask); /* the event thread inherits the mask: only main takes them */
	int src = gw_session_open(m->tmode, &sc, g->pool, &m->iser, &g->s, m->err, sizeof(m->err));
	thread_quiet_end(&oldmask);
	g->iser = m->iser != NULL;
	iscsi_chap_creds_wipe(&sc.chap);
	gw_paths_first(g, src, g->iser ? iscsi_iser_transport.name : iscsi_tcp_transport.name);
	if (src) {
		m->no_target = true;
		fprintf(stderr, "iserfuse: %s\n", m->err);
		buf_pool_destroy(g->pool);
		g->pool = NULL;
		return -1;
	}
	long long cmd_timeout = gw_settings_num(o, GW_OPT_CMD_TIMEOUT);
	g->retry_budget_ms = (uint32_t)(cmd_timeout > 0 ? cmd_timeout : ISCSI_CMD_TIMEOUT_DEFAULT_S) * 1000u;
	thread_quiet_begin(&oldmask);
	int qrc = blk_retry_create(&g->retry);
	thread_quiet_end(&oldmask);
	if (qrc) {
		fprintf(stderr, "iserfuse: cannot start the retry thread: %s\n", strerror(-qrc));
		return -2;
	}
	return 0;
}

/* The LUN files, by-id/ and the block cache.  Returns 0 or -1 after printing one line. */
static int mount_files(struct mount *m)
{
	struct gw *g = &m->g;
	if (open_luns(g, &m->url, m->err, sizeof(m->err))) {
		fprintf(stderr, "iserfuse: %s\n", m->err);
		return -1;
	}
	if (gw_life.n) { /* a restart: the inodes must name the same devices as before */
		char why[400];
		if (gw_life_luns_check(g, why, sizeof(why))) {
			log_err("the target's LUNs are not the mount's any more (%s): the mount ends", why);
			m->give_up = true;
			return -1;
		}
	}
	gw_life_luns_save(g);
	g->transport = g->iser ? iscsi_iser_transport.name : iscsi_tcp_transport.name;
	if (gw_byid_build(g)) {
		fprintf(stderr, "iserfuse: out of memory\n");
		return -1;
	}
	int rc = gw_cache_setup(g, &m->plan);
	if (rc) {
		fprintf(stderr, "iserfuse: cannot set up the block cache: %s\n", strerror(-rc));
		return -1;
	}
	gw_paths_start(g, m->iser, m->tmode == GW_TRANSPORT_ISER); /* the other paths, checked against these LUNs, in the background */
	return 0;
}

/*
 * FUSE over io_uring (fuse_uring.c) on the session just mounted, before
 * the loop reads the INIT request; with -o io_uring=off, or where the
 * rings' custom I/O could not be installed, fuse_resume.c's (/dev/fuse as
 * libfuse does it, the INIT request saved for a restarted worker).
 * Returns 0, or -1 after printing one line.
 */
static int mount_uring(struct mount *m)
{
	struct gw *g = &m->g;
	int rc = -EOPNOTSUPP;
	if (m->umode == GW_URING_OFF)
		log_info("FUSE requests over /dev/fuse (io_uring=off)");
	else
		rc = gw_fuse_uring_attach(m->se, m->umode, GW_URING_QUEUE_ENTRIES, &g->payload_copied, &g->uring);
	if (rc && m->umode == GW_URING_ON) {
		fprintf(stderr, "iserfuse: io_uring=on: %s\n", strerror(-rc));
		return -1;
	}
	if (rc && m->umode != GW_URING_OFF)
		log_warn("io_uring=auto: %s; FUSE requests go over /dev/fuse", strerror(-rc));
	/* without the rings' custom I/O, ours: it saves the INIT request for a restarted worker */
	if (rc && (rc = gw_resume_attach(m->se, fuse_session_fd(m->se)))) {
		fprintf(stderr, "iserfuse: cannot install the FUSE I/O: %s\n", strerror(-rc));
		return -1;
	}
	return 0;
}

/*
 * A restarted worker takes the mount over instead of mounting: the
 * inherited /dev/fuse descriptor with our custom I/O, the saved INIT
 * replayed to libfuse (its reply dropped), FUSE_NOTIFY_RESEND (the
 * requests the last worker read and did not answer come again), the
 * rescan thread; then the supervisor hears that it serves.  Never after
 * a worker that served over io_uring (the supervisor ends the mount
 * then): requests go over /dev/fuse.  Returns 0, or -1 after one line.
 */
static int mount_resume(struct mount *m)
{
	gw_stop_signals_install(m->se);
	int rc = gw_resume_attach(m->se, gw_life.dev_fd);
	if (rc) {
		log_err("cannot take the FUSE connection over: %s", strerror(-rc));
		return -1;
	}
	gw_life.dev_fd = -1; /* the session's now */
	if ((rc = gw_resume_replay(m->se))) {
		log_err("cannot take the FUSE connection over: the saved INIT request was refused (%s)", strerror(-rc));
		return -1;
	}
	if ((rc = gw_resume_resend(fuse_session_fd(m->se))))
		log_err("FUSE_NOTIFY_RESEND failed (%s): requests the last worker read stay unanswered", strerror(-rc));
	int rsrc = gw_rescan_start(&m->g, (unsigned)gw_settings_num(&m->o, GW_OPT_RESCAN_INTERVAL));
	if (rsrc)
		log_warn("cannot start the rescan thread (%s): sizes and LUNs stay as mounted", strerror(-rsrc));
	alarm(0); /* the start-up watchdog: serving now */
	signal(SIGALRM, SIG_DFL);
	m->watch.live = true;
	m->watch.given_up = true;
	gw_life_tell('S', -1);
	return 0;
}

/*
 * The stop signals, the kernel mount, the watcher that reports it live and
 * the rescan thread.  Returns 0, or -1 after printing one line (nothing
 * left mounted).
 */
static int mount_kernel(struct mount *m)
{
	if (gw_life.n)
		return mount_resume(m);
	gw_stop_signals_install(m->se);
	if (m->umode == GW_URING_ON) {
		/* -o io_uring=on fails here, before the mount, where the kernel will not offer the rings */
		char why[160];
		if (gw_uring_kernel_check(why, sizeof(why))) {
			fprintf(stderr, "iserfuse: io_uring=on: %s\n", why);
			return -1;
		}
	}
	if (fuse_session_mount(m->se, m->cmd.mountpoint)) {
		fprintf(stderr, "iserfuse: cannot mount on %s\n", m->cmd.mountpoint);
		return -1;
	}
	/* before the INIT is read nothing is in flight: a resend moves nothing, it only asks the kernel */
	int rrc = gw_resume_resend(fuse_session_fd(m->se));
	if (rrc) {
		log_warn("this kernel cannot resend FUSE requests (FUSE_NOTIFY_RESEND, Linux 6.9+: %s): "
			 "a worker that dies ends the mount", strerror(-rrc));
		atomic_store(&gw_life.st->no_resend, true);
	}
	gw_life_tell('M', fuse_session_fd(m->se)); /* the supervisor keeps the connection from now on */
	if (mount_uring(m)) {
		fuse_session_unmount(m->se);
		return -1;
	}
	struct gw_live_watch *w = &m->watch;
	w->ready_fd = m->ready_fd;
	m->ready_fd = -1;
	w->foreground = m->cmd.foreground;
	w->mnt = m->cmd.mountpoint;
	w->se = m->se;
	snprintf(w->started, sizeof(w->started), "%zu LUN(s) of %s mounted on %s%s%s", gw_nluns(&m->g), m->url.target,
		 m->cmd.mountpoint, m->cmd.foreground ? "" : "; ", m->cmd.foreground ? "" : gw_logdest_name());
	int wrc = gw_live_watch_start(w);
	if (wrc) {
		fprintf(stderr, "iserfuse: cannot start a thread: %s\n", strerror(wrc));
		fuse_session_unmount(m->se);
		return -1;
	}
	int rsrc = gw_rescan_start(&m->g, (unsigned)gw_settings_num(&m->o, GW_OPT_RESCAN_INTERVAL));
	if (rsrc)
		log_warn("cannot start the rescan thread (%s): sizes and LUNs stay as mounted", strerror(-rsrc));
	return 0;
}

/*
 * The FUSE loop: -s, libfuse's one thread; else gw_fuse_loop's readers
 * (fuse_loop.c), up to -o max_threads.  Returns its result (0 or a
 * negative errno).
 */
static void io_guest_detach(void *s)
{
	iscsi_session_set_guest(s, -1, NULL, NULL, NULL);
}

/*
 * The FUSE loop's session exited: for a stop (not a handover, which may
 * yet be refused and serve on) the stop grace starts now (gw_stop_begin),
 * so that a reader's handler waiting on an unanswered command ends within
 * it and the loop with it.
 */
static void loop_ended(void *arg)
{
	struct mount *m = arg;
	if (!gw_stop_handover())
		gw_stop_begin(&m->g);
}

static int mount_serve(struct mount *m)
{
	struct gw *g = &m->g;
	int fd = fuse_session_fd(m->se);
	gw_io_fd_blocking(fd); /* an earlier worker's I/O thread may have left it non-blocking */
	if (m->cmd.singlethread)
		return fuse_session_loop(m->se);
	struct gw_io *io = NULL;
	if (gw_settings_num(&m->o, GW_OPT_IO_THREADS) > 0 && g->s) {
		if (!g->io && (g->io = gw_io_new(m->se, gw_fast_io, g)))
			gw_io_on_exit(g->io, io_guest_detach, g->s);
		io = g->io;
	}
	if (io) { /* again after a handover refused (main.c's loop) */
		gw_io_arm(io);
		iscsi_session_set_guest(g->s, fd, gw_io_run, gw_io_live, io);
	}
	return gw_fuse_loop(m->se, (unsigned)gw_settings_num(&m->o, GW_OPT_MAX_THREADS), io, loop_ended, m);
}

/* What the steps before the session left: the FUSE session, the URL, the credentials, the settings. */
static void mount_free(struct mount *m)
{
	if (m->se)
		fuse_session_destroy(m->se);
	iscsi_url_wipe(&m->url);
	iscsi_chap_creds_wipe(&m->creds);
	free(m->cmd.mountpoint);
	gw_settings_free(&m->o);
	gw_config_free(&m->conf);
	fuse_opt_free_args(&m->args);
}

/*
 * The supervisor (life/supervisor.c) in place of the steps after the
 * fork: the workers get argv as it was before the credentials were
 * scrubbed (orig) and the credentials of the environment (env).  Returns
 * the exit status.
 */
static int mount_supervise(struct mount *m, int argc, char **orig, char **env)
{
	if (!m->cmd.foreground && gw_daemon_fork(&m->ready_fd))
		return 1;
	struct gw_sup_config c = {
		.argc = argc, .argv = orig, .mnt = m->cmd.mountpoint, .foreground = m->cmd.foreground,
		.ready_fd = m->ready_fd, .env = env,
		.replacement_timeout_ms = (int)gw_settings_num(&m->o, GW_OPT_REPLACEMENT_TIMEOUT) * 1000,
	};
	m->ready_fd = -1;
	return gw_supervise(&c);
}

/* stderr to /dev/null; returns the descriptor for stderr_restore (-1 if none). */
static int stderr_quiet(void)
{
	int saved = dup(2), nul = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (saved >= 0 && nul >= 0)
		dup2(nul, 2);
	if (nul >= 0)
		close(nul);
	return saved;
}

static void stderr_restore(int saved)
{
	if (saved < 0)
		return;
	dup2(saved, 2);
	close(saved);
}

/* A copy of argv (NULL-terminated; the caller frees it with gw_sup_strv_free), or NULL. */
static char **argv_copy(int argc, char **argv)
{
	char **c = calloc((size_t)argc + 1, sizeof(*c));
	for (int i = 0; c && i < argc; i++)
		if (!(c[i] = strdup(argv[i]))) {
			gw_sup_strv_free(c);
			return NULL;
		}
	return c;
}

int main(int argc, char **argv)
{
	/* static: the detached watcher may still look at m.watch while the process exits */
	static struct mount m = {.g = {.files_lock = PTHREAD_MUTEX_INITIALIZER}, .ready_fd = -1};
	int rc = 1;

	if (argc == 3 && !strcmp(argv[1], "--restart"))
		return gw_restart_request(argv[2]);
	if (gw_life_from_argv(&argc, argv))
		return 1;
	char **orig = gw_life.worker ? NULL : argv_copy(argc, argv); /* before the scrub: the workers' */
	char **env = gw_life.worker ? NULL : gw_sup_env_save();     /* before the credentials leave it */
	m.args = (struct fuse_args)FUSE_ARGS_INIT(argc, argv);
	gw_live_watch_init(&m.watch);
	signal(SIGPIPE, SIG_IGN); /* a closed connection is an error return, not a signal */
	gw_fuselog_route();       /* libfuse's messages prefixed, to the log's destination */
	/* a worker repeats the supervisor's checks, which printed their warnings already */
	int loud = gw_life.worker ? stderr_quiet() : -1;
	int done = mount_settings(&m, argc, argv);
	if (done < 0 && (mount_check(&m) || mount_fuse_session(&m)))
		done = 1;
	stderr_restore(loud);
	if (done >= 0) {
		if (done && gw_life.worker)
			fprintf(stderr, "iserfuse: worker: the options no longer load (the configuration file changed?)\n");
		rc = done;
		goto out;
	}
	if (!gw_life.worker) {
		rc = orig ? mount_supervise(&m, argc, orig, env) : 1;
		goto out;
	}
	m.ready_fd = gw_life.ready_fd;
	gw_startup_watchdog_arm((unsigned)gw_settings_num(&m.o, GW_OPT_LOGIN_TIMEOUT));
	int crc = mount_connect(&m);
	if (crc == -1) {
		if (m.no_target && gw_life.n > 0)
			rc = GW_WORKER_EXIT_NO_TARGET; /* the supervisor starts another within replacement_timeout */
		goto out;
	}
	if (crc || mount_files(&m) || mount_kernel(&m))
		goto out_session;

	int lrc;
	while ((lrc = mount_serve(&m)) >= 0 && gw_stop_handover() && !gw_sess_up(&m.g)) {
		/* a new worker could not log in, and the old one's stop would fail what waits for the target */
		gw_stop_handover_refused();
		gw_life_tell('R', -1);
		fuse_session_reset(m.se);
	}
	bool handover = gw_stop_handover();
	if (!handover)
		gw_life_tell('Q', -1); /* stopping for good: the supervisor starts no other worker */
	gw_fuse_uring_quiesce(m.g.uring);
	bool never_live = gw_live_watch_end(&m.watch);
	int unsynced = gw_stop(&m.g, m.se, handover ? NULL : m.cmd.mountpoint, gw_life.n > 0, &m.sync);
	rc = lrc < 0 || unsynced || never_live || gw_fuse_uring_failed(m.g.uring) ? 1 : 0;
out_session:
	gw_stop_close(&m.g, m.iser, m.sync);
	/* after the sessions: a command the drain gave up on replies as late as their close */
	gw_fuse_uring_end(m.g.uring);
	m.g.uring = NULL;
out:
	gw_sup_strv_free(orig);
	gw_sup_strv_free(env);
	mount_free(&m);
	return m.give_up ? GW_WORKER_EXIT_GIVE_UP : rc;
}
