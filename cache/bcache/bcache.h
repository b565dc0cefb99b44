/* SPDX-License-Identifier: MIT */
/*
 * The block cache: a fixed number of equal cache blocks (memory given by
 * the caller, normally pool slices so that it is registered once for
 * RDMA), shared by every device of a mount, CLOCK replacement, sequential
 * read-ahead per stream, write-through by default and optional write-back.
 *
 * Coherence rules (one mutex guards all cache state):
 * - a VALID block always holds the newest data written through this cache
 *   (every write copies its bytes into the VALID blocks it touches);
 * - a fill (backend read into a block) never starts while an overlapping
 *   write is in flight, and a write that starts while a fill is in flight
 *   makes the fill stale: its data goes to the readers already waiting (they
 *   began before the write) and the block is dropped;
 * - a read that cannot use the cache goes to the backend and has the VALID
 *   blocks that may be newer than the backend (dirty, or written back since
 *   the read began) copied over its reply.
 * Dirty blocks are never evicted; they are written back by bcache_flush
 * (fsync, flush, release, unmount) or, when more than half the blocks are
 * dirty or no clean block can be evicted, by a background write-back.  A
 * write-back sends only the logical blocks written through this cache (a
 * bitmap per block; each run of them one backend write), so what another
 * initiator wrote in the rest of a cached block stays on the target.
 *
 * Callbacks run on the backend's completion thread or on the caller's.
 */
#ifndef ISERFUSE_BCACHE_H
#define ISERFUSE_BCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct bcache;
struct bcache_dev;
struct bcache_write;

/* Same shape as blkio's blk_done_fn: err 0 or negative errno; data valid during the call. */
typedef void (*bcache_io_fn)(void *arg, int err, const void *data, size_t len);

/* Where a device's blocks come from.  Every call returns 0 (cb called once) or a negative errno. */
struct bcache_backend {
	void *ctx;
	uint64_t size;   /* device size, bytes */
	uint32_t lbsize; /* logical block size, bytes (SBC-3 READ CAPACITY): a power of two, >= 512 */
	size_t max_io;   /* most bytes in one read or write */
	/*
	 * Most reads plus write-through writes the caller has in flight on the
	 * device at once: sizes its fixed sets of read and write contexts
	 * (made by bcache_dev_add; a read or write_begin waits while all are
	 * out).  0: 64.
	 */
	unsigned depth;
	/* Read len bytes at off into a buffer of the backend's; cb gets it (writable for the call). */
	int (*read)(void *ctx, uint64_t off, size_t len, bcache_io_fn cb, void *arg);
	/* Read len bytes at off into buf (off, len multiples of the device block size). */
	int (*read_into)(void *ctx, uint64_t off, size_t len, void *buf, bcache_io_fn cb, void *arg);
	/* Write len bytes from buf at off; buf may be reused once the call returns. */
	int (*write)(void *ctx, uint64_t off, size_t len, const void *buf, bcache_io_fn cb, void *arg);
	/* Make completed writes durable (SYNCHRONIZE CACHE). */
	int (*sync)(void *ctx, bcache_io_fn cb, void *arg);
};

/* Reply callback of bcache_read: iov[0..n) are the bytes, valid only during the call. */
typedef void (*bcache_read_fn)(void *arg, int err, const struct iovec *iov, int n);

/* Per open file: sequential detection and the read-ahead window.  Zero-initialise. */
struct bcache_stream {
	uint64_t next_off;  /* where a sequential read would start, bytes */
	uint32_t window;    /* read-ahead, bytes; 0 while reads look random */
	uint64_t ra_end;    /* read-ahead issued up to here, bytes */
	unsigned gen;       /* the device's generation ra_end belongs to */
};

struct bcache_stats {
	uint64_t hits, misses;        /* cache blocks found / not found by reads */
	uint64_t bypass_reads;        /* reads served by the backend without the cache */
	uint64_t ra_bytes;            /* read-ahead issued */
	uint64_t ra_used_bytes;       /* read-ahead later read */
	uint64_t ra_wasted_bytes;     /* read-ahead evicted or invalidated unread */
	uint64_t dirty_blocks;        /* now */
	uint64_t writeback_blocks;    /* dirty blocks written back */
	uint64_t writeback_flushes;   /* bcache_flush calls and pressure write-backs */
	uint64_t absorbed_writes;     /* writes kept in the cache (write-back) */
	uint64_t copied_bytes;        /* bytes copied by the cache: written data into its blocks, newer cached
	                               * bytes over a read's reply, dirty bytes handed to the backend's write
	                               * (bcache_blk.c copies them into a slice) */
	uint64_t blocks, block_size;  /* capacity: blocks of block_size bytes */
};

/*
 * Create a cache of nblocks blocks of block_size bytes (a power of two,
 * >= 4096) at bufs[0..nblocks) (the caller keeps owning the memory, which
 * must outlive the cache).  writeback: keep written blocks dirty.  Returns
 * 0, -EINVAL or -ENOMEM.
 */
int bcache_create(struct bcache **out, size_t block_size, unsigned nblocks, void *const *bufs, bool writeback);
/* Free the cache.  Every device must have been removed. */
void bcache_destroy(struct bcache *c);

