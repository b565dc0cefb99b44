/* SPDX-License-Identifier: MIT */
#include "discard.h"

#include <errno.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "initiator/util/log.h"
#include "initiator/scsi/scsi.h"
#include "retry.h"

/* WRITE SAME length used when VPD 0xB0 does not give one. */
#define DEFAULT_WS_BLOCKS 0xffffu
/* GET LBA STATUS allocation length: the header and 255 descriptors. */
#define LBA_STATUS_ALLOC (8u + 16u * 255u)
#define LBA_STATUS_MAX 255u
/*
 * Most GET LBA STATUS round trips one SEEK_DATA/SEEK_HOLE may take: a
 * target answering one block at a time must not make an lseek cost a round
 * trip per block; past it the walk reports data (discard.h).
 */
#define SEEK_ROUNDS_MAX 64u
/* A long punch or zero range logs how far it got, at most this often (ms). */
#define PROGRESS_MS 5000u

void discard_caps_from_info(struct discard_caps *c, const struct iscsi_lun_info *info)
{
	memset(c, 0, sizeof(*c));
	c->lbprz = info->cap.lbprz || (info->have_lbp && info->lbp.lbprz);
	c->lba_status = info->use16 && info->cap.lbpme;
	c->max_unmap_blocks = UINT32_MAX;
	c->max_ws_blocks = DEFAULT_WS_BLOCKS;
	if (info->have_lbp) {
		c->unmap = info->lbp.lbpu;
		c->ws_unmap = info->lbp.lbpws;
	}
	if (info->have_block_limits) {
		/* SBC-3 §6.6.4: a zero count means UNMAP is not implemented. */
		if (info->bl.max_unmap_lba_count == 0 || info->bl.max_unmap_desc_count == 0)
			c->unmap = false;
		else
			c->max_unmap_blocks = info->bl.max_unmap_lba_count;
		if (info->bl.max_write_same_len)
			c->max_ws_blocks = info->bl.max_write_same_len > UINT32_MAX
						   ? UINT32_MAX : (uint32_t)info->bl.max_write_same_len;
	}
}

enum discard_method discard_first_method(const struct discard_caps *c, bool punch)
{
	if (punch && c->lbprz) {
		if (c->unmap)
			return DISCARD_UNMAP;
		if (c->ws_unmap)
			return DISCARD_WS_UNMAP;
	}
	return DISCARD_WS;
}

enum discard_method discard_fallback(const struct discard_caps *c, enum discard_method m)
{
	switch (m) {
	case DISCARD_UNMAP:
		return c->ws_unmap && c->lbprz ? DISCARD_WS_UNMAP : DISCARD_WS;
	case DISCARD_WS_UNMAP:
		return DISCARD_WS;
	default:
		return DISCARD_WRITE;
	}
}

uint32_t discard_chunk(const struct discard_caps *c, enum discard_method m, uint64_t remaining,
		       uint32_t write_blocks)
{
	uint64_t lim;

	switch (m) {
	case DISCARD_UNMAP:
		lim = c->max_unmap_blocks;
		break;
	case DISCARD_WS_UNMAP:
	case DISCARD_WS:
		lim = c->max_ws_blocks;
		break;
	default:
		lim = write_blocks;
		break;
	}
	if (lim == 0)
		lim = 1;
	return (uint32_t)(remaining < lim ? remaining : lim);
}

/* ---------------------------------------------------------------- discard / zero */

