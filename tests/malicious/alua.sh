#!/bin/bash
# SPDX-License-Identifier: MIT
#
# ALUA (SPC-4 §5.15) through our initiator against fake_target.py --alua:
#
#   alua.sh ALUA_PROBE
#
# Two logins, one through each portal of the fake target (TPG 1 / port 1,
# TPG 2 / port 2), both open at once, driven by tests/malicious/alua_probe:
#   - the probe of LUN 1 reports TPGS 1 and each path's TPG and relative
#     port, and both paths the same serial and NAA;
#   - REPORT TARGET PORT GROUPS gives both TPGs with the states of the
#     states file; READ through the standby TPG is NOT READY 04h/0Bh;
#   - a state change written to the file gives each connection's next
#     command UNIT ATTENTION 2Ah/06h once, then the new states; a
#     transitioning TPG answers READ with 04h/0Ah, an unavailable one 04h/0Ch;
#   - without --alua: TPGS 0, no TPG, and the query is EOPNOTSUPP.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"

suite_args 1 ALUA_PROBE "$@"
need_exe "$1"
probe=$1
need_tools python3 timeout
target_py=$here/fake_target.py
iqn=iqn.2026-11.org.example:malicious

suite_scratch alua
pids=()
suite_teardown() {
	local p
	for p in "${pids[@]}"; do
		_targets_kill "$p" 5
	done
}

# start_target NAME ARGS...: fake_target.py on two free ports ($port, $port2), log in $work/NAME.log
start_target() {
	local name=$1 pid
	shift
	for _ in 1 2 3 4 5; do
		port=$(free_port)
		port2=$(free_port)
		[[ $port != "$port2" ]] || continue
		python3 "$target_py" --port "$port" --port2 "$port2" "$@" >"$work/$name.log" 2>&1 </dev/null &
		pid=$!
		if _targets_wait_listen "$pid" "$port" 10 && _targets_wait_listen "$pid" "$port2" 5; then
			pids+=("$pid")
			return 0
		fi
		_targets_kill "$pid" 2
	done
	return 1
}

# open_path NAME PORT: alua_probe logged in through PORT, commands on fd of $work/NAME.in
declare -A fd_of pid_of
open_path() {
	local name=$1 p=$2 fd
	mkfifo "$work/$name.in"
	"$probe" 127.0.0.1 "$p" "$iqn" 1 <"$work/$name.in" >"$work/$name.out" 2>"$work/$name.err" &
	pids+=("$!")
	pid_of[$name]=$!
	exec {fd}>"$work/$name.in"
	fd_of[$name]=$fd
	echo 0 >"$work/$name.n"
}

# ask NAME CMD: send CMD to path NAME, print its one-line answer (or "timeout").
# Runs in $(...): the number of questions so far is kept in $work/NAME.n.
ask() {
	local name=$1 n i
	echo "$2" >&"${fd_of[$name]}"
	n=$(($(<"$work/$name.n") + 1))
	echo "$n" >"$work/$name.n"
	for ((i = 0; i < 200; i++)); do
		if (($(wc -l <"$work/$name.out") >= n)); then
			sed -n "${n}p" "$work/$name.out"
			return 0
		fi
		sleep 0.05
	done
	echo timeout
}

# close_path NAME: quit; the probe logs out and exits 0 within 10 s, without a sanitizer report
close_path() {
	local name=$1 rc=0 fd=${fd_of[$1]}
	echo quit >&"$fd"
	exec {fd}>&-
	timeout 10 tail --pid="${pid_of[$name]}" -f /dev/null || true
	wait "${pid_of[$name]}" || rc=$?
	check_eq "path $name: logged out, exit status" "$rc" 0
	if grep -qE 'Sanitizer|runtime error' "$work/$name.err"; then
		fail "path $name: no sanitizer report"
	else
		pass "path $name: no sanitizer report"
	fi
	note "$work/$name.err"
}

