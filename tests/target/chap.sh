#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The "chap" test (suite "target"): CHAP against a real tgtd (RFC 7143
# §12.1.3).  The tgtd target has an incoming account alice/secretpass12
# and an outgoing one tgt/tgtsecret123 (mutual CHAP).  Checks: without
# credentials the login is refused with a hint; the right secret mounts
# and data written to the backing file reads back; a wrong secret exits 1
# with "authentication failed" and mounts nothing; mutual CHAP with the
# right target secret mounts, with a wrong one exits 1; credentials from
# the URL, from -o secret_file= and from the environment each work, and in
# that order of precedence; a secret file readable by others is refused;
# no password ever shows in stderr, in -d output or in the daemon's
# command line.
#
#   chap.sh ISERFUSE TARGET_IO
#
# Prints "ok - ..." / "not ok - ..." per check (details on "# " lines) and
# "N passed, M failed" last; exits 1 if anything failed, 77 (skip) when not
# root, 2 on bad usage.  Needs root, /dev/fuse, tgt, fuse3.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"

suite_args 2 "ISERFUSE TARGET_IO" "$@"
iserfuse=$1
target_io=$2
need_exe "$iserfuse" "$target_io"
need_root "the chap test runs tgtd and mounts FUSE, which needs root"


need_tools tgtd tgtadm fusermount3 mountpoint pgrep dd cmp timeout ss /dev/fuse

USER_IN=alice
SECRET_IN=secretpass12
USER_OUT=tgt
SECRET_OUT=tgtsecret123
WRONG=wrongsecret99
WRONG_OUT=wrongtarget77
initiator=iqn.2026-11.org.example:chap-test

suite_scratch chap
mnt=$work/mnt
mkdir -p "$mnt"

# Unmount $mnt and wait up to 10 s for its daemons to exit, then kill them.
unmount() {
	local i
	force_unmount "$mnt"
	for ((i = 0; i < 100; i++)); do
		[[ -z $(daemon_pids "$mnt") ]] && return 0
		sleep 0.1
	done
	kill_daemons "$mnt" 5
}

suite_drop=('*/*.img')
suite_teardown() {
	unmount
	tgtd_stop "$work/tgtd"
}

# ---------------------------------------------------------------- target

if ! tgtd_start "$work/tgtd" 16M 0 >"$work/tgtd-start.log" 2>&1; then
	fail "tgtd starts"
	note "$work/tgtd-start.log"
	echo "$passed passed, $failed failed"
	exit 1
fi
ctl=$(<"$work/tgtd/ctl")
if ! {
	_tgtadm "$ctl" --op new --mode account --user "$USER_IN" --password "$SECRET_IN" &&
		_tgtadm "$ctl" --op bind --mode account --tid 1 --user "$USER_IN" &&
		_tgtadm "$ctl" --op new --mode account --user "$USER_OUT" --password "$SECRET_OUT" &&
		_tgtadm "$ctl" --op bind --mode account --tid 1 --user "$USER_OUT" --outgoing
} >"$work/tgtadm.log" 2>&1; then
	fail "tgtadm sets up the CHAP accounts"
	note "$work/tgtadm.log"
	echo "$passed passed, $failed failed"
	exit 1
fi
pass "tgtd with CHAP accounts (incoming $USER_IN, outgoing $USER_OUT)"

# Data the mounts must read back: the first MiB of LUN 1.
dd if=/dev/urandom of="$work/pattern" bs=64K count=16 status=none
dd if="$work/pattern" of="$work/tgtd/disk512.img" bs=64K conv=notrunc status=none

