/* SPDX-License-Identifier: MIT */
#include "blkio.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "initiator/util/defaults.h"
#include "initiator/util/log.h"
#include "initiator/mpath/mpath.h"
#include "initiator/scsi/scsi.h"

enum phase { PH_READ, PH_HEAD, PH_TAIL, PH_WRITE, PH_SYNC };

/* A write in flight listed in one bucket of d->wbucket (one per span it touches). */
struct blk_wnode {
	struct blk_req *r;
	struct blk_wnode *next;
};

struct blk_req {
	struct blk_dev *d;
	struct blk_wnode wn[2];      /* its entries in d->wbucket while in flight */
	unsigned nwn;                /* of wn in use */
	uint8_t *slice;              /* where the commands' data starts; NULL for SYNCHRONIZE CACHE */
	uint8_t *owned;              /* the pool slice returned at the end: slice, or the one holding it (in place) */
	uint64_t off;                /* bytes */
	size_t len;                  /* bytes */
	uint64_t lba0;               /* aligned extent: first block */
	uint32_t nblk;               /* aligned extent: blocks */
	uint8_t *payload;            /* slice + off - lba0 * bs */
	enum phase phase;
	bool head, tail;             /* edge blocks need reading */
	bool ext;                    /* READ into a caller's buffer: slice is that buffer, r is from d->ext */
	uint32_t done_blk, cur_blk;
	unsigned retries;
	uint64_t retry_t0;           /* ms, first failure of the current command */
	struct blk_retry_item ritem; /* parked on d->retry for a delayed retry */
	blk_done_fn cb;
	void *arg;
};

static int session_submit_op(void *backend, const struct iscsi_cmd *cmd)
{
	struct iscsi_session *s = backend;
	return iscsi_session_submit(s, cmd);
}

static uint32_t session_max_op(const void *backend)
{
	const struct iscsi_session *s = backend;
	return iscsi_session_max_cmd_bytes(s);
}

const struct blk_session_ops blk_session_ops_iscsi = {
	.submit = session_submit_op,
	.max_cmd_bytes = session_max_op,
};

static int mpath_submit_op(void *backend, const struct iscsi_cmd *cmd)
{
	struct mpath *m = backend;
	return mpath_submit(m, cmd);
}

static uint32_t mpath_max_op(const void *backend)
{
	const struct mpath *m = backend;
	return mpath_max_cmd_bytes(m);
}

const struct blk_session_ops blk_session_ops_mpath = {
	.submit = mpath_submit_op,
	.max_cmd_bytes = mpath_max_op,
};

int blk_dev_init(struct blk_dev *d, struct iscsi_session *s, struct buf_pool *pool,
		 const struct iscsi_lun_info *info, size_t max_io)
{
	return blk_dev_init_ops(d, s, &blk_session_ops_iscsi, pool, info, max_io);
}

int blk_dev_init_ops(struct blk_dev *d, void *backend, const struct blk_session_ops *ops,
		     struct buf_pool *pool, const struct iscsi_lun_info *info, size_t max_io)
{
	memset(d, 0, sizeof(*d));
	d->backend = backend;
	d->ops = ops;
	d->pool = pool;
	d->lun_field = info->lun_field;
	d->lun = info->lun;
	d->bs = info->cap.block_size;
	atomic_init(&d->nblocks, info->cap.nblocks);
	atomic_init(&d->size, info->cap.nblocks * d->bs);
	atomic_init(&d->retry, NULL);
	d->use16 = info->use16;
	d->max_io = max_io;
	d->retry_budget_ms = ISCSI_CMD_TIMEOUT_DEFAULT_S * 1000u; /* until blk_dev_set_retry */
	if (buf_pool_slice_size(pool) < max_io + 4u * d->bs)
		return -EINVAL;
	uint64_t maxb = 0xffff; /* keeps 10-byte CDBs possible and bursts moderate */
	if (info->have_block_limits && info->bl.max_xfer_len && info->bl.max_xfer_len < maxb)
		maxb = info->bl.max_xfer_len;
	uint32_t cap = ops->max_cmd_bytes(backend); /* the transport's own limit (iSER) */
	if (cap && cap / d->bs < maxb)
		maxb = cap / d->bs;
	d->max_xfer_blocks = (uint32_t)maxb;
	while ((1ull << d->wshift) < max_io / d->bs + 1)
		d->wshift++;
	d->reqs = calloc(buf_pool_nslices(pool), sizeof(*d->reqs));
	if (!d->reqs || ctxpool_create(&d->ext, sizeof(struct blk_req), buf_pool_nslices(pool))) {
		free(d->reqs);
		d->reqs = NULL;
		return -ENOMEM;
	}
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cv, NULL);
	return 0;
}

