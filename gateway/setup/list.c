/* SPDX-License-Identifier: MIT */
/*
 * iserfuse --list iscsi://host[:port][/target-iqn[/lun]]
 *
 * SendTargets discovery on the portal, then for every target: a normal
 * session through the URL's portal (with -o discover_portals=on through
 * every portal the target names instead), REPORT LUNS, a probe of each LUN,
 * one block of text on stdout, and the portals a mount would not use
 * marked so.  Nothing is mounted; no FUSE session is made.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "initiator/lun/alua_query.h"
#include "initiator/scsi/alua.h"
#include "initiator/login/discovery.h"
#include "initiator/iser/iser.h"
#include "initiator/util/defaults.h"
#include "initiator/util/log.h"
#include "initiator/login/login.h"
#include "initiator/net/url.h"
#include "gateway/settings/credentials.h"
#include "gateway/gateway.h"

#define LIST_SCRATCH (64u * 1024u) /* REPORT LUNS reads at most 64 KiB */
#define LIST_QUEUE_DEPTH 4u

/* ?iser: every session of the listing goes over iSER with this context (the scratch pool registered once). */
static struct iser_ctx *list_iser;
/* A LUN in the URL (iscsi://host/iqn/LUN): only that one is listed; -1 for all. */
static int list_lun = -1;

static void note_registration(void *pool)
{
	buf_pool_note_registration(pool);
}

/* "64 MiB", "1.5 GiB", "512 B": binary units, at most one decimal. */
static void human_size(uint64_t bytes, char *out, size_t cap)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	size_t u = 0;
	uint64_t whole = bytes, rest = 0;
	while (whole >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		rest = whole % 1024;
		whole /= 1024;
		u++;
	}
	unsigned tenth = (unsigned)((rest * 10 + 512) / 1024);
	if (tenth == 10) {
		whole++;
		tenth = 0;
	}
	if (tenth)
		snprintf(out, cap, "%llu.%u %s", (unsigned long long)whole, tenth, units[u]);
	else
		snprintf(out, cap, "%llu %s", (unsigned long long)whole, units[u]);
}

/*
 * SCSI commands have no timeout of their own yet: a target that stops
 * answering in the middle of a probe would hang the listing.  Discovery and
 * each portal get an alarm; when it fires, the listing ends with exit 1
 * (stdout is line buffered, so every line printed so far is out).
 */
static char watchdog_msg[ISCSI_NAME_MAX + 128];

static void watchdog(int sig)
{
	(void)sig;
	if (write(2, watchdog_msg, strlen(watchdog_msg)) < 0)
		_exit(1);
	_exit(1);
}

/*
 * What the listing waits for, when stderr is a terminal: one line on
 * stderr, overwritten as the work moves on, erased before any output line.
 */
static bool progress_on, progress_shown;
static char progress_target[ISCSI_NAME_MAX + 32]; /* "[i/n] iqn..." */

static void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void progress(const char *fmt, ...)
{
	va_list ap;
	if (!progress_on)
		return;
	fputs("\r\033[K", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fflush(stderr);
	progress_shown = true;
}

static void progress_clear(void)
{
	if (progress_shown) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
		progress_shown = false;
	}
}

/* printf to stdout, erasing the progress line first. */
static void out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void out(const char *fmt, ...)
{
	va_list ap;
	progress_clear();
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
}

/* Messages may quote what the target sent: keep control characters off the terminal. */
static void printable(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s == 0x7f)
			*s = '?';
}

static void print_lun(const struct iscsi_lun_info *info)
{
	char type[16];
	if (info->inq.qualifier == 0 && info->inq.device_type == 0)
		snprintf(type, sizeof(type), "disk");
	else if (info->inq.qualifier == 0 && info->inq.device_type == 0x0c)
		snprintf(type, sizeof(type), "controller");
	else
		snprintf(type, sizeof(type), "0x%02x", info->inq.device_type);
	out("  Lun %u: type %s, %s %s", info->lun, type, info->inq.vendor[0] ? info->inq.vendor : "-",
	       info->inq.product[0] ? info->inq.product : "-");
	if (info->inq.qualifier == 0 && info->inq.device_type == 0) {
		char hs[32];
		human_size(info->cap.nblocks * (uint64_t)info->cap.block_size, hs, sizeof(hs));
		out(", %llu blocks of %u bytes (%s)", (unsigned long long)info->cap.nblocks, info->cap.block_size,
		       hs);
	}
	out(", id %s\n", info->devid[0] ? info->devid : "-");
}

