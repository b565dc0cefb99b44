/* SPDX-License-Identifier: MIT */
/*
 * The block cache against a fake backend (a byte array): CLOCK eviction
 * and the memory budget, write-back and flush, and coherence of many
 * threads reading and writing overlapping ranges while the backend
 * completes out of order.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/bcache/bcache.h"

/* ---- the fake backend ---- */

struct op {
	int kind; /* 0 read (own buffer), 1 read_into, 2 write, 3 sync */
	uint64_t off;
	size_t len;
	void *buf;
	bcache_io_fn cb;
	void *arg;
	struct op *next;
};

struct fake {
	uint8_t *disk;
	uint64_t size;
	bool async;       /* complete on the fake's threads, in random order */
	bool gate;        /* async: hold completions while set */
	pthread_mutex_t lock;
	pthread_cond_t cv;
	struct op *q;
	unsigned nq;
	bool stop;
	pthread_t th[2];
	atomic_uint reads, fills, writes, syncs;
	int write_err;    /* not 0: every write fails with it, writing nothing (a target that is gone) */
};

static void op_run(struct fake *f, struct op *o)
{
	switch (o->kind) {
	case 0: {
		/* The data is taken when the target executes the read: now. */
		uint8_t *b = malloc(o->len);
		pthread_mutex_lock(&f->lock);
		memcpy(b, f->disk + o->off, o->len);
		pthread_mutex_unlock(&f->lock);
		o->cb(o->arg, 0, b, o->len);
		free(b);
		break;
	}
	case 1:
		pthread_mutex_lock(&f->lock);
		memcpy(o->buf, f->disk + o->off, o->len);
		pthread_mutex_unlock(&f->lock);
		o->cb(o->arg, 0, o->buf, o->len);
		break;
	default:
		o->cb(o->arg, 0, NULL, o->len);
		break;
	}
	free(o);
}

static void *fake_thread(void *arg)
{
	struct fake *f = arg;
	unsigned seed = (unsigned)(uintptr_t)pthread_self();
	pthread_mutex_lock(&f->lock);
	for (;;) {
		while (!f->stop && (!f->q || f->gate))
			pthread_cond_wait(&f->cv, &f->lock);
		if (!f->q && f->stop)
			break;
		if (!f->q || f->gate)
			continue;
		/* A random pending operation: completions come out of order. */
		unsigned pick = (unsigned)rand_r(&seed) % f->nq;
		struct op **pp = &f->q;
		while (pick--)
			pp = &(*pp)->next;
		struct op *o = *pp;
		*pp = o->next;
		f->nq--;
		pthread_mutex_unlock(&f->lock);
		if (rand_r(&seed) % 4 == 0)
			usleep((unsigned)rand_r(&seed) % 200);
		op_run(f, o);
		pthread_mutex_lock(&f->lock);
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

static int enqueue(struct fake *f, int kind, uint64_t off, size_t len, void *buf, bcache_io_fn cb, void *arg)
{
	struct op *o = calloc(1, sizeof(*o));
	*o = (struct op){.kind = kind, .off = off, .len = len, .buf = buf, .cb = cb, .arg = arg};
	if (!f->async) {
		op_run(f, o);
		return 0;
	}
	pthread_mutex_lock(&f->lock);
	o->next = f->q;
	f->q = o;
	f->nq++;
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->lock);
	return 0;
}

static int fk_read(void *ctx, uint64_t off, size_t len, bcache_io_fn cb, void *arg)
{
	struct fake *f = ctx;
	f->reads++;
	return enqueue(f, 0, off, len, NULL, cb, arg);
}

static int fk_read_into(void *ctx, uint64_t off, size_t len, void *buf, bcache_io_fn cb, void *arg)
{
	struct fake *f = ctx;
	f->fills++;
	return enqueue(f, 1, off, len, buf, cb, arg);
}

/* Writes reach the disk in submission order (as blkio orders overlapping writes); completions come later. */
static int fk_write(void *ctx, uint64_t off, size_t len, const void *buf, bcache_io_fn cb, void *arg)
{
	struct fake *f = ctx;
	f->writes++;
	if (f->write_err) {
		cb(arg, f->write_err, NULL, 0);
		return 0;
	}
	pthread_mutex_lock(&f->lock);
	memcpy(f->disk + off, buf, len);
	pthread_mutex_unlock(&f->lock);
	return enqueue(f, 2, off, len, NULL, cb, arg);
}

static int fk_sync(void *ctx, bcache_io_fn cb, void *arg)
{
	struct fake *f = ctx;
	f->syncs++;
	return enqueue(f, 3, 0, 0, NULL, cb, arg);
}

static void fake_init(struct fake *f, uint64_t size, bool async)
{
	memset(f, 0, sizeof(*f));
	f->disk = calloc(1, size);
	f->size = size;
	f->async = async;
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cv, NULL);
	if (async)
		for (int i = 0; i < 2; i++)
			pthread_create(&f->th[i], NULL, fake_thread, f);
}

static void fake_open_gate(struct fake *f)
{
	pthread_mutex_lock(&f->lock);
	f->gate = false;
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->lock);
}