void blk_dev_set_retry(struct blk_dev *d, struct blk_retry *q, uint32_t budget_ms)
{
	atomic_store_explicit(&d->retry, q, memory_order_release);
	d->retry_budget_ms = budget_ms;
}

void blk_dev_set_capacity(struct blk_dev *d, uint64_t nblocks)
{
	atomic_store_explicit(&d->nblocks, nblocks, memory_order_release);
	atomic_store_explicit(&d->size, nblocks * d->bs, memory_order_release);
}

uint64_t blk_dev_size(const struct blk_dev *d) { return atomic_load_explicit(&d->size, memory_order_acquire); }

uint64_t blk_dev_nblocks(const struct blk_dev *d) { return atomic_load_explicit(&d->nblocks, memory_order_acquire); }

struct blk_retry *blk_dev_retry(const struct blk_dev *d) { return atomic_load_explicit(&d->retry, memory_order_acquire); }

void blk_dev_fini(struct blk_dev *d)
{
	free(d->reqs);
	ctxpool_destroy(d->ext);
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->cv);
}

/* Within the LUN and max_io, not empty. */
static bool req_fits(const struct blk_dev *d, uint64_t off, size_t len)
{
	uint64_t size = blk_dev_size(d);
	return len != 0 && len <= d->max_io && off < size && len <= size - off;
}

/* The request of pool slice idx (owned, taken by the caller), its commands' data starting at slice. */
static struct blk_req *req_init(struct blk_dev *d, unsigned idx, uint8_t *owned, uint8_t *slice, uint64_t off,
				size_t len)
{
	struct blk_req *r = &d->reqs[idx];
	memset(r, 0, sizeof(*r));
	r->d = d;
	r->owned = owned;
	r->slice = slice;
	r->off = off;
	r->len = len;
	r->lba0 = off / d->bs;
	uint64_t end = (off + len + d->bs - 1) / d->bs;
	r->nblk = (uint32_t)(end - r->lba0);
	r->payload = slice + (off - r->lba0 * d->bs);
	return r;
}

static struct blk_req *req_new(struct blk_dev *d, uint64_t off, size_t len)
{
	if (!req_fits(d, off, len))
		return NULL;
	unsigned idx;
	uint8_t *slice = buf_pool_get(d->pool, &idx);
	return slice ? req_init(d, idx, slice, slice, off, len) : NULL; /* NULL: none free, in pool_nowait */
}

static uint8_t *scratch(struct blk_req *r, int which)
{
	size_t ss = buf_pool_slice_size(r->d->pool);
	return r->owned + ss - 2u * r->d->bs + (size_t)which * r->d->bs;
}

static bool overlaps(const struct blk_req *a, const struct blk_req *b)
{
	return a->lba0 < b->lba0 + b->nblk && b->lba0 < a->lba0 + a->nblk;
}

/* The bucket of span `span` (a block's span: LBA >> d->wshift). */
static struct blk_wnode **wbucket(struct blk_dev *d, uint64_t span) { return &d->wbucket[span % BLK_WBUCKETS]; }

