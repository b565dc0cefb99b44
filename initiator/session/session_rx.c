/* SPDX-License-Identifier: MIT */
/*
 * iSCSI session, receive side (RFC 7143 §11.3-§11.19, target PDUs in the
 * full feature phase): sess_hook_rx_pdu applies ExpCmdSN/MaxCmdSN and StatSN
 * once per PDU (rx_update_sn), then hands the PDU to one rx_<opcode>
 * handler (rx_dispatch), as SPDK's iscsi_pdu_hdr_handle does; Data-In
 * placement (rx_data_dest) and the buffer ownership check (task_owns) for
 * the transport.
 *
 * Threads: the hooks run on the transport's event thread and take the
 * session lock; completions and the asynchronous-event callback run after
 * it is dropped.
 */
#include "session_priv.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "initiator/util/be.h"
#include "initiator/util/clock.h"
#include "initiator/util/log.h"

/* ExpCmdSN/MaxCmdSN from any target PDU that carries them (§4.2.2.1). */
static void update_cmdsn(struct iscsi_session *s, uint32_t expcmdsn, uint32_t maxcmdsn)
{
	/* MaxCmdSN < ExpCmdSN - 1 means the fields are to be ignored. */
	if (iscsi_sn_lt(maxcmdsn, expcmdsn - 1))
		return;
	if (iscsi_sn_lt(s->expcmdsn, expcmdsn))
		s->expcmdsn = expcmdsn;
	if (iscsi_sn_lt(s->maxcmdsn, maxcmdsn))
		s->maxcmdsn = maxcmdsn;
}

static void update_statsn(struct iscsi_session *s, uint32_t statsn)
{
	if (iscsi_sn_le(s->expstatsn, statsn))
		s->expstatsn = statsn + 1;
}

static uint16_t be16_get(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }

/*
 * The READ task whose buffer a Data-In's dlen bytes at Buffer Offset
 * offset fill next (§11.7.4), or NULL (logged: the connection is to be
 * dropped).  Lock held.
 */
static struct task *data_in_task(struct iscsi_session *s, uint32_t itt, uint32_t offset, uint32_t dlen)
{
	struct task *t = sess_task_lookup(s, itt);
	if (!t || t->cmd.dir != ISCSI_DIR_READ) {
		log_err("Data-In for unknown or non-read ITT 0x%08x: dropping the connection", itt);
		return NULL;
	}
	if (offset != t->rx_offset || dlen > t->cmd.len || offset > t->cmd.len - dlen) {
		log_err("Data-In ITT 0x%08x offset %u length %u outside the expected %u of %u bytes: dropping the connection",
			itt, offset, dlen, t->rx_offset, t->cmd.len);
		return NULL;
	}
	return t;
}

/* rx_data_dest hook: the place of a Data-In's DataSegmentLength bytes in its READ's buffer (§11.7.4 Buffer Offset). */
int sess_hook_rx_data_dest(void *arg, const uint8_t *bhs, void **dest)
{
	struct iscsi_session *s = arg;
	uint32_t offset = get_be32(bhs + 40); /* Buffer Offset */
	pthread_mutex_lock(&s->lock);
	struct task *t = data_in_task(s, iscsi_wire_itt(bhs), offset, iscsi_wire_dlen(bhs));
	if (t)
		*dest = (uint8_t *)t->cmd.buf + offset;
	pthread_mutex_unlock(&s->lock);
	return t ? 0 : -EPROTO;
}

static void set_residual(struct iscsi_cmd_result *r, uint32_t len, bool under, bool over, uint32_t residual)
{
	r->residual = under ? residual : 0;
	if (under)
		r->xfer_len = residual <= len ? len - residual : 0;
	else
		r->xfer_len = len;
	(void)over;
}

/*
 * A READ whose status claims more data (xfer_len, bytes) than arrived
 * (t->rx_offset): no or too small an underflow (§11.4.5).  The rest of the
 * buffer is stale, so xfer_len is cut to what arrived, and a GOOD status
 * without an error so far becomes -EIO (logged with pdu, the name of the
 * PDU that ended the READ, and its ITT).  Lock held.
 */
