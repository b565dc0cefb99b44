# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# shellcheck disable=SC2154 # work, floor_cells and the others: set by the caller
#
# Counts per I/O and CPU pinning for tests/bench/run (sourced; functions
# only).  The caller sets: work (a scratch folder), floor_cells (the JSON
# lines floor.py reads), PERF, NT_URL, BLOCKS, COUNT_IOS, CG_IOS,
# QEMU_COUNT, nulltarget_pid, and a log function.
#
# Pinning (QD1 cells only, the same for every series): whatever speaks
# iSCSI or serves FUSE (the iserfuse daemon, the null FUSE server,
# iserfuse-perf, iscsi-perf, qemu-img on iscsi://) on INIT_CPU (0); fio,
# which does I/O through the kernel, and the null target (a stand-in for a
# remote machine: it should not preempt the initiator) on APP_CPU (1).  A
# QD1 cell is a chain, so the two on CPU 1 never wait for each other.
# qemu-img, compared with itself on iscsi://, runs beside its initiator in
# both cells (on INIT_CPU; see qemu_bench).  QD32 cells run unpinned.  With
# one CPU nothing is pinned.
#
# Counts over a fixed number of I/Os (fio --number_ios, iserfuse-perf -n),
# each cell run twice: once under perf stat alone (the total and the
# context switches: counting in the kernel wakes nothing), once under perf
# trace -s (the names only: perf trace's reader wakes up and preempts):
#   syscalls  perf stat -e raw_syscalls:sys_enter -p PID over the cell (total)
#             and perf trace -s -p PID (by name, from the second run); the
#             daemon's idle rate, measured before its cells, times the
#             cell's length subtracted.  The raw tool: the same counted on
#             its command, a run of one I/O subtracted (connect, login,
#             logout).
#   vol_cs, invol_cs  the daemon: involuntary from nonvoluntary_ctxt_switches
#             of /proc/PID/task/*/status right before and after fio (first
#             run), thread by thread (a thread born in the cell counts from
#             zero); voluntary = all its switches (perf stat -e
#             context-switches -p PID, which also counts threads that exit
#             in the cell, as libfuse's idle workers do) less involuntary;
#             idle rates subtracted.  The raw tool: /usr/bin/time's %w and
#             %c, a run of one I/O subtracted.
#   instr     user instructions under valgrind --tool=callgrind
#             (--sim-hints=fuse-compatible: the daemon stats its own
#             mountpoint; --trace-children: iserfuse serves in the worker
#             its supervisor execs); a daemon: callgrind_control -d of the
#             process that serves (the worker, else the daemon itself) before
#             and after the cell, the last dump's totals (the cell alone);
#             the raw tool: a run of CG_IOS I/Os less a run of one.

INIT_CPU=0
APP_CPU=1
PIN_OK=0
(($(nproc) >= 2)) && command -v taskset >/dev/null 2>&1 && PIN_OK=1
APP_PIN=()
INIT_PIN=()

# pin_cell QD [PID...]: for QD 1 pin the PIDs (all their threads) on
# INIT_CPU, the null target on APP_CPU, and set APP_PIN / INIT_PIN (taskset
# prefixes for the commands the cell starts); else unpin them and clear the
# prefixes.
pin_cell() {
	local qd=$1 pid cpus all
	shift
	APP_PIN=() INIT_PIN=()
	((PIN_OK)) || return 0
	all=0-$(($(nproc) - 1))
	if ((qd == 1)); then
		cpus=$INIT_CPU
		APP_PIN=(taskset -c "$APP_CPU")
		INIT_PIN=(taskset -c "$INIT_CPU")
	else
		cpus=$all
	fi
	if [[ -n ${nulltarget_pid:-} && -d /proc/$nulltarget_pid ]]; then
		taskset -a -cp "$( ((qd == 1)) && echo "$APP_CPU" || echo "$all")" "$nulltarget_pid" >/dev/null 2>&1 || true
	fi
	for pid in "$@"; do
		[[ -n $pid && -d /proc/$pid ]] || continue
		# kernel workers among the threads (io_uring's) refuse: they stay where they are
		taskset -a -cp "$cpus" "$pid" >/dev/null 2>&1 || true
	done
}

