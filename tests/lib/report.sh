# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Test reporting shared by the suite scripts.  Source it; then
#   pass WHAT / fail WHAT        count and print "ok - WHAT" / "not ok - WHAT"
#   skip WHAT REASON             count and print "skip - WHAT: REASON" (a check
#                                that could not run here: neither pass nor fail)
#   check WHAT CMD...            pass when CMD succeeds, else fail
#   check_eq WHAT GOT WANT       pass when GOT == WANT, else fail and show both
#   note FILE                    show FILE's first lines as "#" diagnostics
#   summary                      print "N passed, M failed" (", K skipped" when
#                                some were); returns 1 if any failed

passed=0
failed=0
skipped=0

pass() {
	passed=$((passed + 1))
	printf 'ok - %s\n' "$*"
}

fail() {
	failed=$((failed + 1))
	printf 'not ok - %s\n' "$*"
}

skip() {
	skipped=$((skipped + 1))
	printf 'skip - %s: %s\n' "$1" "$2"
}

check() {
	local what=$1
	shift
	if "$@"; then pass "$what"; else fail "$what"; fi
}

check_eq() {
	if [[ $2 == "$3" ]]; then
		pass "$1"
	else
		fail "$1"
		printf '#   got "%s", want "%s"\n' "$2" "$3"
	fi
}

note() {
	[[ -s $1 ]] && sed 's/^/#   /' "$1" | head -n 40
	return 0
}

summary() {
	if ((skipped)); then
		echo "$passed passed, $failed failed, $skipped skipped"
	else
		echo "$passed passed, $failed failed"
	fi
	((failed == 0))
}
