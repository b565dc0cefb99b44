/* SPDX-License-Identifier: MIT */
/*
 * Login phase (RFC 7143 §6.3, §11.12-13): security stage (AuthMethod=None,
 * or CHAP one-way or mutual, §12.1.3), operational stage (text.c
 * negotiates the keys), transition to the full feature phase.  Runs on
 * the caller's thread over the transport's blocking send_pdu/recv_pdu;
 * text continuation (C bit) both ways.
 */
#ifndef ISERFUSE_LOGIN_H
#define ISERFUSE_LOGIN_H

#include <stdbool.h>
#include <stdint.h>

#include "chap.h"
#include "initiator/wire/text.h"
#include "initiator/transport/transport.h"
#include "initiator/net/url.h"

struct iscsi_login_config {
	char initiator_name[ISCSI_NAME_MAX];
	char target_name[ISCSI_NAME_MAX]; /* empty: discovery session */
	uint8_t isid[6];
	uint16_t tsih;                   /* 0 for a new session, else reinstatement */
	uint16_t cid;
	uint32_t cmdsn;                  /* initial CmdSN */
	struct iscsi_neg_config neg;
	int timeout_ms;                  /* per PDU exchange, and for the whole login (below) */
	/*
	 * CLOCK_MONOTONIC ms (iscsi_now_ms) by which the whole connect and
	 * login must be over, however many PDUs the target makes it take; 0:
	 * timeout_ms after iscsi_connect_login (or iscsi_login) began.
	 */
	int64_t deadline_ms;
	/*
	 * CHAP credentials (struct iscsi_chap_creds, chap.h); all "" for
	 * AuthMethod=None.  Owned by the caller, who wipes them
	 * (iscsi_login_config_wipe).
	 */
	struct iscsi_chap_creds chap;
	/* CHAP_A values offered, most preferred first, 0-terminated; all 0: 8,7,6,5 */
	uint8_t chap_algs[ISCSI_CHAP_ALGS_MAX];
};

/*
 * Most Login Responses one login may take, continuations (C bit) included:
 * a target answering with empty continuations for ever fails the login
 * (RFC 7143 §11.13.3 puts no bound on them; a real login takes a handful).
 */
#define ISCSI_LOGIN_RSP_MAX 64

struct iscsi_login_result {
	struct iscsi_params params;
	uint16_t tsih;
	uint32_t expstatsn;              /* StatSN of the final login response + 1 */
	uint32_t expcmdsn, maxcmdsn;
	uint8_t status_class, status_detail; /* of the last login response */
	uint8_t chap_alg;                /* CHAP_A the target chose (also on failure); 0: no CHAP */
	/* TargetAddress of a redirection (status class 1, §11.13.5, §13.8): "" if none */
	char target_address[ISCSI_URL_HOST_MAX + 16];
};

/*
 * Log in on a connected transport.  Returns 0 on success (full feature
 * phase reached), or a negative errno with a one-line reason in err:
 * -EACCES (authentication failed / not authorised, the target demands
 * CHAP and no credentials are configured, a CHAP challenge refused, the
 * target failed mutual CHAP), -EINVAL (inconsistent credentials in cfg),
 * -ENOENT (target not found), -EAGAIN (target busy or redirected),
 * -EPROTO (protocol violation or impossible negotiation, or more than
 * ISCSI_LOGIN_RSP_MAX Login Responses), -ETIMEDOUT (no answer within
 * timeout_ms, or the login not over by cfg->deadline_ms), -ECANCELED (the
 * calling thread's cancel token fired, cancel.h), or the transport's
 * error.  Secrets never appear in err or in the log.
 */
int iscsi_login(struct iscsi_transport *t, const struct iscsi_login_config *cfg,
		struct iscsi_login_result *res, char *err, size_t err_cap);

/*
 * Interoperability with targets that take CHAP_A=7 for SHA-1 (tgt up to at
 * least 1.0.85; IANA assigns 7 to SHA-256, RFC 7143 §12.1.3): when `res`
 * says the target chose 7 and then refused the login with an initiator
 * error (status class 2, detail 0 or 1), removes 7 from cfg->chap_algs and
 * returns true: the caller may connect again and retry once.  Otherwise
 * changes nothing and returns false.
 */
bool iscsi_login_chap_retry(struct iscsi_login_config *cfg, const struct iscsi_login_result *res);

/*
 * Connect through ops (ctx as for ops->connect) to host:port and log in
 * with cfg (RFC 7143 §6), all of it within cfg->timeout_ms (or by
 * cfg->deadline_ms when that is set); when the target
 * refused the answer to CHAP_A=7 (iscsi_login_chap_retry narrows
 * cfg->chap_algs), connect and log in once more.  On success *out is the
 * connected transport, not started, owned by the caller.  Returns 0, or
 * the connect or login error (negative errno) with a reason in err; *res
 * is the last login's result (zeroed when no login was answered).
 */
int iscsi_connect_login(const struct iscsi_transport_ops *ops, void *ctx, const char *host, unsigned port,
			struct iscsi_login_config *cfg, struct iscsi_login_result *res, struct iscsi_transport **out,
			char *err, size_t err_cap);

/*
 * Split a TargetAddress value (RFC 7143 §13.8: domainname[:port][,tpgt],
 * an IPv6 address in brackets) into host (without brackets, host_cap bytes)
 * and *port (3260 when absent).  0, or -EINVAL for a malformed value.
 */
int iscsi_target_address_parse(const char *value, char *host, size_t host_cap, unsigned *port);

/* Wipe the CHAP credentials in cfg (explicit_bzero). */
void iscsi_login_config_wipe(struct iscsi_login_config *cfg);

/* Fill isid with a random-type ISID (RFC 7143 §11.12.5: T=10b). */
void iscsi_isid_random(uint8_t isid[6]);

/* A one-line description of a login status class/detail (§11.13.5). */
const char *iscsi_login_status_str(uint8_t status_class, uint8_t status_detail);

#endif