static void fake_fini(struct fake *f)
{
	if (f->async) {
		pthread_mutex_lock(&f->lock);
		f->stop = true;
		f->gate = false;
		pthread_cond_broadcast(&f->cv);
		pthread_mutex_unlock(&f->lock);
		for (int i = 0; i < 2; i++)
			pthread_join(f->th[i], NULL);
	}
	free(f->disk);
}

static struct bcache_backend fake_backend(struct fake *f)
{
	return (struct bcache_backend){.ctx = f, .size = f->size, .lbsize = 512, .max_io = 1 << 20, .read = fk_read,
				       .read_into = fk_read_into, .write = fk_write, .sync = fk_sync};
}

/* ---- waiting for callbacks ---- */

struct waiter {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	bool done;
	int err;
	uint8_t *out; /* read: copy of the reply */
	size_t got;
};

static void waiter_init(struct waiter *w, uint8_t *out)
{
	memset(w, 0, sizeof(*w));
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cv, NULL);
	w->out = out;
}

static void waiter_signal(struct waiter *w, int err)
{
	pthread_mutex_lock(&w->lock);
	w->err = err;
	w->done = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->lock);
}

static int waiter_wait(struct waiter *w)
{
	pthread_mutex_lock(&w->lock);
	while (!w->done)
		pthread_cond_wait(&w->cv, &w->lock);
	pthread_mutex_unlock(&w->lock);
	return w->err;
}

static void read_cb(void *arg, int err, const struct iovec *iov, int n)
{
	struct waiter *w = arg;
	for (int i = 0; i < n; i++) {
		memcpy(w->out + w->got, iov[i].iov_base, iov[i].iov_len);
		w->got += iov[i].iov_len;
	}
	waiter_signal(w, err);
}

static void io_cb(void *arg, int err, const void *data, size_t len)
{
	(void)data;
	(void)len;
	waiter_signal(arg, err);
}

static size_t do_read(struct bcache_dev *d, struct bcache_stream *st, uint64_t off, size_t len, uint8_t *out)
{
	struct waiter w;
	waiter_init(&w, out);
	cr_assert_eq(bcache_read(d, st, off, len, false, read_cb, &w), 0);
	cr_assert_eq(waiter_wait(&w), 0);
	return w.got;
}

/* The gateway's write: kept by write-back, else written through with begin/end around it. */
static void do_write(struct bcache_dev *d, struct fake *f, uint64_t off, size_t len, const uint8_t *data)
{
	if (bcache_write_absorb(d, off, len, data))
		return;
	struct waiter w;
	waiter_init(&w, NULL);
	struct bcache_write *t = bcache_write_begin(d, off, len, data);
	fk_write(f, off, len, data, io_cb, &w);
	int err = waiter_wait(&w);
	bcache_write_end(d, t, err);
}

static int do_flush(struct bcache_dev *d)
{
	struct waiter w;
	waiter_init(&w, NULL);
	cr_assert_eq(bcache_flush(d, io_cb, &w), 0);
	return waiter_wait(&w);
}

#define BS 4096u

static void *blocks(unsigned n, void **bufs)
{
	uint8_t *mem = aligned_alloc(4096, (size_t)n * BS);
	for (unsigned i = 0; i < n; i++)
		bufs[i] = mem + (size_t)i * BS;
	return mem;
}

static bool cached(struct bcache *c, struct bcache_dev *d, uint64_t blk)
{
	struct bcache_stats a, b;
	uint8_t tmp[BS];
	bcache_get_stats(c, &a);
	do_read(d, NULL, blk * BS, BS, tmp);
	bcache_get_stats(c, &b);
	return b.hits == a.hits + 1;
}

/* ---- tests ---- */

Test(bcache, clock_evicts_unreferenced_clean_blocks_first)
{
	struct fake f;
	fake_init(&f, 64 * BS, false);
	void *bufs[4];
	void *mem = blocks(4, bufs);
	struct bcache *c;
	struct bcache_dev *d;
	cr_assert_eq(bcache_create(&c, BS, 4, bufs, true), 0);
	struct bcache_backend be = fake_backend(&f);
	cr_assert_eq(bcache_dev_add(c, &be, &d), 0);
	uint8_t data[BS];
	for (unsigned b = 0; b < 4; b++) {
		memset(data, 'a' + b, BS);
		cr_assert(bcache_write_absorb(d, b * BS, BS, data));
	}
	cr_assert_eq(do_flush(d), 0);
	cr_assert_eq(f.disk[3 * BS], 'd', "flush wrote the blocks back");
	/* Block 4 takes the slot of block 0: every block had its second chance. */
	memset(data, 'e', BS);
	cr_assert(bcache_write_absorb(d, 4 * BS, BS, data));
	cr_assert_not(cached(c, d, 0));
	/* Block 1 is read again (referenced); block 2 is not: block 5 evicts block 2. */
	cr_assert(cached(c, d, 1));
	memset(data, 'f', BS);
	cr_assert(bcache_write_absorb(d, 5 * BS, BS, data));
	cr_assert(cached(c, d, 1));
	cr_assert_not(cached(c, d, 2));
	cr_assert(cached(c, d, 3));
	cr_assert(cached(c, d, 4));
	cr_assert(cached(c, d, 5));
	struct bcache_stats st;
	bcache_get_stats(c, &st);
	cr_assert_eq(st.blocks, 4);
	cr_assert_eq(st.dirty_blocks, 2);
	cr_assert_eq(do_flush(d), 0);
	fake_fini(&f);
	bcache_dev_remove(d);
	bcache_destroy(c);
	free(mem);
}

