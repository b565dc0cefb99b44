/* SPDX-License-Identifier: MIT */
/*
 * The payload buffer pool: one allocation made at mount time, carved into
 * equal slices.  Every payload byte of every SCSI command lives in a
 * slice, so an RDMA transport can register the whole pool once.
 * Thread-safe.  Exhaustion blocks the caller until a slice is returned
 * (back-pressure); it never fails a request.
 */
#ifndef ISERFUSE_POOL_H
#define ISERFUSE_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct buf_pool;

/*
 * Create a pool of `nslices` slices of `slice_size` bytes (rounded up to
 * 4096).  The memory is one anonymous mapping, page aligned, advised for
 * huge pages.  Returns 0, -EINVAL (zero sizes or overflow) or -ENOMEM.
 * The caller owns *out (buf_pool_destroy).
 */
int buf_pool_create(struct buf_pool **out, size_t slice_size, unsigned nslices);

/*
 * Take a slice, waiting while none is free (NULL instead, on a thread in
 * pool_nowait).  *index (may be NULL) gets its number, 0..nslices-1.
 */
void *buf_pool_get(struct buf_pool *p, unsigned *index);
/* Take a slice if one is free, else NULL. */
void *buf_pool_tryget(struct buf_pool *p, unsigned *index);
/*
 * A thread that must never wait (an event thread serving requests as
 * they come) marks itself while it makes requests: buf_pool_get and
 * ctxpool_get then give NULL where they would wait, and the callers below
 * them (block I/O, the block cache, route) answer -ENOBUFS with nothing
 * done, so the request can go to a thread that may wait.  Per thread.
 */
void pool_nowait_set(bool on);
bool pool_nowait(void);

/*
 * Return a slice obtained from this pool.  Passing anything else aborts.
 * While the calling thread holds its puts (pool_hold_begin) the slice is
 * kept back until pool_hold_end or pool_hold_end_keep.
 */
void buf_pool_put(struct buf_pool *p, void *slice);

/*
 * The calling thread's puts are held from now on: a slice it returns stays
 * out of every pool (its bytes as they are) until pool_hold_end or
 * pool_hold_end_keep, for a write queued on a ring that still refers to
 * them (iscsi_tcp_ring_writev).  Per thread; idempotent.
 */
void pool_hold_begin(void);

/* Return the slices the calling thread held, and hold no more.  Aborts when out of memory to hold one. */
void pool_hold_end(void);

/*
 * As pool_hold_end, but the slices held become the calling thread's
 * spares (the first run of them of one pool, up to 128 in all, none
 * while a thread waits on that pool; the rest go back): its own next
 * buf_pool_get and buf_pool_tryget on that pool take them without the
 * pool's lock (last returned, first taken), until pool_spares_return
 * gives the rest back.
 * A thread that keeps spares calls pool_spares_idle before each wait, and
 * waits a short while at most (1 ms) while that keeps some, or other
 * threads may wait for slices nobody uses (a TCP event thread: the ring's
 * flush and idle hooks, iscsi_tcp_ring_set_flush).
 */
void pool_hold_end_keep(void);

/* Give the calling thread's spares back to their pool (one lock round, waiters woken).  No spares: nothing. */
void pool_spares_return(void);

/*
 * Before the calling thread waits: keep its spares if one was taken or
 * made since the last call, no thread waits on their pool and the pool
 * has free slices besides them; else give them back (pool_spares_return).
 * Returns true when it kept some: the wait must then be short (the next
 * call gives back what was not used).
 */
bool pool_spares_idle(void);

/*
 * The number (0..nslices-1) of the slice that starts at slice, in *index.
 * Pure arithmetic on the layout: says nothing about who holds it.
 * Returns 0, or -EINVAL when slice is not the start of one of p's slices.
 */
int buf_pool_index(const struct buf_pool *p, const void *slice, unsigned *index);

size_t buf_pool_slice_size(const struct buf_pool *p);
unsigned buf_pool_nslices(const struct buf_pool *p);
/* The whole region, for a one-time RDMA registration. */
void *buf_pool_base(const struct buf_pool *p);
size_t buf_pool_len(const struct buf_pool *p);
/* Slices handed out now / at most so far. */
unsigned buf_pool_in_use(struct buf_pool *p);
unsigned buf_pool_max_in_use(struct buf_pool *p);

/*
 * Memory registrations made for this pool (an RDMA transport calls
 * buf_pool_note_registration once per ibv_reg_mr of the region; the
 * target is exactly one per mount).  Thread-safe.
 */
void buf_pool_note_registration(struct buf_pool *p);
unsigned buf_pool_registrations(struct buf_pool *p);

/* Unmap the pool.  All slices must have been returned. */
void buf_pool_destroy(struct buf_pool *p);

#endif
