/* SPDX-License-Identifier: MIT */
/*
 * CRC32C (Castagnoli) as iSCSI uses it for HeaderDigest and DataDigest
 * (RFC 7143 §13.1; algorithm and examples in RFC 3720 Appendix B.4):
 * polynomial 0x1EDC6F41 (reflected 0x82F63B78), initial value all ones,
 * final complement.  The digest goes on the wire least significant byte
 * first: 32 bytes of zeros give 0x8a9136aa, sent as aa 36 91 8a.
 * Backed by ISA-L (crc32_iscsi).  Pure: no state, thread safe.
 */
#ifndef ISERFUSE_CRC32C_H
#define ISERFUSE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#define ISCSI_DIGEST_LEN 4u /* bytes a digest takes on the wire */

/*
 * CRC32C of len bytes at buf (read only, not kept; may be NULL when len is
 * 0), chained: pass crc = 0 for the first piece and the previous result for
 * the next ones, so iscsi_crc32c(iscsi_crc32c(0, a, n), b, m) is the CRC of
 * a followed by b.  Returns the digest value, which iscsi_digest_put()
 * turns into the 4 bytes sent (RFC 7143 §13.1, RFC 3720 B.4).  No errors.
 */
uint32_t iscsi_crc32c(uint32_t crc, const void *buf, size_t len);

/* Store a digest value in its 4 wire bytes, least significant first
 * (RFC 3720 B.4: 0x8a9136aa is sent as aa 36 91 8a).  No errors. */
void iscsi_digest_put(uint8_t out[ISCSI_DIGEST_LEN], uint32_t crc);

/* The digest value of 4 received wire bytes (inverse of iscsi_digest_put). */
uint32_t iscsi_digest_get(const uint8_t in[ISCSI_DIGEST_LEN]);

#endif
