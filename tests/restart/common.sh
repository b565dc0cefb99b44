# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Shared by the restart suite scripts.  Source after tests/lib/open.sh;
# needs $iserfuse.
#
#   restart_mounted NAME [OPTS...]  a fresh $work (suite_scratch NAME), tgtd
#                                   with a 64 MiB LUN 1, mounted with OPTS
#                                   (iserfuse -f, $daemon the supervisor,
#                                   stderr to $work/daemon.log); the
#                                   background job $bg, the daemon and tgtd
#                                   stopped at exit; a failed mount prints
#                                   the summary and exits 1
#   worker_pid                      the supervisor's worker ("" if none)
#   kill_worker SECS                SIGKILL the worker, then until another
#                                   one serves (the log says so): 0, or 1
#                                   after SECS seconds
#   kill_workers N                  kill_worker 30 N times, 3 s apart; each
#                                   failure a line in $work/killer.err
#   restarts_logged                 how many "serves the mount" lines
#   fio_pass NAME FILE SIZE [IO_SIZE] one fio randrw pass (4k-1M, QD32,
#                                   crc32c verify) over SIZE bytes of FILE,
#                                   IO_SIZE bytes in all (blocks written
#                                   again); JSON output in $work/NAME.json;
#                                   fio's exit status
#   fio_max_lat_ms NAME...          the longest completion latency (ms) of
#                                   those passes


restart_mounted() {
	local name=$1
	shift
	suite_scratch "$name"
	suite_drop=('tgtd/*.img' '*.img' '*.verify.state')
	daemon=''
	bg=''
	tgtd_start "$work/tgtd" 64M 0 >/dev/null
	mkdir -p "$work/mnt"
	"$iserfuse" -f -o initiator_name=iqn.2026-11.org.example:restart "$@" "$TGT_URL/1" "$work/mnt" \
		2>>"$work/daemon.log" &
	daemon=$!
	if ! wait_lun "$work/mnt" 200 "$daemon"; then
		fail "mounted"
		note "$work/daemon.log"
		summary
		exit 1
	fi
}

suite_teardown() {
	# shellcheck disable=SC2154 # uring.sh's
	[[ -n ${uring_was:-} ]] && echo "$uring_was" >/sys/module/fuse/parameters/enable_uring
	[[ -n $bg ]] && kill "$bg" 2>/dev/null && wait "$bg" 2>/dev/null
	umount -l "$work/ext4" 2>/dev/null
	force_unmount "$work/mnt"
	[[ -n $daemon ]] && kill -KILL "$daemon" 2>/dev/null
	tgtd_stop "$work/tgtd"
}

worker_pid() {
	pgrep -P "$daemon" -f -- '--worker' 2>/dev/null | head -n 1 || true
}

restarts_logged() {
	grep -c 'serves the mount' "$work/daemon.log" || true
}

kill_worker() {
	local secs=$1 before pid i
	before=$(restarts_logged)
	pid=$(worker_pid)
	[[ -n $pid ]] || return 1
	kill -KILL "$pid" 2>/dev/null || return 1
	for ((i = 0; i < secs * 20; i++)); do
		(($(restarts_logged) > before)) && return 0
		sleep 0.05
	done
	return 1
}

kill_workers() {
	local k
	for ((k = 1; k <= $1; k++)); do
		kill_worker 30 || echo "kill $k: no new worker serving within 30 s" >>"$work/killer.err"
		sleep 3
	done
}

fio_pass() {
	local name=$1 file=$2 size=$3 io_size=${4:-$3}
	fio --name="$name" --filename="$file" --size="$size" --io_size="$io_size" --bsrange=4k-1M --rw=randrw --allow_file_create=0 --ioengine=libaio \
		--direct=1 --iodepth=32 --verify=crc32c --do_verify=1 --verify_fatal=1 --verify_state_save=0 \
		--output-format=json --output="$work/$name.json" >/dev/null 2>"$work/$name.err"
}

fio_max_lat_ms() {
	python3 - "$@" <<'PY'
import json, sys
worst = 0
for path in sys.argv[1:]:
    try:
        text = open(path).read()
        d = json.loads(text[text.index('{'):])
    except (OSError, ValueError):
        continue
    for j in d.get('jobs', []):
        for k in ('read', 'write'):
            worst = max(worst, j.get(k, {}).get('clat_ns', {}).get('max', 0))
print(worst // 1000000)
PY
}

# fio's error count (I/O and verify) over those passes: the JSON's error fields and
# the error lines of its stderr
fio_errors() {
	local n=0 f
	for f in "$@"; do
		python3 - "$f.json" <<'PY' || n=$((n + 1))
import json, sys
text = open(sys.argv[1]).read()
d = json.loads(text[text.index('{'):])
sys.exit(1 if any(j.get('error', 0) for j in d.get('jobs', [])) else 0)
PY
		grep -qiE 'verify|error|bad' "$f.err" 2>/dev/null && n=$((n + 1))
	done
	echo "$n"
}
