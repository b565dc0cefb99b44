/* SPDX-License-Identifier: MIT */
/*
 * initiator/util/log.c: the limit on repeated lines.  Lines of one key (a
 * session) and one format beyond LOG_LIMIT_BURST in a window of
 * LOG_LIMIT_WINDOW_MS are counted, and the count is printed once as "N
 * more like this, the last: ..."; other keys, other formats and lines
 * without a key are not affected.  A sink collects the lines, a fake clock
 * moves the windows.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "initiator/util/log.h"

#define MAX_LINES 256

static char lines[MAX_LINES][700];
static enum log_level levels[MAX_LINES];
static unsigned nlines;
static int64_t fake_now;

static void sink(enum log_level level, const char *line)
{
	cr_assert_lt(nlines, MAX_LINES);
	levels[nlines] = level;
	snprintf(lines[nlines++], sizeof(lines[0]), "%s", line);
}

static int64_t clock_fn(void)
{
	return fake_now;
}

static void setup(void)
{
	nlines = 0;
	fake_now = 1000000;
	log_set_sink(sink);
	log_set_clock(clock_fn);
	log_set_level(LOG_LVL_INFO);
	log_set_context(NULL);
}

static const int key_a = 1, key_b = 2;

TestSuite(log, .init = setup);

Test(log, burst_then_one_count_after_the_window)
{
	log_set_thread_key(&key_a);
	for (unsigned i = 0; i < 100; i++)
		log_warn("Task Management Response we did not ask for (ITT 0x%08x): ignored", i);
	cr_assert_eq(nlines, LOG_LIMIT_BURST);
	cr_assert_str_eq(lines[0], "Task Management Response we did not ask for (ITT 0x00000000): ignored");
	cr_assert_str_eq(lines[4], "Task Management Response we did not ask for (ITT 0x00000004): ignored");

	fake_now += LOG_LIMIT_WINDOW_MS - 1; /* still the same window */
	log_warn("Task Management Response we did not ask for (ITT 0x%08x): ignored", 100u);
	cr_assert_eq(nlines, LOG_LIMIT_BURST);

	fake_now += 1; /* a new window: the count, then the line */
	log_warn("Task Management Response we did not ask for (ITT 0x%08x): ignored", 101u);
	cr_assert_eq(nlines, LOG_LIMIT_BURST + 2);
	cr_assert_str_eq(lines[5], "96 more like this, the last: Task Management Response we did not ask for "
				   "(ITT 0x00000064): ignored");
	cr_assert_eq(levels[5], LOG_LVL_WARN);
	cr_assert_str_eq(lines[6], "Task Management Response we did not ask for (ITT 0x00000065): ignored");
}

Test(log, flush_prints_the_count_once_the_window_ended)
{
	log_set_thread_key(&key_a);
	for (unsigned i = 0; i < 20; i++)
		log_err("SCSI Response for unknown ITT 0x%08x", i);
	cr_assert_eq(nlines, LOG_LIMIT_BURST);
	fake_now += 500;
	log_flush_key(&key_a);
	cr_assert_eq(nlines, LOG_LIMIT_BURST, "not before the window ends");
	fake_now += 500;
	log_flush_key(&key_b);
	cr_assert_eq(nlines, LOG_LIMIT_BURST, "another key's flush leaves it");
	log_flush_key(&key_a);
	cr_assert_eq(nlines, LOG_LIMIT_BURST + 1);
	cr_assert_str_eq(lines[5], "15 more like this, the last: SCSI Response for unknown ITT 0x00000013");
	cr_assert_eq(levels[5], LOG_LVL_ERR);
	log_flush_key(&key_a);
	cr_assert_eq(nlines, LOG_LIMIT_BURST + 1, "told once");
	/* the kind starts afresh */
	log_err("SCSI Response for unknown ITT 0x%08x", 99u);
	cr_assert_eq(nlines, LOG_LIMIT_BURST + 2);
	cr_assert_str_eq(lines[6], "SCSI Response for unknown ITT 0x00000063");
}

Test(log, keys_and_kinds_are_counted_apart)
{
	for (unsigned i = 0; i < 10; i++) {
		log_set_thread_key(&key_a);
		log_warn("kind one %u", i);
		log_warn("kind two %u", i);
		log_set_thread_key(&key_b);
		log_warn("kind one %u", i);
		log_set_thread_key(NULL);
		log_warn("kind one %u", i); /* no key: never limited */
	}
	cr_assert_eq(nlines, 3 * LOG_LIMIT_BURST + 10);
	log_forget_key(&key_a); /* at once, whatever the window */
	cr_assert_eq(nlines, 3 * LOG_LIMIT_BURST + 12);
	bool one = false, two = false;
	for (unsigned i = 3 * LOG_LIMIT_BURST + 10; i < nlines; i++) {
		one |= strcmp(lines[i], "5 more like this, the last: kind one 9") == 0;
		two |= strcmp(lines[i], "5 more like this, the last: kind two 9") == 0;
	}
	cr_assert(one && two);
	log_forget_key(&key_a);
	log_flush_key(&key_a);
	cr_assert_eq(nlines, 3 * LOG_LIMIT_BURST + 12, "forgotten: nothing left to tell");
	log_forget_key(&key_b);
	cr_assert_eq(nlines, 3 * LOG_LIMIT_BURST + 13);
	cr_assert_str_eq(lines[nlines - 1], "5 more like this, the last: kind one 9");
}

Test(log, lines_below_the_level_are_not_counted)
{
	log_set_thread_key(&key_a);
	for (unsigned i = 0; i < 10; i++)
		log_debug("NOP-In ping %u: not answered", i);
	log_forget_key(&key_a);
	cr_assert_eq(nlines, 0);
}

Test(log, a_steady_flood_costs_a_bounded_number_of_lines)
{
	/* 10 lines every 10 ms for 10 s: 10,000 lines */
	log_set_thread_key(&key_a);
	unsigned n = 0;
	for (int t = 0; t < 1000; t++) {
		for (int i = 0; i < 10; i++)
			log_warn("target sent asynchronous event %u (vcode %u): ignored", 255u, n++);
		fake_now += 10;
		if (t % 100 == 99)
			log_flush_key(&key_a); /* the session's tick */
	}
	log_forget_key(&key_a);
	/* per window: LOG_LIMIT_BURST lines and one count */
	cr_assert_leq(nlines, 10 * (LOG_LIMIT_BURST + 1));
	unsigned shown = 0, counted = 0;
	for (unsigned i = 0; i < nlines; i++) {
		unsigned k;
		if (sscanf(lines[i], "%u more like this", &k) == 1)
			counted += k;
		else
			shown++;
	}
	cr_assert_eq(shown + counted, 10000, "every line printed or counted");
}
