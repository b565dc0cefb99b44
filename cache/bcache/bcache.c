/* SPDX-License-Identifier: MIT */
#include "bcache.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cache/pool/ctxpool.h"

#define RA_MAX_BYTES (4u << 20) /* largest read-ahead window */
#define FILLS_MAX 160           /* fills one read may start (its blocks + read-ahead) */
#define LB_MIN 512u             /* smallest logical block: sizes the per-block bitmaps */
#define DEPTH_DEFAULT 64u       /* contexts of each kind when the backend gives no depth */

enum state { E_FREE, E_FILLING, E_VALID, E_DOOMED };

struct bc_read;

struct waitnode {
	struct bc_read *r;
	struct waitnode *next;
};

struct entry {
	struct bcache_dev *dev;
	uint64_t blk;          /* block number on dev (bytes = blk * block size) */
	uint8_t *buf;
	enum state state;
	bool dirty, flushing, stale, ra, refbit;
	bool zeroed;           /* dirty, zeroed by a punch or zero range in flight that will make it clean */
	unsigned refs;         /* readers replying from or waiting for it, write-backs */
	uint64_t wb_seq;       /* c->seq when its last write-back completed */
	/* Logical blocks of the block (bit i: LBA blk * block size / lbsize + i), c->mwords words each: */
	uint64_t *dmap;        /* written here, not yet written back (non-zero exactly when dirty) */
	uint64_t *fmap;        /* carried by its last write-back (in flight while flushing) */
	uint64_t *wmap;        /* ever written back (fmap's so far): laid over bypass reads begun before */
	unsigned wb_runs;      /* backend writes of its write-back in flight */
	bool wb_failed;        /* one of them failed: fmap becomes dirty again */
	struct entry *hnext;
	struct waitnode *waiters;
};

struct bcache_write {
	uint64_t b0, b1;       /* blocks [b0, b1] */
	bool zero;             /* a punch or zero range: its whole dirty blocks become clean when it succeeds */
	struct bcache_write *next;
};

struct flush_waiter {
	struct bcache_dev *d;
	bcache_io_fn cb;
	void *arg;
	int err;
	bool nosync;           /* bcache_writeback: no backend sync */
	struct flush_waiter *next;
};

struct bcache_dev {
	struct bcache *c;
	struct bcache_backend be;     /* be.size is the size at bcache_dev_add only: read dev_size */
	_Atomic uint64_t size;        /* device size, bytes (bcache_dev_invalidate changes it) */
	struct bcache_write *writes;  /* write-through writes in flight */
	unsigned wb_inflight;         /* write-backs in flight */
	int wb_err;                   /* first write-back error since the last flush reported */
	struct flush_waiter *fw;      /* bcache_flush calls waiting for wb_inflight == 0 */
	atomic_uint ncached;          /* its blocks in the cache (any state); written under the lock */
	unsigned ndirty;              /* its dirty blocks */
	unsigned lbshift;             /* log2 of the logical block size */
	atomic_uint gen;              /* bumped when its clean blocks are dropped (streams restart read-ahead) */
	struct ctxpool *rctx;         /* read contexts (struct bc_read + rnent entries each), be.depth of them */
	unsigned rnent;               /* cache blocks a read of be.max_io bytes touches, at most */
	struct ctxpool *wctx;         /* write tokens (struct bcache_write), be.depth of them */
};

struct bcache {
	pthread_mutex_t lock;
	size_t bsz;
	unsigned shift;
	unsigned n;
	struct entry *e;
	uint64_t *maps;        /* the entries' bitmaps, 3 * mwords words each */
	size_t mwords;         /* words of one bitmap: block size / LB_MIN bits */
	struct entry **hash;
	size_t hmask;
	unsigned hand;
	uint64_t seq;
	unsigned ndirty;
	bool wb;
	struct bcache_stats st;
	_Atomic uint64_t wb_copied; /* write-back bytes handed to the backend (outside the lock), for st.copied_bytes */
};

/* A read waiting for fills, or a bypass read holding the VALID blocks of its range. */
struct bc_read {
	struct bcache_dev *d;
	uint64_t off;
	size_t len;
	bcache_read_fn cb;
	void *arg;
	unsigned pending;
	int err;
	uint64_t seq;
	unsigned nent;
	struct entry **ents;
	struct waitnode *nodes;
	struct iovec *iov;
	struct bc_read *next_done;
	bool heap;             /* larger than the device's read contexts (a read beyond be.max_io): malloc'd */
};

int bcache_create(struct bcache **out, size_t block_size, unsigned nblocks, void *const *bufs, bool writeback)
{
	if (block_size < 4096 || (block_size & (block_size - 1)) || nblocks == 0)
		return -EINVAL;
	struct bcache *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	size_t hsize = 1;
	while (hsize < 2u * nblocks)
		hsize <<= 1;
	c->mwords = (block_size / LB_MIN + 63) / 64;
	c->e = calloc(nblocks, sizeof(*c->e));
	c->maps = calloc((size_t)nblocks * 3, c->mwords * sizeof(*c->maps));
	c->hash = calloc(hsize, sizeof(*c->hash));
	if (!c->e || !c->maps || !c->hash) {
		free(c->e);
		free(c->maps);
		free(c->hash);
		free(c);
		return -ENOMEM;
	}
	c->hmask = hsize - 1;
	c->bsz = block_size;
	while ((1ul << c->shift) < block_size)
		c->shift++;
	c->n = nblocks;
	c->wb = writeback;
	for (unsigned i = 0; i < nblocks; i++) {
		struct entry *e = &c->e[i];
		e->buf = bufs[i];
		e->dmap = c->maps + (size_t)i * 3 * c->mwords;
		e->fmap = e->dmap + c->mwords;
		e->wmap = e->fmap + c->mwords;
	}
	c->st.blocks = nblocks;
	c->st.block_size = block_size;
	pthread_mutex_init(&c->lock, NULL);
	*out = c;
	return 0;
}

