# SPDX-License-Identifier: MIT
# shellcheck shell=bash disable=SC2034,SC2154 # suite_drop, work, iserfuse: suite.sh (through open.sh) and the script
#
# Shared by the multipath suite scripts.  Source after tests/lib/open.sh
# (targets.sh, report.sh, suite.sh, mount.sh); needs $iserfuse.
#
# Two network namespaces joined by TWO veth pairs, each its own subnet
# (TEST-NET-2 and TEST-NET-3, existing only inside them):
#
#   gateway netns $ns_gw                     target netns $ns_tg
#   $veth_ga 198.51.100.2/24  <-- link A -->  198.51.100.1/24 ($MP_A)
#   $veth_gb 203.0.113.2/24   <-- link B -->  203.0.113.1/24  ($MP_B)
#
# tgtd runs in $ns_tg, on port 3260 of its own network namespace; the
# daemon runs in $ns_gw (nsenter --net only: its mount is visible here,
# where fio and dd run).  Names carry $$; the teardown stops what was
# started by PID and deletes both namespaces (their veth links go with them).
# Commands run in a namespace through nsenter --net, never ip netns exec:
# that one also makes a mount namespace, whose copy of a FUSE mount made
# meanwhile keeps that mount's daemon from seeing its unmount.
#
#   mp_init NAME                 suite_scratch NAME and the teardown
#   mp_net                       the namespaces and links; 1 if they cannot be made
#   mp_tgtd IMG SIZE PORTAL... [-- PARAMS]
#                                one more tgtd in $ns_tg: target $TGT_IQN, LUN 1 =
#                                IMG (SIZE, truncate(1)), listening on each
#                                PORTAL (ADDR:PORT); PARAMS for the LUN
#                                (tgtadm --params, e.g. scsi_sn=..,scsi_id=..)
#   mp_mount URL [OPTS...]       iserfuse -f in $ns_gw on $work/mnt, stderr to
#                                $work/daemon.log; sets $daemon; 1 if lun1 does
#                                not appear in 20 s
#   mp_stat KEY                  KEY's value in .stats ("" if none)
#   mp_path_line N               the pathN line of .stats
#   mp_wait_stat KEY VALUE SECS  until .stats shows KEY VALUE: 0; else 1
#   mp_link A|B up|down          the gateway-side end of link A or B
#   mp_blackhole A|B on|off      in $ns_tg, a blackhole route to the gateway's
#                                address on that link: the link stays up (no
#                                netlink event in $ns_gw), no reply gets through
#   mp_fio NAME FILE SIZE [ARGS...]
#                                one fio pass, 4 KiB random writes at iodepth
#                                32 (libaio, direct) then their crc32c
#                                verify; JSON in $work/NAME.json, max-latency
#                                log per 50 ms (Unix ms) in $work/NAME_clat.1.log
#   mp_fio_errors NAME           "VERIFY_ERRORS IO_ERRORS" of that pass
#   unmount_check (lib/mount.sh) fusermount3 -u, "the daemon exits 0" and "no
#                                sanitizer report in its log"
#   mp_now_ms                    the wall clock in Unix milliseconds
#   mp_stalls FLAPS NAME...      per-outage and overall longest completion
#                                latency (ms) from the passes' logs (an I/O
#                                counts for the last outage that began up
#                                to 0.5 s after it was issued); FLAPS: lines
#                                "K LINK DOWN_MS UP_MS"; the last line
#                                printed is "max MS"

MP_A=198.51.100.1
MP_B=203.0.113.1
MP_A_GW=198.51.100.2
MP_B_GW=203.0.113.2
MP_INITIATOR=iqn.2026-11.org.example:multipath

mp_init() {
	suite_scratch "$1"
	suite_drop=('*.img' '*.log' '*.json')
	tag=$$
	ns_gw=iserfuse-mpgw-$tag
	ns_tg=iserfuse-mptg-$tag
	veth_ga=mpga$tag
	veth_gb=mpgb$tag
	veth_ta=mpta$tag
	veth_tb=mptb$tag
	daemon=''
	worker=''
	mp_tgt_pids=()
	mp_tgt_ctls=()
}