static void clamp_short_read(struct iscsi_cmd_result *r, const struct task *t, const char *pdu, uint32_t itt)
{
	if (r->xfer_len <= t->rx_offset)
		return;
	if (r->status == SCSI_STATUS_GOOD && !r->err) {
		log_err("%s ITT 0x%08x: GOOD after %u of %u bytes", pdu, itt, t->rx_offset, r->xfer_len);
		r->err = -EIO;
	}
	r->xfer_len = t->rx_offset;
}

/* A SCSI asynchronous event for the caller's hook, which runs after the lock is released. */
struct async_sense {
	bool have;
	uint64_t lun;
	struct scsi_sense sense;
};

/* What a PDU's handler leaves for sess_hook_rx_pdu to do once the lock is dropped. */
struct rx_out {
	struct completion c; /* valid when done */
	bool done;
	struct async_sense ev;
};

/* Data-In (§11.7): data placed by the transport (sess_hook_rx_data_dest) or handed over here; with status it ends the READ. */
static int rx_data_in(struct iscsi_session *s, const struct iscsi_bhs *h, const uint8_t *data, uint32_t dlen,
		      struct rx_out *o)
{
	struct completion *c = &o->c;
	/* not placed by the transport: the checks rx_data_dest makes, then the copy below */
	struct task *t = data ? data_in_task(s, h->itt, h->u.data_in.offset, dlen) : sess_task_lookup(s, h->itt);
	if (!t || t->cmd.dir != ISCSI_DIR_READ)
		return -EPROTO;
	if (h->u.data_in.datasn != t->rx_datasn) {
		log_err("Data-In ITT 0x%08x DataSN %u, expected %u", h->itt, h->u.data_in.datasn, t->rx_datasn);
		return -EPROTO;
	}
	if (data)
		memcpy((uint8_t *)t->cmd.buf + h->u.data_in.offset, data, dlen);
	t->rx_datasn++;
	t->rx_offset += h->dlen;
	s->stats.bytes_read += h->dlen;
	if (!h->u.data_in.status_present)
		return 0;
	if (!h->final)
		return -EPROTO;
	memset(&c->res, 0, sizeof(c->res));
	c->res.status = h->u.data_in.status;
	set_residual(&c->res, t->cmd.len, h->u.data_in.underflow, h->u.data_in.overflow, h->u.data_in.residual);
	clamp_short_read(&c->res, t, "Data-In", h->itt);
	s->answered = true;
	sess_stop_progress(s);
	sess_task_finish(s, t, c);
	o->done = true;
	return 0;
}

/* SCSI Response (§11.4): status, sense and residual of a command; it ends the task. */
static int rx_scsi_rsp(struct iscsi_session *s, const struct iscsi_bhs *h, const uint8_t *data, uint32_t dlen,
		       struct rx_out *o)
{
	struct completion *c = &o->c;
	struct task *t = sess_task_lookup(s, h->itt);
	if (!t) {
		log_err("SCSI Response for unknown ITT 0x%08x", h->itt);
		return -EPROTO;
	}
	memset(&c->res, 0, sizeof(c->res));
	if (h->u.rsp.response != 0) {
		c->res.err = -EIO; /* target failure (§11.4.3) */
	} else {
		c->res.status = h->u.rsp.status;
		if (dlen >= 2) {
			uint32_t slen = be16_get(data);
			if (slen > dlen - 2) {
				log_err("SCSI Response ITT 0x%08x: SenseLength %u exceeds the %u-byte data segment",
					h->itt, slen, dlen);
				return -EPROTO;
			}
			if (slen) {
				/* A short fixed sense still gives its key; an unknown format maps as no sense. */
				scsi_parse_sense(data + 2, slen, &c->res.sense);
				c->res.has_sense = true;
			}
		}
	}
	set_residual(&c->res, t->cmd.len, h->u.rsp.underflow, h->u.rsp.overflow, h->u.rsp.residual);
	if (s->t->ops->data_by_rdma && !c->res.err) {
		/* iSER: the target placed the data by RDMA; the residual says how much */
		if (t->cmd.dir == ISCSI_DIR_READ) {
			t->rx_offset = c->res.xfer_len;
			s->stats.bytes_read += c->res.xfer_len;
		} else if (t->cmd.dir == ISCSI_DIR_WRITE && t->cmd.len > t->unsol_end) {
			s->stats.bytes_written += t->cmd.len - t->unsol_end;
		}
	}
	if (t->cmd.dir == ISCSI_DIR_WRITE && !s->t->ops->data_by_rdma && c->res.status == SCSI_STATUS_GOOD &&
	    !c->res.err && c->res.xfer_len > t->data_sent) {
		/* GOOD for data the target never got (no or too small an underflow): the write did not happen */
		log_err("SCSI Response ITT 0x%08x: GOOD for a write after %u of %u bytes were sent", h->itt,
			t->data_sent, c->res.xfer_len);
		c->res.err = -EIO;
	}
	if (t->cmd.dir == ISCSI_DIR_READ)
		clamp_short_read(&c->res, t, "SCSI Response", h->itt);
	s->answered = true;
	sess_stop_progress(s);
	sess_task_finish(s, t, c);
	o->done = true;
	return 0;
}

