/* SPDX-License-Identifier: MIT */
/*
 * The supervisor and its workers (see supervisor.h).  One thread: a
 * signalfd (SIGCHLD, the stop signals, SIGUSR1), the current worker's
 * channel (SOCK_SEQPACKET: 'M' with the /dev/fuse descriptor, 'S', 'Q')
 * and the restart socket (abstract, "iserfuse-supervisor/MAJ:MIN" of the
 * mount: `iserfuse --restart` connects, the supervisor answers "ok" once
 * the new worker serves), all in one poll.
 */
#include "supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "initiator/util/clock.h"
#include "initiator/util/log.h"
#include "gateway/setup/startup.h"
#include "gateway/handover/lifestate.h"

#define SOCK_PREFIX "iserfuse-supervisor/"
/* After a new worker serves: the line about the restart waits this long for the resent requests to be read (ms). */
#define REPORT_AFTER_MS 1000

struct sup {
	const struct gw_sup_config *c;
	char mnt[PATH_MAX];
	char exe[PATH_MAX];           /* the binary's path: a restart runs what is there now */
	sigset_t oldmask;
	int sfd;                      /* signalfd */
	int state_fd;
	struct gw_life_state *st;
	int dev_fd;                   /* /dev/fuse, from the first worker's 'M'; -1 before */
	dev_t dev;                    /* the mount's device (0: not found) */
	int lsock;                    /* the restart socket, -1 until mounted */
	int client;                   /* a --restart waiting for the new worker, -1 if none */
	pid_t pid;                    /* the worker, 0 when none */
	int ctl;                      /* our end of its channel */
	unsigned n;                   /* its number */
	bool serving, final, stopping, restarting;
	int64_t served_at_ms;         /* when it said 'S' */
	int64_t down_since_ms;        /* the last worker's death, while the next one does not serve */
	char why[96];                 /* how the last worker ended */
	int64_t report_at_ms;         /* the restart line is due (0: none) */
	uint64_t resent_before;
	int64_t down_ms;
	int64_t deaths[GW_SUP_LOOP_DEATHS];
	unsigned ndeaths;
	bool trying_new;              /* the worker runs the binary on disk after a restart asked for */
	bool self_exe;                /* the next worker runs the supervisor's own binary (the new one failed) */
	int64_t start_at_ms;          /* a worker is due (the target unreachable: back-off), 0 if none */
	int retry_ms;                 /* that back-off */
};

/* ---- the mount ---- */

/* mountinfo's octal escapes (\040) undone in place. */
static void unescape(char *s)
{
	char *o = s;
	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] && s[3]) {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
}

/*
 * The device of the topmost fuse.iserfuse mount on path (absolute), in
 * *dev, and its owner (the user_id= the kernel shows) in *owner when not
 * NULL.  Returns 0 or -ENOENT.
 */
static int mount_find(const char *path, dev_t *dev, uid_t *owner)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	char *line = NULL;
	size_t cap = 0;
	int rc = -ENOENT;
	while (getline(&line, &cap, f) > 0) {
		unsigned maj, min;
		char mp[PATH_MAX + 1], type[64];
		const char *sep = strstr(line, " - ");
		if (!sep || sscanf(line, "%*u %*u %u:%u %*s %4096s", &maj, &min, mp) != 3 ||
		    sscanf(sep + 3, "%63s", type) != 1)
			continue;
		unescape(mp);
		if (!strcmp(mp, path) && !strcmp(type, "fuse.iserfuse")) {
			*dev = makedev(maj, min);
			const char *u = strstr(sep, "user_id=");
			if (owner)
				*owner = u ? (uid_t)strtoul(u + 8, NULL, 10) : 0;
			rc = 0;
		}
	}
	free(line);
	fclose(f);
	return rc;
}

