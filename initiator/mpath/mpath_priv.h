/* SPDX-License-Identifier: MIT */
/*
 * Multipath internals shared by mpath.c (paths, submission, re-issue) and
 * mpath_thread.c (the mpath's thread, link events, statistics, stop).
 * Every field below is guarded by struct mpath's lock unless it says
 * otherwise.
 */
#ifndef ISERFUSE_MPATH_PRIV_H
#define ISERFUSE_MPATH_PRIV_H

#include <pthread.h>
#include <stdatomic.h>

#include "mpath.h"

#define MP_ALUA_NONE 0x100       /* ALUA_NONE (alua.h): no ALUA, or not known: as good as active/optimized */
#define MP_RANK_UNUSABLE 9        /* alua_state_rank of a state that takes no commands */
#define MP_RANK_FENCED 8          /* a fenced path (another device, no other path): last, its I/O fails with EIO */
#define MP_TRIES_MAX 16          /* re-issues of one command before its last error is delivered */
#define MP_RECHECK_MS 1000       /* a path not usable for its ALUA state or a failed check is checked again this often */
/*
 * Stall watch (mpath_stall.c), with another path usable: a path whose
 * commands got no reply for ping_after ms gets a NOP-Out ping at once; no
 * PDU within answer ms of it drops the path (its commands move).  Both from
 * the path's recent p99 command latency, with floors and caps.
 */
#define MP_STALL_TICK_MS 100         /* the mpath's thread looks this often while commands are out */
#define MP_PING_AFTER_P99 4          /* ping_after: 4 x p99 ... */
#define MP_PING_AFTER_MIN_MS 500     /* ... at least 500 ms ... */
#define MP_PING_AFTER_MAX_MS 10000   /* ... at most 10 s (the keep-alive drops a silent path after noop_interval + noop_timeout anyway) */
#define MP_ANSWER_P99 2              /* answer: 2 x p99, 700 ms .. 5 s */
#define MP_ANSWER_MIN_MS 700
#define MP_ANSWER_MAX_MS 5000
#define MP_LAT_WINDOW_MS 10000       /* "recent" latency: the last one to two windows of this length ... */
#define MP_LAT_MIN_SAMPLES 32        /* ... when they hold this many commands, else all so far */
#define MP_DOWN_LINE_WAIT_MS 2000    /* the down line waits this long at most for the path's commands to move */

enum mp_slot {
	MP_SLOT_FREE,                /* discarded (the open failed) */
	MP_SLOT_OPENING,             /* mpath_path_new: the session is being opened */
	MP_SLOT_CHECKING,            /* mpath_path_attach: check_path runs */
	MP_SLOT_READY,               /* attached: carries I/O when mp_usable */
	MP_SLOT_REFUSED,             /* leads to another device: never used */
};

struct mpath_path {
	struct mpath *m;             /* set once */
	size_t index;                /* set once */
	char host[ISCSI_URL_HOST_MAX]; /* set once */
	unsigned port;
	const char *transport;
	enum mp_slot state;
	struct iscsi_session *s;     /* owned from attach on; stays until mpath_close */
	bool sess_up;                /* the session takes commands (its on_path_state hook) */
	bool checked;                /* check_path passed since the session last came up */
	bool recheck;                /* ALUA states to be read again (sense, UNIT ATTENTION) */
	bool verified;               /* the session's verify hook passed: checked once it is up */
	bool fenced;                 /* the verify hook found another device while it was the only path */
	int64_t next_check_ms;       /* when the thread checks it next (0: at once when needed) */
	int alua;                    /* ALUA state (SPC-4 §6.36), MP_ALUA_NONE without ALUA */
	int ifindex;                 /* output interface of its route, 0 if unknown */
	const char *down_cause;      /* set by mpath_fail_ifindex, for the failover line */
	unsigned outstanding;
	uint64_t commands, errors, failovers;
	/* the current outage: for the one failover line and the failback line */
	int64_t down_ms;             /* when it went down (0: up) */
	bool down_logged;
	unsigned moved;              /* commands moved away since down_ms */
	int64_t moved_stall_us;      /* longest time one of them had been in flight when moved */
	/* stall watch (mpath_stall.c): the mpath's thread only, no lock */
	int64_t ping_ms;             /* when the stall ping went out (0: none) */
	int64_t silent_ms;           /* how long the path had not replied when it went */
	int64_t lat_mid_ms;          /* when lat_mid was taken (0: never) */
	uint64_t lat_base[LAT_BUCKETS], lat_mid[LAT_BUCKETS]; /* the session's histogram two and one windows ago */
	char cause[128];             /* down_cause of a stall drop (written before down_cause points here) */
};

struct mp_cmd {
	struct mpath *m;
	struct mp_cmd *next;         /* free list or hold queue */
	struct iscsi_cmd cmd;        /* the caller's command, its cb and arg ours (mp_done, this context) */
	iscsi_cmd_cb cb;             /* the caller's callback and argument */
	void *arg;
	struct mpath_path *path;     /* where it was last sent */
	unsigned tries;
	bool worker;                 /* submitted outside a completion callback (counts in worker_out) */
	int64_t first_us;             /* when it was submitted, for the failover line's stall (0: while one path was attached, not measured) */
};

