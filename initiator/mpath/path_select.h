/* SPDX-License-Identifier: MIT */
/*
 * The path selector of a multipath LUN, in the spirit of dm-multipath's
 * round-robin and queue-length selectors: which of N paths the next
 * command goes down.  Pure: no locks, no allocation, no threads; the
 * selector's cursor is the only state and the caller serialises calls on
 * one selector (under the lock that guards the path table it passes).
 */
#ifndef ISERFUSE_PATH_SELECT_H
#define ISERFUSE_PATH_SELECT_H

#include <stdbool.h>
#include <stddef.h>

enum path_sel_policy {
	PATH_SEL_ROUND_ROBIN,       /* "round-robin": each usable path in turn */
	PATH_SEL_LEAST_OUTSTANDING, /* "least-outstanding": fewest commands in flight, ties in turn */
};

/* What the selector sees of one path: a snapshot taken by the caller. */
struct path_sel_path {
	bool usable;          /* logged in, link up, ALUA state allows commands */
	unsigned outstanding; /* commands sent down this path and not yet completed */
};

struct path_selector {
	enum path_sel_policy policy;
	size_t next; /* where the next scan starts (index into the path table) */
};

/* A selector with the given policy, its cursor at path 0. */
void path_sel_init(struct path_selector *ps, enum path_sel_policy policy);

/*
 * The policy named by word ("round-robin" or "least-outstanding") into
 * *out.  0, or -EINVAL for any other word (NULL included).
 */
int path_sel_parse(const char *word, enum path_sel_policy *out);

/* The policy's name as path_sel_parse takes it (static string). */
const char *path_sel_name(enum path_sel_policy policy);

/*
 * The index of the path the next command takes among paths[0..n-1], or -1
 * when none is usable (n == 0 included).  Round-robin: the first usable
 * path at or after the cursor, cyclically.  Least outstanding: the usable
 * path with the smallest outstanding count; among equals, the first at or
 * after the cursor, so that ties rotate.  Either way the cursor moves to
 * the chosen index + 1 (and is left alone on -1).  The table may change
 * size between calls (a cursor past the end wraps).  O(n); the caller
 * holds whatever lock serialises this selector and the table.
 */
int path_select(struct path_selector *ps, const struct path_sel_path *paths, size_t n);

#endif