/* R2T (§11.8): queue a solicited burst of Data-Out for a WRITE. */
static int rx_r2t(struct iscsi_session *s, const struct iscsi_bhs *h, const uint8_t *data, uint32_t dlen,
		  struct rx_out *o)
{
	(void)data, (void)dlen, (void)o;
	struct task *t = sess_task_lookup(s, h->itt);
	uint32_t off = h->u.r2t.offset, len = h->u.r2t.length;
	if (!t || t->cmd.dir != ISCSI_DIR_WRITE) {
		log_err("R2T for unknown or non-write ITT 0x%08x", h->itt);
		return -EPROTO;
	}
	if (len == 0 || off > t->cmd.len || len > t->cmd.len - off) {
		log_err("R2T ITT 0x%08x asks for %u bytes at %u of a %u-byte write", h->itt, len, off, t->cmd.len);
		return -EPROTO;
	}
	/* Outstanding: queued, plus the solicited burst being sent (§13.17). */
	uint32_t pending = t->r2t_count + (t->bursting && t->burst_ttt != ISCSI_RESERVED_TAG);
	if (t->r2t_count == R2T_QUEUE || pending >= (s->params.max_outstanding_r2t ? s->params.max_outstanding_r2t : 1)) {
		log_err("R2T ITT 0x%08x: more outstanding R2Ts than negotiated", h->itt);
		return -EPROTO;
	}
	struct r2t *r = &t->r2tq[(t->r2t_head + t->r2t_count) % R2T_QUEUE];
	r->ttt = h->u.r2t.ttt;
	r->offset = off;
	r->length = len;
	t->r2t_count++;
	sess_next_r2t(t);
	sess_txq_push(s, t);
	return 0;
}

