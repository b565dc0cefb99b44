/* SPDX-License-Identifier: MIT */
/*
 * Target events reach the files: a thread that re-reads what the target
 * offers (READ CAPACITY, SBC-3 §5.15/§5.16; REPORT LUNS, SPC-4 §6.33)
 * every rescan_interval seconds and whenever a UNIT ATTENTION asks for it
 * (SPC-4 §5.14: CAPACITY DATA HAS CHANGED 2Ah/09h, REPORTED LUNS DATA HAS
 * CHANGED 3Fh/0Eh, power on / reset 29h/xx, ...), then updates the LUN
 * table and tells the kernel (fuse_lowlevel_notify_inval_inode for a new
 * size, fuse_lowlevel_notify_inval_entry for a name that came or went).
 *
 * Once mounted, only this thread fills slots of the LUN table
 * (gw_lun_add, gateway/luns/lun_table.c) and adds by-id/ links
 * (gw_byid_add_lun, gateway/luns/byid_links.c).  A slot is never freed: a
 * LUN the target stops reporting is marked gone (its open files get
 * ENODEV, its commands in flight complete), and comes back in the same
 * slot when the target reports it again with the same block size.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/blkio/discard.h"
#include "initiator/util/clock.h"
#include "initiator/util/log.h"
#include "initiator/util/thread.h"
#include "gateway/gateway.h"
#include "gateway/luns/lun_select.h"
#include "gateway/handover/lifestate.h"
#include "paths.h"
#include "rescan.h"

struct gw_rescan {
	struct gw *g;
	pthread_t thread;
	pthread_mutex_t lock;  /* guards pending, stop */
	pthread_cond_t cv;     /* CLOCK_MONOTONIC */
	unsigned pending;      /* SCSI_UA_* bits not yet acted on */
	bool stop;
	unsigned interval_s;
	atomic_uint_fast64_t rescans, prompted, capacity_changes, luns_added, luns_removed;
};


/*
 * Wait about ms on the rescan thread (less if stopping): a LUN that looks
 * gone or changed is looked at once more before its file goes, so that a
 * target being restarted or reconfigured (a LUN missing for a moment)
 * does not take files away from their users.  Returns false when stopping.
 */
#define CONFIRM_MS 1500
static bool pause_ms(struct gw_rescan *r, unsigned ms)
{
	uint64_t until = blk_now_ms() + ms;
	struct timespec ts = {.tv_sec = (time_t)(until / 1000u), .tv_nsec = (long)(until % 1000u) * 1000000L};
	pthread_mutex_lock(&r->lock);
	while (!r->stop && pthread_cond_timedwait(&r->cv, &r->lock, &ts) == 0)
		;
	bool go_on = !r->stop;
	pthread_mutex_unlock(&r->lock);
	return go_on;
}

/* ---- prompting: the UNIT ATTENTION hook ---- */

static void prompt(struct gw_rescan *r, unsigned ev)
{
	if (!ev)
		return;
	pthread_mutex_lock(&r->lock);
	r->pending |= ev;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->lock);
}

/*
 * The LU's data may have changed behind us (SCSI_UA_MEDIUM: medium may have
 * changed, power on or reset, capacity changed; SCSI_UA_LUNS: a LUN may
 * have been re-created under its number, so every LUN): the block cache
 * forgets the clean blocks at once, so that the command the UNIT ATTENTION
 * came with, retried, and every later read see the LU's data; the kernel's
 * pages are invalidated by the rescan thread (pages_stale), since the
 * event thread must not wait for the kernel.  Returns the bits to prompt.
 */
static unsigned drop_cached(struct gw *g, uint64_t lun_field, unsigned events)
{
	if (!(events & (SCSI_UA_MEDIUM | SCSI_UA_LUNS)))
		return events;
	bool dropped = false;
	for (size_t i = 0, n = gw_nluns(g); i < n; i++) {
		struct gw_lun *l = &g->luns[i];
		if (!(events & SCSI_UA_LUNS) && l->dev.lun_field != lun_field)
			continue;
		bcache_dev_drop_clean(l->cdev);
		atomic_store_explicit(&l->pages_stale, true, memory_order_release);
		dropped = true;
	}
	return dropped ? events | SCSI_UA_MEDIUM : events & ~(unsigned)SCSI_UA_MEDIUM;
}

