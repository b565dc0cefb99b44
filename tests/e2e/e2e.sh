#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The "e2e" suite: a real mount of a real target.
#
#   e2e.sh ISERFUSE_BINARY
#
# Starts tgtd (LUN 1: 64 MiB, 512-byte blocks; LUN 2: 64 MiB, 4096-byte
# blocks), mounts the whole target, and checks: the directory shows lun1 and
# lun2; unaligned writes land in the backing files byte for byte and read
# back; the end of a LUN behaves like the end of a disk; qemu-img (raw and
# qcow2 images written onto a LUN) and ext4 on a loop device over a LUN work;
# bad URLs, unknown targets and dead portals fail with exit 1 and mount
# nothing; -o ro refuses writes; fusermount3 -u ends the daemon; a throwaway
# unprivileged user mounts through fusermount3, owns the LUN files (mode
# 600), reads and writes them, and unmounts.
#
# Prints "ok - ..." / "not ok - ..." per check (details on "# " lines) and
# "N passed, M failed" last; exits 1 if anything failed, 77 (skip) when not
# root, 2 on bad usage.  Needs root, /dev/fuse, loop devices, tgt, fuse3,
# qemu-utils, e2fsprogs.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"

suite_args 1 ISERFUSE_BINARY "$@"
iserfuse=$1
need_exe "$iserfuse"
iserfuse=$(cd "$(dirname "$iserfuse")" && pwd)/$(basename "$iserfuse")
need_root "the e2e suite mounts FUSE and loop file systems and runs tgtd, which needs root"

initiator=iqn.2026-11.org.example:e2e
size=$((64 * 1024 * 1024))

# expect_ok WHAT CMD...: CMD exits 0 (its output goes to $work/log, shown
# on failure).  Bounded in time so that a hung mount fails instead of hanging.
expect_ok() {
	local what=$1 rc=0
	shift
	timeout -k 10 300 "$@" >"$work/log" 2>&1 || rc=$?
	if ((rc == 0)); then
		pass "$what"
	else
		fail "$what (exit $rc)"
		note "$work/log"
	fi
	return "$rc"
}
# expect_fail WHAT CMD...: CMD exits non-zero, and not by timing out.
expect_fail() {
	local what=$1 rc=0
	shift
	timeout -k 10 300 "$@" >"$work/log" 2>&1 || rc=$?
	if ((rc != 0 && rc != 124 && rc != 137)); then
		pass "$what"
	else
		fail "$what (exit $rc)"
		note "$work/log"
	fi
}
not_mounted() {
	! is_mounted "$1"
}
# The names in directory $1, sorted, on one line.
names() {
	find "$1" -mindepth 1 -maxdepth 1 -printf '%f\n' 2>&1 | sort | paste -sd ' ' -
}
# bytes FILE OFFSET COUNT: COUNT bytes of FILE from byte OFFSET, to stdout.
bytes() {
	dd if="$1" bs=64K iflag=skip_bytes,count_bytes,fullblock skip="$2" count="$3" status=none
}
# Drop the page cache of FILE so that the next read goes to the daemon.
drop_cache() {
	dd if="$1" iflag=nocache count=0 status=none 2>/dev/null || true
}

[[ -c /dev/fuse ]] || missing+=(/dev/fuse)
need_tools tgtd tgtadm fusermount3 qemu-img mkfs.ext4 e2fsck mount umount mountpoint \
	losetup pgrep dd cmp sha256sum timeout ss

suite_scratch e2e
mnt=$work/mnt
loopdir=$work/loop
neg=$work/neg
romnt=$work/ro
mkdir -p "$mnt" "$loopdir" "$neg" "$romnt"
daemon_pid=''
uuser='' udir='' fuse_mode=''

