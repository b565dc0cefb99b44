/* SPDX-License-Identifier: MIT */
/* Daemonising and the parent's wait for the mount (see daemon.h). */
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "initiator/util/clock.h"
#include "initiator/util/log.h"
#include "initiator/util/thread.h"
#include "gateway/handover/lifestate.h"
#include "startup.h"

/* SIGALRM before the mount is live: see gw_startup_watchdog_arm. */
static void startup_watchdog(int sig)
{
	static const char msg[] = "iserfuse: the target did not answer in time; nothing mounted\n";
	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

static void report_ready(int fd)
{
	if (fd < 0)
		return;
	if (write(fd, "K", 1) != 1)
		log_warn("cannot tell the parent process that the mount is ready");
	close(fd);
}

static void detach_stdio(void)
{
	int fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	gw_logdest_activate();
}

void gw_startup_watchdog_arm(unsigned login_timeout_s)
{
	signal(SIGALRM, startup_watchdog);
	alarm(2 * login_timeout_s + 5);
}

void gw_live_watch_init(struct gw_live_watch *w)
{
	clk_cond_init(&w->cv);
	pthread_mutex_init(&w->lock, NULL);
	w->ready_fd = -1;
}

/*
 * Wait up to 10 ms for the FUSE loop to end (gw_live_watch_end signals
 * cv).  Called with w->lock held.  Returns true once it has ended.
 */
static bool ended_within_10ms(struct gw_live_watch *w)
{
	struct timespec ts = clk_deadline_ms(10);
	while (!w->given_up && pthread_cond_timedwait(&w->cv, &w->lock, &ts) == 0)
		;
	return w->given_up;
}

/* The watcher thread (see gw_live_watch_start). */
static void *live_watch_run(void *arg)
{
	struct gw_live_watch *w = arg;
	struct stat st;
	int err = 0;
	pthread_mutex_lock(&w->lock);
	for (int i = 0; i < 6000; i++) { /* the INIT reply normally comes at once; 60 s at most */
		pthread_mutex_unlock(&w->lock);
		int src = stat(w->mnt, &st); /* without the lock: it waits for the INIT reply */
		if (src)
			err = errno;
		pthread_mutex_lock(&w->lock);
		if (src || (st.st_dev != w->under && st.st_ino == 1) || ended_within_10ms(w))
			break;
	}
	if (w->given_up) {
		pthread_mutex_unlock(&w->lock);
		return NULL;
	}
	if (err || st.st_dev == w->under) {
		w->given_up = true;
		pthread_mutex_unlock(&w->lock);
		fprintf(stderr, "iserfuse: the mount on %s did not come up (%s); nothing mounted\n", w->mnt,
			err ? strerror(err) : "the kernel did not complete the FUSE INIT exchange");
		fuse_session_exit(w->se);
		return NULL;
	}
	w->live = true;
	alarm(0);
	signal(SIGALRM, SIG_DFL);
	if (!w->foreground)
		fprintf(stderr, "iserfuse: %s\n", w->started);
	report_ready(w->ready_fd);
	w->ready_fd = -1;
	gw_life_tell('S', -1); /* the supervisor: the mount serves */
	/* Type=notify units: the mount is live (a no-op without $NOTIFY_SOCKET). */
	sd_notifyf(0, "READY=1\nSTATUS=%s", w->started);
	if (!w->foreground) {
		if (chdir("/"))
			log_warn("chdir /: %s", strerror(errno));
		detach_stdio();
		gw_logdest_notice(w->started);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

int gw_live_watch_start(struct gw_live_watch *w)
{
	pthread_t t;
	int rc = thread_start_quiet(&t, live_watch_run, w);
	if (rc == 0)
		pthread_detach(t);
	return rc;
}

bool gw_live_watch_end(struct gw_live_watch *w)
{
	pthread_mutex_lock(&w->lock);
	bool was_live = w->live, told = w->given_up;
	w->given_up = true;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->lock);
	if (!was_live && !told)
		fprintf(stderr, "iserfuse: the kernel ended the FUSE session on %s before it was live; nothing mounted\n",
			w->mnt);
	return !was_live;
}

int gw_daemon_fork(int *ready_fd)
{
	int p[2];
	if (pipe(p)) {
		perror("iserfuse: pipe");
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("iserfuse: fork");
		return -1;
	}
	if (pid > 0) {
		char c;
		close(p[1]);
		if (read(p[0], &c, 1) == 1 && c == 'K')
			_exit(0);
		int st = 0;
		if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) == 0)
			_exit(1);
		_exit(WEXITSTATUS(st));
	}
	close(p[0]);
	setsid();
	*ready_fd = p[1];
	return 0;
}
