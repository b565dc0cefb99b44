/* SPDX-License-Identifier: MIT */
/*
 * The option table's use (fuse_opt templates and the key handler) and the
 * merge of the command line with the configuration file (see settings.h).
 */
#include "settings.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "initiator/util/log.h"
#include "gateway/fuse/fuselog.h"

long long gw_settings_num(const struct gw_settings *o, enum gw_opt_id id)
{
	return o->given[id] ? o->num[id] : gw_opts[id].def;
}

enum { KEY_HELP, KEY_VERSION, KEY_LIST, KEY_IGNORE, KEY_RW, KEY_TAB /* + gw_opt_id */ };

/*
 * Where the options being parsed come from: NULL for the command line,
 * else the configuration file and the line of its options = key.
 */
static const char *opt_origin;
static int opt_origin_line;

/* "iserfuse: [PATH:LINE: ]" and the message, one line on stderr. */
static void opt_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void opt_error(const char *fmt, ...)
{
	va_list ap;
	if (opt_origin)
		fprintf(stderr, "iserfuse: %s:%d: ", opt_origin, opt_origin_line);
	else
		fputs("iserfuse: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

const char *gw_settings_where(const struct gw_settings *o, int id, char *buf, size_t cap)
{
	int line = id == GW_WHERE_URL ? o->url_line : id == GW_WHERE_MOUNTPOINT ? o->mountpoint_line
		 : id >= 0 && id < GW_OPT_COUNT ? o->line[id] : 0;
	if (line > 0 && o->conf_path)
		snprintf(buf, cap, "%s:%d: ", o->conf_path, line);
	else if (cap)
		buf[0] = '\0';
	return buf;
}

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

/* The iserfuse part of --help. */
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
		"    -s                       single-threaded FUSE loop (default: see max_threads)\n"
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

/*
 * Whether libfuse takes one option it is to be given (item: "-o" item, or
 * a dash option such as "-f"): fuse_parse_cmdline's (clone_fd,
 * max_idle_threads, -f, ...) or a FUSE session's (allow_other,
 * max_read=, ...).  0 if it does, else -1 with libfuse's reason in why
 * (cap bytes), so that the caller can say it in its own words.
 */
static int fuse_takes(const char *item, char *why, size_t cap)
{
	static const struct fuse_lowlevel_ops no_ops;
	struct fuse_args t = FUSE_ARGS_INIT(0, NULL);
	struct fuse_cmdline_opts cmd = {0};
	int rc = -1;
	snprintf(why, cap, "out of memory");
	if (fuse_opt_add_arg(&t, "iserfuse") || (item[0] != '-' && fuse_opt_add_arg(&t, "-o")) ||
	    fuse_opt_add_arg(&t, item))
		goto out;
	gw_fuselog_capture(why, cap);
	struct fuse_session *se = NULL;
	if (fuse_parse_cmdline(&t, &cmd) == 0)
		se = fuse_session_new(&t, &no_ops, sizeof(no_ops), NULL);
	gw_fuselog_capture(NULL, 0);
	free(cmd.mountpoint);
	if (se) {
		fuse_session_destroy(se);
		rc = 0;
	} else if (!why[0]) {
		snprintf(why, cap, "libfuse refuses it");
	}
out:
	fuse_opt_free_args(&t);
	return rc;
}

/*
 * An option neither the table nor the fixed words know, for libfuse: 1
 * (keep it for libfuse) if libfuse takes it, else -1 after one line
 * saying what is wrong with it.
 */
static int for_fuse(const char *arg)
{
	char why[512];
	if (opt_origin && arg[0] == '-') { /* -f, -d ...: the command line's, not an options = item */
		opt_error("unknown option '%s'", arg);
		return -1;
	}
	if (!fuse_takes(arg, why, sizeof(why)))
		return 1;
	if (strstr(why, "unknown option"))
		opt_error("unknown option '%s'", arg);
	else
		opt_error("bad option '%s': %s", arg, !strncmp(why, "fuse: ", 6) ? why + 6 : why);
	return -1;
}

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct gw_settings *o = data;
	(void)outargs;
	switch (key) {
	case FUSE_OPT_KEY_OPT:
		if (!strncmp(arg, "x-", 2) || !strncmp(arg, "comment=", 8))
			return 0; /* fstab annotations (x-systemd.*, ...) */
		if (!*arg)
			return 0; /* an empty item ("ro,,umask=022", "options ="): skipped, as mount(8) does */
		int i = gw_opt_find(arg);
		if (i >= 0 && gw_opts[i].kind != GW_OPT_FLAG && !strchr(arg, '=')) {
			opt_error("option '%s' needs a value: -o %s=%s", arg, arg, gw_opts[i].arg);
			return -1;
		}
		if (i >= 0 && gw_opts[i].kind == GW_OPT_FLAG && strchr(arg, '=')) {
			opt_error("option '%s' takes no value: -o %s", arg, gw_opts[i].key);
			return -1;
		}
		return for_fuse(arg);
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
		o->line[GW_OPT_RO] = opt_origin ? opt_origin_line : 0;
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
	o->line[id] = opt_origin ? opt_origin_line : 0;
	if (id == GW_OPT_RO)
		o->ro_off = false;
	if (t->kind == GW_OPT_FLAG)
		return t->to_fuse; /* ro: the kernel mount is read-only too; allow_other is libfuse's */
	char err[256];
	if (t->kind == GW_OPT_STR && gw_mpath_opt(&o->portals, id, val, err, sizeof(err))) {
		opt_error("%s", err);
		return -1;
	}
	if (id == GW_OPT_PORTAL)
		return 0; /* repeatable: each one was added to o->portals */
	if (t->kind == GW_OPT_STR && !*val && t->arg && !strcmp(t->arg, "PATH")) {
		opt_error("bad option '%s=': the path is empty", t->key);
		return -1;
	}
	if (t->kind == GW_OPT_STR) {
		/* a later one replaces an earlier one (the configuration file's come first) */
		free(o->str[id]);
		o->str[id] = strdup(val);
		return o->str[id] ? 0 : -1;
	}
	if (gw_opt_parse_num(id, val, &o->num[id], err, sizeof(err))) {
		opt_error("%s", err);
		return -1;
	}
	return 0;
}

/* ---- the configuration file ---- */

void gw_settings_free(struct gw_settings *o)
{
	if (o->url)
		explicit_bzero(o->url, strlen(o->url));
	free(o->url);
	o->url = NULL;
	free(o->conf_path);
	o->conf_path = NULL;
	for (int i = 0; i < GW_OPT_COUNT; i++) {
		free(o->str[i]);
		o->str[i] = NULL;
	}
}

/*
 * One options = line of the configuration file (line `line`) parsed into
 * c; the FUSE options it holds are appended to fuse_out.  Returns 0, or -1
 * after printing one line naming the file and the line.
 */
static int parse_file_options(struct gw_settings *c, const char *path, int line, const char *options,
			      struct fuse_args *fuse_out)
{
	struct fuse_args ca = FUSE_ARGS_INIT(0, NULL);
	int rc = -1;
	if (fuse_opt_add_arg(&ca, "iserfuse") || fuse_opt_add_arg(&ca, "-o") || fuse_opt_add_arg(&ca, options))
		goto out;
	opt_origin = path; /* a bad value names the file and the line */
	opt_origin_line = line;
	int prc = fuse_opt_parse(&ca, c, option_spec, opt_proc);
	if (prc == -1)
		goto out; /* opt_proc said why */
	if (c->given[GW_OPT_CONFIG] || c->list || c->show_help || c->show_version) {
		opt_error("config=, --list, --help and --version belong on the command line");
		goto out;
	}
	for (int i = 1; i < ca.argc; i++) /* allow_other, ro, ...: for libfuse */
		if (fuse_opt_add_arg(fuse_out, ca.argv[i]))
			goto out;
	rc = 0;
out:
	opt_origin = NULL;
	opt_origin_line = 0;
	fuse_opt_free_args(&ca);
	return rc;
}

/*
 * The configuration file's part of gw_settings_load (see settings.h).
 * Returns 0, or -1 after printing one line.
 */
static int apply_config(struct gw_settings *o, struct fuse_args *args, struct gw_config *conf)
{
	const char *path = o->str[GW_OPT_CONFIG] ? o->str[GW_OPT_CONFIG] : GW_CONFIG_DEFAULT;
	const struct gw_config_target *t = NULL;
	struct gw_settings c = {0};
	struct fuse_args fa = FUSE_ARGS_INIT(0, NULL);
	int rc = -1;

	if (gw_config_load(path, o->str[GW_OPT_CONFIG] != NULL, conf))
		return -1;
	if (conf->path && !(o->conf_path = strdup(conf->path)))
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
		o->url_line = t->url_line;
		if (t->mountpoint && o->nonopts == 0 && !o->list) {
			struct stat st;
			if (stat(t->mountpoint, &st)) { /* before libfuse's own check, which cannot say where it came from */
				fprintf(stderr, "iserfuse: %s:%d: mount point %s: %s\n", conf->path, t->mountpoint_line,
					t->mountpoint, strerror(errno));
				return -1;
			}
			fuse_opt_add_arg(args, t->mountpoint);
			o->nonopts++;
			o->mountpoint_line = t->mountpoint_line;
		}
	}
	/* the global options, then the section's: a later value replaces an earlier one */
	if (conf->options && parse_file_options(&c, conf->path, conf->options_line, conf->options, &fa))
		goto out;
	if (t && t->options && parse_file_options(&c, conf->path, t->options_line, t->options, &fa))
		goto out;
	for (int i = fa.argc - 1; i >= 0; i--) /* the command line's come later and win */
		if (fuse_opt_insert_arg(args, 1, fa.argv[i]))
			goto out;
	for (int i = 0; i < GW_OPT_COUNT; i++) { /* the command line's values win */
		if (o->given[i] || !c.given[i])
			continue;
		o->given[i] = true;
		o->line[i] = c.line[i];
		if (i == GW_OPT_RO)
			o->ro_off = c.ro_off;
		if (i < GW_OPT_NUMERIC_COUNT)
			o->num[i] = c.num[i];
		if (i == GW_OPT_PORTAL) { /* the file's portals, unless the command line gave some */
			o->portals = c.portals;
		}
		o->str[i] = c.str[i];
		c.str[i] = NULL;
	}
	if (!o->str[GW_OPT_INITIATOR_NAME] && conf->initiator_name) {
		if (!(o->str[GW_OPT_INITIATOR_NAME] = strdup(conf->initiator_name)))
			goto out;
		o->line[GW_OPT_INITIATOR_NAME] = conf->initiator_name_line;
	}
	if (!o->str[GW_OPT_SECRET_FILE] && t && t->secret_file) {
		if (!(o->str[GW_OPT_SECRET_FILE] = strdup(t->secret_file)))
			goto out;
		o->line[GW_OPT_SECRET_FILE] = t->secret_file_line;
	}
	rc = 0;
out:
	gw_settings_free(&c);
	fuse_opt_free_args(&fa);
	return rc;
}

/* -o log_level=: 0, or -1 after printing why (where: gw_settings_where's prefix). */
static int set_log_level(const char *where, const char *name)
{
	static const char *const names[] = {"error", "warn", "info", "debug"};
	for (int i = 0; i < 4; i++) {
		if (!strcmp(name, names[i])) {
			log_set_level((enum log_level)i);
			return 0;
		}
	}
	fprintf(stderr, "iserfuse: %sbad option 'log_level=%s': error, warn, info or debug expected\n", where, name);
	return -1;
}

int gw_settings_digests(struct iscsi_neg_config *neg, const struct iscsi_url *url, const struct gw_settings *o)
{
	const char *const names[2] = {"header_digest", "data_digest"};
	const char *const from_url[2] = {url->header_digest, url->data_digest};
	const char *const from_opt[2] = {o->str[GW_OPT_HEADER_DIGEST], o->str[GW_OPT_DATA_DIGEST]};
	for (int i = 0; i < 2; i++) {
		if (from_url[i][0] && iscsi_neg_set_digest(neg, i == 1, from_url[i])) {
			char where[GW_WHERE_MAX];
			fprintf(stderr, "iserfuse: %sbad URL: %s=%s\n", gw_settings_where(o, GW_WHERE_URL, where, sizeof(where)),
				names[i], from_url[i]);
			return -1;
		}
		if (from_opt[i] && iscsi_neg_set_digest(neg, i == 1, from_opt[i])) {
			char where[GW_WHERE_MAX];
			fprintf(stderr, "iserfuse: %sbad option '%s=%s': none, crc32c or auto expected\n",
				gw_settings_where(o, i ? GW_OPT_DATA_DIGEST : GW_OPT_HEADER_DIGEST, where, sizeof(where)),
				names[i], from_opt[i]);
			return -1;
		}
	}
	return 0;
}

bool gw_settings_ro(const struct gw_settings *o)
{
	return o->given[GW_OPT_RO] && !o->ro_off;
}

int gw_settings_parse(struct gw_settings *o, struct fuse_args *args)
{
	build_option_spec();
	return fuse_opt_parse(args, o, option_spec, opt_proc) == -1 ? -1 : 0;
}

int gw_settings_load(struct gw_settings *o, struct fuse_args *args, struct gw_config *conf)
{
	char nerr[160], where[GW_WHERE_MAX];
	if (apply_config(o, args, conf))
		return -1;
	const struct gw_mpath_given mg = {
		.multipath = o->str[GW_OPT_MULTIPATH],
		.discover_portals = o->str[GW_OPT_DISCOVER_PORTALS],
		.sessions = gw_settings_num(o, GW_OPT_SESSIONS),
		.multipath_where = gw_settings_where(o, GW_OPT_MULTIPATH, where, sizeof(where)),
		.url = o->url,
	};
	if (gw_mpath_settle(&mg, &o->portals))
		return -1;
	if (o->str[GW_OPT_LOG_LEVEL] &&
	    set_log_level(gw_settings_where(o, GW_OPT_LOG_LEVEL, where, sizeof(where)), o->str[GW_OPT_LOG_LEVEL]))
		return -1;
	if (o->str[GW_OPT_INITIATOR_NAME] && iscsi_name_check(o->str[GW_OPT_INITIATOR_NAME], nerr, sizeof(nerr))) {
		fprintf(stderr, "iserfuse: %sbad option 'initiator_name=%s': %s (RFC 7143 §4.2.7)\n",
			gw_settings_where(o, GW_OPT_INITIATOR_NAME, where, sizeof(where)), o->str[GW_OPT_INITIATOR_NAME],
			nerr);
		return -1;
	}
	return 0;
}

size_t gw_settings_portals(const struct gw_settings *o, const struct gw_portal **out)
{
	*out = o->portals.portals;
	return o->portals.n;
}

bool gw_settings_multipath(const struct gw_settings *o) { return gw_mpath_on(o->str[GW_OPT_MULTIPATH]); }

bool gw_settings_discover_portals(const struct gw_settings *o)
{
	return gw_mpath_discover_on(o->str[GW_OPT_DISCOVER_PORTALS]);
}

enum path_sel_policy gw_settings_path_sel(const struct gw_settings *o)
{
	return gw_mpath_path_sel(o->str[GW_OPT_PATH_SELECTOR]);
}

void gw_settings_help(void)
{
	usage(stdout);
	fuse_help_but_ours();
}