void bcache_destroy(struct bcache *c)
{
	if (!c)
		return;
	pthread_mutex_destroy(&c->lock);
	free(c->e);
	free(c->maps);
	free(c->hash);
	free(c);
}

int bcache_dev_add(struct bcache *c, const struct bcache_backend *be, struct bcache_dev **out)
{
	if (be->lbsize < LB_MIN || (be->lbsize & (be->lbsize - 1)) || be->lbsize > c->bsz)
		return -EINVAL;
	struct bcache_dev *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->c = c;
	d->be = *be;
	atomic_init(&d->size, be->size);
	while ((1u << d->lbshift) < be->lbsize)
		d->lbshift++;
	unsigned depth = be->depth ? be->depth : DEPTH_DEFAULT;
	d->rnent = (unsigned)(be->max_io / c->bsz + 2);
	size_t rsize = sizeof(struct bc_read) +
		       d->rnent * (sizeof(struct entry *) + sizeof(struct waitnode) + sizeof(struct iovec));
	if (ctxpool_create(&d->rctx, rsize, depth) || ctxpool_create(&d->wctx, sizeof(struct bcache_write), depth)) {
		ctxpool_destroy(d->rctx);
		free(d);
		return -ENOMEM;
	}
	*out = d;
	return 0;
}

static size_t hidx(const struct bcache *c, const struct bcache_dev *d, uint64_t blk)
{
	uint64_t h = (blk ^ ((uintptr_t)d >> 4)) * 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 32) & c->hmask;
}

static struct entry *lookup(struct bcache *c, struct bcache_dev *d, uint64_t blk)
{
	for (struct entry *e = c->hash[hidx(c, d, blk)]; e; e = e->hnext)
		if (e->dev == d && e->blk == blk)
			return e;
	return NULL;
}

static void hash_insert(struct bcache *c, struct entry *e)
{
	struct entry **h = &c->hash[hidx(c, e->dev, e->blk)];
	e->hnext = *h;
	*h = e;
}

static void hash_remove(struct bcache *c, struct entry *e)
{
	for (struct entry **pp = &c->hash[hidx(c, e->dev, e->blk)]; *pp; pp = &(*pp)->hnext)
		if (*pp == e) {
			*pp = e->hnext;
			return;
		}
}

/* Bytes of block blk on d (the last block may be short). */
/* The device's size in bytes (bcache_dev_invalidate changes it). */
static uint64_t dev_size(const struct bcache_dev *d) { return atomic_load_explicit(&d->size, memory_order_acquire); }

static size_t blen(const struct bcache_dev *d, uint64_t blk)
{
	uint64_t start = blk << d->c->shift;
	uint64_t left = dev_size(d) - start;
	return left < d->c->bsz ? (size_t)left : d->c->bsz;
}

static void entry_free(struct bcache *c, struct entry *e)
{
	if (e->ra)
		c->st.ra_wasted_bytes += blen(e->dev, e->blk);
	if (e->dev)
		atomic_fetch_sub(&e->dev->ncached, 1);
	e->state = E_FREE;
	e->dev = NULL;
	e->ra = e->stale = e->refbit = false;
	e->waiters = NULL;
}

/* CLOCK: a free block, or the first clean idle VALID block not referenced since the hand passed. */
static struct entry *evict_one(struct bcache *c)
{
	for (unsigned i = 0; i < 2 * c->n + 1; i++) {
		struct entry *e = &c->e[c->hand];
		c->hand = c->hand + 1 == c->n ? 0 : c->hand + 1;
		if (e->state == E_FREE)
			return e;
		if (e->state != E_VALID || e->refs || e->dirty || e->flushing)
			continue;
		if (e->refbit) {
			e->refbit = false;
			continue;
		}
		hash_remove(c, e);
		entry_free(c, e);
		return e;
	}
	return NULL;
}

static struct entry *entry_new(struct bcache *c, struct bcache_dev *d, uint64_t blk, enum state s)
{
	struct entry *e = evict_one(c);
	if (!e)
		return NULL;
	e->dev = d;
	atomic_fetch_add(&d->ncached, 1);
	e->blk = blk;
	e->state = s;
	e->refs = 0;
	e->dirty = e->flushing = e->stale = e->ra = e->zeroed = false;
	e->refbit = true;
	e->wb_seq = 0;
	e->wb_runs = 0;
	e->wb_failed = false;
	memset(e->dmap, 0, 3 * c->mwords * sizeof(*e->dmap)); /* dmap, fmap, wmap */
	e->waiters = NULL;
	hash_insert(c, e);
	return e;
}

static void unref(struct bcache *c, struct entry *e)
{
	if (--e->refs == 0 && e->state == E_DOOMED)
		entry_free(c, e);
}

