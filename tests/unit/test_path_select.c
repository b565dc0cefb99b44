/* SPDX-License-Identifier: MIT */
/* initiator/mpath/path_select.c: round-robin and least outstanding over path snapshots. */
#include <criterion/criterion.h>
#include <errno.h>

#include "initiator/mpath/path_select.h"

Test(path_select, parse_and_names)
{
	enum path_sel_policy p = PATH_SEL_LEAST_OUTSTANDING;
	cr_assert_eq(path_sel_parse("round-robin", &p), 0);
	cr_assert_eq(p, PATH_SEL_ROUND_ROBIN);
	cr_assert_eq(path_sel_parse("least-outstanding", &p), 0);
	cr_assert_eq(p, PATH_SEL_LEAST_OUTSTANDING);
	cr_assert_eq(path_sel_parse("service-time", &p), -EINVAL);
	cr_assert_eq(path_sel_parse(NULL, &p), -EINVAL);
	cr_assert_eq(p, PATH_SEL_LEAST_OUTSTANDING);
	cr_assert_str_eq(path_sel_name(PATH_SEL_ROUND_ROBIN), "round-robin");
	cr_assert_str_eq(path_sel_name(PATH_SEL_LEAST_OUTSTANDING), "least-outstanding");
}

Test(path_select, rr_cycles_over_usable_paths_only)
{
	struct path_sel_path p[4] = {{true, 0}, {false, 0}, {true, 0}, {true, 0}};
	struct path_selector ps;
	path_sel_init(&ps, PATH_SEL_ROUND_ROBIN);
	int want[] = {0, 2, 3, 0, 2, 3, 0};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_assert_eq(path_select(&ps, p, 4), want[i], "pick %zu", i);
	/* the last pick was 0; path 1 comes back and path 0 goes: 1, 2, 3, then 1 again */
	p[1].usable = true;
	p[0].usable = false;
	cr_assert_eq(path_select(&ps, p, 4), 1);
	cr_assert_eq(path_select(&ps, p, 4), 2);
	cr_assert_eq(path_select(&ps, p, 4), 3);
	cr_assert_eq(path_select(&ps, p, 4), 1);
}

Test(path_select, rr_ignores_outstanding)
{
	struct path_sel_path p[2] = {{true, 100}, {true, 0}};
	struct path_selector ps;
	path_sel_init(&ps, PATH_SEL_ROUND_ROBIN);
	cr_assert_eq(path_select(&ps, p, 2), 0);
	cr_assert_eq(path_select(&ps, p, 2), 1);
	cr_assert_eq(path_select(&ps, p, 2), 0);
}

Test(path_select, lq_picks_the_least_loaded)
{
	struct path_sel_path p[4] = {{true, 5}, {true, 2}, {false, 0}, {true, 7}};
	struct path_selector ps;
	path_sel_init(&ps, PATH_SEL_LEAST_OUTSTANDING);
	/* path 2 has 0 but is not usable */
	cr_assert_eq(path_select(&ps, p, 4), 1);
	cr_assert_eq(path_select(&ps, p, 4), 1);
	p[1].outstanding = 6;
	cr_assert_eq(path_select(&ps, p, 4), 0);
	p[3].outstanding = 1;
	cr_assert_eq(path_select(&ps, p, 4), 3);
}

Test(path_select, lq_ties_rotate)
{
	struct path_sel_path p[3] = {{true, 3}, {true, 3}, {true, 3}};
	struct path_selector ps;
	path_sel_init(&ps, PATH_SEL_LEAST_OUTSTANDING);
	int want[] = {0, 1, 2, 0, 1, 2};
	for (size_t i = 0; i < 6; i++)
		cr_assert_eq(path_select(&ps, p, 3), want[i], "pick %zu", i);
	/* a tie between 0 and 2 only (1 is busier): they alternate */
	p[1].outstanding = 9;
	cr_assert_eq(path_select(&ps, p, 3), 0);
	cr_assert_eq(path_select(&ps, p, 3), 2);
	cr_assert_eq(path_select(&ps, p, 3), 0);
	cr_assert_eq(path_select(&ps, p, 3), 2);
}

Test(path_select, no_usable_path_is_minus_one)
{
	struct path_sel_path p[3] = {{false, 0}, {false, 0}, {false, 0}};
	struct path_selector rr, lq;
	path_sel_init(&rr, PATH_SEL_ROUND_ROBIN);
	path_sel_init(&lq, PATH_SEL_LEAST_OUTSTANDING);
	cr_assert_eq(path_select(&rr, p, 3), -1);
	cr_assert_eq(path_select(&lq, p, 3), -1);
	cr_assert_eq(path_select(&rr, p, 0), -1);
	cr_assert_eq(path_select(&lq, NULL, 0), -1);
	cr_assert_eq(rr.next, 0);
}

Test(path_select, table_shrinks_under_the_cursor)
{
	struct path_sel_path p[4] = {{true, 0}, {true, 0}, {true, 0}, {true, 0}};
	struct path_selector ps;
	path_sel_init(&ps, PATH_SEL_ROUND_ROBIN);
	cr_assert_eq(path_select(&ps, p, 4), 0);
	cr_assert_eq(path_select(&ps, p, 4), 1);
	cr_assert_eq(path_select(&ps, p, 4), 2);
	/* cursor 3, table now 2 long: wraps to 1 */
	cr_assert_eq(path_select(&ps, p, 2), 1);
	cr_assert_eq(path_select(&ps, p, 2), 0);
}
