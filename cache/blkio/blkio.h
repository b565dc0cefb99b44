/* SPDX-License-Identifier: MIT */
/*
 * Byte-addressed I/O on a LUN, turned into block commands (SBC-3 READ,
 * WRITE, SYNCHRONIZE CACHE) whose payload lives in one pool slice.
 * Offsets and lengths that are not multiples of the logical block size are
 * handled by read-modify-write of the edge blocks, serialised against
 * overlapping writes.  Asynchronous: callbacks run on whichever thread
 * completes the session's command (the event thread; a submitter's thread
 * whose direct send completes a command answered meanwhile; the recovery
 * thread at the replacement timeout; the thread closing the session; the
 * mpath thread for held commands), on the retry thread when a delayed
 * re-submission fails at once, or on the caller's thread when submission
 * fails at once.
 *
 * Slice layout: [payload area: max_io + 2 blocks][scratch: 2 blocks].
 * A write prepared in a slice the caller already holds
 * (blk_write_prepare_in) sends from wherever its data lies before the
 * scratch blocks; it is block aligned, so the scratch is never used.
 */
#ifndef ISERFUSE_BLKIO_H
#define ISERFUSE_BLKIO_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "initiator/lun/lun.h"
#include "initiator/session/session.h"
#include "cache/pool/ctxpool.h"
#include "cache/pool/pool.h"
#include "retry.h"

struct blk_req;
struct blk_wnode;

/*
 * Writes in flight are hashed by span for the overlap check: block LBA
 * belongs to span LBA >> wshift, where a span (1 << wshift blocks) holds
 * at least one whole request, so a write touches at most 2 spans; span i
 * is listed in bucket i % BLK_WBUCKETS.  A check reads the 1 or 2 buckets
 * of its own spans, not every write in flight.
 */
#define BLK_WBUCKETS 256u

/*
 * What block I/O calls on its backend, the object that carries its SCSI
 * commands (RFC 7143 §3.2 SCSI commands over one iSCSI session, or over
 * the paths of a multipath set).  The backend is opaque here: its type is
 * whatever the ops table says (blk_session_ops_iscsi: a struct
 * iscsi_session; blk_session_ops_mpath: a struct mpath; a unit test's own
 * fake).  Same contracts as iscsi_session_submit and
 * iscsi_session_max_cmd_bytes (session.h): submit copies *cmd, returns 0
 * (cmd->cb called exactly once, on one of the threads above) or a negative errno
 * (-ENOTCONN, -EINVAL; cb not called); max_cmd_bytes is the most payload
 * bytes one command may move, 0 for no limit.
 */
struct blk_session_ops {
	int (*submit)(void *backend, const struct iscsi_cmd *cmd);
	uint32_t (*max_cmd_bytes)(const void *backend);
};

/* The backend is a struct iscsi_session: iscsi_session_submit and iscsi_session_max_cmd_bytes. */
extern const struct blk_session_ops blk_session_ops_iscsi;

/*
 * The backend is a multipath set (initiator/mpath/mpath.h), a struct
 * mpath: mpath_submit and mpath_max_cmd_bytes, same contracts.
 */
extern const struct blk_session_ops blk_session_ops_mpath;

