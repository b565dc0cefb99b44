/* SPDX-License-Identifier: MIT */
/*
 * iserfuse [options] URL MOUNTPOINT
 *
 * Order of work, so that every failure comes before anything is mounted:
 * parse options and URL (fuse_opt, fuse_session_new validates the FUSE
 * options), fork unless -f (the parent waits for the child's "mounted"),
 * connect and log in, probe the LUNs, create the pool, mount, wait until
 * the kernel completed FUSE INIT (live_watch), report success, detach,
 * serve.  On unmount or SIGTERM/SIGINT/SIGHUP: leave the
 * loop, stop the rescans, unmount, drain, SYNCHRONIZE CACHE every LUN
 * written, Logout, exit 0 (1 if a SYNCHRONIZE CACHE failed; a second stop
 * signal exits 2 at once).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "../cache/bcache_blk.h"
#include "../initiator/log.h"
#include "../initiator/thread.h"
#include "../initiator/url.h"
#include "config.h"
#include "options.h"
#include "startup.h"
#include "credentials.h"
#include "gateway.h"
#include "lun_select.h"
#include "transport_pick.h"
#include "../initiator/iser.h"

#define CACHE_BLOCK_MAX (64u * 1024u)

struct options {
	char *url;
	char *str[GW_OPT_COUNT];            /* the string options' values, NULL if not given */
	long long num[GW_OPT_NUMERIC_COUNT]; /* the numeric options' values, checked against the table */
	bool given[GW_OPT_COUNT];           /* set by the command line or the configuration file */
	int nonopts;
	int show_help, show_version;
	int list; /* --list: discovery, no mount */
	bool ro_off; /* the last of ro and rw was rw (given[GW_OPT_RO] is set by either) */
};

/* An option's value: what was given, else the table's default. */
static long long optv(const struct options *o, enum gw_opt_id id)
{
	return o->given[id] ? o->num[id] : gw_opts[id].def;
}

enum { KEY_HELP, KEY_VERSION, KEY_LIST, KEY_IGNORE, KEY_RW, KEY_TAB /* + gw_opt_id */ };

/* Where the options being parsed come from: NULL for the command line, else the configuration file. */
static const char *opt_origin;

/* The fuse_opt templates: one per table row ("key=" or "key" for a flag), then the fixed words. */
static char opt_templ[GW_OPT_COUNT][48];
static struct fuse_opt option_spec[GW_OPT_COUNT + 16];

static void build_option_spec(void)
{
	static const struct fuse_opt fixed[] = {
		/* mount(8) and fstab words that mean nothing to a FUSE daemon (mount.fuse3 drops most of them too) */
		FUSE_OPT_KEY("_netdev", KEY_IGNORE),
		FUSE_OPT_KEY("nofail", KEY_IGNORE),
		FUSE_OPT_KEY("auto", KEY_IGNORE),
		FUSE_OPT_KEY("noauto", KEY_IGNORE),
		FUSE_OPT_KEY("user", KEY_IGNORE),
		FUSE_OPT_KEY("nouser", KEY_IGNORE),
		FUSE_OPT_KEY("users", KEY_IGNORE),
		FUSE_OPT_KEY("defaults", KEY_IGNORE),
		FUSE_OPT_KEY("rw", KEY_RW), /* undoes an earlier ro (the configuration file's, say) */
		FUSE_OPT_KEY("-h", KEY_HELP),
		FUSE_OPT_KEY("--help", KEY_HELP),
		FUSE_OPT_KEY("-V", KEY_VERSION),
		FUSE_OPT_KEY("--version", KEY_VERSION),
		FUSE_OPT_KEY("--list", KEY_LIST),
		FUSE_OPT_END,
	};
	_Static_assert(sizeof(fixed) / sizeof(fixed[0]) <= 16, "option_spec has room");
	for (int i = 0; i < GW_OPT_COUNT; i++) {
		snprintf(opt_templ[i], sizeof(opt_templ[i]), "%s%s", gw_opts[i].key,
			 gw_opts[i].kind == GW_OPT_FLAG ? "" : "=");
		option_spec[i] = (struct fuse_opt)FUSE_OPT_KEY(opt_templ[i], KEY_TAB + i);
	}
	memcpy(&option_spec[GW_OPT_COUNT], fixed, sizeof(fixed));
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: iserfuse [options] iscsi://[user[%%password]@]host[:port]/target-iqn[/lun] MOUNTPOINT\n"
		"       iserfuse [options] NAME [MOUNTPOINT]     (section [NAME] of the configuration file)\n"
		"       iserfuse --list [options] iscsi://host[:port][/target-iqn[/lun]] | NAME\n"
		"\n"
		"Exposes the disk LUNs of an iSCSI target as files MOUNTPOINT/lun<N>.\n"
		"Every option can also be given as -o key=value (for /etc/fstab: fuse.iserfuse).\n"
		"\n"
		"iserfuse options:\n");
	gw_opts_help(f);
	fprintf(f,
		"    -o _netdev, nofail, auto, noauto, user, users, nouser, defaults, x-*, comment=*\n"
		"                             fstab words, accepted and ignored\n"
		"    -f                       stay in the foreground, log to stderr (default: background, messages\n"
		"                             to log_file, else the systemd journal, else syslog)\n"
		"    -d                       debug output, FUSE requests too (implies -f)\n"
		"    -s                       single-threaded FUSE loop (default: up to 16 threads)\n"
		"    --list                   list the targets and LUNs behind a portal (SendTargets), mount nothing\n"
		"    -h, --help               this text and the FUSE options\n"
		"    -V, --version            versions of iserfuse, libfuse and libibverbs (rdma-core)\n"
		"\n"
		"CHAP credentials come from the URL (user%%password@, ?target_user=, ?target_password= for\n"
		"mutual CHAP), then secret_file, then the environment: ISERFUSE_CHAP_USERNAME,\n"
		"ISERFUSE_CHAP_PASSWORD, ISERFUSE_CHAP_MUTUAL_USERNAME, ISERFUSE_CHAP_MUTUAL_PASSWORD.\n"
		"\n");
}

