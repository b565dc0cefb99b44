/* SPDX-License-Identifier: MIT */
/* Transport choice for a mount or a listing: see transport_pick.c. */
#ifndef ISERFUSE_TRANSPORT_PICK_H
#define ISERFUSE_TRANSPORT_PICK_H

#include <stdbool.h>
#include <stddef.h>

#include "cache/pool/pool.h"
#include "initiator/session/session.h"

struct iser_ctx;

enum gw_transport { GW_TRANSPORT_AUTO, GW_TRANSPORT_ISER, GW_TRANSPORT_TCP };

/*
 * -o transport=WORD (NULL: not given) and the URL's ?iser into *out.
 * ?iser means iSER (transport=tcp with it is an error).  0 or -EINVAL.
 */
int gw_transport_parse(const char *word, bool url_iser, enum gw_transport *out);

/*
 * Open the session of sc over the transport mode asks for.  For iSER,
 * *ctx gets the per-mount iSER context registering pool (may be NULL: no
 * region, for discovery listings); the caller destroys it with
 * iser_ctx_destroy after closing the session.  auto falls back to TCP
 * (logging why); iser never does.  RLIMIT_MEMLOCK too small for the pool
 * fails iser with a one-line reason (auto takes TCP).  Returns 0 or the
 * negative errno of iscsi_session_open, with a reason in err.
 */
int gw_session_open(enum gw_transport mode, struct iscsi_session_config *sc, struct buf_pool *pool,
		    struct iser_ctx **ctx, struct iscsi_session **s, char *err, size_t err_cap);

#endif