Test(bcache, budget_holds_when_every_block_is_dirty)
{
	struct fake f;
	fake_init(&f, 64 * BS, true);
	f.gate = true; /* write-backs cannot complete: nothing becomes clean */
	void *bufs[4];
	void *mem = blocks(4, bufs);
	struct bcache *c;
	struct bcache_dev *d;
	cr_assert_eq(bcache_create(&c, BS, 4, bufs, true), 0);
	struct bcache_backend be = fake_backend(&f);
	cr_assert_eq(bcache_dev_add(c, &be, &d), 0);
	uint8_t data[BS];
	unsigned kept = 0;
	for (unsigned b = 0; b < 16; b++) {
		memset(data, 'A' + b, BS);
		kept += bcache_write_absorb(d, b * BS, BS, data);
	}
	cr_assert_eq(kept, 4, "four blocks of memory keep four blocks, then the caller writes through");
	struct bcache_stats st;
	bcache_get_stats(c, &st);
	cr_assert_leq(st.dirty_blocks + st.writeback_blocks, 4);
	cr_assert_geq(st.writeback_flushes, 1, "memory pressure started a write-back");
	/* A partial block that is not cached is never kept. */
	cr_assert_not(bcache_write_absorb(d, 40 * BS + 512, 512, data));
	fake_open_gate(&f);
	cr_assert_eq(do_flush(d), 0);
	for (unsigned b = 0; b < 4; b++)
		cr_assert_eq(f.disk[b * BS + 7], 'A' + b);
	fake_fini(&f);
	bcache_dev_remove(d);
	bcache_destroy(c);
	free(mem);
}

Test(bcache, writeback_reaches_the_backend_only_on_flush)
{
	struct fake f;
	fake_init(&f, 256 * BS, false);
	void *bufs[32];
	void *mem = blocks(32, bufs);
	struct bcache *c;
	struct bcache_dev *d;
	cr_assert_eq(bcache_create(&c, BS, 32, bufs, true), 0);
	struct bcache_backend be = fake_backend(&f);
	cr_assert_eq(bcache_dev_add(c, &be, &d), 0);
	uint8_t data[8 * BS], back[8 * BS];
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + 1);
	cr_assert(bcache_write_absorb(d, 16 * BS, sizeof(data), data));
	/* Partial write into a cached dirty block is kept too. */
	cr_assert(bcache_write_absorb(d, 16 * BS + 100, 50, data + 4000));
	memcpy(data + 100, data + 4000, 50);
	cr_assert_eq(f.writes, 0);
	cr_assert_eq(f.disk[16 * BS], 0, "nothing written before the flush");
	struct bcache_stats cp;
	bcache_get_stats(c, &cp);
	cr_assert_eq(cp.copied_bytes, 8 * BS + 50, "both writes were copied into the blocks");
	/* Reads see the dirty data, from the cache and around it. */
	cr_assert_eq(do_read(d, NULL, 16 * BS, sizeof(back), back), sizeof(back));
	cr_assert_eq(memcmp(back, data, sizeof(data)), 0);
	uint8_t edge[2 * BS];
	do_read(d, NULL, 15 * BS + BS / 2, sizeof(edge), edge);
	for (size_t i = 0; i < BS / 2; i++)
		cr_assert_eq(edge[i], 0);
	cr_assert_eq(memcmp(edge + BS / 2, data, BS + BS / 2), 0, "a bypass read gets the dirty bytes");
	struct bcache_stats st;
	bcache_get_stats(c, &st);
	cr_assert_eq(st.dirty_blocks, 8);
	cr_assert_eq(st.copied_bytes, 8 * BS + 50 + BS + BS / 2,
		     "reads from the blocks copy nothing, the bypass read's dirty bytes are copied over its reply");
	cr_assert_eq(do_flush(d), 0);
	cr_assert_eq(f.syncs, 1, "flush ends with the backend's sync");
	cr_assert_eq(f.writes, 8);
	cr_assert_eq(memcmp(f.disk + 16 * BS, data, sizeof(data)), 0);
	bcache_get_stats(c, &st);
	cr_assert_eq(st.dirty_blocks, 0);
	cr_assert_eq(st.writeback_blocks, 8);
	cr_assert_eq(st.copied_bytes, 8 * BS + 50 + BS + BS / 2 + 8 * BS, "the 8 blocks handed to write-back");
	cr_assert_eq(do_flush(d), 0);
	cr_assert_eq(f.writes, 8, "nothing dirty: nothing written again");
	fake_fini(&f);
	bcache_dev_remove(d);
	bcache_destroy(c);
	free(mem);
}