/* An absolute spelling of mnt without looking into the mount itself (its parent resolved). */
static int mount_path(const char *mnt, char *out, size_t cap)
{
	char dir[PATH_MAX], parent[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", mnt);
	size_t n = strlen(dir);
	while (n > 1 && dir[n - 1] == '/')
		dir[--n] = '\0';
	char *slash = strrchr(dir, '/');
	const char *base = slash ? slash + 1 : dir;
	if (slash == dir)
		snprintf(parent, sizeof(parent), "/");
	else if (!realpath(slash ? (*slash = '\0', dir) : ".", parent))
		return -errno;
	if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
		return -EINVAL;
	int w = snprintf(out, cap, "%s%s%s", parent, strcmp(parent, "/") ? "/" : "", base);
	return w < 0 || (size_t)w >= cap ? -ENAMETOOLONG : 0;
}

static void sock_name(dev_t dev, struct sockaddr_un *a, socklen_t *len)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	int n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, SOCK_PREFIX "%u:%u", major(dev), minor(dev));
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/*
 * Fail what the mount has pending and remove it: abort the FUSE
 * connection (/sys/fs/fuse/connections/N/abort, N the mount's device),
 * detach the mount (umount2 MNT_DETACH as root, else fusermount3 -u -z),
 * close our /dev/fuse descriptor (the last: the kernel ends the
 * connection).  Nothing when the connection has already ended.
 */
static void mount_end(struct sup *s)
{
	if (s->dev_fd < 0)
		return;
	struct pollfd p = {.fd = s->dev_fd};
	if (poll(&p, 1, 0) == 0 || !(p.revents & POLLERR)) {
		if (s->dev) {
			char path[96];
			/* the connection's number is the kernel's dev_t: major << 20 | minor */
			snprintf(path, sizeof(path), "/sys/fs/fuse/connections/%u/abort",
				 major(s->dev) << 20 | minor(s->dev));
			int fd = open(path, O_WRONLY | O_CLOEXEC);
			if (fd >= 0) {
				if (write(fd, "1", 1) != 1)
					log_debug("%s: %s", path, strerror(errno));
				close(fd);
			}
		}
		if (geteuid() == 0) {
			if (umount2(s->mnt, MNT_DETACH) && errno != EINVAL && errno != ENOENT)
				log_warn("cannot unmount %s: %s", s->mnt, strerror(errno));
		} else {
			pid_t pid = fork();
			if (pid == 0) {
				sigprocmask(SIG_SETMASK, &s->oldmask, NULL);
				execlp("fusermount3", "fusermount3", "-u", "-q", "-z", "--", s->mnt, (char *)NULL);
				_exit(127);
			}
			if (pid > 0)
				waitpid(pid, NULL, 0);
		}
	}
	close(s->dev_fd);
	s->dev_fd = -1;
}

/* ---- the workers ---- */

static void client_answer(struct sup *s, const char *text)
{
	if (s->client < 0)
		return;
	if (write(s->client, text, strlen(text)) < 0)
		log_debug("--restart: %s", strerror(errno));
	close(s->client);
	s->client = -1;
}

/* Start worker s->n.  Returns 0 or a negative errno (one line logged). */
static int worker_start(struct sup *s)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv)) {
		int err = -errno;
		log_err("cannot start a worker: socketpair: %s", strerror(errno));
		return err;
	}
	int ready = s->n == 0 ? s->c->ready_fd : -1;
	char val[96];
	snprintf(val, sizeof(val), "%u,%d,%d,%d,%d", s->n, sv[1], s->state_fd, s->n ? s->dev_fd : -1, ready);
	char **argv = calloc((size_t)s->c->argc + 3, sizeof(*argv));
	if (!argv) {
		close(sv[0]);
		close(sv[1]);
		return -ENOMEM;
	}
	argv[0] = s->c->argv[0];
	argv[1] = (char *)GW_WORKER_FLAG;
	argv[2] = val;
	for (int i = 1; i < s->c->argc; i++)
		argv[i + 2] = s->c->argv[i];
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0) {
		/* the worker dies with the supervisor: a SIGKILL of it ends the mount, as before */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		/*
		 * A process group of its own: a signal to the supervisor's group
		 * (Ctrl-C on the terminal, timeout(1)) reaches the worker once,
		 * handed on, not twice (a second stop signal ends it at once).
		 * Its messages still go to the terminal in the foreground.
		 */
		setpgid(0, 0);
		signal(SIGTTOU, SIG_IGN);
		fcntl(sv[1], F_SETFD, 0);
		if (s->n && s->dev_fd >= 0)
			fcntl(s->dev_fd, F_SETFD, 0);
		for (char **e = s->c->env; e && *e; e++)
			putenv(*e); /* the credentials the first process took out of its environment */
		signal(SIGPIPE, SIG_DFL);
		sigprocmask(SIG_SETMASK, &s->oldmask, NULL);
		if (!s->self_exe)
			execv(s->exe, argv);
		execv("/proc/self/exe", argv); /* the binary this supervisor runs, which served */
		_exit(127);
	}
	int err = errno;
	free(argv);
	close(sv[1]);
	if (pid < 0) {
		close(sv[0]);
		log_err("cannot start a worker: fork: %s", strerror(err));
		return -err;
	}
	if (ready >= 0) { /* the parent now waits for the worker's word, or for our exit */
		close(ready);
	}
	s->pid = pid;
	s->ctl = sv[0];
	s->serving = false;
	return 0;
}

