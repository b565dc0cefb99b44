/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for text keys and negotiation (initiator/wire/text.c).
 *
 * Input: a text data segment as a target sends it ("key=value\0...").  It is
 * parsed from an exact-size copy; every pair is applied to three fresh
 * negotiations (our default offer sent; nothing offered, so the target
 * offers first; nothing offered with CRC32C digests configured), each with
 * its own reply buffer, one of them small enough to fill up.  Checks: the
 * callback sees NUL-terminated keys and values inside the copy, the replies
 * stay within their buffers and parse back as text, and the finished
 * parameters are within the RFC 7143 ranges.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "initiator/wire/text.h"

#define CHECK(cond)                                                                   \
	do {                                                                              \
		if (!(cond))                                                              \
			__builtin_trap();                                                 \
	} while (0)

#define NEGS 3

struct run {
	const char *copy;
	size_t len;
	unsigned pairs;
	struct iscsi_neg neg[NEGS];
	char *reply[NEGS];
	size_t cap[NEGS], reply_len[NEGS];
	bool dead[NEGS]; /* a negotiation that failed stops taking keys */
};

static int count_cb(void *arg, const char *key, const char *value)
{
	unsigned *n = arg;

	(void)key;
	(void)value;
	(*n)++;
	return 0;
}

static void check_text(const char *buf, size_t len)
{
	char *copy = malloc(len ? len : 1);
	unsigned n = 0;

	CHECK(copy != NULL);
	memcpy(copy, buf, len);
	CHECK(iscsi_text_parse(len ? copy : NULL, len, count_cb, &n) == 0);
	free(copy);
}

static int pair_cb(void *arg, const char *key, const char *value)
{
	struct run *r = arg;
	size_t kl = strlen(key), vl = strlen(value);

	/* key and value are NUL-terminated pieces of the copy */
	CHECK(key >= r->copy && key + kl < r->copy + r->len);
	CHECK(value == key + kl + 1 && value + vl < r->copy + r->len);
	CHECK(kl >= 1 && kl <= ISCSI_TEXT_KEY_MAX && vl <= ISCSI_TEXT_VALUE_MAX);
	CHECK(memchr(key, '=', kl) == NULL);
	r->pairs++;

	for (int i = 0; i < NEGS; i++) {
		if (r->dead[i])
			continue;
		size_t before = r->reply_len[i];
		int rc = iscsi_neg_apply(&r->neg[i], key, value, r->reply[i], r->cap[i], &r->reply_len[i]);
		CHECK(rc == 0 || rc == -EPROTO || rc == -ENOSPC);
		CHECK(r->reply_len[i] >= before && r->reply_len[i] <= r->cap[i]);
		if (rc != 0) {
			CHECK(r->reply_len[i] == before);
			r->dead[i] = true;
		}
	}
	return 0;
}

static void check_params(const struct iscsi_params *p)
{
	CHECK(memchr(p->target_alias, '\0', sizeof(p->target_alias)) != NULL);
	CHECK(p->first_burst <= p->max_burst);
	CHECK(p->max_xmit_dsl >= 512 && p->max_xmit_dsl <= 16777215);
	CHECK(p->max_burst >= 512 && p->max_burst <= 16777215);
	CHECK(p->first_burst >= 512);
	CHECK(p->max_outstanding_r2t >= 1 && p->max_outstanding_r2t <= 65535);
	CHECK(p->default_time2wait <= 3600 && p->default_time2retain <= 3600);
	CHECK(p->erl <= 2);
	CHECK(p->max_connections >= 1 && p->max_connections <= 65535);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct run r;
	struct iscsi_neg_config cfg[NEGS];
	static const size_t caps[NEGS] = { 8192, 64, 8192 * 4 };

	if (size > 65536)
		return 0;
	memset(&r, 0, sizeof(r));
	char *copy = malloc(size ? size : 1);
	CHECK(copy != NULL);
	if (size)
		memcpy(copy, data, size);
	r.copy = copy;
	r.len = size;

	for (int i = 0; i < NEGS; i++)
		iscsi_neg_config_default(&cfg[i]);
	cfg[2].header_digest_crc32c = true;
	cfg[2].data_digest_crc32c = true;
	cfg[2].max_recv_dsl = 8192;
	cfg[2].max_burst = 65536;
	cfg[2].first_burst = 1u << 20; /* above max_burst: clamped */
	cfg[2].immediate_data = false;
	cfg[2].initial_r2t = true;
	cfg[2].max_outstanding_r2t = 0; /* below the range: clamped */
	cfg[2].default_time2wait = 7200;
	for (int i = 0; i < NEGS; i++) {
		iscsi_neg_init(&r.neg[i], &cfg[i]);
		r.cap[i] = caps[i];
		r.reply[i] = malloc(caps[i]);
		CHECK(r.reply[i] != NULL);
	}
	r.neg[1].offered = 0;
	r.neg[2].offered = 0;

	int rc = iscsi_text_parse(size ? copy : NULL, size, pair_cb, &r);
	CHECK(rc == 0 || rc == -EPROTO);
	if (rc != 0)
		CHECK(r.pairs == 0); /* a malformed segment is refused as a whole */

	for (int i = 0; i < NEGS; i++) {
		struct iscsi_params p;

		check_text(r.reply[i], r.reply_len[i]);
		iscsi_neg_finish(&r.neg[i], &p);
		check_params(&p);
		free(r.reply[i]);
	}
	free(copy);
	return 0;
}