/*
 * Add a device; be is copied.  block_size of the cache must be a multiple
 * of the device's logical block size be->lbsize (a power of two, >= 512).
 * Its request contexts are made here, be->depth of each kind (reads with
 * room for a read of be->max_io bytes; write tokens), owned by the device
 * and freed by bcache_dev_remove.  Returns 0, -EINVAL (a bad lbsize) or
 * -ENOMEM.
 */
int bcache_dev_add(struct bcache *c, const struct bcache_backend *be, struct bcache_dev **out);
/* Drop a device's blocks (dirty ones are lost: flush first) and free it.  Nothing may be in flight. */
void bcache_dev_remove(struct bcache_dev *d);

/*
 * Read len bytes at off (off + len <= size, len <= max_io).  st (may be
 * NULL) drives read-ahead; direct: O_DIRECT, bypass the cache (but see
 * newer cached data).  The read's context comes from the device's fixed
 * set, held until cb returned: waits while all are out, so never call it
 * from a backend completion.  Returns 0 (cb called once) or a negative
 * errno.
 */
int bcache_read(struct bcache_dev *d, struct bcache_stream *st, uint64_t off, size_t len, bool direct,
		bcache_read_fn cb, void *arg);

/*
 * The LUN changed behind the cache (capacity change, a LUN re-created or
 * gone): its size is now `size` bytes; forget d's clean blocks (fills in
 * flight are dropped once their readers have them).  Dirty blocks within
 * the new size stay (the newest data: flush before a resize so that none
 * straddles the old end); dirty blocks at or beyond it are dropped.
 * Returns the bytes of dirty data dropped.  d may be NULL (no cache).
 */
uint64_t bcache_dev_invalidate(struct bcache_dev *d, uint64_t size);

/*
 * Another initiator may have written the LUN (a file opened: close-to-open;
 * a UNIT ATTENTION saying the medium may have changed): forget d's clean
 * blocks and what every stream read ahead, so that the next reads go to
 * the target.  Dirty blocks (written here, not yet written back) and
 * blocks being written back stay: they are newer than the target.  Fills
 * in flight are dropped once their readers have them.  d may be NULL.
 */
void bcache_dev_drop_clean(struct bcache_dev *d);

/*
 * Whether d has no block in the cache: an O_DIRECT read may then go to the
 * backend straight (nothing cached can be newer).  Lock-free.
 */
bool bcache_dev_empty(struct bcache_dev *d);

/*
 * Write-back: keep the write of len bytes at off in the cache.  Returns
 * true when it was absorbed (done: nothing to send); false when the caller
 * must write through (write-through cache, a partial block not cached, an
 * overlapping write in flight, no clean block free).
 */
bool bcache_write_absorb(struct bcache_dev *d, uint64_t off, size_t len, const void *data);

/*
 * Write-through (and O_DIRECT) writes: call before sending the write of
 * len bytes at off (data is copied into the cached blocks it touches,
 * fills in flight become stale) and bcache_write_end once it completed
 * with its result err (0 or negative errno; on error the clean cached
 * blocks of the range are dropped).  Returns a token from the device's
 * fixed set (waits while all are out: never from a backend completion),
 * owned by the caller until bcache_write_end gives it back; NULL only
 * when none could be had (then the clean cached blocks of the range were
 * dropped instead; NULL is a valid token for end).  data NULL: the range
 * becomes zeroes (a punched or zeroed range, fallocate); the dirty blocks
 * it covers whole (not being written back) become clean when end gets
 * err 0, since the target then holds their zeroes (a later write-back
 * would allocate the blocks again).
 */
struct bcache_write *bcache_write_begin(struct bcache_dev *d, uint64_t off, size_t len, const void *data);
void bcache_write_end(struct bcache_dev *d, struct bcache_write *w, int err);

/*
 * Write back every dirty block of d, wait for write-backs in flight, then
 * the backend's sync.  cb gets the first error.  Returns 0 or a negative
 * errno.  May be called from a backend completion only when nothing is
 * dirty (it never waits for a slot there).
 */
int bcache_flush(struct bcache_dev *d, bcache_io_fn cb, void *arg);

/*
 * Write back every dirty block of d and wait for write-backs in flight,
 * without the backend's sync: afterwards the target holds everything
 * written through the cache, so a question the target answers (GET LBA
 * STATUS for SEEK_DATA/SEEK_HOLE) sees it as data.  cb gets the first
 * write-back error (0 or negative errno), on the caller's thread at once
 * when nothing is dirty or in flight, else on a backend completion.
 * Returns 0 or -ENOMEM.
 */
int bcache_writeback(struct bcache_dev *d, bcache_io_fn cb, void *arg);

/* A range of a device, in bytes. */
struct bcache_range {
	uint64_t off, len;
};

/*
 * What was written to d through the cache and is not on the target: the
 * dirty logical blocks of its cached blocks (written back with an error,
 * or never), in bytes.  With ranges non-NULL, *ranges gets them as byte
 * ranges in ascending order, adjacent ones merged (malloc'd, the caller
 * frees it; NULL when none or out of memory) and *n their number.  For a
 * report once write-back has given up (the stop): a write-back in flight
 * counts as written.  Any thread.
 */
uint64_t bcache_dev_dirty(struct bcache_dev *d, struct bcache_range **ranges, size_t *n);

/* Counters over the whole cache (all devices). */
void bcache_get_stats(struct bcache *c, struct bcache_stats *out);

#endif
