/* SPDX-License-Identifier: MIT */
/*
 * gateway/fuse/rx_layout.h: where a FUSE reader reads a request into a pool
 * slice so that a WRITE's data lands page aligned one page in, with the
 * header sizes checked against the kernel's (linux/fuse.h).
 */
#include <criterion/criterion.h>
#include <linux/fuse.h>

#include "gateway/fuse/rx_layout.h"

Test(rx_layout, header_sizes_are_the_kernels)
{
	cr_assert_eq(GW_RX_IN_HDR, sizeof(struct fuse_in_header));
	cr_assert_eq(GW_RX_WRITE_HDR, sizeof(struct fuse_in_header) + sizeof(struct fuse_write_in));
	cr_assert_eq(GW_RX_MIN_READ, FUSE_MIN_READ_BUFFER);
}

Test(rx_layout, a_writes_data_lands_on_the_second_page)
{
	cr_assert_eq(gw_rx_read_off(), 4016);
	cr_assert_eq(gw_rx_read_off() + GW_RX_WRITE_HDR, GW_RX_DATA_OFF);
	cr_assert_eq(GW_RX_DATA_OFF % 4096, 0, "page aligned");
	/* the gateway's slice for max_io 512 KiB: max_io + 4 blocks of 4 KiB */
	size_t ss = 512 * 1024 + 4 * 4096;
	cr_assert_eq(gw_rx_read_len(ss), ss - 4016, "the read may fill the slice to its end");
}

Test(rx_layout, a_slice_fits_when_headroom_data_and_scratch_do)
{
	size_t mw = 512 * 1024;
	cr_assert(gw_rx_fits(mw + 4 * 4096, mw, 4096), "the gateway's slice: headroom + data + 2 scratch blocks");
	cr_assert(gw_rx_fits(mw + 3 * 4096, mw, 4096), "exactly enough");
	cr_assert(!gw_rx_fits(mw + 3 * 4096 - 1, mw, 4096), "one byte short: the data would reach the scratch");
	cr_assert(gw_rx_fits(mw + 4096 + 1024, mw, 512), "512-byte blocks need less scratch");
	cr_assert(!gw_rx_fits(4096 + 2 * 512 + 1024, 1024, 512), "the read would be under FUSE_MIN_READ_BUFFER");
	cr_assert(!gw_rx_fits(4096, 0, 4096), "no room at all");
}