/* blk_ua_fn: on the event thread; drops cached data, sets bits. */
static void ua_hook(void *arg, uint64_t lun_field, unsigned events, const struct scsi_sense *sense)
{
	struct gw_rescan *r = arg;
	events = drop_cached(r->g, lun_field, events);
	int lun = scsi_lun_decode(lun_field);
	char name[32];
	if (lun >= 0)
		snprintf(name, sizeof(name), "lun%d", lun);
	else
		snprintf(name, sizeof(name), "LUN field 0x%016llx", (unsigned long long)lun_field);
	log_info("%s: UNIT ATTENTION %02xh/%02xh%s%s", name, sense->asc, sense->ascq,
		 events & SCSI_UA_MEDIUM ? ", cached data dropped" : "", events ? ", rescanning" : "");
	prompt(r, events);
}

/* ---- one round ---- */

static void notify_entry(struct gw *g, const char *name)
{
	if (g->se)
		fuse_lowlevel_notify_inval_entry(g->se, FUSE_ROOT_ID, name, strlen(name));
}

static void notify_inode(struct gw *g, fuse_ino_t ino)
{
	if (g->se)
		fuse_lowlevel_notify_inval_inode(g->se, ino, 0, 0); /* attributes and every cached page */
}

/* Write l's dirty cache blocks back and wait (up to 30 s): before its size changes. */
struct flush_wait {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	bool done;
	int err;
};

static void flush_waited(void *arg, int err, const void *data, size_t len)
{
	struct flush_wait *w = arg;
	(void)data;
	(void)len;
	pthread_mutex_lock(&w->lock);
	w->done = true;
	w->err = err;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->lock);
}

static void flush_cache(struct gw_lun *l)
{
	if (!l->cdev)
		return;
	struct flush_wait w = {.lock = PTHREAD_MUTEX_INITIALIZER};
	clk_cond_init(&w.cv);
	if (bcache_flush(l->cdev, flush_waited, &w)) {
		pthread_cond_destroy(&w.cv);
		return;
	}
	struct timespec until = clk_deadline_ms(30000);
	pthread_mutex_lock(&w.lock);
	while (!w.done)
		if (pthread_cond_timedwait(&w.cv, &w.lock, &until)) {
			/* the callback still needs w: wait for it without a limit (the
			 * command deadline and replacement_timeout bound it) */
			log_warn("%s: cache write-back before a capacity change is slow", l->name);
			while (!w.done)
				pthread_cond_wait(&w.cv, &w.lock);
		}
	pthread_mutex_unlock(&w.lock);
	pthread_cond_destroy(&w.cv);
	if (w.err)
		log_warn("%s: cache write-back before a capacity change failed: %s", l->name, strerror(-w.err));
}

static void mark_gone(struct gw_rescan *r, struct gw_lun *l, const char *why)
{
	uint64_t lost = bcache_dev_invalidate(l->cdev, 0);
	if (lost) {
		atomic_store(&l->dev.dirty, true); /* fsync and close report ENODEV: the data never reached the LUN */
		log_err("%s: %llu bytes written to the cache are lost with the LUN", l->name, (unsigned long long)lost);
	}
	atomic_store_explicit(&l->gone, true, memory_order_release);
	atomic_fetch_add(&r->luns_removed, 1);
	log_warn("%s: %s; the file is removed", l->name, why);
	notify_entry(r->g, l->name);
	notify_inode(r->g, l->ino);
}

/* The rescan's LUN selection: probes on the session; a failed probe is logged, the other reasons are not. */
struct add_ctx {
	struct gw *g;
	void *buf;
	size_t buflen;
};

static int add_probe(void *arg, uint16_t lun, struct iscsi_lun_info *out)
{
	struct add_ctx *c = arg;
	struct gw_own_ua o = {c->g, scsi_lun_encode(lun)};
	return iscsi_lun_probe_ua(gw_ctl(c->g), lun, c->buf, c->buflen, out, gw_own_ua, &o);
}

static int add_skipped(void *arg, uint16_t lun, const struct iscsi_lun_info *info, enum gw_lun_verdict v, int probe_err)
{
	(void)arg;
	char why[128];
	if (v == GW_LUN_PROBE_FAILED)
		log_warn("lun%u: probe failed (%s)", lun, gw_lun_probe_why(probe_err, info, why, sizeof(why)));
	return 0;
}

