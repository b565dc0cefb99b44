#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The "malicious" suite: one misbehaving target, one scenario.
#
#   run.sh ISERFUSE_BINARY SCENARIO
#   run.sh ISERFUSE_BINARY all        every scenario in turn
#
# Starts fake_target.py (a scriptable iSCSI target, one 1 MiB LUN) on a
# free loopback port with --misbehave SCENARIO, mounts its LUN 1 with
# `iserfuse -f` in the background (stderr, sanitizer reports included, go
# to a log), then does the I/O that makes the target misbehave and checks:
#
#   - login scenarios: the mount fails with exit 1 and one "iserfuse: ..."
#     line on stderr (or, for a target that is odd but legal, mounts and
#     reads correctly);
#   - the others: a protocol violation drops the connection, the session
#     is reinstated and the I/O re-issued, and succeeds with the right
#     bytes (the target misbehaves once); a target that lied about a
#     status fails that I/O with EIO, harmless oddities succeed; the
#     daemon is still alive; `ls` still answers; a further read succeeds;
#     fusermount3 -u ends the daemon within 10 s, exit status 0;
#   - SCENARIO+always: the target misbehaves on every connection: the I/O
#     is re-issued ISCSI_REISSUE_MAX (5) times and then fails with EIO, and
#     a further read fails too (the target keeps misbehaving);
#   - the daemon's stderr has no AddressSanitizer, LeakSanitizer or UBSan
#     "runtime error" line.
#
# Prints "ok - ..." / "not ok - ..." per check and "N passed, M failed"
# last; exits 1 if anything failed (also without /dev/fuse, fusermount3 or
# another tool it needs), 2 on bad usage.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"

suite_args 2 "ISERFUSE_BINARY SCENARIO|all" "$@"
iserfuse=$1
scenario=$2
need_exe "$iserfuse"
iserfuse=$(cd "$(dirname "$iserfuse")" && pwd)/$(basename "$iserfuse")
target_py=$here/fake_target.py

if [[ $scenario == all ]]; then
	status=0
	for s in $(python3 "$target_py" --list); do
		echo "# scenario $s"
		bash "${BASH_SOURCE[0]}" "$iserfuse" "$s" || status=1
	done
	exit "$status"
fi

