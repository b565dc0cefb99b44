/* SPDX-License-Identifier: MIT */
/*
 * iSCSI session, full feature phase (RFC 7143 §4.2, §11): task table with
 * O(1) ITT lookup, CmdSN/ExpCmdSN/MaxCmdSN window, ExpStatSN tracking,
 * Data-In placement, Data-Out for unsolicited (immediate and
 * InitialR2T=No) and solicited (R2T) data, NOP-In answers, Logout.
 *
 * Threads: any thread may submit; completions run on the transport's
 * event thread (or on a submitter's thread whose direct send completes a
 * command answered meanwhile, the session's recovery thread, see below,
 * or the thread closing the session), without
 * the session lock held.  The session owns its transport.  Payload buffers
 * belong to the caller and must stay valid (and, for a READ, untouched)
 * until the completion callback.
 *
 * Recovery at ErrorRecoveryLevel 0 (RFC 7143 §6.3.5): when the
 * connection is lost (transport error, command or NOP-Out timeout, digest
 * error, protocol violation), the session's recovery thread reconnects
 * with capped, jittered exponential back-off, logs in again with the same
 * ISID and TSIH 0 (session reinstatement: the target drops what was left
 * of the old session), and re-issues every command that had not completed,
 * in their original CmdSN order, with fresh ITTs and CmdSNs; a WRITE is
 * re-sent whole from the caller's buffer.  Callbacks fire once, with the
 * final result.  A command is re-issued at most ISCSI_REISSUE_MAX times,
 * then fails with -EIO.  Commands still pending replacement_timeout_ms
 * after the loss fail with -ETIMEDOUT, and new submissions fail with
 * -ENOTCONN until the session is back.  A command counts that time from
 * the first loss it met: reinstatements in between in which the target
 * answered nothing do not stretch it (a connection on which a re-issued
 * command is still pending then is dropped, at the next tick).
 */
#ifndef ISERFUSE_SESSION_H
#define ISERFUSE_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "initiator/util/defaults.h"
#include "initiator/util/latency.h"
#include "initiator/login/login.h"
#include "initiator/scsi/scsi.h"
#include "initiator/transport/transport.h"

struct iscsi_session;

enum iscsi_dir { ISCSI_DIR_NONE = 0, ISCSI_DIR_READ = 1, ISCSI_DIR_WRITE = 2 };

struct iscsi_cmd_result {
	int err;              /* 0: status below is valid; <0: transport/protocol failure (-EIO, -ECONNRESET, ...) */
	uint8_t status;       /* SAM status */
	bool has_sense;
	struct scsi_sense sense;
	uint32_t residual;    /* bytes not transferred (underflow) */
	uint32_t xfer_len;    /* bytes actually transferred: len - residual for an underflow */
};

typedef void (*iscsi_cmd_cb)(void *arg, const struct iscsi_cmd_result *res);

struct iscsi_cmd {
	uint64_t lun;         /* BHS LUN field (scsi_lun_encode) */
	uint8_t cdb[SCSI_CDB_MAX];
	uint8_t cdb_len;
	enum iscsi_dir dir;
	void *buf;            /* payload, len bytes; owned by the caller (a pool slice) */
	uint32_t len;         /* Expected Data Transfer Length, bytes */
	iscsi_cmd_cb cb;      /* completion, on the event thread (or see Threads above) */
	void *arg;
};

