/* SPDX-License-Identifier: MIT */
/*
 * iSER per-mount context (iser.h): the RDMA device the portal's route
 * leads to, one protection domain on it and the payload region's one
 * memory registration, made at the first connect and kept across
 * reconnects.  No registration happens on the data path (RFC 7145 §9.2:
 * every command's STag is this registration's rkey).
 */
#include "iser_priv.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "initiator/util/defaults.h"
#include "initiator/util/log.h"

int iser_ctx_create(struct iser_ctx **out, void *base, size_t len, unsigned queue_depth,
		    void (*registered)(void *arg), void *arg)
{
	struct iser_ctx *x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	pthread_mutex_init(&x->lock, NULL);
	x->base = base;
	x->len = base ? len : 0;
	x->queue_depth = queue_depth ? queue_depth : ISCSI_QUEUE_DEPTH_DEFAULT;
	x->registered = registered;
	x->arg = arg;
	*out = x;
	return 0;
}

void iser_ctx_destroy(struct iser_ctx *x)
{
	if (!x)
		return;
	if (x->mr)
		ibv_dereg_mr(x->mr);
	if (x->pd)
		ibv_dealloc_pd(x->pd);
	pthread_mutex_destroy(&x->lock);
	free(x);
}

int iser_ctx_attach(struct iser_ctx *x, struct ibv_context *verbs, char *err, size_t err_cap)
{
	int rc = 0;
	pthread_mutex_lock(&x->lock);
	if (x->verbs && x->verbs != verbs) {
		snprintf(err, err_cap, "the route to the portal now leads to another RDMA device (%s, was %s)",
			 ibv_get_device_name(verbs->device), ibv_get_device_name(x->verbs->device));
		rc = -ENODEV;
	} else if (!x->pd) {
		x->pd = ibv_alloc_pd(verbs);
		if (!x->pd) {
			rc = -errno ? -errno : -ENOMEM;
			snprintf(err, err_cap, "cannot allocate an RDMA protection domain on %s: %s",
				 ibv_get_device_name(verbs->device), strerror(-rc));
		} else {
			x->verbs = verbs;
		}
	}
	if (!rc && x->len && !x->mr) {
		x->mr = ibv_reg_mr(x->pd, x->base, x->len,
				   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
		if (!x->mr) {
			rc = -errno ? -errno : -ENOMEM;
			snprintf(err, err_cap, "cannot register the %zu-byte buffer pool for RDMA: %s (raise RLIMIT_MEMLOCK)",
				 x->len, strerror(-rc));
		} else {
			log_debug("iSER: buffer pool registered once: %zu bytes, rkey 0x%08x", x->len, x->mr->rkey);
			if (x->registered)
				x->registered(x->arg);
		}
	}
	pthread_mutex_unlock(&x->lock);
	return rc;
}
