#!/bin/bash
# SPDX-License-Identifier: MIT
#
# meson tests of the `iser` suite: boot the lab guest (tests/lab/run-in-guest.sh,
# Debian's kernel with rdma_rxe under QEMU) and run a guest script in it
# (default guest/iser-suite.sh) against the build directory BUILD (shared
# read-write into the guest).
#   iser.sh BUILD_DIR [GUEST_SCRIPT [ARGS...]]
# Skips (exit 77) when not root: the lab needs root for packages and 9p.
set -uo pipefail
BUILD=$(cd "$1" && pwd)
SCRIPT=${2:-iser-suite.sh}
shift $(($# < 2 ? $# : 2))
case $BUILD in "$(cd "$(dirname "$0")/../.." && pwd)"/*) ;; *) echo "# the build directory must be inside the source tree (shared into the guest)"; exit 1 ;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
[ "$(id -u)" = 0 ] || { echo "# SKIP the lab runs as root"; exit 77; }
OUT=$(mktemp -d /var/tmp/iserfuse-iser.XXXXXX)
# the guest starts from an empty environment: pass the knobs of the guest scripts
envs=()
for v in ISER_KILLS ISER_KILL_OPTS; do [ -n "${!v:-}" ] && envs+=(-e "$v=${!v}"); done
bash "$HERE/run-in-guest.sh" -t "${ISER_LAB_TIMEOUT:-660}" -s "$SRC" -o "$OUT" -C "$SRC" "${envs[@]}" -- \
	bash "$HERE/guest/$SCRIPT" "$BUILD" /lab "$@"
rc=$?
echo "# lab output in $OUT"
exit $rc
