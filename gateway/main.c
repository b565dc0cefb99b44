/* SPDX-License-Identifier: MIT */
/*
 * iserfuse [options] URL MOUNTPOINT
 *
 * Order of work, so that every failure comes before anything is mounted:
 * parse options and URL (fuse_opt, fuse_session_new validates the FUSE
 * options), fork unless -f (the parent waits for the child's "mounted"),
 * connect and log in, probe the LUNs, create the pool, mount, report
 * success, detach, serve.  On unmount or SIGTERM/SIGINT/SIGHUP: leave the
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
#include "../initiator/url.h"
#include "config.h"
#include "credentials.h"
#include "gateway.h"
#include "transport_pick.h"
#include "../initiator/iser.h"

#ifndef ISERFUSE_VERSION
#define ISERFUSE_VERSION "0.1.0"
#endif

#define DEFAULT_MAX_IO (512u * 1024u)
#define DEFAULT_QUEUE_DEPTH 128u
#define BLOCK_SIZE_MAX 4096u
#define DEFAULT_CACHE_SIZE (64ull << 20)
#define CACHE_BLOCK_MAX (64u * 1024u)

struct options {
	char *url;
	char *initiator_name;
	unsigned queue_depth;
	unsigned max_io_kib;
	unsigned pool_slices;
	unsigned login_timeout;
	int cmd_timeout, noop_interval, noop_timeout; /* seconds; -1 = not given */
	int replacement_timeout; /* seconds; -1 = not given (120) */
	char *header_digest, *data_digest; /* -o header_digest=, data_digest=: none|crc32c|auto */
	char *secret_file;   /* -o secret_file=PATH: CHAP credentials */
	char *config;        /* -o config=PATH: the configuration file (default GW_CONFIG_DEFAULT if present) */
	char *log_level;     /* -o log_level=error|warn|info|debug */
	char *transport;     /* -o transport=auto|iser|tcp */
	int ro;
	int nonopts;
	int show_help, show_version;
	int list;            /* --list: discovery, no mount */
	int has_umask;
	unsigned umask;      /* -o umask=NNN (octal) */
	/* target events and stopping (rescan.c) */
	int rescan_interval; /* -o rescan_interval=S; -1 = not given (5) */
	char *cache_size;    /* -o cache_size=N[KMG] (bytes) */
	int writeback;       /* -o writeback */
};

enum { KEY_RO, KEY_HELP, KEY_VERSION, KEY_LIST, KEY_UMASK, KEY_IGNORE, KEY_STR };

/*
 * String options: a later one replaces an earlier one (the configuration
 * file's defaults come first on the argument list), freeing it.
 */
static const struct {
	const char *key; /* "name=" */
	size_t off;      /* of the char * in struct options */
} str_opts[] = {
	{"initiator_name=", offsetof(struct options, initiator_name)},
	{"header_digest=", offsetof(struct options, header_digest)},
	{"data_digest=", offsetof(struct options, data_digest)},
	{"secret_file=", offsetof(struct options, secret_file)},
	{"config=", offsetof(struct options, config)},
	{"log_level=", offsetof(struct options, log_level)},
	{"transport=", offsetof(struct options, transport)},
	{"cache_size=", offsetof(struct options, cache_size)},
};