suite_drop=('tgtd/*.img' '*.raw' chunk got)
suite_teardown() {
	local m busy=0
	if is_mounted "$loopdir"; then
		umount "$loopdir" 2>/dev/null || umount -l "$loopdir"
	fi
	for m in "$romnt" "$neg" "$mnt"; do
		force_unmount "$m"
		kill_daemons "$m" 5
	done
	if [[ -n $udir ]]; then
		force_unmount "$udir/mnt"
		kill_daemons "$udir/mnt" 5
		if is_mounted "$udir/mnt"; then
			busy=1
		else
			rm -rf "$udir"
		fi
	fi
	if [[ -n $uuser ]] && id -u "$uuser" >/dev/null 2>&1; then
		userdel "$uuser" 2>/dev/null || userdel -f "$uuser" 2>/dev/null || echo "# could not remove user $uuser"
	fi
	[[ -n $fuse_mode ]] && chmod "$fuse_mode" /dev/fuse
	tgtd_stop "$work/tgtd"
	for m in "$loopdir" "$romnt" "$neg" "$mnt"; do
		is_mounted "$m" && busy=1
	done
	((busy)) && suite_busy="something is still mounted under $work"
	return 0
}

# ---------------------------------------------------------------- target

if tgtd_start "$work/tgtd" >/dev/null 2>"$work/log"; then
	pass "tgtd started ($TGT_URL)"
else
	fail "tgtd started"
	note "$work/log"
	echo "$passed passed, $failed failed"
	exit 1
fi
port=$(<"$work/tgtd/port")

# ---------------------------------------------------------------- failures

# must_not_mount WHAT URL: exit 1, one line on stderr, nothing mounted, no
# daemon left behind.
must_not_mount() {
	local what=$1 url=$2 rc=0 lines p
	timeout -k 10 120 "$iserfuse" -o "initiator_name=$initiator" "$url" "$neg" \
		>"$work/neg.out" 2>"$work/neg.err" </dev/null || rc=$?
	if ((rc == 1)); then
		pass "$what: exit 1"
	else
		fail "$what: exit 1 (got $rc)"
		note "$work/neg.err"
	fi
	lines=$(wc -l <"$work/neg.err")
	if ((lines == 1)); then
		pass "$what: one line on stderr ($(<"$work/neg.err"))"
	else
		fail "$what: one line on stderr (got $lines)"
		note "$work/neg.err"
	fi
	if is_mounted "$neg"; then
		fail "$what: nothing mounted"
		fusermount3 -u "$neg" 2>/dev/null || umount -l "$neg"
	else
		pass "$what: nothing mounted"
	fi
	p=$(daemon_pids "$neg")
	if [[ -z $p ]]; then
		pass "$what: no daemon left running"
	else
		fail "$what: no daemon left running (pid $p)"
		for p in $p; do _targets_kill "$p" 5; done
	fi
}

must_not_mount "URL with port 0" "iscsi://127.0.0.1:0/x"
must_not_mount "http:// URL" "http://x"
must_not_mount "unknown target name" "iscsi://127.0.0.1:$port/iqn.2026-11.org.example:no-such-target"
if dead=$(free_port); then
	must_not_mount "portal nobody listens on" "iscsi://127.0.0.1:$dead/$TGT_IQN"
fi

# ---------------------------------------------------------------- mount

rc=0
timeout -k 10 120 "$iserfuse" -o "initiator_name=$initiator" "$TGT_URL" "$mnt" \
	>"$work/mount.out" 2>"$work/mount.err" </dev/null || rc=$?
if ((rc == 0)); then
	pass "mount $TGT_URL exits 0"
else
	fail "mount $TGT_URL exits 0 (got $rc)"
	note "$work/mount.err"
fi
if ! is_mounted "$mnt"; then
	fail "$mnt is mounted"
	echo "$passed passed, $failed failed"
	exit 1
fi
pass "$mnt is mounted"
daemon_pid=$(daemon_pids "$mnt" | head -n 1)
check "daemon process found (pid ${daemon_pid:-none})" test -n "$daemon_pid"

listing=$(names "$mnt") || true
check_eq "the mount lists exactly lun1, lun2, .stats and by-id" "$listing" ".stats by-id lun1 lun2"
for lun in lun1 lun2; do
	check_eq "$lun is $size bytes" "$(stat -c %s "$mnt/$lun" 2>&1)" "$size"
