/* SPDX-License-Identifier: MIT */
/*
 * CHAP for the iSCSI security stage (RFC 7143 §12.1.3, RFC 1994).
 *
 *   response = H(identifier as one byte || secret || challenge)
 *
 * with H chosen by CHAP_A (IANA "PPP Authentication Algorithms"):
 * 5 = MD5, 6 = SHA-1, 7 = SHA-256, 8 = SHA3-256.  The hashes come from
 * nettle.  Binary values travel as "0x" hex; "0b" base64 is accepted on
 * input (RFC 7143 §6.1).  Pure apart from iscsi_chap_challenge (getrandom).
 * Callers wipe secrets and intermediate buffers with explicit_bzero; the
 * functions here wipe what they hold themselves.
 */
#ifndef ISERFUSE_CHAP_H
#define ISERFUSE_CHAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "initiator/net/url.h"

#define ISCSI_CHAP_MD5 5u
#define ISCSI_CHAP_SHA1 6u
#define ISCSI_CHAP_SHA256 7u
#define ISCSI_CHAP_SHA3_256 8u

#define ISCSI_CHAP_DIGEST_MAX 32u      /* bytes: the longest response (SHA-256, SHA3-256) */
#define ISCSI_CHAP_CHALLENGE_MIN 16u   /* bytes: shortest challenge we accept or send */
#define ISCSI_CHAP_CHALLENGE_MAX 1024u /* bytes: RFC 7143 §12.1.3 limit on CHAP_C */
#define ISCSI_CHAP_ALGS_MAX 4u         /* most algorithms in one CHAP_A offer */
/* Longest "0x..." text of a binary value of ISCSI_CHAP_CHALLENGE_MAX bytes, with its NUL. */
#define ISCSI_CHAP_HEX_MAX (2u + 2u * ISCSI_CHAP_CHALLENGE_MAX + 1u)

/* Digest length in bytes of CHAP_A value `alg`, or 0 when we do not support it. */
size_t iscsi_chap_digest_len(unsigned alg);

/* "MD5", "SHA-1", "SHA-256", "SHA3-256", or "unsupported". */
const char *iscsi_chap_alg_name(unsigned alg);

/*
 * Compute the CHAP response (RFC 1994 §4.1, RFC 7143 §12.1.3):
 * H(id || secret[0..secret_len) || challenge[0..challenge_len)) with the
 * hash of CHAP_A value `alg`, written to out (at least
 * iscsi_chap_digest_len(alg) bytes; ISCSI_CHAP_DIGEST_MAX always fits).
 * Nothing is retained; the hash state is wiped.
 * Returns the digest length in bytes, or -EINVAL for an unsupported alg.
 */
int iscsi_chap_response(unsigned alg, uint8_t id, const void *secret, size_t secret_len,
			const uint8_t *challenge, size_t challenge_len, uint8_t *out);

/*
 * Decode a binary value (RFC 7143 §6.1): "0x"/"0X" followed by hex digits
 * (an odd count means an implied leading 0), or "0b"/"0B" followed by
 * base64 with its '=' padding.  Writes at most cap bytes to out and the
 * decoded length to *len.  Returns 0, -EINVAL (no prefix, no digits, a bad
 * character or padding) or -EMSGSIZE (longer than cap bytes).  On error
 * *len is 0 and out is wiped.
 */
int iscsi_chap_decode(const char *text, uint8_t *out, size_t cap, size_t *len);

/*
 * Encode len bytes as "0x" and lowercase hex into out (cap bytes, NUL
 * included: at least 2 * len + 3).  Returns 0 or -ENOSPC (out then holds
 * "" when cap > 0).
 */
int iscsi_chap_encode_hex(const uint8_t *bin, size_t len, char *out, size_t cap);

/*
 * Parse CHAP_I: a decimal number or a "0x" hex constant (RFC 7143 §6.1),
 * 0..255.  Returns 0 with *id set, or -EINVAL.
 */
int iscsi_chap_parse_id(const char *text, uint8_t *id);

/*
 * Fill out with len random bytes from getrandom(2) (a challenge or an
 * identifier).  Returns 0, or the negative errno of getrandom (out wiped).
 */
int iscsi_chap_random(uint8_t *out, size_t len);

/*
 * Check a challenge received from the peer before answering it (RFC 7143
 * §12.1.3): `len` must be ISCSI_CHAP_CHALLENGE_MIN..ISCSI_CHAP_CHALLENGE_MAX
 * bytes (else -ERANGE), and must differ from the challenge we issue
 * ourselves (`ours`, ours_len bytes; NULL when we issue none), else
 * -EACCES: a reflected challenge would make us compute the answer to our
 * own question.  Returns 0 when the challenge may be answered.
 */
int iscsi_chap_check_challenge(const uint8_t *chal, size_t len, const uint8_t *ours, size_t ours_len);

/* Compare n bytes in time independent of where they differ (nettle memeql_sec). */
bool iscsi_chap_equal(const uint8_t *a, const uint8_t *b, size_t n);

/*
 * CHAP credentials (RFC 7143 §12.1.3), NUL-terminated, "" for none: user
 * and secret authenticate us to the target; with mutual_user and
 * mutual_secret set too, the target must prove it knows mutual_secret and
 * give that name.  The one form of the login, discovery and session
 * configurations and of the gateway; copied by assignment, wiped whole
 * with iscsi_chap_creds_wipe.
 */
struct iscsi_chap_creds {
	char user[ISCSI_CRED_MAX];
	char secret[ISCSI_CRED_MAX];
	char mutual_user[ISCSI_CRED_MAX];
	char mutual_secret[ISCSI_CRED_MAX];
};

/* Overwrite every byte of c with zeroes (explicit_bzero: not optimised away). */
static inline void iscsi_chap_creds_wipe(struct iscsi_chap_creds *c)
{
	explicit_bzero(c, sizeof(*c));
}

#endif