Test(bcache, sequential_reads_read_ahead_random_reads_do_not)
{
	struct fake f;
	fake_init(&f, 1024 * BS, false);
	for (size_t i = 0; i < f.size; i++)
		f.disk[i] = (uint8_t)(i / 512 + i);
	void *bufs[64];
	void *mem = blocks(64, bufs);
	struct bcache *c;
	struct bcache_dev *d;
	cr_assert_eq(bcache_create(&c, BS, 64, bufs, false), 0);
	struct bcache_backend be = fake_backend(&f);
	cr_assert_eq(bcache_dev_add(c, &be, &d), 0);
	struct bcache_stream st = {0};
	uint8_t out[2 * BS];
	for (uint64_t off = 0; off < 64 * BS; off += sizeof(out)) {
		do_read(d, &st, off, sizeof(out), out);
		cr_assert_eq(memcmp(out, f.disk + off, sizeof(out)), 0);
	}
	struct bcache_stats s;
	bcache_get_stats(c, &s);
	cr_assert_gt(s.ra_bytes, 0);
	cr_assert_gt(s.ra_used_bytes, s.ra_bytes / 2, "streamed read-ahead is used (%llu of %llu)",
		     (unsigned long long)s.ra_used_bytes, (unsigned long long)s.ra_bytes);
	cr_assert_gt(s.hits, s.misses);
	struct bcache_stream rs = {0};
	uint64_t ra = s.ra_bytes;
	unsigned seed = 1;
	for (int i = 0; i < 50; i++) {
		uint64_t off = (512 + (uint64_t)rand_r(&seed) % 500) * BS;
		do_read(d, &rs, off, 512, out);
		cr_assert_eq(memcmp(out, f.disk + off, 512), 0);
	}
	bcache_get_stats(c, &s);
	cr_assert_eq(s.ra_bytes, ra, "random reads start no read-ahead");
	cr_assert_geq(s.bypass_reads, 49);
	fake_fini(&f);
	bcache_dev_remove(d);
	bcache_destroy(c);
	free(mem);
}

/* ---- coherence under concurrent writers ---- */

#define SECTOR 512u
#define CO_SIZE (96u * BS)
#define CO_SECTORS (CO_SIZE / SECTOR)
#define CO_THREADS 4
#define CO_OPS 4000
#define MAX_VER (CO_THREADS * CO_OPS + 1)

struct co {
	struct bcache *c;
	struct bcache_dev *d;
	struct fake *f;
	atomic_uint_fast64_t tick;
	atomic_uint ver;
	pthread_mutex_t lock;                  /* guards the two arrays below */
	uint64_t end_tick[MAX_VER];            /* completion tick of each version; 0 = not yet */
	uint64_t max_start_done[CO_SECTORS];   /* latest start tick of a completed write, per sector */
	atomic_uint stale;
};

static void *co_thread(void *arg)
{
	struct co *co = arg;
	unsigned seed = (unsigned)(uintptr_t)pthread_self() ^ 0x5eed;
	struct bcache_stream st = {0};
	uint8_t *buf = malloc(16 * BS);
	uint64_t snap[16 * BS / SECTOR];
	for (int i = 0; i < CO_OPS; i++) {
		unsigned op = (unsigned)rand_r(&seed) % 10;
		uint64_t s0 = (uint64_t)rand_r(&seed) % CO_SECTORS;
		unsigned ns = 1 + (unsigned)rand_r(&seed) % (op < 3 ? 24 : 32);
		if (op == 9 && st.next_off && st.next_off + 8 * SECTOR <= CO_SIZE)
			s0 = st.next_off / SECTOR; /* now and then a streak of sequential reads */
		if (s0 + ns > CO_SECTORS)
			ns = (unsigned)(CO_SECTORS - s0);
		if (op < 3) {
			uint64_t v = atomic_fetch_add(&co->ver, 1) + 1;
			for (unsigned s = 0; s < ns; s++)
				for (unsigned k = 0; k < SECTOR / 8; k++)
					memcpy(buf + s * SECTOR + k * 8, &v, 8);
			uint64_t t0 = atomic_fetch_add(&co->tick, 1) + 1;
			do_write(co->d, co->f, s0 * SECTOR, ns * SECTOR, buf);
			uint64_t t1 = atomic_fetch_add(&co->tick, 1) + 1;
			pthread_mutex_lock(&co->lock);
			co->end_tick[v] = t1;
			for (unsigned s = 0; s < ns; s++)
				if (co->max_start_done[s0 + s] < t0)
					co->max_start_done[s0 + s] = t0;
			pthread_mutex_unlock(&co->lock);
		} else if (op == 3 && i % 20 == 3) {
			cr_assert_eq(do_flush(co->d), 0);
		} else {
			pthread_mutex_lock(&co->lock);
			for (unsigned s = 0; s < ns; s++)
				snap[s] = co->max_start_done[s0 + s];
			pthread_mutex_unlock(&co->lock);
			atomic_fetch_add(&co->tick, 1);
			do_read(co->d, &st, s0 * SECTOR, ns * SECTOR, buf);
			pthread_mutex_lock(&co->lock);
			/*
			 * Every word of every sector.  A read replies from the cache
			 * blocks outside the lock, so a sector written meanwhile may
			 * mix that write and the one before; but no word may be stale.
			 */
			for (unsigned s = 0; s < ns; s++) {
				for (unsigned k = 0; k < SECTOR / 8; k++) {
					uint64_t v;
					memcpy(&v, buf + s * SECTOR + 8 * k, 8);
					uint64_t end = v < MAX_VER ? co->end_tick[v] : 0;
					/* Stale: the version read was complete before a write that completed before this read began. */
					if (v >= MAX_VER || (end && end < snap[s]) || (v == 0 && snap[s])) {
						atomic_fetch_add(&co->stale, 1);
						cr_log_error("stale sector %llu, word %u: version %llu (ended %llu) but a write "
							     "started at %llu had completed",
							     (unsigned long long)(s0 + s), k, (unsigned long long)v,
							     (unsigned long long)end, (unsigned long long)snap[s]);
						break;
					}
				}
			}
			pthread_mutex_unlock(&co->lock);
		}
	}
	free(buf);
	return NULL;
}