/* Task Management Function Response (§11.6) to our ABORT TASK or LOGICAL UNIT RESET. */
static int rx_tmf_rsp(struct iscsi_session *s, const struct iscsi_bhs *h, const uint8_t *data, uint32_t dlen,
		      struct rx_out *o)
{
	(void)data, (void)dlen, (void)o;
	if (!s->tmf_sent || h->itt != s->tmf_itt) {
		log_warn("Task Management Response we did not ask for (ITT 0x%08x): ignored", h->itt);
		return 0;
	}
	s->tmf_sent = false;
	uint8_t r = h->u.tmf_rsp.response;
	bool abort = s->tmf_function == ISCSI_TMF_ABORT_TASK;
	/* 0: function complete; 1: task does not exist (the target lost it: send it again) */
	if (r == 0 || (abort && r == 1)) {
		unsigned n = 0, failed = 0;
		for (unsigned i = 0; i < s->ntasks; i++) {
			struct task *t = &s->tasks[i];
			if (!t->in_use || !t->cmd_sent || t->done_deferred ||
			    (abort ? t->itt != s->tmf_rtt : t->cmd.lun != s->tmf_lun))
				continue;
			if (sess_reissue_now(s, t))
				failed++;
			else
				n++;
		}
		log_warn("%s done (response %u): %u commands re-issued, %u failed", abort ? "ABORT TASK" : "LOGICAL UNIT RESET",
			 r, n, failed);
		if (failed)
			sess_complete_tasks(s, sess_pick_doomed, 0); /* drops the lock around the callbacks */
		return 0;
	}
	if (abort) {
		log_err("ABORT TASK for ITT 0x%08x refused (response %u): LOGICAL UNIT RESET", s->tmf_rtt, r);
		s->tmf_function = ISCSI_TMF_LUN_RESET;
		s->tmf_itt = itt_next_reserved(ITT_GEN_TMF, s->tmf_itt);
		s->tmf_want = true;
		sess_tx_want(s);
		return 0;
	}
	log_err("LOGICAL UNIT RESET refused (response %u): dropping the connection", r);
	return -ETIMEDOUT;
}

/* Reject (§11.17): a rejected SCSI Command may be re-issued or fails; any other rejected PDU drops the connection. */
static int rx_reject(struct iscsi_session *s, const struct iscsi_bhs *h, const uint8_t *data, uint32_t dlen,
		     struct rx_out *o)
{
	struct completion *c = &o->c;
	if (dlen < ISCSI_BHS_LEN) {
		log_err("Reject (reason 0x%02x) without the rejected header", h->u.reject.reason);
		return -EPROTO;
	}
	uint32_t itt = iscsi_wire_itt(data);
	log_err("target rejected a %s PDU (ITT 0x%08x), reason 0x%02x",
		iscsi_opcode_name(iscsi_wire_opcode(data)), itt, h->u.reject.reason);
	struct task *t = sess_task_lookup(s, itt);
	if (t && iscsi_wire_opcode(data) == ISCSI_OP_SCSI_CMD) {
		uint8_t r = h->u.reject.reason;
		/* §11.17.1: data digest error, too many immediate commands, long
		 * operation (out of resources), waiting for logout: the command
		 * may be sent again; anything else says it never will work. */
		if (r == 0x02 || r == 0x06 || r == 0x0a || r == 0x0c) {
			if (sess_reissue_now(s, t))
				sess_complete_tasks(s, sess_pick_doomed, 0);
			return 0;
		}
		memset(&c->res, 0, sizeof(c->res));
		c->res.err = -EIO;
		sess_task_finish(s, t, c);
		o->done = true;
		return 0;
	}
	/* A rejected Data-Out or other PDU leaves the session unsure: drop it (ERL 0). */
	return -EPROTO;
}

/*
 * Milliseconds for a number of seconds a target asks us to wait (Time2Wait
 * or Time2Retain of an Async Message or a Logout Response, §11.9.1,
 * §11.15; the logout delay of AsyncEvent 1), capped at TARGET_SECS_MAX so
 * a hostile value cannot park recovery.  Every such value goes through
 * here.  what names it for the line logged when the cap applies.
 */
static int64_t target_secs_ms(uint32_t secs, const char *what)
{
	if (secs > TARGET_SECS_MAX) {
		log_warn("target asks to wait %u s (%s): taken as %d s", secs, what, TARGET_SECS_MAX);
		secs = TARGET_SECS_MAX;
	}
	return (int64_t)secs * 1000;
}

/*
 * Async Message (§11.9).  0: SCSI asynchronous event, its sense goes to
 * cfg.on_async_sense (or the log); 1: the target asks for a logout: park
 * new commands, log out once none is in flight (within Parameter3 seconds)
 * and log in again; 2, 3: the target will drop the connection or the
 * session: drop it now and reconnect after Time2Wait (Parameter2); 4:
 * parameter renegotiation: as 1, the new login negotiates them all again
 * (§11.9.1 allows a Logout Request for it), logout within Parameter3 s
 * or 2 s, whichever is less; asked again within RENEGOTIATE_MIN_MS, ignored.
 * Lock held.  0, or a negative errno to drop the connection.
 */