/* Out of the hash: freed now, or by unref when its last reader lets go. */
static void entry_drop(struct bcache *c, struct entry *e)
{
	hash_remove(c, e);
	if (e->refs)
		e->state = E_DOOMED;
	else
		entry_free(c, e);
}

static void set_dirty(struct bcache *c, struct entry *e)
{
	if (e->dirty)
		return;
	e->dirty = true;
	c->ndirty++;
	e->dev->ndirty++;
}

static void set_clean(struct bcache *c, struct entry *e)
{
	e->zeroed = false;
	if (!e->dirty)
		return;
	memset(e->dmap, 0, c->mwords * sizeof(*e->dmap));
	e->dirty = false;
	c->ndirty--;
	e->dev->ndirty--;
}

/* ---- per logical block bitmaps ---- */

static bool bit(const uint64_t *map, unsigned i) { return map[i / 64] >> (i % 64) & 1; }

/* Logical blocks in block blk of d (the last block may be short; the size is a multiple of them). */
static unsigned lbas(const struct bcache_dev *d, uint64_t blk) { return (unsigned)(blen(d, blk) >> d->lbshift); }

/* The logical blocks [*i0, *i1) of e's block that [off, end) touches (partly or whole); false if none. */
static bool lba_span(const struct bcache *c, const struct bcache_dev *d, const struct entry *e, uint64_t off,
		     uint64_t end, unsigned *i0, unsigned *i1)
{
	uint64_t bstart = e->blk << c->shift, bend = bstart + blen(d, e->blk);
	uint64_t s = off > bstart ? off : bstart, t = end < bend ? end : bend;
	if (s >= t)
		return false;
	*i0 = (unsigned)((s - bstart) >> d->lbshift);
	*i1 = (unsigned)((t - bstart + (1u << d->lbshift) - 1) >> d->lbshift);
	return true;
}

/* The next run [*i0, *i1) of set bits of map at or after from, below n; false if none. */
/* Logical block i of e is newer here than the target may be: dirty, or (recent) written back lately. */
static bool lba_newer(const struct entry *e, unsigned i, bool recent)
{
	return bit(e->dmap, i) || (recent && bit(e->wmap, i));
}

static bool next_run(const uint64_t *map, unsigned from, unsigned n, unsigned *i0, unsigned *i1)
{
	unsigned i = from;
	while (i < n && !bit(map, i))
		i++;
	if (i == n)
		return false;
	*i0 = i;
	while (i < n && bit(map, i))
		i++;
	*i1 = i;
	return true;
}

/*
 * Bytes [off, end) were copied into e's block by this mount: the logical
 * blocks they touch are dirty (whole: an unaligned write's logical block
 * is completed by the cached bytes around it, as blkio completes it by a
 * read of the target).  Under the lock.
 */
static void dirty_range(struct bcache *c, const struct bcache_dev *d, struct entry *e, uint64_t off, uint64_t end)
{
	unsigned i0, i1;
	if (!lba_span(c, d, e, off, end, &i0, &i1))
		return;
	for (unsigned i = i0; i < i1; i++)
		e->dmap[i / 64] |= 1ull << (i % 64);
	set_dirty(c, e);
}

/*
 * A write through the cache of [off, end) while e's write-back is in
 * flight: that write-back carries old bytes of the logical blocks both
 * touch and is not ordered after the write, so they are written back once
 * more.  Under the lock.
 */
static void redirty_in_flight(struct bcache *c, const struct bcache_dev *d, struct entry *e, uint64_t off,
			      uint64_t end)
{
	unsigned i0, i1;
	bool any = false;
	if (!lba_span(c, d, e, off, end, &i0, &i1))
		return;
	for (unsigned i = i0; i < i1; i++)
		if (bit(e->fmap, i)) {
			e->dmap[i / 64] |= 1ull << (i % 64);
			any = true;
		}
	if (any)
		set_dirty(c, e);
}

static bool write_overlaps(const struct bcache_dev *d, uint64_t b0, uint64_t b1)
{
	for (const struct bcache_write *w = d->writes; w; w = w->next)
		if (w->b0 <= b1 && b0 <= w->b1)
			return true;
	return false;
}

/*
 * A read context for nent cache blocks: one of d's fixed set (waits while
 * all are out; never under c->lock, which the completions that put them
 * back take), or malloc'd when nent is beyond what the set was sized for.
 * NULL only when that malloc fails.  Give it back with read_free.
 */
static struct bc_read *read_get(struct bcache_dev *d, unsigned nent)
{
	size_t size = sizeof(struct bc_read) +
		      nent * (sizeof(struct entry *) + sizeof(struct waitnode) + sizeof(struct iovec));
	bool heap = nent > d->rnent;
	struct bc_read *r = heap ? malloc(size) : ctxpool_get(d->rctx);
	if (r)
		r->heap = heap;
	return r;
}

static void read_free(struct bc_read *r)
{
	if (r->heap)
		free(r);
	else
		ctxpool_put(r->d->rctx, r);
}

/* Set up r (from read_get for at least nent blocks) for a read of len bytes at off. */
static struct bc_read *read_init(struct bc_read *r, struct bcache_dev *d, uint64_t off, size_t len, unsigned nent,
				 bcache_read_fn cb, void *arg)
{
	bool heap = r->heap;
	memset(r, 0, sizeof(*r) + nent * (sizeof(struct entry *) + sizeof(struct waitnode) + sizeof(struct iovec)));
	r->heap = heap;
	r->d = d;
	r->off = off;
	r->len = len;
	r->cb = cb;
	r->arg = arg;
	r->nent = nent;
	r->nodes = (struct waitnode *)(r + 1);
	r->iov = (struct iovec *)(r->nodes + nent);
	r->ents = (struct entry **)(r->iov + nent);
	return r;
}

