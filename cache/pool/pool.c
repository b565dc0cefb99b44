/* SPDX-License-Identifier: MIT */
#include "pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

struct buf_pool {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	uint8_t *base;
	size_t slice_size, len;
	unsigned nslices, max_in_use;
	unsigned nfree;       /* changed under the lock, with atomic stores: pool_spares_idle reads it without */
	unsigned waiting;     /* buf_pool_get callers in pthread_cond_wait: a put signals only then */
	unsigned registrations;
	unsigned *free_stack; /* indices of free slices; top = nfree - 1 */
};

int buf_pool_create(struct buf_pool **out, size_t slice_size, unsigned nslices)
{
	if (!slice_size || !nslices)
		return -EINVAL;
	slice_size = (slice_size + 4095) & ~(size_t)4095;
	if (slice_size > SIZE_MAX / nslices)
		return -EINVAL;
	struct buf_pool *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->slice_size = slice_size;
	p->nslices = nslices;
	p->len = slice_size * nslices;
	p->free_stack = calloc(nslices, sizeof(*p->free_stack));
	p->base = mmap(NULL, p->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!p->free_stack || p->base == MAP_FAILED) {
		if (p->base != MAP_FAILED && p->base)
			munmap(p->base, p->len);
		free(p->free_stack);
		free(p);
		return -ENOMEM;
	}
	madvise(p->base, p->len, MADV_HUGEPAGE);
	for (unsigned i = 0; i < nslices; i++)
		p->free_stack[i] = nslices - 1 - i;
	p->nfree = nslices;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cv, NULL);
	*out = p;
	return 0;
}

/* The number of the slice that starts at b, one of p's. */
static unsigned slice_no(const struct buf_pool *p, const uint8_t *b)
{
	return (unsigned)((size_t)(b - p->base) / p->slice_size);
}

static void *take(struct buf_pool *p, unsigned *index)
{
	unsigned n = p->nfree - 1;
	unsigned i = p->free_stack[n];
	__atomic_store_n(&p->nfree, n, __ATOMIC_RELAXED);
	unsigned used = p->nslices - n;
	if (used > p->max_in_use)
		p->max_in_use = used;
	if (index)
		*index = i;
	return p->base + (size_t)i * p->slice_size;
}

static _Thread_local bool nowait;

void pool_nowait_set(bool on) { nowait = on; }

bool pool_nowait(void) { return nowait; }

/*
 * The calling thread's spares: slices its held puts gave back
 * (pool_hold_end_keep), free to use again, that its own gets take before
 * the pool's lock, until pool_spares_return.  Of one pool at a time.
 */
#define SPARES_MAX 128
static _Thread_local struct buf_pool *spare_pool;
static _Thread_local void *spares[SPARES_MAX];
static _Thread_local unsigned nspares;
static _Thread_local bool spares_moved; /* taken or made since the last pool_spares_idle */

/* A spare of p for the calling thread, or NULL. */
static void *spare_take(struct buf_pool *p, unsigned *index)
{
	if (!nspares || spare_pool != p)
		return NULL;
	uint8_t *s = spares[--nspares];
	spares_moved = true;
	if (index)
		*index = slice_no(p, s);
	return s;
}

void *buf_pool_get(struct buf_pool *p, unsigned *index)
{
	void *spare = spare_take(p, index);
	if (spare)
		return spare;
	if (nowait)
		return buf_pool_tryget(p, index);
	pthread_mutex_lock(&p->lock);
	while (p->nfree == 0) {
		__atomic_fetch_add(&p->waiting, 1, __ATOMIC_RELAXED); /* under the lock; pool_spares_idle reads it without */
		pthread_cond_wait(&p->cv, &p->lock);
		__atomic_fetch_sub(&p->waiting, 1, __ATOMIC_RELAXED);
	}
	void *s = take(p, index);
	pthread_mutex_unlock(&p->lock);
	return s;
}

void *buf_pool_tryget(struct buf_pool *p, unsigned *index)
{
	void *s = spare_take(p, index);
	if (s)
		return s;
	pthread_mutex_lock(&p->lock);
	if (p->nfree)
		s = take(p, index);
	pthread_mutex_unlock(&p->lock);
	return s;
}

/* The calling thread's held puts (pool_hold_begin). */
struct held_put {
	struct buf_pool *p;
	void *slice;
};
static _Thread_local bool holding;
static _Thread_local struct held_put *held; /* also under held_key, which frees it when the thread ends */
static _Thread_local size_t nheld, held_cap;
static pthread_key_t held_key;
static pthread_once_t held_once = PTHREAD_ONCE_INIT;

static void held_key_make(void) { pthread_key_create(&held_key, free); }

void pool_hold_begin(void) { holding = true; }

static void hold(struct buf_pool *p, void *slice)
{
	if (nheld == held_cap) {
		size_t cap = held_cap ? 2 * held_cap : 64;
		struct held_put *n = realloc(held, cap * sizeof(*n));
		if (!n) {
			fprintf(stderr, "iserfuse: out of memory to hold a returned slice\n");
			abort(); /* returning it now could hand out bytes a queued write still reads */
		}
		held = n;
		held_cap = cap;
		pthread_once(&held_once, held_key_make);
		pthread_setspecific(held_key, held);
	}
	held[nheld++] = (struct held_put){p, slice};
}