/*
 * libfuse's part of --help, less the lines of options the table already
 * shows (allow_other): its text goes to stdout, so it is caught in a file.
 */
static void fuse_help_but_ours(void)
{
	FILE *tmp = tmpfile();
	int saved = dup(1);
	fflush(stdout);
	if (!tmp || saved < 0 || dup2(fileno(tmp), 1) < 0) {
		fuse_lowlevel_help();
		goto out;
	}
	fuse_lowlevel_help();
	fflush(stdout);
	dup2(saved, 1);
	rewind(tmp);
	char line[512];
	while (fgets(line, sizeof(line), tmp)) {
		const char *p = line + strspn(line, " ");
		if (!strncmp(p, "-o ", 3) && gw_opt_find(p + 3 + strspn(p + 3, " ")) >= 0)
			continue;
		fputs(line, stdout);
	}
out:
	if (tmp)
		fclose(tmp);
	if (saved >= 0)
		close(saved);
}

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct options *o = data;
	(void)outargs;
	switch (key) {
	case FUSE_OPT_KEY_OPT:
		if (!strncmp(arg, "x-", 2) || !strncmp(arg, "comment=", 8))
			return 0; /* fstab annotations (x-systemd.*, ...) */
		return 1;
	case KEY_IGNORE:
		return 0;
	case FUSE_OPT_KEY_NONOPT:
		if (!o->url) {
			o->url = strdup(arg);
			return 0;
		}
		if (++o->nonopts > 1) {
			fprintf(stderr, "iserfuse: unexpected argument '%s'\n", arg);
			return -1;
		}
		return 1; /* the mount point, for fuse_parse_cmdline */
	case KEY_HELP:
		o->show_help = 1;
		return 0;
	case KEY_VERSION:
		o->show_version = 1;
		return 0;
	case KEY_LIST:
		o->list = 1;
		return 0;
	case KEY_RW:
		o->given[GW_OPT_RO] = true;
		o->ro_off = true;
		return 1; /* the kernel mount follows the last of ro and rw */
	default:
		break;
	}
	if (key < KEY_TAB || key >= KEY_TAB + GW_OPT_COUNT)
		return 1;
	enum gw_opt_id id = (enum gw_opt_id)(key - KEY_TAB);
	const struct gw_opt *t = &gw_opts[id];
	const char *val = arg + strlen(t->key) + 1;
	o->given[id] = true;
	if (id == GW_OPT_RO)
		o->ro_off = false;
	if (t->kind == GW_OPT_FLAG)
		return t->to_fuse; /* ro: the kernel mount is read-only too; allow_other is libfuse's */
	if (t->kind == GW_OPT_STR) {
		/* a later one replaces an earlier one (the configuration file's come first) */
		free(o->str[id]);
		o->str[id] = strdup(val);
		return o->str[id] ? 0 : -1;
	}
	char err[256];
	if (gw_opt_parse_num(id, val, &o->num[id], err, sizeof(err))) {
		fprintf(stderr, "iserfuse: %s%s%s\n", opt_origin ? opt_origin : "", opt_origin ? ": " : "", err);
		return -1;
	}
	return 0;
}

/* ---- the configuration file ---- */

/*
 * Read the configuration file (-o config=PATH, else GW_CONFIG_DEFAULT if it
 * exists) into conf.  A first argument that is not a URL names a section:
 * its url replaces it, its mountpoint is used when none is given.  The
 * file's options (global, then the section's) apply where the command
 * line gave none; FUSE options from it go before the command line's.
 * Returns 0, or -1 after printing one line.
 */
static void free_options(struct options *o)
{
	if (o->url)
		explicit_bzero(o->url, strlen(o->url));
	free(o->url);
	o->url = NULL;
	for (int i = 0; i < GW_OPT_COUNT; i++) {
		free(o->str[i]);
		o->str[i] = NULL;
	}
}