/*
 * The ALUA state of the portal's target port group for one LUN (REPORT
 * TARGET PORT GROUPS, SPC-4 §6.36): "    ALUA: target port group N,
 * STATE" ("not reported" when the answer does not list it).
 */
static void print_alua(struct iscsi_session *s, const struct iscsi_lun_info *info, void *buf, size_t len)
{
	int state = 0;
	int rc = iscsi_alua_path_state(s, info, buf, len, &state);
	if (rc == -ENOENT)
		out("    ALUA: target port group %u, not reported\n", info->tpg);
	else if (rc)
		out("    ALUA: target port group %u, REPORT TARGET PORT GROUPS failed: %s\n", info->tpg, strerror(-rc));
	else
		out("    ALUA: target port group %u, %s\n", info->tpg, alua_state_name(state));
}

/* Log in to one target through one portal and print its LUNs.  Failures are printed, not returned. */
static void list_portal(const char *target, const struct iscsi_portal *portal, const char *initiator_name,
			const struct iscsi_chap_creds *creds, int timeout_ms, struct buf_pool *pool)
{
	struct iscsi_session_config sc = {
		.transport = &iscsi_tcp_transport,
		.port = portal->port,
		.queue_depth = LIST_QUEUE_DEPTH,
		.timeout_ms = timeout_ms,
	};
	struct iscsi_session *s = NULL;
	struct iscsi_portal shown = *portal;
	char err[512] = "", where[ISCSI_URL_HOST_MAX + 32];
	uint16_t luns[GW_MAX_LUNS];
	size_t nluns = 0;

	snprintf(watchdog_msg, sizeof(watchdog_msg), "iserfuse: %s stopped answering; listing cut short\n", target);
	alarm((unsigned)(2 * timeout_ms / 1000 + 5));
	snprintf(sc.host, sizeof(sc.host), "%s", portal->host);
	snprintf(sc.target_name, sizeof(sc.target_name), "%s", target);
	snprintf(sc.initiator_name, sizeof(sc.initiator_name), "%s", initiator_name);
	iscsi_neg_config_default(&sc.neg);
	sc.chap = *creds;
	if (list_iser) {
		sc.transport = &iscsi_iser_transport;
		sc.transport_ctx = list_iser;
		iser_neg_config(&sc.neg);
	}

	progress("%s: logging in via " ISCSI_HOSTPORT_FMT " ...", progress_target,
		 ISCSI_HOSTPORT_ARGS(portal->host, portal->port));
	int rc = iscsi_session_open(&sc, &s, err, sizeof(err));
	iscsi_chap_creds_wipe(&sc.chap);
	if (rc == 0 && shown.tpgt < 0)
		shown.tpgt = iscsi_session_params(s)->target_portal_group_tag;
	iscsi_portal_format(&shown, where, sizeof(where));
	out("  Portal: %s\n", where);
	if (rc) {
		printable(err);
		out("  Error: %s\n", err[0] ? err : strerror(-rc));
		alarm(0);
		fflush(stdout);
		return;
	}
	void *scratch = buf_pool_get(pool, NULL);
	size_t slen = buf_pool_slice_size(pool);
	progress("%s: REPORT LUNS ...", progress_target);
	rc = iscsi_report_luns(s, scratch, slen, luns, GW_MAX_LUNS, &nluns);
	if (rc) {
		out("  Error: REPORT LUNS failed: %s\n", strerror(-rc));
	} else {
		bool seen = false;
		for (size_t i = 0; i < nluns; i++) {
			struct iscsi_lun_info info;
			if (list_lun >= 0 && luns[i] != list_lun)
				continue;
			seen = true;
			progress("%s: probing LUN %u ...", progress_target, luns[i]);
			rc = iscsi_lun_probe(s, luns[i], scratch, slen, &info);
			if (rc) {
				out("  Lun %u: probe failed: %s\n", luns[i], strerror(-rc));
				continue;
			}
			print_lun(&info);
			if (info.tpgs && info.have_tpg)
				print_alua(s, &info, scratch, slen);
		}
		if (list_lun >= 0 && !seen)
			out("  Lun %d: not reported by the target (REPORT LUNS)\n", list_lun);
	}
	buf_pool_put(pool, scratch);
	iscsi_session_close(s, timeout_ms);
	alarm(0);
	fflush(stdout);
}