/* Slice b back on p's free stack.  Lock held. */
static void put_locked(struct buf_pool *p, const uint8_t *b)
{
	if (p->nfree == p->nslices) {
		fprintf(stderr, "iserfuse: buf_pool_put: slice returned twice\n");
		abort();
	}
	p->free_stack[p->nfree] = slice_no(p, b);
	__atomic_store_n(&p->nfree, p->nfree + 1, __ATOMIC_RELAXED);
}

/* Wake the waiters that added slices can serve (added of them came back).  Lock held. */
static void wake_locked(struct buf_pool *p, unsigned added)
{
	if (p->waiting && added > 1)
		pthread_cond_broadcast(&p->cv); /* more than one slice: as many waiters may go */
	else if (p->waiting && added)
		pthread_cond_signal(&p->cv);
}

/* Held puts from the first'th on back to their pools: a run of puts to one pool in one lock round. */
static void held_return(size_t first)
{
	for (size_t i = first; i < nheld;) {
		struct buf_pool *p = held[i].p;
		pthread_mutex_lock(&p->lock);
		unsigned before = p->nfree;
		for (; i < nheld && held[i].p == p; i++)
			put_locked(p, held[i].slice);
		wake_locked(p, p->nfree - before);
		pthread_mutex_unlock(&p->lock);
	}
	nheld = 0;
}

void pool_hold_end(void)
{
	holding = false;
	held_return(0);
}

void pool_hold_end_keep(void)
{
	holding = false;
	size_t i = 0;
	struct buf_pool *p = nheld ? held[0].p : NULL;
	/* the first run of puts to one pool, unless a thread waits on it: then every slice goes back */
	if (p && (!nspares || p == spare_pool) && !__atomic_load_n(&p->waiting, __ATOMIC_RELAXED)) {
		spare_pool = p;
		for (; i < nheld && held[i].p == p && nspares < SPARES_MAX; i++)
			spares[nspares++] = held[i].slice;
		spares_moved = spares_moved || i > 0;
	}
	held_return(i);
}

void pool_spares_return(void)
{
	if (!nspares)
		return;
	struct buf_pool *p = spare_pool;
	pthread_mutex_lock(&p->lock);
	for (unsigned i = 0; i < nspares; i++)
		put_locked(p, spares[i]);
	wake_locked(p, nspares);
	pthread_mutex_unlock(&p->lock);
	nspares = 0;
}

bool pool_spares_idle(void)
{
	bool moved = spares_moved;
	spares_moved = false;
	if (!nspares)
		return false;
	/*
	 * Kept while used, no thread waits on the pool and it has slices of its
	 * own free (a reader's tryget that finds none falls back to a copy).
	 * Read without the lock: a waiter that comes later waits one short wait
	 * more.
	 */
	const struct buf_pool *p = spare_pool;
	if (moved && !__atomic_load_n(&p->waiting, __ATOMIC_RELAXED) && __atomic_load_n(&p->nfree, __ATOMIC_RELAXED))
		return true;
	pool_spares_return();
	return false;
}

void buf_pool_put(struct buf_pool *p, void *slice)
{
	uint8_t *b = slice;
	if (b < p->base || b >= p->base + p->len || (size_t)(b - p->base) % p->slice_size) {
		fprintf(stderr, "iserfuse: buf_pool_put of a pointer outside the pool\n");
		abort();
	}
	if (holding) {
		hold(p, slice);
		return;
	}
	pthread_mutex_lock(&p->lock);
	put_locked(p, b);
	if (p->waiting)
		pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->lock);
}

int buf_pool_index(const struct buf_pool *p, const void *slice, unsigned *index)
{
	const uint8_t *b = slice;
	if (b < p->base || b >= p->base + p->len || (size_t)(b - p->base) % p->slice_size)
		return -EINVAL;
	*index = slice_no(p, b);
	return 0;
}

size_t buf_pool_slice_size(const struct buf_pool *p) { return p->slice_size; }
unsigned buf_pool_nslices(const struct buf_pool *p) { return p->nslices; }
void *buf_pool_base(const struct buf_pool *p) { return p->base; }
size_t buf_pool_len(const struct buf_pool *p) { return p->len; }

unsigned buf_pool_in_use(struct buf_pool *p)
{
	pthread_mutex_lock(&p->lock);
	unsigned n = p->nslices - p->nfree;
	pthread_mutex_unlock(&p->lock);
	return n;
}

unsigned buf_pool_max_in_use(struct buf_pool *p)
{
	pthread_mutex_lock(&p->lock);
	unsigned n = p->max_in_use;
	pthread_mutex_unlock(&p->lock);
	return n;
}

void buf_pool_destroy(struct buf_pool *p)
{
	if (!p)
		return;
	munmap(p->base, p->len);
	free(p->free_stack);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cv);
	free(p);
}

void buf_pool_note_registration(struct buf_pool *p)
{
	pthread_mutex_lock(&p->lock);
	p->registrations++;
	pthread_mutex_unlock(&p->lock);
}

unsigned buf_pool_registrations(struct buf_pool *p)
{
	pthread_mutex_lock(&p->lock);
	unsigned n = p->registrations;
	pthread_mutex_unlock(&p->lock);
	return n;
}