static void release_ents(struct bcache *c, struct bc_read *r)
{
	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; i < r->nent; i++)
		if (r->ents[i])
			unref(c, r->ents[i]);
	pthread_mutex_unlock(&c->lock);
}

/* ---- reads that bypass the cache ---- */

static void bypass_done(void *arg, int err, const void *data, size_t len)
{
	struct bc_read *r = arg;
	struct bcache *c = r->d->c;
	uint8_t *out = (uint8_t *)data;
	if (!err) {
		/* Logical blocks cached here newer than what the backend may have
		 * returned: dirty, being written back, or written back since the
		 * read began (the rest of a block may be older than the target). */
		pthread_mutex_lock(&c->lock);
		for (unsigned k = 0; k < r->nent; k++) {
			struct entry *e = r->ents[k];
			if (!e || e->state != E_VALID || !(e->dirty || e->flushing || e->wb_seq > r->seq))
				continue;
			bool recent = e->flushing || e->wb_seq > r->seq;
			unsigned lbs = e->dev->lbshift;
			uint64_t bstart = e->blk << c->shift;
			for (unsigned i = 0, j, n = lbas(e->dev, e->blk); i < n; i = j) { /* one copy per run */
				for (j = i; j < n && lba_newer(e, j, recent); j++)
					;
				if (j == i) {
					j++;
					continue;
				}
				uint64_t ls = bstart + ((uint64_t)i << lbs), le = bstart + ((uint64_t)j << lbs);
				uint64_t s = r->off > ls ? r->off : ls;
				uint64_t t = r->off + len < le ? r->off + len : le;
				if (s < t) {
					memcpy(out + (s - r->off), e->buf + (s - bstart), t - s);
					c->st.copied_bytes += t - s;
				}
			}
		}
		pthread_mutex_unlock(&c->lock);
	}
	release_ents(c, r);
	struct iovec iov = {.iov_base = out, .iov_len = err ? 0 : len};
	bcache_read_fn cb = r->cb;
	void *cb_arg = r->arg;
	read_free(r);
	cb(cb_arg, err, &iov, err ? 0 : 1);
}

/* Called with c->lock held; unlocks it.  r: from read_get for the blocks of the range, given back here or on completion. */
static int bypass_locked(struct bcache_dev *d, struct bc_read *r, uint64_t off, size_t len, bcache_read_fn cb,
			 void *arg)
{
	struct bcache *c = d->c;
	uint64_t b0 = off >> c->shift, b1 = (off + len - 1) >> c->shift;
	read_init(r, d, off, len, (unsigned)(b1 - b0 + 1), cb, arg);
	c->st.bypass_reads++;
	r->seq = c->seq;
	for (uint64_t b = b0; b <= b1; b++) {
		struct entry *e = lookup(c, d, b);
		if (e && e->state == E_VALID) {
			e->refs++; /* kept until the reply: it cannot be evicted meanwhile */
			r->ents[b - b0] = e;
		}
	}
	pthread_mutex_unlock(&c->lock);
	int rc = d->be.read(d->be.ctx, off, len, bypass_done, r);
	if (rc) {
		release_ents(c, r);
		read_free(r);
	}
	return rc;
}

/* ---- cached reads ---- */

static void read_complete(struct bc_read *r)
{
	struct bcache *c = r->d->c;
	int n = 0;
	if (!r->err) {
		uint64_t end = r->off + r->len;
		for (unsigned i = 0; i < r->nent; i++) {
			struct entry *e = r->ents[i];
			uint64_t bstart = e->blk << c->shift, bend = bstart + blen(e->dev, e->blk);
			uint64_t s = r->off > bstart ? r->off : bstart;
			uint64_t t = end < bend ? end : bend;
			r->iov[n].iov_base = e->buf + (s - bstart);
			r->iov[n].iov_len = t - s;
			n++;
		}
	}
	r->cb(r->arg, r->err, r->iov, n);
	release_ents(c, r);
	read_free(r);
}

static void fill_done(void *arg, int err, const void *data, size_t len)
{
	struct entry *e = arg;
	struct bcache *c = e->dev->c;
	struct bc_read *done = NULL;
	(void)data;
	(void)len;
	pthread_mutex_lock(&c->lock);
	for (struct waitnode *w = e->waiters; w; w = w->next) {
		if (err && !w->r->err)
			w->r->err = err;
		if (--w->r->pending == 0) {
			w->r->next_done = done;
			done = w->r;
		}
	}
	e->waiters = NULL;
	if (err || e->stale) {
		/* Failed, or a write started meanwhile: the waiters (who came first) get it, nobody else. */
		entry_drop(c, e);
	} else {
		e->state = E_VALID;
	}
	pthread_mutex_unlock(&c->lock);
	while (done) {
		struct bc_read *r = done;
		done = r->next_done;
		read_complete(r);
	}
}