struct disc_op {
	struct blk_dev *d;
	struct discard_caps caps;
	enum discard_method m;
	uint8_t *slice;             /* payload: zero block(s) or the UNMAP parameter list */
	uint64_t lba, end;          /* whole blocks still to do: [lba, end) */
	uint32_t cur;               /* blocks of the command in flight */
	uint32_t write_blocks;
	unsigned retries;           /* of the command in flight (blk_retry_decide) */
	uint64_t retry_t0;
	struct blk_retry_item ritem;
	atomic_int parts;           /* middle chain + edge writes + the starter's hold */
	atomic_int err;
	uint64_t len;
	const char *what;           /* the progress lines' name of the operation */
	uint64_t a0;                /* first whole block, for the progress lines */
	uint64_t t0_ms, logged_ms;  /* start, last progress line (CLOCK_MONOTONIC); logged_ms 0: none yet */
	blk_done_fn cb;
	void *arg;
};

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/*
 * Every PROGRESS_MS of the middle part: one line saying how many MiB of it
 * are done, at warning level so that a long zeroing shows at the default
 * log level (an application waits on it meanwhile).
 */
static void progress(struct disc_op *op)
{
	uint64_t t = now_ms();
	if (t - (op->logged_ms ? op->logged_ms : op->t0_ms) < PROGRESS_MS)
		return;
	op->logged_ms = t;
	log_warn("lun%u: %s: %llu of %llu MiB", op->d->lun, op->what,
		 (unsigned long long)((op->lba - op->a0) * op->d->bs >> 20),
		 (unsigned long long)((op->end - op->a0) * op->d->bs >> 20));
}

static void op_put(struct disc_op *op)
{
	if (atomic_fetch_sub(&op->parts, 1) != 1)
		return;
	int err = atomic_load(&op->err);
	if (!err)
		atomic_store(&op->d->dirty, true); /* a SYNCHRONIZE CACHE should follow on fsync */
	op->cb(op->arg, err, NULL, err ? 0 : op->len);
	free(op);
}

static void op_fail(struct disc_op *op, int err)
{
	int zero = 0;
	atomic_compare_exchange_strong(&op->err, &zero, err);
}

static void edge_done(void *arg, int err, const void *data, size_t len)
{
	struct disc_op *op = arg;
	(void)data;
	(void)len;
	if (err)
		op_fail(op, err);
	op_put(op);
}

static void mid_done(void *arg, const struct iscsi_cmd_result *res);

static const char *method_name(enum discard_method m)
{
	static const char *const names[] = {"UNMAP", "WRITE SAME(16) with UNMAP", "WRITE SAME(16)", "WRITE of zeroes"};
	return names[m];
}

static void mid_finish(struct disc_op *op, int err)
{
	if (err)
		op_fail(op, err);
	/* one that took long enough to say how far it got says how it ended */
	log_msg(op->logged_ms ? LOG_LVL_WARN : LOG_LVL_DEBUG, "lun%u: %s: %s after %llu ms, last by %s", op->d->lun,
		op->what, err ? strerror(-err) : "done", (unsigned long long)(now_ms() - op->t0_ms), method_name(op->m));
	buf_pool_put(op->d->pool, op->slice);
	op->slice = NULL;
	op_put(op);
}

static void mid_prepare_payload(struct disc_op *op)
{
	size_t bytes = op->m == DISCARD_WRITE ? (size_t)op->write_blocks * op->d->bs : op->d->bs;
	memset(op->slice, 0, bytes);
}

static void mid_submit(struct disc_op *op)
{
	struct blk_dev *d = op->d;
	struct iscsi_cmd cmd = {.lun = d->lun_field, .cb = mid_done, .arg = op, .dir = ISCSI_DIR_WRITE,
				.buf = op->slice};
	op->cur = discard_chunk(&op->caps, op->m, op->end - op->lba, op->write_blocks);
	switch (op->m) {
	case DISCARD_UNMAP: {
		/* Here the slice holds the parameter list; zero blocks are rebuilt on fallback. */
		struct scsi_lba_range r = {.lba = op->lba, .nblocks = op->cur};
		size_t plen = scsi_build_unmap_param(op->slice, d->bs, &r, 1);
		cmd.len = (uint32_t)plen;
		cmd.cdb_len = (uint8_t)scsi_cdb_unmap(cmd.cdb, (uint16_t)plen);
		break;
	}
	case DISCARD_WS_UNMAP:
	case DISCARD_WS:
		cmd.len = d->bs;
		cmd.cdb_len = (uint8_t)scsi_cdb_write_same16(cmd.cdb, op->lba, op->cur, op->m == DISCARD_WS_UNMAP);
		break;
	case DISCARD_WRITE:
		cmd.len = op->cur * d->bs;
		cmd.cdb_len = (uint8_t)scsi_cdb_write(cmd.cdb, op->lba, op->cur, false);
		break;
	}
	int rc = d->ops->submit(d->backend, &cmd);
	if (rc)
		mid_finish(op, rc == -ENOTCONN ? -EIO : rc);
}

