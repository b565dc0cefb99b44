/* SPDX-License-Identifier: MIT */
/*
 * Login state machine against a scripted peer: each test lists the Login
 * Responses the "target" answers with, and checks what the initiator sent
 * and concluded.  Real targets are exercised by the target suite; this
 * covers what they rarely do (continuation, refusals, illegal answers).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "initiator/transport/cancel.h"
#include "initiator/login/login.h"

#define MAX_STEPS 8

struct step {
	bool transit, cont;
	uint8_t csg, nsg;
	uint8_t status_class, status_detail;
	const char *text; /* NUL-separated, ends with an extra NUL */
	size_t text_len;
};

struct fake {
	struct iscsi_transport base;
	struct step steps[MAX_STEPS];
	int nsteps, next;
	struct iscsi_bhs sent[MAX_STEPS];
	char sent_text[MAX_STEPS][1024];
	uint32_t sent_len[MAX_STEPS];
	int nsent;
};

static int fake_send(struct iscsi_transport *t, const uint8_t *bhs, const void *data, uint32_t dlen, int timeout_ms)
{
	struct fake *f = (struct fake *)t;
	(void)timeout_ms;
	cr_assert_lt(f->nsent, MAX_STEPS);
	cr_assert_eq(iscsi_bhs_decode(bhs, &f->sent[f->nsent]), 0);
	cr_assert_leq(dlen, sizeof(f->sent_text[0]));
	memcpy(f->sent_text[f->nsent], data, dlen);
	f->sent_len[f->nsent++] = dlen;
	return 0;
}

static int fake_recv(struct iscsi_transport *t, uint8_t *bhs, void *data, uint32_t cap, uint32_t *dlen, int timeout_ms)
{
	struct fake *f = (struct fake *)t;
	(void)timeout_ms;
	if (f->next == f->nsteps)
		return -ECONNRESET;
	struct step *s = &f->steps[f->next++];
	struct iscsi_bhs h = {0};
	h.opcode = ISCSI_OP_LOGIN_RSP;
	h.itt = f->sent[f->nsent - 1].itt;
	h.dlen = (uint32_t)s->text_len;
	h.u.login.transit = s->transit;
	h.u.login.cont = s->cont;
	h.u.login.csg = s->csg;
	h.u.login.nsg = s->nsg;
	h.u.login.tsih = 0x1234;
	h.u.login.statsn = 100 + (uint32_t)f->next;
	h.u.login.expcmdsn = 1;
	h.u.login.maxcmdsn = 32;
	h.u.login.status_class = s->status_class;
	h.u.login.status_detail = s->status_detail;
	cr_assert_eq(iscsi_bhs_encode(&h, bhs), 0);
	cr_assert_leq(s->text_len, cap);
	memcpy(data, s->text, s->text_len);
	*dlen = (uint32_t)s->text_len;
	return 0;
}

static const struct iscsi_transport_ops fake_ops = {.name = "fake", .send_pdu = fake_send, .recv_pdu = fake_recv};

#define STEP(T, C, CSG, NSG, TEXT) {T, C, CSG, NSG, 0, 0, TEXT, sizeof(TEXT) - 1}

static struct iscsi_login_config config(void)
{
	struct iscsi_login_config c = {0};
	strcpy(c.initiator_name, "iqn.2026-11.org.example:init");
	strcpy(c.target_name, "iqn.2026-11.org.example:disk");
	c.isid[0] = 0x80;
	c.cmdsn = 1;
	c.timeout_ms = 1000;
	iscsi_neg_config_default(&c.neg);
	return c;
}

static bool sent_has(struct fake *f, int i, const char *kv)
{
	size_t n = strlen(kv) + 1;
	for (uint32_t off = 0; off + n <= f->sent_len[i]; off += (uint32_t)strlen(f->sent_text[i] + off) + 1)
		if (memcmp(f->sent_text[i] + off, kv, n) == 0)
			return true;
	return false;
}

