/* SPDX-License-Identifier: MIT */
/*
 * Deallocating, zeroing and asking which blocks are mapped, on a LUN
 * (SBC-3 §4.7 logical block provisioning): UNMAP, WRITE SAME(16) with and
 * without the UNMAP bit, zeroes written as a fallback, and GET LBA STATUS
 * for SEEK_DATA/SEEK_HOLE.  Byte ranges not aligned to the logical block
 * size get their partial edge blocks zeroed through blk_write (read-modify-
 * write, serialised against overlapping writes).  Asynchronous like
 * blkio.c: callbacks run on the threads blkio.h names, or on the
 * caller's thread when nothing had to be sent.
 */
#ifndef ISERFUSE_DISCARD_H
#define ISERFUSE_DISCARD_H

#include <stdbool.h>
#include <stdint.h>

#include "initiator/lun/lun.h"
#include "blkio.h"

/* What a LUN offers, from VPD 0xB0/0xB2 and READ CAPACITY(16). */
struct discard_caps {
	bool unmap;             /* UNMAP: LBPU, and MAXIMUM UNMAP LBA/DESCRIPTOR COUNT not 0 where reported */
	bool ws_unmap;          /* WRITE SAME(16) with the UNMAP bit: LBPWS */
	bool lbprz;             /* deallocated blocks read as zeroes (VPD 0xB2 or READ CAPACITY(16) LBPRZ) */
	bool lba_status;        /* GET LBA STATUS answers: LBPME (thin provisioning) */
	uint32_t max_unmap_blocks; /* blocks per UNMAP command */
	uint32_t max_ws_blocks;    /* blocks per WRITE SAME command */
};

/* How the middle (whole-block) part of a range is deallocated or zeroed. */
enum discard_method {
	DISCARD_UNMAP,          /* UNMAP, one block descriptor per command */
	DISCARD_WS_UNMAP,       /* WRITE SAME(16) of zeroes with UNMAP */
	DISCARD_WS,             /* WRITE SAME(16) of zeroes */
	DISCARD_WRITE,          /* WRITE of zeroes */
};

/* Fill c from a probed LUN (pure). */
void discard_caps_from_info(struct discard_caps *c, const struct iscsi_lun_info *info);

/*
 * The first method to try (pure).  punch (FALLOC_FL_PUNCH_HOLE): UNMAP,
 * else WRITE SAME(16) with UNMAP, both only when LBPRZ promises zeroes
 * afterwards; else as zeroing.  Zeroing (FALLOC_FL_ZERO_RANGE, which keeps
 * the blocks allocated): WRITE SAME(16) without UNMAP.  WRITE of zeroes is
 * what every method falls back to when the target refuses it.
 */
enum discard_method discard_first_method(const struct discard_caps *c, bool punch);
/* The method to try after m was refused (ILLEGAL REQUEST): UNMAP -> WRITE SAME -> WRITE (pure). */
enum discard_method discard_fallback(const struct discard_caps *c, enum discard_method m);
/*
 * Blocks the next command of method m covers, of `remaining` (> 0) (pure):
 * limited by MAXIMUM UNMAP LBA COUNT, MAXIMUM WRITE SAME LENGTH, or for
 * WRITE by write_blocks (zeroes that fit in one payload slice and one
 * command).  Always > 0.
 */
uint32_t discard_chunk(const struct discard_caps *c, enum discard_method m, uint64_t remaining,
		       uint32_t write_blocks);

/*
 * Deallocate (punch) or zero len bytes at byte offset off (off + len <=
 * d->size, len > 0): afterwards the range reads as zeroes.  The whole
 * blocks go in commands of discard_chunk blocks, one after the other; one
 * that takes longer than 5 s logs a line "lun<N>: <what>: X of Y MiB"
 * (info level) every 5 s and one when it ends.  what: a static string
 * naming the operation in the log, NULL for "punch" or "zero range".
 * Waits for pool slices on the caller's thread.  cb gets err 0 or a
 * negative errno, data NULL and len.  Returns 0 (cb will be called once)
 * or -EINVAL.
 */
int blk_discard(struct blk_dev *d, const struct discard_caps *c, uint64_t off, uint64_t len, bool punch,
		const char *what, blk_done_fn cb, void *arg);

/* Seek callback: err 0 with the resulting byte offset, or a negative errno (-ENXIO: no data after off). */
typedef void (*blk_seek_fn)(void *arg, int err, uint64_t result);

/*
 * SEEK_DATA (hole false) or SEEK_HOLE (hole true) from byte offset off
 * (< d->size), from GET LBA STATUS (SBC-3 §5.8) when c->lba_status;
 * otherwise, or when the target refuses the command or answers nonsense,
 * the whole LUN is data (SEEK_DATA gives off, SEEK_HOLE the size).  The
 * end of the LUN is a hole.  At most 64 GET LBA STATUS round trips per
 * call: past them the rest is data (SEEK_DATA gives where the walk
 * stopped, SEEK_HOLE the size).  Returns 0 (cb will be called once) or
 * -EINVAL.
 */
int blk_seek(struct blk_dev *d, const struct discard_caps *c, uint64_t off, bool hole, blk_seek_fn cb, void *arg);

/*
 * blk_seek in two steps, for a seek that must wait for something first
 * (the block cache's write-back): blk_seek_prepare takes what the command
 * needs (a pool slice: may wait, so on the caller's thread) and returns
 * the operation, or NULL (-EINVAL, -ENOMEM in *err); blk_seek_start sends
 * it, from any thread (never waits), or fails it with err (a negative
 * errno: cb gets err).  cb is called once, from start on.
 */
struct seek_op;
struct seek_op *blk_seek_prepare(struct blk_dev *d, const struct discard_caps *c, uint64_t off, bool hole,
				 blk_seek_fn cb, void *arg, int *err);
void blk_seek_start(struct seek_op *op, int err);

#endif
