/* SPDX-License-Identifier: MIT */
/* The pass clock's reading (clock.h): one per thread, 0 outside a pass. */
#include "clock.h"

_Thread_local int64_t clk_pass_now_us;