# set_states TEXT: replace the states file at once (a new inode, so the change is seen)
set_states() {
	printf '%s\n' "$@" >"$work/states.new"
	mv "$work/states.new" "$work/states"
}

set_states "1 ao" "2 standby"
if ! start_target alua --alua "$work/states"; then
	fail "fake target with --alua started"
	note "$work/alua.log"
	summary
	exit 1
fi
pass "fake target with --alua started (ports $port, $port2)"
open_path a "$port"
open_path b "$port2"

pa=$(ask a probe)
pb=$(ask b probe)
echo "# path a: $pa"
echo "# path b: $pb"
naa=36001405fa4e0000100000000000000a1
check_eq "path a: TPGS 1, TPG 1, port 1, the LU's serial and NAA" "$pa" "tpgs 1 tpg 1 port 1 serial FAKE0001 devid $naa"
check_eq "path b: TPGS 1, TPG 2, port 2, the same serial and NAA" "$pb" "tpgs 1 tpg 2 port 2 serial FAKE0001 devid $naa"
check_eq "path a: REPORT TARGET PORT GROUPS" "$(ask a query)" "1 active/optimized 2 standby"
check_eq "path b: REPORT TARGET PORT GROUPS" "$(ask b query)" "1 active/optimized 2 standby"
check_eq "path a (active/optimized): READ" "$(ask a read)" "good"
check_eq "path b (standby): READ is NOT READY, standby: try another path" "$(ask b read)" "check 2/04/0b path"

set_states "1 ano" "2 ao"
check_eq "path a after the change: UNIT ATTENTION 2A/06" "$(ask a tur)" "check 6/2a/06 changed"
check_eq "path a: the UNIT ATTENTION came once" "$(ask a tur)" "good"
check_eq "path a: the new states" "$(ask a query)" "1 active/non-optimized 2 active/optimized"
check_eq "path b after the change: UNIT ATTENTION 2A/06" "$(ask b read)" "check 6/2a/06 changed"
check_eq "path b (active/optimized now): READ" "$(ask b read)" "good"
check_eq "path b: the new states" "$(ask b query)" "1 active/non-optimized 2 active/optimized"

set_states "1 transitioning" "2 ao"
check_eq "path a, TPG 1 transitioning: UNIT ATTENTION 2A/06" "$(ask a read)" "check 6/2a/06 changed"
check_eq "path a, TPG 1 transitioning: READ is NOT READY 04/0A" "$(ask a read)" "check 2/04/0a transitioning"
check_eq "path a: REPORT TARGET PORT GROUPS while transitioning" "$(ask a query)" "1 transitioning 2 active/optimized"

set_states "1 unavailable" "2 ao"
check_eq "path a, TPG 1 unavailable: UNIT ATTENTION 2A/06" "$(ask a tur)" "check 6/2a/06 changed"
check_eq "path a, TPG 1 unavailable: READ is NOT READY 04/0C" "$(ask a read)" "check 2/04/0c path"
check_eq "path b, TPG 2 still active/optimized: UNIT ATTENTION 2A/06" "$(ask b tur)" "check 6/2a/06 changed"
check_eq "path b: READ" "$(ask b read)" "good"

# the same file again (rewritten, same states): no UNIT ATTENTION
set_states "1 unavailable" "2 ao"
check_eq "path b, file rewritten with the same states: no UNIT ATTENTION" "$(ask b tur)" "good"

close_path a
close_path b

# A target without ALUA: TPGS 0, no TPG designator, REPORT TARGET PORT GROUPS unsupported
if start_target plain; then
	open_path c "$port"
	check_eq "no ALUA: the probe" "$(ask c probe)" "tpgs 0 tpg - port - serial - devid -"
	check_eq "no ALUA: REPORT TARGET PORT GROUPS is EOPNOTSUPP" "$(ask c query)" "error EOPNOTSUPP"
	close_path c
else
	fail "fake target without --alua started"
fi
summary
