/* SPDX-License-Identifier: MIT */
/*
 * iSCSI Extensions for RDMA (iSER, RFC 7145) on librdmacm + libibverbs:
 * the transport ops of transport.h (iscsi_iser_transport) and its
 * per-mount context.
 *
 * The context holds what must outlive any one connection: the RDMA
 * device the portal's route leads to, one protection domain on it, and
 * exactly one memory registration of the payload region (the buffer
 * pool, local write + remote read + remote write).  Every SCSI command's
 * STag is that registration's rkey and its base offsets are addresses in
 * the region, so nothing is registered on the data path.  It is created
 * once (at mount) and handed to every connect, reconnects included; the
 * PD and MR are made at the first connect, once the device is known.
 * Buffers outside the region (probing commands) go through a small
 * per-connection bounce area.
 */
#ifndef ISERFUSE_ISER_H
#define ISERFUSE_ISER_H

#include <stddef.h>
#include <stdint.h>

#include "initiator/transport/transport.h"

struct iser_ctx;

/*
 * Most bytes one SCSI command moves over iSER: tgt's iSER driver gives
 * every task one 512 KiB buffer (larger commands fail), and libiscsi's
 * iSER has the same limit.  Larger I/O is split into several commands.
 */
#define ISER_MAX_CMD_BYTES (512u * 1024u)

/*
 * Create a context for the payload region [base, base + len) (len may be
 * 0: no region, every buffer is bounced; for discovery).  queue_depth is
 * the session's (sizes queues and receive buffers; 0: ISCSI_QUEUE_DEPTH_DEFAULT).  registered(arg) is
 * called once for each ibv_reg_mr of the region (may be NULL).  Returns 0
 * and the context in *out (owned by the caller, iser_ctx_destroy after
 * every connection is gone), or -ENOMEM.
 */
int iser_ctx_create(struct iser_ctx **out, void *base, size_t len, unsigned queue_depth,
		    void (*registered)(void *arg), void *arg);

/* Deregister the region, free the protection domain and the context. */
void iser_ctx_destroy(struct iser_ctx *ctx);

/*
 * Set the iSER login keys in neg (RFC 7145 §6.3): RDMAExtensions=Yes,
 * InitiatorRecvDataSegmentLength (what our receive buffers hold),
 * TargetRecvDataSegmentLength, MaxOutstandingUnexpectedPDUs; InitialR2T=Yes
 * (unsolicited data is immediate data only); digests off.
 */
void iser_neg_config(struct iscsi_neg_config *neg);

/* The iSER transport; connect's ctx must be a struct iser_ctx. */
extern const struct iscsi_transport_ops iscsi_iser_transport;

#endif
