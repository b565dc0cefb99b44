/* SPDX-License-Identifier: MIT */
/* CRC32C digests: RFC 3720 Appendix B.4 examples, chaining, wire order. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "initiator/util/crc32c.h"

/* The digest of buf as it goes on the wire, compared with the RFC's bytes. */
static void assert_wire(const uint8_t *buf, size_t len, uint32_t value, const uint8_t wire[4])
{
	uint8_t out[4];
	uint32_t crc = iscsi_crc32c(0, buf, len);
	cr_assert_eq(crc, value, "CRC32C 0x%08x, want 0x%08x", crc, value);
	iscsi_digest_put(out, crc);
	cr_assert_arr_eq(out, wire, 4, "wire bytes %02x %02x %02x %02x", out[0], out[1], out[2], out[3]);
	cr_assert_eq(iscsi_digest_get(wire), value);
}

Test(crc32c, rfc3720_b4_zeros)
{
	uint8_t b[32] = {0};
	assert_wire(b, 32, 0x8a9136aa, (const uint8_t[]){0xaa, 0x36, 0x91, 0x8a});
}

Test(crc32c, rfc3720_b4_ones)
{
	uint8_t b[32];
	memset(b, 0xff, sizeof(b));
	assert_wire(b, 32, 0x62a8ab43, (const uint8_t[]){0x43, 0xab, 0xa8, 0x62});
}

Test(crc32c, rfc3720_b4_incrementing)
{
	uint8_t b[32];
	for (int i = 0; i < 32; i++)
		b[i] = (uint8_t)i;
	assert_wire(b, 32, 0x46dd794e, (const uint8_t[]){0x4e, 0x79, 0xdd, 0x46});
}

Test(crc32c, rfc3720_b4_decrementing)
{
	uint8_t b[32];
	for (int i = 0; i < 32; i++)
		b[i] = (uint8_t)(31 - i);
	assert_wire(b, 32, 0x113fdb5c, (const uint8_t[]){0x5c, 0xdb, 0x3f, 0x11});
}

/* RFC 3720 B.4: the BHS of a SCSI Read (10) command. */
static const uint8_t read_pdu[48] = {
	0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
	0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

Test(crc32c, rfc3720_b4_read_pdu)
{
	assert_wire(read_pdu, sizeof(read_pdu), 0xd9963a56, (const uint8_t[]){0x56, 0x3a, 0x96, 0xd9});
}

Test(crc32c, check_value_and_empty)
{
	cr_assert_eq(iscsi_crc32c(0, "123456789", 9), 0xe3069283, "the CRC-32C check value");
	cr_assert_eq(iscsi_crc32c(0, NULL, 0), 0);
	cr_assert_eq(iscsi_crc32c(0x12345678, NULL, 0), 0x12345678, "an empty piece changes nothing");
}

Test(crc32c, chaining_equals_one_pass)
{
	uint8_t big[70000];
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 131 + (i >> 8));
	uint32_t whole = iscsi_crc32c(0, big, sizeof(big));
	/* every split of the Read PDU, and uneven splits of a large buffer */
	for (size_t cut = 0; cut <= sizeof(read_pdu); cut++)
		cr_assert_eq(iscsi_crc32c(iscsi_crc32c(0, read_pdu, cut), read_pdu + cut, sizeof(read_pdu) - cut),
			     0xd9963a56, "split at %zu", cut);
	static const size_t cuts[] = {1, 3, 4, 7, 4096, 4099, 65536, 69999};
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		size_t c = cuts[i];
		cr_assert_eq(iscsi_crc32c(iscsi_crc32c(0, big, c), big + c, sizeof(big) - c), whole, "split at %zu", c);
	}
	/* three pieces: data, then its padding */
	uint32_t a = iscsi_crc32c(0, big, 1001);
	uint8_t padded[1004];
	memcpy(padded, big, 1001);
	memset(padded + 1001, 0, 3);
	cr_assert_eq(iscsi_crc32c(iscsi_crc32c(a, "\0\0", 2), "\0", 1), iscsi_crc32c(0, padded, sizeof(padded)));
}

Test(crc32c, detects_a_flipped_bit)
{
	uint8_t b[48];
	memcpy(b, read_pdu, sizeof(b));
	for (size_t bit = 0; bit < 8 * sizeof(b); bit++) {
		b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		cr_assert_neq(iscsi_crc32c(0, b, sizeof(b)), 0xd9963a56, "bit %zu", bit);
		b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
}