done
check_eq ".stats is 0 bytes to stat, as a /proc file" "$(stat -c %s "$mnt/.stats" 2>&1)" 0
check_eq ".stats: cat reads its text to the end (luns 2, then the path lines)" \
	"$(awk '$1 == "luns" { print $2 } $1 == "path0" { print "path0" }' "$mnt/.stats" 2>&1 | tr '\n' ' ')" "2 path0 "

# ---------------------------------------------------------------- I/O

# io_checks LUN BACKING: unaligned writes of random data, read back through
# the mount and found in the backing file.
# read_tail WHAT FILE OFFSET WANT: one 4 KiB read at OFFSET succeeds (no
# EIO, no hang to the timeout) and returns WANT bytes.
read_tail() {
	local rc=0 flags=${6:+,$6}
	rm -f "$work/tail"
	timeout -k 10 60 dd if="$2" of="$work/tail" bs=8192 count=1 iflag=skip_bytes$flags skip="$3" status=none \
		2>"$work/log" || rc=$?
	if ((rc == 0)); then
		check_eq "$1" "$(stat -c %s "$work/tail")" "$4"
		if (($4 > 0)); then
			check "$1: the bytes are the LUN's" cmp "$work/tail" <(bytes "$5" "$3" "$4")
		fi
	else
		fail "$1 (dd exit $rc)"
		note "$work/log"
	fi
}