static void coherence_run(bool writeback)
{
	struct fake f;
	fake_init(&f, CO_SIZE, true);
	void *bufs[16];
	void *mem = blocks(16, bufs); /* a sixth of the device: evictions all the time */
	struct co *co = calloc(1, sizeof(*co));
	pthread_mutex_init(&co->lock, NULL);
	co->f = &f;
	cr_assert_eq(bcache_create(&co->c, BS, 16, bufs, writeback), 0);
	struct bcache_backend be = fake_backend(&f);
	cr_assert_eq(bcache_dev_add(co->c, &be, &co->d), 0);
	pthread_t th[CO_THREADS];
	for (int i = 0; i < CO_THREADS; i++)
		pthread_create(&th[i], NULL, co_thread, co);
	for (int i = 0; i < CO_THREADS; i++)
		pthread_join(th[i], NULL);
	cr_assert_eq(atomic_load(&co->stale), 0, "%u stale sectors read", atomic_load(&co->stale));
	cr_assert_eq(do_flush(co->d), 0);
	/* After the flush the backend and the cache agree on every byte. */
	uint8_t *out = malloc(CO_SIZE);
	for (uint64_t off = 0; off < CO_SIZE; off += 8 * BS)
		do_read(co->d, NULL, off, 8 * BS, out + off);
	cr_assert_eq(memcmp(out, f.disk, CO_SIZE), 0);
	struct bcache_stats st;
	bcache_get_stats(co->c, &st);
	cr_assert_gt(st.hits, 0);
	cr_assert_eq(st.dirty_blocks, 0);
	if (writeback)
		cr_assert_gt(st.absorbed_writes, 0);
	free(out);
	fake_fini(&f); /* its threads may still be returning from callbacks */
	bcache_dev_remove(co->d);
	bcache_destroy(co->c);
	free(mem);
	free(co);
}

Test(bcache, concurrent_writers_never_read_stale_write_through, .timeout = 120) { coherence_run(false); }

Test(bcache, concurrent_writers_never_read_stale_write_back, .timeout = 120) { coherence_run(true); }

/* ---- what another initiator wrote, and operations the target answers ---- */

struct env {
	struct fake f;
	void *bufs[32];
	void *mem;
	struct bcache *c;
	struct bcache_dev *d;
};

static void env_init(struct env *v, bool writeback)
{
	fake_init(&v->f, 256 * BS, false);
	v->mem = blocks(32, v->bufs);
	cr_assert_eq(bcache_create(&v->c, BS, 32, v->bufs, writeback), 0);
	struct bcache_backend be = fake_backend(&v->f);
	cr_assert_eq(bcache_dev_add(v->c, &be, &v->d), 0);
}

static void env_fini(struct env *v)
{
	fake_fini(&v->f);
	bcache_dev_remove(v->d);
	bcache_destroy(v->c);
	free(v->mem);
}

static uint64_t dirty_blocks(struct bcache *c)
{
	struct bcache_stats st;
	bcache_get_stats(c, &st);
	return st.dirty_blocks;
}

/* Another initiator writes the target: the fake's disk changes behind the cache. */
static void other_initiator_writes(struct fake *f, uint64_t off, size_t len, uint8_t val)
{
	memset(f->disk + off, val, len);
}

static size_t do_read_direct(struct bcache_dev *d, uint64_t off, size_t len, uint8_t *out)
{
	struct waiter w;
	waiter_init(&w, out);
	cr_assert_eq(bcache_read(d, NULL, off, len, true, read_cb, &w), 0);
	cr_assert_eq(waiter_wait(&w), 0);
	return w.got;
}

Test(bcache, drop_clean_shows_another_initiators_writes_and_keeps_dirty_blocks)
{
	struct env v;
	env_init(&v, true);
	struct bcache_stream st = {0};
	uint8_t buf[4 * BS], mine[BS];
	/* blocks 0..3 cached clean (a sequential reader), block 8 dirty (ours) */
	do_read(v.d, &st, 0, 2 * BS, buf);
	do_read(v.d, &st, 2 * BS, 2 * BS, buf);
	cr_assert(cached(v.c, v.d, 1));
	memset(mine, 0x55, sizeof(mine));
	cr_assert(bcache_write_absorb(v.d, 8 * BS, BS, mine));
	other_initiator_writes(&v.f, 0, 16 * BS, 0xaa);
	do_read(v.d, NULL, 0, BS, buf);
	cr_assert_eq(buf[0], 0, "before: the clean cached block (stale) is what a read sees");
	bcache_dev_drop_clean(v.d);
	cr_assert_not(cached(v.c, v.d, 1), "clean blocks are gone");
	do_read(v.d, &st, 0, 4 * BS, buf);
	for (size_t i = 0; i < sizeof(buf); i++)
		cr_assert_eq(buf[i], 0xaa, "after the drop a read sees the other initiator's byte %zu", i);
	do_read(v.d, NULL, 8 * BS, BS, buf);
	cr_assert_eq(memcmp(buf, mine, BS), 0, "our dirty block is newer than the target and stays");
	cr_assert_eq(dirty_blocks(v.c), 1);
	cr_assert_eq(do_flush(v.d), 0);
	cr_assert_eq(memcmp(v.f.disk + 8 * BS, mine, BS), 0);
	env_fini(&v);
}