Test(login, security_then_operational_with_continued_response)
{
	struct fake f = {.base = {&fake_ops}};
	f.steps[0] = (struct step)STEP(true, false, 0, 1, "AuthMethod=None\0TargetPortalGroupTag=1\0");
	/* The operational answer arrives in two PDUs (C bit on the first). */
	f.steps[1] = (struct step)STEP(false, true, 1, 0, "HeaderDigest=None\0DataDigest=None\0MaxBurstLength=131072\0");
	f.steps[2] = (struct step)STEP(true, false, 1, 3, "FirstBurstLength=65536\0ImmediateData=Yes\0InitialR2T=Yes\0"
							  "MaxRecvDataSegmentLength=8192\0MaxOutstandingR2T=1\0");
	f.nsteps = 3;
	struct iscsi_login_config c = config();
	struct iscsi_login_result r;
	char err[256] = "";
	cr_assert_eq(iscsi_login(&f.base, &c, &r, err, sizeof(err)), 0, "%s", err);

	cr_assert_eq(f.nsent, 3);
	/* 1: security stage, our names, AuthMethod=None, T=1 NSG=1, immediate. */
	cr_assert(f.sent[0].immediate);
	cr_assert(f.sent[0].u.login.transit);
	cr_assert_eq(f.sent[0].u.login.csg, 0);
	cr_assert_eq(f.sent[0].u.login.nsg, 1);
	cr_assert(sent_has(&f, 0, "InitiatorName=iqn.2026-11.org.example:init"));
	cr_assert(sent_has(&f, 0, "TargetName=iqn.2026-11.org.example:disk"));
	cr_assert(sent_has(&f, 0, "SessionType=Normal"));
	cr_assert(sent_has(&f, 0, "AuthMethod=None"));
	cr_assert_eq(memcmp(f.sent[0].u.login.isid, c.isid, 6), 0);
	/* 2: operational offers, T=1 NSG=3, ExpStatSN follows the response's StatSN. */
	cr_assert_eq(f.sent[1].u.login.csg, 1);
	cr_assert_eq(f.sent[1].u.login.nsg, 3);
	cr_assert(sent_has(&f, 1, "ErrorRecoveryLevel=0"));
	cr_assert(sent_has(&f, 1, "MaxConnections=1"));
	cr_assert(sent_has(&f, 1, "HeaderDigest=None"));
	cr_assert_eq(f.sent[1].u.login.expstatsn, 102);
	/* 3: the empty request asking for the rest of the continued response. */
	cr_assert_eq(f.sent_len[2], 0);
	cr_assert_not(f.sent[2].u.login.transit);
	cr_assert_not(f.sent[2].u.login.cont);

	cr_assert_eq(r.tsih, 0x1234);
	cr_assert_eq(r.expstatsn, 104);
	cr_assert_eq(r.maxcmdsn, 32);
	cr_assert_eq(r.params.max_burst, 131072);
	cr_assert_eq(r.params.first_burst, 65536);
	cr_assert_eq(r.params.max_xmit_dsl, 8192);
	cr_assert(r.params.immediate_data);
	cr_assert(r.params.initial_r2t);
}

Test(login, refused_target_not_found)
{
	struct fake f = {.base = {&fake_ops}};
	f.steps[0] = (struct step){false, false, 0, 0, 0x02, 0x03, "", 0};
	f.nsteps = 1;
	struct iscsi_login_config c = config();
	struct iscsi_login_result r;
	char err[256] = "";
	cr_assert_eq(iscsi_login(&f.base, &c, &r, err, sizeof(err)), -ENOENT);
	cr_assert(strstr(err, "target not found"), "%s", err);
	cr_assert_eq(r.status_class, 2);
}

Test(login, authentication_failure_is_eacces)
{
	struct fake f = {.base = {&fake_ops}};
	f.steps[0] = (struct step){false, false, 0, 0, 0x02, 0x01, "", 0};
	f.nsteps = 1;
	struct iscsi_login_config c = config();
	struct iscsi_login_result r;
	char err[256] = "";
	cr_assert_eq(iscsi_login(&f.base, &c, &r, err, sizeof(err)), -EACCES);
	cr_assert(strstr(err, "authentication failed"), "%s", err);
}