/* Update st for a read of [off, off + len); returns whether it continues a stream. */
static bool stream_step(struct bcache_dev *d, struct bcache_stream *st, uint64_t off, size_t len)
{
	struct bcache *c = d->c;
	if (!st)
		return false;
	unsigned gen = atomic_load(&d->gen);
	if (st->gen != gen) {
		st->gen = gen;
		st->ra_end = 0; /* what it read ahead was dropped: read ahead again */
	}
	/* Exactly where the last read ended, or within the window (concurrent reads come a little out of order). */
	bool seq = off == st->next_off ||
		   (st->window && off + st->window >= st->next_off && off <= st->next_off + st->window);
	size_t ra_max = (size_t)c->n * c->bsz / 4 < RA_MAX_BYTES ? (size_t)c->n * c->bsz / 4 : RA_MAX_BYTES;
	if (seq && st->next_off) {
		uint64_t w = st->window ? 2ull * st->window : 2ull * c->bsz;
		st->window = (uint32_t)(w > ra_max ? ra_max : w);
	} else if (!seq) {
		st->window = 0;
		st->ra_end = 0;
	}
	if (off + len > st->next_off || !seq)
		st->next_off = off + len;
	return seq;
}

int bcache_read(struct bcache_dev *d, struct bcache_stream *st, uint64_t off, size_t len, bool direct,
		bcache_read_fn cb, void *arg)
{
	struct bcache *c = d->c;
	if (len == 0 || off >= dev_size(d) || len > dev_size(d) - off)
		return -EINVAL;
	uint64_t b0 = off >> c->shift, b1 = (off + len - 1) >> c->shift;
	unsigned nb = (unsigned)(b1 - b0 + 1);
	struct entry *fills[FILLS_MAX];
	unsigned nfills = 0;
	struct bc_read *r = read_get(d, nb); /* before the lock: it may wait for a completion */
	if (!r)
		return -ENOMEM;

	pthread_mutex_lock(&c->lock);
	bool seq = direct ? false : stream_step(d, st, off, len);
	if (direct || nb > FILLS_MAX / 2 || write_overlaps(d, b0, b1))
		return bypass_locked(d, r, off, len, cb, arg);
	unsigned missing = 0;
	for (uint64_t b = b0; b <= b1; b++) {
		struct entry *e = lookup(c, d, b);
		if (e && e->state == E_FILLING && e->stale)
			return bypass_locked(d, r, off, len, cb, arg);
		missing += !e;
	}
	/* Random reads that miss do not fill (no amplification, no pollution). */
	if (missing && !seq)
		return bypass_locked(d, r, off, len, cb, arg);
	read_init(r, d, off, len, nb, cb, arg);
	/* First pin what is there and make what is missing (pinned blocks cannot be evicted). */
	for (uint64_t b = b0; b <= b1; b++) {
		struct entry *e = lookup(c, d, b);
		if (!e) {
			e = entry_new(c, d, b, E_FILLING);
			if (!e) {
				/* Nothing evictable: undo, go to the backend. */
				for (unsigned i = 0; i < nfills; i++) {
					hash_remove(c, fills[i]);
					fills[i]->refs = 0;
					entry_free(c, fills[i]);
				}
				for (unsigned i = 0; i < nb; i++)
					if (r->ents[i] && r->ents[i]->state != E_FREE)
						unref(c, r->ents[i]);
				return bypass_locked(d, r, off, len, cb, arg);
			}
			fills[nfills++] = e;
		}
		e->refs++;
		r->ents[b - b0] = e;
	}
	for (uint64_t b = b0; b <= b1; b++) {
		struct entry *e = r->ents[b - b0];
		e->refbit = true;
		if (e->state == E_FILLING) {
			struct waitnode *w = &r->nodes[b - b0];
			w->r = r;
			w->next = e->waiters;
			e->waiters = w;
			r->pending++;
		}
		if (e->ra) {
			c->st.ra_used_bytes += blen(d, b);
			e->ra = false;
		}
	}
	c->st.misses += nfills;
	c->st.hits += nb - nfills;
	/* Read-ahead: keep the window ahead of this stream filled or filling. */
	if (seq && st->window) {
		uint64_t ra0 = st->ra_end > ((b1 + 1) << c->shift) ? st->ra_end : (b1 + 1) << c->shift;
		uint64_t ra1 = off + len + st->window;
		if (ra1 > dev_size(d))
			ra1 = dev_size(d);
		for (uint64_t pos = ra0; pos < ra1 && nfills < FILLS_MAX; pos += c->bsz) {
			uint64_t b = pos >> c->shift;
			if (lookup(c, d, b))
				continue;
			if (write_overlaps(d, b, b))
				break;
			struct entry *e = entry_new(c, d, b, E_FILLING);
			if (!e)
				break;
			e->ra = true;
			c->st.ra_bytes += blen(d, b);
			fills[nfills++] = e;
			st->ra_end = pos + c->bsz;
		}
	}
	bool done = r->pending == 0;
	pthread_mutex_unlock(&c->lock);

	for (unsigned i = 0; i < nfills; i++) {
		struct entry *e = fills[i];
		int rc = d->be.read_into(d->be.ctx, e->blk << c->shift, blen(d, e->blk), e->buf, fill_done, e);
		if (rc)
			fill_done(e, rc, NULL, 0);
	}
	if (done)
		read_complete(r);
	return 0;
}

/* ---- writes ---- */

static void writeback_start(struct bcache_dev *d, struct flush_waiter *fw);