/* A message on the worker's channel. */
static void worker_says(struct sup *s)
{
	char what = 0;
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct iovec iov = {.iov_base = &what, .iov_len = 1};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
	ssize_t n = recvmsg(s->ctl, &msg, MSG_CMSG_CLOEXEC);
	if (n <= 0) { /* the worker is gone: its SIGCHLD follows */
		close(s->ctl);
		s->ctl = -1;
		return;
	}
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	int fd = -1;
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(c), sizeof(int));
	switch (what) {
	case 'M':
		if (fd >= 0 && s->dev_fd < 0) {
			s->dev_fd = fd;
			fd = -1;
			if (mount_find(s->mnt, &s->dev, NULL) == 0) {
				struct sockaddr_un a;
				socklen_t len;
				sock_name(s->dev, &a, &len);
				s->lsock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
				if (s->lsock >= 0 && (bind(s->lsock, (struct sockaddr *)&a, len) || listen(s->lsock, 4))) {
					log_warn("iserfuse --restart will not find this mount: %s", strerror(errno));
					close(s->lsock);
					s->lsock = -1;
				}
			}
		}
		break;
	case 'S':
		s->serving = true;
		s->retry_ms = 0;
		s->trying_new = false;
		s->served_at_ms = clk_now_ms();
		if (s->n == 0 && !s->c->foreground) {
			/* as the first worker did: the supervisor leaves the terminal too */
			int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
			if (nul >= 0) {
				dup2(nul, 0);
				dup2(nul, 1);
				dup2(nul, 2);
				close(nul);
			}
			if (chdir("/"))
				log_debug("chdir /: %s", strerror(errno));
			gw_logdest_activate();
		}
		if (s->n) {
			s->down_ms = clk_now_ms() - s->down_since_ms;
			s->report_at_ms = clk_now_ms() + REPORT_AFTER_MS;
		}
		client_answer(s, "ok\n");
		break;
	case 'Q':
		s->final = true;
		break;
	case 'R': /* the worker refused the handover: no path to the target is up, a new one could not log in */
		s->restarting = false;
		log_warn("restart refused: no path to the target is up now");
		client_answer(s, "failed: no path to the target is up now: not restarted; try again once it is back\n");
		break;
	}
	if (fd >= 0)
		close(fd);
}

