#!/bin/bash
# SPDX-License-Identifier: MIT
#
# cli suite: every option's range and words.
#
#   options.sh ISERFUSE_BINARY UNIT_FILE MAN_PAGE
#
# A bad value of each numeric option is one line naming option, value and
# range, exit 1, before anything starts; the multipath options' words and
# portals (at most 8); each end of a range is accepted; a bad value in the
# configuration file names the file and line; IPv6 portals keep their
# brackets in messages.  No target.
# Prints "ok - ..." / "not ok - ..." and "N passed, M failed"; exits 1 if
# anything failed, 77 (skip) when not root.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
. "$here/../lib/cli.sh"

cli_setup options "$@"

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

summary