# pin_line: the pinning, for the report
pin_line() {
	if ((PIN_OK)); then
		echo "QD1 cells pinned: iSCSI initiators and FUSE servers (all threads) on CPU $INIT_CPU; fio and the null target on CPU $APP_CPU; qemu-img beside its initiator on CPU $INIT_CPU (qemu-file-far: on CPU $APP_CPU); QD32 unpinned"
	else
		echo "QD1 cells not pinned (one CPU or no taskset)"
	fi
}

# ctx_file FILE: "voluntary involuntary" context switches summed over the
# /proc/PID/task/*/status copies in FILE
ctx_file() {
	awk '$1 == "voluntary_ctxt_switches:" { v += $2 } $1 == "nonvoluntary_ctxt_switches:" { n += $2 }
		END { print v + 0, n + 0 }' "$1"
}
# ctx_sum PID: the same of its threads now
ctx_sum() { cat /proc/"$1"/task/*/status 2>/dev/null | ctx_file /dev/stdin; }
# ctx_delta BEFORE AFTER: "voluntary involuntary exited" switches between two
# such copies, thread by thread (born: from zero; exited: lost, counted in "exited")
ctx_delta() {
	awk 'FNR == 1 { f++ } $1 == "Pid:" { t = $2 }
		$1 == "voluntary_ctxt_switches:" { v[f, t] = $2; seen[f, t] = 1; tids[t] = 1 }
		$1 == "nonvoluntary_ctxt_switches:" { n[f, t] = $2 }
		END { for (t in tids) { if (!((2, t) in seen)) { x++; continue }
			dv += v[2, t] - v[1, t]; dn += n[2, t] - n[1, t] }
			print dv + 0, dn + 0, x + 0 }' "$1" "$2"
}
# perf_stat_event FILE EVENT: an event's count in perf stat -x, -o FILE
perf_stat_event() { awk -F, -v e="$2" '$3 == e { print $1 + 0 }' "$1" 2>/dev/null; }

now() { date +%s.%N; }

# perf_stat_total FILE: the raw_syscalls:sys_enter count of perf stat -x, -o FILE
perf_stat_total() { awk -F, '$3 == "raw_syscalls:sys_enter" { print $1 + 0 }' "$1" 2>/dev/null; }

# idle_rate PID SECS -> "syscalls/s vol/s invol/s" of the daemon doing nothing
idle_rate() {
	local pid=$1 secs=$2 v0 i0 v1 i1 t0 t1 n c
	read -r v0 i0 < <(ctx_sum "$pid")
	t0=$(now)
	timeout $((secs + 30)) perf stat -e raw_syscalls:sys_enter,context-switches -p "$pid" -x, -o "$work/idle.stat" \
		-- sleep "$secs" >/dev/null 2>&1 || true
	t1=$(now)
	read -r v1 i1 < <(ctx_sum "$pid")
	n=$(perf_stat_total "$work/idle.stat")
	c=$(perf_stat_event "$work/idle.stat" context-switches)
	awk -v n="${n:-0}" -v c="${c:-0}" -v di=$((i1 - i0)) -v t0="$t0" -v t1="$t1" \
		'BEGIN { d = t1 - t0; printf "%.3f %.3f %.3f\n", n / d, (c - di) / d, di / d }'
}

# fio_cmd FILE RW QD IOS: the fio command line of a count cell (JSON on stdout)
fio_cmd() {
	echo fio --name=cell --filename="$1" --rw="$2" --bs=4k --iodepth="$3" --ioengine=libaio --direct=1 \
		--number_ios="$4" --randrepeat=1 --norandommap --output-format=json
}

# fio_ios JSONFILE: the I/Os fio did (nothing if it failed)
fio_ios() {
	python3 -c 'import json, sys
t = open(sys.argv[1]).read(); j = json.loads(t[t.index("{"):])["jobs"][0]
if not j["error"]: print(j["read"]["total_ios"] + j["write"]["total_ios"])' "$1" 2>/dev/null || true
}

# counts_entry SERIES RW QD IOS SYSCALLS VOL INVOL TRACEFILE [TRACEFILE_BASE]:
# one "counts" line for floor.py; the names from perf trace -s (less those of the base run)
counts_entry() {
	python3 - "$@" >>"$floor_cells" <<'EOF'
import json, re, sys

def names(path):
    out = {}
    try:
        for ln in open(path):
            m = re.match(r"\s+([a-z_0-9]+)\s+(\d+)\s+(\d+)\s+[\d.]+", ln)
            if m:
                out[m.group(1)] = out.get(m.group(1), 0) + int(m.group(2))
    except OSError:
        pass
    return out

series, rw, qd, ios, sc, vol, invol, trace = sys.argv[1:9]
by = names(trace)
if len(sys.argv) > 9:
    base = names(sys.argv[9])
    by = {n: v - base.get(n, 0) for n, v in by.items()}
by = {n: v for n, v in by.items() if v > 0}
num = lambda x: None if x in ("", "-") else round(float(x), 1)
print(json.dumps({"kind": "counts", "series": series, "workload": rw, "qd": int(qd), "ios": int(ios),
                  "syscalls": num(sc), "vol_cs": num(vol), "invol_cs": num(invol),
                  "syscalls_by_name": by, "syscalls_perf_trace": sum(by.values())}))
EOF
}

# instr_entry SERIES RW QD IOS INSTR [NA]: one "instr" line for floor.py
instr_entry() {
	printf '{"kind": "instr", "series": "%s", "workload": "%s", "qd": %s, "ios": %s, "instr": %s, "na": "%s"}\n' \
		"$1" "$2" "$3" "${4:-null}" "${5:-null}" "${6:-}" >>"$floor_cells"
}

# count_daemon SERIES PID FILE RW QD RATE: syscalls and context switches of
# the FUSE server PID over COUNT_IOS I/Os of fio on FILE (RATE: idle_rate's)
count_daemon() {
	local series=$1 pid=$2 file=$3 rw=$4 qd=$5 rate=$6 f t0 t1 c0 c1 n ios sc vol invol di gone cs
	f=$work/count.$series.$rw.$qd
	pin_cell "$qd" "$pid"
	t0=$(now)
	# the workload of perf stat: the context switches and the time right around fio
	# shellcheck disable=SC2016,SC2046 # expanded by that shell; fio_cmd's words
	timeout -k 5 120 perf stat -e raw_syscalls:sys_enter,context-switches -p "$pid" -x, -o "$f.stat" -- \
		bash -c 'p=$1 f=$2; shift 2
			date +%s.%N >"$f.c0"; cat /proc/"$p"/task/*/status >"$f.s0" 2>/dev/null
			"$@" >"$f.fio" 2>/dev/null; rc=$?
			cat /proc/"$p"/task/*/status >"$f.s1" 2>/dev/null; date +%s.%N >"$f.c1"; exit $rc' \
		_ "$pid" "$f" "${APP_PIN[@]}" $(fio_cmd "$file" "$rw" "$qd" "$COUNT_IOS") >/dev/null 2>&1 || true
	t1=$(now)
	# shellcheck disable=SC2046 # fio_cmd's words
	timeout -k 5 120 perf trace -s -p "$pid" -o "$f.trace" -- \
		"${APP_PIN[@]}" $(fio_cmd "$file" "$rw" "$qd" "$COUNT_IOS") >/dev/null 2>&1 || true
	pin_cell 32 "$pid"
	n=$(perf_stat_total "$f.stat")
	ios=$(fio_ios "$f.fio")
	if [[ -z $ios || -z $n || ! -s $f.s1 ]]; then
		log "counts: $series $rw qd$qd failed"
		return 0
	fi
	read -r _ di gone < <(ctx_delta "$f.s0" "$f.s1")
	cs=$(perf_stat_event "$f.stat" context-switches)
	c0=$(<"$f.c0") c1=$(<"$f.c1")
	# perf's switches span perf stat's run; the idle rate covers the time outside fio
	read -r sc vol invol < <(awk -v n="$n" -v cs="${cs:-0}" -v di="$di" -v d="$t1" -v d0="$t0" \
		-v c1="$c1" -v c0="$c0" -v r="$rate" 'BEGIN { split(r, x, " ")
			printf "%.1f %.1f %.1f\n", n - x[1] * (d - d0), cs - di - x[2] * (d - d0), di - x[3] * (c1 - c0) }')
	((gone == 0)) || log "counts: $series $rw qd$qd: $gone thread(s) exited in the cell (their involuntary switches are counted as voluntary)"
	counts_entry "$series" "$rw" "$qd" "$ios" "$sc" "$vol" "$invol" "$f.trace"
	log "counts: $series $rw qd$qd: $ios I/Os, $sc syscalls, $vol/$invol cs"
}

# raw_once RW QD N PREFIX: run iserfuse-perf for N I/Os under perf stat and
# time(1), then under perf trace -s; prints "syscalls vol invol ios"
raw_once() {
	local rw=$1 qd=$2 n=$3 pfx=$4 flags=(-r) out
	[[ $rw == randwrite ]] && flags+=(-w)
	out=$(timeout -k 5 120 perf stat -e raw_syscalls:sys_enter -x, -o "$pfx.stat" -- \
		/usr/bin/time -f '%w %c' -o "$pfx.time" "${INIT_PIN[@]}" \
		"$PERF" -m "$qd" -b "$BLOCKS" "${flags[@]}" -n "$n" "$NT_URL" 2>/dev/null) || return 1
	timeout -k 5 120 perf trace -s -o "$pfx.trace" -- "${INIT_PIN[@]}" \
		"$PERF" -m "$qd" -b "$BLOCKS" "${flags[@]}" -n "$n" "$NT_URL" >/dev/null 2>&1 || return 1
	echo "$(perf_stat_total "$pfx.stat") $(tail -n 1 "$pfx.time") $(awk '$1 == "ios" { print $2 }' <<<"$out")"
}

# count_raw RW QD: the raw tool's counts, a run of one I/O subtracted
count_raw() {
	local rw=$1 qd=$2 f a b
	f=$work/count.raw.$rw.$qd
	pin_cell "$qd"
	a=$(raw_once "$rw" "$qd" "$COUNT_IOS" "$f.n" || true)
	b=$(raw_once "$rw" "$qd" 1 "$f.1" || true)
	pin_cell 32
	local n0 v0 i0 ios0 n1 v1 i1 ios1
	read -r n0 v0 i0 ios0 <<<"$a"
	read -r n1 v1 i1 ios1 <<<"$b"
	if [[ -z ${ios0:-} || -z ${ios1:-} ]]; then
		log "counts: raw $rw qd$qd failed"
		return 0
	fi
	counts_entry raw "$rw" "$qd" $((ios0 - ios1)) $((n0 - n1)) $((v0 - v1)) $((i0 - i1)) "$f.n.trace" "$f.1.trace"
	log "counts: raw $rw qd$qd: $((ios0 - ios1)) I/Os, $((n0 - n1)) syscalls"
}

# cg_totals FILE: the Ir totals of a callgrind output file
cg_totals() { awk '$1 == "totals:" { print $2 }' "$1" 2>/dev/null; }

# cg_server PID: the process that serves FUSE for the daemon PID: its child
# that runs with --worker (iserfuse's supervisor execs one), else PID
cg_server() {
	local c
	for c in $(pgrep -P "$1"); do
		if tr '\0' ' ' <"/proc/$c/cmdline" 2>/dev/null | grep -q -- ' --worker'; then
			echo "$c"
			return 0
		fi
	done
	echo "$1"
}

# cg_daemon SERIES MOUNTPOINT FILE CMD...: start CMD (a FUSE server that stays
# in the foreground) under callgrind, wait for MOUNTPOINT/FILE, measure the
# user instructions of the process that serves (cg_server) in COUNT cells
# (randread, randwrite at QD 1 and 32) of CG_IOS I/Os each, unmount, stop it.
cg_daemon() {
	local series=$1 mp=$2 file=$3 vpid spid i rw qd last ios ir
	shift 3
	valgrind --tool=callgrind --sim-hints=fuse-compatible --trace-children=yes \
		--callgrind-out-file="$work/cg.$series.%p" "$@" >"$work/cg.$series.log" 2>&1 &
	vpid=$!
	for ((i = 0; i < 120; i++)); do
		mountpoint -q "$mp" && timeout 2 test -e "$mp/$file" && break
		sleep 0.5
	done
	spid=$(cg_server "$vpid")
	if ! timeout 2 test -e "$mp/$file"; then
		log "callgrind: $series did not mount"
		for rw in randread randwrite; do
			for qd in 1 32; do instr_entry "$series" "$rw" "$qd" "" "" "did not mount under valgrind"; done
		done
	else
		for rw in randread randwrite; do
			for qd in 1 32; do
				pin_cell "$qd" "$vpid" "$spid"
				ir='' ios=''
				if timeout 60 callgrind_control -d "$spid" >/dev/null 2>&1; then
					# shellcheck disable=SC2046 # fio_cmd's words
					timeout -k 5 300 "${APP_PIN[@]}" $(fio_cmd "$mp/$file" "$rw" "$qd" "$CG_IOS") \
						>"$work/cg.$series.fio" 2>/dev/null || true
					ios=$(fio_ios "$work/cg.$series.fio")
					if timeout 60 callgrind_control -d "$spid" >/dev/null 2>&1; then
						last=$(find "$work" -maxdepth 1 -name "cg.$series.$spid.*" -printf '%f\n' |
							sed -n "s/^cg\.$series\.$spid\.\([0-9][0-9]*\)$/\1/p" | sort -n | tail -n 1)
						[[ -n $last ]] && ir=$(cg_totals "$work/cg.$series.$spid.$last")
					fi
				fi
				pin_cell 32 "$vpid" "$spid"
				if [[ -n $ir && -n $ios ]]; then
					instr_entry "$series" "$rw" "$qd" "$ios" "$ir"
					log "callgrind: $series $rw qd$qd: $ir Ir / $ios I/Os"
				else
					instr_entry "$series" "$rw" "$qd" "" "" "the cell failed under valgrind"
				fi
			done
		done
	fi
	mountpoint -q "$mp" && { fusermount3 -u "$mp" || umount -l "$mp"; }
	_targets_kill "$vpid" 10
}

# cg_raw_tool: the raw tool's user instructions per cell, CG_IOS I/Os less one
cg_raw_tool() {
	local rw qd flags a b
	for rw in randread randwrite; do
		for qd in 1 32; do
			flags=(-r)
			[[ $rw == randwrite ]] && flags+=(-w)
			pin_cell "$qd"
			timeout -k 5 600 "${INIT_PIN[@]}" valgrind --tool=callgrind --callgrind-out-file="$work/cg.raw.n" \
				"$PERF" -n "$CG_IOS" -m "$qd" -b "$BLOCKS" "${flags[@]}" "$NT_URL" >"$work/cg.raw.n.out" 2>/dev/null || true
			timeout -k 5 600 "${INIT_PIN[@]}" valgrind --tool=callgrind --callgrind-out-file="$work/cg.raw.1" \
				"$PERF" -n 1 -m "$qd" -b "$BLOCKS" "${flags[@]}" "$NT_URL" >"$work/cg.raw.1.out" 2>/dev/null || true
			pin_cell 32
			a=$(cg_totals "$work/cg.raw.n") b=$(cg_totals "$work/cg.raw.1")
			local na nb
			na=$(awk '$1 == "ios" { print $2 }' "$work/cg.raw.n.out") nb=$(awk '$1 == "ios" { print $2 }' "$work/cg.raw.1.out")
			if [[ -n $a && -n $b && -n $na && -n $nb ]]; then
				instr_entry raw "$rw" "$qd" $((na - nb)) $((a - b))
				log "callgrind: raw $rw qd$qd: $((a - b)) Ir / $((na - nb)) I/Os"
			else
				instr_entry raw "$rw" "$qd" "" "" "the run failed under valgrind"
			fi
			rm -f "$work"/cg.raw.*
		done
	done
}

# qemu_bench TARGET RW QD [OPTION...] -> "iops - ios": qemu-img bench of
# QEMU_COUNT 4 KiB requests at ascending offsets (RW read or write).  At QD1
# qemu-img runs beside its initiator: on iscsi:// it is the initiator, on the
# LUN file the daemon is, so both on INIT_CPU and the target alone on
# APP_CPU; with QEMU_FAR=1, on the file, beside the target instead (APP_CPU,
# where fio runs).
qemu_bench() {
	local target=$1 rw=$2 qd=$3 pin=("${INIT_PIN[@]}") out secs
	shift 3
	((${QEMU_FAR:-0})) && pin=("${APP_PIN[@]}")
	local w=()
	[[ $rw == write ]] && w=(-w)
	out=$(timeout -k 5 300 "${pin[@]}" qemu-img bench -f raw "$@" -c "$QEMU_COUNT" -d "$qd" -s 4k "${w[@]}" "$target" 2>&1) ||
		return 1
	secs=$(sed -n 's/^Run completed in \([0-9.]*\) seconds\.$/\1/p' <<<"$out")
	[[ -n $secs ]] && awk -v c="$QEMU_COUNT" -v s="$secs" 'BEGIN { if (s > 0) printf "%d - %d\n", c / s, c }'
}
