/* SPDX-License-Identifier: MIT */
/*
 * CRC32C for iSCSI digests (RFC 7143 §13.1, RFC 3720 Appendix B.4).
 *
 * ISA-L's crc32_iscsi(buf, len, init) runs the reflected CRC32C register
 * from `init` and returns the register without a final complement: the
 * digest of a buffer is ~crc32_iscsi(buf, len, ~0).  Chaining passes the
 * register on, i.e. the complement of the previous digest.
 */
#include "crc32c.h"

#include <isa-l/crc.h>
#include <limits.h>

uint32_t iscsi_crc32c(uint32_t crc, const void *buf, size_t len)
{
	unsigned int reg = ~crc;
	unsigned char *p = (unsigned char *)buf; /* ISA-L takes a non-const pointer; it only reads */

	while (len > 0) {
		int n = len > (size_t)INT_MAX ? INT_MAX : (int)len;
		reg = crc32_iscsi(p, n, reg);
		p += n;
		len -= (size_t)n;
	}
	return ~reg;
}

void iscsi_digest_put(uint8_t out[ISCSI_DIGEST_LEN], uint32_t crc)
{
	out[0] = (uint8_t)crc;
	out[1] = (uint8_t)(crc >> 8);
	out[2] = (uint8_t)(crc >> 16);
	out[3] = (uint8_t)(crc >> 24);
}

uint32_t iscsi_digest_get(const uint8_t in[ISCSI_DIGEST_LEN])
{
	return (uint32_t)in[0] | (uint32_t)in[1] << 8 | (uint32_t)in[2] << 16 | (uint32_t)in[3] << 24;
}