struct blk_dev {
	void *backend;                     /* what carries the commands, of the type ops says; not owned */
	const struct blk_session_ops *ops; /* how commands reach backend (blk_session_ops_iscsi, _mpath) */
	struct buf_pool *pool;
	uint64_t lun_field;
	uint32_t bs;               /* logical block size, bytes */
	_Atomic uint64_t nblocks;  /* read with blk_dev_nblocks (changes under blk_dev_set_capacity) */
	_Atomic uint64_t size;     /* bytes; read with blk_dev_size */
	uint32_t max_xfer_blocks;  /* most blocks in one SCSI command */
	size_t max_io;             /* most bytes in one blk request */
	bool use16;
	atomic_bool dirty;         /* written since the last SYNCHRONIZE CACHE was sent */
	atomic_uint syncs_inflight; /* SYNCHRONIZE CACHE commands not yet completed */
	pthread_mutex_t lock;      /* guards wbucket and overlap_probes */
	pthread_cond_t cv;         /* a write in flight completed */
	unsigned claim_waiting;    /* blk_write_claim callers waiting on cv (lock): a completion broadcasts only then */
	struct blk_wnode *wbucket[BLK_WBUCKETS]; /* writes in flight (their block extents), hashed by span */
	unsigned wshift;           /* log2 of the blocks per span: 1 << wshift >= max_io / bs + 1 */
	uint64_t overlap_probes;   /* writes in flight compared by overlap checks, ever (tests read it) */
	struct blk_req *reqs;      /* one per pool slice, indexed like it: owned by d */
	/*
	 * Contexts of READs into a caller's buffer (blk_read_into), which hold
	 * no slice: one per pool slice (payload and cache slices alike, so at
	 * least the queue depth), made by blk_dev_init, owned by d.  Taken at
	 * submission, put back after the done callback returned.
	 */
	struct ctxpool *ext;
	atomic_uint_fast64_t rmw_count;
	atomic_uint_fast64_t rmw_bytes_copied; /* edge-block bytes merged into writes (read-modify-write) */
	uint16_t lun;              /* the LUN number, for messages */
	struct blk_retry *_Atomic retry; /* delayed retries and UNIT ATTENTION hook; NULL: retry at once, 8 times */
	uint32_t retry_budget_ms;  /* how long BUSY / becoming ready keep being retried */
};

/*
 * Done callback: err is 0 or a negative errno; for a read, data/len are
 * the bytes read, valid only during the call; for a write, len is the byte
 * count written.
 */
typedef void (*blk_done_fn)(void *arg, int err, const void *data, size_t len);

/*
 * Set up d for the LUN described by info on session s, with payload slices
 * from pool (slice size must be >= max_io + 4 * block size).  Every
 * request context is made here (d->reqs, d->ext): none is allocated per
 * request.  Returns 0, -EINVAL (slice too small) or -ENOMEM.
 */
int blk_dev_init(struct blk_dev *d, struct iscsi_session *s, struct buf_pool *pool,
		 const struct iscsi_lun_info *info, size_t max_io);

/*
 * blk_dev_init with the backend reached through ops (not copied: it must
 * outlive d) instead of a session through blk_session_ops_iscsi; backend
 * is passed to ops as is and is of the type ops takes (a struct mpath for
 * blk_session_ops_mpath, a unit test's fake session).  The
 * most blocks per command (max_xfer_blocks) is 0xffff, clamped to the
 * Block Limits VPD page's MAXIMUM TRANSFER LENGTH (SBC-3 §6.6.4) when info
 * has one and to ops->max_cmd_bytes / block size.  Returns 0, -EINVAL (slice
 * too small) or -ENOMEM.
 */
int blk_dev_init_ops(struct blk_dev *d, void *backend, const struct blk_session_ops *ops,
		     struct buf_pool *pool, const struct iscsi_lun_info *info, size_t max_io);
void blk_dev_fini(struct blk_dev *d);

/*
 * Retry transient failures through q (may be NULL) for up to budget_ms
 * (BUSY, TASK SET FULL, NOT READY / becoming ready; see
 * scsi_retry_delay_ms), and report UNIT ATTENTIONs to q's hook.  Call
 * before any I/O.
 */
void blk_dev_set_retry(struct blk_dev *d, struct blk_retry *q, uint32_t budget_ms);

/*
 * The capacity changed (READ CAPACITY after a UNIT ATTENTION or a rescan):
 * from now on requests are checked against nblocks blocks of the same
 * block size.  Commands in flight are not touched; one beyond a shrunken
 * end fails at the target (LBA out of range).  Any thread.
 */
