/* SPDX-License-Identifier: MIT */
/* The table of -o options (see options.h). */
#include "options.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "initiator/util/defaults.h"

/* A default as --help shows it: the constant's own digits (defaults.h writes them bare). */
#define DEF_TEXT(n) DEF_TEXT_(n)
#define DEF_TEXT_(n) #n

const struct gw_opt gw_opts[GW_OPT_COUNT] = {
	[GW_OPT_CONFIG] = {"config", GW_OPT_STR, "PATH", 0, "/etc/iserfuse.conf, if present", 0, 0, 0, 0,
			   "configuration file"},
	[GW_OPT_INITIATOR_NAME] = {"initiator_name", GW_OPT_STR, "IQN", 0,
				   "generated once per host for root, once per user for others, and kept", 0, 0, 0, 0,
				   "initiator name"},
	[GW_OPT_RO] = {"ro", GW_OPT_FLAG, NULL, 0, "off", 0, 0, 0, 1, "read-only mount, EROFS on write (a later rw undoes it)"},
	[GW_OPT_QUEUE_DEPTH] = {"queue_depth", GW_OPT_INT, "N", ISCSI_QUEUE_DEPTH_DEFAULT, DEF_TEXT(ISCSI_QUEUE_DEPTH_DEFAULT), 1,
				ISCSI_QUEUE_DEPTH_MAX, 0, 0,
				"most SCSI commands outstanding"},
	[GW_OPT_MAX_IO_KIB] = {"max_io_kib", GW_OPT_INT, "N", 512, "512", 4, 4096, 4, 0,
			       "largest FUSE read/write in KiB, a multiple of 4\n"
			       "(at most what the kernel allows: /proc/sys/fs/fuse/max_pages_limit pages)"},
	[GW_OPT_POOL_SLICES] = {"pool_slices", GW_OPT_INT, "N", 0, "queue_depth", 2, 4096, 0, 0,
				"payload buffers in the pool (at most queue_depth are used)"},
	[GW_OPT_LOGIN_TIMEOUT] = {"login_timeout", GW_OPT_INT, "S", ISCSI_LOGIN_TIMEOUT_DEFAULT_S,
				  DEF_TEXT(ISCSI_LOGIN_TIMEOUT_DEFAULT_S), 1, 3600, 0, 0,
				  "connect and login timeout in seconds"},
	[GW_OPT_CMD_TIMEOUT] = {"cmd_timeout", GW_OPT_INT, "S", ISCSI_CMD_TIMEOUT_DEFAULT_S,
				DEF_TEXT(ISCSI_CMD_TIMEOUT_DEFAULT_S), 0, 86400, 0, 0,
				"a command unanswered this long is aborted and re-issued (0 = never)"},
	[GW_OPT_NOOP_INTERVAL] = {"noop_interval", GW_OPT_INT, "S", ISCSI_NOOP_INTERVAL_DEFAULT_S,
				  DEF_TEXT(ISCSI_NOOP_INTERVAL_DEFAULT_S), 0, 3600, 0, 0,
				  "NOP-Out ping after S idle seconds (0 = off)"},
	[GW_OPT_NOOP_TIMEOUT] = {"noop_timeout", GW_OPT_INT, "S", ISCSI_NOOP_TIMEOUT_DEFAULT_S,
				 DEF_TEXT(ISCSI_NOOP_TIMEOUT_DEFAULT_S), 1, 3600, 0, 0,
				 "no answer S seconds after a ping drops the connection"},
	[GW_OPT_HEADER_DIGEST] = {"header_digest", GW_OPT_STR, "D", 0, "none", 0, 0, 0, 0,
				  "CRC32C header digests: none, crc32c (required) or auto"},
	[GW_OPT_DATA_DIGEST] = {"data_digest", GW_OPT_STR, "D", 0, "none", 0, 0, 0, 0,
				"CRC32C data digests: none, crc32c (required) or auto"},
	[GW_OPT_SECRET_FILE] = {"secret_file", GW_OPT_STR, "PATH", 0, "none", 0, 0, 0, 0,
				"CHAP credentials: 'key = value' lines: username, password,\n"
				"mutual_username, mutual_password (mode 0600 or stricter)"},
	[GW_OPT_REPLACEMENT_TIMEOUT] = {"replacement_timeout", GW_OPT_INT, "S", ISCSI_REPLACEMENT_TIMEOUT_DEFAULT_S,
					DEF_TEXT(ISCSI_REPLACEMENT_TIMEOUT_DEFAULT_S), 0, 86400, 0, 0,
					"after a connection loss, I/O still pending S seconds later fails\n"
					"with EIO, and new I/O too until the target is back"},
	[GW_OPT_RESCAN_INTERVAL] = {"rescan_interval", GW_OPT_INT, "S", 5, "5", 0, 86400, 0, 0,
				    "READ CAPACITY and REPORT LUNS every S seconds: sizes follow the\n"
				    "target, LUN files come and go (0 = only on UNIT ATTENTION)"},
	[GW_OPT_LOG_LEVEL] = {"log_level", GW_OPT_STR, "L", 0, "warn", 0, 0, 0, 0,
			      "error, warn, info or debug (-d: debug)"},
	[GW_OPT_LOG_FILE] = {"log_file", GW_OPT_STR, "PATH", 0, "the journal, else syslog", 0, 0, 0, 0,
			     "in the background, append messages to PATH"},
	[GW_OPT_TRANSPORT] = {"transport", GW_OPT_STR, "T", 0, "auto", 0, 0, 0, 0,
			      "auto (iSER when an RDMA device is on the route, else TCP),\n"
			      "iser (never falls back; also ?iser in the URL) or tcp"},
	[GW_OPT_CACHE_SIZE] = {"cache_size", GW_OPT_SIZE, "N", 64ll << 20, "64M", 0, 1ll << 40, 0, 0,
			       "block cache size in bytes, K/M/G suffixes (0 = no cache)"},
	[GW_OPT_WRITEBACK] = {"writeback", GW_OPT_FLAG, NULL, 0, "off", 0, 0, 0, 0,
			      "keep written blocks in the cache until fsync, close or memory pressure"},
	[GW_OPT_UMASK] = {"umask", GW_OPT_OCTAL, "NNN", 077, "077", 0, 0777, 0, 0,
			  "permission bits to clear (octal; 077: files 0600, directory 0700)"},
	[GW_OPT_MAX_THREADS] = {"max_threads", GW_OPT_INT, "N", 256, "256", 1, 4096, 0, 0,
				"most FUSE reader threads: one per two CPUs (at least 1), and stand-ins\n"
				"while they all wait for free buffers or command slots (-s: one)"},
	[GW_OPT_IO_THREADS] = {"io_threads", GW_OPT_INT, "N", 1, "1", 0, 1, 0, 0,
			       "event threads that also read /dev/fuse and run READ and WRITE to\n"
			       "completion: 1, the first connection's; 0: the FUSE readers read all"},
	[GW_OPT_ALLOW_OTHER] = {"allow_other", GW_OPT_FLAG, NULL, 0, "off", 0, 0, 0, 1,
				"let other users use the mount (needs user_allow_other)"},
	[GW_OPT_MULTIPATH] = {"multipath", GW_OPT_STR, "on|off", 0, "on", 0, 0, 0, 0,
			      "on: every path to the LUN (the URL's portal, portal=, with\n"
			      "discover_portals=on the target's) carries I/O; off: the URL's portal only"},
	[GW_OPT_PORTAL] = {"portal", GW_OPT_STR, "HOST[:PORT]", 0, "none", 0, 0, 0, 0,
			   "one more portal to the target, repeatable, at most 8\n"
			   "([v6-address]:port; port 3260 if none)"},
	[GW_OPT_DISCOVER_PORTALS] = {"discover_portals", GW_OPT_STR, "on|off", 0, "off", 0, 0, 0, 0,
				     "on: also the portals the target reports (SendTargets), numeric\n"
				     "addresses only; they get the CHAP credentials too"},
	[GW_OPT_ACCEPT_UNLISTED_PORTALS] = {"accept_unlisted_portals", GW_OPT_FLAG, NULL, 0, "off", 0, 0, 0, 0,
					    "use a portal= portal that the URL portal's SendTargets does not\n"
					    "list even when the LUN's identity is not globally unique"},
	[GW_OPT_SESSIONS] = {"sessions", GW_OPT_INT, "N", 1, "1", 1, 8, 0, 0,
			     "sessions (paths) per portal"},
	[GW_OPT_PATH_SELECTOR] = {"path_selector", GW_OPT_STR, "P", 0, "least-outstanding", 0, 0, 0, 0,
				  "the path of each command: least-outstanding (fewest in flight)\n"
				  "or round-robin"},
	[GW_OPT_IO_URING] = {"io_uring", GW_OPT_STR, "MODE", 0, "auto", 0, 0, 0, 0,
			     "FUSE requests over io_uring: auto (where the kernel offers it, else\n"
			     "/dev/fuse), on (or no mount) or off"},
	[GW_OPT_EVENT_LOOP] = {"event_loop", GW_OPT_STR, "L", 0, "uring", 0, 0, 0, 0,
			       "how each iSCSI/TCP connection's thread waits: uring (io_uring: a wait,\n"
			       "the send and the receive in one system call; poll where the kernel\n"
			       "refuses a ring) or poll"},
};