struct iscsi_session_config {
	const struct iscsi_transport_ops *transport;
	void *transport_ctx;   /* passed to transport->connect; owned by the caller, outlives the session */
	char host[ISCSI_URL_HOST_MAX];
	unsigned port;
	char initiator_name[ISCSI_NAME_MAX];
	char target_name[ISCSI_NAME_MAX];
	struct iscsi_neg_config neg;
	unsigned queue_depth;  /* task slots: most commands outstanding at once (1..ISCSI_QUEUE_DEPTH_MAX,
	                        * larger is clamped; 0: ISCSI_QUEUE_DEPTH_DEFAULT, initiator/util/defaults.h) */
	int timeout_ms;        /* connect and login timeout */
	int cmd_timeout_ms;    /* a command older than this gets ABORT TASK, LU RESET, then a drop; 0 = never */
	int noop_interval_ms;  /* NOP-Out ping after this long without a PDU from the target; 0 = off */
	int noop_timeout_ms;   /* no PDU within this long after a ping drops the connection; <= 0: ISCSI_NOOP_TIMEOUT_DEFAULT_S */
	/*
	 * After a connection loss, commands still pending this long fail with
	 * -ETIMEDOUT and new ones with -ENOTCONN until the session is back;
	 * 0 = at once (reconnection goes on in the background).  Not used
	 * while hand_back is set.
	 */
	int replacement_timeout_ms;
	/*
	 * On a connection loss, hand the pending commands back at once
	 * (-ETIMEDOUT) to the layer above, which re-issues them on another
	 * path, and refuse new ones (-ENOTCONN) until the session is back;
	 * reconnection goes on in the background.  Set by a multipath layer
	 * (iscsi_session_set_hand_back, iscsi_session_join_multipath).
	 */
	bool hand_back;
	/*
	 * SCSI asynchronous event (Async Message AsyncEvent 0, RFC 7143 §11.9):
	 * called on the event thread, without the session lock, with the BHS
	 * LUN field and the parsed sense; NULL: the event is logged.
	 */
	void (*on_async_sense)(void *arg, uint64_t lun, const struct scsi_sense *sense);
	void *async_arg;
	/*
	 * CHAP credentials (RFC 7143 §12.1.3), NUL-terminated, "" for none: as
	 * in struct iscsi_login_config.  The session keeps its own copy for the
	 * logins of recovery and wipes it in iscsi_session_close (or when open
	 * fails); the caller wipes cfg.
	 */
	struct iscsi_chap_creds chap;
	/*
	 * The session went down (up == false: the connection was lost) or is
	 * up again (reinstated, commands accepted): for a multipath layer.
	 * Called with the session's lock held, on the dying connection's event
	 * thread or the recovery thread: it must only note the change (take a
	 * lock of its own, signal) and never call into this session.  NULL: none.
	 */
	void (*on_path_state)(void *arg, bool up);
	void *path_state_arg;
	/*
	 * After every reinstatement, before a parked command is re-issued or
	 * a new one sent: whether the new connection still leads to the same
	 * device (the LUNs' identity, lun_ident.h; an address taken over or a
	 * target reconfigured leads elsewhere).  Called on the recovery thread
	 * (or by iscsi_session_reverify on its caller's), session lock not
	 * held; only the commands this thread runs (iscsi_session_exec) are
	 * sent meanwhile, every other one waits.  Returns 0 (the same device:
	 * the parked commands are re-issued), -ENODEV (another device, why
	 * says how: the session is fenced: the parked commands and every later
	 * iscsi_session_submit fail with -EIO, iscsi_session_exec still runs,
	 * until a reinstatement or iscsi_session_reverify finds the device
	 * again) or another negative errno (cannot tell now: the connection is
	 * dropped and recovered again).  Bounded by the login timeout, the
	 * replacement timeout and the stop grace (the connection is dropped).
	 * NULL: no check.
	 */
	int (*verify)(void *arg, struct iscsi_session *s, char *why, size_t cap);
	void *verify_arg;
	/*
	 * The session's ISID (RFC 7143 §11.12.5), all zero: a random one.  A
	 * process that takes over from one that died logs in with the same
	 * ISID (and initiator name), so that the target reinstates the old
	 * session (§6.3.5) instead of keeping it beside the new one.
	 */
	uint8_t isid[6];
};

/*
 * Connect, log in and enter the full feature phase.  Returns 0 and a new
 * session in *out (free with iscsi_session_close), or a negative errno with
 * a one-line reason in err (see iscsi_login for the values).
 */
int iscsi_session_open(const struct iscsi_session_config *cfg, struct iscsi_session **out,
		       char *err, size_t err_cap);

/* Times one command is re-issued after connection losses before it fails with -EIO. */
#define ISCSI_REISSUE_MAX 5

/*
 * Submit a SCSI command asynchronously.  Blocks while all task slots are
 * in use (back-pressure); queues while the CmdSN window is closed or the
 * session is being recovered.  Returns 0 (cmd->cb will be called exactly
 * once) or -ENOTCONN when the session is closing or has been down longer
 * than replacement_timeout_ms (cb is not called), -EIO while fenced (see
 * cfg.verify), -EINVAL for a bad command.
 */
int iscsi_session_submit(struct iscsi_session *s, const struct iscsi_cmd *cmd);

