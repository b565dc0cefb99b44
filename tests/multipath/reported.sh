#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The portals a target reports decide nothing unless the user asks:
#
#   reported.sh ISERFUSE
#
# Runs in a network and mount namespace of its own (it re-executes itself
# under unshare): loopback only, /etc/resolv.conf naming a DNS "server" on
# 127.0.0.1:53 that counts the datagrams it gets and answers none, and
# /etc/nsswitch.conf looking host names up in files, then DNS.
# fake_target.py --alua serves one LU on two portals (:PORT and :PORT2);
# its SendTargets answer lists, besides the portal asked, the second portal,
# the first one spelt three other ways (127.1, 0x7f000001,
# [::ffff:127.0.0.1]) and a host name.
#   1. Default options, with portal= spelling the URL's portal two other
#      ways: one path, one connection to :PORT (no discovery session, the
#      spellings count as the URL's portal), none to :PORT2, no DNS query.
#   2. discover_portals=on: the second portal becomes path 1; the three
#      spellings open nothing; the host name is skipped (a debug line), no
#      DNS query.
#   3. --list: the second portal on a line of its own marked as not used,
#      no login there, no DNS query; with discover_portals=on its LUNs are
#      listed through it.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ ${ISERFUSE_REPORTED_NS:-} != 1 ]]; then
	if [[ $(id -u) -ne 0 ]]; then
		echo "# SKIP: namespaces and mounts need root"
		exit 77
	fi
	ISERFUSE_REPORTED_NS=1 exec unshare --net --mount --propagation private bash "$0" "$@"
fi
# shellcheck source-path=SCRIPTDIR source=../lib/targets.sh
. "$here/../lib/targets.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/report.sh
. "$here/../lib/report.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/suite.sh
. "$here/../lib/suite.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/mount.sh
. "$here/../lib/mount.sh"

suite_args 1 ISERFUSE "$@"
need_exe "$1"
iserfuse=$1
need_tools python3 timeout ip mount getent fusermount3
target_py=$here/../malicious/fake_target.py
iqn=iqn.2026-11.org.example:malicious
name=portal.reported-by-target.example

die() {
	fail "$*"
	[[ -f ${work:-}/daemon.log ]] && note "$work/daemon.log"
	summary
	exit 1
}

suite_scratch mpath-reported
tpid=''
daemon=''
npid=''
suite_teardown() {
	force_unmount "$work/mnt"
	[[ -n $daemon ]] && kill -KILL "$daemon" 2>/dev/null
	[[ -n $tpid ]] && _targets_kill "$tpid" 5
	[[ -n $npid ]] && _targets_kill "$npid" 2
	return 0
}

ip link set lo up || die "loopback up in the namespace"
# This mount namespace began with a copy of every mount, other runs' FUSE
# mounts and network namespace files among them: detach the copies, so that
# their owners' unmount and ip netns del are not held up by this namespace.
awk '$3 ~ /^fuse/ || $3 == "nsfs" {print $2}' /proc/self/mounts | while read -r m; do
	umount -l "$m" 2>/dev/null || true
done

# The DNS trap: every datagram to 127.0.0.1:53 counted in $work/dns, none answered.
printf 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n' >"$work/resolv.conf"
printf 'hosts: files dns\n' >"$work/nsswitch.conf"
mount --bind "$work/resolv.conf" /etc/resolv.conf || die "private resolv.conf"
mount --bind "$work/nsswitch.conf" /etc/nsswitch.conf || die "private nsswitch.conf"
echo 0 >"$work/dns"
python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 53))
n = 0
while True:
    s.recvfrom(4096)
    n += 1
    with open(sys.argv[1], "w") as f:
        f.write("%d\n" % n)
' "$work/dns" </dev/null >/dev/null 2>&1 &
npid=$!
sleep 0.5
getent hosts "control.$name" >/dev/null 2>&1 || true
dns=$(<"$work/dns")
((dns > 0)) || die "the DNS trap sees a lookup (got $dns datagrams)"
pass "the DNS trap sees a lookup ($dns datagrams for one name)"
echo 0 >"$work/dns"

printf '1 ao\n2 ao\n' >"$work/states"
port=$(free_port)
port2=$(free_port)
[[ $port != "$port2" ]] || port2=$(free_port)
python3 "$target_py" --port "$port" --port2 "$port2" --alua "$work/states" \
	--report "127.0.0.1:$port2,2" --report "127.1:$port,1" --report "0x7f000001:$port,1" \
	--report "[::ffff:127.0.0.1]:$port,1" --report "$name:$port2,2" >"$work/target.log" 2>&1 </dev/null &
