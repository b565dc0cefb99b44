#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The "cache" suite: the block cache through a real mount.
#
#   cache.sh ISERFUSE_BINARY
#
# tgtd with two 64 MiB LUNs (512- and 4096-byte blocks) filled with random
# bytes.  For the write-through default and for -o writeback, each with an
# 8 MiB cache (so that blocks are evicted): a streamed read of the whole
# LUN equals the backing file and uses read-ahead; random overlapping
# buffered and O_DIRECT reads and writes (tests/e2e/cache_model.py) match a
# model at every read; after fsync (write-through) or unmount (write-back)
# the backing file equals the model; a fresh mount reads the model back.
#
# Prints "ok - ..." / "not ok - ..." per check and "N passed, M failed";
# exits 1 if anything failed, 77 (skip) when not root.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../lib/targets.sh
. "$here/../lib/targets.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/report.sh
. "$here/../lib/report.sh"

if [[ $# -ne 1 || ! -x $1 ]]; then
	echo "usage: $0 ISERFUSE_BINARY" >&2
	exit 2
fi
iserfuse=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
if [[ $(id -u) -ne 0 ]]; then
	echo "# SKIP: mounting FUSE and running tgtd need root"
	exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/iserfuse-cache.XXXXXX")
mnt=$work/mnt
mkdir -p "$mnt"
daemon=''

cleanup() {
	local rc=$?
	set +e
	if mountpoint -q "$mnt"; then
		fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt"
	fi
	[[ -n $daemon ]] && _targets_kill "$daemon" 5
	tgtd_stop "$work/tgtd"
	if ((rc == 0 && failed == 0)); then
		rm -rf "$work"
	else
		rm -f "$work"/tgtd/*.img "$work"/*.model
		echo "# logs kept in $work"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ! tgtd_start "$work/tgtd" >/dev/null 2>"$work/log"; then
	fail "tgtd started"
	note "$work/log"
	summary
	exit 1
fi
img1=$work/tgtd/disk512.img
img2=$work/tgtd/disk4k.img
dd if=/dev/urandom of="$img1" bs=1M count=64 conv=notrunc status=none
dd if=/dev/urandom of="$img2" bs=1M count=64 conv=notrunc status=none

# mount_cache OPTIONS...: mount in the foreground in the background; daemon = its PID.
mount_cache() {
	"$iserfuse" -f -o cache_size=8M "$@" "$TGT_URL" "$mnt" 2>"$work/daemon.log" &
	daemon=$!
	for _ in $(seq 100); do
		[[ -e $mnt/lun2 ]] && return 0
		sleep 0.1
	done
	return 1
}
# unmount: the daemon writes back, syncs and exits.
unmount_cache() {
	fusermount3 -u "$mnt"
	local rc=0
	timeout 60 tail --pid="$daemon" -f /dev/null || rc=1
	wait "$daemon" 2>/dev/null || rc=$?
	daemon=''
	return "$rc"
}

run_mode() {
	local mode=$1 opts=()
	[[ $mode == writeback ]] && opts=(-o writeback)
	if ! mount_cache "${opts[@]}"; then
		fail "$mode: mount with the cache on"
		note "$work/daemon.log"
		return
	fi
	pass "$mode: mount with -o cache_size=8M ${opts[*]}"
	# A streamed read: read-ahead ahead of a 1 MiB sequential reader.
	check "$mode: lun1 read sequentially equals its backing file" \
		cmp <(dd if="$mnt/lun1" bs=1M status=none) "$img1"
	local ra_used
	ra_used=$(awk '$1 == "cache_readahead_used_bytes" {print $2}' "$mnt/.stats" 2>&1) || true
	if [[ $ra_used =~ ^[0-9]+$ ]] && ((ra_used > 0)); then
		pass "$mode: the streamed read used read-ahead (.stats cache_readahead_used_bytes $ra_used)"
	else
		fail "$mode: the streamed read used read-ahead (.stats cache_readahead_used_bytes '$ra_used')"
	fi
	local lun img block
	for lun in 1 2; do
		img=$work/tgtd/disk$([[ $lun == 1 ]] && echo 512 || echo 4k).img
		block=$([[ $lun == 1 ]] && echo 512 || echo 4096)
		cp "$img" "$work/lun$lun.model"
		if timeout 300 python3 "$here/cache_model.py" "$mnt/lun$lun" "$work/lun$lun.model" "$block" 1500 \
			"$lun$((${#mode}))" >"$work/model.log" 2>&1; then
			pass "$mode: lun$lun: random overlapping reads and writes match the model ($(tail -n 1 "$work/model.log"))"
		else
			fail "$mode: lun$lun: random overlapping reads and writes match the model"
			note "$work/model.log"
		fi
		if [[ $mode == write-through ]]; then
			check "$mode: lun$lun: after fsync the backing file equals the model" cmp "$img" "$work/lun$lun.model"
		fi
	done
	check "$mode: lun2 read through the mount equals the model" cmp "$mnt/lun2" "$work/lun2.model"
	if unmount_cache; then
		pass "$mode: unmount, daemon exits 0"
	else
		fail "$mode: unmount, daemon exits 0"
		note "$work/daemon.log"
	fi
	for lun in 1 2; do
		img=$work/tgtd/disk$([[ $lun == 1 ]] && echo 512 || echo 4k).img
		check "$mode: lun$lun: after unmount the backing file equals the model" cmp "$img" "$work/lun$lun.model"
	done
	grep -h "block cache:" "$work/daemon.log" | sed 's/^/# /' || true
}

run_mode write-through
run_mode writeback
# Written back data is read back by a fresh mount (no cache state carried over).
if mount_cache; then
	check "a fresh mount reads lun1 as the model" cmp "$mnt/lun1" "$work/lun1.model"
	unmount_cache || fail "fresh mount: unmount"
fi
summary
