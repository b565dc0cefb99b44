# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Mounting and unmounting the daemon, shared by the suite scripts that
# mount it.  Source it after targets.sh; daemon_pids needs $iserfuse (the
# binary).
#   is_mounted DIR             DIR is a mount point (mountpoint(1), else
#                              /proc/mounts)
#   force_unmount DIR          if DIR is mounted: fusermount3 -u, else -uz,
#                              else umount -l, quietly; never fails
#   daemon_pids DIR            PIDs of $iserfuse processes with DIR on their
#                              command line (not a timeout(1) around one),
#                              the supervisors only: a worker (--worker on
#                              its command line) ends with its supervisor
#   kill_daemons DIR [SECS]    SIGTERM each of them, SIGKILL after SECS
#                              (default 5)
#   wait_lun DIR TENTHS [PID]  until DIR/lun1 exists: 0; 1 after TENTHS
#                              tenths of a second, or at once when PID has
#                              exited
#   wait_exit PID TENTHS       until PID has exited: 0; 1 if it still runs
#                              after TENTHS tenths of a second
#   dd_check WHAT LOG ARGS...  dd ARGS... status=none as a check: "ok -
#                              WHAT", else "not ok - WHAT (dd exit N)" with
#                              dd's stderr and LOG's last lines (a
#                              daemon's); returns dd's status
#   unmount_check              fusermount3 -u $work/mnt, the daemon ($daemon)
#                              exits 0, no sanitizer report in
#                              $work/daemon.log nor in its report files
#                              (suite.sh's sanitizer_pid_check; all
#                              report.sh checks); clears $daemon once it
#                              has exited

is_mounted() {
	mountpoint -q "$1" 2>/dev/null || grep -qF " $1 " /proc/mounts
}

force_unmount() {
	if is_mounted "$1"; then
		fusermount3 -u "$1" 2>/dev/null || fusermount3 -uz "$1" 2>/dev/null || umount -l "$1" 2>/dev/null || true
	fi
	return 0
}

daemon_pids() {
	local p exe want cmd
	# shellcheck disable=SC2154 # set by the script
	want=$(readlink -f "$iserfuse")
	for p in $(pgrep -f -- "$1" || true); do
		exe=$(readlink "/proc/$p/exe" 2>/dev/null) || continue
		[[ $exe == "$want" ]] || continue
		cmd=$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null) || continue
		[[ " $cmd" == *" --worker "* ]] && continue
		echo "$p"
	done
	return 0
}

kill_daemons() {
	local p
	for p in $(daemon_pids "$1"); do
		_targets_kill "$p" "${2:-5}"
	done
}

wait_lun() {
	local dir=$1 tenths=$2 pid=${3:-} i
	for ((i = 0; i < tenths; i++)); do
		[[ -e $dir/lun1 ]] && return 0
		[[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null && return 1
		sleep 0.1
	done
	return 1
}

wait_exit() {
	local pid=$1 tenths=$2 i
	for ((i = 0; i < tenths; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}

dd_check() {
	local what=$1 log=$2 rc=0
	shift 2
	# shellcheck disable=SC2154 # $work is the script's (suite.sh)
	dd "$@" status=none 2>"$work/dd.err" || rc=$?
	if ((rc == 0)); then
		pass "$what"
	else
		fail "$what (dd exit $rc)"
		note "$work/dd.err"
		[[ -f $log ]] && tail -n 20 "$log" | sed 's/^/#   /'
	fi
	return "$rc"
}

# sigterm_check WHAT: SIGTERM to $daemon (a daemon started with -f in the background); it
# exits 0 within 10 s and $mnt is no longer mounted; clears $daemon
sigterm_check() {
	local rc=0
	if [[ -z $daemon ]] || ! kill -0 "$daemon" 2>/dev/null; then
		fail "$1 (no daemon running)"
		return
	fi
	kill -TERM "$daemon"
	if wait_exit "$daemon" 100; then
		wait "$daemon" || rc=$?
		check_eq "$1: exit status 0, nothing mounted" "$rc $(is_mounted "$mnt" && echo mounted || echo gone)" "0 gone"
		daemon=''
	else
		fail "$1 within 10 s"
	fi
}

# unmount_check: fusermount3 -u $work/mnt, then the daemon ($daemon) must exit 0
# and neither its log ($work/daemon.log) nor its report files (suite.sh) hold a
# sanitizer report; clears $daemon.
unmount_check() {
	local pid=$daemon
	check "fusermount3 -u" fusermount3 -u "$work/mnt"
	wait_exit "$daemon" 200 || true
	if kill -0 "$daemon" 2>/dev/null; then
		fail "the daemon exits after the unmount"
	else
		local rc=0
		wait "$daemon" || rc=$?
		check_eq "the daemon exits 0 after the unmount" "$rc" 0
		daemon=''
	fi
	if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' "$work/daemon.log"; then
		fail "no sanitizer report in the daemon's log"
		grep -E -A12 'AddressSanitizer|LeakSanitizer|runtime error' "$work/daemon.log" | sed 's/^/#   /' | head -n 40
	else
		pass "no sanitizer report in the daemon's log"
	fi
	sanitizer_pid_check "the daemon" "$pid"
}

# stat_of KEY: the value of KEY in $mnt/.stats
stat_of() {
	awk -v k="$1" '$1 == k { print $2 }' "$mnt/.stats"
}

# worker_pid: the worker process of $daemon (the supervisor's child), else $daemon itself
worker_pid() {
	local w
	w=$(pgrep -P "$daemon" | head -1)
	echo "${w:-$daemon}"
}
