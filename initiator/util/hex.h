/* SPDX-License-Identifier: MIT */
/*
 * Hexadecimal digits, as CHAP's binary values (RFC 7143 §6.1, "0x"
 * encoding) and URLs' percent-encoding (RFC 3986 §2.1) and iSCSI names
 * (eui., naa., RFC 7143 §4.2.7) spell them.
 *
 * Header only, no state; any thread.
 */
#ifndef ISERFUSE_HEX_H
#define ISERFUSE_HEX_H

/* The value 0..15 of the hex digit ch (0-9, a-f, A-F), or -1 for any other character. */
static inline int hex_val(unsigned char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

#endif
