/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>

#include "initiator/util/latency.h"

Test(latency, buckets_are_log2_of_microseconds)
{
	static struct lat_hist h;
	uint64_t c[LAT_BUCKETS];
	lat_hist_add(&h, 0);
	lat_hist_add(&h, 1);
	lat_hist_add(&h, 2);
	lat_hist_add(&h, 3);
	lat_hist_add(&h, 1000);     /* 512..1023 */
	lat_hist_add(&h, 1024);     /* 1024..2047 */
	lat_hist_add(&h, UINT64_MAX); /* the last bucket holds everything slower */
	lat_hist_snapshot(&h, c);
	cr_assert_eq(c[0], 2);
	cr_assert_eq(c[1], 2);
	cr_assert_eq(c[9], 1);
	cr_assert_eq(c[10], 1);
	cr_assert_eq(c[LAT_BUCKETS - 1], 1);
}

Test(latency, percentiles_interpolate_inside_a_bucket)
{
	uint64_t c[LAT_BUCKETS] = {0};
	cr_assert_eq(lat_hist_percentile(c, 50), 0, "empty: 0");
	c[7] = 100; /* 100 samples in 128..255 us */
	cr_assert_eq(lat_hist_percentile(c, 50), 192);
	cr_assert_eq(lat_hist_percentile(c, 100), 256);
	c[7] = 90;
	c[12] = 10; /* 10 samples in 4096..8191 us */
	cr_assert_leq(lat_hist_percentile(c, 50), 256);
	cr_assert_geq(lat_hist_percentile(c, 50), 128);
	uint64_t p99 = lat_hist_percentile(c, 99);
	cr_assert(p99 >= 4096 && p99 <= 8192, "p99 %llu", (unsigned long long)p99);
	cr_assert_leq(lat_hist_percentile(c, 90), lat_hist_percentile(c, 99));
}

static struct lat_hist shared;

static void *adder(void *arg)
{
	(void)arg;
	for (int i = 0; i < 100000; i++)
		lat_hist_add(&shared, (uint64_t)i % 5000);
	return NULL;
}

Test(latency, concurrent_adds_lose_nothing)
{
	pthread_t t[4];
	uint64_t c[LAT_BUCKETS], total = 0;
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, adder, NULL);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	lat_hist_snapshot(&shared, c);
	for (int i = 0; i < LAT_BUCKETS; i++)
		total += c[i];
	cr_assert_eq(total, 400000);
}