/*
 * Synchronous variant: submit and wait for the completion.  Returns 0 with
 * *res filled (check res->err and res->status), or the submit error.
 * Must not be called on the event thread.  Once the caller is stopping
 * (iscsi_session_stopping) it returns -ESHUTDOWN at once, and one already
 * waiting ends with res->err -ESHUTDOWN: at once when the command was not
 * sent yet, else when the target has not answered it STOP_ANSWER_MS (1 s)
 * after the stop, by dropping the connection (at the next tick).
 * Not fenced (probes, REPORT LUNS, READ CAPACITY: see cfg.verify).
 */
int iscsi_session_exec(struct iscsi_session *s, struct iscsi_cmd *cmd, struct iscsi_cmd_result *res);

/* Most payload bytes one SCSI command may move on this session's transport; 0 = no limit. */
uint32_t iscsi_session_max_cmd_bytes(const struct iscsi_session *s);

/* Negotiated parameters (valid after open). */
const struct iscsi_params *iscsi_session_params(const struct iscsi_session *s);

struct iscsi_session_stats {
	uint64_t commands, bytes_read, bytes_written;
	uint32_t outstanding, max_outstanding;
	uint64_t payload_bytes_copied; /* payload copied in user space by the transport */
	uint64_t reconnects;           /* sessions reinstated after a connection loss */
	uint64_t tx_direct;            /* SCSI Command PDUs written by their submitter's thread (try_send) */
	uint64_t tx_kicks;             /* event-thread wake-ups asked for by submitters (kick) */
	uint64_t event_wakeups;        /* times the event threads woke from poll, all connections so far */
};
void iscsi_session_get_stats(struct iscsi_session *s, struct iscsi_session_stats *out);

/*
 * Latency of the commands answered so far (submission to completion, in
 * microseconds), as log2 buckets (see latency.h) copied into out.
 * Lock-free; any thread.
 */
void iscsi_session_get_latency(struct iscsi_session *s, uint64_t out[LAT_BUCKETS]);

/*
 * The caller is stopping (unmount, SIGTERM): from now on the replacement
 * timeout is at most grace_ms away.  A session that is down, or goes down
 * later, is still recovered until then (so a target back within the grace
 * gets its flushes); no ABORT TASK or LOGICAL UNIT RESET is started or
 * escalated any more.  When the grace ends, commands still pending fail
 * with -ETIMEDOUT, on a live connection too (the recovery thread drops it:
 * no re-issue), and new ones are refused (-ENOTCONN), with no reconnect,
 * so that drain, the final write-back and SYNCHRONIZE CACHE and close end
 * within grace_ms plus about a second however the target behaves (close
 * waits 1 s at most for the Logout Response, and not past the grace's end
 * + 1 s).  A connect or login in progress whose deadline lies beyond is
 * cancelled and tried again within the grace.  Synchronous commands (iscsi_session_exec: the caller's
 * background threads' probes and rescans) fail from now on, pending ones
 * too, with -ESHUTDOWN (see there), so that those threads can be joined
 * within about 2 s.  Any thread but the event thread; idempotent (the
 * earliest grace holds).
 */
void iscsi_session_stopping(struct iscsi_session *s, int grace_ms);

/*
 * Wait up to timeout_ms for every outstanding command to complete and its
 * callback to have returned (a command counts as done before its callback
 * runs: what the callback answers its own caller must not outlive the
 * drain).  Not from a callback.  Returns 0, or -ETIMEDOUT with commands
 * or callbacks still outstanding.
 */
int iscsi_session_drain(struct iscsi_session *s, int timeout_ms);

/*
 * Wait for outstanding commands (up to timeout_ms), stop the recovery
 * thread (a connect or login in progress ends at once), send Logout
 * (reason 0, close the session, §11.14) if connected and wait 3 s for its
 * answer (after iscsi_session_stopping 1 s, and not past the grace's end
 * + 1 s), shut the transport
 * down and free everything.  Commands still outstanding complete with err
 * -ECONNABORTED.
 */
void iscsi_session_close(struct iscsi_session *s, int timeout_ms);

/* ---- controls for a multipath layer (session_path.c) ---- */

/*
 * Fail the connection now, as if it were lost, because the path under it
 * went away (a link down, the route gone: the transport's abort op): the
 * session recovers as after any loss.  reason (a static string) names it
 * in the loss line.  No-op when the session is not up.  Any thread but
 * the event thread's callbacks.
 */
void iscsi_session_drop(struct iscsi_session *s, const char *reason);

/*
 * A recovery waiting out its reconnect back-off tries again at once (the
 * route to the portal came back).  No-op when the session is up.  Any thread.
 */