/* The order of --help (and of the man page's OPTIONS). */
static const enum gw_opt_id help_order[] = {
	GW_OPT_CONFIG, GW_OPT_INITIATOR_NAME, GW_OPT_RO, GW_OPT_QUEUE_DEPTH, GW_OPT_MAX_IO_KIB,
	GW_OPT_POOL_SLICES, GW_OPT_LOGIN_TIMEOUT, GW_OPT_CMD_TIMEOUT, GW_OPT_NOOP_INTERVAL,
	GW_OPT_NOOP_TIMEOUT, GW_OPT_REPLACEMENT_TIMEOUT, GW_OPT_RESCAN_INTERVAL, GW_OPT_CACHE_SIZE,
	GW_OPT_WRITEBACK, GW_OPT_HEADER_DIGEST, GW_OPT_DATA_DIGEST, GW_OPT_TRANSPORT, GW_OPT_MULTIPATH, GW_OPT_PORTAL,
	GW_OPT_DISCOVER_PORTALS, GW_OPT_ACCEPT_UNLISTED_PORTALS, GW_OPT_SESSIONS, GW_OPT_PATH_SELECTOR,
	GW_OPT_SECRET_FILE,
	GW_OPT_LOG_LEVEL, GW_OPT_LOG_FILE, GW_OPT_IO_THREADS, GW_OPT_MAX_THREADS, GW_OPT_IO_URING, GW_OPT_EVENT_LOOP, GW_OPT_UMASK, GW_OPT_ALLOW_OTHER,
};
_Static_assert(sizeof(help_order) / sizeof(help_order[0]) == GW_OPT_COUNT, "every option in --help");

