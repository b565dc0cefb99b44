# SPDX-License-Identifier: MIT
# shellcheck shell=bash disable=SC2034,SC2154 # suite_drop, work, iserfuse: suite.sh (through open.sh) and the script
#
# Shared by the recovery suite scripts.  Source after tests/lib/open.sh
# (targets.sh, report.sh, suite.sh, mount.sh); needs $work (a
# fresh directory) and $iserfuse set.
#
#   tgtd_mounted NAME [OPTS...] a fresh $work (suite_scratch NAME: removed
#                               at exit unless a check failed), with the
#                               background job $worker, the daemon and tgtd
#                               stopped at exit; tgtd with a 64 MiB LUN 1,
#                               mounted with OPTS; a failed mount prints the
#                               summary and exits 1
#   mount_lun URL [OPTS...]     iserfuse -f on $work/mnt in the background,
#                               stderr to $work/daemon.log; sets $daemon;
#                               returns 1 if lun1 does not appear in 20 s
#   unmount_check (lib/mount.sh) fusermount3 -u, then "daemon exits 0" and "no
#                               sanitizer report in its log" checks
#   reinstated_count            how many "reinstated" lines the daemon logged
#   wait_reinstated N SECS      until the daemon logged N of them
#   downtimes                   the "down N ms" values logged, one a line
#   fio_verify NAME FILE SIZE   one fio write+verify pass (crc32c) on FILE;
#                               output to $work/NAME.fio; exit status of fio
#   sigterm_within_grace        SIGTERM to $daemon: checks that it ends within
#                               the stop grace (5 s) + 3 s; sets $drc to its
#                               exit status (empty: still running after 30 s)
#                               and clears $daemon once it ended

tgtd_mounted() {
	local name=$1
	shift
	suite_scratch "$name"
	suite_drop=('tgtd/*.img' '*.verify.state' pattern got)
	daemon=''
	worker=''
	tgtd_start "$work/tgtd" 64M 0 >/dev/null
	if ! mount_lun "$TGT_URL/1" "$@"; then
		fail "mounted"
		note "$work/daemon.log"
		summary
		exit 1
	fi
}

suite_teardown() {
	[[ -n $worker ]] && kill "$worker" 2>/dev/null && wait "$worker" 2>/dev/null
	force_unmount "$work/mnt"
	[[ -n $daemon ]] && kill -KILL "$daemon" 2>/dev/null
	tgtd_stop "$work/tgtd"
}

sigterm_within_grace() {
	local start_ms took
	start_ms=$(date +%s%3N)
	kill -TERM "$daemon"
	drc=''
	if ! _targets_wait_gone "$daemon" 30; then
		fail "SIGTERM ends the daemon (still running after 30 s)"
		return
	fi
	drc=0
	wait "$daemon" 2>/dev/null || drc=$?
	took=$(($(date +%s%3N) - start_ms))
	daemon=''
	if ((took <= 5000 + 3000)); then
		pass "SIGTERM ends the daemon within the stop grace + 3 s (${took} ms)"
	else
		fail "SIGTERM ends the daemon within the stop grace + 3 s (${took} ms)"
	fi
}

mount_lun() {
	local url=$1
	shift
	mkdir -p "$work/mnt"
	"$iserfuse" -f -o initiator_name=iqn.2026-11.org.example:recovery "$@" "$url" "$work/mnt" \
		2>>"$work/daemon.log" &
	daemon=$!
	wait_lun "$work/mnt" 200 "$daemon"
}


reinstated_count() {
	grep -c 'reinstated after' "$work/daemon.log" || true
}

wait_reinstated() {
	local n=$1 secs=$2 i
	for ((i = 0; i < secs * 10; i++)); do
		(($(reinstated_count) >= n)) && return 0
		sleep 0.1
	done
	return 1
}

downtimes() {
	sed -n 's/.*reinstated after .*: down \([0-9]*\) ms.*/\1/p' "$work/daemon.log"
}

fio_verify() {
	local name=$1 file=$2 size=$3
	fio --name="$name" --filename="$file" --size="$size" --bsrange=4k-64k --rw=randwrite \
		--ioengine=libaio --direct=1 --iodepth=16 --verify=crc32c --do_verify=1 --verify_fatal=1 --verify_state_save=0 \
		--output="$work/$name.fio" >/dev/null 2>&1
}
