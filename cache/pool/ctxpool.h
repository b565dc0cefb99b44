/* SPDX-License-Identifier: MIT */
/*
 * A fixed set of equal request contexts, made once (at mount time, sized
 * from the payload pool or the queue depth) so that no request allocates
 * on the I/O path.  One calloc holds every object; a free stack under one
 * mutex hands them out.  Thread-safe.  Like buf_pool_get, ctxpool_get
 * waits while every object is out: the sets are sized from the pool's
 * slices or the queue depth (route's: max_background plus a margin, which
 * max_threads handlers can exceed), so a wait is back-pressure, ended by
 * the next completion, and never fails a request.  A caller that must
 * not wait (it holds a lock a completion needs, or runs on the event
 * thread) uses ctxpool_tryget.
 *
 * Ownership: the creator owns the set (ctxpool_destroy); an object belongs
 * to whoever got it until it is put back, exactly once.  Objects are not
 * cleared: the taker initialises them.
 */
#ifndef ISERFUSE_CTXPOOL_H
#define ISERFUSE_CTXPOOL_H

#include <stdbool.h>
#include <stddef.h>

struct ctxpool;

/*
 * Make n objects of obj_size bytes each (rounded up to max_align_t's
 * alignment; each object is aligned for any type).  Returns 0, -EINVAL
 * (a zero size or count, or overflow) or -ENOMEM.  The caller owns *out.
 */
int ctxpool_create(struct ctxpool **out, size_t obj_size, unsigned n);

/* Take an object, waiting while none is free: never NULL, but on a thread in pool_nowait (pool.h). */
void *ctxpool_get(struct ctxpool *p);

/* Take an object if one is free, else NULL (never waits). */
void *ctxpool_tryget(struct ctxpool *p);

/*
 * Give back an object taken from p (any thread; wakes one waiter).  A
 * pointer that is not one of p's objects, or a put with every object
 * already free, aborts.
 */
void ctxpool_put(struct ctxpool *p, void *obj);

/* Whether obj is one of p's objects (p may be NULL: false). */
bool ctxpool_owns(const struct ctxpool *p, const void *obj);

/* The number of objects; those out now; the most out at once so far. */
unsigned ctxpool_size(const struct ctxpool *p);
unsigned ctxpool_in_use(struct ctxpool *p);
unsigned ctxpool_max_in_use(struct ctxpool *p);

/* Free the set (p may be NULL).  Every object must have been put back. */
void ctxpool_destroy(struct ctxpool *p);

#endif