tpid=$!
if ! _targets_wait_listen "$tpid" "$port" 10 || ! _targets_wait_listen "$tpid" "$port2" 5; then
	die "fake target did not start"
fi

# conns PORT: connections the target accepted on PORT so far
conns() { grep -c "connection on port $1\$" "$work/target.log" || true; }
stat_of() { awk -v k="$1" '$1 == k {print $2}' "$work/mnt/.stats"; }

# mount OPTS: mount the URL's LUN 1 with OPTS; waits for the file
mount_lun() {
	mkdir -p "$work/mnt"
	"$iserfuse" -f -o "cache_size=0,log_level=debug,$1" "iscsi://127.0.0.1:$port/$iqn/1" "$work/mnt" \
		>"$work/daemon.log" 2>&1 &
	daemon=$!
	wait_lun "$work/mnt" 100 "$daemon" || die "mount with $1"
}


# ---- 1. default options
c1=$(conns "$port") c2=$(conns "$port2")
mount_lun "portal=127.1:$port,portal=[::ffff:127.0.0.1]:$port"
sleep 4 # on a target's word the path thread would have connected within this
check_eq "default: one path" "$(stat_of paths)" 1
check_eq "default: one connection to the URL's portal (no discovery, spellings of it count once)" \
	"$(($(conns "$port") - c1))" 1
check_eq "default: no connection to the portal only the target reported" "$(($(conns "$port2") - c2))" 0
check_eq "default: no DNS query" "$(<"$work/dns")" 0
unmount_check

# ---- 2. discover_portals=on
c1=$(conns "$port") c2=$(conns "$port2")
mount_lun "discover_portals=on"
for _ in $(seq 50); do
	[[ $(stat_of paths_up) == 2 ]] && break
	sleep 0.2
done
sleep 2 # time for any further path
check_eq "discover_portals=on: two paths, the reported second portal one of them" \
	"$(stat_of paths) $(stat_of paths_up) $(awk '$1 == "path1" {print $2}' "$work/mnt/.stats")" \
	"2 2 127.0.0.1:$port2"
check_eq "discover_portals=on: the URL's portal twice (path 0, the discovery session), not once per spelling" \
	"$(($(conns "$port") - c1))" 2
check_eq "discover_portals=on: one connection to the second portal" "$(($(conns "$port2") - c2))" 1
check_eq "discover_portals=on: the host name the target sent is skipped" \
	"$(grep -c "portal $name:$port2, not a numeric address: skipped" "$work/daemon.log" || true)" 1
check_eq "discover_portals=on: no DNS query" "$(<"$work/dns")" 0
unmount_check

# ---- 3. --list
list() {
	rc=0
	timeout -k 5 60 "$iserfuse" --list "$@" "iscsi://127.0.0.1:$port" >"$work/out" 2>"$work/err" </dev/null || rc=$?
}
c2=$(conns "$port2")
list
note "$work/out" | sed 's/^#   /#   | /'
check_eq "--list: exit 0" "$rc" 0
check_eq "--list: the URL's portal with its LUN, the reported one marked not used" \
	"$(grep -E '^  (Portal|Lun)' "$work/out" | sed 's/, [0-9]* blocks.*//')" \
	"$(printf '%s\n' "  Portal: 127.0.0.1:$port,1" "  Lun 1: type disk, FAKE MALICIOUS DISK" \
		"  Portal: 127.0.0.1:$port2,2 (reported by the target; not used: discover_portals=off)")"
check_eq "--list: no login through the reported portal" "$(($(conns "$port2") - c2))" 0
list -o discover_portals=on
note "$work/out" | sed 's/^#   /#   | /'
check_eq "--list -o discover_portals=on: both portals with their LUN" \
	"$(grep -E '^  (Portal|Lun)' "$work/out" | sed 's/, [0-9]* blocks.*//')" \
	"$(printf '%s\n' "  Portal: 127.0.0.1:$port,1" "  Lun 1: type disk, FAKE MALICIOUS DISK" \
		"  Portal: 127.0.0.1:$port2,2" "  Lun 1: type disk, FAKE MALICIOUS DISK")"
check_eq "--list: no DNS query" "$(<"$work/dns")" 0
check_eq "--list: no sanitizer report" "$(grep -cE 'AddressSanitizer|LeakSanitizer|runtime error' "$work/err" || true)" 0

summary