void blk_dev_set_capacity(struct blk_dev *d, uint64_t nblocks);

/* The size in bytes, read atomically (it may change under blk_dev_set_capacity). */
uint64_t blk_dev_size(const struct blk_dev *d);

/*
 * The capacity in logical blocks of bs bytes (READ CAPACITY(10)/(16), SBC-3 §5.15/§5.16),
 * read atomically: it may change under blk_dev_set_capacity.
 */
uint64_t blk_dev_nblocks(const struct blk_dev *d);

/*
 * The retry queue set by blk_dev_set_retry (owned by the caller of that),
 * read atomically; NULL when none or once shutting down.
 */
struct blk_retry *blk_dev_retry(const struct blk_dev *d);

/*
 * Read len bytes at byte offset off (off + len <= size, 0 < len <= max_io).
 * Waits for a free slice.  Returns 0 (cb will be called once), -EINVAL, or
 * -ENOBUFS (no slice free, on a thread in pool_nowait: nothing done).
 */
int blk_read(struct blk_dev *d, uint64_t off, size_t len, blk_done_fn cb, void *arg);

/*
 * Read len bytes at off straight into buf (off and len multiples of the
 * block size, 0 < len <= max_io): no pool slice, no copy; buf (normally
 * a cache block inside the pool, so an RDMA transport reaches it) must
 * stay valid until cb.  Its context comes from d->ext: waits while all
 * are out (so never from the event thread, whose completions put them
 * back).  Returns 0 (cb called once) or -EINVAL.
 */
int blk_read_into(struct blk_dev *d, uint64_t off, size_t len, void *buf, blk_done_fn cb, void *arg);

/*
 * Start a write of len bytes at off (same limits as blk_read): returns a
 * request and, in *payload, where the caller must put the len bytes before
 * blk_write_submit.  Waits for a free slice.  NULL on bad arguments.
 */
struct blk_req *blk_write_prepare(struct blk_dev *d, uint64_t off, size_t len, void **payload);
/*
 * Start a write of len bytes at byte offset off whose bytes already lie
 * at data, inside the pool slice `slice` (its start) that the caller took
 * from d->pool: no slice is taken and nothing is copied; the commands
 * send straight from data.  off and len must be multiples of the block
 * size (no read-modify-write: the edges would need the slice's scratch
 * blocks next to the payload) and data + len must end before the slice's
 * last 2 blocks.  On success the request owns slice (blk_write_submit's
 * completion or blk_write_cancel returns it to the pool); NULL (bad or
 * unaligned arguments, slice not a slice of d->pool) leaves it with the
 * caller.  Never waits.
 */
struct blk_req *blk_write_prepare_in(struct blk_dev *d, uint64_t off, size_t len, void *slice, void *data);
/*
 * Submit a prepared write; cb is called exactly once.  Waits while a
 * write in flight overlaps it (blk_write_claim, then blk_write_go).
 */
void blk_write_submit(struct blk_req *r, blk_done_fn cb, void *arg);
/*
 * blk_write_submit in two steps, for a caller that must not wait: claim
 * r's blocks against the writes in flight (wait: until none overlaps;
 * else -ENOBUFS at once when one does, nothing done: r is still the
 * caller's to claim again, submit or cancel), then, once claimed, go
 * (cb called exactly once).  Returns 0 or -ENOBUFS.
 */
int blk_write_claim(struct blk_req *r, bool wait);
void blk_write_go(struct blk_req *r, blk_done_fn cb, void *arg);
/* Abandon a prepared write (returns its slice). */
void blk_write_cancel(struct blk_req *r);

/*
 * SYNCHRONIZE CACHE of the whole LUN if anything was written since the
 * last one (SBC-3 §5.22/§5.23).  cb is called once (data NULL).  Returns 0
 * or -ENOMEM.
 */
int blk_sync(struct blk_dev *d, blk_done_fn cb, void *arg);

#endif