/*
 * The portals of target t: with discover_portals every one it reports
 * (iscsi_disc_portals: numeric addresses only), else the URL's (mine; the
 * tag of the reported entry at its address) and the others each on a
 * line saying they are not used.  None reported: the URL's.
 */
static void list_target(const struct iscsi_disc_target *t, const struct iscsi_portal *mine,
			const struct iscsi_portal_addr *mine_addr, bool discover_portals, const char *initiator_name,
			const struct iscsi_chap_creds *creds, int timeout_ms, struct buf_pool *pool)
{
	struct iscsi_portal rep[ISCSI_DISC_MAX_PORTALS];
	struct iscsi_portal_addr addrs[ISCSI_DISC_MAX_PORTALS];
	size_t n = iscsi_disc_portals(t, rep, addrs, ISCSI_DISC_MAX_PORTALS);
	if (discover_portals && n) {
		for (size_t j = 0; j < n; j++)
			list_portal(t->name, &rep[j], initiator_name, creds, timeout_ms, pool);
		return;
	}
	struct iscsi_portal url = *mine;
	for (size_t j = 0; j < n && mine_addr; j++)
		if (iscsi_portal_addr_same(&addrs[j], mine_addr) && url.tpgt < 0)
			url.tpgt = rep[j].tpgt;
	list_portal(t->name, &url, initiator_name, creds, timeout_ms, pool);
	for (size_t j = 0; j < n; j++) {
		char where[ISCSI_URL_HOST_MAX + 32];
		if (mine_addr && iscsi_portal_addr_same(&addrs[j], mine_addr))
			continue;
		iscsi_portal_format(&rep[j], where, sizeof(where));
		out("  Portal: %s (reported by the target; not used: discover_portals=off)\n", where);
	}
}