static void describe_end(int status, char *out, size_t cap)
{
	if (WIFSIGNALED(status))
		snprintf(out, cap, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(out, cap, "exit status %d", WEXITSTATUS(status));
}

/* The restart line, once the resent requests had time to be read. */
static void report_restart(struct sup *s)
{
	uint64_t resent = atomic_load(&s->st->resent);
	log_warn("worker %u serves the mount: the last one ended (%s); %lld ms without a worker; %llu requests resent",
		 s->n, s->why, (long long)s->down_ms, (unsigned long long)(resent - s->resent_before));
	s->report_at_ms = 0;
}

/* Start the next worker.  Returns -1 (going on) or 1 (the mount removed, one line). */
static int next_worker(struct sup *s)
{
	s->start_at_ms = 0;
	s->n++;
	atomic_fetch_add(&s->st->restarts, 1);
	if (worker_start(s)) {
		mount_end(s);
		client_answer(s, "failed: cannot start a worker\n");
		return 1;
	}
	return -1;
}

/*
 * The worker ended with status.  Returns -1 to go on (a new worker
 * started, or due at start_at_ms), else the supervisor's exit status.
 */
static int worker_ended(struct sup *s, int status)
{
	s->pid = 0;
	if (s->ctl >= 0) {
		while (s->ctl >= 0 && poll(&(struct pollfd){.fd = s->ctl, .events = POLLIN}, 1, 0) > 0)
			worker_says(s); /* what it said before it ended ('Q', 'M') */
		if (s->ctl >= 0)
			close(s->ctl);
		s->ctl = -1;
	}
	if (s->report_at_ms)
		report_restart(s);
	bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
	int rc = clean ? 0 : WIFEXITED(status) ? WEXITSTATUS(status) : 1;
	describe_end(status, s->why, sizeof(s->why));
	if (s->dev_fd < 0 || s->final) { /* before the mount, or it stopped by itself */
		mount_end(s); /* a worker that died in its stop may have left the mount */
		client_answer(s, "failed: the mount ended\n");
		return rc;
	}
	if (s->stopping) {
		log_warn("worker ended (%s) while stopping: the mount on %s is removed", s->why, s->mnt);
		mount_end(s);
		client_answer(s, "failed: the mount was stopped\n");
		return rc;
	}
	if (atomic_load(&s->st->no_resend)) {
		log_err("worker ended (%s); this kernel cannot resend FUSE requests (Linux 6.9+): the mount on %s is removed",
			s->why, s->mnt);
		mount_end(s);
		client_answer(s, "failed: the mount ended\n");
		return 1;
	}
	if (atomic_load(&s->st->uring)) {
		/* the kernel keeps queueing requests on the dead worker's ring entries: /dev/fuse would never see them */
		log_err("worker ended (%s); its FUSE io_uring rings cannot be taken over: the mount on %s is removed",
			s->why, s->mnt);
		mount_end(s);
		client_answer(s, "failed: the mount ended\n");
		return 1;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == GW_WORKER_EXIT_GIVE_UP) {
		log_err("worker gave up (it said why): the mount on %s is removed", s->mnt);
		mount_end(s);
		client_answer(s, "failed: the mount ended\n");
		return 1;
	}
	int64_t now = clk_now_ms();
	bool new_failed = s->trying_new && !s->serving;
	s->trying_new = false;
	if (new_failed) {
		/* an upgrade that does not serve: the mount goes on with the binary that did */
		log_err("the binary on disk (%s) did not serve (%s): going on with the one the mount runs", s->exe, s->why);
		client_answer(s, "failed: the binary on disk did not serve; the mount goes on with the running one\n");
		s->self_exe = true;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == GW_WORKER_EXIT_NO_TARGET && !new_failed) {
		/* the target unreachable: like a session outage, the requests wait up to replacement_timeout */
		if (!s->down_since_ms || s->serving)
			s->down_since_ms = now;
		if (now - s->down_since_ms >= s->c->replacement_timeout_ms) {
			log_err("no worker could log in for %lld ms (replacement_timeout): the mount on %s is removed",
				(long long)(now - s->down_since_ms), s->mnt);
			mount_end(s);
			client_answer(s, "failed: the target stayed unreachable\n");
			return 1;
		}
		s->retry_ms = s->retry_ms ? s->retry_ms * 2 : 500;
		if (s->retry_ms > 10000)
			s->retry_ms = 10000;
		s->start_at_ms = now + s->retry_ms;
		if (s->start_at_ms > s->down_since_ms + s->c->replacement_timeout_ms)
			s->start_at_ms = s->down_since_ms + s->c->replacement_timeout_ms; /* one last try at the end */
		s->serving = false;
		return -1;
	}
	if (s->restarting && clean) {
		snprintf(s->why, sizeof(s->why), "restart asked for");
	} else if (new_failed) {
		/* not a crash of the running binary: not counted toward a crash loop */
	} else if (!s->serving || now - s->served_at_ms < GW_SUP_STABLE_MS) {
		/* a crash loop: deaths at the start (or soon after), not those of a worker that served a while */
		s->deaths[s->ndeaths++ % GW_SUP_LOOP_DEATHS] = now;
		if (s->ndeaths >= GW_SUP_LOOP_DEATHS &&
		    now - s->deaths[s->ndeaths % GW_SUP_LOOP_DEATHS] < GW_SUP_LOOP_S * 1000) {
			log_err("worker ended %d times within %d s (last: %s): giving up; the mount on %s is removed",
				GW_SUP_LOOP_DEATHS, GW_SUP_LOOP_S, s->why, s->mnt);
			mount_end(s);
			client_answer(s, "failed: the worker keeps ending\n");
			return 1;
		}
	}
	s->trying_new = s->restarting && clean;
	s->restarting = false;
	if (!s->down_since_ms || s->serving)
		s->down_since_ms = now;
	s->resent_before = atomic_load(&s->st->resent);
	return next_worker(s);
}

static void restart_ask(struct sup *s)
{
	if (!s->pid || !s->serving || s->restarting || s->stopping) {
		client_answer(s, "failed: no worker serving now (a restart or a stop under way)\n");
		return;
	}
	if (atomic_load(&s->st->uring)) {
		log_warn("restart refused: the mount serves over FUSE io_uring, whose rings a new worker cannot take over");
		client_answer(s, "failed: the mount serves over FUSE io_uring, whose rings a new worker cannot take "
				 "over: not restarted\n");
		return;
	}
	if (access(s->exe, X_OK)) {
		char line[PATH_MAX + 80];
		snprintf(line, sizeof(line), "failed: %s: %s: not restarted\n", s->exe, strerror(errno));
		log_warn("restart refused: %s: %s", s->exe, strerror(errno));
		client_answer(s, line);
		return;
	}
	s->restarting = true;
	s->self_exe = false; /* the binary on disk, once more */
	kill(s->pid, SIGUSR1);
}

static void accept_client(struct sup *s)
{
	int fd = accept4(s->lsock, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	struct ucred cr;
	socklen_t crlen = sizeof(cr);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) || (cr.uid != 0 && cr.uid != getuid())) {
		/* only root and the mount's owner may replace its worker */
		static const char no[] = "failed: permission denied (root or the mount's owner only)\n";
		if (write(fd, no, sizeof(no) - 1) < 0)
			log_debug("--restart: %s", strerror(errno));
		close(fd);
		return;
	}
	if (s->client >= 0) {
		if (write(fd, "failed: a restart is under way\n", 31) < 0)
			log_debug("--restart: %s", strerror(errno));
		close(fd);
		return;
	}
	s->client = fd;
	restart_ask(s);
}

