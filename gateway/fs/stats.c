/* SPDX-License-Identifier: MIT */
/*
 * MOUNTPOINT/.stats: one "key value" line per counter, generated when the
 * file is opened (one snapshot per open file, so a reader never sees a mix
 * of two moments), read-only, direct_io and not seekable.  Like a /proc
 * file it has size 0 (extras.c's attributes render nothing): readers read
 * until EOF.  To add
 * a counter: a field in struct snap, a line in rows[], and where it is
 * filled in take_snapshot.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "initiator/transport/transport.h"
#include "gateway/fuse/fuse_io.h"
#include "gateway/fuse/fuse_uring.h"
#include "gateway/gateway.h"
#include "gateway/handover/lifestate.h"
#include "gateway/life/paths.h"
#include "gateway/life/rescan.h"
#include "initiator/mpath/mpath.h"

struct snap {
	uint64_t mr_registrations, payload_bytes_copied, rmw_bytes_copied;
	uint64_t commands, bytes_read, bytes_written;
	uint64_t queue_depth, queue_depth_max;
	uint64_t pool_bytes, pool_slices, pool_in_use, pool_in_use_max;
	uint64_t latency_p50_us, latency_p90_us, latency_p99_us;
	uint64_t reconnects;
	uint64_t tx_direct, tx_kicks, event_wakeups;
	uint64_t luns;
	uint64_t cache_bytes, cache_hits, cache_misses, cache_readahead_bytes, cache_readahead_used_bytes;
	uint64_t cache_readahead_wasted_bytes, cache_dirty_blocks, cache_writeback_blocks, cache_bytes_copied;
	uint64_t scsi_retries, unit_attentions, rescans, capacity_changes;
	uint64_t fuse_ring_requests;
};

static const struct {
	const char *key;
	size_t off;
} rows[] = {
#define ROW(f) {#f, offsetof(struct snap, f)}
	ROW(mr_registrations),
	ROW(payload_bytes_copied),
	ROW(rmw_bytes_copied),
	ROW(commands),
	ROW(bytes_read),
	ROW(bytes_written),
	ROW(queue_depth),
	ROW(queue_depth_max),
	ROW(pool_bytes),
	ROW(pool_slices),
	ROW(pool_in_use),
	ROW(pool_in_use_max),
	ROW(latency_p50_us),
	ROW(latency_p90_us),
	ROW(latency_p99_us),
	ROW(reconnects),
	ROW(tx_direct),
	ROW(tx_kicks),
	ROW(event_wakeups),
	ROW(luns),
	ROW(cache_bytes),
	ROW(cache_hits),
	ROW(cache_misses),
	ROW(cache_readahead_bytes),
	ROW(cache_readahead_used_bytes),
	ROW(cache_readahead_wasted_bytes),
	ROW(cache_dirty_blocks),
	ROW(cache_writeback_blocks),
	ROW(cache_bytes_copied),
	ROW(scsi_retries),
	ROW(unit_attentions),
	ROW(rescans),
	ROW(capacity_changes),
	ROW(fuse_ring_requests),
#undef ROW
};

static void take_snapshot(struct gw *g, struct snap *n)
{
	struct iscsi_session_stats ss;
	uint64_t lat[LAT_BUCKETS];

	memset(n, 0, sizeof(*n));
	gw_sess_stats(g, &ss);
	gw_sess_latency(g, lat);
	n->mr_registrations = buf_pool_registrations(g->pool);
	n->payload_bytes_copied = ss.payload_bytes_copied +
				  atomic_load_explicit(&g->payload_copied, memory_order_relaxed);
	for (size_t i = 0, nl = gw_nluns(g); i < nl; i++)
		n->rmw_bytes_copied += atomic_load_explicit(&g->luns[i].dev.rmw_bytes_copied, memory_order_relaxed);
	n->commands = ss.commands;
	n->bytes_read = ss.bytes_read;
	n->bytes_written = ss.bytes_written;
	n->queue_depth = ss.outstanding;
	n->queue_depth_max = ss.max_outstanding;
	n->pool_bytes = buf_pool_len(g->pool);
	n->pool_slices = buf_pool_nslices(g->pool);
	n->pool_in_use = buf_pool_in_use(g->pool);
	n->pool_in_use_max = buf_pool_max_in_use(g->pool);
	n->latency_p50_us = lat_hist_percentile(lat, 50);
	n->latency_p90_us = lat_hist_percentile(lat, 90);
	n->latency_p99_us = lat_hist_percentile(lat, 99);
	n->reconnects = ss.reconnects;
	n->tx_direct = ss.tx_direct;
	n->tx_kicks = ss.tx_kicks;
	n->event_wakeups = ss.event_wakeups;
	n->luns = gw_nluns(g);
	if (g->cache) {
		struct bcache_stats cs;
		bcache_get_stats(g->cache, &cs);
		n->cache_bytes = cs.blocks * cs.block_size;
		n->cache_hits = cs.hits;
		n->cache_misses = cs.misses;
		n->cache_readahead_bytes = cs.ra_bytes;
		n->cache_readahead_used_bytes = cs.ra_used_bytes;
		n->cache_readahead_wasted_bytes = cs.ra_wasted_bytes;
		n->cache_dirty_blocks = cs.dirty_blocks;
		n->cache_writeback_blocks = cs.writeback_blocks;
		n->cache_bytes_copied = cs.copied_bytes;
	}
	struct blk_retry_stats rs;
	blk_retry_get_stats(g->retry, &rs);
	n->scsi_retries = rs.retried;
	n->unit_attentions = rs.unit_attentions;
	struct gw_rescan_stats rr;
	gw_rescan_get_stats(g, &rr);
	n->rescans = rr.rescans;
	n->capacity_changes = rr.capacity_changes;
	n->fuse_ring_requests = gw_fuse_uring_requests(g->uring);
}

/*
 * The multipath lines: paths, paths_up, paths_refused, failovers, then one
 * "pathN HOST:PORT TRANSPORT up|down ALUA commands=.. errors=..
 * failovers=.. p50_us=.. p99_us=.." per attached path.  With
 * -o multipath=off: the one session, as path0.
 */