static int apply_config(struct options *o, struct fuse_args *args, struct gw_config *conf)
{
	const char *path = o->str[GW_OPT_CONFIG] ? o->str[GW_OPT_CONFIG] : GW_CONFIG_DEFAULT;
	const struct gw_config_target *t = NULL;
	struct options c = {0};
	struct fuse_args ca = FUSE_ARGS_INIT(0, NULL);
	int rc = -1;

	if (gw_config_load(path, o->str[GW_OPT_CONFIG] != NULL, conf))
		return -1;
	if (o->url && !strstr(o->url, "://")) {
		t = gw_config_find(conf, o->url);
		if (!t) {
			fprintf(stderr, "iserfuse: '%s' is neither an iscsi:// URL nor a section of %s\n", o->url,
				conf->path ? conf->path : path);
			return -1;
		}
		free(o->url);
		o->url = strdup(t->url);
		if (!o->url)
			return -1;
		if (t->mountpoint && o->nonopts == 0 && !o->list) {
			fuse_opt_add_arg(args, t->mountpoint);
			o->nonopts++;
		}
	}
	if (fuse_opt_add_arg(&ca, "iserfuse") ||
	    (conf->options && (fuse_opt_add_arg(&ca, "-o") || fuse_opt_add_arg(&ca, conf->options))) ||
	    (t && t->options && (fuse_opt_add_arg(&ca, "-o") || fuse_opt_add_arg(&ca, t->options))))
		goto out;
	opt_origin = conf->path; /* a bad value names the file */
	int prc = fuse_opt_parse(&ca, &c, option_spec, opt_proc);
	opt_origin = NULL;
	if (prc == -1)
		goto out; /* opt_proc said why */
	if (c.given[GW_OPT_CONFIG] || c.list || c.show_help || c.show_version) {
		fprintf(stderr, "iserfuse: %s: config=, --list, --help and --version belong on the command line\n",
			conf->path);
		goto out;
	}
	for (int i = ca.argc - 1; i >= 1; i--) /* allow_other, ro, ...: the command line's come later and win */
		if (fuse_opt_insert_arg(args, 1, ca.argv[i]))
			goto out;
	for (int i = 0; i < GW_OPT_COUNT; i++) { /* the command line's values win */
		if (o->given[i] || !c.given[i])
			continue;
		o->given[i] = true;
		if (i == GW_OPT_RO)
			o->ro_off = c.ro_off;
		if (i < GW_OPT_NUMERIC_COUNT)
			o->num[i] = c.num[i];
		o->str[i] = c.str[i];
		c.str[i] = NULL;
	}
	if (!o->str[GW_OPT_INITIATOR_NAME] && conf->initiator_name &&
	    !(o->str[GW_OPT_INITIATOR_NAME] = strdup(conf->initiator_name)))
		goto out;
	if (!o->str[GW_OPT_SECRET_FILE] && t && t->secret_file && !(o->str[GW_OPT_SECRET_FILE] = strdup(t->secret_file)))
		goto out;
	rc = 0;
out:
	free_options(&c);
	fuse_opt_free_args(&ca);
	return rc;
}

/* -o log_level=: 0, or -1 after printing why. */
static int set_log_level(const char *name)
{
	static const char *const names[] = {"error", "warn", "info", "debug"};
	for (int i = 0; i < 4; i++) {
		if (!strcmp(name, names[i])) {
			log_set_level((enum log_level)i);
			return 0;
		}
	}
	fprintf(stderr, "iserfuse: bad option 'log_level=%s': error, warn, info or debug expected\n", name);
	return -1;
}

/* ---- setting up the session and the LUN files ---- */

/*
 * HeaderDigest/DataDigest offers (RFC 7143 §13.1) from the URL's
 * header_digest/data_digest, then from -o header_digest=/data_digest=,
 * which win.  Returns 0, or -1 after printing why.
 */
static int set_digests(struct iscsi_neg_config *neg, const struct iscsi_url *url, const struct options *o)
{
	const char *const names[2] = {"header_digest", "data_digest"};
	const char *const from_url[2] = {url->header_digest, url->data_digest};
	const char *const from_opt[2] = {o->str[GW_OPT_HEADER_DIGEST], o->str[GW_OPT_DATA_DIGEST]};
	for (int i = 0; i < 2; i++) {
		if (from_url[i][0] && iscsi_neg_set_digest(neg, i == 1, from_url[i])) {
			fprintf(stderr, "iserfuse: bad URL: %s=%s\n", names[i], from_url[i]);
			return -1;
		}
		if (from_opt[i] && iscsi_neg_set_digest(neg, i == 1, from_opt[i])) {
			fprintf(stderr, "iserfuse: bad option '%s=%s': none, crc32c or auto expected\n", names[i],
				from_opt[i]);
			return -1;
		}
	}
	return 0;
}

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
	return iscsi_lun_probe(c->g->s, lun, c->scratch, buf_pool_slice_size(c->g->pool), out);
}