# What each scenario should do, as "IO AFTER":
#   IO     no_mount:   the mount fails (exit 1, one line)
#          fail:       the triggering I/O fails with EIO
#          ok:         the triggering I/O succeeds with the right data
#   AFTER  recovered:  the connection was dropped and the session reinstated
#                      (one "reinstated" line in the log), a further read succeeds
#          alive:      the session survives, a further read succeeds
declare -A expect=(
	# protocol violations: the connection is dropped
	[data_in_wrong_itt]="ok recovered"
	[data_in_beyond_buffer]="ok recovered"
	[data_in_offset_gap]="ok recovered"
	[data_in_datasn_wrong]="ok recovered"
	[dsl_over_limit]="ok recovered"
	[dsl_max]="ok recovered"
	[rsp_sense_length_over_segment]="ok recovered"
	[rsp_unknown_itt]="ok recovered"
	[r2t_for_read]="ok recovered"
	[reject_garbage]="ok recovered"
	[pdu_cut_then_close]="ok recovered"
	[unknown_opcode]="ok recovered"
	[status_without_final]="ok recovered"
	[r2t_beyond_length]="ok recovered"
	[r2t_zero_length]="ok recovered"
	[r2t_flood]="ok recovered"
	[data_in_for_write]="ok recovered"
	# silence: after -o cmd_timeout ABORT TASK (answered here: the command is
	# re-issued on the same connection); unanswered task management goes on
	# to LOGICAL UNIT RESET and then drops the connection; a CmdSN window
	# that never reopens drops it at once
	[no_response]="ok alive"
	[tmf_ignored]="ok recovered"
	[window_closed]="ok recovered"
	[window_closed_forever]="ok failing" # a window closed at every login: 5 re-issues, then EIO
	# a status that contradicts the data: that command fails
	[data_in_short_good]="fail alive"
	[rsp_good_short]="fail alive"
	[write_rsp_early_good]="fail alive"
	[rsp_impossible_residual]="fail alive"
	[rsp_huge_sense]="fail alive"
	# odd but harmless
	[statsn_out_of_window]="ok alive"
	[maxcmdsn_below_expcmdsn]="ok alive"
	[nop_in_flood]="ok alive"
	[async_bad_fields]="ok alive"
	[ahs_overflow]="ok alive"
	[login_unknown_key]="ok alive"
	[text_rsp_unsolicited]="ok alive"
	[data_in_trickle]="ok alive"
	[r2t_small_bursts]="ok alive"
	[reject_command]="fail alive"
	# target events: followed
	[login_redirect_temporary]="ok recovered"
	[login_redirect_permanent]="ok recovered"
	[login_busy]="ok alive"
	[login_out_of_resources]="ok alive"
	[async_logout]="ok recovered"
	[async_drop_connection]="ok recovered"
	[async_renegotiate]="ok recovered"
	# login and LUN probe: nothing is mounted
	[login_duplicate_key]="no_mount -"
	[login_bad_value]="no_mount -"
	[login_huge_text]="no_mount -"
	[login_wrong_itt]="no_mount -"
	[login_no_tsih]="no_mount -"
	[login_silent]="no_mount -"
	[login_empty_continue]="no_mount -"
	[capacity_overflow]="no_mount -"
	[capacity_block_size_zero]="no_mount -"
	[capacity_block_size_huge]="no_mount -"
	# a flood of bogus PDUs, each ignored: the log stays bounded
	[log_flood]="ok alive"
)
# Hostile loops and waits, each checked against its bound (docs/design.md,
# "Loops and waits a target drives"), by the block "bounded" below:
#   outage BACK: the trigger drops the connection and the later logins never
#       finish, or finish and then no command is answered (the identity
#       check's: fake_target.py RECOVERY_LOGIN): I/O fails with EIO within
#       replacement_timeout (3 s) + 3 s, new I/O fails at once; with BACK=back
#       the target behaves again after 8 s and a read then succeeds;
#       otherwise fusermount3 -u ends the daemon within 3 s while recovery
#       is still trying;
#   stop: as outage, with replacement_timeout 60 s and a rescan every
#       second: SIGTERM while the read and a rescan wait for the recovery
#       ends the daemon within 8 s (a 5 s grace), the read failing, nothing
#       left mounted;
#   slowcheck: after the drop every command is answered 1 s late, so the
#       identity check after the reconnect outlasts cmd_timeout (4 s) with
#       the read parked all along: the read still succeeds (replacement
#       timeout 30 s), no command counts as unsent meanwhile;
#   relogin: the Logout Response's Time2Wait 65535 is capped: a read after
#       the logout succeeds before replacement_timeout (6 s) fails it;
#   storm: with cmd_timeout 2 s, a write the target keeps asking R2Ts for
#       is aborted and re-issued 5 times, then fails with EIO within
#       6 x (cmd_timeout + 2 s); the session stays up and a read succeeds;
#   luns: the mount takes at most 2 REPORT LUNS (4 with a rescan), and reads work;
#   seek: one lseek(SEEK_DATA) costs at most 64 GET LBA STATUS round trips
#       and reports data where the walk stopped;
#   silent: a control command of a background thread goes unanswered on a
#       live connection (the second session's identity probe, with -o
#       sessions=2; path 0's REPORT TARGET PORT GROUPS; a rescan's REPORT
#       LUNS, with a rescan every second): SIGTERM, and on a second mount
#       fusermount3 -u, each end the daemon within 6 s (the 5 s stop grace
#       + 1 s), exit 0, nothing left mounted;
#   frozen: the target freezes when the first READ arrives (nothing answered
#       any more, NOP-Outs and logins included, connections kept open), with
#       -o noop_interval=0 and with the default options: SIGTERM while that
#       O_DIRECT read waits ends the daemon within 6 s (the 5 s stop grace +
#       1 s) and the read fails with EIO; fusermount3 -u of a mount no longer
#       busy (the buffered reader killed, its read still out at the target)
#       ends it within 6 s too; exit 0, nothing left mounted;
#   churn: with replacement_timeout 4 s, every connection the READ is
#       re-issued on announces a drop (or asks for a logout within 2 s):
#       the READ fails with EIO within replacement_timeout + 2 s of its
#       first submission (+ 3 s when the first loss waits for the logout the
#       target asks for within 2 s), however many reinstatements come between.
declare -A bounded=(
	[recovery_login_empty_continue]="outage back"
	[recovery_login_empty_continue_nop]="outage -"
	[recovery_login_slow_continue]="outage -"
	[recovery_login_silent]="outage -"
	[recovery_login_empty_continue_stop]="stop -"
	[recovery_probe_silent]="outage -"
	[recovery_probe_silent_stop]="stop -"
	[recovery_probe_slow]="slowcheck -"
	[logout_time2wait_max]="relogin -"
	[lba_status_one_block]="seek -"
	[report_luns_growth]="luns -"
	[r2t_repeat_storm]="storm -"
	[silent_probe_second_path]="silent -"
	[silent_rtpg]="silent -"
	[silent_rescan_report_luns]="silent -"
	[reconnect_churn_drop]="churn -"
	[reconnect_churn_logout]="churn -"
	[frozen_after_read]="frozen -"
)
always=''
if [[ $scenario == *+always ]]; then
	scenario=${scenario%+always}
	always=--always
fi
if [[ -z ${expect[$scenario]:-} && -z ${bounded[$scenario]:-} ]]; then
	echo "$0: unknown scenario $scenario" >&2
	exit 2
fi
read -r want_io want_after <<<"${expect[$scenario]:-bounded -}"
if [[ -n $always ]]; then
	want_io=fail
	want_after=failing
fi
# a renegotiation asked for on every login: the second request comes at once and is ignored
if [[ -n $always && $scenario == async_renegotiate ]]; then
	want_io=ok
	want_after=recovered
fi
trigger=$(python3 "$target_py" --trigger "$scenario") || {
	echo "$0: fake_target.py does not know $scenario" >&2
	exit 2
}


missing=()
for tool in python3 fusermount3 dd cmp timeout; do
	command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
