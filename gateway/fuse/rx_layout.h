/* SPDX-License-Identifier: MIT */
/*
 * Where a FUSE reader puts a request it reads into a pool slice, so that
 * a WRITE's data lands page aligned where block I/O sends it from.
 *
 * A read(2) of /dev/fuse copies one request in one piece: fuse_in_header
 * (40 bytes), the operation's arguments, then for a WRITE its data right
 * after fuse_write_in (40 bytes).  The read therefore starts
 * GW_RX_WRITE_HDR bytes before GW_RX_DATA_OFF, the slice's second page:
 *
 *   slice: [headroom page: ... 80 bytes of headers][data: up to max_io][...][scratch: 2 blocks]
 *
 * The first page is headroom only (4016 bytes of it unused); the data
 * area ends at least 2 blocks before the slice's end, so the scratch
 * blocks of block I/O (cache/blkio/blkio.h) are never written by a read.
 * Pure arithmetic, no state.
 */
#ifndef ISERFUSE_RX_LAYOUT_H
#define ISERFUSE_RX_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>

/* fuse_in_header + fuse_write_in (FUSE protocol 7.9 and later), bytes; checked against linux/fuse.h in the unit test. */
#define GW_RX_WRITE_HDR 80u
/* fuse_in_header alone: the shortest request, bytes. */
#define GW_RX_IN_HDR 40u
/* Where a WRITE's data starts in the slice: one page in, page aligned. */
#define GW_RX_DATA_OFF 4096u
/* The kernel refuses a read(2) of /dev/fuse shorter than this (FUSE_MIN_READ_BUFFER), bytes. */
#define GW_RX_MIN_READ 8192u

/* Offset in the slice where the read(2) of a request starts, bytes. */
static inline size_t gw_rx_read_off(void) { return GW_RX_DATA_OFF - GW_RX_WRITE_HDR; }

/* How many bytes the read(2) into a slice of slice_size bytes may take: up to the slice's end. */
static inline size_t gw_rx_read_len(size_t slice_size) { return slice_size - gw_rx_read_off(); }

/*
 * Whether a slice of slice_size bytes can receive every request of a
 * connection with max_write (bytes, FUSE's max_write) and block size bs:
 * the headroom page plus max_write bytes of data must leave the last 2
 * blocks (block I/O's scratch) free, and the read must be at least what
 * the kernel demands (the headers plus max_write, and GW_RX_MIN_READ).
 */
static inline bool gw_rx_fits(size_t slice_size, size_t max_write, size_t bs)
{
	if (slice_size < GW_RX_DATA_OFF + 2 * bs || max_write > slice_size - GW_RX_DATA_OFF - 2 * bs)
		return false;
	size_t len = gw_rx_read_len(slice_size);
	return len >= GW_RX_WRITE_HDR + max_write && len >= GW_RX_MIN_READ;
}

#endif