Test(bcache, drop_clean_restarts_a_streams_read_ahead)
{
	struct env v;
	env_init(&v, false);
	struct bcache_stream st = {0};
	uint8_t buf[2 * BS];
	for (uint64_t off = 0; off < 8 * BS; off += 2 * BS)
		do_read(v.d, &st, off, 2 * BS, buf);
	struct bcache_stats a, b;
	bcache_get_stats(v.c, &a);
	cr_assert_gt(a.ra_bytes, 0);
	cr_assert_gt(st.ra_end, 8 * BS);
	other_initiator_writes(&v.f, 8 * BS, 16 * BS, 0x77);
	bcache_dev_drop_clean(v.d);
	do_read(v.d, &st, 8 * BS, 2 * BS, buf);
	cr_assert_eq(buf[0], 0x77);
	bcache_get_stats(v.c, &b);
	cr_assert_gt(b.ra_bytes, a.ra_bytes, "the window ahead is read again");
	do_read(v.d, &st, 10 * BS, 2 * BS, buf);
	cr_assert_eq(buf[BS], 0x77, "read ahead after the drop: new data");
	env_fini(&v);
}

Test(bcache, drop_clean_makes_a_fill_in_flight_not_kept)
{
	struct fake f;
	fake_init(&f, 256 * BS, true);
	void *bufs[32];
	void *mem = blocks(32, bufs);
	struct bcache *c;
	struct bcache_dev *d;
	cr_assert_eq(bcache_create(&c, BS, 32, bufs, false), 0);
	struct bcache_backend be = fake_backend(&f);
	cr_assert_eq(bcache_dev_add(c, &be, &d), 0);
	struct bcache_stream st = {0};
	uint8_t buf[2 * BS];
	do_read(d, &st, 0, 2 * BS, buf);
	/* the next sequential read's fill is held in flight while the LUN is dropped */
	pthread_mutex_lock(&f.lock);
	f.gate = true;
	pthread_mutex_unlock(&f.lock);
	struct waiter w;
	waiter_init(&w, buf);
	cr_assert_eq(bcache_read(d, &st, 2 * BS, 2 * BS, false, read_cb, &w), 0);
	bcache_dev_drop_clean(d);
	fake_open_gate(&f);
	cr_assert_eq(waiter_wait(&w), 0);
	usleep(20000); /* read-ahead fills complete */
	memset(f.disk + 2 * BS, 0x31, 2 * BS);
	do_read(d, NULL, 2 * BS, 2 * BS, buf);
	cr_assert_eq(buf[0], 0x31, "a fill that was in flight at the drop is not kept");
	fake_fini(&f);
	bcache_dev_remove(d);
	bcache_destroy(c);
	free(mem);
}

Test(bcache, writeback_without_sync_puts_dirty_data_on_the_target)
{
	struct env v;
	env_init(&v, true);
	struct waiter w;
	waiter_init(&w, NULL);
	cr_assert_eq(bcache_writeback(v.d, io_cb, &w), 0);
	cr_assert(w.done, "nothing dirty: answered at once");
	cr_assert_eq(v.f.writes, 0);
	uint8_t data[3 * BS];
	memset(data, 0x42, sizeof(data));
	cr_assert(bcache_write_absorb(v.d, 4 * BS, sizeof(data), data));
	cr_assert_eq(v.f.disk[4 * BS], 0, "absorbed: not on the target yet (a SEEK_DATA there would say hole)");
	waiter_init(&w, NULL);
	cr_assert_eq(bcache_writeback(v.d, io_cb, &w), 0);
	cr_assert_eq(waiter_wait(&w), 0);
	cr_assert_eq(memcmp(v.f.disk + 4 * BS, data, sizeof(data)), 0, "on the target before the answer");
	cr_assert_eq(v.f.writes, 3);
	cr_assert_eq(v.f.syncs, 0, "no SYNCHRONIZE CACHE");
	cr_assert_eq(dirty_blocks(v.c), 0);
	env_fini(&v);
}

/* A punch or zero range as the gateway does it: begin, the target zeroes the range, end. */
static void do_zero(struct bcache_dev *d, struct fake *f, uint64_t off, size_t len, int err)
{
	struct bcache_write *t = bcache_write_begin(d, off, len, NULL);
	if (!err)
		memset(f->disk + off, 0, len);
	bcache_write_end(d, t, err);
}