/* Copy the part of [off, end) that falls in e's block from data (NULL: zeroes) into it.  Under the lock. */
static void copy_into(struct bcache *c, const struct bcache_dev *d, struct entry *e, uint64_t off, uint64_t end,
		      const void *data)
{
	uint64_t bstart = e->blk << c->shift, bend = bstart + blen(d, e->blk);
	uint64_t s = off > bstart ? off : bstart, t = end < bend ? end : bend;
	if (data) {
		memcpy(e->buf + (s - bstart), (const uint8_t *)data + (s - off), t - s);
		c->st.copied_bytes += t - s;
	} else
		memset(e->buf + (s - bstart), 0, t - s);
}

bool bcache_write_absorb(struct bcache_dev *d, uint64_t off, size_t len, const void *data)
{
	struct bcache *c = d->c;
	if (!c->wb || len == 0 || off >= dev_size(d) || len > dev_size(d) - off)
		return false;
	uint64_t b0 = off >> c->shift, b1 = (off + len - 1) >> c->shift, end = off + len;
	struct entry *pin[FILLS_MAX];
	bool made[FILLS_MAX];
	unsigned npin = 0;
	bool ok = true, nomem = false, pressure;
	if (b1 - b0 + 1 > FILLS_MAX)
		return false;
	pthread_mutex_lock(&c->lock);
	if (write_overlaps(d, b0, b1))
		ok = false;
	/* Pin every block of the range (pinned blocks cannot be evicted by the next allocation). */
	for (uint64_t b = b0; ok && b <= b1; b++) {
		struct entry *e = lookup(c, d, b);
		uint64_t bstart = b << c->shift;
		bool fresh = false;
		if (e) {
			ok = e->state == E_VALID;
		} else if (off <= bstart && end >= bstart + blen(d, b)) {
			e = entry_new(c, d, b, E_VALID);
			ok = fresh = e != NULL;
			nomem = !e;
		} else {
			ok = false; /* a partial block that is not cached: write through */
		}
		if (ok) {
			e->refs++;
			made[npin] = fresh;
			pin[npin++] = e;
		}
	}
	if (ok) {
		for (unsigned i = 0; i < npin; i++) {
			struct entry *e = pin[i];
			copy_into(c, d, e, off, end, data);
			dirty_range(c, d, e, off, end);
			e->zeroed = false; /* holds data now, whatever a zero range in flight does */
			e->refbit = true;
			if (e->ra) {
				e->ra = false; /* overwritten before it was read */
				c->st.ra_wasted_bytes += blen(d, e->blk);
			}
		}
		c->st.absorbed_writes++;
	}
	for (unsigned i = 0; i < npin; i++) {
		struct entry *e = pin[i];
		unref(c, e);
		if (!ok && made[i]) {
			hash_remove(c, e); /* made for this write, holds nothing */
			entry_free(c, e);
		}
	}
	pressure = ok ? c->ndirty * 2 > c->n : nomem && c->ndirty > 0;
	pthread_mutex_unlock(&c->lock);
	if (pressure)
		writeback_start(d, NULL);
	return ok;
}

struct bcache_write *bcache_write_begin(struct bcache_dev *d, uint64_t off, size_t len, const void *data)
{
	struct bcache *c = d->c;
	struct bcache_write *w = ctxpool_get(d->wctx); /* before the lock: it may wait for a write_end */
	uint64_t b0 = off >> c->shift, b1 = (off + len - 1) >> c->shift, end = off + len;
	pthread_mutex_lock(&c->lock);
	c->seq++;
	for (uint64_t b = b0; b <= b1; b++) {
		struct entry *e = lookup(c, d, b);
		if (!e)
			continue;
		if (e->state == E_FILLING) {
			e->stale = true;
		} else if (!w && !e->dirty && !e->flushing && !e->refs) {
			hash_remove(c, e); /* cannot track this write: drop what it changes */
			entry_free(c, e);
		} else {
			copy_into(c, d, e, off, end, data);
			if (e->flushing) {
				/* its write-back in flight carries the old bytes and a discard
				 * is not ordered after it: write those back once more */
				redirty_in_flight(c, d, e, off, end);
				e->zeroed = false;
			} else if (e->dirty && w && !data) {
				/* a whole dirty block the punch or zero range covers: once the
				 * target holds its zeroes, nothing is left to write back (a
				 * write-back now would undo the deallocation) */
				uint64_t bstart = b << c->shift;
				e->zeroed = off <= bstart && end >= bstart + blen(d, b);
			} else {
				e->zeroed = false; /* holds written bytes now */
			}
		}
	}
	if (w) {
		w->b0 = b0;
		w->b1 = b1;
		w->zero = !data;
		w->next = d->writes;
		d->writes = w;
	}
	pthread_mutex_unlock(&c->lock);
	return w;
}

