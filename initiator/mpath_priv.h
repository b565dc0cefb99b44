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
	int64_t first_us;             /* when it was submitted, for the failover line's stall */
};

struct mpath {
	struct mpath_config cfg;     /* set once */
	pthread_mutex_t lock;
	pthread_cond_t slot_cv;      /* worker_out fell below queue_depth */
	pthread_cond_t drain_cv;     /* total_out reached 0 */
	pthread_cond_t thread_cv;    /* something for the mpath's thread */
	pthread_t thread;
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
	unsigned peak_out;           /* the most commands in flight through the set at once */
	struct mp_cmd *held_head, *held_tail;
	unsigned nheld;
	int64_t nopath_since;        /* ms: no path usable since (0: one is) */
	bool nopath_failing;         /* past the replacement timeout with no path: new commands refused */
	uint64_t failovers;
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

#endif