/* One signal from the signalfd.  Returns -1 to go on, else the exit status. */
static int on_signal(struct sup *s)
{
	struct signalfd_siginfo si;
	if (read(s->sfd, &si, sizeof(si)) != (ssize_t)sizeof(si))
		return -1;
	switch (si.ssi_signo) {
	case SIGCHLD:
		for (;;) {
			int status;
			pid_t pid = waitpid(-1, &status, WNOHANG);
			if (pid <= 0)
				return -1;
			if (pid == s->pid) {
				int rc = worker_ended(s, status);
				if (rc >= 0)
					return rc;
			}
		}
	case SIGUSR1:
		restart_ask(s);
		return -1;
	default: /* a stop signal: the worker stops as it always did (a second one: at once) */
		s->stopping = true;
		if (!s->pid) { /* between workers that could not log in: nothing acknowledged waits */
			log_warn("stopped while no worker could log in: the mount on %s is removed", s->mnt);
			mount_end(s);
			client_answer(s, "failed: the mount was stopped\n");
			return 1;
		}
		/*
		 * A restarted worker that does not serve yet holds nothing
		 * acknowledged and may wait in its login with the stop signals
		 * blocked: it ends at once, the supervisor removes the mount.
		 */
		if (s->pid && s->n && !s->serving)
			kill(s->pid, SIGKILL);
		else if (s->pid)
			kill(s->pid, SIGTERM);
		return -1;
	}
}

char **gw_sup_env_save(void)
{
	extern char **environ;
	static const char prefix[] = "ISERFUSE_CHAP_";
	size_t n = 0;
	for (char **e = environ; e && *e; e++)
		n += !strncmp(*e, prefix, sizeof(prefix) - 1);
	char **out = calloc(n + 1, sizeof(*out));
	size_t k = 0;
	for (char **e = environ; out && e && *e; e++)
		if (!strncmp(*e, prefix, sizeof(prefix) - 1) && !(out[k++] = strdup(*e))) {
			gw_sup_strv_free(out);
			return NULL;
		}
	return out;
}

void gw_sup_strv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++) {
		explicit_bzero(*p, strlen(*p)); /* credentials may be among them */
		free(*p);
	}
	free(v);
}

