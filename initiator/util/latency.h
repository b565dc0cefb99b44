/* SPDX-License-Identifier: MIT */
/*
 * Command latency histogram: log2 buckets of microseconds, updated with
 * one relaxed atomic add per completion (no lock), read as a snapshot for
 * percentiles.  Bucket 0 holds 0..1 us, bucket i (i >= 1) holds
 * 2^i .. 2^(i+1)-1 us; the last bucket also holds everything slower.
 */
#ifndef ISERFUSE_LATENCY_H
#define ISERFUSE_LATENCY_H

#include <stdatomic.h>
#include <stdint.h>

#define LAT_BUCKETS 32

struct lat_hist {
	_Atomic uint64_t count[LAT_BUCKETS]; /* relaxed atomics only: lat_hist_add, lat_hist_snapshot */
};

/* Count one latency of `us` microseconds.  Any thread, lock-free. */
void lat_hist_add(struct lat_hist *h, uint64_t us);

/* Copy the counters into out[LAT_BUCKETS] (each read atomically). */
void lat_hist_snapshot(const struct lat_hist *h, uint64_t out[LAT_BUCKETS]);

/*
 * The p-th percentile (0 < p <= 100) of a snapshot, in microseconds,
 * interpolated linearly inside its bucket; 0 when the snapshot is empty.
 */
uint64_t lat_hist_percentile(const uint64_t counts[LAT_BUCKETS], double p);

#endif