suite_teardown() {
	local p c
	[[ -n $worker ]] && kill "$worker" 2>/dev/null && wait "$worker" 2>/dev/null
	force_unmount "$work/mnt"
	if [[ -n $daemon ]]; then
		kill -KILL "$daemon" 2>/dev/null
		wait "$daemon" 2>/dev/null
	fi
	for p in "${mp_tgt_pids[@]}"; do
		if _targets_alive "$p" && _targets_is "$p" tgtd; then
			kill -KILL "$p" 2>/dev/null
			wait "$p" 2>/dev/null
		fi
	done
	for c in "${mp_tgt_ctls[@]}"; do
		rm -f "$TGTD_SOCKET_DIR/socket.$c" "$TGTD_SOCKET_DIR/socket.$c.lock"
	done
	ip netns del "$ns_gw" 2>/dev/null
	ip netns del "$ns_tg" 2>/dev/null
	return 0
}

mp_net() {
	ip netns add "$ns_gw" && ip netns add "$ns_tg" &&
		ip link add "$veth_ga" netns "$ns_gw" type veth peer name "$veth_ta" netns "$ns_tg" &&
		ip link add "$veth_gb" netns "$ns_gw" type veth peer name "$veth_tb" netns "$ns_tg" &&
		ip -n "$ns_gw" addr add "$MP_A_GW/24" dev "$veth_ga" &&
		ip -n "$ns_gw" addr add "$MP_B_GW/24" dev "$veth_gb" &&
		ip -n "$ns_tg" addr add "$MP_A/24" dev "$veth_ta" &&
		ip -n "$ns_tg" addr add "$MP_B/24" dev "$veth_tb" &&
		ip -n "$ns_gw" link set lo up && ip -n "$ns_tg" link set lo up &&
		ip -n "$ns_gw" link set "$veth_ga" up && ip -n "$ns_gw" link set "$veth_gb" up &&
		ip -n "$ns_tg" link set "$veth_ta" up && ip -n "$ns_tg" link set "$veth_tb" up
}