static int rx_async(struct iscsi_session *s, const struct iscsi_bhs *h, const uint8_t *data, uint32_t dlen,
		    struct rx_out *o)
{
	struct async_sense *ev = &o->ev;
	switch (h->u.async.event) {
	case 0: {
		uint32_t slen = dlen >= 2 ? be16_get(data) : 0;
		if (dlen < 2 || slen == 0 || slen > dlen - 2) {
			log_warn("SCSI asynchronous event with SenseLength %u in a %u-byte segment: ignored", slen, dlen);
			return 0;
		}
		scsi_parse_sense(data + 2, slen, &ev->sense);
		ev->lun = h->lun;
		if (s->cfg.on_async_sense)
			ev->have = true;
		else
			log_warn("SCSI asynchronous event: sense %x/%02x/%02x", ev->sense.key, ev->sense.asc,
				 ev->sense.ascq);
		return 0;
	}
	case 1:
	case 4:
		if (h->u.async.event == 4 && s->renegotiated_ms && clk_now_ms() - s->renegotiated_ms < RENEGOTIATE_MIN_MS) {
			/* a fresh login negotiated everything: a target asking again at once would loop us */
			log_warn("target asks to renegotiate parameters again within %d s of a new login: ignored",
				 RENEGOTIATE_MIN_MS / 1000);
			return 0;
		}
		if (!s->relogin_pending && !s->logout_want) {
			bool renegotiate = h->u.async.event == 4;
			uint16_t p3 = h->u.async.param3;
			uint16_t secs = !p3 ? 2 : renegotiate && p3 > 2 ? 2 : p3;
			if (renegotiate)
				log_warn("target asks to renegotiate parameters: logging out and in again");
			else
				log_warn("target requests a logout within %u s: logging out and in again", secs);
			s->relogin_pending = true;
			s->relogin_reason = renegotiate ? "a parameter renegotiation requested by the target"
							: "a logout requested by the target";
			s->relogin_deadline_ms = clk_now_ms() + target_secs_ms(secs, "logout delay");
			if (renegotiate)
				s->renegotiated_ms = clk_now_ms();
		}
		return 0;
	case 2:
	case 3:
		log_warn("target will drop the %s (Time2Wait %u s): reconnecting",
			 h->u.async.event == 2 ? "connection" : "session", h->u.async.param2);
		s->drop_reason = h->u.async.event == 2 ? "the target announced dropping the connection"
						       : "the target announced dropping the session";
		s->reconnect_delay_ms = target_secs_ms(h->u.async.param2, "Time2Wait");
		(void)target_secs_ms(h->u.async.param3, "Time2Retain"); /* ERL 0: nothing is retained */
		return -ECONNRESET;
	default:
		log_warn("target sent asynchronous event %u (vcode %u): ignored", h->u.async.event, h->u.async.vcode);
		return 0;
	}
}

/*
 * The ExpCmdSN/MaxCmdSN (§4.2.2.1) and StatSN (§4.2.2.2) a target PDU
 * carries, applied once per PDU before its handler.  StatSN counts only
 * where it numbers a status: a Data-In with status, a SCSI or TMF
 * Response, a Logout Response, an Async Message, and a NOP-In answering
 * our ping (a NOP-In with the reserved ITT does not advance StatSN,
 * §11.19.4); Data-In without status updates nothing.
 */
