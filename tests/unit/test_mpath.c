/* SPDX-License-Identifier: MIT */
/*
 * initiator/mpath/mpath.c without sessions: what a completion means for its path
 * (mp_judge), which path the next command takes (ALUA group, then the
 * selector: mp_pick), the hold queue when no path is usable, and the
 * path slots.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "initiator/util/log.h"
#include "initiator/mpath/mpath_priv.h"

static struct iscsi_cmd_result check(uint8_t key, uint8_t asc, uint8_t ascq)
{
	struct iscsi_cmd_result r = {.status = 0x02, .has_sense = true};
	r.sense.key = key;
	r.sense.asc = asc;
	r.sense.ascq = ascq;
	return r;
}

Test(mpath, judge_transport_errors)
{
	int alua = -1;
	struct iscsi_cmd_result r = {.err = -ETIMEDOUT};
	cr_assert_eq(mp_judge(&r, &alua), MP_PATH_LOST); /* handed back at the loss */
	r.err = -ECONNRESET;
	cr_assert_eq(mp_judge(&r, &alua), MP_PATH_LOST);
	r.err = -EIO; /* re-issued too often, or aborted: the command's own end */
	cr_assert_eq(mp_judge(&r, &alua), MP_DELIVER);
	r.err = -ECONNABORTED; /* closing */
	cr_assert_eq(mp_judge(&r, &alua), MP_DELIVER);
	struct iscsi_cmd_result good = {0};
	cr_assert_eq(mp_judge(&good, &alua), MP_DELIVER);
	cr_assert_eq(alua, -1);
}

Test(mpath, judge_alua_sense)
{
	int alua = -1;
	struct iscsi_cmd_result r = check(SCSI_SK_NOT_READY, 0x04, 0x0b);
	cr_assert_eq(mp_judge(&r, &alua), MP_PATH_STATE);
	cr_assert_eq(alua, 2); /* standby */
	r = check(SCSI_SK_NOT_READY, 0x04, 0x0c);
	cr_assert_eq(mp_judge(&r, &alua), MP_PATH_STATE);
	cr_assert_eq(alua, 3); /* unavailable */
	r = check(SCSI_SK_NOT_READY, 0x04, 0x0a);
	cr_assert_eq(mp_judge(&r, &alua), MP_PATH_STATE);
	cr_assert_eq(alua, 0x0f); /* transitioning */
	r = check(SCSI_SK_UNIT_ATTENTION, 0x2a, 0x06);
	cr_assert_eq(mp_judge(&r, &alua), MP_STATES_CHANGED);
	r = check(SCSI_SK_UNIT_ATTENTION, 0x2a, 0x07);
	cr_assert_eq(mp_judge(&r, &alua), MP_STATES_CHANGED);
	/* about the data or the LU, not the path: the caller's */
	r = check(SCSI_SK_NOT_READY, 0x04, 0x01); /* becoming ready */
	cr_assert_eq(mp_judge(&r, &alua), MP_DELIVER);
	r = check(SCSI_SK_MEDIUM_ERROR, 0x11, 0x00);
	cr_assert_eq(mp_judge(&r, &alua), MP_DELIVER);
	r = check(SCSI_SK_UNIT_ATTENTION, 0x2a, 0x09); /* capacity data has changed */
	cr_assert_eq(mp_judge(&r, &alua), MP_DELIVER);
	r.has_sense = false;
	cr_assert_eq(mp_judge(&r, &alua), MP_DELIVER);
}

/* A table of n ready paths with the given ALUA states, all up and checked. */
static struct mpath *table(size_t n, const int *alua, enum path_sel_policy pol)
{
	struct mpath *m = calloc(1, sizeof(*m));
	cr_assert_not_null(m);
	path_sel_init(&m->sel, pol);
	m->npaths = m->attached = n;
	for (size_t i = 0; i < n; i++) {
		struct mpath_path *p = &m->paths[i];
		p->m = m;
		p->index = i;
		p->state = MP_SLOT_READY;
		p->sess_up = p->checked = true;
		p->alua = alua[i];
	}
	return m;
}

static size_t idx(struct mpath_path *p) { return p ? p->index : 99; }

