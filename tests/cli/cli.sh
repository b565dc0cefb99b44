#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The "cli" suite: what an administrator touches.
#
#   cli.sh ISERFUSE_BINARY UNIT_FILE MAN_PAGE
#
# --help (every option with its default) and --version (libfuse and
# libibverbs versions, checked against pkg-config and the library file);
# configuration file errors (file:line, exit 1, nothing mounted); a mount
# from a configuration section; the fstab forms through mount.fuse3 and
# mount(8) (fstab words such as _netdev and nofail accepted); .stats values
# before and after a known dd, each key documented in the man page; by-id/
# names against iscsi-inq's VPD 0x83;
# --list with CHAP credentials and its progress line on a terminal; log
# lines naming the target; READY=1 to $NOTIFY_SOCKET once mounted; every
# runnable command of the man page's EXAMPLES (URLs and paths swapped); the
# systemd unit through systemd-analyze verify; the man page through man and
# mandoc.
#
# Prints "ok - ..." / "not ok - ..." and "N passed, M failed"; exits 1 if
# anything failed, 77 (skip) when not root.  Needs root, /dev/fuse, tgt,
# fuse3, libiscsi-bin; systemd-analyze, mandoc and man when present.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../lib/targets.sh
. "$here/../lib/targets.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/report.sh
. "$here/../lib/report.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/suite.sh
. "$here/../lib/suite.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/mount.sh
. "$here/../lib/mount.sh"