struct mpath {
	struct mpath_config cfg;     /* set once */
	pthread_mutex_t lock;
	pthread_cond_t slot_cv;      /* worker_out fell below queue_depth */
	pthread_cond_t drain_cv;     /* total_out reached 0 */
	pthread_cond_t thread_cv;    /* something for the mpath's thread */
	pthread_t thread;
	/*
	 * Held by mpath_stopping from listing the sessions to calling into
	 * them, and by mpath_path_attach while it takes a refused path's
	 * session out of its slot (before closing it).  Taken before m->lock.
	 */
	pthread_mutex_t stop_lock;
	bool closing;
	int64_t stop_by_ms;          /* mpath_stopping: held commands fail by then (0: none) */
	struct mpath_path paths[MPATH_MAX_PATHS];
	size_t npaths;               /* slots used (never shrinks) */
	size_t attached;             /* paths that reached MP_SLOT_READY */
	size_t refused;
	bool multi;                  /* attached >= 2: sessions hand commands back at once */
	struct path_selector sel;
	struct mp_cmd *ctx;          /* nctx contexts, made at create */
	size_t nctx;
	struct mp_cmd *free;
	unsigned worker_out, total_out;
	/*
	 * Callers' callbacks given a result whose context is back (total_out
	 * no longer counts it) but which have not returned: mpath_drain waits
	 * for these too.  The last one out broadcasts drain_cv under the lock.
	 */
	_Atomic unsigned callbacks_running;
	_Atomic unsigned drain_waiters; /* mpath_drain calls waiting (seq_cst, see run_callback_unlock) */
	unsigned peak_out;           /* the most commands in flight through the set at once */
	struct mp_cmd *held_head, *held_tail;
	unsigned nheld;
	int64_t nopath_since;        /* ms: no path usable since (0: one is) */
	bool nopath_failing;         /* past the replacement timeout with no path: new commands refused */
	uint64_t failovers;
	/* the mpath thread looks at the stalls within MP_STALL_TICK_MS, or there is nothing to watch (one usable path):
	 * a path's first command need not wake it */
	bool stall_ticking;
	_Atomic uint32_t max_cmd_bytes; /* the first attached path's limit (relaxed) */
};

int mp_alua_rank(int state);
/* Where p ranks in mp_pick: its ALUA state's rank, MP_RANK_FENCED when fenced.  Lock held. */
int mp_rank(const struct mpath_path *p);
bool mp_usable(const struct mpath_path *p);
void mp_note_paths(struct mpath *m);
void mp_hold(struct mpath *m, struct mp_cmd *c);
int mp_dispatch(struct mpath *m, struct mp_cmd *c);
/* Deliver res to c's caller and free c (lock NOT held). */
void mp_complete(struct mpath *m, struct mp_cmd *c, const struct iscsi_cmd_result *res);
/* mp_complete with a transport error err. */
void mp_fail(struct mpath *m, struct mp_cmd *c, int err);
int mp_thread_start(struct mpath *m);

/* The path the next command takes: ALUA's best group among usable paths, then the selector; NULL if none.  Lock held. */
struct mpath_path *mp_pick(struct mpath *m);

/* What a completion means for the path it came back on. */
enum mp_verdict {
	MP_DELIVER,       /* the command's own result: to the caller */
	MP_PATH_LOST,     /* handed back by a lost path: re-issue elsewhere */
	MP_PATH_STATE,    /* ALUA: this path cannot do it now (standby, unavailable, transitioning) */
	MP_STATES_CHANGED /* ALUA states changed (UNIT ATTENTION): re-read them, re-issue */
};

/*
 * The verdict on res; for MP_PATH_STATE *alua_state gets the state the
 * sense names (SPC-4 §5.15.2.4 / asc-num: NOT READY 04/0A transitioning,
 * 04/0B standby, 04/0C unavailable).  Pure.
 */
enum mp_verdict mp_judge(const struct iscsi_cmd_result *res, int *alua_state);

/*
 * With two paths or more: the one line per path going down (once its
 * commands moved, or MP_DOWN_LINE_WAIT_MS after it went) and the one per
 * path back, at warning level; the count is p->moved, the only one (the
 * session's own lines about the loss are at debug level,
 * iscsi_session_join_multipath).  Lock held; the mpath's thread.
 */
void mp_log_transitions(struct mpath *m, struct mpath_path *p, int64_t now);

/* The stall watch's bounds for one path (ms). */
struct mp_stall_limits {
	int64_t ping_after;          /* no reply for this long with commands out: ping */
	int64_t answer;              /* no PDU at all this long after the ping: drop the path */
};

/* The bounds from a latency histogram of the path's recent commands (latency.h; empty: the floors).  Pure. */
void mp_stall_limits(const uint64_t lat[LAT_BUCKETS], struct mp_stall_limits *l);

/*
 * The recent part of a session's histogram: cur less base when that holds
 * MP_LAT_MIN_SAMPLES commands or more, else cur (all so far), into out.  Pure.
 */
void mp_lat_recent(const uint64_t cur[LAT_BUCKETS], const uint64_t base[LAT_BUCKETS], uint64_t out[LAT_BUCKETS]);

enum mp_stall_act {
	MP_STALL_NONE,               /* nothing to do now */
	MP_STALL_PING,               /* commands out, no reply for ping_after: ping at once */
	MP_STALL_ANSWERED,           /* a PDU came after the ping: the path stays */
	MP_STALL_DROP                /* no PDU within answer of the ping: drop the path, its commands move */
};

/*
 * What the stall watch does about a session in state w at now (ms), its
 * stall ping sent at ping_ms (0: none).  A command counts as waiting from
 * the later of its issue and the last PDU received, so a path that keeps
 * replying (a busy target, large transfers) is never pinged.  Pure.
 */
enum mp_stall_act mp_stall_judge(const struct mp_stall_limits *l, const struct iscsi_session_wait *w, int64_t ping_ms,
				 int64_t now);

/*
 * The stall watch over every usable path with commands out, while another
 * path is usable: ping, keep or drop (mp_stall_judge).  Returns when to
 * look again (no later than wake).  Lock held, dropped around the calls
 * into sessions; on the mpath's thread.
 */
int64_t mp_watch_stalls(struct mpath *m, int64_t now, int64_t wake);

#endif