static void rx_update_sn(struct iscsi_session *s, const struct iscsi_bhs *h)
{
	uint32_t exp, max, statsn = 0;
	bool has_statsn = true;
	switch (h->opcode) {
	case ISCSI_OP_DATA_IN:
		if (!h->u.data_in.status_present)
			return;
		exp = h->u.data_in.expcmdsn, max = h->u.data_in.maxcmdsn, statsn = h->u.data_in.statsn;
		break;
	case ISCSI_OP_SCSI_RSP:
		exp = h->u.rsp.expcmdsn, max = h->u.rsp.maxcmdsn, statsn = h->u.rsp.statsn;
		break;
	case ISCSI_OP_R2T:
		exp = h->u.r2t.expcmdsn, max = h->u.r2t.maxcmdsn, has_statsn = false;
		break;
	case ISCSI_OP_NOP_IN:
		exp = h->u.nop.expcmdsn, max = h->u.nop.maxcmdsn, statsn = h->u.nop.statsn;
		has_statsn = h->itt != ISCSI_RESERVED_TAG;
		break;
	case ISCSI_OP_LOGOUT_RSP:
		exp = h->u.logout.expcmdsn, max = h->u.logout.maxcmdsn, statsn = h->u.logout.statsn;
		break;
	case ISCSI_OP_ASYNC_MSG:
		exp = h->u.async.expcmdsn, max = h->u.async.maxcmdsn, statsn = h->u.async.statsn;
		break;
	case ISCSI_OP_REJECT:
		exp = h->u.reject.expcmdsn, max = h->u.reject.maxcmdsn, has_statsn = false;
		break;
	case ISCSI_OP_TEXT_RSP: /* decoded into u.text, not u.tmf_rsp */
		exp = h->u.text.expcmdsn, max = h->u.text.maxcmdsn, has_statsn = false;
		break;
	case ISCSI_OP_TASK_MGMT_RSP:
		exp = h->u.tmf_rsp.expcmdsn, max = h->u.tmf_rsp.maxcmdsn, statsn = h->u.tmf_rsp.statsn;
		break;
	default:
		return;
	}
	update_cmdsn(s, exp, max);
	if (has_statsn)
		update_statsn(s, statsn);
}

/* NOP-In (§11.19): the answer to our ping, and/or the target's ping asking for a NOP-Out echo. */
static int rx_nop_in(struct iscsi_session *s, const struct iscsi_bhs *h, const uint8_t *data, uint32_t dlen,
		     struct rx_out *o)
{
	(void)o;
	if (h->itt != ISCSI_RESERVED_TAG) {
		if (h->itt != s->ping_itt || !s->ping_sent) {
			log_err("NOP-In answering a NOP-Out we did not send (ITT 0x%08x)", h->itt);
			return -EPROTO;
		}
		s->ping_sent = false;
		s->ping_itt = itt_next_reserved(ITT_GEN_PING, s->ping_itt);
	}
	if (h->u.nop.ttt == ISCSI_RESERVED_TAG)
		return 0;
	/* The target asks for a NOP-Out echoing its ping data (§11.19), into a buffer not being sent. */
	int b = s->nop_reply ? (int)s->nop_next : !s->nop_buf[0].busy ? 0 : !s->nop_buf[1].busy ? 1 : -1;
	if (b < 0) {
		log_debug("NOP-In ping (TTT 0x%08x) while two answers are being sent: not answered", h->u.nop.ttt);
		return 0;
	}
	s->nop_reply = true;
	sess_tx_want(s);
	s->nop_next = (unsigned)b;
	s->nop_ttt = h->u.nop.ttt;
	s->nop_lun = h->lun;
	s->nop_dlen = dlen < NOP_DATA_MAX ? dlen : NOP_DATA_MAX;
	if (s->nop_dlen)
		memcpy(s->nop_buf[b].data, data, s->nop_dlen);
	return 0;
}

/* Logout Response (§11.15) to our Logout Request. */
static int rx_logout_rsp(struct iscsi_session *s, const struct iscsi_bhs *h, const uint8_t *data, uint32_t dlen,
			 struct rx_out *o)
{
	(void)data, (void)dlen, (void)o;
	if (!s->logout_sent || h->itt != s->logout_itt) {
		log_err("Logout Response we did not ask for (ITT 0x%08x)", h->itt);
		return -EPROTO;
	}
	if (h->u.logout.response != 0)
		log_warn("logout response %u", h->u.logout.response);
	s->logout_done = true;
	pthread_cond_broadcast(&s->state_cv);
	if (!s->logout_relogin)
		return 0;
	/* Logged out as the target asked: log in again after its Time2Wait. */
	s->drop_reason = s->relogin_reason;
	s->reconnect_delay_ms = target_secs_ms(h->u.logout.time2wait, "Time2Wait");
	(void)target_secs_ms(h->u.logout.time2retain, "Time2Retain"); /* ERL 0: nothing is retained */
	return -ECONNRESET;
}

