# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Throwaway iSCSI targets on 127.0.0.1 for the tests.  Source this file;
# it defines functions only and leaves the caller's shell options alone.
#
#   free_port                      print a TCP port nothing uses on 127.0.0.1
#   tgtd_start DIR [SIZE1 [SIZE2]] tgtd, target $TGT_IQN, LUN 1 = DIR/disk512.img
#                                  (512-byte blocks), LUN 2 = DIR/disk4k.img
#                                  (4096-byte blocks); sizes as for truncate(1),
#                                  default 64M each; SIZE2=0 leaves LUN 2 out.
#                                  Sets and prints TGT_URL (no LUN in it).
#   tgtd_stop DIR
#   tgtd_kill DIR                  SIGKILL the tgtd of DIR (a target crash); keeps
#                                  its port, control port and backing files
#   tgtd_restart DIR               start tgtd again on DIR's port and control port
#                                  with the same target and LUNs (after tgtd_kill)
#   istgt_start DIR [SIZE_MB]      istgt, target $ISTGT_IQN, LUN 0 = DIR/disk.img
#                                  (512-byte blocks), default 64 MiB.
#                                  Sets and prints ISTGT_URL (no LUN in it).
#   istgt_stop DIR
#
# State lives in DIR (pid, port, ctl, logs, backing files), so several
# targets can run in one shell or in scripts running side by side, each with
# its own DIR.  The stop functions are safe to call from an EXIT trap: on a
# DIR that was never started, twice, or after a failed start.
#
# The targets run in the background of the calling shell, immune to SIGHUP
# (nohup), so one started by a script that ends keeps serving until stopped.
# tgtd and istgt need root (tgtd keeps its control socket in /var/run/tgtd).

TGT_IQN=iqn.2026-11.org.example:disk
ISTGT_IQN=iqn.2026-11.org.example.istgt:disk1
TGTD_SOCKET_DIR=/var/run/tgtd

# ---------------------------------------------------------------- helpers

_targets_log() {
	printf 'targets.sh: %s\n' "$*" >&2
}

# Is anything bound to TCP port $1 (any address, any state)?
_targets_port_busy() {
	local port=$1
	if command -v ss >/dev/null 2>&1; then
		[[ -n $(ss -Htan "sport = :$port" 2>/dev/null) ]]
	else
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null
	fi
}