#define OPT(t, p) {t, offsetof(struct options, p), 1}
static const struct fuse_opt option_spec[] = {
	{"initiator_name=", -1U, KEY_STR + 0},
	{"header_digest=", -1U, KEY_STR + 1},
	{"data_digest=", -1U, KEY_STR + 2},
	{"secret_file=", -1U, KEY_STR + 3},
	{"config=", -1U, KEY_STR + 4},
	{"log_level=", -1U, KEY_STR + 5},
	{"transport=", -1U, KEY_STR + 6},
	OPT("queue_depth=%u", queue_depth),
	OPT("max_io_kib=%u", max_io_kib),
	OPT("pool_slices=%u", pool_slices),
	OPT("login_timeout=%u", login_timeout),
	OPT("cmd_timeout=%d", cmd_timeout),
	OPT("noop_interval=%d", noop_interval),
	OPT("noop_timeout=%d", noop_timeout),
	OPT("replacement_timeout=%d", replacement_timeout),
	OPT("rescan_interval=%d", rescan_interval),
	{"cache_size=", -1U, KEY_STR + 7},
	OPT("writeback", writeback),
	FUSE_OPT_KEY("ro", KEY_RO),
	/* mount(8) and fstab words that mean nothing to a FUSE daemon (mount.fuse3 drops most of them too) */
	FUSE_OPT_KEY("_netdev", KEY_IGNORE),
	FUSE_OPT_KEY("nofail", KEY_IGNORE),
	FUSE_OPT_KEY("auto", KEY_IGNORE),
	FUSE_OPT_KEY("noauto", KEY_IGNORE),
	FUSE_OPT_KEY("user", KEY_IGNORE),
	FUSE_OPT_KEY("nouser", KEY_IGNORE),
	FUSE_OPT_KEY("users", KEY_IGNORE),
	FUSE_OPT_KEY("defaults", KEY_IGNORE),
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	FUSE_OPT_KEY("--list", KEY_LIST),
	FUSE_OPT_KEY("umask=", KEY_UMASK),
	FUSE_OPT_END,
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: iserfuse [options] iscsi://[user[%%password]@]host[:port]/target-iqn[/lun] MOUNTPOINT\n"
		"       iserfuse [options] NAME [MOUNTPOINT]     (section [NAME] of the configuration file)\n"
		"       iserfuse --list [options] iscsi://host[:port] | NAME\n"
		"\n"
		"Exposes the disk LUNs of an iSCSI target as files MOUNTPOINT/lun<N>.\n"
		"Every option can also be given as -o key=value (for /etc/fstab: fuse.iserfuse).\n"
		"\n"
		"iserfuse options:\n"
		"    -o config=PATH         configuration file (default %s, if present)\n"
		"    -o initiator_name=IQN  initiator name (default: generated once per host and kept)\n"
		"    -o ro                  read-only mount, EROFS on write (default: off)\n"
		"    -o queue_depth=N       most SCSI commands outstanding (default %u)\n"
		"    -o max_io_kib=N        largest FUSE read/write in KiB (default %u)\n"
		"    -o pool_slices=N       payload buffers in the pool (default: queue_depth)\n"
		"    -o login_timeout=S     connect and login timeout in seconds (default 15)\n"
		"    -o cmd_timeout=S       a command unanswered this long is aborted and re-issued (default 30, 0 = never)\n"
		"    -o noop_interval=S     NOP-Out ping after S idle seconds (default 5, 0 = off)\n"
		"    -o noop_timeout=S      no answer S seconds after a ping drops the connection (default 5)\n"
		"    -o header_digest=D     CRC32C header digests: none, crc32c (required) or auto (default none)\n"
		"    -o data_digest=D       CRC32C data digests: none, crc32c (required) or auto (default none)\n"
		"    -o secret_file=PATH    CHAP credentials (default none): 'key = value' lines: username,\n"
		"                           password, mutual_username, mutual_password (mode 0600 or stricter)\n"
		"    -o replacement_timeout=S  after a connection loss, I/O still pending S seconds later fails\n"
		"                           with EIO, and new I/O too until the target is back (default 120)\n"
		"    -o rescan_interval=S   READ CAPACITY and REPORT LUNS every S seconds: sizes follow the\n"
		"                           target, LUN files come and go (default 5, 0 = only on UNIT ATTENTION)\n"
		"                           CHAP credentials come from the URL (user%%password@, ?target_user=,\n"
		"                           ?target_password= for mutual CHAP), then secret_file, then\n"
		"                           ISERFUSE_CHAP_USERNAME, ISERFUSE_CHAP_PASSWORD,\n"
		"                           ISERFUSE_CHAP_MUTUAL_USERNAME, ISERFUSE_CHAP_MUTUAL_PASSWORD\n"
		"    -o log_level=L         error, warn, info or debug (default warn; -d: debug)\n"
		"    -o transport=T         auto (default: iSER when an RDMA device is on the route, else TCP),\n"
		"                           iser (never falls back; also ?iser in the URL) or tcp\n"
		"    -o cache_size=N        block cache size in bytes, K/M/G suffixes (default 64M, 0 = no cache)\n"
		"    -o writeback           keep written blocks in the cache until fsync, close or memory pressure\n"
		"    -o umask=NNN           permission bits to clear (octal, default 077: files 0600, directory 0700)\n"
		"    -o allow_other         let other users use the mount (default off; needs user_allow_other)\n"
		"    -o _netdev, nofail, auto, noauto, user, users, nouser, defaults, x-*, comment=*\n"
		"                           fstab words, accepted and ignored\n"
		"    -f                     stay in the foreground, log to stderr (default: background, syslog)\n"
		"    -d                     debug output, FUSE requests too (implies -f)\n"
		"    -s                     single-threaded FUSE loop (default: up to 16 threads)\n"
		"    --list                 list the targets and LUNs behind a portal (SendTargets), mount nothing\n"
		"    -h, --help             this text and the FUSE options\n"
		"    -V, --version          versions of iserfuse, libfuse and libibverbs (rdma-core)\n"
		"\n",
		GW_CONFIG_DEFAULT, DEFAULT_QUEUE_DEPTH, DEFAULT_MAX_IO / 1024);
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
	case KEY_RO:
		o->ro = 1;
		return 1; /* the kernel mount is read-only too */
	case KEY_HELP:
		o->show_help = 1;
		return 0;
	case KEY_VERSION:
		o->show_version = 1;
		return 0;
	case KEY_LIST:
		o->list = 1;
		return 0;
	case KEY_UMASK: {
		char *end = NULL;
		unsigned long m = strtoul(arg + strlen("umask="), &end, 8);
		if (end == arg + strlen("umask=") || *end || m > 0777) {
			fprintf(stderr, "iserfuse: bad option '%s': an octal mask up to 0777 is expected\n", arg);
			return -1;
		}
		o->umask = (unsigned)m;
		o->has_umask = 1;
		return 0; /* applied in fill_attr; libfuse's low-level API rejects umask= */
	}
	default:
		if (key >= KEY_STR && key < KEY_STR + (int)(sizeof(str_opts) / sizeof(str_opts[0]))) {
			char **field = (char **)((char *)o + str_opts[key - KEY_STR].off);
			free(*field);
			*field = strdup(arg + strlen(str_opts[key - KEY_STR].key));
			return *field ? 0 : -1;
		}
		return 1;
	}
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
static int apply_config(struct options *o, struct fuse_args *args, struct gw_config *conf)
{
	const char *path = o->config ? o->config : GW_CONFIG_DEFAULT;
	const struct gw_config_target *t = NULL;
	struct options c = {.cmd_timeout = -1, .noop_interval = -1, .noop_timeout = -1, .replacement_timeout = -1,
			    .rescan_interval = -1};
	struct fuse_args ca = FUSE_ARGS_INIT(0, NULL);
	int rc = -1;

	if (gw_config_load(path, o->config != NULL, conf))
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
	if (fuse_opt_parse(&ca, &c, option_spec, opt_proc) == -1) {
		fprintf(stderr, "iserfuse: %s: bad options\n", conf->path);
		goto out;
	}
	if (c.config || c.list || c.show_help || c.show_version) {
		fprintf(stderr, "iserfuse: %s: config=, --list, --help and --version belong on the command line\n",
			conf->path);
		goto out;
	}
	for (int i = ca.argc - 1; i >= 1; i--) /* allow_other, ro, ...: the command line's come later and win */
		if (fuse_opt_insert_arg(args, 1, ca.argv[i]))
			goto out;
#define TAKE_STR(f) do { if (!o->f && c.f) { o->f = c.f; c.f = NULL; } } while (0)
#define TAKE_NUM(f, unset) do { if (o->f == (unset)) o->f = c.f; } while (0)
	TAKE_STR(initiator_name);
	TAKE_STR(header_digest);
	TAKE_STR(data_digest);
	TAKE_STR(secret_file);
	TAKE_STR(log_level);
	TAKE_STR(transport);
	TAKE_STR(cache_size);
	TAKE_NUM(queue_depth, 0);
	TAKE_NUM(max_io_kib, 0);
	TAKE_NUM(pool_slices, 0);
	TAKE_NUM(login_timeout, 0);
	TAKE_NUM(cmd_timeout, -1);
	TAKE_NUM(noop_interval, -1);
	TAKE_NUM(noop_timeout, -1);
	TAKE_NUM(replacement_timeout, -1);
	TAKE_NUM(rescan_interval, -1);
#undef TAKE_STR
#undef TAKE_NUM
	o->ro |= c.ro;
	o->writeback |= c.writeback;
	if (!o->has_umask && c.has_umask) {
		o->has_umask = 1;
		o->umask = c.umask;
	}
	if (!o->initiator_name && conf->initiator_name && !(o->initiator_name = strdup(conf->initiator_name)))
		goto out;
	if (!o->secret_file && t && t->secret_file && !(o->secret_file = strdup(t->secret_file)))
		goto out;
	rc = 0;
out:
	for (size_t i = 0; i < sizeof(str_opts) / sizeof(str_opts[0]); i++)
		free(*(char **)((char *)&c + str_opts[i].off));
	free(c.url);
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
	const char *const from_opt[2] = {o->header_digest, o->data_digest};
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
	size_t ndisk = 0;
	for (size_t i = 0; i < nluns; i++) {
		bool dup = false;
		for (size_t j = 0; j < i; j++)
			dup = dup || luns[j] == luns[i];
		if (dup)
			continue; /* one file per LUN, however often the target lists it */
		struct iscsi_lun_info *info = &infos[ndisk];
		rc = iscsi_lun_probe(g->s, luns[i], scratch, buf_pool_slice_size(g->pool), info);
		if (rc) {
			if (url->lun >= 0) {
				snprintf(err, err_cap, "LUN %u: %s", luns[i], strerror(-rc));
				goto out;
			}
			log_warn("LUN %u: probe failed (%s), skipped", luns[i], strerror(-rc));
			rc = 0;
			continue;
		}
		if (info->inq.qualifier != 0 || info->inq.device_type != 0) {
			if (url->lun >= 0 && (info->inq.qualifier == 3 || info->inq.device_type == 0x1f)) {
				snprintf(err, err_cap, "LUN %u does not exist on %s", luns[i], url->target);
				rc = -ENXIO;
				goto out;
			}
			if (url->lun >= 0) {
				snprintf(err, err_cap, "LUN %u is not a disk (peripheral device type 0x%02x)", luns[i],
					 info->inq.device_type);
				rc = -ENODEV;
				goto out;
			}
			log_info("LUN %u: peripheral device type 0x%02x, not a disk: skipped", luns[i],
				 info->inq.device_type);
			continue;
		}
		if (info->cap.block_size > BLOCK_SIZE_MAX) {
			log_warn("LUN %u: %u-byte blocks are not supported, skipped", luns[i], info->cap.block_size);
			if (url->lun >= 0) {
				snprintf(err, err_cap, "LUN %u: %u-byte blocks are not supported", luns[i],
					 info->cap.block_size);
				rc = -ENOTSUP;
				goto out;
			}
			continue;
		}
		if (info->cap.nblocks > (uint64_t)INT64_MAX / info->cap.block_size) {
			/* The size in bytes would not fit off_t (or would wrap). */
			snprintf(err, err_cap, "LUN %u: capacity of %llu blocks of %u bytes is too large", luns[i],
				 (unsigned long long)info->cap.nblocks, info->cap.block_size);
			if (url->lun >= 0) {
				rc = -EOVERFLOW;
				goto out;
			}
			log_warn("%s, skipped", err);
			err[0] = '\0';
			continue;
		}
		ndisk++;
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
	for (size_t i = 0; i < ndisk; i++) {
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
 * start block them (block_stop_signals around their creation).
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

/* Block the stop signals in the calling thread; *old gets the mask to restore with pthread_sigmask(SIG_SETMASK). */
static void block_stop_signals(sigset_t *old)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, old);
}

/* ---- the block cache ---- */

/* "64M", "1G", "0", "65536": bytes into *out; -1 if malformed. */
static int parse_size(const char *s, unsigned long long *out)
{
	char *end = NULL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (end == s || errno)
		return -1;
	unsigned shift = 0;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	default: break;
	}
	if (*end || v > (1ull << 40) >> shift)
		return -1;
	*out = v << shift;
	return 0;
}

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
	log_use_syslog(true);
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
	struct options o = {.cmd_timeout = -1, .noop_interval = -1, .noop_timeout = -1, .replacement_timeout = -1,
			     .rescan_interval = -1};
	struct fuse_cmdline_opts cmd = {0};
	struct iscsi_url url = {0};
	struct gw_creds creds = {0};
	struct gw g = {.files_lock = PTHREAD_MUTEX_INITIALIZER};
	struct gw_config conf = {0};
	struct iser_ctx *iser = NULL;
	struct fuse_session *se = NULL;
	char err[512] = "";
	int ready_fd = -1, rc = 1, *sync_res = NULL;

	signal(SIGPIPE, SIG_IGN); /* a closed connection is an error return, not a signal */
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
		fuse_lowlevel_help();
		rc = 0;
		goto out;
	}
	if (apply_config(&o, &args, &conf))
		goto out; /* nothing started yet */
	if (o.log_level && set_log_level(o.log_level))
		goto out;
	if (o.list) {
		/* Discovery only: no mount point, no FUSE session. */
		if (o.nonopts || !o.url) {
			fprintf(stderr, "iserfuse: --list takes one URL, iscsi://host[:port], and no mount point\n");
			goto out;
		}
		rc = gw_list(o.url, o.initiator_name, o.login_timeout, o.secret_file);
		goto out;
	}
	if (fuse_parse_cmdline(&args, &cmd) != 0)
		goto out;
	if (!o.url || !cmd.mountpoint) {
		fprintf(stderr, "iserfuse: %s\n", !o.url ? "missing URL and mount point" : "missing mount point");
		usage(stderr);
		goto out;
	}
	if (iscsi_url_parse(o.url, true, &url, err, sizeof(err))) {
		fprintf(stderr, "iserfuse: bad URL: %s\n", err);
		goto out;
	}
	enum gw_transport tmode;
	if (gw_transport_parse(o.transport, url.iser, &tmode)) {
		fprintf(stderr, "iserfuse: bad option 'transport=%s': auto, iser or tcp expected (not tcp with ?iser)\n",
			o.transport);
		goto out;
	}
	explicit_bzero(o.url, strlen(o.url));
	log_set_context(url.target); /* every line names the target (and the LUN where it is about one) */
	if (gw_creds_load(&creds, &url, o.secret_file))
		goto out;
	iscsi_url_wipe(&url);
	struct iscsi_neg_config digest_check;
	iscsi_neg_config_default(&digest_check);
	if (set_digests(&digest_check, &url, &o))
		goto out; /* a bad digest option fails before anything starts */
	struct stat st;
	if (stat(cmd.mountpoint, &st) || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "iserfuse: mount point %s is not a directory\n", cmd.mountpoint);
		goto out;
	}
	if (cmd.debug)
		log_set_level(LOG_LVL_DEBUG);

	unsigned qd = o.queue_depth ? o.queue_depth : DEFAULT_QUEUE_DEPTH;
	size_t max_io = (size_t)(o.max_io_kib ? o.max_io_kib : DEFAULT_MAX_IO / 1024) * 1024;
	if (o.rescan_interval < -1 || o.rescan_interval > 86400) {
		fprintf(stderr, "iserfuse: rescan_interval must be 0..86400 s\n");
		goto out;
	}
	if (o.cmd_timeout > 86400 || o.noop_interval > 3600 || o.noop_timeout > 3600 || o.noop_timeout == 0) {
		fprintf(stderr, "iserfuse: cmd_timeout must be 0..86400 s, noop_interval 0..3600 s, noop_timeout 1..3600 s\n");
		goto out;
	}
	if (o.replacement_timeout > 86400) {
		fprintf(stderr, "iserfuse: replacement_timeout must be 0..86400 s\n");
		goto out;
	}
	if (qd > 4096 || max_io < 4096 || max_io > 4u * 1024 * 1024 || max_io % 4096) {
		fprintf(stderr, "iserfuse: queue_depth must be 1..4096 and max_io_kib a multiple of 4 in 4..4096\n");
		goto out;
	}
	unsigned long long cache_bytes = DEFAULT_CACHE_SIZE;
	if (o.cache_size && parse_size(o.cache_size, &cache_bytes)) {
		fprintf(stderr, "iserfuse: bad option 'cache_size=%s': a size in bytes (K, M, G suffixes) up to 1T expected\n",
			o.cache_size);
		goto out;
	}
	g.max_io = max_io;
	g.writeback = o.writeback && cache_bytes;
	g.ro = o.ro;
	g.uid = getuid();
	g.gid = getgid();
	g.umask = o.has_umask ? (mode_t)o.umask : 077;
	clock_gettime(CLOCK_REALTIME, &g.mtime);

	char maxread[64];
	snprintf(maxread, sizeof(maxread), "-omax_read=%zu", max_io);
	fuse_opt_add_arg(&args, maxread);
	fuse_opt_add_arg(&args, "-osubtype=iserfuse");
	/* Validates the FUSE options (unknown ones fail here, before anything else). */
	se = fuse_session_new(&args, &gw_ops, sizeof(gw_ops), &g);
	if (!se)
		goto out;
	g.se = se;
	g.url_lun = url.lun;

	if (!cmd.foreground && daemon_fork(&ready_fd))
		goto out;

	unsigned login_timeout = o.login_timeout ? o.login_timeout : 15;
	signal(SIGALRM, startup_watchdog);
	alarm(2 * login_timeout + 5);

	struct iscsi_session_config sc = {
		.transport = &iscsi_tcp_transport,
		.port = url.port,
		.queue_depth = qd,
		.timeout_ms = (int)login_timeout * 1000,
		.cmd_timeout_ms = (o.cmd_timeout < 0 ? 30 : o.cmd_timeout) * 1000,
		.noop_interval_ms = (o.noop_interval < 0 ? 5 : o.noop_interval) * 1000,
		.noop_timeout_ms = (o.noop_timeout < 0 ? 5 : o.noop_timeout) * 1000,
		.replacement_timeout_ms = (o.replacement_timeout < 0 ? 120 : o.replacement_timeout) * 1000,
	};
	snprintf(sc.host, sizeof(sc.host), "%s", url.host);
	snprintf(sc.target_name, sizeof(sc.target_name), "%s", url.target);
	if (o.initiator_name)
		snprintf(sc.initiator_name, sizeof(sc.initiator_name), "%s", o.initiator_name);
	else if (gw_default_initiator_name(sc.initiator_name, sizeof(sc.initiator_name)))
		log_info("cannot keep the generated initiator name; using %s", sc.initiator_name);
	iscsi_neg_config_default(&sc.neg);
	if (set_digests(&sc.neg, &url, &o))
		goto out;

	sigset_t oldmask;
	/* Each block request holds one slice and one command at a time: more slices than
	 * task slots would only make requests wait for a task instead of a slice.  The
	 * pool exists before the session: iSER registers it at the first connect. */
	unsigned slices = o.pool_slices && o.pool_slices < qd ? o.pool_slices : qd;
	if (slices < 2)
		slices = 2;
	size_t cache_block = CACHE_BLOCK_MAX; /* a power of two, at most one request */
	while (cache_block > max_io)
		cache_block /= 2;
	size_t cache_per_slice = (max_io + 4 * BLOCK_SIZE_MAX) / cache_block;
	unsigned cache_slices =
		(unsigned)((cache_bytes + (unsigned long long)cache_per_slice * cache_block - 1) /
			   ((unsigned long long)cache_per_slice * cache_block));
	int prc = buf_pool_create(&g.pool, max_io + 4 * BLOCK_SIZE_MAX, slices + cache_slices);
	if (prc) {
		fprintf(stderr, "iserfuse: cannot allocate the buffer pool (%u x %zu bytes): %s\n", slices,
			max_io + 4 * BLOCK_SIZE_MAX, strerror(-prc));
		gw_creds_wipe_session(&sc);
		goto out;
	}
	gw_creds_to_session(&creds, &sc);
	sc.on_async_sense = async_sense;
	sc.async_arg = &g;
	block_stop_signals(&oldmask); /* the event thread inherits the mask: only main takes them */
	int src = gw_session_open(tmode, &sc, g.pool, &iser, &g.s, err, sizeof(err));
	pthread_sigmask(SIG_SETMASK, &oldmask, NULL);
	g.iser = iser != NULL;
	gw_creds_wipe_session(&sc);
	if (src) {
		fprintf(stderr, "iserfuse: %s\n", err);
		buf_pool_destroy(g.pool);
		goto out;
	}
	g.retry_budget_ms = (uint32_t)(o.cmd_timeout > 0 ? o.cmd_timeout : 30) * 1000u;
	block_stop_signals(&oldmask);
	int qrc = blk_retry_create(&g.retry);
	pthread_sigmask(SIG_SETMASK, &oldmask, NULL);
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
	alarm(0);
	signal(SIGALRM, SIG_DFL);
	report_ready(ready_fd);
	ready_fd = -1;
	/* Type=notify units: the mount is live (a no-op without $NOTIFY_SOCKET). */
	sd_notifyf(0, "READY=1\nSTATUS=%zu LUN(s) of %s mounted on %s", g.nluns, url.target, cmd.mountpoint);
	if (!cmd.foreground) {
		if (chdir("/"))
			log_warn("chdir /: %s", strerror(errno));
		detach_stdio();
	}

	unsigned rescan_s = o.rescan_interval < 0 ? 5u : (unsigned)o.rescan_interval;
	block_stop_signals(&oldmask);
	int rsrc = gw_rescan_start(&g, rescan_s);
	pthread_sigmask(SIG_SETMASK, &oldmask, NULL);
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
	rc = lrc < 0 || unsynced ? 1 : 0;
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
	if (o.url)
		explicit_bzero(o.url, strlen(o.url));
	free(o.url);
	free(o.secret_file);
	free(o.transport);
	free(o.cache_size);
	free(o.initiator_name);
	free(o.header_digest);
	free(o.data_digest);
	free(o.config);
	free(o.log_level);
	gw_config_free(&conf);
	fuse_opt_free_args(&args);
	return rc;
}
