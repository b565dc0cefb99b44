/* SPDX-License-Identifier: MIT */
/*
 * initiator/util/hex.h: the value of a hex digit in either case, -1 for
 * every other byte (the neighbours of each digit range included).
 */
#include <criterion/criterion.h>

#include "initiator/util/hex.h"

Test(hex, digits_in_both_cases)
{
	const char *lower = "0123456789abcdef", *upper = "0123456789ABCDEF";
	for (int i = 0; i < 16; i++) {
		cr_assert_eq(hex_val((unsigned char)lower[i]), i, "'%c'", lower[i]);
		cr_assert_eq(hex_val((unsigned char)upper[i]), i, "'%c'", upper[i]);
	}
}

Test(hex, every_other_byte_is_minus_one)
{
	int digits = 0;
	for (int ch = 0; ch < 256; ch++) {
		int v = hex_val((unsigned char)ch);
		if (v < 0) {
			cr_assert_eq(v, -1, "byte 0x%02x", ch);
			continue;
		}
		digits++;
	}
	cr_assert_eq(digits, 22); /* 0-9, a-f, A-F */
	cr_assert_eq(hex_val('/'), -1);
	cr_assert_eq(hex_val(':'), -1);
	cr_assert_eq(hex_val('`'), -1);
	cr_assert_eq(hex_val('g'), -1);
	cr_assert_eq(hex_val('@'), -1);
	cr_assert_eq(hex_val('G'), -1);
	cr_assert_eq(hex_val(0xb0), -1);
}
