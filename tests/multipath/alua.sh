#!/bin/bash
# SPDX-License-Identifier: MIT
#
# ALUA path choice through the mount, against fake_target.py --alua:
#
#   alua.sh ISERFUSE
#
# The fake target has two portals, one target port group each (TPG 1 on
# the URL's portal, TPG 2 on the -o portal= one), the same LU behind both,
# and takes the groups' states from a file it re-reads at every command
# (a change gives each connection UNIT ATTENTION 2Ah/06h once).
#   1. TPG 1 active/optimized, TPG 2 active/non-optimized: .stats shows
#      both paths with those states; reads go down path0 only.
#   2. TPG 1 standby, TPG 2 active/optimized: the next command on path0
#      gets the UNIT ATTENTION, the states are read again, and reads go
#      down path1 only; the data read is the same.
#   3. TPG 1 active/optimized, TPG 2 unavailable: back to path0.
#   4. A write through the mount, then TPG 1 transitioning and TPG 2
#      active/optimized: the data reads back the same through path1.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"

suite_args 1 ISERFUSE "$@"
need_exe "$1"
iserfuse=$1
need_tools python3 timeout dd cmp fusermount3
target_py=$here/../malicious/fake_target.py
iqn=iqn.2026-11.org.example:malicious

# die WHAT: a check failed that the rest depends on
die() {
	fail "$*"
	[[ -f ${work:-}/daemon.log ]] && note "$work/daemon.log"
	summary
	exit 1
}

suite_scratch mpath-alua
tpid=''
daemon=''
suite_teardown() {
	force_unmount "$work/mnt"
	[[ -n $daemon ]] && kill -KILL "$daemon" 2>/dev/null
	[[ -n $tpid ]] && _targets_kill "$tpid" 5
	return 0
}

states=$work/states
# set_states TEXT: the fake target re-reads the file at every command, so it
# is replaced whole (a new file renamed over it), never seen half written
set_states() {
	printf '%b' "$1" >"$states.new"
	mv -f "$states.new" "$states"
}
set_states '1 ao\n2 ano\n'
for _ in 1 2 3 4 5; do
	port=$(free_port)
	port2=$(free_port)
	[[ $port != "$port2" ]] || continue
	python3 "$target_py" --port "$port" --port2 "$port2" --alua "$states" >"$work/target.log" 2>&1 </dev/null &
	tpid=$!
	if _targets_wait_listen "$tpid" "$port" 10 && _targets_wait_listen "$tpid" "$port2" 5; then
		break
	fi
	_targets_kill "$tpid" 2
	tpid=''
done
[[ -n $tpid ]] || die "fake target did not start"

mkdir -p "$work/mnt"
"$iserfuse" -f -o "portal=127.0.0.1:$port2,cache_size=0,log_level=info,replacement_timeout=5" \
	"iscsi://127.0.0.1:$port/$iqn/1" "$work/mnt" >"$work/daemon.log" 2>&1 &
daemon=$!

# stat_of KEY: a .stats value; path_of N FIELD: a field (1-based, after the key) of the pathN line
stat_of() { awk -v k="$1" '$1 == k {print $2}' "$work/mnt/.stats"; }
path_line() { awk -v k="path$1" '$1 == k' "$work/mnt/.stats"; }
path_cmds() { path_line "$1" | tr ' ' '\n' | sed -n 's/^commands=//p'; }

up=''
for _ in $(seq 100); do
	if [[ -e $work/mnt/.stats && $(stat_of paths_up 2>/dev/null) == 2 ]]; then
		up=1
		break
	fi
	sleep 0.2
done
[[ -n $up ]] || die "two paths never came up"
pass "two paths up"

# read_through N: 1 MiB read (O_DIRECT) moves path N's command count, the other's stays
read_through() {
	local want=$1 other=$(( 1 - $1 )) a0 b0 a1 b1
	a0=$(path_cmds "$want"); b0=$(path_cmds "$other")
	dd_check "$2: 1 MiB read" "$work/daemon.log" if="$work/mnt/lun1" of="$work/read.$2" bs=64k count=16 iflag=direct ||
		return 0
	a1=$(path_cmds "$want"); b1=$(path_cmds "$other")
	if (( a1 - a0 >= 16 && b1 == b0 )); then
		pass "$2: reads down path$want only ($(( a1 - a0 )) commands, path$other $(( b1 - b0 )))"
	else
		fail "$2: path$want +$(( a1 - a0 )), path$other +$(( b1 - b0 ))"
	fi
}

# wait_state N STATE: pathN's ALUA state (the 5th word of its line) becomes STATE within 5 s
wait_state() {
	for _ in $(seq 50); do
		[[ $(path_line "$1" | awk '{print $5}') == "$2" ]] && return 0
		sleep 0.1
	done
	die "path$1: state $(path_line "$1" | awk '{print $5}'), not $2"
}

wait_state 0 active/optimized
wait_state 1 active/non-optimized
pass "states from REPORT TARGET PORT GROUPS: path0 active/optimized, path1 active/non-optimized"
read_through 0 optimized

set_states '1 standby\n2 ao\n'
# the first command after the change meets the UNIT ATTENTION on path0, is re-issued, and the states are read again
dd_check "standby: the read meeting the UNIT ATTENTION succeeds" "$work/daemon.log" \
	if="$work/mnt/lun1" of=/dev/null bs=4k count=1 iflag=direct || true
wait_state 0 standby
wait_state 1 active/optimized
read_through 1 standby
cmp "$work/read.optimized" "$work/read.standby" || die "data differs between the two paths"
pass "same data through both paths"

set_states '1 ao\n2 unavailable\n'
dd_check "back: the read meeting the UNIT ATTENTION succeeds" "$work/daemon.log" \
	if="$work/mnt/lun1" of=/dev/null bs=4k count=1 iflag=direct || true
wait_state 0 active/optimized
wait_state 1 unavailable
read_through 0 back

head -c 1M /dev/urandom >"$work/pattern"
dd_check "transition: 1 MiB written through path0" "$work/daemon.log" \
	if="$work/pattern" of="$work/mnt/lun1" bs=64k oflag=direct conv=notrunc || true
set_states '1 transitioning\n2 ao\n'
dd_check "transition: 1 MiB read back" "$work/daemon.log" if="$work/mnt/lun1" of="$work/back" bs=64k count=16 iflag=direct || true
cmp "$work/pattern" "$work/back" || die "data written through path0 read back different"
wait_state 1 active/optimized
pass "written data read back after a transition ($(stat_of failovers) failovers)"

grep -E 'ALUA|path ' "$work/daemon.log" | sed 's/^/# /'
unmount_check
summary
