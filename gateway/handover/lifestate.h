/* SPDX-License-Identifier: MIT */
/*
 * What a worker hands on to the next one (supervisor.h): a page of shared
 * memory (a memfd the supervisor creates and keeps; each worker inherits
 * it and maps it) with the ISID, the kernel's FUSE INIT request as the
 * first worker read it, the LUN table (which LUN and device each inode
 * is), and the restart counters.  And the worker's side of the channel to
 * the supervisor: "mounted" (with the /dev/fuse descriptor), "serving",
 * "stopping for good".
 *
 * Threads: the INIT request is written once, by the reader that reads it,
 * before any other request is read; the counters are atomics; the rest is
 * written by a worker's main thread before it serves.
 */
#ifndef ISERFUSE_LIFESTATE_H
#define ISERFUSE_LIFESTATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/gateway.h"

/* Room for the INIT request: struct fuse_in_header (40) + struct fuse_init_in (64 since 7.36). */
#define GW_LIFE_INIT_MAX 256

/* One LUN file as a worker served it: the next worker must find the same device there. */
struct gw_life_lun {
	uint16_t lun;
	uint32_t block_size;
	char serial[256]; /* VPD 0x80, "" if none */
	char devid[300];  /* VPD 0x83's designator name, "" if none */
};

struct gw_life_state {
	uint32_t magic;
	uint8_t isid[6];                /* every worker's first session (RFC 7143 §11.12.5) */
	_Atomic uint32_t init_len;      /* bytes in init, 0 until the first worker read the INIT request */
	uint8_t init[GW_LIFE_INIT_MAX];
	uint32_t nluns;                 /* slots in luns: inode 2 + i is luns[i] */
	struct gw_life_lun luns[GW_MAX_LUNS];
	atomic_uint_fast64_t restarts;  /* workers started after the first (the supervisor's count) */
	atomic_uint_fast64_t resent;    /* requests read with FUSE_UNIQUE_RESEND, every worker's */
	atomic_bool uring;              /* a worker served over io_uring */
	atomic_bool no_resend;          /* the kernel refused FUSE_NOTIFY_RESEND: a dead worker ends the mount */
};

/* This process as a worker: what the supervisor passed (--worker). */
struct gw_life {
	bool worker;                /* started by a supervisor */
	unsigned n;                 /* 0: the first worker, which mounts; else a restart */
	int ctl_fd;                 /* the channel to the supervisor (SOCK_SEQPACKET) */
	int state_fd;               /* the memfd of struct gw_life_state */
	int dev_fd;                 /* a restart: the inherited /dev/fuse descriptor; else -1 */
	int ready_fd;               /* the first worker in the background: the start-up parent's pipe; else -1 */
	struct gw_life_state *st;   /* mapped; NULL when not a worker */
};

extern struct gw_life gw_life;

#define GW_WORKER_FLAG "--worker"
/* A restarted worker's exit status when the mount cannot go on (its LUNs are other devices): no more workers. */
#define GW_WORKER_EXIT_GIVE_UP 3
/* A restarted worker could not log in (the target unreachable): started again within replacement_timeout. */
#define GW_WORKER_EXIT_NO_TARGET 4

/*
 * If argv[1] is GW_WORKER_FLAG, take it and its value ("n,ctl,state,dev,
 * ready") off *argc/argv into gw_life and map the state.  Returns 0 (not a
 * worker, or a worker now), or -1 after one line (a bad value).
 */
int gw_life_from_argv(int *argc, char **argv);

/* Create the state memfd (inheritable) and map it: ISID drawn here.  Returns the fd or a negative errno. */
int gw_life_state_create(struct gw_life_state **out);

/*
 * Worker to supervisor: one byte, with fd as SCM_RIGHTS when fd >= 0.
 * 'M' mounted (fd: /dev/fuse), 'S' serving, 'Q' stopping for good,
 * 'R' a handover refused (no path up).
 * No-op when not a worker.
 */
void gw_life_tell(char what, int fd);

/* The LUN table into the state: after the LUNs are open, and when the rescan thread adds one. */
void gw_life_luns_save(const struct gw *g);

/*
 * A restarted worker, before the LUN files are made: order infos[0..n)
 * (the probed disk LUNs) as the state's table, those it does not hold
 * after them in their order, so that every inode names the LUN it named
 * (the rescan thread may have added LUNs in another order than REPORT
 * LUNS gives now).  No-op when not a restarted worker.
 */
void gw_life_luns_order(struct iscsi_lun_info *infos, size_t n);

/*
 * A restarted worker: whether g's LUN table is the one the state holds
 * (the same LUN number and device, by serial and designator, in every
 * slot).  Returns 0, or -ENODEV with why (cap bytes, one phrase).
 */
int gw_life_luns_check(const struct gw *g, char *why, size_t cap);

#endif