Test(mpath, pick_optimized_before_non_optimized)
{
	const int st[] = {1, 0, 2, 0}; /* ANO, AO, standby, AO */
	struct mpath *m = table(4, st, PATH_SEL_LEAST_OUTSTANDING);
	m->paths[1].outstanding = 30;
	m->paths[3].outstanding = 10;
	m->paths[0].outstanding = 0; /* idle but non-optimized: not used while an AO path is up */
	cr_assert_eq(idx(mp_pick(m)), 3);
	m->paths[3].outstanding = 40;
	cr_assert_eq(idx(mp_pick(m)), 1);
	m->paths[1].sess_up = m->paths[3].sess_up = false; /* both AO paths down */
	cr_assert_eq(idx(mp_pick(m)), 0);
	m->paths[0].checked = false; /* came back, not checked yet */
	cr_assert_null(mp_pick(m)); /* standby is never used */
	free(m);
}

Test(mpath, pick_round_robin_within_group)
{
	const int st[] = {MP_ALUA_NONE, MP_ALUA_NONE, MP_ALUA_NONE};
	struct mpath *m = table(3, st, PATH_SEL_ROUND_ROBIN);
	size_t seen[3] = {0};
	for (int i = 0; i < 9; i++)
		seen[idx(mp_pick(m))]++;
	cr_assert(seen[0] == 3 && seen[1] == 3 && seen[2] == 3);
	m->paths[1].state = MP_SLOT_REFUSED;
	for (int i = 0; i < 4; i++)
		cr_assert_neq(idx(mp_pick(m)), 1);
	free(m);
}

Test(mpath, pick_transitioning_and_unavailable_not_used)
{
	const int st[] = {0x0f, 3, 0x0e};
	struct mpath *m = table(3, st, PATH_SEL_LEAST_OUTSTANDING);
	cr_assert_null(mp_pick(m));
	m->paths[0].alua = 4; /* LBA dependent: as non-optimized */
	cr_assert_eq(idx(mp_pick(m)), 0);
	free(m);
}

static long long mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static int done_calls, done_err;
static long long done_ms; /* CLOCK_MONOTONIC of the last completion */
static void done(void *arg, const struct iscsi_cmd_result *res)
{
	(void)arg;
	done_calls++;
	done_err = res->err;
	done_ms = mono_ms();
}

Test(mpath, held_without_path_then_failed_at_close)
{
	struct mpath_config cfg = {.queue_depth = 4, .replacement_timeout_ms = 60000};
	struct mpath *m;
	cr_assert_eq(mpath_create(&cfg, &m), 0);
	uint8_t buf[512];
	struct iscsi_cmd c = {.cdb = {0x28}, .cdb_len = 10, .dir = ISCSI_DIR_READ, .buf = buf, .len = 512, .cb = done};
	done_calls = 0;
	cr_assert_eq(mpath_submit(m, &c), 0); /* no path yet: held, not failed */
	struct mpath_stats st;
	struct mpath_path_info pi[1];
	cr_assert_eq(mpath_get_stats(m, &st, pi, 1), 0);
	cr_assert_eq(st.held, 1);
	cr_assert_eq(done_calls, 0);
	cr_assert_eq(mpath_drain(m, 50), -ETIMEDOUT);
	mpath_close(m, 0);
	cr_assert_eq(done_calls, 1); /* exactly once */
	cr_assert_eq(done_err, -ECONNABORTED);
}

Test(mpath, held_fail_at_replacement_timeout_then_refused)
{
	struct mpath_config cfg = {.queue_depth = 4, .replacement_timeout_ms = 100};
	struct mpath *m;
	cr_assert_eq(mpath_create(&cfg, &m), 0);
	/* one attached path that went down: the clock of the replacement timeout runs */
	long long t0 = mono_ms();
	pthread_mutex_lock(&m->lock);
	m->attached = 1;
	mp_note_paths(m);
	m->total_out++; /* as one command in that path's session, still recovering */
	pthread_mutex_unlock(&m->lock);
	uint8_t buf[512];
	struct iscsi_cmd c = {.cdb = {0x28}, .cdb_len = 10, .dir = ISCSI_DIR_READ, .buf = buf, .len = 512, .cb = done};
	done_calls = 0;
	cr_assert_eq(mpath_submit(m, &c), 0);
	for (int i = 0; i < 100 && !done_calls; i++)
		usleep(10000);
	cr_assert_eq(done_calls, 1);
	cr_assert_eq(done_err, -ETIMEDOUT);
	/* at the timeout: not before 90 % of it, not 1 s late */
	cr_assert_geq(done_ms - t0, 90, "failed after %lld ms of the 100 ms replacement_timeout", done_ms - t0);
	cr_assert_lt(done_ms - t0, 1000, "failed after %lld ms", done_ms - t0);
	cr_assert_eq(mpath_submit(m, &c), -ENOTCONN); /* until a path is back */
	cr_assert_eq(mpath_drain(m, 100), -ETIMEDOUT); /* the session's command is still awaited */
	pthread_mutex_lock(&m->lock);
	m->total_out--; /* the session completed it */
	pthread_cond_broadcast(&m->drain_cv);
	pthread_mutex_unlock(&m->lock);
	cr_assert_eq(mpath_drain(m, 100), 0);
	mpath_close(m, 0);
	cr_assert_eq(done_calls, 1);
}