/* Text Response (§11.11): nothing of ours asks for one in the full feature phase; its SNs count. */
static int rx_text_rsp(struct iscsi_session *s, const struct iscsi_bhs *h, const uint8_t *data, uint32_t dlen,
		       struct rx_out *o)
{
	(void)s, (void)h, (void)data, (void)dlen, (void)o;
	return 0;
}

/* The handler of each target opcode in the full feature phase (SPDK's iscsi_pdu_hdr_op_<op>). */
static int rx_dispatch(struct iscsi_session *s, const struct iscsi_bhs *h, const uint8_t *data, uint32_t dlen,
		       struct rx_out *o)
{
	switch (h->opcode) {
	case ISCSI_OP_DATA_IN:
		return rx_data_in(s, h, data, dlen, o);
	case ISCSI_OP_SCSI_RSP:
		return rx_scsi_rsp(s, h, data, dlen, o);
	case ISCSI_OP_R2T:
		return rx_r2t(s, h, data, dlen, o);
	case ISCSI_OP_NOP_IN:
		return rx_nop_in(s, h, data, dlen, o);
	case ISCSI_OP_LOGOUT_RSP:
		return rx_logout_rsp(s, h, data, dlen, o);
	case ISCSI_OP_ASYNC_MSG:
		return rx_async(s, h, data, dlen, o);
	case ISCSI_OP_REJECT:
		return rx_reject(s, h, data, dlen, o);
	case ISCSI_OP_TEXT_RSP:
		return rx_text_rsp(s, h, data, dlen, o);
	case ISCSI_OP_TASK_MGMT_RSP:
		return rx_tmf_rsp(s, h, data, dlen, o);
	default:
		log_err("unexpected %s PDU in the full feature phase", iscsi_opcode_name(h->opcode));
		return -EPROTO;
	}
}

/*
 * A whole PDU from the target: sequence numbers first (rx_update_sn), then
 * its handler, then the CmdSN window; a completion or an asynchronous
 * event runs after the lock is released.  The event thread flushes tx
 * after every receive, so nothing here kicks it.
 */
int sess_hook_rx_pdu(void *arg, const uint8_t *bhs, const uint8_t *data, uint32_t dlen)
{
	struct iscsi_session *s = arg;
	struct iscsi_bhs h;
	struct rx_out o = {0};
	log_set_thread_key(s); /* a flood of bogus PDUs: its lines are limited per session (log.h) */
	int rc = iscsi_bhs_decode(bhs, &h);
	if (rc) {
		log_err("received PDU with unexpected opcode 0x%02x", bhs[0] & 0x3f);
		return rc;
	}

	pthread_mutex_lock(&s->lock);
	if (!s->event_thread_known) {
		s->event_thread = pthread_self();
		s->event_thread_known = true;
	}
	s->last_rx_ms = clk_pass_us() / 1000;
	rx_update_sn(s, &h);
	rc = rx_dispatch(s, &h, data, dlen, &o);
	sess_window_admit(s);
	pthread_mutex_unlock(&s->lock);
	if (o.done)
		sess_run_completion(s, &o.c);
	if (o.ev.have)
		s->cfg.on_async_sense(s->cfg.async_arg, o.ev.lun, &o.ev.sense);
	return rc;
}

/* task_owns hook: a transport copying into a buffer itself checks that the task still owns it. */
bool sess_hook_task_owns(void *arg, uint32_t itt, const void *buf, uint32_t len)
{
	struct iscsi_session *s = arg;
	pthread_mutex_lock(&s->lock);
	struct task *t = sess_task_lookup(s, itt);
	bool owns = t && t->cmd.buf == buf && t->cmd.len >= len;
	pthread_mutex_unlock(&s->lock);
	return owns;
}
