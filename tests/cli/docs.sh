#!/bin/bash
# SPDX-License-Identifier: MIT
#
# cli suite: the systemd unit and the man page.
#
#   docs.sh ISERFUSE_BINARY UNIT_FILE MAN_PAGE
#
# The systemd unit through systemd-analyze verify (when present) and its
# keys; the man page through mandoc -T lint (when present) and man: no
# warnings, every option and section named.  No target.
# Prints "ok - ..." / "not ok - ..." and "N passed, M failed"; exits 1 if
# anything failed, 77 (skip) when not root.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
. "$here/../lib/cli.sh"

cli_setup docs "$@"

# ---------------------------------------------------------------- systemd unit
if command -v systemd-analyze >/dev/null; then
	mkdir -p "$work/units"
	sed "s|^ExecStart=[^ ]*|ExecStart=$iserfuse|" "$unit" >"$work/units/iserfuse@lab.service"
	timeout 60 systemd-analyze verify --man=no "$work/units/iserfuse@lab.service" >"$work/verify" 2>&1 || echo "exit $?" >>"$work/verify"
	if [[ ! -s $work/verify ]]; then pass "systemd-analyze verify iserfuse@lab.service: no complaint"; else
		fail "systemd-analyze verify iserfuse@lab.service"
		note "$work/verify"
	fi
else
	echo "# systemd-analyze not installed: checking the unit's keys only"
fi
for kv in "Type=notify" "Restart=on-failure" "After=network-online.target" "Wants=network-online.target"; do
	check "the unit has $kv" grep -qx "$kv" "$unit"
done
check "the unit runs the section named by the instance in the foreground" grep -qE '^ExecStart=/.*/iserfuse -f %i$' "$unit"

# ---------------------------------------------------------------- man page
if command -v mandoc >/dev/null; then
	mandoc -T lint -W warning "$manpage" >"$work/lint" 2>&1 || true
	if [[ ! -s $work/lint ]]; then pass "mandoc -T lint: no warnings"; else
		fail "mandoc -T lint"
		note "$work/lint"
	fi
fi
MANWIDTH=80 LC_ALL=C.UTF-8 MANROFFSEQ='' man --warnings -l "$manpage" >"$work/man.txt" 2>"$work/man.err" || true
if [[ ! -s $work/man.err ]] && grep -q "THREAD MODEL" "$work/man.txt"; then pass "man -l renders the page without warnings"; else
	fail "man -l renders the page without warnings"
	note "$work/man.err"
fi
unnamed=
for opt in config initiator_name ro queue_depth max_io_kib pool_slices login_timeout cmd_timeout \
	noop_interval noop_timeout header_digest data_digest secret_file log_level umask allow_other; do
	grep -q -- "$opt" "$work/man.txt" || unnamed="$unnamed $opt"
done
check_eq "the man page names every option" "${unnamed# }" ""
for section in SYNOPSIS OPTIONS "URL SYNTAX" FILES "EXIT STATUS" "THREAD MODEL" SECURITY EXAMPLES "SEE ALSO"; do
	check "the man page has $section" grep -q "^$section" "$work/man.txt"
done

summary
