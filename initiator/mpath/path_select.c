/* SPDX-License-Identifier: MIT */
/*
 * Path selection: round-robin and least outstanding over a snapshot of
 * the paths' states (see path_select.h).  Pure.
 */
#include "path_select.h"

#include <errno.h>
#include <string.h>

void path_sel_init(struct path_selector *ps, enum path_sel_policy policy)
{
	ps->policy = policy;
	ps->next = 0;
}

int path_sel_parse(const char *word, enum path_sel_policy *out)
{
	if (!word)
		return -EINVAL;
	if (strcmp(word, "round-robin") == 0)
		*out = PATH_SEL_ROUND_ROBIN;
	else if (strcmp(word, "least-outstanding") == 0)
		*out = PATH_SEL_LEAST_OUTSTANDING;
	else
		return -EINVAL;
	return 0;
}

const char *path_sel_name(enum path_sel_policy policy)
{
	return policy == PATH_SEL_LEAST_OUTSTANDING ? "least-outstanding" : "round-robin";
}

int path_select(struct path_selector *ps, const struct path_sel_path *paths, size_t n)
{
	if (n == 0)
		return -1;
	size_t start = ps->next % n;
	long best = -1;
	for (size_t k = 0; k < n; k++) {
		size_t i = (start + k) % n;
		if (!paths[i].usable)
			continue;
		if (ps->policy == PATH_SEL_ROUND_ROBIN) {
			best = (long)i;
			break;
		}
		/* strictly fewer: the first of equals in scan order wins, so ties rotate with the cursor */
		if (best < 0 || paths[i].outstanding < paths[best].outstanding)
			best = (long)i;
	}
	if (best < 0)
		return -1;
	ps->next = (size_t)best + 1;
	return (int)best;
}
