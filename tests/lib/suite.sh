# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# The common opening of the suite scripts.  Source it after report.sh and
# targets.sh (all three from tests/lib/); then
#   suite_args N USAGE "$@"   exit 2 with "usage: $0 USAGE" on stderr
#                             unless there are exactly N arguments
#   need_exe FILE...          exit 2 with "$0: FILE: not an executable file"
#                             on stderr unless each FILE is one
#   need_root WHY             exit 77 (skip) with "# SKIP: WHY" unless root
#   need_tools TOOL|/PATH...  unless every TOOL is a command and every /PATH
#                             exists (beyond what the script already put in
#                             the array `missing`): fail "tools installed
#                             (missing: ...)", print the counts and exit 1
#   suite_scratch NAME        $work: a fresh iserfuse-NAME.XXXXXX under
#                             $TMPDIR (default /tmp), and the traps (INT
#                             exits 130, TERM 143).  At exit, with set +e:
#                             the script's suite_teardown (if defined: stop
#                             targets, unmount); then, if suite_teardown set
#                             suite_busy (a message), "# MESSAGE: left in
#                             place"; else $work is removed when the script
#                             exits 0 with no failed check; else the files
#                             matching the patterns of suite_drop (relative
#                             to $work: disk images) are removed and
#                             "# $suite_kept kept in $work" printed
#                             (suite_kept defaults to "logs").  The exit
#                             status is the script's.

suite_drop=()
suite_kept=logs
suite_busy=''
missing=()

suite_args() {
	local n=$1 usage=$2
	shift 2
	if [[ $# -ne $n ]]; then
		echo "usage: $0 $usage" >&2
		exit 2
	fi
}

need_exe() {
	local f
	for f; do
		if [[ ! -x $f ]]; then
			echo "$0: $f: not an executable file" >&2
			exit 2
		fi
	done
}

need_root() {
	if [[ $(id -u) -ne 0 ]]; then
		echo "# SKIP: $1"
		exit 77
	fi
}

need_tools() {
	local t
	for t; do
		if [[ $t == /* ]]; then
			[[ -e $t ]] || missing+=("$t")
		else
			command -v "$t" >/dev/null 2>&1 || missing+=("$t")
		fi
	done
	if ((${#missing[@]})); then
		fail "tools installed (missing: ${missing[*]})"
		# shellcheck disable=SC2154 # passed and failed are report.sh's
		echo "$passed passed, $failed failed"
		exit 1
	fi
}

suite_scratch() {
	work=$(mktemp -d "${TMPDIR:-/tmp}/iserfuse-$1.XXXXXX")
	trap _suite_exit EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
}

_suite_exit() {
	local rc=$? p
	set +e
	declare -F suite_teardown >/dev/null && suite_teardown
	if [[ -n $suite_busy ]]; then
		echo "# $suite_busy: left in place"
	elif ((rc == 0 && failed == 0)); then
		rm -rf "$work"
	else
		for p in "${suite_drop[@]}"; do
			# shellcheck disable=SC2086 # p is a glob pattern
			rm -f "$work"/$p
		done
		echo "# $suite_kept kept in $work"
	fi
	exit "$rc"
}