[[ -c /dev/fuse ]] || missing+=(/dev/fuse)
if ((${#missing[@]})); then
	fail "tools installed (missing: ${missing[*]})"
	echo "$passed passed, $failed failed"
	exit 1
fi

iqn=iqn.2026-11.org.example:malicious
initiator=iqn.2026-11.org.example:malicious-test
work=$(mktemp -d "${TMPDIR:-/tmp}/iserfuse-mal.XXXXXX")
sanitizer_logs "$work"
mnt=$work/mnt
mkdir -p "$mnt"
target_pid=''
daemon_pid=''

is_mounted() {
	grep -qF " $1 " /proc/mounts
}

cleanup() {
	local rc=$?
	set +e
	if is_mounted "$mnt"; then
		fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null || umount -l "$mnt"
	fi
	[[ -n $daemon_pid ]] && _targets_kill "$daemon_pid" 5
	[[ -n $target_pid ]] && _targets_kill "$target_pid" 5
	sanitizer_check || rc=1
	if is_mounted "$mnt"; then
		echo "# $mnt is still mounted: left in place"
	elif ((rc == 0 && failed == 0)); then
		rm -rf "$work"
	else
		echo "# logs kept in $work"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

finish() {
	echo "$passed passed, $failed failed"
	((failed == 0)) || exit 1
	exit 0
}

# mount_daemon URL OPTIONS...: the daemon in the foreground (daemon_pid), its
# log in $work/daemon.log; "mounted" once lun1 is there, else finish.
mount_daemon() {
	local murl=$1 i up=0
	shift
	"$iserfuse" -f -o "initiator_name=$initiator" -o login_timeout=10 "$@" "$murl" "$mnt" \
		>"$work/daemon.out" 2>"$work/daemon.log" </dev/null &
	daemon_pid=$!
	for ((i = 0; i < 300; i++)); do
		if is_mounted "$mnt" && [[ -e $mnt/lun1 ]]; then
			up=1
			break
		fi
		_targets_alive "$daemon_pid" || break
		sleep 0.1
	done
	if ((up)); then
		pass "mounted"
	else
		fail "mounted"
		note "$work/daemon.log"
		note "$work/target.log"
		finish
	fi
}

# sanitizer_clean LOG: no sanitizer report in LOG.
sanitizer_clean() {
	if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error|ThreadSanitizer' "$1"; then
		fail "no sanitizer report in the daemon's log"
		grep -E -A12 'AddressSanitizer|LeakSanitizer|runtime error' "$1" | sed 's/^/#   /' | head -n 40
	else
		pass "no sanitizer report in the daemon's log"
	fi
}

# ---------------------------------------------------------------- target

# start_target: fake_target.py on a free port (target_pid, port, url), its log in $work/target.log.
target_more=()
if [[ $scenario == silent_rtpg ]]; then
	echo "1 ao" >"$work/alua.states"
	target_more=(--alua "$work/alua.states")
fi
start_target() {
	port=''
	for _ in 1 2 3 4 5; do
		port=$(free_port)
		python3 "$target_py" --port "$port" --misbehave "$scenario" $always "${target_more[@]}" \
			>"$work/target.log" 2>&1 </dev/null &
		target_pid=$!
		if _targets_wait_listen "$target_pid" "$port" 10; then
			break
		fi
		_targets_kill "$target_pid" 2
		target_pid=''
	done
	if [[ -z $target_pid ]]; then
		fail "fake target started"
		note "$work/target.log"
		finish
	fi
	url="iscsi://127.0.0.1:$port/$iqn/1"
}
start_target

# expected_bytes OFFSET LENGTH FILE: the disk's initial content there.
expected_bytes() {
	python3 "$target_py" --dump "$1" "$2" >"$3"
}

# ---------------------------------------------------------------- login

# no_mount scenarios whose one line must say this (fixed string)
declare -A no_mount_says=(
	[capacity_block_size_zero]="iserfuse: lun1: READ CAPACITY reports a logical block size of 0 bytes"
	[capacity_block_size_huge]="iserfuse: lun1: READ CAPACITY reports a logical block size of 1048576 bytes"
)
if [[ $want_io == no_mount ]]; then
	rc=0
	t0=$SECONDS
	timeout -k 5 60 "$iserfuse" -o "initiator_name=$initiator" -o login_timeout=10 -o cmd_timeout=4 "$url" "$mnt" \
		>"$work/daemon.out" 2>"$work/daemon.log" </dev/null || rc=$?
	took=$((SECONDS - t0))
	if ((rc == 1)); then
		pass "mount fails with exit 1"
	else
		fail "mount fails with exit 1 (exit $rc)"
	fi
	# the whole login within login_timeout, however the target stretches it
	if ((took <= 15)); then
		pass "within login_timeout + 5 s (${took} s)"
	else
		fail "within login_timeout + 5 s (${took} s)"
	fi
	lines=$(wc -l <"$work/daemon.log")
	if ((lines == 1)) && grep -q '^iserfuse: ' "$work/daemon.log"; then
		pass "one line on stderr: $(cat "$work/daemon.log")"
	else
		fail "one line on stderr ($lines lines)"
		note "$work/daemon.log"
	fi
	if [[ -n ${no_mount_says[$scenario]:-} ]]; then
		check_eq "the line says what was wrong" "$(head -n 1 "$work/daemon.log")" "${no_mount_says[$scenario]}"
	fi
	if is_mounted "$mnt"; then
		fail "nothing mounted"
	else
		pass "nothing mounted"
	fi
	sanitizer_clean "$work/daemon.log"
	finish
fi

# ---------------------------------------------------------------- bounded

# elapsed_since T0: seconds (with decimals) since $EPOCHREALTIME was T0.
elapsed_since() {
	awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'
}

# within LIMIT SECONDS: SECONDS (decimal) <= LIMIT.
within() {
	awk -v l="$1" -v s="$2" 'BEGIN { exit !(s <= l) }'
}

# timed_exit LIMIT WHAT: wait up to 20 s for the daemon, stopped at $t0, to
# end; passes WHAT if that took at most LIMIT seconds.  Returns 0 (its exit
# status in drc, daemon_pid cleared) or 1 (still running).
timed_exit() {
	if ! _targets_wait_gone "$daemon_pid" 20; then
		fail "$2 (still running after 20 s)"
		return 1
	fi
	local took
	took=$(elapsed_since "$t0")
	drc=0
	wait "$daemon_pid" 2>/dev/null || drc=$?
	daemon_pid=''
	if within "$1" "$took"; then
		pass "$2 (${took} s)"
	else
		fail "$2 (${took} s)"
	fi
}

# stop_within_grace term|umount LABEL: stop the daemon by SIGTERM or by
# fusermount3 -u and check that it exits 0 within 6 s (the 5 s stop grace +
# 1 s); a daemon still running then is killed.
stop_within_grace() {
	local how=$1 label=$2
	t0=$EPOCHREALTIME
	if [[ $how == term ]]; then
		kill -TERM "$daemon_pid"
	else
		timeout -k 2 10 fusermount3 -u "$mnt" || fail "$label: fusermount3 -u"
	fi
	if timed_exit 6 "$label: the daemon ends within the stop grace + 1 s"; then
		check_eq "$label: the daemon exits 0 (nothing was written)" "$drc" 0
	else
		_targets_kill "$daemon_pid" 5
		daemon_pid=''
	fi
}

# silent_run term|umount: mount with default timeouts, set the silent command
# off, wait until the target has it, stop the daemon by SIGTERM or by
# fusermount3 -u, and check that it exits 0 within 6 s with nothing left
# mounted.  The second run gets a fresh target; the first one's daemon log
# is kept as daemon.log.term.
silent_run() {
	local how=$1 opts=() i
	case $scenario in
	silent_probe_second_path) opts=(-o sessions=2) ;;
	silent_rescan_report_luns) opts=(-o rescan_interval=1) ;;
	esac
	if [[ $how == umount ]]; then
		mv "$work/daemon.log" "$work/daemon.log.term"
		_targets_kill "$target_pid" 5
		mv "$work/target.log" "$work/target.log.term"
		start_target
	fi
	local murl=$url
	[[ $scenario == silent_rescan_report_luns ]] && murl=${url%/1} # every LUN: the rescans send REPORT LUNS
	mount_daemon "$murl" "${opts[@]}"
	if [[ $scenario == silent_rescan_report_luns ]]; then
		timeout -k 2 20 dd if="$mnt/lun1" of=/dev/null bs=4096 count=1 iflag=direct status=none ||
			fail "a read to set the target off"
	fi
	for ((i = 0; i < 300; i++)); do
		grep -q 'not answering opcode' "$work/target.log" && break
		sleep 0.1
	done
	check "$how: the target leaves a control command unanswered" grep -q 'not answering opcode' "$work/target.log"
	sleep 1 # the command is waited on now
	stop_within_grace "$how" "$how"
	if is_mounted "$mnt"; then
		fail "$how: nothing left mounted"
		fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null || true
	else
		pass "$how: nothing left mounted"
	fi
}

# frozen_run term|umount LABEL OPTIONS...: on a fresh target (the first run's
# logs are kept as *.LABEL), mount with OPTIONS, start a 64 KiB read that
# freezes the target, then stop the daemon by SIGTERM (the O_DIRECT read
# still waiting) or by fusermount3 -u (the buffered reader killed first, so
# that the mount is not busy), and check that it exits 0 within 6 s, the
# read failing with EIO, with nothing left mounted.
prev_label=""
frozen_run() {
	local how=$1 label=$2 i rc dd_pid
	shift 2
	if [[ -e $work/daemon.log ]]; then
		_targets_kill "$target_pid" 5
		mv "$work/target.log" "$work/target.log.$prev_label"
		mv "$work/daemon.log" "$work/daemon.log.$prev_label"
		start_target
	fi
	prev_label=$label
	mount_daemon "$url" "$@"
	if [[ $how == term ]]; then
		timeout -k 2 60 dd if="$mnt/lun1" of="$work/got" bs=65536 count=1 iflag=direct status=none \
			2>"$work/dd.log" &
	else
		dd if="$mnt/lun1" of="$work/got" bs=65536 count=1 status=none 2>"$work/dd.log" &
		disown # killed below: no job message
	fi
	dd_pid=$!
	for ((i = 0; i < 100; i++)); do
		grep -q 'frozen from now on' "$work/target.log" && break
		sleep 0.1
	done
	check "$label: the target froze at the read" grep -q 'frozen from now on' "$work/target.log"
	sleep 3 # the read is waited on now; with the defaults a NOP-Out ping is out too
	if [[ $how == umount ]]; then
		kill -KILL "$dd_pid" 2>/dev/null
		for ((i = 0; i < 30; i++)); do
			kill -0 "$dd_pid" 2>/dev/null || break
			sleep 0.1
		done
		check "$label: the buffered reader ends on SIGKILL (its read still out)" \
			bash -c "! kill -0 $dd_pid 2>/dev/null"
	fi
	stop_within_grace "$how" "$label"
	rc=0
	wait "$dd_pid" 2>/dev/null || rc=$?
	if [[ $how == term ]]; then
		if ((rc != 0 && rc != 124 && rc != 137)) && grep -q 'Input/output error' "$work/dd.log"; then
			pass "$label: the read fails with EIO"
		else
			fail "$label: the read fails with EIO (exit $rc: $(head -n 1 "$work/dd.log"))"
		fi
		check "$label: one line says the stop grace ended with the read unanswered" \
			grep -q 'the stop grace ended with 1 commands unanswered' "$work/daemon.log"
	fi
	if is_mounted "$mnt"; then
		fail "$label: nothing left mounted"
		fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null || true
	else
		pass "$label: nothing left mounted"
	fi
	sanitizer_clean "$work/daemon.log"
}

if [[ $want_io == bounded ]]; then
	read -r kind back <<<"${bounded[$scenario]}"
	if [[ $kind == frozen ]]; then
		frozen_run term "SIGTERM, noop_interval=0" -o noop_interval=0
		frozen_run term "SIGTERM, default options"
		frozen_run umount "fusermount3 -u, noop_interval=0" -o noop_interval=0
		((failed)) && note "$work/daemon.log"
		finish
	fi
	rt=3
	[[ $kind == relogin ]] && rt=6
	[[ $kind == stop ]] && rt=60
	[[ $kind == slowcheck ]] && rt=30
	ct=4
	[[ $kind == storm ]] && ct=2
	noop=5
	[[ $trigger == nop ]] && noop=1
	burl=$url
	[[ $kind == luns ]] && burl=${url%/1} # every LUN: REPORT LUNS at the mount and in rescans
	[[ $kind == churn ]] && rt=4
	more=()
	[[ $kind == stop ]] && more=(-o rescan_interval=1) # a rescan waits on the recovery too
	if [[ $kind == silent ]]; then
		silent_run term
		silent_run umount
		sanitizer_clean "$work/daemon.log.term"
		sanitizer_clean "$work/daemon.log"
		((failed)) && note "$work/daemon.log.term"
		((failed)) && note "$work/daemon.log"
		finish
	fi
	mount_daemon "$burl" -o cmd_timeout=$ct -o noop_interval=$noop -o replacement_timeout=$rt "${more[@]}"
	case $kind in
	outage)
		if [[ $trigger == nop ]]; then
			for ((i = 0; i < 100; i++)); do
				grep -q 'lost:' "$work/daemon.log" && break
				sleep 0.1
			done
			check "the first NOP-Out ping dropped the connection" grep -q 'lost:' "$work/daemon.log"
		fi
		rc=0
		t0=$EPOCHREALTIME
		timeout -k 2 20 dd if="$mnt/lun1" of="$work/got" bs=65536 count=1 iflag=direct status=none \
			2>"$work/dd.log" || rc=$?
		took=$(elapsed_since "$t0")
		if ((rc != 0 && rc != 124 && rc != 137)) && grep -q 'Input/output error' "$work/dd.log" &&
			within $((rt + 3)) "$took"; then
			pass "read fails with EIO within replacement_timeout + 3 s (${took} s)"
		else
			fail "read fails with EIO within replacement_timeout + 3 s (exit $rc after ${took} s)"
			note "$work/dd.log"
		fi
		if [[ $back == back ]]; then
			ok=0
			t0=$EPOCHREALTIME
			while within 20 "$(elapsed_since "$t0")"; do
				if timeout -k 2 5 dd if="$mnt/lun1" of="$work/got2" bs=4096 skip=32 count=64 iflag=direct \
					status=none 2>"$work/dd2.log"; then
					ok=1
					break
				fi
				sleep 0.5
			done
			expected_bytes 131072 262144 "$work/want2"
			if ((ok)) && cmp -s "$work/got2" "$work/want2"; then
				pass "a read succeeds once the target behaves ($(elapsed_since "$t0") s later)"
			else
				fail "a read succeeds once the target behaves"
				note "$work/dd2.log"
			fi
			check "the session was reinstated" grep -q 'reinstated after' "$work/daemon.log"
		else
			rc=0
			t0=$EPOCHREALTIME
			timeout -k 2 10 dd if="$mnt/lun1" of="$work/got2" bs=4096 count=1 iflag=direct status=none \
				2>"$work/dd2.log" || rc=$?
			took=$(elapsed_since "$t0")
			if ((rc != 0 && rc != 124 && rc != 137)) && within 2 "$took"; then
				pass "new I/O fails at once while the target still misbehaves (${took} s)"
			else
				fail "new I/O fails at once while the target still misbehaves (exit $rc after ${took} s)"
			fi
		fi
		;;
	stop)
		timeout -k 2 60 dd if="$mnt/lun1" of="$work/got" bs=65536 count=1 iflag=direct status=none \
			2>"$work/dd.log" &
		dd_pid=$!
		for ((i = 0; i < 100; i++)); do
			grep -q 'lost:' "$work/daemon.log" && break
			sleep 0.1
		done
		check "the read dropped the connection" grep -q 'lost:' "$work/daemon.log"
		sleep 2.5 # the rescan every second has a command waiting on the recovery by now
		t0=$EPOCHREALTIME
		kill -TERM "$daemon_pid"
		if timed_exit 8 "SIGTERM during the recovery ends the daemon within 8 s"; then
			# only a read was made: nothing to sync, a clean stop
			check_eq "the daemon exits 0 (nothing was written)" "$drc" 0
		fi
		rc=0
		wait "$dd_pid" || rc=$?
		if ((rc != 0 && rc != 124 && rc != 137)); then
			pass "the read fails ($(head -n 1 "$work/dd.log"))"
		else
			fail "the read fails (exit $rc)"
		fi
		if is_mounted "$mnt"; then
			fail "nothing left mounted"
		else
			pass "nothing left mounted"
		fi
		;;
	churn)
		rc=0
		limit=$((rt + 2))
		# the first loss waits for the logout delay the target asks for (2 s), the next tick and the Logout
		[[ $scenario == reconnect_churn_logout ]] && limit=$((rt + 5))
		t0=$EPOCHREALTIME
		timeout -k 2 60 dd if="$mnt/lun1" of="$work/got" bs=65536 count=1 iflag=direct status=none \
			2>"$work/dd.log" || rc=$?
		took=$(elapsed_since "$t0")
		if ((rc != 0 && rc != 124 && rc != 137)) && grep -q 'Input/output error' "$work/dd.log" &&
			within "$limit" "$took"; then
			pass "read fails with EIO within $limit s of its submission (${took} s)"
		else
			fail "read fails with EIO within $limit s of its submission (exit $rc after ${took} s)"
			note "$work/dd.log"
		fi
		n=$(grep -c 'reinstated after' "$work/daemon.log" || true)
		if ((n >= 1)); then
			pass "the session was reinstated in between ($n times)"
		else
			fail "the session was reinstated in between"
		fi
		;;
	slowcheck)
		rc=0
		timeout -k 5 40 dd if="$mnt/lun1" of="$work/got" bs=65536 count=1 iflag=direct status=none \
			2>"$work/dd.log" || rc=$?
		check_eq "the read succeeds ($(head -n 1 "$work/dd.log"))" "$rc" 0
		expected_bytes 0 65536 "$work/want"
		check "... with the disk's data" cmp -s "$work/got" "$work/want"
		check "the session was reinstated" grep -q 'reinstated after' "$work/daemon.log"
		check "no command counted as unsent during the identity check" \
			bash -c "! grep -q 'not sent within' '$work/daemon.log'"
		;;
	relogin)
		rc=0
		timeout -k 5 30 dd if="$mnt/lun1" of="$work/got" bs=65536 count=1 iflag=direct status=none \
			2>"$work/dd.log" || rc=$?
		check_eq "read succeeds" "$rc" 0
		for ((i = 0; i < 50; i++)); do
			grep -q 'Time2Wait 65535' "$work/target.log" && break
			sleep 0.1
		done
		check "the target answered the logout with Time2Wait 65535" grep -q 'Time2Wait 65535' "$work/target.log"
		rc=0
		t0=$EPOCHREALTIME
		timeout -k 5 30 dd if="$mnt/lun1" of="$work/got2" bs=4096 skip=32 count=64 iflag=direct status=none \
			2>"$work/dd2.log" || rc=$?
		took=$(elapsed_since "$t0")
		expected_bytes 131072 262144 "$work/want2"
		if ((rc == 0)) && cmp -s "$work/got2" "$work/want2"; then
			pass "a read after the logout succeeds (${took} s)"
		else
			fail "a read after the logout succeeds (exit $rc after ${took} s)"
			note "$work/dd2.log"
		fi
		check "logged: the reinstatement" grep -qF "reinstated after a logout requested by the target" \
			"$work/daemon.log"
		;;
	storm)
		head -c 65536 /dev/urandom >"$work/in"
		rc=0
		t0=$EPOCHREALTIME
		timeout -k 5 60 dd if="$work/in" of="$mnt/lun1" bs=65536 count=1 oflag=direct conv=notrunc status=none \
			2>"$work/dd.log" || rc=$?
		took=$(elapsed_since "$t0")
		if ((rc != 0 && rc != 124 && rc != 137)) && grep -q 'Input/output error' "$work/dd.log" &&
			within $((6 * (ct + 2))) "$took"; then
			pass "write fails with EIO within 6 x (cmd_timeout + 2 s) (${took} s)"
		else
			fail "write fails with EIO within 6 x (cmd_timeout + 2 s) (exit $rc after ${took} s)"
			note "$work/dd.log"
		fi
		check "logged: re-issued 5 times, then failed" grep -q 'aborted 6 times: failing it' "$work/daemon.log"
		rc=0
		timeout -k 5 30 dd if="$mnt/lun1" of="$work/got2" bs=4096 skip=32 count=64 iflag=direct status=none \
			2>"$work/dd2.log" || rc=$?
		expected_bytes 131072 262144 "$work/want2"
		if ((rc == 0)) && cmp -s "$work/got2" "$work/want2"; then
			pass "a further read succeeds"
		else
			fail "a further read succeeds (exit $rc)"
		fi
		check_eq "the session was not dropped" "$(grep -c 'reinstated after' "$work/daemon.log" || true)" 0
		;;
	luns)
		n=$(grep -c 'REPORT LUNS #' "$work/target.log" || true)
		if ((n >= 1 && n <= 4)); then
			pass "REPORT LUNS sent $n times (at most 4)"
		else
			fail "REPORT LUNS sent $n times (at most 4)"
		fi
		rc=0
		timeout -k 5 30 dd if="$mnt/lun1" of="$work/got" bs=65536 count=1 iflag=direct status=none \
			2>"$work/dd.log" || rc=$?
		expected_bytes 0 65536 "$work/want"
		if ((rc == 0)) && cmp -s "$work/got" "$work/want"; then
			pass "read succeeds"
		else
			fail "read succeeds (exit $rc)"
		fi
		;;
	seek)
		got=$(timeout -k 5 60 python3 -c '
import errno, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
try:
    print(os.lseek(fd, 0, os.SEEK_DATA))
except OSError as e:
    print(errno.errorcode[e.errno])
' "$mnt/lun1" 2>&1) || true
		n=$(grep -c 'GET LBA STATUS #' "$work/target.log" || true)
		if ((n >= 1 && n <= 64)); then
			pass "one lseek(SEEK_DATA): $n GET LBA STATUS round trips (at most 64)"
		else
			fail "one lseek(SEEK_DATA): $n GET LBA STATUS round trips (at most 64)"
		fi
		check_eq "SEEK_DATA reports data where the walk stopped" "$got" "$((n * 512))"
		;;
	esac
	if [[ $kind == stop ]]; then
		: # stopped above
	elif _targets_alive "$daemon_pid"; then
		pass "daemon still running"
	else
		fail "daemon still running"
		daemon_pid=''
	fi
	if [[ -n $daemon_pid ]]; then
		t0=$EPOCHREALTIME
		check "fusermount3 -u" timeout -k 5 20 fusermount3 -u "$mnt"
		if _targets_wait_gone "$daemon_pid" 10; then
			took=$(elapsed_since "$t0")
			drc=0
			wait "$daemon_pid" 2>/dev/null || drc=$?
			daemon_pid=''
			if within 3 "$took"; then
				pass "daemon exits within 3 s of the unmount (${took} s)"
			else
				fail "daemon exits within 3 s of the unmount (${took} s)"
			fi
			check_eq "the daemon exits 0 after the unmount" "$drc" 0
		else
			fail "daemon exits within 3 s of the unmount (still running after 10 s)"
		fi
	fi
	sanitizer_clean "$work/daemon.log"
	if ((failed)); then
		echo "# daemon log:"
		note "$work/daemon.log"
		echo "# target log:"
		tail -n 30 "$work/target.log" | sed 's/^/#   /'
	fi
	finish
fi

# ---------------------------------------------------------------- mount

mount_daemon "$url" -o cmd_timeout=4 -o replacement_timeout=60

# ---------------------------------------------------------------- trigger

io_bs=65536
io_what="read"
[[ $trigger == write ]] && io_what="write"
rc=0
if [[ $trigger == write ]]; then
	head -c "$io_bs" /dev/urandom >"$work/in"
	timeout -k 5 30 dd if="$work/in" of="$mnt/lun1" bs="$io_bs" count=1 oflag=direct conv=notrunc \
		status=none 2>"$work/dd.log" || rc=$?
else
	timeout -k 5 30 dd if="$mnt/lun1" of="$work/got" bs="$io_bs" count=1 iflag=direct \
		status=none 2>"$work/dd.log" || rc=$?
fi
if [[ $want_io == fail ]]; then
	if ((rc != 0 && rc != 124 && rc != 137)) && grep -q 'Input/output error' "$work/dd.log"; then
		pass "$io_what fails with EIO"
	else
		fail "$io_what fails with EIO (exit $rc)"
		note "$work/dd.log"
	fi
else
	if ((rc == 0)); then
		pass "$io_what succeeds"
		if [[ $trigger != write ]]; then
			expected_bytes 0 "$io_bs" "$work/want"
			if cmp -s "$work/got" "$work/want"; then
				pass "read returns the disk's bytes"
			else
				fail "read returns the disk's bytes"
			fi
		else
			if timeout -k 5 30 dd if="$mnt/lun1" of="$work/got" bs="$io_bs" count=1 iflag=direct \
				status=none 2>"$work/dd.log" && cmp -s "$work/got" "$work/in"; then
				pass "the written bytes read back"
			else
				fail "the written bytes read back"
				note "$work/dd.log"
			fi
		fi
	else
		fail "$io_what succeeds (exit $rc)"
		note "$work/dd.log"
	fi
fi

if _targets_alive "$daemon_pid"; then
	pass "daemon still running"
else
	fail "daemon still running"
	daemon_pid=''
	note "$work/daemon.log"
	sanitizer_clean "$work/daemon.log"
	finish
fi

if listing=$(timeout -k 5 10 ls "$mnt" 2>&1) && [[ $listing == "by-id"$'\n'"lun1" ]]; then
	pass "ls still answers"
else
	fail "ls still answers (got: $listing)"
fi

# A further read elsewhere: works on a recovered or surviving session.
rc=0
start=$SECONDS
# 64 commands: more than a CmdSN window of 32, so a window that never
# reopens (window_closed) is met and ends with cmd_timeout and a reinstatement.
timeout -k 5 60 dd if="$mnt/lun1" of="$work/got2" bs=4096 skip=32 count=64 iflag=direct \
	status=none 2>"$work/dd2.log" || rc=$?
took=$((SECONDS - start))
reinstated=$(grep -c 'reinstated after' "$work/daemon.log" || true)
if [[ $want_after == recovered ]]; then
	if ((reinstated >= 1)); then
		pass "the session was reinstated ($reinstated times)"
	else
		fail "the session was reinstated"
	fi
elif [[ $want_after == alive ]]; then
	check_eq "the session was not dropped" "$reinstated" 0
fi
# What the daemon must have logged for some scenarios.
declare -A expect_log=(
	[no_response]="ABORT TASK done (response 0): 1 commands re-issued"
	[tmf_ignored]="no answer to LOGICAL UNIT RESET"
	[window_closed]="not sent within"
	[login_redirect_temporary]="redirected temporarily"
	[login_redirect_permanent]="redirected permanently"
	[login_busy]="service unavailable (status 0x0301): retrying"
	[login_out_of_resources]="out of resources (status 0x0302): retrying"
	[async_logout]="reinstated after a logout requested by the target"
	[async_drop_connection]="reinstated after the target announced dropping the connection"
	[async_renegotiate]="reinstated after a parameter renegotiation requested by the target"
)
if [[ -n ${expect_log[$scenario]:-} && -z $always ]]; then
	check "logged: ${expect_log[$scenario]}" grep -qF "${expect_log[$scenario]}" "$work/daemon.log"
fi
if [[ -n $always && $scenario == async_renegotiate ]]; then
	check "logged: the repeated request ignored" grep -qF "renegotiate parameters again within 30 s" "$work/daemon.log"
	check_eq "one logout and login, no loop" "$reinstated" 1
fi
if [[ $want_after == failing ]]; then
	if ((rc != 0 && rc != 124 && rc != 137)) && grep -q 'Input/output error' "$work/dd2.log"; then
		pass "a further read fails with EIO too (${took}s)"
	else
		fail "a further read fails with EIO too (exit $rc after ${took}s)"
		note "$work/dd2.log"
	fi
	if grep -q 'lost with the connection 6 times' "$work/daemon.log"; then
		pass "the command was re-issued 5 times, then failed"
	else
		fail "the command was re-issued 5 times, then failed"
	fi
else
	expected_bytes 131072 262144 "$work/want2"
	if ((rc == 0)) && cmp -s "$work/got2" "$work/want2"; then
		pass "a further read succeeds"
	else
		fail "a further read succeeds (exit $rc)"
		note "$work/dd2.log"
	fi
fi

# ---------------------------------------------------------------- unmount

if timeout -k 5 20 fusermount3 -u "$mnt" 2>"$work/umount.log"; then
	pass "fusermount3 -u"
else
	fail "fusermount3 -u"
	note "$work/umount.log"
fi
if _targets_wait_gone "$daemon_pid" 10; then
	drc=0
	wait "$daemon_pid" 2>/dev/null || drc=$?
	daemon_pid=''
	check_eq "daemon exits 0 within 10 s" "$drc" 0
else
	fail "daemon exits within 10 s"
fi
# log_flood: 1000 bogus PDUs of each kind cost a few lines per second
# (LOG_LIMIT_BURST, then "N more like this"), and every one is told.
if [[ $scenario == log_flood ]]; then
	lines=$(wc -l <"$work/daemon.log")
	if ((lines <= 40)); then
		pass "the log is bounded ($lines lines, at most 40)"
	else
		fail "the log is bounded ($lines lines, at most 40)"
	fi
	for what in "Task Management Response we did not ask for" "target sent asynchronous event 255"; do
		shown=$(grep -F "$what" "$work/daemon.log" | grep -vc 'more like this' || true)
		counted=$(grep -oE "[0-9]+ more like this, the last: $what" "$work/daemon.log" |
			awk '{ n += $1 } END { print n + 0 }' || true)
		check "\"N more like this\" for \"$what\"" test "$counted" -gt 0
		check_eq "every \"$what\" printed or counted ($shown + $counted)" "$((shown + counted))" 1000
	done
fi
sanitizer_clean "$work/daemon.log"
if [[ -s $work/daemon.log ]]; then
	echo "# daemon log:"
	note "$work/daemon.log"
fi
if ((failed)); then
	echo "# target log:"
	note "$work/target.log"
fi
finish