/* Files for those of luns[0..n) that gw_lun_select keeps (new LUNs, or LUNs back). */
static void add_luns(struct gw_rescan *r, const uint16_t *luns, size_t n, void *buf, size_t buflen)
{
	struct gw *g = r->g;
	if (n == 0)
		return;
	struct iscsi_lun_info *infos = calloc(n, sizeof(*infos));
	if (!infos) {
		log_warn("rescan: out of memory for %zu new LUNs", n);
		return;
	}
	struct add_ctx ctx = {g, buf, buflen};
	struct gw_lun_select_ops ops = {add_probe, add_skipped, &ctx};
	ssize_t kept = gw_lun_select(luns, n, &ops, infos, n);
	for (ssize_t i = 0; i < kept; i++) {
		const struct iscsi_lun_info *info = &infos[i];
		struct gw_lun *l = gw_lun_add(g, info);
		if (!l) {
			log_warn("lun%u: no room for another LUN file", info->lun);
			continue;
		}
		gw_byid_add_lun(g, l); /* its by-id/ links, new or back */
		atomic_fetch_add(&r->luns_added, 1);
		log_warn("%s: new LUN: %s %s, %llu blocks of %u bytes", l->name, info->inq.vendor, info->inq.product,
			 (unsigned long long)info->cap.nblocks, info->cap.block_size);
		notify_entry(g, l->name);
		notify_inode(g, FUSE_ROOT_ID);
	}
	if (kept > 0)
		gw_life_luns_save(g); /* a restarted worker gives each inode the same LUN (lifestate.h) */
	free(infos);
}

/* REPORT LUNS: files for new disk LUNs, gone for those no longer listed. */
static void luns_round(struct gw_rescan *r, void *buf, size_t buflen)
{
	struct gw *g = r->g;
	uint16_t luns[GW_MAX_LUNS];
	size_t count = 0;
	int rc = iscsi_report_luns(gw_ctl(g), buf, buflen, luns, GW_MAX_LUNS, &count);
	if (rc) {
		log_debug("rescan: REPORT LUNS failed: %s", strerror(-rc));
		return;
	}
	size_t n = gw_nluns(g);
	bool missing = false;
	for (size_t i = 0; i < n && !missing; i++) {
		bool listed = false;
		for (size_t j = 0; j < count && !listed; j++)
			listed = luns[j] == g->luns[i].info.lun;
		missing = !listed && !gw_lun_gone(&g->luns[i]);
	}
	/* a LUN missing: ask once more before its file goes */
	if (missing && (!pause_ms(r, CONFIRM_MS) || iscsi_report_luns(gw_ctl(g), buf, buflen, luns, GW_MAX_LUNS, &count)))
		return;
	for (size_t i = 0; i < n; i++) {
		struct gw_lun *l = &g->luns[i];
		bool listed = false;
		for (size_t j = 0; j < count && !listed; j++)
			listed = luns[j] == l->info.lun;
		if (!listed && !gw_lun_gone(l))
			mark_gone(r, l, "no longer reported by the target");
	}
	uint16_t fresh[GW_MAX_LUNS];
	size_t nfresh = 0;
	for (size_t j = 0; j < count; j++) {
		bool have = false;
		for (size_t i = 0; i < n && !have; i++)
			have = !gw_lun_gone(&g->luns[i]) && g->luns[i].info.lun == luns[j];
		if (!have)
			fresh[nfresh++] = luns[j];
	}
	add_luns(r, fresh, nfresh, buf, buflen); /* gw_lun_select drops the repeats */
}

/* READ CAPACITY of one LUN, the (16) or (10) its probe settled on; sets *cap.  Returns 0 or a negative errno. */
static int read_capacity(struct gw_rescan *r, struct gw_lun *l, void *buf, size_t buflen, struct scsi_capacity *cap)
{
	struct gw_own_ua o = {r->g, l->dev.lun_field};
	return iscsi_lun_read_capacity(gw_ctl(r->g), l->info.lun_field,
				       l->info.use16 ? ISCSI_READ_CAPACITY_16 : ISCSI_READ_CAPACITY_10, buf, buflen, cap,
				       NULL, gw_own_ua, &o);
}

/* The WP bit of MODE SENSE: the file turns read-only (EROFS) or writable with the LUN. */
static void wp_follow(struct gw_rescan *r, struct gw_lun *l, void *buf, size_t buflen)
{
	bool wp;
	struct gw_own_ua o = {r->g, l->dev.lun_field};
	if (iscsi_lun_write_protect(gw_ctl(r->g), l->info.lun_field, buf, buflen, &wp, gw_own_ua, &o) || wp == l->info.wp)
		return;
	l->info.wp = wp;
	atomic_store_explicit(&l->ro, r->g->ro || wp, memory_order_relaxed);
	log_warn("%s: the target turned write protection %s", l->name, wp ? "on" : "off");
	notify_inode(r->g, l->ino);
}