mp_tgtd() {
	local img=$1 size=$2 ctl pid up=0 i p params=''
	shift 2
	local portals=()
	while (($#)); do
		if [[ $1 == -- ]]; then
			params=$2
			break
		fi
		portals+=("$1")
		shift
	done
	truncate -s "$size" "$img" || return 1
	ctl=$(_tgtd_free_ctl) || return 1
	nsenter --net="/run/netns/$ns_tg" tgtd -f -C "$ctl" --iscsi "portal=${portals[0]}" \
		>>"$work/tgtd.$ctl.log" 2>&1 </dev/null &
	pid=$!
	mp_tgt_pids+=("$pid")
	mp_tgt_ctls+=("$ctl")
	for ((i = 0; i < 100; i++)); do
		if _tgtadm "$ctl" --op show --mode sys >/dev/null 2>&1; then
			up=1
			break
		fi
		_targets_alive "$pid" || break
		sleep 0.1
	done
	((up)) || return 1
	for p in "${portals[@]:1}"; do
		_tgtadm "$ctl" --op new --mode portal --param "portal=$p" || return 1
	done
	_tgtadm "$ctl" --op new --mode target --tid 1 -T "$TGT_IQN" &&
		_tgtadm "$ctl" --op new --mode logicalunit --tid 1 --lun 1 -b "$img" &&
		if [[ -n $params ]]; then
			_tgtadm "$ctl" --op update --mode logicalunit --tid 1 --lun 1 --params "$params"
		fi &&
		_tgtadm "$ctl" --op bind --mode target --tid 1 -I ALL
}

mp_mount() {
	local url=$1
	shift
	mkdir -p "$work/mnt"
	nsenter --net="/run/netns/$ns_gw" "$iserfuse" -f -o "initiator_name=$MP_INITIATOR" "$@" "$url" "$work/mnt" \
		2>>"$work/daemon.log" &
	daemon=$!
	wait_lun "$work/mnt" 200 "$daemon"
}

mp_stat() {
	awk -v k="$1" '$1 == k { print $2; exit }' "$work/mnt/.stats" 2>/dev/null
}

mp_path_line() {
	awk -v k="path$1" '$1 == k { print; exit }' "$work/mnt/.stats" 2>/dev/null
}

mp_wait_stat() {
	local key=$1 want=$2 secs=$3 i
	for ((i = 0; i < secs * 10; i++)); do
		[[ $(mp_stat "$key") == "$want" ]] && return 0
		sleep 0.1
	done
	return 1
}

mp_link() {
	local dev=$veth_ga
	[[ $1 == B ]] && dev=$veth_gb
	ip -n "$ns_gw" link set "$dev" "$2"
}

mp_blackhole() {
	local to=$MP_A_GW
	[[ $1 == B ]] && to=$MP_B_GW
	if [[ $2 == on ]]; then
		ip -n "$ns_tg" route add blackhole "$to/32"
	else
		ip -n "$ns_tg" route del blackhole "$to/32"
	fi
}

mp_fio() {
	local name=$1 file=$2 size=$3
	shift 3
	fio --name="$name" --filename="$file" --size="$size" --bs=4k --rw=randwrite \
		--ioengine=libaio --direct=1 --iodepth=32 --verify=crc32c --do_verify=1 --verify_fatal=1 \
		--verify_state_save=0 --output-format=json --output="$work/$name.json" \
		--write_lat_log="$work/$name" --log_avg_msec=50 --log_max_value=1 --log_unix_epoch=1 "$@" \
		>/dev/null 2>"$work/$name.err"
}

mp_fio_errors() {
	python3 - "$work/$1.json" "$work/$1.err" <<'PY'
import json, re, sys
try:
    j = json.load(open(sys.argv[1]))["jobs"][0]
    err = j["error"]
except Exception:
    print("1 1")  # no report: count it as failed
    sys.exit(0)
text = open(sys.argv[2]).read()
verify = len(re.findall(r"verify: bad|bad magic|crc32c: verify failed", text))
# fio stops at the first error (verify_fatal, continue_on_error=none): EILSEQ is a verify failure
if err == 84 and not verify:
    verify = 1
print("%d %d" % (verify, 0 if err in (0, 84) else 1))
PY
}

mp_stalls() {
	local flaps=$1
	shift
	python3 - "$flaps" "${@/#/$work/}" <<'PY'
import glob, sys
flaps = [l.split() for l in open(sys.argv[1]) if l.strip()]
pts = []  # (unix ms, latency ms)
for name in sys.argv[2:]:
    for f in glob.glob(name + "_clat.*.log"):
        for line in open(f):
            v = [x.strip() for x in line.split(",")]
            if len(v) >= 2:
                pts.append((int(v[0]), int(v[1]) / 1e6))
# An I/O belongs to the last outage that began before it was issued (its
# completion time less its latency), less 0.5 s: in flight when it began.
starts = [int(f[2]) - 500 for f in flaps]
worst = [0.0] * len(flaps)
for t, lat in pts:
    issued = t - lat
    k = max((i for i, s in enumerate(starts) if s <= issued), default=-1)
    if k >= 0:
        worst[k] = max(worst[k], lat)
for (k, link, down, up), w in zip(flaps, worst):
    print("outage %s (link %s, %d ms): longest completion %.0f ms" % (k, link, int(up) - int(down), w))
print("max %.0f" % (max(lat for _, lat in pts) if pts else -1))  # -1: no latency logged at all
print("samples %d" % len(pts))
PY
}

# The wall clock in Unix milliseconds.
mp_now_ms() {
	date +%s%3N
}

