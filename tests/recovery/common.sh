# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Shared by the recovery suite scripts.  Source after targets.sh and
# report.sh; needs $work (a fresh directory) and $iserfuse set.
#
#   tgtd_mounted NAME [OPTS...] a fresh $work (iserfuse-NAME.*) removed at
#                               exit, with the background job $worker, the
#                               daemon and tgtd; tgtd with a 64 MiB LUN 1,
#                               mounted with OPTS; a failed mount prints the
#                               summary and exits 1
#   mount_lun URL [OPTS...]     iserfuse -f on $work/mnt in the background,
#                               stderr to $work/daemon.log; sets $daemon;
#                               returns 1 if lun1 does not appear in 20 s
#   unmount_check               fusermount3 -u, then "daemon exits 0" and "no
#                               sanitizer report in its log" checks
#   reinstated_count            how many "reinstated" lines the daemon logged
#   wait_reinstated N SECS      until the daemon logged N of them
#   downtimes                   the "down N ms" values logged, one a line
#   fio_verify NAME FILE SIZE   one fio write+verify pass (crc32c) on FILE;
#                               output to $work/NAME.fio; exit status of fio

tgtd_mounted() {
	local name=$1
	shift
	work=$(mktemp -d "${TMPDIR:-/tmp}/iserfuse-$name.XXXXXX")
	daemon=''
	worker=''
	trap _recovery_cleanup EXIT
	tgtd_start "$work/tgtd" 64M 0 >/dev/null
	if ! mount_lun "$TGT_URL/1" "$@"; then
		fail "mounted"
		note "$work/daemon.log"
		summary
		exit 1
	fi
}

_recovery_cleanup() {
	[[ -n $worker ]] && kill "$worker" 2>/dev/null && wait "$worker" 2>/dev/null
	fusermount3 -u "$work/mnt" 2>/dev/null || fusermount3 -uz "$work/mnt" 2>/dev/null || true
	[[ -n $daemon ]] && kill -KILL "$daemon" 2>/dev/null || true
	tgtd_stop "$work/tgtd"
	rm -rf "$work"
}

mount_lun() {
	local url=$1 i
	shift
	mkdir -p "$work/mnt"
	"$iserfuse" -f -o initiator_name=iqn.2026-11.org.example:recovery "$@" "$url" "$work/mnt" \
		2>>"$work/daemon.log" &
	daemon=$!
	for ((i = 0; i < 200; i++)); do
		[[ -e $work/mnt/lun1 ]] && return 0
		kill -0 "$daemon" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

unmount_check() {
	local i
	check "fusermount3 -u" fusermount3 -u "$work/mnt"
	for ((i = 0; i < 200; i++)); do
		kill -0 "$daemon" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$daemon" 2>/dev/null; then
		fail "the daemon exits after the unmount"
	else
		local rc=0
		wait "$daemon" || rc=$?
		check_eq "the daemon exits 0 after the unmount" "$rc" 0
		daemon=''
	fi
	if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' "$work/daemon.log"; then
		fail "no sanitizer report in the daemon's log"
		grep -E -A12 'AddressSanitizer|LeakSanitizer|runtime error' "$work/daemon.log" | sed 's/^/#   /' | head -n 40
	else
		pass "no sanitizer report in the daemon's log"
	fi
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
