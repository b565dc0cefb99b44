#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The route to a portal and link/route events (initiator/net/netroute.c,
# initiator/net/netwatch.c), through tests/recovery/netroute_probe:
#
#   netroute.sh NETROUTE_PROBE
#
# The lookups of 127.0.0.1 and ::1 must name the interface and source
# address `ip route get` names.  Then a network namespace of its own with a
# veth pair (both ends inside it; 198.51.100.0/25 on the link, TEST-NET-2,
# and 198.51.100.128/25 routed through the peer): a routed and an on-link
# address look up as `ip route get` says (interface, source, gateway), and
# a removed route is -ENETUNREACH.  A watcher in the namespace must see
# `ip link set dev X down` and `up`, `ip route add` and `ip route del`
# within 200 ms each (the delays are printed), and stop cleanly on SIGTERM.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"

suite_args 1 NETROUTE_PROBE "$@"
need_exe "$1"
probe=$1
need_root "needs root (network namespaces)"
if ! command -v ip >/dev/null; then
	echo "# SKIP: needs ip (iproute2)"
	exit 77
fi

suite_scratch netroute
tag=$$
ns=iserfuse-nr-$tag
veth_a=nra$tag
veth_b=nrb$tag
watcher=''
suite_teardown() {
	[[ -n $watcher ]] && kill -KILL "$watcher" 2>/dev/null && wait "$watcher" 2>/dev/null
	ip netns del "$ns" 2>/dev/null
	return 0
}

# The word after KEY in the words of `ip -o route get` (or the probe), "" if none.
word_after() {
	local key=$1
	shift
	local prev=''
	for w in "$@"; do
		if [[ $prev == "$key" ]]; then
			echo "$w"
			return
		fi
		prev=$w
	done
}

# Compare the probe's lookup of ADDR with `ip route get ADDR` (dev, src, via), run with the prefix command.
same_as_ip() {
	local what=$1 addr=$2
	shift 2
	local ipw pw
	# shellcheck disable=SC2207
	ipw=($("$@" ip -o route get "$addr"))
	# shellcheck disable=SC2207
	pw=($("$@" "$probe" route "$addr"))
	echo "# $what: ip: ${ipw[*]}"
	echo "# $what: probe: ${pw[*]}"
	check_eq "$what: interface" "$(word_after dev "${pw[@]}")" "$(word_after dev "${ipw[@]}")"
	check_eq "$what: source" "$(word_after src "${pw[@]}")" "$(word_after src "${ipw[@]}")"
	check_eq "$what: gateway" "$(word_after via "${pw[@]}")" "$(word_after via "${ipw[@]}")"
}

# ---------------------------------------------------------------- loopback
same_as_ip "127.0.0.1" 127.0.0.1 env
if ip -o route get ::1 >/dev/null 2>&1; then
	same_as_ip "::1" ::1 env
else
	skip "::1" "no IPv6 loopback route here"
fi

# ---------------------------------------------------------------- namespace
if ! {
	ip netns add "$ns" &&
		ip link add "$veth_a" netns "$ns" type veth peer name "$veth_b" netns "$ns" &&
		ip -n "$ns" addr add 198.51.100.2/25 dev "$veth_a" &&
		ip -n "$ns" addr add 198.51.100.1/25 dev "$veth_b" &&
		ip -n "$ns" link set lo up &&
		ip -n "$ns" link set "$veth_a" up && ip -n "$ns" link set "$veth_b" up &&
		ip -n "$ns" route add 198.51.100.128/25 via 198.51.100.1 dev "$veth_a"
}; then
	fail "namespace $ns with $veth_a/$veth_b"
	summary
	exit 1
fi
pass "namespace $ns with $veth_a/$veth_b"
in_ns=(ip netns exec "$ns")

same_as_ip "routed 198.51.100.200" 198.51.100.200 "${in_ns[@]}"
check_eq "routed 198.51.100.200: through $veth_a via 198.51.100.1" \
	"$("${in_ns[@]}" "$probe" route 198.51.100.200)" "dev $veth_a src 198.51.100.2 via 198.51.100.1"
same_as_ip "on-link 198.51.100.3" 198.51.100.3 "${in_ns[@]}"

# ---------------------------------------------------------------- events
"${in_ns[@]}" "$probe" watch >"$work/events" 2>"$work/watch.err" &
watcher=$!
for _ in $(seq 100); do
	grep -q '^ready$' "$work/events" && break
	sleep 0.05
done
check "watcher ready" grep -q '^ready$' "$work/events"
idx_a=$(cat "/sys/class/net/$veth_a/ifindex" 2>/dev/null || "${in_ns[@]}" cat "/sys/class/net/$veth_a/ifindex")

# Run the change CMD..., wait (2 s at most) for a new event line matching PATTERN; print ms from before CMD.
delay_of() {
	local pattern=$1
	shift
	local lines t0 line
	lines=$(wc -l <"$work/events")
	t0=$(date +%s%N)
	"$@"
	for _ in $(seq 200); do
		line=$(tail -n +"$((lines + 1))" "$work/events" | grep -m1 -E "$pattern" || true)
		if [[ -n $line ]]; then
			echo $(((${line##* } - t0) / 1000000))
			return
		fi
		sleep 0.01
	done
	echo never
}

# An event within 200 ms: "WHAT: N ms" passes, "never" or more fails.
timely() {
	local what=$1 ms=$2
	echo "# $what: ${ms} ms"
	if [[ $ms != never ]] && ((ms < 200)); then pass "$what within 200 ms ($ms ms)"; else fail "$what within 200 ms ($ms ms)"; fi
}

timely "link $veth_a down" "$(delay_of "^link $idx_a $veth_a down " ip -n "$ns" link set dev "$veth_a" down)"
timely "link $veth_a up" "$(delay_of "^link $idx_a $veth_a up " ip -n "$ns" link set dev "$veth_a" up)"
# the link going down took the routes through it away: add the routed prefix again
for _ in $(seq 100); do
	ip -n "$ns" route add 198.51.100.128/25 via 198.51.100.1 dev "$veth_a" 2>/dev/null && break
	sleep 0.02 # the link comes up (IFF_RUNNING) asynchronously
done
ip -n "$ns" route del 198.51.100.128/25 2>/dev/null || true
timely "route add 198.51.100.128/25" "$(delay_of "^route add 198\.51\.100\.128/25 oif $idx_a table 254 " \
	ip -n "$ns" route add 198.51.100.128/25 via 198.51.100.1 dev "$veth_a")"
timely "route del 198.51.100.128/25" "$(delay_of "^route del 198\.51\.100\.128/25 oif $idx_a table 254 " \
	ip -n "$ns" route del 198.51.100.128/25)"

rc=0
"${in_ns[@]}" "$probe" route 198.51.100.200 >/dev/null 2>"$work/unreach.err" || rc=$?
check_eq "no route to 198.51.100.200 once removed: exit 3 (ENETUNREACH)" "$rc" 3
check "ip route get agrees" bash -c "! ip -n $ns route get 198.51.100.200 >/dev/null 2>&1"

kill -TERM "$watcher"
rc=0
wait "$watcher" || rc=$?
watcher=''
check_eq "watcher stops on SIGTERM with status 0" "$rc" 0
check "watcher said stopped" grep -q '^stopped$' "$work/events"
note "$work/watch.err"
summary