Test(mpath, slots_reused_after_discard)
{
	struct mpath_config cfg = {.queue_depth = 1};
	struct mpath *m;
	cr_assert_eq(mpath_create(&cfg, &m), 0);
	struct mpath_path *a = mpath_path_new(m, "192.0.2.1", 3260);
	cr_assert_not_null(a);
	mpath_path_discard(a);
	for (int i = 0; i < 3 * MPATH_MAX_PATHS; i++) { /* a portal retried forever never fills the table */
		struct mpath_path *p = mpath_path_new(m, "192.0.2.2", 3260);
		cr_assert_eq(p, a);
		mpath_path_discard(p);
	}
	mpath_close(m, 0);
}

/* A portal that keeps failing is tried again after 5 s, doubling to a minute, never more often. */
Test(mpath, portal_retry_backs_off_to_a_minute)
{
	static const int want[] = {0, 5000, 10000, 20000, 40000, 60000, 60000, 60000};
	for (unsigned i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_assert_eq(mpath_portal_retry_ms(i), want[i], "failures %u: %d ms, want %d", i,
			     mpath_portal_retry_ms(i), want[i]);
	cr_assert_eq(mpath_portal_retry_ms(1000), MPATH_PORTAL_RETRY_MAX_MS);
	cr_assert_eq(mpath_portal_retry_ms(~0u), MPATH_PORTAL_RETRY_MAX_MS);
	/* an hour of failures: about one attempt a minute, not 720 at 5 s */
	unsigned tries = 0;
	for (long t = 0; t < 3600000; tries++)
		t += mpath_portal_retry_ms(tries + 1);
	cr_assert(tries <= 65, "%u attempts in an hour", tries);
}

static int lines, line_level;
static char line_text[512];
static void sink(enum log_level level, const char *line)
{
	lines++;
	line_level = level;
	snprintf(line_text, sizeof(line_text), "%s", line);
}

Test(mpath, one_warning_line_per_path_down_and_back)
{
	const int st[] = {MP_ALUA_NONE, MP_ALUA_NONE};
	struct mpath *m = table(2, st, PATH_SEL_ROUND_ROBIN);
	m->multi = true;
	struct mpath_path *p = &m->paths[0];
	snprintf(p->host, sizeof(p->host), "192.0.2.1");
	p->port = 3260;
	log_set_sink(sink);
	/* down, 9 commands handed back and moved one by one, one still out */
	p->sess_up = false;
	p->down_ms = 1000;
	p->moved = 8;
	p->outstanding = 1;
	lines = 0;
	mp_log_transitions(m, p, 1100);
	cr_assert_eq(lines, 0); /* not before its commands moved: the count is final */
	p->outstanding = 0;
	p->moved = 9;
	p->down_cause = "link down";
	mp_log_transitions(m, p, 1200);
	mp_log_transitions(m, p, 1300);
	cr_assert_eq(lines, 1);
	cr_assert_eq(line_level, LOG_LVL_WARN);
	cr_assert_str_eq(line_text, "path 192.0.2.1:3260 down (link down): 9 commands moved to other paths, the longest "
				    "after 0 ms in flight");
	/* back: one line */
	p->sess_up = true;
	mp_log_transitions(m, p, 5200);
	mp_log_transitions(m, p, 5300);
	cr_assert_eq(lines, 2);
	cr_assert_eq(line_level, LOG_LVL_WARN);
	cr_assert_str_eq(line_text, "path 192.0.2.1:3260 up again after 4200 ms");
	/* a path whose commands never come back: the line after MP_DOWN_LINE_WAIT_MS with what moved */
	p->sess_up = false;
	p->down_ms = 10000;
	p->moved = 3;
	p->outstanding = 2;
	p->down_logged = false;
	mp_log_transitions(m, p, 10000 + MP_DOWN_LINE_WAIT_MS);
	cr_assert_eq(lines, 2);
	mp_log_transitions(m, p, 10001 + MP_DOWN_LINE_WAIT_MS);
	cr_assert_eq(lines, 3);
	cr_assert_eq(line_level, LOG_LVL_WARN);
	log_set_sink(NULL);
	free(m);
}
