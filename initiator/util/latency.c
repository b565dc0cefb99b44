/* SPDX-License-Identifier: MIT */
#include "latency.h"

static unsigned bucket_of(uint64_t us)
{
	if (us < 2)
		return 0;
	unsigned b = 63u - (unsigned)__builtin_clzll(us);
	return b < LAT_BUCKETS ? b : LAT_BUCKETS - 1;
}

void lat_hist_add(struct lat_hist *h, uint64_t us)
{
	atomic_fetch_add_explicit(&h->count[bucket_of(us)], 1, memory_order_relaxed);
}

void lat_hist_snapshot(const struct lat_hist *h, uint64_t out[LAT_BUCKETS])
{
	for (unsigned i = 0; i < LAT_BUCKETS; i++)
		out[i] = atomic_load_explicit(&h->count[i], memory_order_relaxed);
}

uint64_t lat_hist_percentile(const uint64_t counts[LAT_BUCKETS], double p)
{
	uint64_t total = 0;
	for (unsigned i = 0; i < LAT_BUCKETS; i++)
		total += counts[i];
	if (total == 0)
		return 0;
	double rank = p / 100.0 * (double)total; /* how many samples lie at or below the answer */
	uint64_t below = 0;
	for (unsigned i = 0; i < LAT_BUCKETS; i++) {
		if (counts[i] && (double)(below + counts[i]) >= rank) {
			double lo = i == 0 ? 0.0 : (double)(1ull << i);
			double hi = (double)(2ull << i);
			double frac = (rank - (double)below) / (double)counts[i];
			if (frac < 0)
				frac = 0;
			return (uint64_t)(lo + (hi - lo) * frac);
		}
		below += counts[i];
	}
	return (uint64_t)(2ull << (LAT_BUCKETS - 1));
}