/* READ CAPACITY and MODE SENSE of every LUN file: sizes and write protection follow the target. */
static void capacity_round(struct gw_rescan *r, void *buf, size_t buflen)
{
	struct gw *g = r->g;
	size_t n = gw_nluns(g);
	for (size_t i = 0; i < n; i++) {
		struct gw_lun *l = &g->luns[i];
		if (gw_lun_gone(l)) {
			if (g->url_lun >= 0 && l->info.lun == (uint16_t)g->url_lun)
				add_luns(r, &l->info.lun, 1, buf, buflen); /* the URL's LUN may be back */
			continue;
		}
		struct scsi_capacity cap;
		int rc = read_capacity(r, l, buf, buflen, &cap);
		if ((rc == -ENXIO || (rc == 0 && cap.block_size != l->dev.bs)) && pause_ms(r, CONFIRM_MS))
			rc = read_capacity(r, l, buf, buflen, &cap); /* once more before the file goes */
		if (rc == -ENXIO) {
			mark_gone(r, l, "the target no longer has this LUN");
			continue;
		}
		if (rc) {
			log_debug("%s: rescan: READ CAPACITY failed: %s", l->name, strerror(-rc));
			continue;
		}
		if (cap.block_size != l->dev.bs) {
			mark_gone(r, l, "the block size changed");
			prompt(r, SCSI_UA_LUNS); /* probe it again as a new LUN */
			continue;
		}
		wp_follow(r, l, buf, buflen);
		uint64_t old = blk_dev_nblocks(&l->dev);
		if (cap.nblocks == old || cap.nblocks > (uint64_t)INT64_MAX / cap.block_size)
			continue;
		flush_cache(l); /* no dirty block may straddle the old end */
		blk_dev_set_capacity(&l->dev, cap.nblocks);
		if (bcache_dev_invalidate(l->cdev, blk_dev_size(&l->dev)))
			log_err("%s: cached writes beyond the new end are lost", l->name);
		l->info.cap.nblocks = cap.nblocks;
		atomic_fetch_add(&r->capacity_changes, 1);
		log_warn("%s: capacity changed from %llu to %llu blocks of %u bytes", l->name, (unsigned long long)old,
			 (unsigned long long)cap.nblocks, cap.block_size);
		notify_inode(g, l->ino);
	}
}

/* Asked by statfs (gw_rescan_space): not a UNIT ATTENTION bit. */
#define RESCAN_SPACE (1u << 30)

/* A thin-provisioned LUN: GET LBA STATUS tells its deallocated blocks (LBPME, READ CAPACITY(16)). */
static bool thin(const struct gw_lun *l)
{
	struct discard_caps c;
	discard_caps_from_info(&c, &l->info);
	return c.lba_status;
}

/* The deallocated blocks of each thin LUN whose figure is older than GW_SPACE_REFRESH_MS. */
static void space_round(struct gw_rescan *r, void *buf, size_t buflen)
{
	struct gw *g = r->g;
	for (size_t i = 0, n = gw_nluns(g); i < n; i++) {
		struct gw_lun *l = &g->luns[i];
		int64_t at = atomic_load_explicit(&l->dealloc_at_ms, memory_order_acquire);
		if (gw_lun_gone(l) || !thin(l) || (at && (int64_t)blk_now_ms() - at < GW_SPACE_REFRESH_MS))
			continue;
		struct gw_own_ua o = {r->g, l->dev.lun_field};
		uint64_t d = 0;
		int rc = iscsi_lun_deallocated(gw_ctl(g), l->info.lun_field, blk_dev_nblocks(&l->dev), buf, buflen,
					       GW_SPACE_MAX_CMDS, &d, gw_own_ua, &o);
		if (rc) { /* the last figure stays; with none, the LUN tells nothing: all free, as a thick one */
			log_debug("%s: GET LBA STATUS for statfs failed: %s", l->name, strerror(-rc));
			d = at ? atomic_load_explicit(&l->dealloc_blocks, memory_order_relaxed) : blk_dev_nblocks(&l->dev);
		}
		atomic_store_explicit(&l->dealloc_blocks, d, memory_order_relaxed);
		int64_t now = (int64_t)blk_now_ms();
		atomic_store_explicit(&l->dealloc_at_ms, now ? now : 1, memory_order_release);
	}
}

bool gw_rescan_space(struct gw *g)
{
	if (!g->rescan)
		return false;
	prompt(g->rescan, RESCAN_SPACE);
	return true;
}