/* A numeric value as the user writes it: 0777 for octal, 64M / 1024G for sizes. */
static void format_num(const struct gw_opt *o, long long v, char *out, size_t cap)
{
	if (o->kind == GW_OPT_OCTAL && v) {
		snprintf(out, cap, "0%llo", v);
	} else if (o->kind == GW_OPT_SIZE && v && v % (1ll << 30) == 0) {
		snprintf(out, cap, "%lldG", v >> 30);
	} else if (o->kind == GW_OPT_SIZE && v && v % (1ll << 20) == 0) {
		snprintf(out, cap, "%lldM", v >> 20);
	} else {
		snprintf(out, cap, "%lld", v);
	}
}

static void format_range(const struct gw_opt *o, char *out, size_t cap)
{
	char lo[32], hi[32];
	format_num(o, o->min, lo, sizeof(lo));
	format_num(o, o->max, hi, sizeof(hi));
	snprintf(out, cap, "%s..%s", lo, hi);
}

int gw_opt_parse_num(enum gw_opt_id id, const char *text, long long *out, char *err, size_t cap)
{
	const struct gw_opt *o = &gw_opts[id];
	char range[80], what[64];
	char *end = NULL;
	int rc = 0;

	format_range(o, range, sizeof(range));
	snprintf(what, sizeof(what), "%s", o->kind == GW_OPT_OCTAL ? "an octal mask" :
					   o->kind == GW_OPT_SIZE ? "a size in bytes (K, M, G suffixes)" :
					   o->step > 1 ? "a multiple of 4" : "an integer");
	if (o->step > 1)
		snprintf(what, sizeof(what), "a multiple of %lld", o->step);
	errno = 0;
	/* strtoll takes leading blanks and signs: only digits are a value */
	long long v = (text[0] >= '0' && text[0] <= '9') ? strtoll(text, &end, o->kind == GW_OPT_OCTAL ? 8 : 10) : 0;
	if (!end || end == text) {
		rc = -EINVAL;
	} else if (errno == ERANGE) {
		rc = -ERANGE;
	} else {
		unsigned shift = 0;
		if (o->kind == GW_OPT_SIZE) {
			switch (*end) {
			case 'k': case 'K': shift = 10; end++; break;
			case 'm': case 'M': shift = 20; end++; break;
			case 'g': case 'G': shift = 30; end++; break;
			default: break;
			}
		}
		if (*end)
			rc = -EINVAL;
		else if (v > (o->max >> shift) || (v << shift) < o->min)
			rc = -ERANGE;
		else if (o->step > 1 && v % o->step)
			rc = -EINVAL;
		else
			*out = v << shift;
	}
	if (rc)
		snprintf(err, cap, "bad option '%s=%s': %s in %s expected", o->key, text, what, range);
	return rc;
}

int gw_opt_find(const char *arg)
{
	size_t n = strcspn(arg, "= \t\n");
	for (int i = 0; i < GW_OPT_COUNT; i++)
		if (strlen(gw_opts[i].key) == n && !strncmp(gw_opts[i].key, arg, n))
			return i;
	return -1;
}

void gw_opts_help(FILE *f)
{
	for (size_t i = 0; i < sizeof(help_order) / sizeof(help_order[0]); i++) {
		const struct gw_opt *o = &gw_opts[help_order[i]];
		char left[64], range[80] = "";
		snprintf(left, sizeof(left), "-o %s%s%s", o->key, o->arg ? "=" : "", o->arg ? o->arg : "");
		if (o->kind != GW_OPT_STR && o->kind != GW_OPT_FLAG) {
			format_range(o, range + 2, sizeof(range) - 2);
			memcpy(range, ", ", 2);
		}
		/* the help text's lines, the last one followed by "(default D, MIN..MAX)" */
		const char *h = o->help;
		for (bool first = true;; first = false) {
			size_t n = strcspn(h, "\n");
			fprintf(f, "    %-24s %.*s", first ? left : "", (int)n, h);
			h += n;
			if (!*h)
				break;
			fputc('\n', f);
			h++;
		}
		fprintf(f, " (default %s%s)\n", o->def_text, range);
	}
}