/* A write in flight overlapping r, or NULL.  Under d->lock. */
static struct blk_req *write_overlapping(struct blk_dev *d, const struct blk_req *r)
{
	uint64_t s0 = r->lba0 >> d->wshift, s1 = (r->lba0 + r->nblk - 1) >> d->wshift;
	for (uint64_t s = s0; s <= s1; s++)
		for (struct blk_wnode *n = *wbucket(d, s); n; n = n->next) {
			d->overlap_probes++;
			if (overlaps(n->r, r))
				return n->r;
		}
	return NULL;
}

/* List r in the buckets of the spans it touches (at most 2: a span holds a whole request).  Under d->lock. */
static void writes_add(struct blk_dev *d, struct blk_req *r)
{
	uint64_t s0 = r->lba0 >> d->wshift, s1 = (r->lba0 + r->nblk - 1) >> d->wshift;
	r->nwn = 0;
	for (uint64_t s = s0; s <= s1 && r->nwn < 2; s++) {
		struct blk_wnode *n = &r->wn[r->nwn++], **h = wbucket(d, s);
		n->r = r;
		n->next = *h;
		*h = n;
	}
}

/* Unlist r from its buckets.  Under d->lock. */
static void writes_remove(struct blk_dev *d, struct blk_req *r)
{
	uint64_t s0 = r->lba0 >> d->wshift;
	for (unsigned i = 0; i < r->nwn; i++)
		for (struct blk_wnode **pp = wbucket(d, s0 + i); *pp; pp = &(*pp)->next)
			if (*pp == &r->wn[i]) {
				*pp = r->wn[i].next;
				break;
			}
	r->nwn = 0;
}

static void finish(struct blk_req *r, int err)
{
	struct blk_dev *d = r->d;
	if (r->phase == PH_WRITE || r->phase == PH_HEAD || r->phase == PH_TAIL) {
		pthread_mutex_lock(&d->lock);
		writes_remove(d, r);
		if (d->claim_waiting)
			pthread_cond_broadcast(&d->cv);
		pthread_mutex_unlock(&d->lock);
		if (!err)
			atomic_store(&d->dirty, true);
	}
	if (r->phase == PH_SYNC) {
		if (err)
			atomic_store(&d->dirty, true);
		atomic_fetch_sub(&d->syncs_inflight, 1);
		r->cb(r->arg, err, NULL, 0);
		free(r);
		return;
	}
	r->cb(r->arg, err, r->phase == PH_READ && !err ? r->payload : NULL, err ? 0 : r->len);
	if (r->ext) {
		ctxpool_put(d->ext, r);
		return;
	}
	buf_pool_put(d->pool, r->owned);
}

static void cmd_done(void *arg, const struct iscsi_cmd_result *res);

static void submit(struct blk_req *r)
{
	struct blk_dev *d = r->d;
	struct iscsi_cmd cmd = {.lun = d->lun_field, .cb = cmd_done, .arg = r};
	uint64_t lba = r->lba0 + r->done_blk;
	uint32_t n = r->nblk - r->done_blk;
	if (n > d->max_xfer_blocks)
		n = d->max_xfer_blocks;
	switch (r->phase) {
	case PH_READ:
	case PH_WRITE:
		cmd.dir = r->phase == PH_READ ? ISCSI_DIR_READ : ISCSI_DIR_WRITE;
		cmd.buf = r->slice + (size_t)r->done_blk * d->bs;
		cmd.len = n * d->bs;
		cmd.cdb_len = (uint8_t)(r->phase == PH_READ ? scsi_cdb_read(cmd.cdb, lba, n, false)
							     : scsi_cdb_write(cmd.cdb, lba, n, false));
		break;
	case PH_HEAD:
	case PH_TAIL:
		n = 1;
		lba = r->phase == PH_HEAD ? r->lba0 : r->lba0 + r->nblk - 1;
		cmd.dir = ISCSI_DIR_READ;
		cmd.buf = scratch(r, r->phase == PH_HEAD ? 0 : 1);
		cmd.len = d->bs;
		cmd.cdb_len = (uint8_t)scsi_cdb_read(cmd.cdb, lba, 1, false);
		break;
	case PH_SYNC:
		n = 0;
		cmd.dir = ISCSI_DIR_NONE;
		cmd.cdb_len = (uint8_t)scsi_cdb_sync_cache(cmd.cdb, d->use16, 0, 0);
		break;
	}
	r->cur_blk = n;
	int rc = d->ops->submit(d->backend, &cmd);
	if (rc)
		finish(r, rc == -ENOTCONN ? -EIO : rc);
}