int gw_supervise(const struct gw_sup_config *c)
{
	struct sup s = {.c = c, .dev_fd = -1, .lsock = -1, .client = -1, .ctl = -1};
	if (mount_path(c->mnt, s.mnt, sizeof(s.mnt))) {
		fprintf(stderr, "iserfuse: mount point %s: %s\n", c->mnt, strerror(errno));
		return 1;
	}
	/*
	 * readlinkat, not readlink: valgrind 3.19 with --sim-hints=fuse-compatible
	 * aborts on readlink("/proc/self/exe"), which the bench's instruction
	 * counts of the worker (--trace-children) need to get past.
	 */
	ssize_t el = readlinkat(AT_FDCWD, "/proc/self/exe", s.exe, sizeof(s.exe) - 1);
	if (el <= 0 || (size_t)el >= sizeof(s.exe) - 1 || strstr(s.exe, " (deleted)"))
		snprintf(s.exe, sizeof(s.exe), "/proc/self/exe");
	else
		s.exe[el] = '\0';
	s.state_fd = gw_life_state_create(&s.st);
	if (s.state_fd < 0) {
		fprintf(stderr, "iserfuse: cannot create the state for the worker: %s\n", strerror(-s.state_fd));
		return 1;
	}
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGUSR1);
	sigprocmask(SIG_BLOCK, &mask, &s.oldmask);
	s.sfd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (s.sfd < 0 || worker_start(&s)) {
		fprintf(stderr, "iserfuse: cannot start the worker: %s\n", strerror(errno));
		return 1;
	}
	int rc = -1;
	while (rc < 0) {
		struct pollfd p[3] = {{.fd = s.sfd, .events = POLLIN},
				      {.fd = s.ctl, .events = POLLIN},
				      {.fd = s.lsock, .events = POLLIN}};
		int timeout = -1;
		int64_t due = s.report_at_ms;
		if (s.start_at_ms && (!due || s.start_at_ms < due))
			due = s.start_at_ms;
		if (due) {
			int64_t left = due - clk_now_ms();
			timeout = left > 0 ? (int)left : 0;
		}
		int n = poll(p, 3, timeout);
		if (n < 0 && errno != EINTR)
			break;
		if (s.report_at_ms && clk_now_ms() >= s.report_at_ms)
			report_restart(&s);
		if (s.start_at_ms && !s.pid && !s.stopping && clk_now_ms() >= s.start_at_ms)
			rc = next_worker(&s);
		if (rc >= 0)
			break;
		if (n <= 0)
			continue;
		if (p[1].revents)
			worker_says(&s);
		if (p[2].revents & POLLIN)
			accept_client(&s);
		if (p[0].revents & POLLIN)
			rc = on_signal(&s);
	}
	if (s.lsock >= 0)
		close(s.lsock);
	if (s.dev_fd >= 0)
		close(s.dev_fd);
	return rc < 0 ? 1 : rc;
}

int gw_restart_request(const char *mnt)
{
	char path[PATH_MAX];
	dev_t dev;
	uid_t owner;
	struct stat sb;
	if (stat(mnt, &sb) && errno != ENOTCONN) {
		fprintf(stderr, "iserfuse: --restart %s: %s\n", mnt, strerror(errno));
		return 1;
	}
	if (mount_path(mnt, path, sizeof(path)) || mount_find(path, &dev, &owner)) {
		fprintf(stderr, "iserfuse: --restart %s: not an iserfuse mount\n", mnt);
		return 1;
	}
	struct sockaddr_un a;
	socklen_t len;
	sock_name(dev, &a, &len);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, len)) {
		fprintf(stderr, "iserfuse: no supervisor answers for %s: %s\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return 1;
	}
	/* the name is in the abstract namespace, which any user may take first: it must be the mount's */
	struct ucred cr;
	socklen_t crlen = sizeof(cr);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) || (cr.uid != 0 && cr.uid != owner)) {
		fprintf(stderr, "iserfuse: --restart %s: the process answering (pid %d, uid %u) is not the mount's "
				"supervisor\n", path, (int)cr.pid, (unsigned)cr.uid);
		close(fd);
		return 1;
	}
	char buf[256];
	size_t got = 0;
	ssize_t n;
	while (got < sizeof(buf) - 1 && (n = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)n;
	close(fd);
	buf[got] = '\0';
	if (!strcmp(buf, "ok\n"))
		return 0;
	buf[strcspn(buf, "\n")] = '\0';
	fprintf(stderr, "iserfuse: restart of %s %s\n", path, got ? buf : "failed: the supervisor ended");
	return 1;
}
