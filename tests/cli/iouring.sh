#!/bin/bash
# SPDX-License-Identifier: MIT
#
# cli suite: FUSE over io_uring: which path serves the mount.
#
#   iouring.sh ISERFUSE_BINARY UNIT_FILE MAN_PAGE
#
# -o io_uring=auto|on|off and ISERFUSE_IO_URING with the fuse module's
# enable_uring N and Y (put back as found): the mount's .stats fuse_path,
# direct I/O on the rings, SIGTERM with requests in flight on the rings;
# bad words exit 1.  Needs tgt, fio.
# Prints "ok - ..." / "not ok - ..." and "N passed, M failed"; exits 1 if
# anything failed, 77 (skip) when not root.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
. "$here/../lib/cli.sh"

cli_setup iouring "$@"

cli_target

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

summary
