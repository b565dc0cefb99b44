/* SPDX-License-Identifier: MIT */
/*
 * iSCSI session: connect and log in (RFC 7143 §6, §11.12, §11.13), the
 * one path for iscsi_session_open and for recovery, following login
 * redirections (status class 1); adopting the login's sequence numbers
 * and negotiated parameters; wiping the session's CHAP credentials.
 *
 * Threads: the opener or the recovery thread, never an event thread; the
 * session lock is taken only to record a permanent redirection.
 */
#include "session_priv.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "initiator/util/clock.h"
#include "initiator/util/log.h"
#include "initiator/net/url.h"

/* The CHAP secrets are wiped, never just freed (RFC 7143 §12.1.3). */
void sess_wipe_creds(struct iscsi_session *s)
{
	iscsi_chap_creds_wipe(&s->cfg.chap);
}

/* Login redirections followed in one attempt (RFC 7143 §11.13.5, status class 1). */
#define REDIRECTS_MAX 4

/*
 * Connect and log in with the session's ISID (TSIH 0: a new session, or the
 * reinstatement of the one this ISID had, RFC 7143 §6.3.5).  The one path
 * for iscsi_session_open and for recovery; cfg->transport_ctx goes to every
 * connect.  A redirection (0x0101 temporary, 0x0102 permanent) is followed
 * to its TargetAddress; a permanent one replaces the portal in s->cfg for
 * every later login.  On success *out is the connected transport, not
 * started.  Called only where no event thread runs (open, recovery).
 */
int sess_connect_login(struct iscsi_session *s, int timeout_ms, int64_t deadline_ms, struct iscsi_transport **out,
			 struct iscsi_login_result *lr, char *err, size_t err_cap)
{
	const struct iscsi_session_config *cfg = &s->cfg;
	char host[ISCSI_URL_HOST_MAX];
	unsigned port = cfg->port;
	snprintf(host, sizeof(host), "%s", cfg->host);
	struct iscsi_login_config lc = {0};
	snprintf(lc.initiator_name, sizeof(lc.initiator_name), "%s", cfg->initiator_name);
	snprintf(lc.target_name, sizeof(lc.target_name), "%s", cfg->target_name);
	memcpy(lc.isid, s->isid, sizeof(lc.isid));
	lc.tsih = 0;
	lc.cmdsn = LOGIN_CMDSN;
	lc.neg = cfg->neg;
	lc.timeout_ms = timeout_ms;
	lc.deadline_ms = deadline_ms; /* every hop and CHAP retry within it */
	memcpy(lc.chap_algs, s->chap_algs, sizeof(lc.chap_algs));
	lc.chap = cfg->chap;

	struct iscsi_transport *t = NULL;
	int rc = 0;
	if (!lc.deadline_ms)
		lc.deadline_ms = clk_now_ms() + timeout_ms;
	for (unsigned hop = 0;; hop++) {
		rc = iscsi_connect_login(cfg->transport, cfg->transport_ctx, host, port, &lc, lr, &t, err, err_cap);
		memcpy(s->chap_algs, lc.chap_algs, sizeof(s->chap_algs)); /* a narrowed CHAP_A offer is kept */
		if (rc == 0)
			break;
		t = NULL;
		if (lr->status_class != 0x01 || hop == REDIRECTS_MAX)
			break;
		char nhost[ISCSI_URL_HOST_MAX];
		unsigned nport;
		if (!lr->target_address[0] ||
		    iscsi_target_address_parse(lr->target_address, nhost, sizeof(nhost), &nport)) {
			snprintf(err, err_cap, "login redirected (status 0x01%02x) without a usable TargetAddress",
				 lr->status_detail);
			rc = -EPROTO;
			break;
		}
		bool permanent = lr->status_detail == 0x02;
		log_warn("login to " ISCSI_HOSTPORT_FMT " redirected %s to " ISCSI_HOSTPORT_FMT, ISCSI_HOSTPORT_ARGS(host, port),
			 permanent ? "permanently" : "temporarily", ISCSI_HOSTPORT_ARGS(nhost, nport));
		snprintf(host, sizeof(host), "%s", nhost);
		port = nport;
		if (permanent) {
			pthread_mutex_lock(&s->lock);
			snprintf(s->cfg.host, sizeof(s->cfg.host), "%s", nhost);
			s->cfg.port = nport;
			pthread_mutex_unlock(&s->lock);
		}
	}
	iscsi_login_config_wipe(&lc);
	if (rc)
		return rc;
	*out = t;
	return 0;
}

/* Target busy at login (status 0x0301 service unavailable, 0x0302 out of resources). */
bool sess_login_busy(const struct iscsi_login_result *lr)
{
	return lr->status_class == 0x03 && (lr->status_detail == 0x01 || lr->status_detail == 0x02);
}

/* Take the login's sequence numbers and parameters (lock held, or before the session is shared). */
void sess_adopt_login(struct iscsi_session *s, struct iscsi_transport *t, const struct iscsi_login_result *lr)
{
	s->t = t;
	s->tsih = lr->tsih;
	s->params = lr->params;
	/*
	 * §4.2.2.1: the first command carries the login's initial CmdSN, which
	 * the Login Response's ExpCmdSN normally repeats.  tgt's iSER login
	 * answers one higher and then expects the initial CmdSN anyway, so that
	 * one case keeps the initial value; otherwise the target's ExpCmdSN.
	 */
	s->cmdsn = lr->expcmdsn == LOGIN_CMDSN + 1 ? LOGIN_CMDSN : lr->expcmdsn;
	s->expcmdsn = lr->expcmdsn;
	s->maxcmdsn = lr->maxcmdsn;
	s->expstatsn = lr->expstatsn;
	s->last_rx_ms = clk_now_ms();
	s->ping_want = s->ping_sent = s->nop_reply = false;
	s->nop_buf[0].busy = s->nop_buf[1].busy = false; /* the old connection is gone, and its sends */
	s->tmf_want = s->tmf_sent = false;
	s->event_thread_known = false;
}