static void render_paths(struct gw *g, FILE *f)
{
	struct mpath_stats st = {0};
	struct mpath_path_info pi[MPATH_MAX_PATHS];
	size_t n = 0;
	if (g->mp) {
		n = mpath_get_stats(g->mp, &st, pi, MPATH_MAX_PATHS);
	} else if (g->s) { /* multipath=off: the one session */
		n = st.paths = 1;
		memset(&pi[0], 0, sizeof(pi[0]));
		snprintf(pi[0].host, sizeof(pi[0].host), "%s", g->portal_host);
		pi[0].port = g->portal_port;
		pi[0].transport = g->transport ? g->transport : "tcp";
		pi[0].up = iscsi_session_up(g->s);
		st.paths_up = pi[0].up;
		pi[0].alua_state = 0x100;
		struct iscsi_session_stats ss;
		uint64_t lat[LAT_BUCKETS];
		iscsi_session_get_stats(g->s, &ss);
		iscsi_session_get_latency(g->s, lat);
		pi[0].commands = ss.commands;
		pi[0].p50_us = lat_hist_percentile(lat, 50);
		pi[0].p99_us = lat_hist_percentile(lat, 99);
	}
	fprintf(f, "paths %zu\npaths_up %zu\npaths_refused %zu\nfailovers %llu\n", st.paths, st.paths_up,
		st.paths_refused, (unsigned long long)st.failovers);
	for (size_t i = 0; i < n; i++) {
		const struct mpath_path_info *p = &pi[i];
		fprintf(f, "path%zu " ISCSI_HOSTPORT_FMT " %s", i, ISCSI_HOSTPORT_ARGS(p->host, p->port), p->transport);
		fprintf(f, " %s %s commands=%llu errors=%llu failovers=%llu p50_us=%llu p99_us=%llu\n",
			p->up ? "up" : "down", mpath_alua_name(p->alua_state), (unsigned long long)p->commands,
			(unsigned long long)p->errors, (unsigned long long)p->failovers, (unsigned long long)p->p50_us,
			(unsigned long long)p->p99_us);
	}
}