hostpath=${TGT_URL#iscsi://} # 127.0.0.1:PORT/IQN
url_with() {                 # url_with USER PASSWORD [QUERY]
	printf 'iscsi://%s%%%s@%s%s\n' "$1" "$2" "$hostpath" "${3:+?$3}"
}

# mount_with NAME ARGS...: iserfuse ARGS... MNT (the environment as set
# by the caller); stderr in $work/NAME.err; returns iserfuse's status.
mount_with() {
	local name=$1
	shift
	timeout 60 "$iserfuse" -o "initiator_name=$initiator" -o login_timeout=10 "$@" "$mnt" \
		>"$work/$name.out" 2>"$work/$name.err"
}

# expect_mount NAME DESCRIPTION ARGS...: mounts, data reads back, unmounts.
expect_mount() {
	local name=$1 what=$2 rc=0 p
	shift 2
	mount_with "$name" "$@" || rc=$?
	if ((rc == 0)) && is_mounted "$mnt"; then
		pass "$what: mounts"
	else
		fail "$what: mounts (exit $rc)"
		note "$work/$name.err"
		unmount
		return 0
	fi
	if cmp -n 1048576 "$work/pattern" "$mnt/lun1" >"$work/$name.cmp" 2>&1; then
		pass "$what: data reads back"
	else
		fail "$what: data reads back"
		note "$work/$name.cmp"
	fi
	# The daemon's command line shows no password.
	for p in $(daemon_pids "$mnt"); do
		tr '\0' ' ' <"/proc/$p/cmdline" >>"$work/$name.cmdline" 2>/dev/null || true
	done
	unmount
	if is_mounted "$mnt"; then
		fail "$what: unmounts"
	fi
}

# expect_refusal NAME DESCRIPTION PATTERN ARGS...: exit 1, PATTERN in
# stderr, nothing mounted.
expect_refusal() {
	local name=$1 what=$2 pattern=$3 rc=0
	shift 3
	mount_with "$name" "$@" || rc=$?
	if ((rc == 1)) && ! is_mounted "$mnt"; then
		pass "$what: exit 1, nothing mounted"
	else
		fail "$what: exit 1, nothing mounted (exit $rc)"
		note "$work/$name.err"
		unmount
	fi
	if grep -qF -- "$pattern" "$work/$name.err"; then
		pass "$what: stderr says \"$pattern\""
	else
		fail "$what: stderr says \"$pattern\""
		note "$work/$name.err"
	fi
	if [[ $(wc -l <"$work/$name.err") -le 2 ]]; then
		pass "$what: a short message"
	else
		fail "$what: a short message"
		note "$work/$name.err"
	fi
}

unset ISERFUSE_CHAP_USERNAME ISERFUSE_CHAP_PASSWORD ISERFUSE_CHAP_MUTUAL_USERNAME ISERFUSE_CHAP_MUTUAL_PASSWORD

# ---------------------------------------------------------------- without credentials

expect_refusal none "no credentials" "CHAP" "$TGT_URL"
if grep -qF "ISERFUSE_CHAP_USERNAME" "$work/none.err"; then
	pass "no credentials: the message says how to give them"
else
	fail "no credentials: the message says how to give them"
	note "$work/none.err"
fi
rc=0
timeout 60 "$target_io" info "$TGT_URL" >/dev/null 2>"$work/target_io.err" || rc=$?
if ((rc != 0)) && grep -qF "authentication failed" "$work/target_io.err"; then
	pass "no credentials: the initiator library is refused too (target_io exit $rc)"
else
	fail "no credentials: the initiator library is refused too (target_io exit $rc)"
	note "$work/target_io.err"
fi

# ---------------------------------------------------------------- URL

# warnings: stderr less the start-up line ("N LUN(s) of T mounted on M; messages go to ...")
warnings() { grep -v ' mounted on ' "$1" || true; }

expect_mount url "URL user%password@" "$(url_with "$USER_IN" "$SECRET_IN")"
if grep -qF "visible to other users" "$work/url.err" && [[ $(warnings "$work/url.err" | wc -l) -eq 1 ]]; then
	pass "URL with a password: one-line warning"
else
	fail "URL with a password: one-line warning"
	note "$work/url.err"
fi
expect_refusal wrong "wrong secret" "authentication failed" "$(url_with "$USER_IN" "$WRONG")"
expect_refusal wronguser "unknown user" "authentication failed" "$(url_with mallory "$SECRET_IN")"
expect_mount mutual "mutual CHAP, right target secret" \
	"$(url_with "$USER_IN" "$SECRET_IN" "target_user=$USER_OUT&target_password=$SECRET_OUT")"
expect_refusal mutualwrong "mutual CHAP, wrong target secret" "mutual CHAP" \
	"$(url_with "$USER_IN" "$SECRET_IN" "target_user=$USER_OUT&target_password=$WRONG_OUT")"
expect_refusal mutualname "mutual CHAP, wrong target name" "mutual CHAP" \
	"$(url_with "$USER_IN" "$SECRET_IN" "target_user=nottgt&target_password=$SECRET_OUT")"

# ---------------------------------------------------------------- secret file

printf '# CHAP for the test target\nusername = %s\n\npassword=%s\n' "$USER_IN" "$SECRET_IN" >"$work/secret"
chmod 600 "$work/secret"
expect_mount file "secret_file" -o "secret_file=$work/secret" "$TGT_URL"
if [[ -z $(warnings "$work/file.err") ]] && grep -q ' mounted on ' "$work/file.err"; then
	pass "secret_file: no warning"
else
	fail "secret_file: no warning"
	note "$work/file.err"
fi
printf 'username = %s\npassword = %s\nmutual_username = %s\nmutual_password = %s\n' \
	"$USER_IN" "$SECRET_IN" "$USER_OUT" "$SECRET_OUT" >"$work/secret-mutual"
chmod 600 "$work/secret-mutual"
expect_mount filemutual "secret_file with mutual CHAP" -o "secret_file=$work/secret-mutual" "$TGT_URL"
cp "$work/secret" "$work/secret-open"
chmod 644 "$work/secret-open"
expect_refusal fileopen "secret_file with mode 0644" "mode 0644" -o "secret_file=$work/secret-open" "$TGT_URL"
printf 'username = %s\npasword = %s\n' "$USER_IN" "$SECRET_IN" >"$work/secret-typo"
chmod 600 "$work/secret-typo"
expect_refusal filetypo "secret_file with an unknown key" "line 2: unknown key 'pasword'" \
	-o "secret_file=$work/secret-typo" "$TGT_URL"
printf 'username = %s\npassword = %s\n' "$USER_IN" "$WRONG" >"$work/secret-wrong"
chmod 600 "$work/secret-wrong"
expect_refusal filewrong "secret_file with a wrong secret" "authentication failed" \
	-o "secret_file=$work/secret-wrong" "$TGT_URL"

# ---------------------------------------------------------------- environment

export ISERFUSE_CHAP_USERNAME=$USER_IN ISERFUSE_CHAP_PASSWORD=$SECRET_IN
expect_mount env "environment" "$TGT_URL"
export ISERFUSE_CHAP_MUTUAL_USERNAME=$USER_OUT ISERFUSE_CHAP_MUTUAL_PASSWORD=$SECRET_OUT
expect_mount envmutual "environment with mutual CHAP" "$TGT_URL"
export ISERFUSE_CHAP_MUTUAL_PASSWORD=$WRONG_OUT
expect_refusal envmutualwrong "environment, mutual CHAP with a wrong target secret" "mutual CHAP" "$TGT_URL"
unset ISERFUSE_CHAP_MUTUAL_USERNAME ISERFUSE_CHAP_MUTUAL_PASSWORD

# ---------------------------------------------------------------- precedence

# URL > secret_file > environment
export ISERFUSE_CHAP_PASSWORD=$WRONG
expect_mount prec1 "URL password wins over a wrong environment" "$(url_with "$USER_IN" "$SECRET_IN")"
expect_mount prec2 "secret_file wins over a wrong environment" -o "secret_file=$work/secret" "$TGT_URL"
export ISERFUSE_CHAP_PASSWORD=$SECRET_IN
expect_refusal prec3 "a wrong secret_file wins over the right environment" "authentication failed" \
	-o "secret_file=$work/secret-wrong" "$TGT_URL"
expect_mount prec4 "user in the URL, password from the environment" "iscsi://$USER_IN@$hostpath"
unset ISERFUSE_CHAP_USERNAME ISERFUSE_CHAP_PASSWORD

# ---------------------------------------------------------------- -d output

rc=0
timeout 60 "$iserfuse" -d -o "initiator_name=$initiator" \
	"$(url_with "$USER_IN" "$SECRET_IN" "target_user=$USER_OUT&target_password=$SECRET_OUT")" "$mnt" \
	>"$work/debug.out" 2>"$work/debug.err" &
dpid=$!
for ((i = 0; i < 100; i++)); do
	is_mounted "$mnt" && break
	_targets_alive "$dpid" || break
	sleep 0.1
done
if is_mounted "$mnt" && cmp -n 65536 "$work/pattern" "$mnt/lun1" >/dev/null 2>&1; then
	pass "-d with mutual CHAP: mounted, data reads back"
else
	fail "-d with mutual CHAP: mounted, data reads back"
	note "$work/debug.err"
fi
for p in $(daemon_pids "$mnt"); do # iserfuse itself, not the timeout(1) around it
	tr '\0' ' ' <"/proc/$p/cmdline" >>"$work/debug.cmdline" 2>/dev/null || true
done
unmount
wait "$dpid" || rc=$?
if ((rc == 0)) && grep -q "CHAP" "$work/debug.err"; then
	pass "-d: exits 0 after unmount and logs the CHAP exchange"
else
	fail "-d: exits 0 after unmount and logs the CHAP exchange (exit $rc)"
	note "$work/debug.err"
fi

# ---------------------------------------------------------------- no secret anywhere

leaks=$(grep -lF -e "$SECRET_IN" -e "$SECRET_OUT" -e "$WRONG" -e "$WRONG_OUT" \
	"$work"/*.err "$work"/*.out "$work"/*.cmdline 2>/dev/null || true)
if [[ -z $leaks ]]; then
	pass "no password in any stderr, stdout, -d output or daemon command line"
else
	fail "no password in any stderr, stdout, -d output or daemon command line"
	printf '%s\n' "$leaks" | sed 's/^/#   /'
fi
if ls "$work"/*.cmdline >/dev/null 2>&1 && grep -qF "$USER_IN%xxxx" "$work"/*.cmdline; then
	pass "the daemon's command line shows the URL password crossed out"
else
	fail "the daemon's command line shows the URL password crossed out"
fi

echo "$passed passed, $failed failed"
((failed == 0))