/* Copy the bytes of edge block `lba` (read into e) that the write does not cover into the slice. */
static void merge_edge(struct blk_req *r, uint64_t lba, const uint8_t *e)
{
	uint64_t bs = r->d->bs, b0 = lba * bs, b1 = b0 + bs;
	uint8_t *dst = r->slice + (b0 - r->lba0 * bs);
	if (r->off > b0) {
		uint64_t stop = r->off < b1 ? r->off : b1;
		memcpy(dst, e, stop - b0);
		atomic_fetch_add_explicit(&r->d->rmw_bytes_copied, stop - b0, memory_order_relaxed);
	}
	uint64_t wend = r->off + r->len;
	if (wend < b1) {
		uint64_t start = wend > b0 ? wend : b0;
		memcpy(dst + (start - b0), e + (start - b0), b1 - start);
		atomic_fetch_add_explicit(&r->d->rmw_bytes_copied, b1 - start, memory_order_relaxed);
	}
}

static void retry_fire(struct blk_retry_item *it)
{
	struct blk_req *r = (struct blk_req *)((char *)it - offsetof(struct blk_req, ritem));
	submit(r);
}

/*
 * A failed command: note a UNIT ATTENTION, then re-submit it when its
 * status is transient (scsi_status_retry): at once from here, or after a
 * delay from the retry thread (the event thread never sleeps).  Returns
 * true when the request lives on.
 */
static bool retry_later(struct blk_req *r, const struct iscsi_cmd_result *res)
{
	struct blk_dev *d = r->d;
	struct blk_retry *q = blk_dev_retry(d); /* NULL once shutting down */
	int delay = blk_retry_decide(q, d->lun_field, res, &r->retries, &r->retry_t0, d->retry_budget_ms);
	if (delay < 0)
		return false;
	if (delay > 0) {
		r->ritem.fire = retry_fire;
		blk_retry_schedule(q, &r->ritem, (unsigned)delay);
	} else {
		submit(r);
	}
	return true;
}

static void cmd_done(void *arg, const struct iscsi_cmd_result *res)
{
	struct blk_req *r = arg;
	struct blk_dev *d = r->d;
	int err = iscsi_cmd_result_errno(res);
	if (err == 0 && res->xfer_len != r->cur_blk * d->bs)
		err = -EIO; /* short transfer without an error status */
	if (err) {
		if (retry_later(r, res))
			return;
		if (r->phase == PH_SYNC && err == -EOPNOTSUPP)
			err = 0; /* no cache to flush */
		else
			blk_retry_log_failure(d->lun, "I/O", err, res);
		finish(r, err);
		return;
	}
	r->retries = 0;
	switch (r->phase) {
	case PH_READ:
	case PH_WRITE:
		r->done_blk += r->cur_blk;
		if (r->done_blk < r->nblk) {
			submit(r);
			return;
		}
		break;
	case PH_HEAD:
		merge_edge(r, r->lba0, scratch(r, 0));
		if (r->tail && r->nblk > 1) {
			r->phase = PH_TAIL;
			submit(r);
			return;
		}
		r->phase = PH_WRITE;
		submit(r);
		return;
	case PH_TAIL:
		merge_edge(r, r->lba0 + r->nblk - 1, scratch(r, 1));
		r->phase = PH_WRITE;
		submit(r);
		return;
	case PH_SYNC:
		break;
	}
	finish(r, 0);
}

int blk_read(struct blk_dev *d, uint64_t off, size_t len, blk_done_fn cb, void *arg)
{
	if (!req_fits(d, off, len))
		return -EINVAL;
	struct blk_req *r = req_new(d, off, len);
	if (!r)
		return -ENOBUFS;
	r->phase = PH_READ;
	r->cb = cb;
	r->arg = arg;
	submit(r);
	return 0;
}

