#!/bin/bash
# SPDX-License-Identifier: MIT
#
# cli suite: --list and the initiator name.
#
#   list.sh ISERFUSE_BINARY UNIT_FILE MAN_PAGE
#
# A bad -o initiator_name (not an iSCSI name) is one line, exit 1; a
# generated name that cannot be kept is a warning; --list of a target the
# portal does not have; --list with CHAP credentials from a secret file,
# the environment, the URL and a configuration section, its progress line
# on a terminal, --list URL/LUN.  Needs tgt.
# Prints "ok - ..." / "not ok - ..." and "N passed, M failed"; exits 1 if
# anything failed, 77 (skip) when not root.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
. "$here/../lib/cli.sh"

cli_setup list "$@"

cli_target

# The initiator name is an iSCSI name (RFC 7143 §4.2.7): anything else is one line, exit 1.
for bad in "" "notaniqn" "iqn.2026-11.org.example:a b" "iqn.26-11.org.example" "eui.12345" "naa.xyz"; do
	run_fail1 "-o initiator_name='$bad': one line, exit 1" "^iserfuse: bad option 'initiator_name=$bad': " \
		"$iserfuse" -o "initiator_name=$bad" "$url" "$mnt"
	check_eq "-o initiator_name='$bad': one line" "$(wc -l <"$work/out")" 1
done
# A name that cannot be kept is said (a new one at every start breaks a target's ACL).
rc=0
timeout 60 setpriv --reuid=65534 --regid=65534 --clear-groups env -u XDG_STATE_HOME -u STATE_DIRECTORY HOME=/nonexistent \
	"$iserfuse" --list "$url" >"$work/out" 2>&1 || rc=$?
check "a generated initiator name that cannot be kept is a warning" \
	grep -q "cannot keep the generated initiator name .*-o initiator_name=" "$work/out"
# --list of a target the portal does not have: one line, exit 1.
run_fail1 "--list of a target the portal does not have: exit 1" "^iserfuse: target iqn.2026-11.org.example:nosuch is not among the 1 target\\(s\\) behind 127.0.0.1:$port$" \
	"$iserfuse" --list -o "initiator_name=$initiator" "iscsi://127.0.0.1:$port/iqn.2026-11.org.example:nosuch"

# ---------------------------------------------------------------- --list with CHAP
ctl=$(<"$work/tgt/ctl")
if timeout 10 tgtadm -C "$ctl" --lld iscsi --op new --mode account --user clilist --password cli-secret-123 &&
	timeout 10 tgtadm -C "$ctl" --lld iscsi --op bind --mode account --tid 1 --user clilist; then
	timeout 60 "$iserfuse" --list -o initiator_name="$initiator" "iscsi://127.0.0.1:$port" >"$work/list0" 2>&1 || true
	check "--list without credentials: the target refuses its login" grep -q "^  Error: .*auth" "$work/list0"
	printf 'username = clilist\npassword = cli-secret-123\n' >"$work/secret"
	chmod 600 "$work/secret"
	run_ok "--list -o secret_file=" "$iserfuse" --list -o "secret_file=$work/secret,initiator_name=$initiator" "iscsi://127.0.0.1:$port" &&
		check "--list with CHAP from a secret file shows LUN 1" grep -q "^  Lun 1: type disk" "$work/out"
	run_ok "--list with CHAP from the environment" env ISERFUSE_CHAP_USERNAME=clilist ISERFUSE_CHAP_PASSWORD=cli-secret-123 \
		"$iserfuse" --list -o "initiator_name=$initiator" "iscsi://127.0.0.1:$port" &&
		check "--list with CHAP from the environment shows LUN 1" grep -q "^  Lun 1: type disk" "$work/out"
	run_ok "--list with CHAP from the URL" "$iserfuse" --list -o "initiator_name=$initiator" \
		"iscsi://clilist%cli-secret-123@127.0.0.1:$port" &&
		check "--list with CHAP from the URL shows LUN 1 and no password" \
			bash -c "grep -q '^  Lun 1: type disk' '$work/out' && ! grep -q cli-secret-123 '$work/out'"
	if command -v script >/dev/null; then
		timeout 60 script -qec "'$iserfuse' --list -o 'secret_file=$work/secret,initiator_name=$initiator' iscsi://127.0.0.1:$port" \
			/dev/null 2>&1 | cat -v >"$work/tty.out" || true
		check "--list on a terminal shows what it waits for" grep -q "disk: logging in via 127.0.0.1:$port \.\.\." "$work/tty.out"
		check "--list on a terminal erases that line before each output line" grep -qF '^M^[[K  Lun 1: type disk' "$work/tty.out"
	fi
	printf '[lab]\nurl = iscsi://127.0.0.1:%s\nsecret_file = %s\n' "$port" "$work/secret" >"$work/list.conf"
	run_ok "--list NAME takes url and secret_file from the section" "$iserfuse" --list \
		-o "config=$work/list.conf,initiator_name=$initiator" lab &&
		check "--list NAME shows LUN 1" grep -q "^  Lun 1: type disk" "$work/out"
	run_ok "--list URL/1" "$iserfuse" --list -o "secret_file=$work/secret,initiator_name=$initiator" "$url/1" &&
		check_eq "--list URL/1 lists LUN 1 only" "$(grep -c '^  Lun ' "$work/out") $(grep -c '^  Lun 1: type disk' "$work/out")" "1 1"
else
	fail "tgtadm sets up a CHAP account"
fi

summary