int gw_list(const char *url_text, const char *url_where, const char *initiator_name_opt, unsigned login_timeout_s,
	    const char *secret_file, const char *secret_where, bool discover_portals)
{
	struct iscsi_url url = {0};
	struct iscsi_discovery_config dc = {.transport = &iscsi_tcp_transport};
	struct iscsi_disc_list list = {0};
	struct buf_pool *pool = NULL;
	struct iscsi_chap_creds creds = {0};
	char err[512] = "";
	int timeout_ms = (int)(login_timeout_s ? login_timeout_s : ISCSI_LOGIN_TIMEOUT_DEFAULT_S) * 1000;
	int rc = 1;

	if (iscsi_url_parse(url_text, false, &url, err, sizeof(err))) {
		fprintf(stderr, "iserfuse: %sbad URL: %s\n", url_where, err);
		goto out;
	}
	if (gw_creds_load(&creds, &url, secret_file, secret_where))
		goto out;
	iscsi_url_wipe(&url); /* keeps host, port and target; the password is gone */
	list_lun = url.lun;
	if (initiator_name_opt)
		snprintf(dc.initiator_name, sizeof(dc.initiator_name), "%s", initiator_name_opt);
	else
		gw_initiator_name_or_warn(dc.initiator_name, sizeof(dc.initiator_name));
	snprintf(dc.host, sizeof(dc.host), "%s", url.host);
	dc.port = url.port;
	dc.timeout_ms = timeout_ms;
	iscsi_neg_config_default(&dc.neg);
	dc.chap = creds;
	int prc = buf_pool_create(&pool, LIST_SCRATCH, 1);
	if (prc) {
		fprintf(stderr, "iserfuse: cannot allocate the buffer pool: %s\n", strerror(-prc));
		goto out;
	}
	if (url.iser) {
		/* SendTargets and every session over iSER (RFC 7145), the pool registered once */
		if (iser_ctx_create(&list_iser, buf_pool_base(pool), buf_pool_len(pool), LIST_QUEUE_DEPTH,
				    note_registration, pool)) {
			fprintf(stderr, "iserfuse: out of memory\n");
			goto out;
		}
		dc.transport = &iscsi_iser_transport;
		dc.transport_ctx = list_iser;
		iser_neg_config(&dc.neg);
	}

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGALRM, watchdog);
	snprintf(watchdog_msg, sizeof(watchdog_msg), "iserfuse: discovery on " ISCSI_HOSTPORT_FMT " did not finish in time\n",
		 ISCSI_HOSTPORT_ARGS(url.host, url.port));
	alarm((unsigned)(4 * timeout_ms / 1000 + 5));
	progress_on = isatty(2);
	progress("discovery on " ISCSI_HOSTPORT_FMT " ...", ISCSI_HOSTPORT_ARGS(url.host, url.port));
	int drc = iscsi_discover(&dc, &list, err, sizeof(err));
	if (drc == -EACCES && dc.chap.user[0]) {
		/* Many targets (tgt among them) authenticate target logins only: the
		 * credentials still serve those. */
		progress_clear();
		log_info("discovery: the CHAP login was refused; trying without CHAP");
		iscsi_chap_creds_wipe(&dc.chap);
		drc = iscsi_discover(&dc, &list, err, sizeof(err));
	}
	iscsi_chap_creds_wipe(&dc.chap);
	alarm(0);
	if (drc) {
		printable(err);
		progress_clear();
		fprintf(stderr, "iserfuse: %s\n", err[0] ? err : strerror(-drc));
		goto out;
	}
	struct iscsi_portal mine = {.port = url.port, .tpgt = -1, .ipv6 = strchr(url.host, ':') != NULL};
	struct iscsi_portal_addr mine_addr;
	bool have_addr = true;
	snprintf(mine.host, sizeof(mine.host), "%s", url.host);
	if (!iscsi_portal_addr_numeric(url.host, url.port, &mine_addr)) /* one spelling: 127.1 is 127.0.0.1 */
		mine.ipv6 = iscsi_portal_addr_host(&mine_addr, mine.host, sizeof(mine.host));
	else /* a name the user gave */
		have_addr = !iscsi_portal_addr_resolve(url.host, url.port, &mine_addr);
	size_t shown = 0;
	for (size_t i = 0; i < list.ntargets; i++) {
		const struct iscsi_disc_target *t = &list.targets[i];
		if (url.target[0] && strcasecmp(url.target, t->name) != 0) /* names compare without case (RFC 7143 §4.2.7.1) */
			continue;
		shown++;
		out("Target: %s\n", t->name);
		snprintf(progress_target, sizeof(progress_target), "[%zu/%zu] %s", i + 1, list.ntargets, t->name);
		fflush(stdout);
		list_target(t, &mine, have_addr ? &mine_addr : NULL, discover_portals, dc.initiator_name, &creds,
			    timeout_ms, pool);
	}
	if (url.target[0] && shown == 0) {
		progress_clear();
		fprintf(stderr, "iserfuse: target %s is not among the %zu target(s) behind " ISCSI_HOSTPORT_FMT "\n",
			url.target, list.ntargets, ISCSI_HOSTPORT_ARGS(url.host, url.port));
		goto out;
	}
	rc = 0;
out:
	progress_clear();
	iser_ctx_destroy(list_iser);
	list_iser = NULL;
	if (pool)
		buf_pool_destroy(pool);
	iscsi_disc_list_free(&list);
	iscsi_url_wipe(&url);
	iscsi_chap_creds_wipe(&creds);
	return rc;
}
