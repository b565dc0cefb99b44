#!/bin/bash
# SPDX-License-Identifier: MIT
#
# From a fresh Debian 12 machine to a mounted iSCSI LUN, as root:
#
#   tests/quickstart.sh          install the packages, build, start a
#                                throwaway tgtd with one 1 GiB (sparse) LUN,
#                                mount it, print what to do next
#   tests/quickstart.sh stop     unmount and stop that target
#
# Running it again first unmounts and stops what the previous run of the
# same user started; `stop` touches that user's run only.  The user is the
# one sudo was called by (SUDO_UID), else root; each has the state
# directory /run/iserfuse-quickstart/uid-N (root's only: no other user can
# plant a link there), or under $QUICKSTART_STATE_ROOT where that is set.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
owner=${SUDO_UID:-$(id -u)}
state_root=${QUICKSTART_STATE_ROOT:-/run/iserfuse-quickstart}
state=$state_root/uid-$owner
mnt=$state/mnt
initiator=iqn.2026-11.org.example:quickstart

# Every package the build and the tests need, from one list.
mapfile -t packages < <(sed 's/#.*//' "$root/tests/packages.txt" | tr -s ' \t' '\n' | grep .)

say() {
	printf '==> %s\n' "$*"
}
die() {
	printf 'quickstart: %s\n' "$*" >&2
	exit 1
}

if [[ $(id -u) -ne 0 ]]; then
	die "run me as root (sudo $0): tgtd, apt-get and the mount need it"
fi
if [[ $# -gt 1 || ($# -eq 1 && $1 != stop) ]]; then
	echo "usage: $0 [stop]" >&2
	exit 2
fi
[[ $owner =~ ^[0-9]+$ ]] || die "SUDO_UID '$owner' is not a user id"

# The state directories: root's own, real directories (not links).
own_dir() {
	[[ -L $1 ]] || mkdir -p "$1" || die "cannot make $1"
	if [[ -L $1 || ! -d $1 || $(stat -c %u "$1") != 0 ]]; then
		die "$1 is not a directory of root's: not using it"
	fi
	chmod 0700 "$1"
}

is_mounted() {
	mountpoint -q "$1" 2>/dev/null || grep -qF " $1 " /proc/mounts 2>/dev/null
}

# Unmount and stop what an earlier run of this user left (nobody else's).
stop_previous() {
	local pid
	[[ -d $state ]] || return 0
	if is_mounted "$mnt"; then
		say "unmounting $mnt"
		fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt"
	fi
	if [[ -r $state/iserfuse.pid ]]; then
		pid=$(<"$state/iserfuse.pid")
		if _targets_is "$pid" iserfuse "$mnt"; then
			_targets_kill "$pid" 5
		fi
		rm -f "$state/iserfuse.pid"
	fi
	if [[ -r $state/tgtd/pid ]]; then
		say "stopping the tgtd of the previous run (pid $(<"$state/tgtd/pid"))"
	fi
	tgtd_stop "$state/tgtd"
}

# The helpers (tgtd_stop, _targets_is) need the packages only when called.
# shellcheck source-path=SCRIPTDIR source=lib/targets.sh
. "$root/tests/lib/targets.sh"

if [[ ${1:-} == stop ]]; then # installs nothing
	stop_previous
	say "stopped"
	exit 0
fi

# ---------------------------------------------------------------- packages

missing=()
for p in "${packages[@]}"; do
	if [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) != "install ok installed" ]]; then
		missing+=("$p")
	fi
done
if ((${#missing[@]})); then
	say "installing: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update
	apt-get install -y "${packages[@]}"
else
	say "all packages already installed"
fi

# ---------------------------------------------------------------- build

cd "$root"
if [[ ! -f build/build.ninja ]]; then
	say "meson setup build"
	meson setup build
fi
say "ninja -C build"
ninja -C build
iserfuse=''
for candidate in build/gateway/iserfuse build/iserfuse; do
	if [[ -x $candidate ]]; then
		iserfuse=$root/$candidate
		break
	fi
done
[[ -n $iserfuse ]] || die "the build made no iserfuse binary (looked in build/gateway/ and build/)"

# ---------------------------------------------------------------- target

stop_previous
own_dir "$state_root"
own_dir "$state"
mkdir -p "$mnt"
say "starting tgtd with one 1 GiB LUN (sparse file in $state/tgtd)"
tgtd_start "$state/tgtd" 1G 0 >/dev/null || die "tgtd did not start; see $state/tgtd/tgtd.log"

# ---------------------------------------------------------------- mount

say "$iserfuse $TGT_URL $mnt"
if ! "$iserfuse" -o "initiator_name=$initiator" "$TGT_URL" "$mnt"; then
	tgtd_stop "$state/tgtd"
	die "mounting failed"
fi
pid=''
for p in $(pgrep -f -- "$mnt" || true); do
	if [[ $(readlink "/proc/$p/exe" 2>/dev/null) == "$(readlink -f "$iserfuse")" ]]; then
		pid=$p
		break
	fi
done
[[ -n $pid ]] && printf '%s\n' "$pid" >"$state/iserfuse.pid"
tgtd_pid=$(<"$state/tgtd/pid")

cat <<EOF

iserfuse is running${pid:+ (pid $pid)}, serving $TGT_URL
from a tgtd (pid $tgtd_pid) whose LUN 1 is the sparse file $state/tgtd/disk512.img.

  LUN file:  $mnt/lun1  ($(stat -c %s "$mnt/lun1") bytes)
  try:       qemu-img info $mnt/lun1
             mkfs.ext4 -F $mnt/lun1 && mount -o loop $mnt/lun1 /mnt

  stop:      $0 stop
  or:        fusermount3 -u $mnt; kill -KILL $tgtd_pid   (tgtd ignores SIGTERM)
EOF