static void mid_fire(struct blk_retry_item *it)
{
	mid_submit((struct disc_op *)((char *)it - offsetof(struct disc_op, ritem)));
}

/*
 * A transient failure (BUSY, TASK SET FULL, becoming ready, UNIT
 * ATTENTION, ...): re-submit at once or after the class's delay on the
 * retry thread, as block I/O does.  True when the command lives on.
 */
static bool retry_later(struct blk_dev *d, const struct iscsi_cmd_result *res, unsigned *retries, uint64_t *t0,
			struct blk_retry_item *it, void (*fire)(struct blk_retry_item *))
{
	struct blk_retry *q = blk_dev_retry(d); /* NULL once shutting down */
	int delay = blk_retry_decide(q, d->lun_field, res, retries, t0, d->retry_budget_ms);
	if (delay < 0)
		return false;
	if (delay > 0) {
		it->fire = fire;
		blk_retry_schedule(q, it, (unsigned)delay);
	} else {
		fire(it);
	}
	return true;
}

static void mid_done(void *arg, const struct iscsi_cmd_result *res)
{
	struct disc_op *op = arg;
	int err = iscsi_cmd_result_errno(res);
	if (err) {
		if (retry_later(op->d, res, &op->retries, &op->retry_t0, &op->ritem, mid_fire))
			return;
		/* ILLEGAL REQUEST: the target does not do this command (or bit); try the next way. */
		if (!res->err && (err == -EOPNOTSUPP || err == -EINVAL) && op->m != DISCARD_WRITE) {
			enum discard_method next = discard_fallback(&op->caps, op->m);
			log_debug("lun%u refused %s (%s), falling back to %s", op->d->lun, method_name(op->m), strerror(-err),
				  method_name(next));
			if (op->m == DISCARD_UNMAP)
				op->caps.unmap = false;
			if (op->m == DISCARD_WS_UNMAP)
				op->caps.ws_unmap = false;
			op->m = next;
			op->retries = 0;
			mid_prepare_payload(op);
			mid_submit(op);
			return;
		}
		blk_retry_log_failure(op->d->lun, "discard/zeroing", err, res);
		mid_finish(op, err);
		return;
	}
	op->retries = 0;
	op->lba += op->cur;
	if (op->lba < op->end) {
		progress(op);
		mid_submit(op);
		return;
	}
	mid_finish(op, 0);
}

/* Zero [off, off + len) of one block through blk_write (read-modify-write). */
static void zero_edge(struct disc_op *op, uint64_t off, size_t len)
{
	void *payload;
	struct blk_req *r = blk_write_prepare(op->d, off, len, &payload);
	atomic_fetch_add(&op->parts, 1);
	if (!r) {
		op_fail(op, -EINVAL);
		op_put(op);
		return;
	}
	memset(payload, 0, len);
	blk_write_submit(r, edge_done, op);
}

