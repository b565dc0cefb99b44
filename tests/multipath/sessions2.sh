#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Two sessions on one portal:
#
#   sessions2.sh ISERFUSE
#
# tgtd on 127.0.0.1 (tests/lib/targets.sh); the daemon mounts with
# -o sessions=2; fio writes 4 KiB blocks at random at iodepth 32 and
# verifies them (crc32c): 0 errors; .stats
# shows paths 2 and paths_up 2, and both path lines are up and answered
# commands.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$here/common.sh"

suite_args 1 ISERFUSE "$@"
need_exe "$1"
iserfuse=$1
need_root "needs root (tgtd, a mount)"
need_tools fio tgtd tgtadm python3 fusermount3

suite_scratch sessions2
suite_drop=('tgtd/*.img' '*.log' '*.json')
daemon=''
suite_teardown() {
	force_unmount "$work/mnt"
	if [[ -n $daemon ]]; then
		kill -KILL "$daemon" 2>/dev/null
		wait "$daemon" 2>/dev/null
	fi
	tgtd_stop "$work/tgtd"
}
if ! tgtd_start "$work/tgtd" 64M 0 >/dev/null; then
	fail "tgtd started"
	summary
	exit 1
fi
mkdir -p "$work/mnt"
"$iserfuse" -f -o "initiator_name=$MP_INITIATOR,sessions=2" "$TGT_URL/1" "$work/mnt" 2>>"$work/daemon.log" &
daemon=$!
if ! wait_lun "$work/mnt" 200 "$daemon"; then
	fail "mounted with sessions=2"
	note "$work/daemon.log"
	summary
	exit 1
fi
pass "mounted with sessions=2"
check "both sessions up within 20 s (paths_up 2)" mp_wait_stat paths_up 2 20

mp_fio verify "$work/mnt/lun1" 32M || true
read -r v e <<<"$(mp_fio_errors verify)"
check_eq "fio randwrite + verify at iodepth 32: 0 verify errors" "$v" 0
check_eq "fio randwrite + verify at iodepth 32: 0 I/O errors" "$e" 0
((v + e == 0)) || note "$work/verify.err"
check_eq ".stats: paths 2" "$(mp_stat paths)" 2
check_eq ".stats: paths_up 2" "$(mp_stat paths_up)" 2
for i in 0 1; do
	line=$(mp_path_line $i)
	[[ -z $line ]] || echo "# $line"
	n=$(sed -n 's/.* commands=\([0-9]*\).*/\1/p' <<<"$line")
	check "path$i is up and answered commands ($line)" \
		test -n "$n" -a "${n:-0}" -gt 0 -a "$(awk '{ print $4 }' <<<"$line")" = up
done
check "the daemon is still running" kill -0 "$daemon"
unmount_check
summary