static int open_luns_skipped(void *arg, uint16_t lun, const struct iscsi_lun_info *info, enum gw_lun_verdict v,
			     int probe_err)
{
	struct open_luns_ctx *c = arg;
	bool fatal = c->url->lun >= 0;
	switch (v) {
	case GW_LUN_PROBE_FAILED:
		if (fatal) {
			snprintf(c->err, c->err_cap, "LUN %u: %s", lun, strerror(-probe_err));
			return probe_err;
		}
		log_warn("LUN %u: probe failed (%s), skipped", lun, strerror(-probe_err));
		return 0;
	case GW_LUN_NO_SUCH_LUN:
	case GW_LUN_NOT_DISK:
		if (fatal && v == GW_LUN_NO_SUCH_LUN)
			snprintf(c->err, c->err_cap, "LUN %u does not exist on %s", lun, c->url->target);
		else if (fatal)
			snprintf(c->err, c->err_cap, "LUN %u is not a disk (peripheral device type 0x%02x)", lun,
				 info->inq.device_type);
		else
			log_info("LUN %u: peripheral device type 0x%02x, not a disk: skipped", lun, info->inq.device_type);
		break;
	case GW_LUN_BLOCK_SIZE:
		log_warn("LUN %u: %u-byte blocks are not supported, skipped", lun, info->cap.block_size);
		if (fatal)
			snprintf(c->err, c->err_cap, "LUN %u: %u-byte blocks are not supported", lun, info->cap.block_size);
		break;
	case GW_LUN_ZERO_SIZE:
	case GW_LUN_TOO_LARGE:
		/* The size in bytes would not fit off_t (or would wrap). */
		snprintf(c->err, c->err_cap, "LUN %u: capacity of %llu blocks of %u bytes is too large", lun,
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
	} else if ((rc = iscsi_report_luns(g->s, scratch, buf_pool_slice_size(g->pool), luns, GW_MAX_LUNS, &nluns))) {
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
	/* Every slot up front: the rescan thread adds LUNs while workers read the table. */
	g->luns = calloc(GW_MAX_LUNS, sizeof(*g->luns));
	if (!g->luns) {
		rc = -ENOMEM;
		goto out;
	}
	for (ssize_t i = 0; i < ndisk; i++) {
		struct gw_lun *l = gw_lun_add(g, &infos[i]);
		if (!l) {
			rc = -ENOMEM;
			snprintf(err, err_cap, "LUN %u: %s", infos[i].lun, strerror(-rc));
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

static void sync_all_done(void *arg, int err, const void *data, size_t len)
{
	int *res = arg;
	(void)data;
	(void)len;
	__atomic_store_n(res, err ? err : 1, __ATOMIC_SEQ_CST);
}

/*
 * SYNCHRONIZE CACHE on every LUN written.  res[] (one int per LUN) must
 * outlive the session: a command that times out here still completes
 * later, when the session closes.  Returns the number of LUNs whose
 * SYNCHRONIZE CACHE failed or went unanswered.
 */
static int sync_all(struct gw *g, int *res)
{
	int failed = 0;
	for (size_t i = 0; i < g->nluns; i++) {
		/* a LUN write-protected since it was written is synced too (blk_sync sends nothing for one never written) */
		if (g->ro || g->luns[i].gone || gw_lun_sync(&g->luns[i], sync_all_done, &res[i]))
			continue;
		for (int waited = 0; !__atomic_load_n(&res[i], __ATOMIC_SEQ_CST) && waited < 30000; waited += 10)
			usleep(10000);
		int r = __atomic_load_n(&res[i], __ATOMIC_SEQ_CST);
		if (r < 0)
			log_err("%s: SYNCHRONIZE CACHE failed: %s", g->luns[i].name, strerror(-r));
		else if (r == 0)
			log_err("%s: no answer to SYNCHRONIZE CACHE within 30 s", g->luns[i].name);
		failed += r <= 0;
	}
	return failed;
}

/* ---- stopping ---- */

/*
 * SIGTERM, SIGINT and SIGHUP stop the daemon.  The first ends the FUSE
 * loop (as libfuse's own handler would); the daemon then waits for the
 * requests being served, drains and flushes, which a stuck target can make
 * long: a second signal, at any point after the first, ends it at once
 * with exit status 2 (writes the target acknowledged may still be only in
 * its cache).  Only the main thread takes these signals: the threads we
 * start block them (initiator/thread.h around their creation).
 */
static struct fuse_session *stop_session;
/* Stopping: how long a lost connection may still be recovered before I/O fails (iscsi_session_stopping). */
#define STOP_GRACE_MS 5000
static volatile sig_atomic_t stop_signals;

static void stop_signal(int sig)
{
	static const char msg[] = "iserfuse: stopped by a second signal before the I/O was drained\n";
	(void)sig;
	if (stop_signals++ == 0) {
		if (stop_session)
			fuse_session_exit(stop_session);
		return;
	}
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(2);
	_exit(2);
}

static void install_stop_signals(struct fuse_session *se)
{
	struct sigaction sa = {.sa_handler = stop_signal};
	sigemptyset(&sa.sa_mask);
	stop_session = se;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

/* ---- the block cache ---- */

/*
 * Cache blocks live in pool slices taken out of circulation here (the
 * pool was created with that many extra slices), so that one RDMA
 * registration covers them and fills land in registered memory.
 */
static int setup_cache(struct gw *g, unsigned long long bytes, unsigned nslices, size_t cblock)
{
	size_t per_slice = buf_pool_slice_size(g->pool) / cblock;
	unsigned nblocks = (unsigned)((bytes + cblock - 1) / cblock);
	void **bufs = calloc(nblocks, sizeof(*bufs));
	g->cache_slices = calloc(nslices, sizeof(*g->cache_slices));
	if (!bufs || !g->cache_slices) {
		free(bufs);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < nblocks; i++) {
		if (i % per_slice == 0)
			g->cache_slices[g->ncache_slices++] = buf_pool_get(g->pool, NULL);
		bufs[i] = (uint8_t *)g->cache_slices[g->ncache_slices - 1] + (i % per_slice) * cblock;
	}
	int rc = bcache_create(&g->cache, cblock, nblocks, bufs, g->writeback);
	free(bufs);
	for (size_t i = 0; !rc && i < g->nluns; i++) {
		struct bcache_backend be;
		bcache_blk_backend(&be, &g->luns[i].dev);
		rc = bcache_dev_add(g->cache, &be, &g->luns[i].cdev);
	}
	if (!rc)
		log_info("block cache: %u blocks of %zu KiB, %s", nblocks, cblock / 1024,
			 g->writeback ? "write-back" : "write-through");
	return rc;
}

static void teardown_cache(struct gw *g)
{
	gw_files_free_all(g); /* files a stop left open: no RELEASE comes after the unmount */
	if (g->cache) {
		struct bcache_stats st;
		bcache_get_stats(g->cache, &st);
		log_info("block cache: %llu hits, %llu misses, %llu bypassed reads, read-ahead %llu bytes "
			 "(%llu used, %llu wasted), %llu blocks written back, %llu dirty left",
			 (unsigned long long)st.hits, (unsigned long long)st.misses,
			 (unsigned long long)st.bypass_reads, (unsigned long long)st.ra_bytes,
			 (unsigned long long)st.ra_used_bytes, (unsigned long long)st.ra_wasted_bytes,
			 (unsigned long long)st.writeback_blocks, (unsigned long long)st.dirty_blocks);
	}
	for (size_t i = 0; i < g->nluns; i++) {
		bcache_dev_remove(g->luns[i].cdev);
		g->luns[i].cdev = NULL;
	}
	bcache_destroy(g->cache);
	g->cache = NULL;
	for (unsigned i = 0; i < g->ncache_slices; i++)
		buf_pool_put(g->pool, g->cache_slices[i]);
	free(g->cache_slices);
	g->cache_slices = NULL;
	g->ncache_slices = 0;
}

/*
 * SCSI Async Event (RFC 7143 §11.9.1, AsyncEvent 0), on the event thread:
 * a UNIT ATTENTION carried this way prompts the same rescan as one on a
 * command's status.  The retry queue (and its hook) may not exist yet.
 */
static void async_sense(void *arg, uint64_t lun, const struct scsi_sense *sense)
{
	struct gw *g = arg;
	struct blk_retry *q = __atomic_load_n(&g->retry, __ATOMIC_ACQUIRE);
	if (sense && sense->key == SCSI_SK_UNIT_ATTENTION)
		blk_retry_note_ua(q, lun, sense);
}

/* ---- daemon start-up ---- */

/*
 * Until the mount is live nothing can wait for a slow target but the user:
 * a target that stops answering during login or the LUN probe ends the
 * start-up with exit 1 (commands have no timeout of their own yet).
 */
static void startup_watchdog(int sig)
{
	static const char msg[] = "iserfuse: the target did not answer in time; nothing mounted\n";
	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

static void report_ready(int fd)
{
	if (fd < 0)
		return;
	if (write(fd, "K", 1) != 1)
		log_warn("cannot tell the parent process that the mount is ready");
	close(fd);
}

static void detach_stdio(void)
{
	int fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	gw_logdest_activate();
}

/*
 * The mount is live only once the kernel has completed the FUSE INIT
 * exchange (the request size, max_pages, is settled there): a stat of the
 * mount point waits for it and then sees our root (inode 1 on a new
 * device), or fails when the kernel dropped the connection.  Until then
 * the parent process waits and nothing says "mounted".
 */
struct live_watch {
	pthread_mutex_t lock;
	bool live, given_up;
	int ready_fd;       /* the parent's pipe, -1 in the foreground */
	bool foreground;
	const char *mnt;
	dev_t under;        /* st_dev of the mount point before the mount */
	char started[512];  /* the start-up line */
	struct fuse_session *se;
};

static void *live_watch_run(void *arg)
{
	struct live_watch *w = arg;
	struct stat st;
	int err = 0;
	for (int i = 0; i < 6000; i++) { /* the INIT reply normally comes at once; 60 s at most */
		if (stat(w->mnt, &st)) {
			err = errno;
			break;
		}
		if (st.st_dev != w->under && st.st_ino == 1)
			break;
		usleep(10000);
	}
	pthread_mutex_lock(&w->lock);
	if (w->given_up) {
		pthread_mutex_unlock(&w->lock);
		return NULL;
	}
	if (err || st.st_dev == w->under) {
		w->given_up = true;
		pthread_mutex_unlock(&w->lock);
		fprintf(stderr, "iserfuse: the mount on %s did not come up (%s); nothing mounted\n", w->mnt,
			err ? strerror(err) : "the kernel did not complete the FUSE INIT exchange");
		fuse_session_exit(w->se);
		return NULL;
	}
	w->live = true;
	alarm(0);
	signal(SIGALRM, SIG_DFL);
	if (!w->foreground)
		fprintf(stderr, "iserfuse: %s\n", w->started);
	report_ready(w->ready_fd);
	w->ready_fd = -1;
	/* Type=notify units: the mount is live (a no-op without $NOTIFY_SOCKET). */
	sd_notifyf(0, "READY=1\nSTATUS=%s", w->started);
	if (!w->foreground) {
		if (chdir("/"))
			log_warn("chdir /: %s", strerror(errno));
		detach_stdio();
		gw_logdest_notice(w->started);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* After the FUSE loop: true if the mount never went live (the watcher will say nothing more). */
static bool live_watch_end(struct live_watch *w)
{
	pthread_mutex_lock(&w->lock);
	bool was_live = w->live, told = w->given_up;
	w->given_up = true;
	pthread_mutex_unlock(&w->lock);
	if (!was_live && !told)
		fprintf(stderr, "iserfuse: the kernel ended the FUSE session on %s before it was live; nothing mounted\n",
			w->mnt);
	return !was_live;
}

/* Fork: the parent exits 0 once the child reports the mount ready, else with the child's status. */
static int daemon_fork(int *ready_fd)
{
	int p[2];
	if (pipe(p)) {
		perror("iserfuse: pipe");
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("iserfuse: fork");
		return -1;
	}
	if (pid > 0) {
		char c;
		close(p[1]);
		if (read(p[0], &c, 1) == 1 && c == 'K')
			_exit(0);
		int st = 0;
		if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) == 0)
			_exit(1);
		_exit(WEXITSTATUS(st));
	}
	close(p[0]);
	setsid();
	*ready_fd = p[1];
	return 0;
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct options o = {0};
	struct fuse_cmdline_opts cmd = {0};
	struct iscsi_url url = {0};
	struct gw_creds creds = {0};
	struct gw g = {.files_lock = PTHREAD_MUTEX_INITIALIZER};
	struct gw_config conf = {0};
	struct iser_ctx *iser = NULL;
	struct fuse_session *se = NULL;
	struct live_watch watch = {.lock = PTHREAD_MUTEX_INITIALIZER, .ready_fd = -1};
	char err[512] = "";
	int ready_fd = -1, rc = 1, *sync_res = NULL;

	signal(SIGPIPE, SIG_IGN); /* a closed connection is an error return, not a signal */
	build_option_spec();
	if (argc < 2) {
		fprintf(stderr, "usage: iserfuse [options] URL MOUNTPOINT (iserfuse --help lists the options)\n");
		goto out;
	}
	if (fuse_opt_parse(&args, &o, option_spec, opt_proc) == -1)
		goto out;
	gw_creds_scrub_argv(argc, argv); /* o.url keeps the only copy of any password */
	if (o.show_version) {
		gw_print_version(stdout);
		rc = 0;
		goto out;
	}
	if (o.show_help) {
		usage(stdout);
		fuse_help_but_ours();
		rc = 0;
		goto out;
	}
	if (apply_config(&o, &args, &conf))
		goto out; /* nothing started yet */
	if (o.str[GW_OPT_LOG_LEVEL] && set_log_level(o.str[GW_OPT_LOG_LEVEL]))
		goto out;
	char nerr[160];
	if (o.str[GW_OPT_INITIATOR_NAME] && iscsi_name_check(o.str[GW_OPT_INITIATOR_NAME], nerr, sizeof(nerr))) {
		fprintf(stderr, "iserfuse: bad option 'initiator_name=%s': %s (RFC 7143 §4.2.7)\n",
			o.str[GW_OPT_INITIATOR_NAME], nerr);
		goto out;
	}
	if (o.list) {
		/* Discovery only: no mount point, no FUSE session. */
		if (o.nonopts || !o.url) {
			fprintf(stderr, "iserfuse: --list takes one URL, iscsi://host[:port], and no mount point\n");
			goto out;
		}
		rc = gw_list(o.url, o.str[GW_OPT_INITIATOR_NAME], (unsigned)optv(&o, GW_OPT_LOGIN_TIMEOUT),
			     o.str[GW_OPT_SECRET_FILE]);
		goto out;
	}
	if (fuse_parse_cmdline(&args, &cmd) != 0)
		goto out;
	if (!o.url || !cmd.mountpoint) {
		fprintf(stderr, "iserfuse: %s; usage: iserfuse [options] URL MOUNTPOINT (iserfuse --help lists the options)\n",
			!o.url ? "missing URL and mount point" : "missing mount point");
		goto out;
	}
	if (iscsi_url_parse(o.url, true, &url, err, sizeof(err))) {
		fprintf(stderr, "iserfuse: bad URL: %s\n", err);
		goto out;
	}
	enum gw_transport tmode;
	if (gw_transport_parse(o.str[GW_OPT_TRANSPORT], url.iser, &tmode)) {
		fprintf(stderr, "iserfuse: bad option 'transport=%s': auto, iser or tcp expected (not tcp with ?iser)\n",
			o.str[GW_OPT_TRANSPORT]);
		goto out;
	}
	explicit_bzero(o.url, strlen(o.url));
	log_set_context(url.target); /* every line names the target (and the LUN where it is about one) */
	if (gw_creds_load(&creds, &url, o.str[GW_OPT_SECRET_FILE]))
		goto out;
	iscsi_url_wipe(&url);
	struct iscsi_neg_config digest_check;
	iscsi_neg_config_default(&digest_check);
	if (set_digests(&digest_check, &url, &o))
		goto out; /* a bad digest option fails before anything starts */
	if (gw_mountpoint_check(cmd.mountpoint))
		goto out;
	struct stat st;
	if (stat(cmd.mountpoint, &st))
		goto out;
	watch.under = st.st_dev;
	if (cmd.debug)
		log_set_level(LOG_LVL_DEBUG);
	if (!cmd.foreground && gw_logdest_prepare(o.str[GW_OPT_LOG_FILE]))
		goto out;

	/* Every numeric option was checked against its range by opt_proc. */
	unsigned qd = (unsigned)optv(&o, GW_OPT_QUEUE_DEPTH);
	size_t max_io = (size_t)optv(&o, GW_OPT_MAX_IO_KIB) * 1024;
	size_t kernel_max_io = gw_fuse_max_io();
	if (max_io > kernel_max_io) {
		log_warn("max_io_kib=%zu is more than this kernel's FUSE allows (/proc/sys/fs/fuse/max_pages_limit): "
			 "using %zu", max_io / 1024, kernel_max_io / 1024);
		max_io = kernel_max_io;
	}
	unsigned long long cache_bytes = (unsigned long long)optv(&o, GW_OPT_CACHE_SIZE);
	g.max_io = max_io;
	g.writeback = o.given[GW_OPT_WRITEBACK] && cache_bytes;
	g.ro = o.given[GW_OPT_RO] && !o.ro_off;
	g.uid = getuid();
	g.gid = getgid();
	g.umask = (mode_t)optv(&o, GW_OPT_UMASK);
	clock_gettime(CLOCK_REALTIME, &g.mtime);

	char maxread[64], fsname[3 * (ISCSI_URL_HOST_MAX + ISCSI_NAME_MAX) + 64];
	snprintf(maxread, sizeof(maxread), "-omax_read=%zu", max_io);
	fuse_opt_add_arg(&args, maxread);
	fuse_opt_add_arg(&args, "-osubtype=iserfuse");
	/* the kernel checks every file's mode, the directory's and .stats's too (with allow_other) */
	fuse_opt_add_arg(&args, "-odefault_permissions");
	gw_fsname_opt(&url, fsname, sizeof(fsname)); /* findmnt and df show the URL, without credentials */
	fuse_opt_add_arg(&args, "-o");
	fuse_opt_add_arg(&args, fsname);
	/* Validates the FUSE options (unknown ones fail here, before anything else). */
	se = fuse_session_new(&args, &gw_ops, sizeof(gw_ops), &g);
	if (!se)
		goto out;
	g.se = se;
	g.url_lun = url.lun;

	if (!cmd.foreground && daemon_fork(&ready_fd))
		goto out;

	unsigned login_timeout = (unsigned)optv(&o, GW_OPT_LOGIN_TIMEOUT);
	signal(SIGALRM, startup_watchdog);
	alarm(2 * login_timeout + 5);

	struct iscsi_session_config sc = {
		.transport = &iscsi_tcp_transport,
		.port = url.port,
		.queue_depth = qd,
		.timeout_ms = (int)login_timeout * 1000,
		.cmd_timeout_ms = (int)optv(&o, GW_OPT_CMD_TIMEOUT) * 1000,
		.noop_interval_ms = (int)optv(&o, GW_OPT_NOOP_INTERVAL) * 1000,
		.noop_timeout_ms = (int)optv(&o, GW_OPT_NOOP_TIMEOUT) * 1000,
		.replacement_timeout_ms = (int)optv(&o, GW_OPT_REPLACEMENT_TIMEOUT) * 1000,
	};
	snprintf(sc.host, sizeof(sc.host), "%s", url.host);
	snprintf(sc.target_name, sizeof(sc.target_name), "%s", url.target);
	if (o.str[GW_OPT_INITIATOR_NAME])
		snprintf(sc.initiator_name, sizeof(sc.initiator_name), "%s", o.str[GW_OPT_INITIATOR_NAME]);
	else
		gw_initiator_name_or_warn(sc.initiator_name, sizeof(sc.initiator_name));
	iscsi_neg_config_default(&sc.neg);
	if (set_digests(&sc.neg, &url, &o))
		goto out;

	sigset_t oldmask;
	/* Each block request holds one slice and one command at a time: more slices than
	 * task slots would only make requests wait for a task instead of a slice.  The
	 * pool exists before the session: iSER registers it at the first connect. */
	unsigned slices = o.given[GW_OPT_POOL_SLICES] && optv(&o, GW_OPT_POOL_SLICES) < qd ?
				  (unsigned)optv(&o, GW_OPT_POOL_SLICES) : qd;
	if (slices < 2)
		slices = 2;
	size_t cache_block = CACHE_BLOCK_MAX; /* a power of two, at most one request */
	while (cache_block > max_io)
		cache_block /= 2;
	size_t cache_per_slice = (max_io + 4 * GW_BLOCK_SIZE_MAX) / cache_block;
	unsigned cache_slices =
		(unsigned)((cache_bytes + (unsigned long long)cache_per_slice * cache_block - 1) /
			   ((unsigned long long)cache_per_slice * cache_block));
	size_t slice_bytes = max_io + 4 * GW_BLOCK_SIZE_MAX;
	int prc = buf_pool_create(&g.pool, slice_bytes, slices + cache_slices);
	if (prc) {
		fprintf(stderr, "iserfuse: cannot allocate the buffer pool of %llu MiB (%u payload slices for queue_depth "
			"and pool_slices + %u cache slices for cache_size, %zu bytes each): %s\n",
			((unsigned long long)(slices + cache_slices) * slice_bytes) >> 20, slices, cache_slices,
			slice_bytes, strerror(-prc));
		gw_creds_wipe_session(&sc);
		goto out;
	}
	gw_creds_to_session(&creds, &sc);
	sc.on_async_sense = async_sense;
	sc.async_arg = &g;
	thread_quiet_begin(&oldmask); /* the event thread inherits the mask: only main takes them */
	int src = gw_session_open(tmode, &sc, g.pool, &iser, &g.s, err, sizeof(err));
	thread_quiet_end(&oldmask);
	g.iser = iser != NULL;
	gw_creds_wipe_session(&sc);
	if (src) {
		fprintf(stderr, "iserfuse: %s\n", err);
		buf_pool_destroy(g.pool);
		goto out;
	}
	g.retry_budget_ms = (uint32_t)(optv(&o, GW_OPT_CMD_TIMEOUT) > 0 ? optv(&o, GW_OPT_CMD_TIMEOUT) : 30) * 1000u;
	thread_quiet_begin(&oldmask);
	int qrc = blk_retry_create(&g.retry);
	thread_quiet_end(&oldmask);
	if (qrc) {
		fprintf(stderr, "iserfuse: cannot start the retry thread: %s\n", strerror(-qrc));
		goto out_session;
	}
	if (open_luns(&g, &url, err, sizeof(err))) {
		fprintf(stderr, "iserfuse: %s\n", err);
		goto out_session;
	}
	g.transport = g.iser ? iscsi_iser_transport.name : iscsi_tcp_transport.name;
	if (gw_byid_build(&g)) {
		fprintf(stderr, "iserfuse: out of memory\n");
		goto out_session;
	}
	if (cache_bytes && (prc = setup_cache(&g, cache_bytes, cache_slices, cache_block))) {
		fprintf(stderr, "iserfuse: cannot set up the block cache: %s\n", strerror(-prc));
		goto out_session;
	}
	install_stop_signals(se);
	if (fuse_session_mount(se, cmd.mountpoint)) {
		fprintf(stderr, "iserfuse: cannot mount on %s\n", cmd.mountpoint);
		goto out_session;
	}
	watch.ready_fd = ready_fd;
	ready_fd = -1;
	watch.foreground = cmd.foreground;
	watch.mnt = cmd.mountpoint;
	watch.se = se;
	snprintf(watch.started, sizeof(watch.started), "%zu LUN(s) of %s mounted on %s%s%s", g.nluns, url.target,
		 cmd.mountpoint, cmd.foreground ? "" : "; ", cmd.foreground ? "" : gw_logdest_name());
	pthread_t watcher;
	int wrc = thread_start_quiet(&watcher, live_watch_run, &watch);
	if (wrc) {
		fprintf(stderr, "iserfuse: cannot start a thread: %s\n", strerror(wrc));
		fuse_session_unmount(se);
		goto out_session;
	}
	pthread_detach(watcher);

	unsigned rescan_s = (unsigned)optv(&o, GW_OPT_RESCAN_INTERVAL);
	int rsrc = gw_rescan_start(&g, rescan_s); /* its thread starts with the stop signals blocked */
	if (rsrc)
		log_warn("cannot start the rescan thread (%s): sizes and LUNs stay as mounted", strerror(-rsrc));

	int lrc;
	if (cmd.singlethread) {
		lrc = fuse_session_loop(se);
	} else {
		struct fuse_loop_config *lc = fuse_loop_cfg_create();
		fuse_loop_cfg_set_clone_fd(lc, cmd.clone_fd);
		if (cmd.max_idle_threads <= 1024) /* UINT_MAX: not given */
			fuse_loop_cfg_set_idle_threads(lc, cmd.max_idle_threads);
		fuse_loop_cfg_set_max_threads(lc, cmd.max_threads && cmd.max_threads <= 1024 ? cmd.max_threads : 16);
		lrc = fuse_session_loop_mt(se, lc);
		fuse_loop_cfg_destroy(lc);
	}
	bool never_live = live_watch_end(&watch);
	sd_notify(0, "STOPPING=1");
	stop_signals = stop_signals ? stop_signals : 1; /* from now on the next stop signal ends the daemon */
	gw_rescan_stop(&g);
	/* A session being recovered gets a few seconds more, not the whole replacement_timeout. */
	iscsi_session_stopping(g.s, STOP_GRACE_MS);
	/*
	 * Drain while still mounted, so that the requests in flight get their
	 * replies instead of being aborted by the unmount; new ones wait.
	 */
	if (blk_retry_drain(g.retry, (int)g.retry_budget_ms + 5000)) /* commands waiting to be retried */
		log_err("retries still pending at shutdown");
	iscsi_session_drain(g.s, 30000); /* replies still in flight after the last FUSE request */
	fuse_session_unmount(se);
	sync_res = calloc(g.nluns, sizeof(*sync_res));
	int unsynced = 0;
	if (sync_res)
		unsynced = sync_all(&g, sync_res);
	struct blk_retry_stats rs;
	blk_retry_get_stats(g.retry, &rs);
	log_info("SCSI retries: %llu (%llu after a delay), %llu given up; %llu UNIT ATTENTIONs "
		 "(%llu capacity changed, %llu LUNs changed)",
		 (unsigned long long)rs.retried, (unsigned long long)rs.delayed, (unsigned long long)rs.exhausted,
		 (unsigned long long)rs.unit_attentions, (unsigned long long)rs.ua_capacity,
		 (unsigned long long)rs.ua_luns);
	struct iscsi_session_stats ss;
	iscsi_session_get_stats(g.s, &ss);
	log_info("%llu commands, %llu bytes read, %llu bytes written, peak %u commands outstanding, "
		 "peak %u of %u pool slices in use",
		 (unsigned long long)ss.commands, (unsigned long long)ss.bytes_read,
		 (unsigned long long)ss.bytes_written, ss.max_outstanding, buf_pool_max_in_use(g.pool),
		 buf_pool_nslices(g.pool));
	rc = lrc < 0 || unsynced || never_live ? 1 : 0;
out_session:
	/* Completions still to come (the close below aborts what is left) must
	 * not reach the retry queue: detach it from every LUN first. */
	for (size_t i = 0; i < gw_nluns(&g); i++)
		blk_dev_set_retry(&g.luns[i].dev, NULL, g.retry_budget_ms);
	struct blk_retry *rq = g.retry;
	__atomic_store_n(&g.retry, NULL, __ATOMIC_RELEASE); /* async_sense may still run */
	blk_retry_destroy(rq); /* fires what is parked, while the session still exists */
	iscsi_session_close(g.s, 10000);
	teardown_cache(&g);
	iser_ctx_destroy(iser); /* after the session: its connections used the registration */
	free(sync_res);
	for (size_t i = 0; i < g.nluns; i++)
		blk_dev_fini(&g.luns[i].dev);
	free(g.luns);
	gw_byid_free(&g);
	buf_pool_destroy(g.pool);
out:
	if (se)
		fuse_session_destroy(se);
	iscsi_url_wipe(&url);
	gw_creds_wipe(&creds);
	free(cmd.mountpoint);
	free_options(&o);
	gw_config_free(&conf);
	fuse_opt_free_args(&args);
	return rc;
}