int blk_discard(struct blk_dev *d, const struct discard_caps *c, uint64_t off, uint64_t len, bool punch,
		const char *what, blk_done_fn cb, void *arg)
{
	if (len == 0 || off >= blk_dev_size(d) || len > blk_dev_size(d) - off)
		return -EINVAL;
	struct disc_op *op = calloc(1, sizeof(*op));
	if (!op)
		return -ENOMEM;
	uint64_t bs = d->bs, end = off + len;
	uint64_t a0 = (off + bs - 1) / bs, a1 = end / bs; /* whole blocks: [a0, a1) */
	op->d = d;
	op->caps = *c;
	op->len = len;
	op->what = what ? what : punch ? "punch" : "zero range";
	op->t0_ms = now_ms();
	op->cb = cb;
	op->arg = arg;
	atomic_init(&op->parts, 1);
	atomic_init(&op->err, 0);

	/*
	 * One slice at a time: each edge write holds its own until it
	 * completes, which needs nothing more from the pool, so waiting for
	 * the next slice here cannot deadlock.
	 */
	if (off % bs)
		zero_edge(op, off, (size_t)((a0 * bs < end ? a0 * bs : end) - off));
	if (end % bs && a1 >= a0)
		zero_edge(op, a1 * bs > off ? a1 * bs : off, (size_t)(end - (a1 * bs > off ? a1 * bs : off)));
	if (a0 < a1) {
		size_t ss = buf_pool_slice_size(d->pool);
		uint32_t wb = (uint32_t)((ss / bs) < d->max_xfer_blocks ? ss / bs : d->max_xfer_blocks);
		op->write_blocks = wb ? wb : 1;
		op->slice = buf_pool_get(d->pool, NULL);
		op->lba = op->a0 = a0;
		op->end = a1;
		op->m = discard_first_method(c, punch);
		atomic_fetch_add(&op->parts, 1);
		log_debug("lun%u: %s of blocks %llu..%llu by %s", d->lun, op->what, (unsigned long long)a0,
			  (unsigned long long)a1 - 1, method_name(op->m));
		mid_prepare_payload(op);
		mid_submit(op);
	}
	op_put(op);
	return 0;
}

/* ---------------------------------------------------------------- SEEK_DATA / SEEK_HOLE */

struct seek_op {
	struct blk_dev *d;
	uint8_t *slice;
	uint64_t off;               /* bytes: where the seek starts */
	uint64_t lba;               /* the block GET LBA STATUS was asked about */
	unsigned rounds;            /* GET LBA STATUS answers used (SEEK_ROUNDS_MAX) */
	bool hole;
	bool lba_status;            /* ask GET LBA STATUS; else everything is data */
	unsigned retries;           /* blk_retry_decide */
	uint64_t retry_t0;
	struct blk_retry_item ritem;
	blk_seek_fn cb;
	void *arg;
};

static void seek_finish(struct seek_op *op, int err, uint64_t result)
{
	if (op->slice)
		buf_pool_put(op->d->pool, op->slice);
	op->cb(op->arg, err, result);
	free(op);
}

/* Everything from byte `at` (>= op->off) is taken as data: SEEK_DATA stops there, SEEK_HOLE goes to the end. */
static void seek_all_data_at(struct seek_op *op, uint64_t at)
{
	seek_finish(op, 0, op->hole ? blk_dev_size(op->d) : at);
}

/* Everything is data: SEEK_DATA stays, SEEK_HOLE goes to the end. */
static void seek_all_data(struct seek_op *op)
{
	seek_all_data_at(op, op->off);
}

static void seek_done(void *arg, const struct iscsi_cmd_result *res);

static void seek_submit(struct seek_op *op)
{
	struct iscsi_cmd cmd = {.lun = op->d->lun_field, .cb = seek_done, .arg = op, .dir = ISCSI_DIR_READ,
				.buf = op->slice, .len = LBA_STATUS_ALLOC};
	cmd.cdb_len = (uint8_t)scsi_cdb_get_lba_status(cmd.cdb, op->lba, LBA_STATUS_ALLOC);
	int rc = op->d->ops->submit(op->d->backend, &cmd);
	if (rc)
		seek_finish(op, rc == -ENOTCONN ? -EIO : rc, 0);
}

static void seek_fire(struct blk_retry_item *it)
{
	seek_submit((struct seek_op *)((char *)it - offsetof(struct seek_op, ritem)));
}

