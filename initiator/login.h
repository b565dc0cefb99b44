/* SPDX-License-Identifier: MIT */
/*
 * Login phase (RFC 7143 §6.3, §11.12-13): security stage (AuthMethod=None
 * for now), operational stage (text.c negotiates the keys), transition to
 * the full feature phase.  Runs on the caller's thread over the
 * transport's blocking send_pdu/recv_pdu; text continuation (C bit) both
 * ways.
 */
#ifndef ISERFUSE_LOGIN_H
#define ISERFUSE_LOGIN_H

#include <stdbool.h>
#include <stdint.h>

#include "text.h"
#include "transport.h"
#include "url.h"

struct iscsi_login_config {
	char initiator_name[ISCSI_NAME_MAX];
	char target_name[ISCSI_NAME_MAX]; /* empty: discovery session */
	uint8_t isid[6];
	uint16_t tsih;                   /* 0 for a new session, else reinstatement */
	uint16_t cid;
	uint32_t cmdsn;                  /* initial CmdSN */
	struct iscsi_neg_config neg;
	int timeout_ms;                  /* per PDU exchange */
};

struct iscsi_login_result {
	struct iscsi_params params;
	uint16_t tsih;
	uint32_t expstatsn;              /* StatSN of the final login response + 1 */
	uint32_t expcmdsn, maxcmdsn;
	uint8_t status_class, status_detail; /* of the last login response */
};

/*
 * Log in on a connected transport.  Returns 0 on success (full feature
 * phase reached), or a negative errno with a one-line reason in err:
 * -EACCES (authentication failed / not authorised), -ENOENT (target not
 * found), -EAGAIN (target busy or redirected), -EPROTO (protocol
 * violation or impossible negotiation), -ETIMEDOUT, or the transport's error.
 */
int iscsi_login(struct iscsi_transport *t, const struct iscsi_login_config *cfg,
		struct iscsi_login_result *res, char *err, size_t err_cap);

/* Fill isid with a random-type ISID (RFC 7143 §11.12.5: T=10b). */
void iscsi_isid_random(uint8_t isid[6]);

/* A one-line description of a login status class/detail (§11.13.5). */
const char *iscsi_login_status_str(uint8_t status_class, uint8_t status_detail);

#endif
