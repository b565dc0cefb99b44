/* SPDX-License-Identifier: MIT */
/*
 * CHAP responses, binary value encoding and challenges (RFC 7143 §6.1,
 * §12.1.3; RFC 1994 §4.1).  Hashes and base64 come from nettle.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* explicit_bzero */
#endif
#include "chap.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include <nettle/base64.h>
#include <nettle/md5.h>
#include <nettle/memops.h>
#include <nettle/nettle-meta.h>
#include <nettle/sha1.h>
#include <nettle/sha2.h>
#include <nettle/sha3.h>

#include "initiator/util/hex.h"

static const struct nettle_hash *chap_hash(unsigned alg)
{
	switch (alg) {
	case ISCSI_CHAP_MD5:
		return &nettle_md5;
	case ISCSI_CHAP_SHA1:
		return &nettle_sha1;
	case ISCSI_CHAP_SHA256:
		return &nettle_sha256;
	case ISCSI_CHAP_SHA3_256:
		return &nettle_sha3_256;
	default:
		return NULL;
	}
}

size_t iscsi_chap_digest_len(unsigned alg)
{
	const struct nettle_hash *h = chap_hash(alg);
	return h ? h->digest_size : 0;
}

const char *iscsi_chap_alg_name(unsigned alg)
{
	switch (alg) {
	case ISCSI_CHAP_MD5:
		return "MD5";
	case ISCSI_CHAP_SHA1:
		return "SHA-1";
	case ISCSI_CHAP_SHA256:
		return "SHA-256";
	case ISCSI_CHAP_SHA3_256:
		return "SHA3-256";
	default:
		return "unsupported";
	}
}

int iscsi_chap_response(unsigned alg, uint8_t id, const void *secret, size_t secret_len,
			const uint8_t *challenge, size_t challenge_len, uint8_t *out)
{
	const struct nettle_hash *h = chap_hash(alg);
	union {
		struct md5_ctx md5;
		struct sha1_ctx sha1;
		struct sha256_ctx sha256;
		struct sha3_256_ctx sha3_256;
	} ctx;

	if (h == NULL || h->digest_size > ISCSI_CHAP_DIGEST_MAX || h->context_size > sizeof(ctx))
		return -EINVAL;
	h->init(&ctx);
	h->update(&ctx, 1, &id);
	if (secret_len)
		h->update(&ctx, secret_len, secret);
	if (challenge_len)
		h->update(&ctx, challenge_len, challenge);
	h->digest(&ctx, h->digest_size, out);
	explicit_bzero(&ctx, sizeof(ctx));
	return (int)h->digest_size;
}

static int decode_hex(const char *p, size_t n, uint8_t *out, size_t cap, size_t *len)
{
	size_t bytes = (n + 1) / 2;
	size_t o = 0, i = 0;

	if (bytes > cap)
		return -EMSGSIZE;
	for (i = 0; i < n; i++)
		if (hex_val((unsigned char)p[i]) < 0)
			return -EINVAL;
	i = 0;
	if (n % 2) /* an odd count: the first digit stands alone */
		out[o++] = (uint8_t)hex_val((unsigned char)p[i++]);
	for (; i < n; i += 2)
		out[o++] = (uint8_t)(hex_val((unsigned char)p[i]) << 4 | hex_val((unsigned char)p[i + 1]));
	*len = o;
	return 0;
}

static bool is_b64(unsigned char ch)
{
	return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '+' ||
	       ch == '/';
}