static void seek_done(void *arg, const struct iscsi_cmd_result *res)
{
	struct seek_op *op = arg;
	struct blk_dev *d = op->d;
	struct scsi_lba_status st[LBA_STATUS_MAX];
	size_t n = 0;
	bool more;
	int err = iscsi_cmd_result_errno(res);

	if (err) {
		if (res->err) {
			seek_finish(op, err, 0); /* the connection, not the command */
			return;
		}
		if (retry_later(op->d, res, &op->retries, &op->retry_t0, &op->ritem, seek_fire))
			return;
		log_debug("lun%u: GET LBA STATUS failed (%s): treating the LUN as all data", d->lun, strerror(-err));
		seek_all_data(op);
		return;
	}
	uint64_t nblocks = blk_dev_nblocks(d);
	/* The first descriptor must start at the LBA asked about (SBC-3 §5.8.2). */
	if (scsi_parse_lba_status(op->slice, res->xfer_len, st, LBA_STATUS_MAX, &n, &more) || n == 0 ||
	    st[0].lba != op->lba) {
		log_warn("lun%u: GET LBA STATUS answer malformed: treating the LUN as all data", d->lun);
		seek_all_data(op);
		return;
	}
	for (size_t i = 0; i < n && st[i].lba < nblocks; i++) {
		bool data = st[i].status == SCSI_LBA_MAPPED;
		if (data != op->hole) {
			uint64_t at = st[i].lba * d->bs;
			seek_finish(op, 0, at > op->off ? at : op->off);
			return;
		}
	}
	uint64_t next = st[n - 1].lba + st[n - 1].nblocks;
	if (next >= nblocks) {
		/* nothing found before the end: the end is a hole, there is no more data */
		if (op->hole)
			seek_finish(op, 0, blk_dev_size(d));
		else
			seek_finish(op, -ENXIO, 0);
		return;
	}
	if (++op->rounds == SEEK_ROUNDS_MAX) {
		/* Data is always a safe answer: SEEK_DATA where the walk stopped, SEEK_HOLE the end. */
		log_warn("SEEK_%s from byte %llu: no answer after %u GET LBA STATUS round trips: reporting data",
			 op->hole ? "HOLE" : "DATA", (unsigned long long)op->off, op->rounds);
		op->lba = next;
		seek_all_data_at(op, next * d->bs);
		return;
	}
	op->lba = next;
	op->retries = 0;
	seek_submit(op);
}

struct seek_op *blk_seek_prepare(struct blk_dev *d, const struct discard_caps *c, uint64_t off, bool hole,
				 blk_seek_fn cb, void *arg, int *err)
{
	if (off >= blk_dev_size(d)) {
		*err = -EINVAL;
		return NULL;
	}
	struct seek_op *op = calloc(1, sizeof(*op));
	if (!op) {
		*err = -ENOMEM;
		return NULL;
	}
	op->d = d;
	op->off = off;
	op->lba = off / d->bs;
	op->hole = hole;
	op->cb = cb;
	op->arg = arg;
	op->lba_status = c->lba_status;
	if (op->lba_status)
		op->slice = buf_pool_get(d->pool, NULL);
	*err = 0;
	return op;
}

void blk_seek_start(struct seek_op *op, int err)
{
	if (err)
		seek_finish(op, err, 0);
	else if (op->off >= blk_dev_size(op->d)) /* the LUN shrank meanwhile */
		seek_finish(op, -ENXIO, 0);
	else if (!op->lba_status)
		seek_all_data(op);
	else
		seek_submit(op);
}

int blk_seek(struct blk_dev *d, const struct discard_caps *c, uint64_t off, bool hole, blk_seek_fn cb, void *arg)
{
	int err;
	struct seek_op *op = blk_seek_prepare(d, c, off, hole, cb, arg, &err);
	if (!op)
		return err;
	blk_seek_start(op, 0);
	return 0;
}