Test(bcache, punch_over_dirty_clean_and_absent_blocks)
{
	struct env v;
	env_init(&v, true);
	uint8_t data[4 * BS], buf[8 * BS];
	memset(data, 0x66, sizeof(data));
	memset(v.f.disk, 0x11, 16 * BS);
	/* blocks 0..3 dirty, 4..5 clean cached, 6..7 absent */
	cr_assert(bcache_write_absorb(v.d, 0, sizeof(data), data));
	struct bcache_stream st = {0};
	do_read(v.d, &st, 4 * BS, BS, buf);
	do_read(v.d, &st, 5 * BS, BS, buf);
	cr_assert(cached(v.c, v.d, 5));
	cr_assert_eq(dirty_blocks(v.c), 4);
	/* punch from the middle of block 0 to the middle of block 7 */
	do_zero(v.d, &v.f, BS / 2, 7 * BS, 0);
	cr_assert_eq(dirty_blocks(v.c), 1, "the whole dirty blocks punched are clean: only block 0 is left");
	do_read(v.d, NULL, 0, sizeof(buf), buf);
	for (size_t i = 0; i < sizeof(buf); i++)
		cr_assert_eq(buf[i], i < BS / 2 ? 0x66 : i < BS / 2 + 7 * BS ? 0 : 0x11, "byte %zu", i);
	unsigned writes = v.f.writes;
	cr_assert_eq(do_flush(v.d), 0);
	cr_assert_eq(v.f.writes, writes + 1, "only block 0 is written back (the punched blocks stay unallocated)");
	cr_assert_eq(memcmp(v.f.disk, data, BS / 2), 0);
	for (size_t i = BS / 2; i < BS / 2 + 7 * BS; i++)
		cr_assert_eq(v.f.disk[i], 0);
	env_fini(&v);
}

Test(bcache, failed_zero_range_keeps_the_zeroes_dirty)
{
	struct env v;
	env_init(&v, true);
	uint8_t data[2 * BS], buf[2 * BS];
	memset(data, 0x66, sizeof(data));
	cr_assert(bcache_write_absorb(v.d, 0, sizeof(data), data));
	do_zero(v.d, &v.f, 0, 2 * BS, -EIO);
	cr_assert_eq(dirty_blocks(v.c), 2, "the target may not hold the zeroes: they are written back");
	do_read(v.d, NULL, 0, sizeof(buf), buf);
	cr_assert_eq(buf[0], 0);
	memset(v.f.disk, 0x99, 2 * BS);
	cr_assert_eq(do_flush(v.d), 0);
	cr_assert_eq(v.f.disk[0], 0);
	cr_assert_eq(v.f.disk[2 * BS - 1], 0);
	env_fini(&v);
}

Test(bcache, a_write_after_the_zero_range_began_stays_dirty)
{
	struct env v;
	env_init(&v, true);
	uint8_t data[BS], buf[BS];
	memset(data, 0x66, sizeof(data));
	cr_assert(bcache_write_absorb(v.d, 0, BS, data));
	struct bcache_write *t = bcache_write_begin(v.d, 0, BS, NULL);
	memset(data, 0x67, sizeof(data));
	cr_assert(bcache_write_absorb(v.d, 0, BS, data) == false, "overlaps the zero range in flight: written through");
	struct bcache_write *t2 = bcache_write_begin(v.d, 0, BS, data);
	memcpy(v.f.disk, data, BS);
	bcache_write_end(v.d, t2, 0);
	bcache_write_end(v.d, t, 0);
	do_read(v.d, NULL, 0, BS, buf);
	cr_assert_eq(buf[0], 0x67);
	env_fini(&v);
}

Test(bcache, direct_reads_over_dirty_clean_and_absent_blocks)
{
	struct env v;
	env_init(&v, true);
	uint8_t data[BS], buf[3 * BS];
	memset(data, 0x66, sizeof(data));
	cr_assert(bcache_write_absorb(v.d, 0, BS, data)); /* block 0 dirty */
	struct bcache_stream st = {0};
	do_read(v.d, &st, 0, BS, buf);
	do_read(v.d, &st, BS, BS, buf); /* block 1 clean (a sequential read fills) */
	cr_assert(cached(v.c, v.d, 1));
	other_initiator_writes(&v.f, 0, 3 * BS, 0x22); /* block 2 absent */
	do_read_direct(v.d, 0, sizeof(buf), buf);
	for (size_t i = 0; i < sizeof(buf); i++)
		cr_assert_eq(buf[i], i < BS ? 0x66 : 0x22, "O_DIRECT byte %zu: dirty from the cache, else the target", i);
	env_fini(&v);
}

/*
 * Blocks 1 and 2 cached clean; another initiator then writes LBAs 12..15
 * ('B') and 18 ('C') behind the cache; this mount writes LBA 8 and a part
 * of 9 (a run), a part of LBA 11, a part of LBA 17 and LBA 19 (512-byte
 * logical blocks, 4 KiB cache blocks).  *want: what the LUN must then hold
 * from BS to 3 * BS.
 */