int blk_read_into(struct blk_dev *d, uint64_t off, size_t len, void *buf, blk_done_fn cb, void *arg)
{
	uint64_t size = blk_dev_size(d);
	if (len == 0 || len > d->max_io || off >= size || len > size - off || off % d->bs || len % d->bs)
		return -EINVAL;
	struct blk_req *r = ctxpool_get(d->ext);
	memset(r, 0, sizeof(*r));
	r->d = d;
	r->ext = true;
	r->slice = r->payload = buf;
	r->off = off;
	r->len = len;
	r->lba0 = off / d->bs;
	r->nblk = (uint32_t)(len / d->bs);
	r->phase = PH_READ;
	r->cb = cb;
	r->arg = arg;
	submit(r);
	return 0;
}

struct blk_req *blk_write_prepare(struct blk_dev *d, uint64_t off, size_t len, void **payload)
{
	struct blk_req *r = req_new(d, off, len);
	if (r)
		*payload = r->payload;
	return r;
}

struct blk_req *blk_write_prepare_in(struct blk_dev *d, uint64_t off, size_t len, void *slice, void *data)
{
	unsigned idx;
	uint8_t *s = slice, *p = data;
	size_t room = buf_pool_slice_size(d->pool) - 2u * d->bs; /* the scratch blocks stay free */
	if (!req_fits(d, off, len) || off % d->bs || len % d->bs || buf_pool_index(d->pool, s, &idx) ||
	    p < s || (size_t)(p - s) > room || len > room - (size_t)(p - s))
		return NULL;
	return req_init(d, idx, s, p, off, len);
}

void blk_write_cancel(struct blk_req *r) { buf_pool_put(r->d->pool, r->owned); }

int blk_write_claim(struct blk_req *r, bool wait)
{
	struct blk_dev *d = r->d;
	/* Serialise against every write in flight over the same blocks. */
	pthread_mutex_lock(&d->lock);
	while (write_overlapping(d, r)) {
		if (!wait) {
			pthread_mutex_unlock(&d->lock);
			return -ENOBUFS;
		}
		d->claim_waiting++;
		pthread_cond_wait(&d->cv, &d->lock);
		d->claim_waiting--;
	}
	writes_add(d, r);
	pthread_mutex_unlock(&d->lock);
	return 0;
}

void blk_write_submit(struct blk_req *r, blk_done_fn cb, void *arg)
{
	blk_write_claim(r, true);
	blk_write_go(r, cb, arg);
}

void blk_write_go(struct blk_req *r, blk_done_fn cb, void *arg)
{
	struct blk_dev *d = r->d;
	r->cb = cb;
	r->arg = arg;
	r->head = r->off % d->bs != 0 || (r->nblk == 1 && r->len < d->bs);
	r->tail = (r->off + r->len) % d->bs != 0;
	if (r->head || r->tail) {
		atomic_fetch_add(&d->rmw_count, 1);
		r->phase = r->head ? PH_HEAD : PH_TAIL;
	} else {
		r->phase = PH_WRITE;
	}
	submit(r);
}

int blk_sync(struct blk_dev *d, blk_done_fn cb, void *arg)
{
	/*
	 * Nothing written since the last SYNCHRONIZE CACHE, and none in flight:
	 * done.  While one is in flight its result is not ours to report, so
	 * we send another (it covers every write completed before it).
	 */
	if (!atomic_exchange(&d->dirty, false) && atomic_load(&d->syncs_inflight) == 0) {
		cb(arg, 0, NULL, 0);
		return 0;
	}
	struct blk_req *r = calloc(1, sizeof(*r));
	if (!r) {
		atomic_store(&d->dirty, true);
		return -ENOMEM;
	}
	atomic_fetch_add(&d->syncs_inflight, 1);
	r->d = d;
	r->phase = PH_SYNC;
	r->cb = cb;
	r->arg = arg;
	submit(r);
	return 0;
}