static void run_round(struct gw_rescan *r, unsigned ev, bool periodic)
{
	struct gw *g = r->g;
	/* a reconnect found another device behind the session: nothing it says reaches the LUN table */
	struct iscsi_session *ctl = gw_ctl(g);
	if (ctl && iscsi_session_fenced(ctl) && iscsi_session_reverify(ctl) != 0)
		return;
	void *buf = buf_pool_get(g->pool, NULL);
	size_t buflen = buf_pool_slice_size(g->pool);
	bool space = ev & RESCAN_SPACE;
	ev &= ~(unsigned)RESCAN_SPACE;
	if (!periodic && !ev) { /* only statfs asked: not a rescan */
		space_round(r, buf, buflen);
		buf_pool_put(g->pool, buf);
		return;
	}
	atomic_fetch_add(&r->rescans, 1);
	if (!periodic)
		atomic_fetch_add(&r->prompted, 1);
	if (ev & SCSI_UA_MEDIUM)
		for (size_t i = 0, n = gw_nluns(g); i < n; i++)
			if (atomic_exchange_explicit(&g->luns[i].pages_stale, false, memory_order_acq_rel))
				notify_inode(g, g->luns[i].ino); /* the kernel's pages of it are dropped too */
	if (g->url_lun < 0 && (periodic || (ev & SCSI_UA_LUNS)))
		luns_round(r, buf, buflen);
	if (periodic || (ev & (SCSI_UA_CAPACITY | SCSI_UA_PROBE)) || g->url_lun >= 0)
		capacity_round(r, buf, buflen);
	if (space)
		space_round(r, buf, buflen);
	buf_pool_put(g->pool, buf);
}

static void *rescan_thread(void *arg)
{
	struct gw_rescan *r = arg;
	uint64_t next = blk_now_ms() + (uint64_t)r->interval_s * 1000u;
	pthread_mutex_lock(&r->lock);
	while (!r->stop) {
		uint64_t now = blk_now_ms();
		bool periodic = r->interval_s && now >= next;
		if (!periodic && !r->pending) {
			if (r->interval_s) {
				struct timespec ts = {.tv_sec = (time_t)(next / 1000u), .tv_nsec = (long)(next % 1000u) * 1000000L};
				pthread_cond_timedwait(&r->cv, &r->lock, &ts);
			} else {
				pthread_cond_wait(&r->cv, &r->lock);
			}
			continue;
		}
		unsigned ev = r->pending;
		r->pending = 0;
		pthread_mutex_unlock(&r->lock);
		run_round(r, ev, periodic);
		if (periodic)
			next = blk_now_ms() + (uint64_t)r->interval_s * 1000u;
		pthread_mutex_lock(&r->lock);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

int gw_rescan_start(struct gw *g, unsigned interval_s)
{
	struct gw_rescan *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->g = g;
	r->interval_s = interval_s;
	clk_cond_init(&r->cv);
	pthread_mutex_init(&r->lock, NULL);
	int rc = thread_start_quiet(&r->thread, rescan_thread, r); /* the stop signals are main's */
	if (rc) {
		pthread_cond_destroy(&r->cv);
		pthread_mutex_destroy(&r->lock);
		free(r);
		return -rc;
	}
	g->rescan = r;
	if (g->retry)
		blk_retry_set_ua_hook(g->retry, ua_hook, r);
	return 0;
}

void gw_rescan_stop(struct gw *g)
{
	struct gw_rescan *r = g->rescan;
	if (!r)
		return;
	if (g->retry)
		blk_retry_set_ua_hook(g->retry, NULL, NULL);
	pthread_mutex_lock(&r->lock);
	r->stop = true;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->thread, NULL);
	struct gw_rescan_stats st;
	gw_rescan_get_stats(g, &st);
	log_info("target events: %llu rescans (%llu prompted by UNIT ATTENTION), %llu capacity changes, "
		 "%llu LUNs added, %llu removed",
		 (unsigned long long)st.rescans, (unsigned long long)st.prompted,
		 (unsigned long long)st.capacity_changes, (unsigned long long)st.luns_added,
		 (unsigned long long)st.luns_removed);
	g->rescan = NULL;
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

void gw_rescan_get_stats(struct gw *g, struct gw_rescan_stats *out)
{
	struct gw_rescan *r = g->rescan;
	memset(out, 0, sizeof(*out));
	if (!r)
		return;
	out->rescans = atomic_load(&r->rescans);
	out->prompted = atomic_load(&r->prompted);
	out->capacity_changes = atomic_load(&r->capacity_changes);
	out->luns_added = atomic_load(&r->luns_added);
	out->luns_removed = atomic_load(&r->luns_removed);
}