int gw_stats_render(struct gw *g, char **out, size_t *len)
{
	struct snap n;
	char *buf = NULL;
	size_t cap = 0;
	FILE *f = open_memstream(&buf, &cap);
	if (!f)
		return -ENOMEM;
	take_snapshot(g, &n);
	fprintf(f, "transport %s\n", g->transport ? g->transport : "tcp");
	fprintf(f, "fuse_path %s\n", gw_fuse_uring_path(g->uring));
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		fprintf(f, "%s %llu\n", rows[i].key, (unsigned long long)*(const uint64_t *)((const char *)&n + rows[i].off));
	uint64_t io_fast = 0, io_handed = 0;
	if (g->io)
		gw_io_counts(g->io, &io_fast, &io_handed);
	fprintf(f, "io_thread_requests %llu\nio_thread_handed_off %llu\n", (unsigned long long)io_fast,
		(unsigned long long)io_handed);
	unsigned ring_threads, ring_parked;
	gw_fuse_uring_threads(g->uring, &ring_threads, &ring_parked);
	fprintf(f, "fuse_ring_threads %u\nfuse_ring_threads_parked %u\n", ring_threads, ring_parked);
	unsigned loops_ring = 0, loops_poll = 0;
	iscsi_tcp_loops(&loops_ring, &loops_poll);
	fprintf(f, "tcp_loops_uring %u\ntcp_loops_poll %u\n", loops_ring, loops_poll);
	const struct gw_life_state *st = gw_life.st; /* workers replaced, requests the kernel resent (supervisor.h) */
	fprintf(f, "worker_restarts %llu\nrequests_resent %llu\n", st ? (unsigned long long)atomic_load(&st->restarts) : 0ull,
		st ? (unsigned long long)atomic_load(&st->resent) : 0ull);
	render_paths(g, f);
	if (fclose(f) || !buf) {
		free(buf);
		return -ENOMEM;
	}
	*out = buf;
	*len = strlen(buf);
	return 0;
}

/*
 * One open .stats: its snapshot.  The kernel may send RELEASE as soon as a
 * read's reply reached the reader, while the thread that replied is still
 * in fuse_reply_buf: a reference per reply in progress keeps the text
 * alive until both are done.
 */
struct stats_file {
	atomic_uint refs;
	size_t len;
	char *text;
	struct stats_file *prev, *next; /* on open_list until its release (open_lock) */
};

/* The open snapshots, freed at the stop when no RELEASE came (a worker that ends with one open). */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static struct stats_file *open_list;

static void stats_file_put(struct stats_file *sf)
{
	if (atomic_fetch_sub(&sf->refs, 1) == 1) {
		free(sf->text);
		free(sf);
	}
}

static void open_list_remove(struct stats_file *sf)
{
	pthread_mutex_lock(&open_lock);
	if (sf->prev)
		sf->prev->next = sf->next;
	else
		open_list = sf->next;
	if (sf->next)
		sf->next->prev = sf->prev;
	pthread_mutex_unlock(&open_lock);
}

void gw_stats_free_all(void)
{
	pthread_mutex_lock(&open_lock);
	struct stats_file *sf = open_list;
	open_list = NULL;
	pthread_mutex_unlock(&open_lock);
	while (sf) {
		struct stats_file *next = sf->next;
		stats_file_put(sf);
		sf = next;
	}
}

void gw_stats_open(fuse_req_t req, struct fuse_file_info *fi)
{
	struct stats_file *sf = calloc(1, sizeof(*sf));
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		free(sf);
		fuse_reply_err(req, EACCES);
		return;
	}
	if (!sf || gw_stats_render(fuse_req_userdata(req), &sf->text, &sf->len)) {
		free(sf);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	atomic_init(&sf->refs, 1); /* the open file's */
	pthread_mutex_lock(&open_lock);
	sf->next = open_list;
	if (open_list)
		open_list->prev = sf;
	open_list = sf;
	pthread_mutex_unlock(&open_lock);
	fi->fh = gw_fh_make(sf);
	fi->direct_io = 1; /* the size changes between snapshots: read until EOF */
	fi->nonseekable = 1; /* no pread, so sendfile(2) falls back to read(2) rather than seeing size 0 as EOF */
	fi->keep_cache = 0;
	fuse_reply_open(req, fi);
}

void gw_stats_read(fuse_req_t req, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct stats_file *sf = gw_fh_ptr(fi->fh);
	if (!sf) { /* opened by an earlier worker: its snapshot went with it */
		fuse_reply_err(req, EIO);
		return;
	}
	if (off < 0 || (uint64_t)off >= sf->len) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > sf->len - (size_t)off)
		size = sf->len - (size_t)off;
	atomic_fetch_add(&sf->refs, 1);
	fuse_reply_buf(req, sf->text + off, size);
	stats_file_put(sf);
}

void gw_stats_release(fuse_req_t req, struct fuse_file_info *fi)
{
	struct stats_file *sf = gw_fh_ptr(fi->fh);
	if (sf) {
		open_list_remove(sf);
		stats_file_put(sf);
	}
	fuse_reply_err(req, 0);
}

void gw_stats_lseek(fuse_req_t req, off_t off, int whence, struct fuse_file_info *fi)
{
	const struct stats_file *sf = gw_fh_ptr(fi->fh);
	if (!sf || off < 0 || (uint64_t)off >= sf->len) {
		fuse_reply_err(req, ENXIO);
		return;
	}
	fuse_reply_lseek(req, whence == SEEK_HOLE ? (off_t)sf->len : off); /* all data, then the end */
}
