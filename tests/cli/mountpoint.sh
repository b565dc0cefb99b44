#!/bin/bash
# SPDX-License-Identifier: MIT
#
# cli suite: exit 0 means mounted; the mount point.
#
#   mountpoint.sh ISERFUSE_BINARY UNIT_FILE MAN_PAGE
#
# max_io_kib above the kernel's limit is lowered with a warning and
# mounted; findmnt's source and type; a second mount on a mount point with
# an iserfuse mount; a stale mount point (daemon killed); the root
# directory; a mount point the user may not enter.  Needs tgt.
# Prints "ok - ..." / "not ok - ..." and "N passed, M failed"; exits 1 if
# anything failed, 77 (skip) when not root.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
. "$here/../lib/cli.sh"

cli_setup mountpoint "$@"

cli_target

# ---------------------------------------------------------------- exit 0 means mounted; the mount point
# max_io_kib above the kernel's limit (max_pages_limit pages): lowered with a warning, and mounted.
kmax=$(( $(cat /proc/sys/fs/fuse/max_pages_limit 2>/dev/null || echo 256) * $(getconf PAGESIZE) ))
((kmax > 1048576)) && kmax=1048576 # libfuse before 3.17 reads 256 pages at most
big=$((kmax / 1024 * 2))
rc=0
timeout -k 5 60 "$iserfuse" -o "max_io_kib=$big,initiator_name=$initiator" "$url" "$mnt" >"$work/out" 2>&1 || rc=$?
if ((rc == 0)) && is_mounted "$mnt"; then pass "-o max_io_kib=$big (above the kernel's $((kmax / 1024)) KiB): exit 0 and mounted"; else
	fail "-o max_io_kib=$big (above the kernel's $((kmax / 1024)) KiB): exit 0 and mounted (exit $rc)"
	note "$work/out"
fi
check_eq "-o max_io_kib=$big: one warning says it was lowered to $((kmax / 1024))" \
	"$(grep -c "max_io_kib=$big is more than this kernel's FUSE allows.*using $((kmax / 1024))$" "$work/out")" 1
check "-o max_io_kib=$big: the kernel mount has max_read=$kmax" grep -qE " $mnt fuse.iserfuse .*max_read=$kmax( |,)" /proc/mounts
check "-o max_io_kib=$big: a $((2 * kmax))-byte O_DIRECT write reaches lun1" \
	dd if=/dev/zero of="$mnt/lun1" bs=$((2 * kmax)) seek=$((8388608 / (2 * kmax))) count=1 oflag=direct conv=notrunc status=none
check_eq "findmnt shows the URL as the source" "$(findmnt -no SOURCE "$mnt")" "$url"
check_eq "findmnt shows type fuse.iserfuse" "$(findmnt -no FSTYPE "$mnt")" fuse.iserfuse
rc=0
timeout -k 5 60 "$iserfuse" -o "initiator_name=$initiator" "$url" "$mnt" >"$work/out" 2>&1 || rc=$?
check_eq "a second mount on a mount point with an iserfuse mount: exit 1, one line, one mount" \
	"$rc $(grep -c "^iserfuse: $mnt already holds an iserfuse mount ($url): unmount it first (fusermount3 -u $mnt)$" "$work/out") $(wc -l <"$work/out") $(grep -c " $mnt " /proc/mounts)" "1 1 1 1"
unmount "$mnt" || true

# A mount point whose daemon was killed: the real error and how to clear it.
"$iserfuse" -f -o "initiator_name=$initiator" "$url" "$mnt" >"$work/killed.log" 2>&1 &
victim=$!
for _ in $(seq 100); do is_mounted "$mnt" && break; sleep 0.1; done
kill -9 "$victim" 2>/dev/null || true
wait "$victim" 2>/dev/null || true
run_fail1_any "a stale mount point (daemon killed): its error and fusermount3 -u, exit 1" \
	"^iserfuse: mount point $mnt: Transport endpoint is not connected .*fusermount3 -u $mnt\)$" \
	"$iserfuse" -o "initiator_name=$initiator" "$url" "$mnt"
fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
# The root directory: refused before anything connects (a mount stacked on / is out of the daemon's sight).
roots=$(grep -c '^[^ ]* / fuse' /proc/mounts || true)
run_fail1_any "mount point /: refused with one line, exit 1" "^iserfuse: mount point / is the root directory: choose an empty directory$" \
	"$iserfuse" -o "initiator_name=$initiator" "$url" /
check_eq "mount point /: nothing mounted on /" "$(grep -c '^[^ ]* / fuse' /proc/mounts || true)" "$roots"
# A mount point the user may not enter: Permission denied, not "not a directory".
if command -v setpriv >/dev/null && setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$iserfuse"; then
	ne=$(mktemp -d /tmp/iserfuse-cli-ne.XXXXXX)
	chmod 711 "$ne"
	mkdir "$ne/noenter"
	chmod 600 "$ne/noenter"
	run_fail1_any "a mount point the user may not enter: Permission denied, exit 1" \
		"^iserfuse: mount point $ne/noenter: Permission denied$" \
		setpriv --reuid=65534 --regid=65534 --clear-groups "$iserfuse" -o "initiator_name=$initiator" "$url" "$ne/noenter"
	rm -rf "$ne"
else
	skip "a mount point the user may not enter" "setpriv missing or the build not reachable by nobody"
fi

summary