void bcache_write_end(struct bcache_dev *d, struct bcache_write *w, int err)
{
	struct bcache *c = d->c;
	if (!w)
		return;
	pthread_mutex_lock(&c->lock);
	for (struct bcache_write **pp = &d->writes; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	for (uint64_t b = w->b0; b <= w->b1; b++) {
		struct entry *e = lookup(c, d, b);
		if (!e || e->state != E_VALID)
			continue;
		if (w->zero && e->zeroed) {
			/* The target holds the zeroes now (err 0), or may not (then the
			 * zeroes stay dirty and are written back, as the range promised). */
			if (!err) {
				set_clean(c, e);
				/* newer than what a read begun before may get: all of it */
				memset(e->wmap, 0xff, c->mwords * sizeof(*e->wmap));
				e->wb_seq = ++c->seq;
			}
			e->zeroed = false;
			continue;
		}
		/* The backend may not hold what begin copied into clean blocks: forget them. */
		if (err && !e->dirty && !e->flushing)
			entry_drop(c, e);
	}
	pthread_mutex_unlock(&c->lock);
	ctxpool_put(d->wctx, w);
}

/* ---- write-back ---- */

static void fw_sync_done(void *arg, int err, const void *data, size_t len)
{
	struct flush_waiter *fw = arg;
	(void)data;
	(void)len;
	fw->cb(fw->arg, fw->err ? fw->err : err, NULL, 0);
	free(fw);
}

static void run_waiters(struct flush_waiter *fw)
{
	while (fw) {
		struct flush_waiter *next = fw->next;
		if (fw->err || fw->nosync) {
			fw->cb(fw->arg, fw->err, NULL, 0);
			free(fw);
		} else {
			int rc = fw->d->be.sync(fw->d->be.ctx, fw_sync_done, fw);
			if (rc) {
				fw->cb(fw->arg, rc, NULL, 0);
				free(fw);
			}
		}
		fw = next;
	}
}

/* Called with the lock held: the waiters to run once the last write-back completed. */
static struct flush_waiter *take_waiters(struct bcache_dev *d)
{
	if (d->wb_inflight)
		return NULL;
	struct flush_waiter *fw = d->fw;
	d->fw = NULL;
	for (struct flush_waiter *f = fw; f; f = f->next)
		if (!f->err)
			f->err = d->wb_err;
	d->wb_err = 0;
	return fw;
}

static void wb_done(void *arg, int err, const void *data, size_t len)
{
	struct entry *e = arg;
	struct bcache_dev *d = e->dev;
	struct bcache *c = d->c;
	(void)data;
	(void)len;
	pthread_mutex_lock(&c->lock);
	if (err) {
		e->wb_failed = true;
		if (!d->wb_err)
			d->wb_err = err;
	}
	if (--e->wb_runs == 0) {
		e->flushing = false;
		if (e->wb_failed) {
			/* kept: the next flush tries again */
			for (size_t i = 0; i < c->mwords; i++)
				e->dmap[i] |= e->fmap[i];
			set_dirty(c, e);
		}
	}
	e->wb_seq = ++c->seq;
	unref(c, e);
	d->wb_inflight--;
	struct flush_waiter *fw = take_waiters(d);
	pthread_mutex_unlock(&c->lock);
	run_waiters(fw);
}

/*
 * Write back every dirty block of d: each run of its dirty logical blocks
 * is one backend write (a block dirty whole: one write of it); then fw
 * (may be NULL) runs once none is in flight.
 */
static void writeback_start(struct bcache_dev *d, struct flush_waiter *fw)
{
	struct bcache *c = d->c;
	struct wb_item {
		struct entry *e;
		unsigned runs; /* fmap may change once the last of them completed: stop there */
	} *list = malloc(c->n * sizeof(*list));
	unsigned cnt = 0, runs = 0;
	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; list && i < c->n; i++) {
		struct entry *e = &c->e[i];
		if (e->dev != d || e->state != E_VALID || !e->dirty || e->flushing)
			continue;
		memcpy(e->fmap, e->dmap, c->mwords * sizeof(*e->fmap));
		for (size_t k = 0; k < c->mwords; k++)
			e->wmap[k] |= e->dmap[k];
		set_clean(c, e); /* being written back: a zero range in flight no longer makes it clean */
		unsigned n = 0, i0, i1 = 0;
		while (next_run(e->fmap, i1, lbas(d, e->blk), &i0, &i1))
			n++;
		if (n == 0)
			continue; /* written only past a new end of the LUN: nowhere to write it */
		e->flushing = true;
		e->wb_failed = false;
		e->wb_runs = n;
		e->refs += n;
		runs += n;
		list[cnt++] = (struct wb_item){e, n};
	}
	d->wb_inflight += runs;
	c->st.writeback_blocks += cnt;
	c->st.writeback_flushes++;
	if (!list && fw && !fw->err)
		fw->err = -ENOMEM;
	if (fw) {
		fw->next = d->fw;
		d->fw = fw;
	}
	struct flush_waiter *ready = take_waiters(d);
	pthread_mutex_unlock(&c->lock);
	uint64_t handed = 0;
	for (unsigned i = 0; i < cnt; i++) {
		struct entry *e = list[i].e;
		unsigned i0, i1 = 0, n = lbas(d, e->blk), lbs = d->lbshift;
		for (unsigned k = 0; k < list[i].runs && next_run(e->fmap, i1, n, &i0, &i1); k++) {
			size_t at = (size_t)i0 << lbs, len = (size_t)(i1 - i0) << lbs;
			int rc = d->be.write(d->be.ctx, (e->blk << c->shift) + at, len, e->buf + at, wb_done, e);
			if (rc)
				wb_done(e, rc, NULL, 0);
			else
				handed += len;
		}
	}
	atomic_fetch_add_explicit(&c->wb_copied, handed, memory_order_relaxed);
	free(list);
	run_waiters(ready);
}