if [[ $# -ne 3 ]]; then
	echo "usage: $0 ISERFUSE_BINARY UNIT_FILE MAN_PAGE" >&2
	exit 2
fi
iserfuse=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
unit=$2
manpage=$3
if [[ $(id -u) -ne 0 ]]; then
	echo "# SKIP: the cli suite runs tgtd and mounts, which needs root"
	exit 77
fi

initiator=iqn.2026-11.org.example:cli
work=$(mktemp -d /tmp/iserfuse-cli.XXXXXX)
sanitizer_logs "$work"
mnt=$work/mnt
mkdir -p "$mnt"

is_mounted() { grep -qF " $1 " /proc/mounts; }
cleanup() {
	local m rc=$?
	set +e
	[[ -n ${uring_was:-} ]] && echo "$uring_was" >"$uring_param"
	for m in "$mnt" "$work/mnt2" "$work/ex-disk" "$work/ex-ro"; do
		if is_mounted "$m"; then
			fusermount3 -u "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
		fi
	done
	tgtd_stop "$work/tgt"
	sanitizer_check || rc=1
	if ((rc == 0 && failed == 0)); then
		rm -rf "$work"
	else
		rm -f "$work"/tgt/*.img
		echo "# logs kept in $work"
	fi
	exit "$rc"
}
trap cleanup EXIT

# run_ok WHAT CMD...: CMD exits 0 within 60 s (output in $work/out).
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
# run_fail1 WHAT PATTERN CMD...: CMD exits 1, says one line, PATTERN (grep -E), and mounts nothing.
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
unmount() {
	fusermount3 -u "$1" 2>/dev/null || umount "$1" 2>/dev/null || true
	for _ in $(seq 50); do is_mounted "$1" || return 0; sleep 0.1; done
	return 1
}
stat_of() { awk -v k="$2" '$1 == k { print $2 }' "$1/.stats"; }

# ---------------------------------------------------------------- --help, --version
rc=0
"$iserfuse" --help >"$work/help" 2>&1 || rc=$?
check_eq "--help exits 0" "$rc" 0
# One table (gateway/settings/options.c) drives --help and must match the man page:
# every -o key --help shows, with its "(default D, MIN..MAX)", is in the
# man page's OPTIONS with the same words, and the other way round.
python3 - "$work/help" "$manpage" >"$work/table.out" 2>&1 <<'PY' || true
import re, sys
helptext = open(sys.argv[1]).read().split("\n\n")
entries, cur = {}, None
for block in helptext:
    if "iserfuse options:" in block:
        for line in block.splitlines():
            m = re.match(r"    -o ([a-z_]+)[= ]", line + " ")
            if m and "," not in line.split()[1]:
                cur = m.group(1)
                entries[cur] = line
            elif cur and line.startswith("      "):
                entries[cur] += " " + line.strip()
            else:
                cur = None
defaults = {}
for k, text in entries.items():
    m = re.search(r"(\(default [^()]*\))$", text)
    defaults[k] = m.group(1) if m else None
man = open(sys.argv[2]).read()
opts = man.split("\n.SH OPTIONS\n", 1)[1].split("\n.SH ", 1)[0]
man_keys = {}
for para in opts.split("\n.TP\n")[1:]:
    head, _, body = para.partition("\n")
    if "_netdev" in head:
        continue  # fstab words, not iserfuse options
    body = re.sub(r"\s+", " ", body.replace("\\-", "-"))
    for key in re.findall(r'(?:\\-o\s*"?\s*|\\fR, "\s*")([a-z_]+)', head):
        man_keys[key] = body
bad = []
for k, d in sorted(defaults.items()):
    if d is None:
        bad.append("--help: %s has no (default ...)" % k)
    elif k not in man_keys:
        bad.append("man page: no entry for -o %s" % k)
    elif d not in man_keys[k]:
        bad.append("man page: -o %s lacks '%s'" % (k, d))
for k in sorted(set(man_keys) - set(defaults)):
    bad.append("--help: no entry for -o %s (in the man page)" % k)
print("\n".join(bad) if bad else "same %d keys" % len(defaults))
PY
check_eq "--help and the man page list the same -o keys, defaults and ranges" "$(cat "$work/table.out")" "same 30 keys"
check_eq "--help shows the CHAP sources once" "$(grep -c 'CHAP credentials come from' "$work/help")" 1
check_eq "--help shows allow_other once" "$(grep -c -- '-o allow_other' "$work/help")" 1
rc=0
"$iserfuse" >"$work/noargs" 2>&1 || rc=$?
check_eq "no arguments: exit 1" "$rc" 1
check_eq "no arguments: one usage line" "$(wc -l <"$work/noargs") $(head -c 6 "$work/noargs")" "1 usage:"
check "--help shows the FUSE options too" grep -q -- "-o auto_unmount" "$work/help"
check "--help shows the configuration-section form" grep -q "NAME \[MOUNTPOINT\]" "$work/help"

"$iserfuse" --version >"$work/version"
fuse_ver=$(pkg-config --modversion fuse3)
ibv_build=$(pkg-config --modversion libibverbs)
ibv_run=$(readlink -f "$(ldconfig -p | awk '$1 == "libibverbs.so.1" { print $NF; exit }')")
ibv_run=${ibv_run##*.so.}
check "--version names libfuse $fuse_ver" grep -qx "libfuse $fuse_ver (built against ${fuse_ver%.*})" "$work/version"
check "--version names libibverbs $ibv_build at build time" grep -q "^libibverbs $ibv_build at build time (rdma-core ${ibv_build#*.*.})" "$work/version"
check "--version names libibverbs $ibv_run at run time" grep -q "^libibverbs $ibv_run at run time" "$work/version"

# ---------------------------------------------------------------- every option's range
# A bad value is one line naming option, value and range, exit 1, before
# anything starts (the URL's portal is never contacted: 192.0.2.1 is TEST-NET).
for bad in "login_timeout=-5|1..3600" "login_timeout=0|1..3600" "queue_depth=0|1..4096" \
	"max_io_kib=0|4..4096" "pool_slices=0|2..4096" "rescan_interval=-1|0..86400" "noop_interval=1.5|0..3600" \
	"queue_depth=5000|1..4096" "max_io_kib=6|4..4096" "login_timeout=99999999999999999999|1..3600" \
	"cache_size=2T|0..1024G" "umask=0999|0..0777" "cmd_timeout=x|0..86400" \
	"queue_depth=4097|1..4096" "login_timeout=3601|1..3600" "umask=01000|0..0777" "noop_interval=3601|0..3600" \
	"pool_slices=4097|2..4096" "replacement_timeout=86401|0..86400" "max_io_kib=4100|4..4096" \
	"max_threads=0|1..4096" "max_threads=4097|1..4096" "sessions=0|1..8" "sessions=9|1..8"; do
	kv=${bad%|*}
	range=${bad#*|}
	rc=0
	timeout 10 "$iserfuse" -o "$kv" iscsi://192.0.2.1/iqn.2026-11.org.example:none "$mnt" >"$work/out" 2>&1 || rc=$?
	check_eq "-o $kv: exit 1, one line naming option, value and range" \
		"$rc $(wc -l <"$work/out") $(grep -c "^iserfuse: bad option '$kv': .* in $range expected$" "$work/out")" "1 1 1"
done
# The multipath options' words and portals: one line naming option and value, exit 1.
for bad in "portal=203.0.113.1:0|bad port '0'" "portal=2001:db8::1|IPv6 address must be in brackets" \
	"portal=[2001:db8::1|unclosed '[' in host" "portal=|missing host" \
	"portal=user@203.0.113.1|host[:port] or [v6-address][:port] expected" \
	"multipath=yes|on or off expected" "path_selector=fastest|least-outstanding or round-robin expected" \
	"multipath=off,portal=203.0.113.1|portal= needs multipath=on"; do
	kv=${bad%%|*}
	why=${bad#*|}
	shown=${kv%%,*}
	rc=0
	timeout 10 "$iserfuse" -o "$kv" iscsi://192.0.2.1/iqn.2026-11.org.example:none "$mnt" >"$work/out" 2>&1 || rc=$?
	check_eq "-o $kv: exit 1, one line naming option and value" \
		"$rc $(wc -l <"$work/out") $(grep -cxF "iserfuse: bad option '$shown': $why" "$work/out")" "1 1 1"
done
many=portal=203.0.113.1
for i in 2 3 4 5 6 7 8 9; do many+=",portal=203.0.113.$i"; done
rc=0
timeout 10 "$iserfuse" -o "$many" iscsi://192.0.2.1/iqn.2026-11.org.example:none "$mnt" >"$work/out" 2>&1 || rc=$?
check_eq "a ninth -o portal=: exit 1, one line" \
	"$rc $(wc -l <"$work/out") $(grep -c "^iserfuse: bad option 'portal=203.0.113.9': at most 8 portals$" "$work/out")" "1 1 1"
# Each end of a range is a good value: past the option checks, the mount
# fails on the mount point that does not exist, not on an option.
for good in "queue_depth=4096,pool_slices=4096,login_timeout=3600,noop_interval=3600,max_io_kib=4096,max_threads=4096" \
	"queue_depth=1,pool_slices=2,login_timeout=1,noop_interval=0,max_io_kib=4,umask=0777,max_threads=1" \
	"replacement_timeout=86400,rescan_interval=86400,cmd_timeout=86400,cache_size=1024G,umask=0" \
	"sessions=8,multipath=on,path_selector=round-robin,portal=[2001:db8::1]:3261,portal=203.0.113.1" \
	"sessions=1,multipath=off,path_selector=least-outstanding" \
	"${many%,portal=203.0.113.8,portal=203.0.113.9},portal=203.0.113.1,portal=192.0.2.1:3260"; do
	rc=0
	timeout 10 "$iserfuse" -o "$good" iscsi://192.0.2.1/iqn.2026-11.org.example:none "$work/no-such-dir" >"$work/out" 2>&1 || rc=$?
	check_eq "-o $good: accepted (the mount point is what fails)" \
		"$rc $(grep -c 'bad option' "$work/out") $(grep -c 'no-such-dir' "$work/out")" "1 0 1"
done
printf 'options = queue_depth=16,noop_timeout=0\n' >"$work/range.conf"
rc=0
timeout 10 "$iserfuse" -o "config=$work/range.conf" iscsi://192.0.2.1/iqn.2026-11.org.example:none "$mnt" >"$work/out" 2>&1 || rc=$?
check_eq "a bad value in the configuration file: one line naming the file and line, exit 1" \
	"$rc $(wc -l <"$work/out") $(grep -c "^iserfuse: $work/range.conf:1: bad option 'noop_timeout=0': an integer in 1..3600 expected$" "$work/out")" "1 1 1"

printf 'options = sessions=2, portal=203.0.113.1:70000\n' >"$work/range.conf"
rc=0
timeout 10 "$iserfuse" -o "config=$work/range.conf" iscsi://192.0.2.1/iqn.2026-11.org.example:none "$mnt" >"$work/out" 2>&1 || rc=$?
check_eq "a bad portal= in the configuration file: one line naming the file and line, exit 1" \
	"$rc $(wc -l <"$work/out") $(grep -c "^iserfuse: $work/range.conf:1: bad option 'portal=203.0.113.1:70000': bad port '70000'$" "$work/out")" "1 1 1"
printf 'options = multipath=off\n' >"$work/range.conf"
rc=0
timeout 10 "$iserfuse" -o "config=$work/range.conf,portal=203.0.113.1" iscsi://192.0.2.1/iqn.2026-11.org.example:none "$mnt" >"$work/out" 2>&1 || rc=$?
check_eq "multipath=off in the configuration file and a portal= on the command line: one line, exit 1" \
	"$rc $(wc -l <"$work/out") $(grep -c "^iserfuse: $work/range.conf:1: bad option 'multipath=off': portal= needs multipath=on$" "$work/out")" "1 1 1"

# IPv6 portals keep their brackets in messages.
v6port=$(free_port)
rc=0
timeout 20 "$iserfuse" -o login_timeout=2 "iscsi://[::1]:$v6port/iqn.2026-11.org.example:none" "$mnt" >"$work/out" 2>&1 || rc=$?
check "an IPv6 portal in a message keeps its brackets ([::1]:$v6port), exit $rc" grep -q "\[::1\]:$v6port" "$work/out" ||
	note "$work/out"

# ---------------------------------------------------------------- target
if ! tgtd_start "$work/tgt" 16M 0 >"$work/tgt.out" 2>&1; then
	fail "tgtd starts"
	note "$work/tgt.out"
	summary
	exit 1
fi
url=$TGT_URL
port=$(<"$work/tgt/port")

# ---------------------------------------------------------------- FUSE over io_uring: which path serves the mount
# The kernel offers the rings only to mounts made while enable_uring is Y;
# the suite sets it for these mounts and always puts back what it found.
# ISERFUSE_IO_URING=on (.ci/run's io_uring pass: every mount requires the
# rings) means the rings are expected: an enable_uring that cannot be set
# fails, and enable_uring stays Y (the suites running alongside mount
# meanwhile), so the enable_uring=N checks are left to the first pass.
uring_param=/sys/module/fuse/parameters/enable_uring
uring_pass=''
[[ ${ISERFUSE_IO_URING:-} == on ]] && uring_pass=1
if [[ -w $uring_param ]]; then
	uring_was=$(cat "$uring_param")
	if [[ -n $uring_pass ]]; then
		skip "enable_uring=N: io_uring=auto and io_uring=on" "the io_uring pass keeps enable_uring Y (checked in the first pass)"
	else
		echo N >"$uring_param"
		if run_ok "enable_uring=N: -o io_uring=auto mounts" "$iserfuse" "$url" "$mnt" -o io_uring=auto; then
			check_eq "enable_uring=N: io_uring=auto: .stats fuse_path dev" "$(stat_of "$mnt" fuse_path)" dev
			check_eq "enable_uring=N: io_uring=auto: .stats fuse_ring_requests 0" "$(stat_of "$mnt" fuse_ring_requests)" 0
			unmount "$mnt"
		fi
		run_fail1 "enable_uring=N: -o io_uring=on exits 1 and mounts nothing" "io_uring=on: .*enable_uring is N" \
			"$iserfuse" "$url" "$mnt" -o io_uring=on
		run_fail1 "enable_uring=N: ISERFUSE_IO_URING=on without -o io_uring= exits 1 and mounts nothing" \
			"io_uring=on: .*enable_uring is N" env ISERFUSE_IO_URING=on "$iserfuse" "$url" "$mnt"
		if run_ok "enable_uring=N: -o io_uring=auto wins over ISERFUSE_IO_URING=on" \
			env ISERFUSE_IO_URING=on "$iserfuse" "$url" "$mnt" -o io_uring=auto; then
			unmount "$mnt"
		fi
	fi
	run_fail1 "-o io_uring=sometimes exits 1" "bad option 'io_uring=sometimes'" "$iserfuse" "$url" "$mnt" -o io_uring=sometimes
	run_fail1 "ISERFUSE_IO_URING=sometimes exits 1" "^iserfuse: bad ISERFUSE_IO_URING 'sometimes': auto, on or off expected$" \
		env ISERFUSE_IO_URING=sometimes "$iserfuse" "$url" "$mnt"
	echo Y >"$uring_param"
	for mode in auto on; do
		if run_ok "enable_uring=Y: -o io_uring=$mode mounts" "$iserfuse" "$url" "$mnt" -o io_uring=$mode; then
			check_eq "enable_uring=Y: io_uring=$mode: .stats fuse_path io_uring" "$(stat_of "$mnt" fuse_path)" io_uring
			log=$work/ring-$mode.log
			: >"$log"
			dd_check "enable_uring=Y: io_uring=$mode: 64 direct 4 KiB writes" "$log" \
				if=/dev/zero of="$mnt/lun1" bs=4k count=64 oflag=direct conv=notrunc || true
			dd_check "enable_uring=Y: io_uring=$mode: 64 direct 4 KiB reads" "$log" \
				if="$mnt/lun1" of=/dev/null bs=4k count=64 iflag=direct || true
			n=$(stat_of "$mnt" fuse_ring_requests)
			check "enable_uring=Y: io_uring=$mode: 128 direct I/Os came on the rings (fuse_ring_requests $n)" \
				test "${n:-0}" -ge 128
			unmount "$mnt"
		fi
	done
	# SIGTERM with requests in flight on the rings: the usual stop, exit 0, nothing left mounted; fio's
	# I/O after the stop fails (exit 1), it does not hang (timeout's 124) or die of a signal
	what="enable_uring=Y: SIGTERM during QD32 direct writes over the rings"
	"$iserfuse" -f -o io_uring=on "$url" "$mnt" >"$work/uring-term.log" 2>&1 &
	fg_pid=$!
	if wait_lun "$mnt" 100 "$fg_pid"; then
		pass "$what: mounted"
		r0=$(stat_of "$mnt" fuse_ring_requests)
		timeout 20 fio --name=term --filename="$mnt/lun1" --size=8m --rw=randwrite --bs=4k --iodepth=32 \
			--ioengine=libaio --direct=1 --runtime=10 --time_based >"$work/uring-term.fio" 2>&1 &
		fio_pid=$!
		sleep 1
		r1=$(stat_of "$mnt" fuse_ring_requests)
		check "$what: fio's writes came on the rings in the second before the signal (fuse_ring_requests $r0 -> $r1)" \
			test "${r1:-0}" -gt "$((${r0:-0} + 32))"
		kill -TERM "$fg_pid" 2>/dev/null || true
		rc=0
		wait "$fg_pid" || rc=$?
		frc=0
		wait "$fio_pid" || frc=$?
		check_eq "$what: exit 0, nothing mounted" "$rc $(is_mounted "$mnt" && echo mounted || echo gone)" "0 gone"
		check_eq "$what: fio's I/O after the stop fails (fio exit 1, not a hang or a signal)" "$frc" 1
		((frc == 1)) || note "$work/uring-term.fio"
	else
		fail "$what: mounted"
		note "$work/uring-term.log"
		kill -TERM "$fg_pid" 2>/dev/null || true
		wait "$fg_pid" 2>/dev/null || true
	fi
	if run_ok "enable_uring=Y: -o io_uring=off mounts" "$iserfuse" "$url" "$mnt" -o io_uring=off; then
		check_eq "enable_uring=Y: io_uring=off: .stats fuse_path dev" "$(stat_of "$mnt" fuse_path)" dev
		unmount "$mnt"
	fi
	echo "$uring_was" >"$uring_param"
elif [[ -n $uring_pass ]]; then
	fail "FUSE over io_uring expected (ISERFUSE_IO_URING=on): $uring_param is not writable"
else
	skip "FUSE over io_uring" "$uring_param is not writable (kernel without CONFIG_FUSE_IO_URING)"
fi

# ---------------------------------------------------------------- configuration errors
conf=$work/iserfuse.conf
printf '# comment\ninitiator_name = %s\n[lab]\nurl = %s\ncolour = blue\n' "$initiator" "$url" >"$conf"
run_fail1 "unknown key: file and line 5, exit 1" "^iserfuse: $conf:5: unknown key 'colour' in section \[lab\]" \
	"$iserfuse" -o "config=$conf" lab "$mnt"
printf 'options = ro\nthis line has no equals sign\n' >"$conf"
run_fail1 "syntax error: line 2, exit 1" "^iserfuse: $conf:2: syntax error" "$iserfuse" -o "config=$conf" "$url" "$mnt"
printf '[lab]\nurl = %s\n\n[lab]\nurl = %s\n' "$url" "$url" >"$conf"
run_fail1 "a section twice: line 4, exit 1" "^iserfuse: $conf:4: section \[lab\] appears twice" \
	"$iserfuse" -o "config=$conf" lab "$mnt"
printf 'options = ro\n[lab]\nmountpoint = %s\n' "$mnt" >"$conf"
run_fail1 "a section without url: line 2, exit 1" "^iserfuse: $conf:2: section \[lab\] has no url" \
	"$iserfuse" -o "config=$conf" lab
printf '[lab]\nurl = %s\n' "$url" >"$conf"
run_fail1 "an unknown section name, exit 1" "'nosuch' is neither an iscsi:// URL nor a section of $conf" \
	"$iserfuse" -o "config=$conf" nosuch "$mnt"
run_fail1 "a missing -o config file, exit 1" "$work/absent.conf: No such file" \
	"$iserfuse" -o "config=$work/absent.conf" "$url" "$mnt"
printf 'options = queue_depth=16,frobnicate\n' >"$conf"
mkdir -p "$work/conf.d"
run_fail1 "a -o config that is a directory: one line, exit 1" "^iserfuse: $work/conf.d: Is a directory$" \
	"$iserfuse" -o "config=$work/conf.d" "$url" "$mnt"
run_fail1 "an empty -o config=: one line naming the option, exit 1" "^iserfuse: bad option 'config=': the path is empty$" \
	"$iserfuse" -o "config=" "$url" "$mnt"
run_fail1 "an unknown option in the file's options: file and line 1, exit 1" \
	"^iserfuse: $conf:1: unknown option 'frobnicate'\$" "$iserfuse" -o "config=$conf" "$url" "$mnt"
run_fail1 "an unknown option on the command line: one line naming it, not the target, exit 1" \
	"^iserfuse: unknown option 'bogus=1'\$" "$iserfuse" -o ro,bogus=1 "$url" "$mnt"
run_fail1 "an unknown dash option on the command line: one line naming it, exit 1" \
	"^iserfuse: unknown option '-x'\$" "$iserfuse" -x "$url" "$mnt"
# Empty items are skipped, as mount(8) does: these fail only on the closed port.
closed=iscsi://127.0.0.1:1/${url##*/}
run_fail1 "empty -o items are skipped" "^iserfuse: cannot connect to 127.0.0.1:1: " \
	"$iserfuse" -o ro,,queue_depth=5, "$closed" "$mnt"
printf 'options =\n[lab]\nurl = %s\noptions = ro,,queue_depth=5\n' "$closed" >"$conf"
run_fail1 "an empty options = and empty items in the file are skipped" "^iserfuse: cannot connect to 127.0.0.1:1: " \
	"$iserfuse" -o "config=$conf" lab "$mnt"
# Values found bad after the file is read name the file and the line too.
printf '[lab]\n# the portal\nurl = iscsi://127.0.0.1:99999/%s\n' "${url##*/}" >"$conf"
run_fail1 "a bad url = in a section: file and line 3, exit 1" "^iserfuse: $conf:3: bad URL: bad port '99999'\$" \
	"$iserfuse" -o "config=$conf" lab "$mnt"
run_fail1 "--list with a bad url = in a section: file and line 3, exit 1" "^iserfuse: $conf:3: bad URL: bad port '99999'\$" \
	"$iserfuse" --list -o "config=$conf" lab
printf '[lab]\nurl = %s\nsecret_file = %s\n' "$url" "$work/absent.secret" >"$conf"
run_fail1 "a missing secret_file = in a section: file and line 3, exit 1" \
	"^iserfuse: $conf:3: secret_file $work/absent.secret: No such file or directory\$" "$iserfuse" -o "config=$conf" lab "$mnt"
printf '[lab]\nurl = %s\nsecret_file =\n' "$url" >"$conf"
run_fail1 "an empty secret_file = in a section: file and line 3, exit 1" \
	"^iserfuse: $conf:3: key 'secret_file' is empty: a path expected\$" "$iserfuse" -o "config=$conf" lab "$mnt"
printf '[lab]\nurl = %s\nmountpoint = %s\n' "$url" "$work/absent.mnt" >"$conf"
run_fail1 "a missing mountpoint = in a section: file and line 3, exit 1" \
	"^iserfuse: $conf:3: mount point $work/absent.mnt: No such file or directory\$" "$iserfuse" -o "config=$conf" lab
printf 'options = ro\n[lab]\nurl = %s\noptions = transport=carrier-pigeon\n' "$url" >"$conf"
run_fail1 "a bad transport= in a section's options: file and line 4, exit 1" \
	"^iserfuse: $conf:4: bad option 'transport=carrier-pigeon'" "$iserfuse" -o "config=$conf" lab "$mnt"
run_fail1 "a bad log_level, exit 1" "log_level=loud" "$iserfuse" -o log_level=loud "$url" "$mnt"
# A LUN in the URL that cannot be mounted: named lun<N>, as the logs name it.
run_fail1 "a LUN the target lacks: lun7, exit 1" "^iserfuse: lun7 does not exist on $TGT_IQN\$" "$iserfuse" "$url/7" "$mnt"
run_fail1 "a LUN that is no disk (tgtd's controller): lun0, exit 1" \
	"^iserfuse: lun0 is not a disk \\(peripheral device type 0x0c\\)\$" "$iserfuse" "$url/0" "$mnt"

# ---------------------------------------------------------------- a mount from a configuration section
cat >"$conf" <<EOF
# iserfuse.conf for the cli suite
initiator_name = $initiator
options = queue_depth=8, noop_interval=10, cache_size=0

[lab]
url = $url
mountpoint = $mnt
options = umask=022
EOF
if run_ok "iserfuse lab mounts section [lab] on its mountpoint" "$iserfuse" -o "config=$conf" lab; then
	check "the section's options apply (umask=022: lun1 is 0644)" test "$(stat -c %a "$mnt/lun1")" = 644
	check_eq "the mount shows lun1, .stats and by-id" "$(ls -A "$mnt" | tr '\n' ' ')" ".stats by-id lun1 "

	# .stats: a known dd moves the counters by known amounts.
	before=$(cat "$mnt/.stats")
	cp "$mnt/.stats" "$work/stats0"
	keys=$(awk '{ print $1 }' "$work/stats0" | tr '\n' ' ')
	want="transport fuse_path mr_registrations payload_bytes_copied rmw_bytes_copied commands bytes_read bytes_written queue_depth queue_depth_max pool_bytes pool_slices pool_in_use pool_in_use_max latency_p50_us latency_p90_us latency_p99_us reconnects tx_direct tx_kicks event_wakeups luns cache_bytes cache_hits cache_misses cache_readahead_bytes cache_readahead_used_bytes cache_readahead_wasted_bytes cache_dirty_blocks cache_writeback_blocks cache_bytes_copied scsi_retries unit_attentions rescans capacity_changes fuse_ring_requests worker_restarts requests_resent paths paths_up paths_refused failovers path0 "
	check_eq ".stats keys" "$keys" "$want"
	# every key .stats prints is explained in the man page's .stats entry (FILES IN THE MOUNT)
	statsdoc=$(sed -n '/^\.SH FILES IN THE MOUNT/,/^\.SH/p' "$manpage" | sed -n '/^\.B \.stats$/,/^\.RE$/p')
	undocumented=''
	for k in $keys; do
		grep -qw -- "$k" <<<"$statsdoc" || undocumented+="$k "
	done
	check_eq "every .stats key is documented in the man page's .stats entry" "$undocumented" ""
	check_eq ".stats: transport tcp" "$(stat_of "$mnt" transport)" tcp
	check_eq ".stats: pool_slices = queue_depth from the file's options (8)" "$(stat_of "$mnt" pool_slices)" 8
	check_eq ".stats: luns 1" "$(stat_of "$mnt" luns)" 1
	check_eq ".stats: stat size = bytes read" "$(stat -c %s "$mnt/.stats")" "$(wc -c <"$mnt/.stats")"
	c0=$(awk '$1=="commands"{print $2}' "$work/stats0")
	r0=$(awk '$1=="bytes_read"{print $2}' "$work/stats0")
	w0=$(awk '$1=="bytes_written"{print $2}' "$work/stats0")
	m0=$(awk '$1=="rmw_bytes_copied"{print $2}' "$work/stats0")
	x0=$(awk '$1=="tx_direct"{print $2}' "$work/stats0")
	dd if=/dev/urandom of="$work/pattern" bs=64k count=1 status=none
	dd_check ".stats: 64 KiB written" "" if="$work/pattern" of="$mnt/lun1" bs=64k seek=3 conv=notrunc,fsync || true
	dd_check ".stats: 2 MiB read" "" if="$mnt/lun1" of=/dev/null bs=1M count=2 iflag=direct || true
	check ".stats: 3 bytes written at byte 300" \
		bash -c "printf xyz | dd of='$mnt/lun1' bs=3 seek=100 conv=notrunc status=none"
	c1=$(stat_of "$mnt" commands)
	r1=$(stat_of "$mnt" bytes_read)
	w1=$(stat_of "$mnt" bytes_written)
	m1=$(stat_of "$mnt" rmw_bytes_copied)
	x1=$(stat_of "$mnt" tx_direct)
	check ".stats: commands grew by at least 4 ($c0 -> $c1)" test "$c1" -ge $((c0 + 4))
	check ".stats: tx_direct grew (FUSE workers wrote commands to the idle connection: $x0 -> $x1)" test "$x1" -gt "$x0"
	check ".stats: bytes_read grew by at least 2 MiB ($r0 -> $r1)" test "$r1" -ge $((r0 + 2097152))
	check_eq ".stats: bytes_written grew by 64 KiB + one 512-byte block" "$((w1 - w0))" $((65536 + 512))
	check_eq ".stats: rmw_bytes_copied grew by 509 (3 bytes written into a 512-byte block)" "$((m1 - m0))" 509
	p50=$(stat_of "$mnt" latency_p50_us)
	p90=$(stat_of "$mnt" latency_p90_us)
	p99=$(stat_of "$mnt" latency_p99_us)
	check ".stats: 0 < p50 <= p90 <= p99 ($p50 $p90 $p99 us)" test "$p50" -gt 0 -a "$p50" -le "$p90" -a "$p90" -le "$p99"
	check_eq ".stats: nothing outstanding when idle" "$(stat_of "$mnt" queue_depth)" 0
	check ".stats is read-only" bash -c "! echo x 2>/dev/null >'$mnt/.stats'"
	[[ $before != "$(cat "$mnt/.stats")" ]] && pass ".stats: each open is a new snapshot" || fail ".stats: each open is a new snapshot"

	# by-id/ against libiscsi's view of VPD 0x83 (iscsi-inq prints binary designators raw).
	timeout 30 iscsi-inq -i "$initiator-inq" -e 1 -c 131 "$url/1" >"$work/inq" 2>&1 || true
	t10=$(awk -F'[][]' '/^Designator Type:\(1\)/ { t = 1; next } t && /^Designator:/ { print $2; exit }' "$work/inq" |
		tr -s ' ' '_')
	naa=$(grep -c '^Designator Type:(3) NAA' "$work/inq" || true)
	check "iscsi-inq shows a T10 vendor ID ($t10) and $naa NAA designator(s)" test -n "$t10" -a "$naa" -ge 1
	check_eq "by-id/t10-$t10 -> ../lun1" "$(readlink "$mnt/by-id/t10-$t10" || true)" ../lun1
	check_eq "one by-id/wwn-0x... per NAA designator" "$(find "$mnt/by-id" -name 'wwn-0x*' | wc -l)" "$naa"
	firsts=$(awk -F'[][]' '/^Designator Type:\(3\)/ { n = 1; next } n && /^Designator:/ { printf "%s", substr($2, 1, 1); n = 0 }' "$work/inq" | od -An -tx1 | tr -d ' \n' | sed 's/0a$//')
	mine=$(cd "$mnt/by-id" && for f in wwn-0x*; do printf '%s' "${f:6:2}"; done)
	check_eq "the wwn names start with the NAA bytes iscsi-inq shows" "$(echo "$mine" | fold -w2 | sort | tr -d '\n')" "$(echo "$firsts" | fold -w2 | sort | tr -d '\n')"
	# udev's scsi_id prefers NAA 6 (IEEE Registered Extended) to tgtd's NAA 3 (locally assigned), which comes first
	naa6=$(cd "$mnt/by-id" && for f in wwn-0x6*; do [[ -e $f ]] && printf '%s' "${f#wwn-0x}"; done)
	check "tgtd reports an NAA 6 designator ($naa6)" test "${#naa6}" -eq 32
	check_eq "by-id/scsi-<id> is udev's name: 3 and the NAA 6 designator" "$(cd "$mnt/by-id" && echo scsi-*)" "scsi-3$naa6"
	check "by-id links resolve to lun1" cmp -n 65536 "$mnt/by-id/t10-$t10" "$mnt/lun1"
	check "fusermount3 -u unmounts" unmount "$mnt"
fi

# ---------------------------------------------------------------- the command line wins over the file
if run_ok "iserfuse NAME MOUNTPOINT with -o ro on the command line" "$iserfuse" -o "config=$conf,ro" lab "$mnt"; then
	check_eq "-o ro: lun1 is 0444 & ~022" "$(stat -c %a "$mnt/lun1")" 444
	check "-o ro: writing fails" bash -c "! dd if=/dev/zero of='$mnt/lun1' bs=512 count=1 conv=notrunc status=none 2>/dev/null"
	unmount "$mnt" || true
fi

printf 'options = ro\n[rolab]\nurl = %s\noptions = initiator_name=%s\n' "$url" "$initiator" >"$work/ro.conf"
if run_ok "options = ro in the file's global part" "$iserfuse" -o "config=$work/ro.conf" rolab "$mnt"; then
	check "the file's ro reaches the kernel mount" grep -qE " $mnt fuse.iserfuse ro[, ]" /proc/mounts
	check_eq "the file's ro: lun1 is 0400" "$(stat -c %a "$mnt/lun1")" 400
	unmount "$mnt" || true
fi
# -o rw on the command line undoes the file's ro: the files and the kernel mount are read-write.
if run_ok "-o rw on the command line over the file's ro" "$iserfuse" -o "config=$work/ro.conf,rw" rolab "$mnt"; then
	check "-o rw: the kernel mount is rw" grep -qE " $mnt fuse.iserfuse rw[, ]" /proc/mounts
	check_eq "-o rw: lun1 is 0600" "$(stat -c %a "$mnt/lun1")" 600
	check "-o rw: writing works" dd if=/dev/zero of="$mnt/lun1" bs=512 count=1 conv=notrunc,fsync status=none
	unmount "$mnt" || true
fi
if run_ok "-o ro,rw: the last word wins" "$iserfuse" -o "ro,rw,initiator_name=$initiator" "$url" "$mnt"; then
	check "-o ro,rw: writing works on a rw kernel mount" bash -c \
		"grep -qE ' $mnt fuse.iserfuse rw[, ]' /proc/mounts && dd if=/dev/zero of='$mnt/lun1' bs=512 count=1 conv=notrunc,fsync status=none"
	unmount "$mnt" || true
fi

# The initiator name is an iSCSI name (RFC 7143 §4.2.7): anything else is one line, exit 1.
for bad in "" "notaniqn" "iqn.2026-11.org.example:a b" "iqn.26-11.org.example" "eui.12345" "naa.xyz"; do
	run_fail1 "-o initiator_name='$bad': one line, exit 1" "^iserfuse: bad option 'initiator_name=$bad': " \
		"$iserfuse" -o "initiator_name=$bad" "$url" "$mnt"
	check_eq "-o initiator_name='$bad': one line" "$(wc -l <"$work/out")" 1
done
# A name that cannot be kept is said (a new one at every start breaks a target's ACL).
rc=0
timeout 60 setpriv --reuid=65534 --regid=65534 --clear-groups env -u XDG_STATE_HOME -u STATE_DIRECTORY HOME=/nonexistent \
	"$iserfuse" --list "$url" >"$work/out" 2>&1 || rc=$?
check "a generated initiator name that cannot be kept is a warning" \
	grep -q "cannot keep the generated initiator name .*-o initiator_name=" "$work/out"
# --list of a target the portal does not have: one line, exit 1.
run_fail1 "--list of a target the portal does not have: exit 1" "^iserfuse: target iqn.2026-11.org.example:nosuch is not among the 1 target\\(s\\) behind 127.0.0.1:$port$" \
	"$iserfuse" --list -o "initiator_name=$initiator" "iscsi://127.0.0.1:$port/iqn.2026-11.org.example:nosuch"

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
run_fail1_any() { # like run_fail1, but the mount point may stay mounted (stale)
	local what=$1 pattern=$2 rc=0
	shift 2
	timeout -k 5 60 "$@" >"$work/out" 2>&1 || rc=$?
	if ((rc == 1)) && grep -qE -- "$pattern" "$work/out" && [[ $(wc -l <"$work/out") == 1 ]]; then pass "$what"; else
		fail "$what (exit $rc)"
		note "$work/out"
	fi
}
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

# ---------------------------------------------------------------- where a background daemon's messages go
rc=0
timeout -k 5 60 "$iserfuse" -o "log_file=$work/daemon.log,log_level=info,initiator_name=$initiator" "$url" "$mnt" \
	>"$work/bg.out" 2>&1 || rc=$?
check_eq "-o log_file: exit 0, mounted" "$rc $(is_mounted "$mnt" && echo mounted)" "0 mounted"
check "-o log_file: the start-up line says where messages go" \
	grep -q "^iserfuse: 1 LUN(s) of $TGT_IQN mounted on $mnt; messages go to $work/daemon.log$" "$work/bg.out"
check_eq "with the defaults .stats pool_bytes is the man page's 132 MiB (payload and cache slices)" \
	"$(stat_of "$mnt" pool_bytes) $(grep -c '256 \\(mu 528 KiB = 132 MiB with the defaults' "$manpage")" "138412032 1"
unmount "$mnt" || true
for _ in $(seq 50); do grep -q "pool slices in use" "$work/daemon.log" 2>/dev/null && break; sleep 0.1; done
check "-o log_file: the daemon's lines after the fork reach the file (start-up and stop)" \
	bash -c "grep -q 'info: 1 LUN(s) of $TGT_IQN mounted on' '$work/daemon.log' && grep -q 'info: $TGT_IQN: .*pool slices in use' '$work/daemon.log'"
rc=0
timeout -k 5 60 "$iserfuse" -o "initiator_name=$initiator" "$url" "$mnt" >"$work/bg.out" 2>&1 || rc=$?
if [[ -S /run/systemd/journal/socket ]]; then
	check "without log_file (journal here): the start-up line names the journal" grep -q "messages go to the systemd journal" "$work/bg.out"
elif [[ -S /dev/log ]]; then
	check "without log_file (syslog here): the start-up line names syslog" grep -q "messages go to syslog" "$work/bg.out"
else
	check "without log_file, journal or syslog: the start-up line says messages are lost and how to keep them" \
		grep -q "messages are lost: no systemd journal and no syslog here (-o log_file=PATH keeps them)" "$work/bg.out"
fi
unmount "$mnt" || true
rc=0
timeout -k 5 60 "$iserfuse" -o "initiator_name=$initiator,cache_size=100G" "$url" "$mnt" >"$work/out" 2>&1 || rc=$?
if ((rc == 1)); then
	check "cache_size=100G: the pool error names the cache slices too" grep -q "cache slices for cache_size" "$work/out"
elif ((rc == 0)) && is_mounted "$mnt"; then
	echo "# cache_size=100G was allocated here: the pool error is not checked"
	unmount "$mnt" || true
else
	fail "cache_size=100G: exit 1 with the pool error, or exit 0 and mounted (exit $rc)"
	note "$work/out"
fi

# ---------------------------------------------------------------- logging names the target
timeout -k 5 30 "$iserfuse" -f -o log_level=info,initiator_name="$initiator" "$url" "$mnt" >"$work/fg.log" 2>&1 &
fg=$!
for _ in $(seq 100); do is_mounted "$mnt" && break; sleep 0.1; done
unmount "$mnt" || true
wait "$fg" || true
check "-o log_level=info, foreground: lines on stderr name the target" grep -q "^iserfuse: $TGT_IQN: lun1: " "$work/fg.log"

# ---------------------------------------------------------------- sd_notify readiness (Type=notify)
sock=$work/notify.sock
python3 - "$sock" "$mnt" >"$work/notify.out" 2>&1 <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(60)
while True:
    msg = s.recv(4096).decode()
    with open("/proc/mounts") as f:
        live = any(" %s " % sys.argv[2] in line for line in f)
    print(msg.replace("\n", " | "), "[mounted]" if live else "[not mounted]", flush=True)
    if "READY=1" in msg:
        break
PY
listener=$!
for _ in $(seq 100); do [[ -S $sock ]] && break; sleep 0.1; done
NOTIFY_SOCKET=$sock timeout -k 5 60 "$iserfuse" -f -o "initiator_name=$initiator" "$url" "$mnt" >"$work/notify.log" 2>&1 &
daemon=$!
wait "$listener" || true
check "READY=1 reaches \$NOTIFY_SOCKET once the mount is live" grep -q "READY=1.*\[mounted\]" "$work/notify.out" ||
	note "$work/notify.out"
unmount "$mnt" || true
wait "$daemon" || true

# ---------------------------------------------------------------- fstab forms
if run_ok "mount.fuse3 'iserfuse#URL' MOUNTPOINT -o ro,_netdev,nofail,noauto,x-systemd.automount" \
	env PATH="$(dirname "$iserfuse"):$PATH" mount.fuse3 "iserfuse#$url" "$mnt" \
	-o "ro,_netdev,nofail,noauto,x-systemd.automount,initiator_name=$initiator"; then
	check "mounted as fuse.iserfuse, read-only" grep -qE " $mnt fuse.iserfuse ro[, ]" /proc/mounts
	unmount "$mnt" || true
fi
if run_ok "mount.fuse3 URL MOUNTPOINT -t fuse.iserfuse -o _netdev,nofail,config=..." \
	env PATH="$(dirname "$iserfuse"):$PATH" mount.fuse3 "$url" "$mnt" -t fuse.iserfuse \
	-o "rw,_netdev,nofail,config=$conf"; then
	check "the fuse.iserfuse mount reads lun1" cmp -n 65536 -i 0:196608 "$work/pattern" "$mnt/lun1"
	unmount "$mnt" || true
fi
run_ok "iserfuse itself accepts _netdev,nofail,defaults,comment=x" "$iserfuse" \
	-o "_netdev,nofail,defaults,comment=x,users,initiator_name=$initiator" "$url" "$mnt" && unmount "$mnt"
# mount(8) runs helpers with the standard PATH only: in a private mount
# namespace a tmpfs over /usr/local/bin holds a copy of this build.
if command -v unshare >/dev/null; then
	printf '%s %s fuse.iserfuse ro,_netdev,nofail,initiator_name=%s 0 0\n' "$url" "$mnt" "$initiator" >"$work/fstab"
	printf 'lab %s fuse.iserfuse _netdev,config=%s 0 0\n' "$work/mnt2" "$conf" >>"$work/fstab"
	mkdir -p "$work/mnt2"
	cat >"$work/ns.sh" <<EOF
set -e
mount -t tmpfs tmpfs /usr/local/bin
cp "$iserfuse" /usr/local/bin/iserfuse
mount -T "$work/fstab" "$mnt"
grep " $mnt fuse.iserfuse ro," /proc/mounts
cmp -n 65536 -i 0:196608 "$work/pattern" "$mnt/lun1"
umount "$mnt"
mount -T "$work/fstab" "$work/mnt2"
cmp -n 65536 -i 0:196608 "$work/pattern" "$work/mnt2/lun1"
umount "$work/mnt2"
mount -t fuse.iserfuse -o ro,_netdev,nofail,initiator_name=$initiator "$url" "$mnt"
grep " $mnt fuse.iserfuse ro," /proc/mounts
umount "$mnt"
echo fstab-ok
EOF
	if run_ok "mount(8): fstab lines 'URL MOUNTPOINT fuse.iserfuse ro,_netdev,nofail' and by section name; mount -t fuse.iserfuse" \
		unshare -m --propagation private bash "$work/ns.sh"; then
		check "both fstab mounts read the pattern" grep -q fstab-ok "$work/out"
	fi
fi

# ---------------------------------------------------------------- the man page's examples
# Each command line of EXAMPLES runs against the test target: its URLs,
# mount points and files are swapped for the test's own.  iSER needs an
# RDMA device; systemctl, /etc/iserfuse.conf and fstab lines need the
# installed system (the fstab forms are checked above).
mkdir -p "$work/ex-disk" "$work/ex-ro"
printf 'username = nobody\npassword = not-needed-here\n' >"$work/ex-secret"
chmod 600 "$work/ex-secret"
awk '/^\.SH EXAMPLES/ { f = 1; next } /^\.SH/ { f = 0 } f' "$manpage" |
	awk '/^\.nf/ { b = 1; next } /^\.fi/ { b = 0 } b && !/^\./' | sed 's/\\-/-/g' >"$work/examples"
nex=0
while IFS= read -r line; do
	case $line in
	*'?iser'* | systemctl* | *fuse.iserfuse* | 'iserfuse lab'*)
		echo "# man page example not run here: $line"
		continue
		;;
	esac
	cmd=${line//'iscsi://[2001:db8::10]:3261/iqn.2026-11.org.example:disk'/$url}
	cmd=${cmd//'iscsi://192.0.2.10/iqn.2026-11.org.example:disk'/$url}
	cmd=${cmd//'iscsi://192.0.2.10'/iscsi://127.0.0.1:$port}
	cmd=${cmd//\/mnt\//$work/ex-}
	cmd=${cmd//\/var\/tmp\//$work/}
	cmd=${cmd//'$HOME/.iscsi-secret'/$work/ex-secret}
	nex=$((nex + 1))
	run_ok "man page example: $line" env PATH="$(dirname "$iserfuse"):$PATH" bash -c "$cmd" || true
done <"$work/examples"
check "the man page has at least 6 runnable examples ($nex)" test "$nex" -ge 6
check "the qcow2 example wrote an image" test -s "$work/disk.qcow2"
for m in "$work/ex-disk" "$work/ex-ro"; do
	is_mounted "$m" && unmount "$m"
done

# ---------------------------------------------------------------- --list with CHAP
ctl=$(<"$work/tgt/ctl")
if timeout 10 tgtadm -C "$ctl" --lld iscsi --op new --mode account --user clilist --password cli-secret-123 &&
	timeout 10 tgtadm -C "$ctl" --lld iscsi --op bind --mode account --tid 1 --user clilist; then
	timeout 60 "$iserfuse" --list -o initiator_name="$initiator" "iscsi://127.0.0.1:$port" >"$work/list0" 2>&1 || true
	check "--list without credentials: the target refuses its login" grep -q "^  Error: .*auth" "$work/list0"
	printf 'username = clilist\npassword = cli-secret-123\n' >"$work/secret"
	chmod 600 "$work/secret"
	run_ok "--list -o secret_file=" "$iserfuse" --list -o "secret_file=$work/secret,initiator_name=$initiator" "iscsi://127.0.0.1:$port" &&
		check "--list with CHAP from a secret file shows LUN 1" grep -q "^  Lun 1: type disk" "$work/out"
	run_ok "--list with CHAP from the environment" env ISERFUSE_CHAP_USERNAME=clilist ISERFUSE_CHAP_PASSWORD=cli-secret-123 \
		"$iserfuse" --list -o "initiator_name=$initiator" "iscsi://127.0.0.1:$port" &&
		check "--list with CHAP from the environment shows LUN 1" grep -q "^  Lun 1: type disk" "$work/out"
	run_ok "--list with CHAP from the URL" "$iserfuse" --list -o "initiator_name=$initiator" \
		"iscsi://clilist%cli-secret-123@127.0.0.1:$port" &&
		check "--list with CHAP from the URL shows LUN 1 and no password" \
			bash -c "grep -q '^  Lun 1: type disk' '$work/out' && ! grep -q cli-secret-123 '$work/out'"
	if command -v script >/dev/null; then
		timeout 60 script -qec "'$iserfuse' --list -o 'secret_file=$work/secret,initiator_name=$initiator' iscsi://127.0.0.1:$port" \
			/dev/null 2>&1 | cat -v >"$work/tty.out" || true
		check "--list on a terminal shows what it waits for" grep -q "disk: logging in via 127.0.0.1:$port \.\.\." "$work/tty.out"
		check "--list on a terminal erases that line before each output line" grep -qF '^M^[[K  Lun 1: type disk' "$work/tty.out"
	fi
	printf '[lab]\nurl = iscsi://127.0.0.1:%s\nsecret_file = %s\n' "$port" "$work/secret" >"$work/list.conf"
	run_ok "--list NAME takes url and secret_file from the section" "$iserfuse" --list \
		-o "config=$work/list.conf,initiator_name=$initiator" lab &&
		check "--list NAME shows LUN 1" grep -q "^  Lun 1: type disk" "$work/out"
	run_ok "--list URL/1" "$iserfuse" --list -o "secret_file=$work/secret,initiator_name=$initiator" "$url/1" &&
		check_eq "--list URL/1 lists LUN 1 only" "$(grep -c '^  Lun ' "$work/out") $(grep -c '^  Lun 1: type disk' "$work/out")" "1 1"
else
	fail "tgtadm sets up a CHAP account"
fi

# ---------------------------------------------------------------- systemd unit
if command -v systemd-analyze >/dev/null; then
	mkdir -p "$work/units"
	sed "s|^ExecStart=[^ ]*|ExecStart=$iserfuse|" "$unit" >"$work/units/iserfuse@lab.service"
	timeout 60 systemd-analyze verify --man=no "$work/units/iserfuse@lab.service" >"$work/verify" 2>&1 || echo "exit $?" >>"$work/verify"
	if [[ ! -s $work/verify ]]; then pass "systemd-analyze verify iserfuse@lab.service: no complaint"; else
		fail "systemd-analyze verify iserfuse@lab.service"
		note "$work/verify"
	fi
else
	echo "# systemd-analyze not installed: checking the unit's keys only"
fi
for kv in "Type=notify" "Restart=on-failure" "After=network-online.target" "Wants=network-online.target"; do
	check "the unit has $kv" grep -qx "$kv" "$unit"
done
check "the unit runs the section named by the instance in the foreground" grep -qE '^ExecStart=/.*/iserfuse -f %i$' "$unit"

# ---------------------------------------------------------------- man page
if command -v mandoc >/dev/null; then
	mandoc -T lint -W warning "$manpage" >"$work/lint" 2>&1 || true
	if [[ ! -s $work/lint ]]; then pass "mandoc -T lint: no warnings"; else
		fail "mandoc -T lint"
		note "$work/lint"
	fi
fi
MANWIDTH=80 LC_ALL=C.UTF-8 MANROFFSEQ='' man --warnings -l "$manpage" >"$work/man.txt" 2>"$work/man.err" || true
if [[ ! -s $work/man.err ]] && grep -q "THREAD MODEL" "$work/man.txt"; then pass "man -l renders the page without warnings"; else
	fail "man -l renders the page without warnings"
	note "$work/man.err"
fi
unnamed=
for opt in config initiator_name ro queue_depth max_io_kib pool_slices login_timeout cmd_timeout \
	noop_interval noop_timeout header_digest data_digest secret_file log_level umask allow_other; do
	grep -q -- "$opt" "$work/man.txt" || unnamed="$unnamed $opt"
done
check_eq "the man page names every option" "${unnamed# }" ""
for section in SYNOPSIS OPTIONS "URL SYNTAX" FILES "EXIT STATUS" "THREAD MODEL" SECURITY EXAMPLES "SEE ALSO"; do
	check "the man page has $section" grep -q "^$section" "$work/man.txt"
done

summary