# Is process $1 alive (and not a zombie)?
_targets_alive() {
	local pid=$1 stat
	[[ -n $pid ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	[[ ${stat:0:1} != Z ]]
}

# Is process $1 a $2 (by name) whose command line holds each word $3...?
# (Guards against signalling a recycled PID.)
_targets_is() {
	local pid=$1 name=$2 comm cmdline word
	shift 2
	comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
	[[ $comm == "$name" ]] || return 1
	cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
	for word in "$@"; do
		[[ " $cmdline" == *" $word "* ]] || return 1
	done
}

# Wait until process $1 listens on 127.0.0.1:$2; give up after $3 seconds or
# as soon as the process is gone.
_targets_wait_listen() {
	local pid=$1 port=$2 secs=$3 i
	for ((i = 0; i < secs * 10; i++)); do
		_targets_alive "$pid" || return 1
		if command -v ss >/dev/null 2>&1; then
			ss -Hltnp "sport = :$port" 2>/dev/null | grep -q "pid=$pid," && return 0
		elif (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			return 0
		fi
		sleep 0.1
	done
	return 1
}

# Wait up to $2 seconds for process $1 to be gone.
_targets_wait_gone() {
	local pid=$1 secs=$2 i
	for ((i = 0; i < secs * 10; i++)); do
		_targets_alive "$pid" || return 0
		sleep 0.1
	done
	! _targets_alive "$pid"
}

# End process $1: SIGTERM, wait up to $2 seconds, then SIGKILL.  Reaps it if
# it is a child of this shell (quietly: no "Killed" job message).
_targets_kill() {
	local pid=$1 secs=$2
	if _targets_alive "$pid"; then
		kill -TERM "$pid" 2>/dev/null || true
		if ! _targets_wait_gone "$pid" "$secs"; then
			kill -KILL "$pid" 2>/dev/null || true
			_targets_wait_gone "$pid" 5 || _targets_log "process $pid survives SIGKILL"
		fi
	fi
	wait "$pid" 2>/dev/null || true
}

# ---------------------------------------------------------------- free_port

# Print a TCP port in 20000..60000 that nothing on this machine has bound,
# preferring ports outside the kernel's ephemeral range.
free_port() {
	local lo=20000 hi=60000 elo=0 ehi=-1 try port
	if [[ -r /proc/sys/net/ipv4/ip_local_port_range ]]; then
		read -r elo ehi </proc/sys/net/ipv4/ip_local_port_range || true
	fi
	for ((try = 0; try < 500; try++)); do
		port=$((lo + ((RANDOM << 15) | RANDOM) % (hi - lo + 1)))
		if ((try < 400 && port >= elo && port <= ehi)); then
			continue
		fi
		if ! _targets_port_busy "$port"; then
			printf '%s\n' "$port"
			return 0
		fi
	done
	_targets_log "free_port: no free port found"
	return 1
}

# ---------------------------------------------------------------- tgtd

# A tgtd control port (-C) whose socket in $TGTD_SOCKET_DIR nobody has.
_tgtd_free_ctl() {
	local try ctl
	for ((try = 0; try < 200; try++)); do
		ctl=$((1000 + RANDOM % 30000))
		if [[ ! -e $TGTD_SOCKET_DIR/socket.$ctl && ! -e $TGTD_SOCKET_DIR/socket.$ctl.lock ]]; then
			printf '%s\n' "$ctl"
			return 0
		fi
	done
	_targets_log "no free tgtd control port"
	return 1
}

_tgtadm() {
	local ctl=$1
	shift
	timeout 10 tgtadm -C "$ctl" --lld iscsi "$@"
}

tgtd_start() {
	local dir=${1:?usage: tgtd_start DIR [SIZE1 [SIZE2]]}
	local size1=${2:-64M} size2=${3:-64M}
	local attempt pid='' port ctl log

	mkdir -p "$dir" || return 1
	dir=$(cd "$dir" && pwd) || return 1
	log=$dir/tgtd.log
	rm -f "$dir/pid" "$dir/port" "$dir/ctl" "$dir/disk512.img" "$dir/disk4k.img"
	truncate -s "$size1" "$dir/disk512.img" || return 1
	if [[ $size2 != 0 ]]; then
		truncate -s "$size2" "$dir/disk4k.img" || return 1
	fi

	# A port or control socket taken by someone else in between makes tgtd
	# exit (control socket) or run without a portal (port): try again.
	for ((attempt = 1; attempt <= 10; attempt++)); do
		port=$(free_port) || return 1
		ctl=$(_tgtd_free_ctl) || return 1
		nohup tgtd -f -C "$ctl" --iscsi "portal=127.0.0.1:$port" >"$log" 2>&1 </dev/null &
		pid=$!
		printf '%s\n' "$pid" >"$dir/pid"
		printf '%s\n' "$port" >"$dir/port"
		printf '%s\n' "$ctl" >"$dir/ctl"
		if _targets_wait_listen "$pid" "$port" 10 &&
			_targets_alive "$pid" &&
			_tgtadm "$ctl" --op show --mode sys >/dev/null 2>&1; then
			break
		fi
		_targets_log "tgtd attempt $attempt (port $port, control $ctl) failed: $(tail -n 3 "$log" | tr '\n' ' ')"
		if grep -q 'another tgtd is using' "$log"; then
			rm -f "$dir/ctl" # that socket is someone else's: leave it
		fi
		tgtd_stop "$dir"
		pid=
	done
	if [[ -z $pid ]]; then
		_targets_log "tgtd_start $dir: giving up"
		return 1
	fi

	if ! {
		_tgtadm "$ctl" --op new --mode target --tid 1 -T "$TGT_IQN" &&
			_tgtadm "$ctl" --op new --mode logicalunit --tid 1 --lun 1 -b "$dir/disk512.img" &&
			if [[ $size2 != 0 ]]; then
				_tgtadm "$ctl" --op new --mode logicalunit --tid 1 --lun 2 -b "$dir/disk4k.img" --blocksize 4096
			fi &&
			_tgtadm "$ctl" --op bind --mode target --tid 1 -I ALL
	}; then
		_targets_log "tgtd_start $dir: configuring the target failed"
		tgtd_stop "$dir"
		return 1
	fi

	TGT_URL=iscsi://127.0.0.1:$port/$TGT_IQN
	export TGT_URL
	printf 'TGT_URL=%s\n' "$TGT_URL"
}

tgtd_stop() {
	local dir=${1:?usage: tgtd_stop DIR}
	local pid='' port='' ctl=''
	[[ -d $dir ]] || return 0
	dir=$(cd "$dir" && pwd) || return 0
	[[ -r $dir/pid ]] && pid=$(<"$dir/pid")
	[[ -r $dir/port ]] && port=$(<"$dir/port")
	[[ -r $dir/ctl ]] && ctl=$(<"$dir/ctl")

	if [[ -n $pid ]] && _targets_alive "$pid" &&
		_targets_is "$pid" tgtd "portal=127.0.0.1:$port"; then
		# tgtd 1.0.85 ignores SIGTERM (its handler does nothing): the clean
		# way out is through tgtadm.  That works at once when no initiator
		# is logged in; with sessions up tgtd stays, and SIGKILL follows.
		if [[ -n $ctl ]]; then
			timeout 10 tgtadm -C "$ctl" --op update --mode sys --name State -v offline >/dev/null 2>&1 || true
			_tgtadm "$ctl" --op delete --mode target --tid 1 --force >/dev/null 2>&1 || true
			timeout 10 tgtadm -C "$ctl" --op delete --mode system >/dev/null 2>&1 || true
			_targets_wait_gone "$pid" 2 || true
		fi
		_targets_kill "$pid" 1
	elif [[ -n $pid ]]; then
		wait "$pid" 2>/dev/null || true
	fi
	if [[ -n $ctl ]] && ! { [[ -n $pid ]] && _targets_alive "$pid"; }; then
		rm -f "$TGTD_SOCKET_DIR/socket.$ctl" "$TGTD_SOCKET_DIR/socket.$ctl.lock"
	fi
	rm -f "$dir/pid" "$dir/ctl"
	return 0
}

tgtd_kill() {
	local dir=${1:?usage: tgtd_kill DIR}
	local pid='' port=''
	dir=$(cd "$dir" && pwd) || return 1
	[[ -r $dir/pid ]] && pid=$(<"$dir/pid")
	[[ -r $dir/port ]] && port=$(<"$dir/port")
	if [[ -n $pid ]] && _targets_alive "$pid" && _targets_is "$pid" tgtd "portal=127.0.0.1:$port"; then
		kill -KILL "$pid" 2>/dev/null || true
		_targets_wait_gone "$pid" 5 || _targets_log "process $pid survives SIGKILL"
		wait "$pid" 2>/dev/null || true
	fi
	rm -f "$dir/pid"
}

tgtd_restart() {
	local dir=${1:?usage: tgtd_restart DIR}
	local pid port ctl attempt
	dir=$(cd "$dir" && pwd) || return 1
	port=$(<"$dir/port") || return 1
	ctl=$(<"$dir/ctl") || return 1
	# The killed tgtd left its control socket behind; it was ours.
	rm -f "$TGTD_SOCKET_DIR/socket.$ctl" "$TGTD_SOCKET_DIR/socket.$ctl.lock"
	for ((attempt = 1; attempt <= 5; attempt++)); do
		nohup tgtd -f -C "$ctl" --iscsi "portal=127.0.0.1:$port" >>"$dir/tgtd.log" 2>&1 </dev/null &
		pid=$!
		printf '%s\n' "$pid" >"$dir/pid"
		if _targets_wait_listen "$pid" "$port" 10 && _tgtadm "$ctl" --op show --mode sys >/dev/null 2>&1; then
			break
		fi
		_targets_log "tgtd restart attempt $attempt failed: $(tail -n 3 "$dir/tgtd.log" | tr '\n' ' ')"
		tgtd_kill "$dir"
		pid=
		sleep 0.5
	done
	[[ -n $pid ]] || return 1
	_tgtadm "$ctl" --op new --mode target --tid 1 -T "$TGT_IQN" &&
		_tgtadm "$ctl" --op new --mode logicalunit --tid 1 --lun 1 -b "$dir/disk512.img" &&
		if [[ -e $dir/disk4k.img ]]; then
			_tgtadm "$ctl" --op new --mode logicalunit --tid 1 --lun 2 -b "$dir/disk4k.img" --blocksize 4096
		fi &&
		_tgtadm "$ctl" --op bind --mode target --tid 1 -I ALL
}

# ---------------------------------------------------------------- istgt

_istgt_write_conf() {
	local dir=$1 ucport=$2 port=$3 size_mb=$4
	cat >"$dir/istgt.conf" <<EOF
[Global]
  NodeBase "iqn.2026-11.org.example.istgt"
  PidFile "$dir/istgt.pid"
  AuthFile "$dir/auth.conf"
  MediaDirectory "$dir"
  Timeout 30
  NopInInterval 20
  DiscoveryAuthMethod Auto
  MaxSessions 16
  MaxConnections 4
[UnitControl]
  Portal UC1 127.0.0.1:$ucport
  Netmask 127.0.0.1
[PortalGroup1]
  Portal DA1 127.0.0.1:$port
[InitiatorGroup1]
  InitiatorName "ALL"
  Netmask 127.0.0.1
[LogicalUnit1]
  TargetName disk1
  Mapping PortalGroup1 InitiatorGroup1
  AuthMethod Auto
  UseDigest Auto
  UnitType Disk
  LUN0 Storage "$dir/disk.img" ${size_mb}MB
EOF
}

istgt_start() {
	local dir=${1:?usage: istgt_start DIR [SIZE_MB]}
	local size_mb=${2:-64}
	local attempt pid='' port ucport log

	mkdir -p "$dir" || return 1
	dir=$(cd "$dir" && pwd) || return 1
	log=$dir/istgt.log
	rm -f "$dir/pid" "$dir/port" "$dir/disk.img" "$dir/istgt.pid"
	: >"$dir/auth.conf"
	truncate -s "${size_mb}M" "$dir/disk.img" || return 1

	for ((attempt = 1; attempt <= 10; attempt++)); do
		port=$(free_port) || return 1
		ucport=$(free_port) || return 1
		[[ $ucport != "$port" ]] || continue
		_istgt_write_conf "$dir" "$ucport" "$port" "$size_mb"
		nohup istgt -c "$dir/istgt.conf" -D >"$log" 2>&1 </dev/null &
		pid=$!
		printf '%s\n' "$pid" >"$dir/pid"
		printf '%s\n' "$port" >"$dir/port"
		if _targets_wait_listen "$pid" "$port" 10 && _targets_alive "$pid"; then
			break
		fi
		_targets_log "istgt attempt $attempt (port $port) failed: $(tail -n 3 "$log" | tr '\n' ' ')"
		istgt_stop "$dir"
		pid=
	done
	if [[ -z $pid ]]; then
		_targets_log "istgt_start $dir: giving up"
		return 1
	fi

	ISTGT_URL=iscsi://127.0.0.1:$port/$ISTGT_IQN
	export ISTGT_URL
	printf 'ISTGT_URL=%s\n' "$ISTGT_URL"
}

istgt_stop() {
	local dir=${1:?usage: istgt_stop DIR}
	local pid=''
	[[ -d $dir ]] || return 0
	dir=$(cd "$dir" && pwd) || return 0
	[[ -r $dir/pid ]] && pid=$(<"$dir/pid")
	if [[ -n $pid ]] && _targets_alive "$pid" &&
		_targets_is "$pid" istgt "$dir/istgt.conf"; then
		# istgt takes a few seconds to wind down after SIGTERM.
		_targets_kill "$pid" 10
	elif [[ -n $pid ]]; then
		wait "$pid" 2>/dev/null || true
	fi
	rm -f "$dir/pid"
	return 0
}