static int decode_base64(const char *p, size_t n, uint8_t *out, size_t cap, size_t *len)
{
	struct base64_decode_ctx ctx;
	size_t pad = 0;

	/* nettle skips white space and tolerates missing padding: be strict first. */
	if (n % 4)
		return -EINVAL;
	while (pad < 2 && pad < n && p[n - 1 - pad] == '=')
		pad++;
	for (size_t i = 0; i < n - pad; i++)
		if (!is_b64((unsigned char)p[i]))
			return -EINVAL;
	size_t bytes = n / 4 * 3 - pad;
	if (bytes > cap)
		return -EMSGSIZE;

	uint8_t tmp[BASE64_DECODE_LENGTH(4 * ((ISCSI_CHAP_CHALLENGE_MAX + 2) / 3)) + 4];
	if (BASE64_DECODE_LENGTH(n) > sizeof(tmp))
		return -EMSGSIZE;
	size_t got = sizeof(tmp);
	base64_decode_init(&ctx);
	int ok = base64_decode_update(&ctx, &got, tmp, n, p) && base64_decode_final(&ctx);
	int rc = 0;
	if (!ok || got != bytes)
		rc = -EINVAL;
	else
		memcpy(out, tmp, got);
	*len = rc ? 0 : got;
	explicit_bzero(tmp, sizeof(tmp));
	explicit_bzero(&ctx, sizeof(ctx));
	return rc;
}

int iscsi_chap_decode(const char *text, uint8_t *out, size_t cap, size_t *len)
{
	int rc = -EINVAL;

	*len = 0;
	if (text == NULL || text[0] != '0' || text[1] == '\0')
		goto out;
	size_t n = strlen(text + 2);
	if (n == 0)
		goto out;
	if (text[1] == 'x' || text[1] == 'X')
		rc = decode_hex(text + 2, n, out, cap, len);
	else if (text[1] == 'b' || text[1] == 'B')
		rc = decode_base64(text + 2, n, out, cap, len);
out:
	if (rc) {
		*len = 0;
		if (cap)
			explicit_bzero(out, cap);
	}
	return rc;
}

int iscsi_chap_encode_hex(const uint8_t *bin, size_t len, char *out, size_t cap)
{
	static const char digits[] = "0123456789abcdef";

	if (cap < 3 || (cap - 3) / 2 < len) {
		if (cap)
			out[0] = '\0';
		return -ENOSPC;
	}
	out[0] = '0';
	out[1] = 'x';
	for (size_t i = 0; i < len; i++) {
		out[2 + 2 * i] = digits[bin[i] >> 4];
		out[3 + 2 * i] = digits[bin[i] & 15];
	}
	out[2 + 2 * len] = '\0';
	return 0;
}

int iscsi_chap_parse_id(const char *text, uint8_t *id)
{
	unsigned v = 0;
	size_t n;

	if (text == NULL || text[0] == '\0')
		return -EINVAL;
	if (text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
		n = strlen(text + 2);
		if (n == 0)
			return -EINVAL;
		for (size_t i = 0; i < n; i++) {
			int d = hex_val((unsigned char)text[2 + i]);
			if (d < 0)
				return -EINVAL;
			v = v * 16 + (unsigned)d;
			if (v > 255)
				return -EINVAL;
		}
	} else {
		for (const char *p = text; *p; p++) {
			if (*p < '0' || *p > '9')
				return -EINVAL;
			v = v * 10 + (unsigned)(*p - '0');
			if (v > 255)
				return -EINVAL;
		}
	}
	*id = (uint8_t)v;
	return 0;
}

int iscsi_chap_random(uint8_t *out, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t r = getrandom(out + got, len - got, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			explicit_bzero(out, len);
			return -e;
		}
		got += (size_t)r;
	}
	return 0;
}

int iscsi_chap_check_challenge(const uint8_t *chal, size_t len, const uint8_t *ours, size_t ours_len)
{
	if (len < ISCSI_CHAP_CHALLENGE_MIN || len > ISCSI_CHAP_CHALLENGE_MAX)
		return -ERANGE;
	if (ours != NULL && ours_len == len && iscsi_chap_equal(chal, ours, len))
		return -EACCES;
	return 0;
}

bool iscsi_chap_equal(const uint8_t *a, const uint8_t *b, size_t n)
{
	return memeql_sec(a, b, n) != 0;
}
