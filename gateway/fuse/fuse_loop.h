/* SPDX-License-Identifier: MIT */
/*
 * The default FUSE request loop: readers that run the handler of the
 * request they read (no hand-off to another thread), with stand-in
 * readers while the readers wait for back-pressure.  -s keeps libfuse's
 * fuse_session_loop.
 */
#ifndef ISERFUSE_FUSE_LOOP_H
#define ISERFUSE_FUSE_LOOP_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

struct gw_io;

/* How long all readers must stay in their handlers, with none finishing, before a stand-in starts (ms). */
#define GW_LOOP_STALL_MS 2
/* How long more than the base count of readers must stay idle before a stand-in ends (ms). */
#define GW_LOOP_SPARE_MS 1000

/*
 * The number of base readers for max_threads: half the online CPUs, at
 * least 1, at most max_threads (>= 1).
 */
unsigned gw_fuse_loop_base(unsigned max_threads);

/*
 * Serve se until it exits (fuse_session_exit: a stop signal, the live
 * watcher) or is unmounted (reads fail with ENODEV), on the calling
 * thread, which supervises and reads nothing itself.  It starts
 * gw_fuse_loop_base(max_threads) readers with the stop signals blocked
 * (thread_start_quiet); each loops reading a request then
 * fuse_session_process_buf: the read goes into a payload pool slice the
 * reader holds (fuse_rx.h; a WRITE may take it over), or, when it can
 * take none, fuse_session_receive_buf into one struct fuse_buf of its own
 * (its memory is allocated by libfuse once per reader, freed when the
 * reader ends, as its slice is returned).
 * When every reader is in a handler and none has finished one for
 * GW_LOOP_STALL_MS, one stand-in reader more starts, up to max_threads
 * in all; a stand-in ends after GW_LOOP_SPARE_MS with more than the base
 * count idle.
 *
 * While serving, the calling thread blocks SIGTERM, SIGINT and SIGHUP
 * except while it waits (ppoll), so their handler (stop.c) runs at once;
 * once se has exited, readers blocked in read(2) are woken by a private
 * signal (SIGUSR2, a no-op handler without SA_RESTART, sent only to
 * readers not in a handler) until each has ended; a reader in a handler
 * finishes it first.  Nothing is cancelled.  The caller's signal mask is
 * restored and se reset (fuse_session_reset) on return, as
 * fuse_session_loop_mt does.
 *
 * With io (fuse_io.h; NULL: none), while an event thread serves /dev/fuse
 * the readers do not read it: they run the requests it hands over, and
 * are kicked out of a read(2) begun before it served; once it stops they
 * read again.  What is still handed over at the end is dropped
 * (gw_io_close).
 *
 * ended(arg) (NULL: none) runs once on the calling thread as soon as se
 * has exited, before the wait for readers still in a handler: a handler
 * may wait for a command to the target (a write over blocks another one
 * in flight covers), which only the stop's grace can end.
 *
 * Returns 0, or the first negative errno a reader's read failed with
 * (-ENOMEM, -EAGAIN when not even one reader could be started).
 */
int gw_fuse_loop(struct fuse_session *se, unsigned max_threads, struct gw_io *io, void (*ended)(void *arg),
		 void *arg);

#endif