Test(login, target_demanding_chap_is_refused_cleanly)
{
	struct fake f = {.base = {&fake_ops}};
	f.steps[0] = (struct step)STEP(false, false, 0, 0, "AuthMethod=CHAP\0");
	f.nsteps = 1;
	struct iscsi_login_config c = config();
	struct iscsi_login_result r;
	char err[256] = "";
	cr_assert_eq(iscsi_login(&f.base, &c, &r, err, sizeof(err)), -EACCES);
	cr_assert(strstr(err, "CHAP"), "%s", err);
}

Test(login, illegal_answer_is_eproto)
{
	struct fake f = {.base = {&fake_ops}};
	f.steps[0] = (struct step)STEP(true, false, 0, 1, "AuthMethod=None\0");
	/* A MaxBurstLength above our offer breaks the min() rule. */
	f.steps[1] = (struct step)STEP(true, false, 1, 3, "MaxBurstLength=99999999\0");
	f.nsteps = 2;
	struct iscsi_login_config c = config();
	c.neg.max_burst = 262144;
	struct iscsi_login_result r;
	char err[256] = "";
	cr_assert_eq(iscsi_login(&f.base, &c, &r, err, sizeof(err)), -EPROTO);
	cr_assert(strstr(err, "MaxBurstLength"), "%s", err);
}

Test(login, malformed_text_is_eproto)
{
	struct fake f = {.base = {&fake_ops}};
	f.steps[0] = (struct step){true, false, 0, 1, 0, 0, "AuthMethod", 10}; /* no '=', no NUL */
	f.nsteps = 1;
	struct iscsi_login_config c = config();
	struct iscsi_login_result r;
	char err[256] = "";
	cr_assert_eq(iscsi_login(&f.base, &c, &r, err, sizeof(err)), -EPROTO);
	cr_assert_neq(err[0], '\0');
}

Test(login, target_answering_for_the_wrong_stage)
{
	struct fake f = {.base = {&fake_ops}};
	f.steps[0] = (struct step)STEP(true, false, 1, 3, "AuthMethod=None\0");
	f.nsteps = 1;
	struct iscsi_login_config c = config();
	struct iscsi_login_result r;
	char err[256] = "";
	cr_assert_eq(iscsi_login(&f.base, &c, &r, err, sizeof(err)), -EPROTO);
}

Test(login, connection_closed_mid_login)
{
	struct fake f = {.base = {&fake_ops}};
	f.steps[0] = (struct step)STEP(true, false, 0, 1, "AuthMethod=None\0");
	f.nsteps = 1; /* then the peer hangs up */
	struct iscsi_login_config c = config();
	struct iscsi_login_result r;
	char err[256] = "";
	cr_assert_eq(iscsi_login(&f.base, &c, &r, err, sizeof(err)), -ECONNRESET);
	cr_assert(strstr(err, "closed"), "%s", err);
}