io_checks() {
	local lun=$1 img=$2 f=$mnt/$1 off count spec
	local -a specs=(
		0:1 1:511 511:513 4095:4097 12345:4095 65537:65537 1048575:513
		33554431:65537 "$((size - 4097)):4097" "$((size - 1)):1"
	)
	for spec in "${specs[@]}"; do
		off=${spec%%:*}
		count=${spec##*:}
		head -c "$count" /dev/urandom >"$work/chunk"
		if ! timeout -k 10 120 dd if="$work/chunk" of="$f" bs="$count" count=1 iflag=fullblock \
			oflag=seek_bytes seek="$off" conv=notrunc,fsync status=none 2>"$work/log"; then
			fail "$lun: write $count bytes at $off"
			note "$work/log"
			continue
		fi
		drop_cache "$f"
		if timeout -k 10 120 dd if="$f" bs=64K iflag=skip_bytes,count_bytes,fullblock skip="$off" count="$count" \
			status=none >"$work/got" 2>"$work/log" && cmp -s "$work/chunk" "$work/got"; then
			pass "$lun: $count bytes at $off read back"
		else
			fail "$lun: $count bytes at $off read back"
			note "$work/log"
		fi
		if bytes "$img" "$off" "$count" | cmp -s "$work/chunk" -; then
			pass "$lun: $count bytes at $off are in $(basename "$img")"
		else
			fail "$lun: $count bytes at $off are in $(basename "$img")"
		fi
	done

	# The end of the LUN.
	head -c 1024 /dev/urandom >"$work/chunk"
	expect_fail "$lun: a write starting at the end fails" \
		dd if="$work/chunk" of="$f" bs=512 count=1 oflag=seek_bytes seek="$size" conv=notrunc,fsync status=none
	expect_fail "$lun: a write starting past the end fails" \
		dd if="$work/chunk" of="$f" bs=512 count=1 oflag=seek_bytes seek="$((size + 4096))" conv=notrunc,fsync status=none
	# A write across the end is short: what fits is stored.
	timeout -k 10 120 dd if="$work/chunk" of="$f" bs=1024 count=1 oflag=seek_bytes seek="$((size - 100))" \
		conv=notrunc,fsync status=none >/dev/null 2>&1 || true
	if cmp -s <(head -c 100 "$work/chunk") <(bytes "$img" "$((size - 100))" 100); then
		pass "$lun: a write across the end stores the 100 bytes that fit"
	else
		fail "$lun: a write across the end stores the 100 bytes that fit"
	fi
	# O_DIRECT across the end, in one FUSE request: refused (the kernel's
	# asynchronous direct I/O would report a short reply as EIO), nothing
	# stored.
	head -c 8192 /dev/urandom >"$work/chunk8k"
	bytes "$img" "$((size - 4096))" 4096 >"$work/tail.before"
	expect_fail "$lun: an O_DIRECT write across the end fails" \
		dd if="$work/chunk8k" of="$f" bs=8192 count=1 oflag=direct,seek_bytes seek="$((size - 4096))" \
		conv=notrunc status=none
	if grep -q 'File too large' "$work/log" && bytes "$img" "$((size - 4096))" 4096 | cmp -s "$work/tail.before" -; then
		pass "$lun: an O_DIRECT write across the end is EFBIG and stores nothing"
	else
		fail "$lun: an O_DIRECT write across the end is EFBIG and stores nothing"
		note "$work/log"
	fi
	check_eq "$lun: still $size bytes after writes at the end" "$(stat -c %s "$f" 2>&1)" "$size"
	drop_cache "$f"
	read_tail "$lun: a read at the end returns 0 bytes" "$f" "$size" 0
	read_tail "$lun: a read across the end returns the 100 bytes before it" "$f" "$((size - 100))" 100 "$img"
	read_tail "$lun: an O_DIRECT read at the end returns 0 bytes" "$f" "$size" 0 "$img" direct
	read_tail "$lun: an O_DIRECT read across the end returns the 4096 bytes before it" \
		"$f" "$((size - 4096))" 4096 "$img" direct

	# Everything, both ways round.
	drop_cache "$f"
	expect_ok "$lun: whole file equals $(basename "$img")" cmp "$f" "$img" || true
}

io_checks lun1 "$work/tgtd/disk512.img"
io_checks lun2 "$work/tgtd/disk4k.img"

# ---------------------------------------------------------------- qemu-img

head -c $((16 * 1024 * 1024)) /dev/urandom >"$work/src.raw"

if qemu-img info -f raw "$mnt/lun1" >"$work/log" 2>&1 &&
	grep -q '^virtual size: 64 MiB (67108864 bytes)' "$work/log"; then
	pass "qemu-img info: lun1 has virtual size 64 MiB"
else
	fail "qemu-img info: lun1 has virtual size 64 MiB"
	note "$work/log"
fi

# raw onto lun1.  qemu-img compare treats the tail of the larger image as
# compared against zeros, so lun1 is zeroed first; a byte planted in the tail
# afterwards shows that the tail is really compared.
expect_ok "lun1 zeroed with dd" \
	dd if=/dev/zero of="$mnt/lun1" bs=1M count=64 conv=notrunc,fsync status=none || true
expect_ok "qemu-img convert -n -O raw (16 MiB) onto lun1" \
	qemu-img convert -n -f raw -O raw "$work/src.raw" "$mnt/lun1" || true
drop_cache "$mnt/lun1"
expect_ok "qemu-img compare: raw source equals lun1" \
	qemu-img compare -f raw -F raw "$work/src.raw" "$mnt/lun1" || true
check "lun1's first 16 MiB are the source, in disk512.img" \
	cmp -s -n $((16 * 1024 * 1024)) "$work/src.raw" "$work/tgtd/disk512.img"
printf '\377' | dd of="$mnt/lun1" bs=1 oflag=seek_bytes seek=$((40 * 1024 * 1024)) conv=notrunc,fsync status=none
rc=0
qemu-img compare -f raw -F raw "$work/src.raw" "$mnt/lun1" >"$work/log" 2>&1 || rc=$?
if ((rc == 1)); then
	pass "qemu-img compare: a byte changed past 16 MiB is a difference"
else
	fail "qemu-img compare: a byte changed past 16 MiB is a difference (exit $rc, want 1)"
	note "$work/log"
fi

# qcow2 onto lun2: qemu-img creates the image, truncating the file (which a
# LUN file accepts and ignores).
expect_ok "qemu-img convert -O qcow2 onto lun2" \
	qemu-img convert -f raw -O qcow2 "$work/src.raw" "$mnt/lun2" || true
check_eq "lun2 is still $size bytes" "$(stat -c %s "$mnt/lun2" 2>&1)" "$size"
drop_cache "$mnt/lun2"
expect_ok "qemu-img check lun2" qemu-img check -f qcow2 "$mnt/lun2" || true
expect_ok "qemu-img compare: raw source equals the qcow2 on lun2" \
	qemu-img compare -f raw -F qcow2 "$work/src.raw" "$mnt/lun2" || true
expect_ok "qemu-img check on the qcow2 in disk4k.img" qemu-img check -f qcow2 "$work/tgtd/disk4k.img" || true

# ---------------------------------------------------------------- ext4

if expect_ok "mkfs.ext4 -F lun1" mkfs.ext4 -q -F "$mnt/lun1" &&
	expect_ok "mount -o loop lun1" mount -o loop "$mnt/lun1" "$loopdir"; then
	(
		cd "$loopdir"
		mkdir -p sub/dir
		for i in 1 2 3 4 5; do
			head -c $((i * 333333 + 7)) /dev/urandom >"f$i"
		done
		head -c 3000000 /dev/urandom >sub/dir/big
		echo "hello from iserfuse" >sub/small
		sha256sum f1 f2 f3 f4 f5 sub/dir/big sub/small
	) >"$work/sums"
	sync
	expect_ok "umount the loop file system" umount "$loopdir" || true
	drop_cache "$mnt/lun1"
	expect_ok "e2fsck -fn lun1" e2fsck -fn "$mnt/lun1" || true
	drop_cache "$mnt/lun1"
	if expect_ok "mount -o loop,ro lun1 again" mount -o loop,ro "$mnt/lun1" "$loopdir"; then
		if (cd "$loopdir" && sha256sum --quiet -c "$work/sums") >"$work/log" 2>&1; then
			pass "files on ext4 keep their checksums across a remount"
		else
			fail "files on ext4 keep their checksums across a remount"
			note "$work/log"
		fi
		expect_ok "umount the loop file system again" umount "$loopdir" || true
	fi
fi

# ---------------------------------------------------------------- unmount

if [[ -n $daemon_pid ]]; then
	expect_ok "fusermount3 -u" fusermount3 -u "$mnt" || true
	check "$mnt no longer mounted" not_mounted "$mnt"
	if _targets_wait_gone "$daemon_pid" 10; then
		pass "daemon exits within 10 s of the unmount"
		daemon_pid=''
	else
		fail "daemon exits within 10 s of the unmount"
	fi
else
	expect_ok "fusermount3 -u" fusermount3 -u "$mnt" || true
fi

# ---------------------------------------------------------------- -o ro, one LUN

rc=0
timeout -k 10 120 "$iserfuse" -o ro -o "initiator_name=$initiator" "$TGT_URL/2" "$romnt" \
	>"$work/mount.out" 2>"$work/mount.err" </dev/null || rc=$?
if ((rc == 0)) && is_mounted "$romnt"; then
	pass "mount -o ro $TGT_URL/2"
	listing=$(names "$romnt") || true
	check_eq "the read-only mount lists exactly lun2, .stats and by-id" "$listing" ".stats by-id lun2"
	check_eq "-o ro: lun2 is root's, mode 400" "$(stat -c '%U %a' "$romnt/lun2" 2>&1)" "root 400"
	expect_fail "-o ro: a write fails" \
		dd if=/dev/zero of="$romnt/lun2" bs=4096 count=1 conv=notrunc,fsync status=none
	if cmp -s <(bytes "$romnt/lun2" 0 1048576) <(bytes "$work/tgtd/disk4k.img" 0 1048576); then
		pass "-o ro: reads match disk4k.img"
	else
		fail "-o ro: reads match disk4k.img"
	fi
	ro_pid=$(daemon_pids "$romnt" | head -n 1)
	expect_ok "fusermount3 -u the read-only mount" fusermount3 -u "$romnt" || true
	if [[ -n $ro_pid ]] && ! _targets_wait_gone "$ro_pid" 10; then
		fail "read-only daemon exits within 10 s of the unmount"
	fi
else
	fail "mount -o ro $TGT_URL/2 (exit $rc)"
	note "$work/mount.err"
fi

# ---------------------------------------------------------------- an unprivileged user

# as_user CMD...: run CMD as the throwaway user, bounded in time.
as_user() {
	timeout -k 10 120 runuser -u "$uuser" -- "$@"
}

# A throwaway user mounts through fusermount3 (setuid root), without
# allow_other, with HOME in a directory of its own (the generated initiator
# name is kept there): the LUN files are that user's with mode 600, dd and
# cmp work through the mount, and fusermount3 -u by that user unmounts and
# ends the daemon.
unprivileged_checks() {
	local tool rc=0 upid='' off=$((1024 * 1024 + 3)) count=$((1024 * 1024 + 1001))
	for tool in useradd userdel runuser; do
		if ! command -v "$tool" >/dev/null 2>&1; then
			fail "unprivileged mount: $tool installed"
			return 0
		fi
	done
	if [[ ! -u $(command -v fusermount3) ]]; then
		fail "unprivileged mount: fusermount3 is setuid root"
		return 0
	fi
	if ! useradd -M -d /nonexistent -s /usr/sbin/nologin "iserfuse-e2e-$$" >"$work/log" 2>&1; then
		fail "unprivileged mount: useradd iserfuse-e2e-$$"
		note "$work/log"
		return 0
	fi
	uuser=iserfuse-e2e-$$
	pass "throwaway user $uuser created"
	udir=$(mktemp -d "${TMPDIR:-/tmp}/iserfuse-e2e-user.XXXXXX")
	chmod 755 "$udir"
	mkdir "$udir/mnt" "$udir/home"
	head -c "$count" /dev/urandom >"$udir/chunk"
	chown -R "$uuser:" "$udir"
	if ! as_user test -x "$iserfuse"; then
		fail "$uuser can run $iserfuse (is a parent directory closed to others?)"
		return 0
	fi
	# libfuse opens /dev/fuse as the calling user before it asks fusermount3.
	if ! as_user test -r /dev/fuse -a -w /dev/fuse; then
		fuse_mode=$(stat -c %a /dev/fuse)
		chmod go+rw /dev/fuse
		echo "# /dev/fuse is mode $fuse_mode here: opened to others for this check (restored after)"
	fi

	as_user env -u XDG_STATE_HOME -u STATE_DIRECTORY HOME="$udir/home" "$iserfuse" "$TGT_URL" "$udir/mnt" \
		>"$work/user.out" 2>"$work/user.err" </dev/null || rc=$?
	if [[ -n $fuse_mode ]]; then
		chmod "$fuse_mode" /dev/fuse
		fuse_mode=''
	fi
	if ((rc != 0)) || ! is_mounted "$udir/mnt"; then
		fail "$uuser mounts $TGT_URL with fusermount3 (exit $rc)"
		note "$work/user.err"
		return 0
	fi
	pass "$uuser mounts $TGT_URL with fusermount3"
	upid=$(daemon_pids "$udir/mnt" | head -n 1)
	check_eq "the daemon runs as $uuser" "$(stat -c %U "/proc/${upid:-0}" 2>&1)" "$uuser"
	if grep -F " $udir/mnt fuse.iserfuse " /proc/mounts | grep -q allow_other; then
		fail "the mount is not allow_other"
	else
		pass "the mount is not allow_other"
	fi
	check "the initiator name is kept in $uuser's HOME" test -s "$udir/home/.local/state/iserfuse/initiatorname"
	check_eq "lun1 is $uuser's, mode 600" "$(as_user stat -c '%U %a' "$udir/mnt/lun1" 2>&1)" "$uuser 600"
	check_eq "the directory is $uuser's, mode 700" "$(as_user stat -c '%U %a' "$udir/mnt" 2>&1)" "$uuser 700"
	expect_ok "$uuser writes $count bytes at $off with dd" \
		runuser -u "$uuser" -- dd if="$udir/chunk" of="$udir/mnt/lun1" bs=64K iflag=fullblock \
		oflag=seek_bytes seek="$off" conv=notrunc,fsync status=none || true
	as_user dd if="$udir/mnt/lun1" iflag=nocache count=0 status=none 2>/dev/null || true
	expect_ok "$uuser reads them back (cmp through the mount)" \
		runuser -u "$uuser" -- cmp -n "$count" "$udir/chunk" "$udir/mnt/lun1" 0 "$off" || true
	if bytes "$work/tgtd/disk512.img" "$off" "$count" | cmp -s "$udir/chunk" -; then
		pass "$uuser's bytes are in disk512.img"
	else
		fail "$uuser's bytes are in disk512.img"
	fi
	# chmod is kept and obeyed; chown is root's.
	check "$uuser: chmod 400 lun1" as_user chmod 400 "$udir/mnt/lun1"
	check_eq "lun1 is mode 400 after chmod" "$(as_user stat -c %a "$udir/mnt/lun1" 2>&1)" 400
	check "$uuser: test -w lun1 is false after chmod 400" as_user bash -c "! test -w '$udir/mnt/lun1'"
	rc=0
	as_user dd if="$udir/chunk" of="$udir/mnt/lun1" bs=4k count=1 conv=notrunc status=none 2>"$work/log" || rc=$?
	if ((rc != 0)) && grep -q 'Permission denied' "$work/log"; then
		pass "$uuser: writing lun1 after chmod 400 is EACCES"
	else
		fail "$uuser: writing lun1 after chmod 400 is EACCES (dd exit $rc)"
		note "$work/log"
	fi
	check "$uuser: chmod 600 lun1" as_user chmod 600 "$udir/mnt/lun1"
	rc=0
	as_user chown root "$udir/mnt/lun1" 2>"$work/log" || rc=$?
	if ((rc != 0)) && grep -q 'Operation not permitted' "$work/log"; then
		pass "$uuser: chown root lun1 is EPERM"
	else
		fail "$uuser: chown root lun1 is EPERM (exit $rc)"
		note "$work/log"
	fi
	expect_ok "fusermount3 -u as $uuser" runuser -u "$uuser" -- fusermount3 -u "$udir/mnt" || true
	check "$udir/mnt no longer mounted" not_mounted "$udir/mnt"
	if [[ -n $upid ]] && _targets_wait_gone "$upid" 10; then
		pass "$uuser's daemon exits within 10 s of the unmount"
	else
		fail "$uuser's daemon exits within 10 s of the unmount (pid ${upid:-none})"
	fi

	# root's mount with allow_other: the modes of the directory, by-id/ and
	# .stats hold for others as the LUN files' do (umask 077: 0700, 0400).
	mkdir "$udir/ao"
	if "$iserfuse" -o allow_other "$TGT_URL" "$udir/ao" >"$work/ao.out" 2>&1 </dev/null; then
		# (expect_fail runs a command, not a shell function: runuser itself)
		expect_fail "$uuser: ls of root's allow_other mount (mode 0700) is refused" \
			runuser -u "$uuser" -- ls "$udir/ao"
		check "$uuser: ls said Permission denied" grep -q 'Permission denied' "$work/log"
		expect_fail "$uuser: reading root's .stats (mode 0400) is refused" \
			runuser -u "$uuser" -- cat "$udir/ao/.stats"
		check "$uuser: cat said Permission denied" grep -q 'Permission denied' "$work/log"
		expect_fail "$uuser: reading root's lun1 (mode 0600) is refused" \
			runuser -u "$uuser" -- head -c 1 "$udir/ao/lun1"
		expect_ok "root: ls of the allow_other mount" ls "$udir/ao/by-id" || true
		fusermount3 -u "$udir/ao" || true
	else
		fail "root mounts with -o allow_other"
		note "$work/ao.out"
	fi
}
unprivileged_checks

echo "$passed passed, $failed failed"
((failed == 0))