void iscsi_session_retry_now(struct iscsi_session *s);

/*
 * From now on (on true) a loss hands the pending commands back at once
 * (-ETIMEDOUT), for a multipath layer to re-issue on another path, and
 * new ones are refused (-ENOTCONN) until the session is back, instead of
 * waiting out the replacement timeout (cfg.hand_back).  Any thread;
 * applies to a loss in progress too.
 */
void iscsi_session_set_hand_back(struct iscsi_session *s, bool on);

/*
 * The session belongs to a multipath set of two paths or more: from now
 * on a loss hands its commands back at once (see
 * iscsi_session_set_hand_back) and the session's own lines
 * about the loss, the hand-back and the reinstatement go to debug level:
 * the multipath layer writes the one line per path event.  Any thread.
 */
void iscsi_session_join_multipath(struct iscsi_session *s);

/* What a multipath layer's stall check reads of a session (iscsi_session_get_wait). */
struct iscsi_session_wait {
	bool up;              /* logged in and taking commands */
	int64_t last_rx_ms;   /* CLOCK_MONOTONIC ms of the last PDU from the target */
	int64_t oldest_ms;    /* (re-)issue time of the oldest command sent and not answered; 0: none */
};

/* Fill *w (see struct iscsi_session_wait).  Any thread; O(queue_depth). */
void iscsi_session_get_wait(struct iscsi_session *s, struct iscsi_session_wait *w);

/*
 * Send a NOP-Out ping (RFC 7143 §11.18) now, unless one is unanswered
 * already: any PDU the target sends after it shows in last_rx_ms of
 * iscsi_session_get_wait.  Dropping the connection when no answer comes
 * is the caller's choice (iscsi_session_drop); the keep-alive's own
 * noop_timeout still applies to it.  Returns 0, or -ENOTCONN when the
 * session is not up.  Any thread but the event thread's callbacks.
 */
int iscsi_session_ping(struct iscsi_session *s);

/*
 * Whether this thread is running a completion callback of some session
 * now (a submission from it never waits for a slot).  Any thread.
 */
bool iscsi_session_in_callback(void);

/*
 * The event thread's guest (transport.h): from now on each event thread
 * of s (over a transport that serves guests: TCP) also polls fd and, when
 * it is readable, calls run(arg) as if in a completion callback: what run
 * submits to any session never waits for a slot (-EAGAIN when none is
 * free), and goes out in the same pass of the loop, without a kick
 * through the eventfd.  run must never block.  live(arg, true) is called
 * when an event thread starts serving the guest (also from this call when
 * one runs already), live(arg, false) when it stops (the connection was
 * lost or closed; from this call when fd < 0 removes the guest); both
 * under s's lock, so they only set state and wake.  fd < 0 removes the
 * guest (run and live may still be running on the event thread until its
 * next pass: arg must outlive s).  Any thread, also run itself.  The
 * descriptor stays the caller's.
 */
void iscsi_session_set_guest(struct iscsi_session *s, int fd, void (*run)(void *arg),
			     void (*live)(void *arg, bool live), void *arg);

/*
 * Whether cfg.verify found another device behind the session at its last
 * reinstatement (fenced: iscsi_session_submit fails with -EIO).  Any thread.
 */
bool iscsi_session_fenced(struct iscsi_session *s);

/*
 * A fenced session: run cfg.verify again on this thread (a rescan); when
 * it finds the device again and no reinstatement fenced the session
 * meanwhile, I/O resumes (one log line).  Returns 0 (not fenced, or
 * resumed) or verify's error.  Not on the event thread.
 */
int iscsi_session_reverify(struct iscsi_session *s);

/* Whether the session takes commands now (logged in, not down, not closing).  Any thread. */
bool iscsi_session_up(struct iscsi_session *s);

/* Map a completion to a negative errno (0 for GOOD): transport error, or scsi_status_to_errno. */
int iscsi_cmd_result_errno(const struct iscsi_cmd_result *r);

/*
 * What the target answered, for a log line: " (status 0xSS, sense K/AA/QQ)"
 * (SAM status; sense key, ASC, ASCQ of SPC-4 §4.5), without the sense part
 * when none came, and "" when the target sent no status at all (r->err:
 * the command failed here, lost with its connection or timed out).  Into
 * out (cap bytes, NUL-terminated, truncated to fit); returns out.
 */
const char *iscsi_cmd_result_status(const struct iscsi_cmd_result *r, char *out, size_t cap);

#endif
