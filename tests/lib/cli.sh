# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# The shared set-up of the cli suite's scripts (tests/cli/NAME.sh), each
# run as NAME.sh ISERFUSE_BINARY UNIT_FILE MAN_PAGE.  Source it after
# open.sh; then
#   cli_setup NAME "$@"      the arguments (exit 2 unless three): $iserfuse
#                            (absolute), $unit, $manpage; exit 77 (skip)
#                            unless root; $initiator; $work (suite.sh's
#                            suite_scratch cli-NAME: removed when all
#                            passed, else kept without disk images) and
#                            $mnt; at exit, enable_uring back to $uring_was
#                            (when set), the mount points under $work
#                            unmounted, tgtd stopped
#   cli_target               tgtd with one 16 MiB LUN in $work/tgt: $url,
#                            $port; else "not ok - tgtd starts", exit 1
#   cli_conf                 $conf, $work/iserfuse.conf: initiator_name,
#                            options queue_depth=8, noop_interval=10,
#                            cache_size=0 and a section [lab] (url $url,
#                            mountpoint $mnt, options umask=022)
#   cli_mount WHAT ARGS...   set-up: iserfuse ARGS... exits 0 within 60 s,
#                            else "not ok - WHAT" and exit 1
#   run_ok WHAT CMD...       CMD exits 0 within 60 s (output in $work/out);
#                            returns its status
#   run_fail1 WHAT PATTERN CMD...
#                            CMD exits 1, says one line, PATTERN (grep -E),
#                            and mounts nothing on $mnt
#   run_fail1_any WHAT PATTERN CMD...
#                            as run_fail1, but $mnt may stay mounted (stale)
#   unmount DIR              fusermount3 -u (else umount), then until DIR is
#                            no mount point: 0; 1 after 5 s
#   stat_of DIR KEY          KEY's value in DIR/.stats
# is_mounted here reads /proc/mounts only (a stale FUSE mount counts).

is_mounted() { grep -qF " $1 " /proc/mounts; }

# shellcheck disable=SC2034,SC2154 # the scripts use unit, manpage; suite.sh suite_drop and work
cli_setup() {
	local name=$1
	shift
	suite_args 3 "ISERFUSE_BINARY UNIT_FILE MAN_PAGE" "$@"
	iserfuse=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
	unit=$2
	manpage=$3
	need_root "the cli suite runs tgtd and mounts, which needs root"
	initiator=iqn.2026-11.org.example:cli
	suite_scratch "cli-$name"
	suite_drop=('tgt/*.img')
	mnt=$work/mnt
	mkdir -p "$mnt"
}

# shellcheck disable=SC2154 # uring_param: iouring.sh sets it with uring_was
suite_teardown() {
	local m
	[[ -n ${uring_was:-} ]] && echo "$uring_was" >"$uring_param"
	for m in "$mnt" "$work/mnt2" "$work/ex-disk" "$work/ex-ro"; do
		if is_mounted "$m"; then
			fusermount3 -u "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
		fi
	done
	tgtd_stop "$work/tgt"
}

# shellcheck disable=SC2034 # the scripts use port
cli_target() {
	if ! tgtd_start "$work/tgt" 16M 0 >"$work/tgt.out" 2>&1; then
		fail "tgtd starts"
		note "$work/tgt.out"
		summary
		exit 1
	fi
	url=$TGT_URL
	port=$(<"$work/tgt/port")
}

cli_conf() {
	conf=$work/iserfuse.conf
	cat >"$conf" <<EOF
# iserfuse.conf for the cli suite
initiator_name = $initiator
options = queue_depth=8, noop_interval=10, cache_size=0

[lab]
url = $url
mountpoint = $mnt
options = umask=022
EOF
}

cli_mount() {
	local what=$1 rc=0
	shift
	timeout -k 5 60 "$iserfuse" "$@" >"$work/mount.out" 2>&1 || rc=$?
	if ((rc != 0)); then
		fail "$what (exit $rc)"
		note "$work/mount.out"
		summary
		exit 1
	fi
}

run_ok() {
	local what=$1 rc=0
	shift
	timeout -k 5 60 "$@" >"$work/out" 2>&1 || rc=$?
	if ((rc == 0)); then pass "$what"; else
		fail "$what (exit $rc)"
		note "$work/out"
	fi
	return "$rc"
}

run_fail1() {
	local what=$1 pattern=$2 rc=0
	shift 2
	timeout -k 5 60 "$@" >"$work/out" 2>&1 || rc=$?
	if ((rc == 1)) && [[ $(wc -l <"$work/out") == 1 ]] && grep -qE -- "$pattern" "$work/out" && ! is_mounted "$mnt"; then
		pass "$what"
	else
		fail "$what (exit $rc)"
		note "$work/out"
		is_mounted "$mnt" && unmount "$mnt" # the checks after this one need the mount point free
	fi
	return 0
}

run_fail1_any() {
	local what=$1 pattern=$2 rc=0
	shift 2
	timeout -k 5 60 "$@" >"$work/out" 2>&1 || rc=$?
	if ((rc == 1)) && grep -qE -- "$pattern" "$work/out" && [[ $(wc -l <"$work/out") == 1 ]]; then pass "$what"; else
		fail "$what (exit $rc)"
		note "$work/out"
	fi
}

unmount() {
	fusermount3 -u "$1" 2>/dev/null || umount "$1" 2>/dev/null || true
	for _ in $(seq 50); do is_mounted "$1" || return 0; sleep 0.1; done
	return 1
}

stat_of() { awk -v k="$2" '$1 == k { print $2 }' "$1/.stats"; }
