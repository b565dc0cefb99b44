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
#                             (suite_kept defaults to "logs").  Before
#                             that, sanitizer_check: a report fails the
#                             script (exit 1).  The exit status is the
#                             script's.
#   sanitizer_logs DIR        ASAN_OPTIONS, UBSAN_OPTIONS and LSAN_OPTIONS (exported,
#                             appended to what is set) send every report of
#                             a sanitizer build, from any process the
#                             script starts (a daemon whose stderr is
#                             /dev/null included), with its stack trace,
#                             to DIR/sanitizer/asan.PID and ubsan.PID (any user may write there;
#                             leaks not ours suppressed, lsan.supp);
#                             suite_scratch calls it with $work
#   sanitizer_check           once the processes started with these
#                             options have exited (at most 20 s): "not ok"
#                             for each report file (named, with its first
#                             lines) and return 1; else "ok - no sanitizer
#                             report from any process"
#   sanitizer_pid_check WHAT PID
#                             "ok"/"not ok - WHAT: no sanitizer report"
#                             for PID's report files (first lines shown)

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
	sanitizer_logs "$work"
	trap _suite_exit EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
}

_suite_exit() {
	local rc=$? p
	set +e
	declare -F suite_teardown >/dev/null && suite_teardown
	sanitizer_check || rc=1
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

_sanitizer_dir=''

sanitizer_logs() {
	# DIR/sanitizer, writable by every user (sticky, not listable) and DIR
	# traversable: a daemon a suite runs as another user (e2e's user mount,
	# cli's setpriv runs) must be able to write its report too
	_sanitizer_dir=$1/sanitizer
	mkdir -p "$_sanitizer_dir"
	chmod 1733 "$_sanitizer_dir"
	chmod o+x "$1"
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}log_path=$_sanitizer_dir/asan:print_stacktrace=1"
	export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}log_path=$_sanitizer_dir/ubsan:print_stacktrace=1"
	# leaks that are not ours, each with its reason (tests/lib/lsan.supp)
	export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lsan.supp:print_suppressions=0"
	# UBSan beside ASan ignores its log_path unless tests/lib/ubsan_log.c is
	# preloaded (meson's test set-up names it in a sanitizer build); ASan
	# then must accept a library before its own
	if [[ -n ${ISERFUSE_UBSAN_LOG_SO:-} && -r $ISERFUSE_UBSAN_LOG_SO ]]; then
		export LD_PRELOAD="$ISERFUSE_UBSAN_LOG_SO${LD_PRELOAD:+ $LD_PRELOAD}"
		ASAN_OPTIONS+=:verify_asan_link_order=0
	fi
}

# _sanitizer_show FILE: its first lines as "#" diagnostics.
_sanitizer_show() {
	sed 's/^/#   /' "$1" | head -n 30
}

# _sanitizer_wait: until no process started with these options runs (a
# report is written as a process exits), at most 20 s.
_sanitizer_wait() {
	local i left
	for ((i = 0; i < 200; i++)); do
		left=$(
			unset ASAN_OPTIONS UBSAN_OPTIONS LD_PRELOAD
			grep -lzF -- "log_path=$_sanitizer_dir/asan:" /proc/[0-9]*/environ 2>/dev/null | grep -v "^/proc/$$/"
		) || return 0
		sleep 0.1
	done
	echo "# still running after 20 s, its reports not checked: ${left//$'\n'/ }"
}

sanitizer_check() {
	local r bad=0
	[[ -n $_sanitizer_dir ]] || return 0
	_sanitizer_wait
	for r in "$_sanitizer_dir"/asan.* "$_sanitizer_dir"/ubsan.*; do
		[[ -e $r ]] || continue
		fail "no sanitizer report: $r"
		_sanitizer_show "$r"
		bad=1
	done
	((bad == 0)) && pass "no sanitizer report from any process"
	((bad == 0))
}

sanitizer_pid_check() {
	local r found=''
	for r in "$_sanitizer_dir/asan.$2" "$_sanitizer_dir/ubsan.$2"; do
		[[ -n $_sanitizer_dir && -e $r ]] || continue
		fail "$1: no sanitizer report ($r)"
		_sanitizer_show "$r"
		found=1
	done
	[[ -n $found ]] || pass "$1: no sanitizer report"
}
