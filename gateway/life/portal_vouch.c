/* SPDX-License-Identifier: MIT */
/*
 * Whether a portal other than the URL's may carry the mount's I/O (see
 * gw_portal_vouch in paths.h): the identity check (check_path) tells two
 * devices apart only by what they report, and a designator that is not
 * globally unique (lun_ident.h, iscsi_lun_ident_unique) can be reported by
 * another target too (two tgtd processes with the same target name give
 * the same).  Then the URL portal's SendTargets answer (RFC 7143 Appendix
 * C) has to list the portal.  On the path thread; the discovery login is
 * cancelled with the thread's cancel token (cancel.h).
 */
#include <errno.h>
#include <stdio.h>

#include "initiator/login/discovery.h"
#include "initiator/lun/lun_ident.h"
#include "initiator/net/portal_addr.h"
#include "initiator/transport/transport.h"
#include "paths.h"

#define VOUCH_DISCOVERY_TIMEOUT_MS 5000

/* The first mounted LUN whose identity is not globally unique, its reason in why; NULL if none. */
static const struct gw_lun *weak_lun(struct gw *g, char *why, size_t cap)
{
	for (size_t i = 0, n = gw_nluns(g); i < n; i++) {
		const struct gw_lun *l = &g->luns[i];
		struct iscsi_lun_ident id;
		iscsi_lun_ident_from_info(&l->info, &id);
		if (!gw_lun_gone(l) && !iscsi_lun_ident_unique(&id, why, cap))
			return l;
	}
	return NULL;
}

/* SendTargets on first's portal: whether it lists address a for first's target.  Returns 1, 0 or a negative errno. */
static int listed(const struct iscsi_session_config *first, const struct iscsi_portal_addr *a, char *err, size_t cap)
{
	struct iscsi_discovery_config dc = {.transport = &iscsi_tcp_transport, .port = first->port};
	snprintf(dc.host, sizeof(dc.host), "%s", first->host);
	snprintf(dc.initiator_name, sizeof(dc.initiator_name), "%s", first->initiator_name);
	iscsi_neg_config_default(&dc.neg);
	dc.timeout_ms = first->timeout_ms > 0 && first->timeout_ms < VOUCH_DISCOVERY_TIMEOUT_MS
				? first->timeout_ms
				: VOUCH_DISCOVERY_TIMEOUT_MS;
	dc.chap = first->chap;
	struct iscsi_disc_list list = {0};
	int rc = iscsi_discover(&dc, &list, err, cap);
	iscsi_chap_creds_wipe(&dc.chap);
	if (rc)
		return rc;
	int found = iscsi_disc_lists(&list, first->target_name, a);
	iscsi_disc_list_free(&list);
	return found;
}

int gw_portal_vouch(struct gw *g, const struct iscsi_session_config *first, const char *host, unsigned port,
		    bool accept_unlisted, char *why, size_t cap)
{
	char weak[160];
	const struct gw_lun *l;
	struct iscsi_portal_addr a, url;
	if (accept_unlisted || !(l = weak_lun(g, weak, sizeof(weak))))
		return 0;
	/* both names the user gave: resolved, and compared by address (portal_addr.h) */
	bool known = iscsi_portal_addr_resolve(host, port, &a) == 0;
	if (known && iscsi_portal_addr_resolve(first->host, first->port, &url) == 0 && iscsi_portal_addr_same(&a, &url))
		return 0;
	char err[256] = "";
	int rc = known ? listed(first, &a, err, sizeof(err)) : 0;
	if (rc == 1)
		return 0;
	snprintf(why, cap,
		 "SendTargets on " ISCSI_HOSTPORT_FMT " %s%s%s and LUN %u's identity is not globally unique (%s): "
		 "another target may report the same; -o accept_unlisted_portals uses it anyway",
		 ISCSI_HOSTPORT_ARGS(first->host, first->port), rc == 0 ? "does not list it" : "failed: ",
		 rc == 0 ? "" : err, rc == 0 ? "" : ",", l->info.lun, weak);
	return -ENODEV;
}