/* Start writing d's dirty blocks back; cb when done (then SYNCHRONIZE CACHE unless nosync). */
static int flush_start(struct bcache_dev *d, bool nosync, bcache_io_fn cb, void *arg)
{
	struct flush_waiter *fw = calloc(1, sizeof(*fw));
	if (!fw)
		return -ENOMEM;
	fw->d = d;
	fw->cb = cb;
	fw->arg = arg;
	fw->nosync = nosync;
	writeback_start(d, fw);
	return 0;
}

int bcache_flush(struct bcache_dev *d, bcache_io_fn cb, void *arg)
{
	return flush_start(d, false, cb, arg);
}

int bcache_writeback(struct bcache_dev *d, bcache_io_fn cb, void *arg)
{
	struct bcache *c = d->c;
	pthread_mutex_lock(&c->lock);
	bool idle = d->ndirty == 0 && d->wb_inflight == 0;
	pthread_mutex_unlock(&c->lock);
	if (idle) {
		cb(arg, 0, NULL, 0); /* nothing cached is newer than the target */
		return 0;
	}
	return flush_start(d, true, cb, arg);
}

static int by_off(const void *a, const void *b)
{
	const struct bcache_range *x = a, *y = b;
	return x->off < y->off ? -1 : x->off > y->off;
}

uint64_t bcache_dev_dirty(struct bcache_dev *d, struct bcache_range **ranges, size_t *n)
{
	struct bcache *c = d->c;
	struct bcache_range *r = NULL;
	size_t nr = 0, cap = 0;
	uint64_t bytes = 0;
	bool nomem = false;
	pthread_mutex_lock(&c->lock);
	for (unsigned k = 0; k < c->n; k++) {
		struct entry *e = &c->e[k];
		if (e->dev != d || e->state != E_VALID || !e->dirty)
			continue;
		unsigned i0, i1 = 0, lbs = d->lbshift;
		while (next_run(e->dmap, i1, lbas(d, e->blk), &i0, &i1)) {
			struct bcache_range one = {(e->blk << c->shift) + ((uint64_t)i0 << lbs), (uint64_t)(i1 - i0) << lbs};
			bytes += one.len;
			if (!ranges || nomem)
				continue;
			if (nr == cap) {
				size_t ncap = cap ? cap * 2 : 16;
				struct bcache_range *g = realloc(r, ncap * sizeof(*g));
				if (!g) {
					nomem = true;
					continue;
				}
				r = g;
				cap = ncap;
			}
			r[nr++] = one;
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (!ranges)
		return bytes;
	if (nomem || nr == 0) {
		free(r);
		r = NULL;
		nr = 0;
	}
	if (nr)
		qsort(r, nr, sizeof(*r), by_off);
	size_t m = 0;
	for (size_t i = 0; i < nr; i++) {
		if (m && r[m - 1].off + r[m - 1].len == r[i].off)
			r[m - 1].len += r[i].len;
		else
			r[m++] = r[i];
	}
	*ranges = r;
	*n = m;
	return bytes;
}

void bcache_dev_remove(struct bcache_dev *d)
{
	if (!d)
		return;
	struct bcache *c = d->c;
	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; i < c->n; i++) {
		struct entry *e = &c->e[i];
		if (e->dev != d)
			continue;
		if (e->state != E_DOOMED)
			hash_remove(c, e);
		set_clean(c, e);
		e->flushing = false;
		e->refs = 0;
		entry_free(c, e);
	}
	pthread_mutex_unlock(&c->lock);
	ctxpool_destroy(d->rctx);
	ctxpool_destroy(d->wctx);
	free(d);
}

uint64_t bcache_dev_invalidate(struct bcache_dev *d, uint64_t size)
{
	if (!d)
		return 0;
	struct bcache *c = d->c;
	uint64_t lost = 0;
	pthread_mutex_lock(&c->lock);
	atomic_store_explicit(&d->size, size, memory_order_release);
	c->seq++;
	atomic_fetch_add(&d->gen, 1);
	for (unsigned i = 0; i < c->n; i++) {
		struct entry *e = &c->e[i];
		if (e->dev != d || e->state == E_FREE || e->state == E_DOOMED || e->flushing)
			continue;
		if (e->dirty) {
			if ((e->blk << c->shift) < size || e->refs)
				continue; /* the newest data of a block that still exists */
			for (size_t k = 0; k < c->mwords; k++) /* beyond the LUN's new end: nowhere to write it */
				lost += (uint64_t)__builtin_popcountll(e->dmap[k]) << d->lbshift;
			set_clean(c, e);
		}
		if (e->state == E_FILLING) {
			e->stale = true; /* its waiting readers get it, then it is dropped */
			continue;
		}
		entry_drop(c, e);
	}
	pthread_mutex_unlock(&c->lock);
	return lost;
}

void bcache_dev_drop_clean(struct bcache_dev *d)
{
	if (d)
		bcache_dev_invalidate(d, dev_size(d));
}

bool bcache_dev_empty(struct bcache_dev *d) { return atomic_load(&d->ncached) == 0; }

void bcache_get_stats(struct bcache *c, struct bcache_stats *out)
{
	pthread_mutex_lock(&c->lock);
	*out = c->st;
	out->dirty_blocks = c->ndirty;
	out->copied_bytes += atomic_load_explicit(&c->wb_copied, memory_order_relaxed);
	pthread_mutex_unlock(&c->lock);
}
