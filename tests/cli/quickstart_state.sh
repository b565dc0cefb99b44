#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/quickstart.sh keeps each user's run apart: `quickstart.sh stop`
# stops the target and daemon of the user it runs for (SUDO_UID) and
# nobody else's, and no state lives in a fixed shared path.
#
#   quickstart_state.sh QUICKSTART_SH
#
# Two users' earlier runs are staged (a real tgtd each, as quickstart.sh
# starts it) under a private QUICKSTART_STATE_ROOT; nothing is installed,
# built or mounted.  Needs root and tgtd.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"

qs=${1:?usage: quickstart_state.sh QUICKSTART_SH}
need_root "quickstart.sh and tgtd need root"
if ! command -v tgtd >/dev/null 2>&1; then
	echo "# SKIP: tgtd not installed"
	exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/iserfuse-qs.XXXXXX")
export QUICKSTART_STATE_ROOT=$work/state
cleanup() {
	tgtd_stop "$QUICKSTART_STATE_ROOT/uid-4242/tgtd"
	tgtd_stop "$QUICKSTART_STATE_ROOT/uid-4243/tgtd"
	rm -rf "$work"
}
trap cleanup EXIT

check_eq "quickstart.sh names no fixed shared state path" "$(grep -c '/tmp/iserfuse-quickstart' "$qs" || true)" 0

mkdir -p "$QUICKSTART_STATE_ROOT"
for u in 4242 4243; do
	mkdir -p "$QUICKSTART_STATE_ROOT/uid-$u/mnt"
	tgtd_start "$QUICKSTART_STATE_ROOT/uid-$u/tgtd" 16M 0 >/dev/null
done
a=$(<"$QUICKSTART_STATE_ROOT/uid-4242/tgtd/pid")
b=$(<"$QUICKSTART_STATE_ROOT/uid-4243/tgtd/pid")

rc=0
SUDO_UID=4243 bash "$qs" stop >"$work/out" 2>&1 || rc=$?
check_eq "user 4243's stop: exit 0" "$rc" 0
check "user 4243's stop stops user 4243's tgtd" bash -c "! kill -0 $b 2>/dev/null"
check "user 4243's stop leaves user 4242's tgtd running" kill -0 "$a"
rc=0
SUDO_UID=4242 bash "$qs" stop >"$work/out" 2>&1 || rc=$?
check_eq "user 4242's stop: exit 0" "$rc" 0
check "user 4242's stop stops user 4242's tgtd" bash -c "! kill -0 $a 2>/dev/null"
rc=0
SUDO_UID=4242 bash "$qs" stop >"$work/out" 2>&1 || rc=$?
check_eq "a second stop with nothing left: exit 0" "$rc" 0
rc=0
SUDO_UID='1;x' bash "$qs" stop >"$work/out" 2>&1 || rc=$?
check_eq "a SUDO_UID that is no user id: refused, exit 1" "$rc" 1
summary