static void partly_written_blocks(struct env *v, uint8_t *want)
{
	struct bcache_stream st = {0};
	uint8_t buf[2 * BS], a[600];
	do_read(v->d, &st, 0, 2 * BS, buf);
	do_read(v->d, &st, 2 * BS, 2 * BS, buf);
	cr_assert(cached(v->c, v->d, 1));
	cr_assert(cached(v->c, v->d, 2));
	other_initiator_writes(&v->f, BS + 2048, 2048, 'B');
	other_initiator_writes(&v->f, 2 * BS + 1024, 512, 'C');
	memset(a, 'A', sizeof(a));
	cr_assert(bcache_write_absorb(v->d, BS, 600, a), "LBA 8 and part of 9");
	cr_assert(bcache_write_absorb(v->d, BS + 3 * 512 + 100, 10, a), "part of LBA 11");
	cr_assert(bcache_write_absorb(v->d, 2 * BS + 512, 100, a), "part of LBA 17");
	cr_assert(bcache_write_absorb(v->d, 2 * BS + 3 * 512, 512, a), "LBA 19, next to 18 that C wrote");
	cr_assert_eq(dirty_blocks(v->c), 2);
	memset(want, 0, 2 * BS);
	memset(want, 'A', 600);
	memset(want + 3 * 512 + 100, 'A', 10);
	memset(want + 2048, 'B', 2048);
	memset(want + BS + 512, 'A', 100);
	memset(want + BS + 1024, 'C', 512);
	memset(want + BS + 1536, 'A', 512);
}

Test(bcache, writeback_sends_only_the_logical_blocks_written_here)
{
	struct env v;
	env_init(&v, true);
	uint8_t want[2 * BS];
	partly_written_blocks(&v, want);
	unsigned writes = v.f.writes;
	cr_assert_eq(do_flush(v.d), 0);
	for (size_t i = 0; i < sizeof(want); i++)
		cr_assert_eq(v.f.disk[BS + i], want[i], "LUN byte %zu: ours where we wrote, else the other initiator's",
			     BS + i);
	cr_assert_eq(v.f.writes, writes + 4, "runs: LBAs 8-9, 11, 17, 19 (%u writes)", v.f.writes - writes);
	cr_assert_eq(dirty_blocks(v.c), 0);
	cr_assert_eq(do_flush(v.d), 0);
	cr_assert_eq(v.f.writes, writes + 4, "nothing dirty: nothing written again");
	env_fini(&v);
}

Test(bcache, direct_reads_lay_only_the_logical_blocks_written_here_over_the_target)
{
	struct env v;
	env_init(&v, true);
	uint8_t want[2 * BS], buf[2 * BS];
	partly_written_blocks(&v, want);
	do_read_direct(v.d, BS, sizeof(buf), buf);
	for (size_t i = 0; i < sizeof(buf); i++)
		cr_assert_eq(buf[i], want[i], "O_DIRECT byte %zu: ours where we wrote, else the target's", BS + i);
	env_fini(&v);
}

/* What is not on the target: the logical blocks written here, by byte range, until a write-back succeeds. */
Test(bcache, dirty_report_names_the_logical_blocks_not_written_back)
{
	struct env v;
	env_init(&v, true);
	uint8_t want[2 * BS];
	partly_written_blocks(&v, want);
	struct bcache_range *r = NULL;
	size_t n = 99;
	cr_assert_eq(bcache_dev_dirty(v.d, NULL, NULL), 2560, "LBAs 8, 9, 11, 17 and 19");
	cr_assert_eq(bcache_dev_dirty(v.d, &r, &n), 2560);
	cr_assert_eq(n, 4);
	static const struct bcache_range runs[] = {
		{BS, 1024}, {BS + 3 * 512, 512}, {2 * BS + 512, 512}, {2 * BS + 3 * 512, 512}};
	for (size_t i = 0; i < 4; i++)
		cr_assert(r[i].off == runs[i].off && r[i].len == runs[i].len, "range %zu: %llu+%llu", i,
			  (unsigned long long)r[i].off, (unsigned long long)r[i].len);
	free(r);

	/* the target gone: the write-back fails, the data stays dirty; adjacent blocks make one range */
	uint8_t data[2 * BS];
	memset(data, 'D', sizeof(data));
	cr_assert(bcache_write_absorb(v.d, 2 * BS, 2 * BS, data), "blocks 2 and 3 whole");
	v.f.write_err = -ETIMEDOUT;
	cr_assert_eq(do_flush(v.d), -ETIMEDOUT);
	r = NULL;
	cr_assert_eq(bcache_dev_dirty(v.d, &r, &n), 1536 + 2 * BS);
	cr_assert_eq(n, 3);
	cr_assert(r[0].off == BS && r[0].len == 1024);
	cr_assert(r[1].off == BS + 3 * 512 && r[1].len == 512);
	cr_assert(r[2].off == 2 * BS && r[2].len == 2 * BS, "blocks 2 and 3 as one range: %llu+%llu",
		  (unsigned long long)r[2].off, (unsigned long long)r[2].len);
	free(r);

	/* written back at last: nothing left */
	v.f.write_err = 0;
	cr_assert_eq(do_flush(v.d), 0);
	r = (struct bcache_range *)1;
	cr_assert_eq(bcache_dev_dirty(v.d, &r, &n), 0);
	cr_assert(r == NULL && n == 0);
	env_fini(&v);
}