/* HeaderDigest/DataDigest "crc32c" (required): offered alone, refusal fails the login. */
Test(login, required_digest)
{
	struct iscsi_login_config c = config();
	struct iscsi_login_result r;
	char err[256] = "";
	cr_assert_eq(iscsi_neg_set_digest(&c.neg, false, "crc32c"), 0);
	cr_assert_eq(iscsi_neg_set_digest(&c.neg, true, "auto"), 0);

	struct fake f = {.base = {&fake_ops}};
	f.steps[0] = (struct step)STEP(true, false, 0, 1, "AuthMethod=None\0");
	f.steps[1] = (struct step)STEP(true, false, 1, 3, "HeaderDigest=CRC32C\0DataDigest=None\0");
	f.nsteps = 2;
	cr_assert_eq(iscsi_login(&f.base, &c, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert(sent_has(&f, 1, "HeaderDigest=CRC32C"));
	cr_assert(sent_has(&f, 1, "DataDigest=CRC32C,None"));
	cr_assert(r.params.header_digest);
	cr_assert_not(r.params.data_digest, "auto accepts None");

	struct fake g = {.base = {&fake_ops}};
	g.steps[0] = (struct step)STEP(true, false, 0, 1, "AuthMethod=None\0");
	g.steps[1] = (struct step)STEP(true, false, 1, 3, "HeaderDigest=Reject\0DataDigest=CRC32C\0");
	g.nsteps = 2;
	err[0] = '\0';
	cr_assert_eq(iscsi_login(&g.base, &c, &r, err, sizeof(err)), -EPROTO);
	cr_assert_str_eq(err, "login: the target refused HeaderDigest=CRC32C, which was required");

	struct fake h = {.base = {&fake_ops}};
	h.steps[0] = (struct step)STEP(true, false, 0, 1, "AuthMethod=None\0");
	h.steps[1] = (struct step)STEP(true, false, 1, 3, "DataDigest=CRC32C\0");
	h.nsteps = 2;
	err[0] = '\0';
	cr_assert_eq(iscsi_login(&h.base, &c, &r, err, sizeof(err)), -EPROTO, "no answer keeps None");
	cr_assert(strstr(err, "HeaderDigest=CRC32C") != NULL, "%s", err);
}

Test(login, redirect_keeps_target_address)
{
	static const char text[] = "TargetAddress=[2001:db8::7]:3261,2";
	struct fake f = {.base = {&fake_ops}};
	f.steps[0] = (struct step){false, false, 0, 0, 0x01, 0x02, text, sizeof(text)};
	f.nsteps = 1;
	struct iscsi_login_config c = config();
	struct iscsi_login_result r;
	char err[256] = "";
	cr_assert_eq(iscsi_login(&f.base, &c, &r, err, sizeof(err)), -EAGAIN);
	cr_assert_eq(r.status_class, 1);
	cr_assert_eq(r.status_detail, 2);
	cr_assert_str_eq(r.target_address, "[2001:db8::7]:3261,2");
	char host[64];
	unsigned port = 0;
	cr_assert_eq(iscsi_target_address_parse(r.target_address, host, sizeof(host), &port), 0);
	cr_assert_str_eq(host, "2001:db8::7");
	cr_assert_eq(port, 3261);
}

Test(login, target_address_forms)
{
	char host[16];
	unsigned port = 0;
	cr_assert_eq(iscsi_target_address_parse("192.0.2.9", host, sizeof(host), &port), 0);
	cr_assert_str_eq(host, "192.0.2.9");
	cr_assert_eq(port, 3260);
	cr_assert_eq(iscsi_target_address_parse("portal.example:3262,1", host, sizeof(host), &port), 0);
	cr_assert_str_eq(host, "portal.example");
	cr_assert_eq(port, 3262);
	cr_assert_eq(iscsi_target_address_parse("h,1", host, sizeof(host), &port), 0);
	cr_assert_eq(port, 3260);
	cr_assert_eq(iscsi_target_address_parse("", host, sizeof(host), &port), -EINVAL);
	cr_assert_eq(iscsi_target_address_parse("[::1", host, sizeof(host), &port), -EINVAL);
	cr_assert_eq(iscsi_target_address_parse("h:0", host, sizeof(host), &port), -EINVAL);
	cr_assert_eq(iscsi_target_address_parse("h:70000", host, sizeof(host), &port), -EINVAL);
	cr_assert_eq(iscsi_target_address_parse("h:12x", host, sizeof(host), &port), -EINVAL);
	cr_assert_eq(iscsi_target_address_parse("a-very-long-host-name", host, sizeof(host), &port), -EINVAL);
}

/*
 * A target that takes the security stage and then answers every request of
 * the operational stage with an empty Login Response with C set (RFC 7143
 * §11.13.3), for ever: optionally sleep_ms before each, and firing the
 * thread's cancel token after cancel_after responses.
 */
struct endless {
	struct iscsi_transport base;
	uint32_t itt;
	unsigned nrecv, nsend;
	int sleep_ms, cancel_after, cancel_fd, max_timeout_ms;
};

static int endless_send(struct iscsi_transport *t, const uint8_t *bhs, const void *data, uint32_t dlen,
			int timeout_ms)
{
	struct endless *e = (struct endless *)t;
	struct iscsi_bhs h;
	(void)data;
	(void)dlen;
	(void)timeout_ms;
	cr_assert_eq(iscsi_bhs_decode(bhs, &h), 0);
	e->itt = h.itt;
	e->nsend++;
	return 0;
}

static int endless_recv(struct iscsi_transport *t, uint8_t *bhs, void *data, uint32_t cap, uint32_t *dlen,
			int timeout_ms)
{
	static const char sec[] = "AuthMethod=None";
	struct endless *e = (struct endless *)t;
	(void)cap;
	if (timeout_ms > e->max_timeout_ms)
		e->max_timeout_ms = timeout_ms;
	if (e->sleep_ms) {
		struct timespec ts = {0, e->sleep_ms * 1000000L};
		nanosleep(&ts, NULL);
	}
	struct iscsi_bhs h = {0};
	h.opcode = ISCSI_OP_LOGIN_RSP;
	h.itt = e->itt;
	if (e->nrecv == 0) {
		h.u.login.transit = true;
		h.u.login.nsg = 1;
		memcpy(data, sec, sizeof(sec));
		h.dlen = *dlen = sizeof(sec);
	} else {
		h.u.login.cont = true;
		h.u.login.csg = 1;
		*dlen = 0;
	}
	h.u.login.statsn = 100 + e->nrecv;
	cr_assert_eq(iscsi_bhs_encode(&h, bhs), 0);
	if (++e->nrecv == (unsigned)e->cancel_after)
		iscsi_cancel_fire(e->cancel_fd);
	return 0;
}

static const struct iscsi_transport_ops endless_ops = {.name = "endless", .send_pdu = endless_send,
						       .recv_pdu = endless_recv};

Test(login, empty_continuations_end_after_a_bounded_count)
{
	struct endless e = {.base = {&endless_ops}, .cancel_fd = -1};
	struct iscsi_login_config c = config();
	struct iscsi_login_result r;
	char err[256] = "";
	c.timeout_ms = 60000;
	cr_assert_eq(iscsi_login(&e.base, &c, &r, err, sizeof(err)), -EPROTO, "%s", err);
	cr_assert_eq(e.nrecv, ISCSI_LOGIN_RSP_MAX);
	cr_assert(strstr(err, "not complete after 64 Login Responses"), "%s", err);
}

Test(login, slow_continuations_end_at_the_deadline)
{
	struct endless e = {.base = {&endless_ops}, .cancel_fd = -1, .sleep_ms = 20};
	struct iscsi_login_config c = config();
	struct iscsi_login_result r;
	char err[256] = "";
	c.timeout_ms = 60000;
	int64_t t0 = iscsi_now_ms();
	c.deadline_ms = t0 + 300;
	cr_assert_eq(iscsi_login(&e.base, &c, &r, err, sizeof(err)), -ETIMEDOUT, "%s", err);
	int64_t took = iscsi_now_ms() - t0;
	cr_assert_geq(took, 300);
	cr_assert_lt(took, 1000, "took %lld ms", (long long)took);
	cr_assert_lt(e.nrecv, ISCSI_LOGIN_RSP_MAX);
	cr_assert_leq(e.max_timeout_ms, 300, "a PDU was given %d ms", e.max_timeout_ms);
	cr_assert(strstr(err, "deadline"), "%s", err);
}

Test(login, cancel_token_ends_the_login)
{
	int fd = iscsi_cancel_new();
	cr_assert_geq(fd, 0);
	struct endless e = {.base = {&endless_ops}, .cancel_fd = fd, .cancel_after = 5};
	struct iscsi_login_config c = config();
	struct iscsi_login_result r;
	char err[256] = "";
	iscsi_cancel_bind(fd);
	cr_assert_eq(iscsi_login(&e.base, &c, &r, err, sizeof(err)), -ECANCELED, "%s", err);
	iscsi_cancel_bind(-1);
	cr_assert_eq(e.nrecv, 5);
	cr_assert_str_eq(err, "login: cancelled");
	close(fd);
}
