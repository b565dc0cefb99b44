#!/bin/bash
# SPDX-License-Identifier: MIT
#
# cli suite: the start-up line and where the messages go.
#
#   startup.sh ISERFUSE_BINARY UNIT_FILE MAN_PAGE
#
# -o log_file (the start-up line names it; the daemon's lines after the
# fork reach it); without it the journal, syslog or a line saying messages
# are lost; a pool too large names the cache slices; -o log_level=info in
# the foreground names the target; READY=1 reaches $NOTIFY_SOCKET once the
# mount is live.  Needs tgt.
# Prints "ok - ..." / "not ok - ..." and "N passed, M failed"; exits 1 if
# anything failed, 77 (skip) when not root.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
. "$here/../lib/cli.sh"

cli_setup startup "$@"

cli_target

# ---------------------------------------------------------------- where a background daemon's messages go
rc=0
timeout -k 5 60 "$iserfuse" -o "log_file=$work/daemon.log,log_level=info,initiator_name=$initiator" "$url" "$mnt" \
	>"$work/bg.out" 2>&1 || rc=$?
check_eq "-o log_file: exit 0, mounted" "$rc $(is_mounted "$mnt" && echo mounted)" "0 mounted"
check "-o log_file: the start-up line says where messages go" \
	grep -q "^iserfuse: 1 LUN(s) of $TGT_IQN mounted on $mnt; messages go to $work/daemon.log$" "$work/bg.out"
unmount "$mnt" || true
for _ in $(seq 50); do grep -q "pool slices in use" "$work/daemon.log" 2>/dev/null && break; sleep 0.1; done
check "-o log_file: the daemon's lines after the fork reach the file (start-up and stop)" \
	bash -c "grep -q 'info: 1 LUN(s) of $TGT_IQN mounted on' '$work/daemon.log' && grep -q 'info: $TGT_IQN: .*pool slices in use' '$work/daemon.log'"
rc=0
timeout -k 5 60 "$iserfuse" -o "initiator_name=$initiator" "$url" "$mnt" >"$work/bg.out" 2>&1 || rc=$?
if [[ -S /run/systemd/journal/socket ]]; then
	check "without log_file (journal here): the start-up line names the journal" grep -q "messages go to the systemd journal" "$work/bg.out"
elif [[ -S /dev/log ]]; then
	check "without log_file (syslog here): the start-up line names syslog" grep -q "messages go to syslog" "$work/bg.out"
else
	check "without log_file, journal or syslog: the start-up line says messages are lost and how to keep them" \
		grep -q "messages are lost: no systemd journal and no syslog here (-o log_file=PATH keeps them)" "$work/bg.out"
fi
unmount "$mnt" || true
rc=0
timeout -k 5 60 "$iserfuse" -o "initiator_name=$initiator,cache_size=100G" "$url" "$mnt" >"$work/out" 2>&1 || rc=$?
if ((rc == 1)); then
	check "cache_size=100G: the pool error names the cache slices too" grep -q "cache slices for cache_size" "$work/out"
elif ((rc == 0)) && is_mounted "$mnt"; then
	echo "# cache_size=100G was allocated here: the pool error is not checked"
	unmount "$mnt" || true
else
	fail "cache_size=100G: exit 1 with the pool error, or exit 0 and mounted (exit $rc)"
	note "$work/out"
fi

# ---------------------------------------------------------------- logging names the target
timeout -k 5 30 "$iserfuse" -f -o log_level=info,initiator_name="$initiator" "$url" "$mnt" >"$work/fg.log" 2>&1 &
fg=$!
for _ in $(seq 100); do is_mounted "$mnt" && break; sleep 0.1; done
unmount "$mnt" || true
wait "$fg" || true
check "-o log_level=info, foreground: lines on stderr name the target" grep -q "^iserfuse: $TGT_IQN: lun1: " "$work/fg.log"

# ---------------------------------------------------------------- sd_notify readiness (Type=notify)
sock=$work/notify.sock
python3 - "$sock" "$mnt" >"$work/notify.out" 2>&1 <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(60)
while True:
    msg = s.recv(4096).decode()
    with open("/proc/mounts") as f:
        live = any(" %s " % sys.argv[2] in line for line in f)
    print(msg.replace("\n", " | "), "[mounted]" if live else "[not mounted]", flush=True)
    if "READY=1" in msg:
        break
PY
listener=$!
for _ in $(seq 100); do [[ -S $sock ]] && break; sleep 0.1; done
NOTIFY_SOCKET=$sock timeout -k 5 60 "$iserfuse" -f -o "initiator_name=$initiator" "$url" "$mnt" >"$work/notify.log" 2>&1 &
daemon=$!
wait "$listener" || true
check "READY=1 reaches \$NOTIFY_SOCKET once the mount is live" grep -q "READY=1.*\[mounted\]" "$work/notify.out" ||
	note "$work/notify.out"
unmount "$mnt" || true
wait "$daemon" || true

summary
