#!/bin/bash
# SPDX-License-Identifier: MIT
#
# cli suite: .stats.
#
#   stats.sh ISERFUSE_BINARY UNIT_FILE MAN_PAGE
#
# .stats values before and after a known dd (commands, bytes, read-modify-
# write, latency, tx_direct), its keys, each documented in the man page's
# .stats entry, its size, read-only, a new snapshot at each open;
# pool_bytes with the defaults as the man page says.  Needs tgt.
# Prints "ok - ..." / "not ok - ..." and "N passed, M failed"; exits 1 if
# anything failed, 77 (skip) when not root.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
. "$here/../lib/cli.sh"

cli_setup stats "$@"

cli_target

# ---------------------------------------------------------------- .stats of a mount from a configuration section
cli_conf
cli_mount "iserfuse lab mounts section [lab] on its mountpoint" -o "config=$conf" lab

# .stats: a known dd moves the counters by known amounts.
before=$(cat "$mnt/.stats")
cp "$mnt/.stats" "$work/stats0"
keys=$(awk '{ print $1 }' "$work/stats0" | tr '\n' ' ')
want="transport fuse_path mr_registrations payload_bytes_copied rmw_bytes_copied commands bytes_read bytes_written queue_depth queue_depth_max pool_bytes pool_slices pool_in_use pool_in_use_max latency_p50_us latency_p90_us latency_p99_us reconnects tx_direct tx_kicks event_wakeups luns cache_bytes cache_hits cache_misses cache_readahead_bytes cache_readahead_used_bytes cache_readahead_wasted_bytes cache_dirty_blocks cache_writeback_blocks cache_bytes_copied scsi_retries unit_attentions rescans capacity_changes fuse_ring_requests io_thread_requests io_thread_handed_off fuse_ring_threads fuse_ring_threads_parked tcp_loops_uring tcp_loops_poll worker_restarts requests_resent paths paths_up paths_refused failovers path0 "
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
# .stats is served as /proc files are: size 0, read until EOF (direct_io), the text made at open.
check_eq ".stats: stat size 0, as a /proc file's" "$(stat -c %s "$mnt/.stats")" 0
check_eq ".stats: cat gives the whole text (every key, in order)" \
	"$(cat "$mnt/.stats" | awk '{ print $1 }' | tr '\n' ' ')" "$want"
check_eq ".stats: reads of 7 bytes give the whole text" \
	"$(dd if="$mnt/.stats" bs=7 status=none | awk '{ print $1 }' | tr '\n' ' ')" "$want"
check ".stats: wc -c counts the text, not st_size ($(wc -c <"$mnt/.stats") bytes)" \
	test "$(wc -c <"$mnt/.stats")" -gt 500
check ".stats: grep finds a line" grep -qx 'transport tcp' "$mnt/.stats"
# sendfile(2) of a size-0 file would say EOF at once: the file is not seekable, so it is refused and a copier reads
python3 -c 'import shutil, sys; shutil.copy(sys.argv[1], sys.argv[2])' "$mnt/.stats" "$work/stats.copy"
check_eq ".stats: Python's shutil.copy (sendfile) copies every key" \
	"$(awk '{ print $1 }' "$work/stats.copy" | tr '\n' ' ')" "$want"
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
unmount "$mnt" || true

# pool_bytes with the defaults
cli_mount "a mount with the defaults" -o "initiator_name=$initiator" "$url" "$mnt"
check_eq "with the defaults .stats pool_bytes is the man page's 132 MiB (payload and cache slices)" \
	"$(stat_of "$mnt" pool_bytes) $(grep -c '256 \\(mu 528 KiB = 132 MiB with the defaults' "$manpage")" "138412032 1"
unmount "$mnt" || true

summary
