#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Build one libFuzzer harness of tests/fuzz/ with clang and run it on a copy
# of its seed corpus for a bounded time.
#
#   tests/fuzz/run.sh NAME [SECONDS]
#   tests/fuzz/run.sh long [SECONDS]
#
# NAME is pdu, text, sense, vpd, url, login, rtpg or sendtargets
# (tests/fuzz/fuzz_NAME.c, seeds in tests/fuzz/corpus/NAME/, libFuzzer
# dictionary tests/fuzz/NAME.dict if any).  SECONDS defaults to $FUZZ_SECONDS, else 30.
#
# `long` is for runs outside CI: every harness in turn for SECONDS each
# (default $FUZZ_SECONDS, else 3600), with FUZZ_OUT defaulting to
# build-fuzz/ at the repository root and the grown corpus kept there from
# run to run (FUZZ_RESUME=1: the seeds are added to it, not replacing it).
# Exit status 1 if any harness found something; a summary line per harness.
# The harness, the grown corpus, the log and any crashing input go to
# $FUZZ_OUT/NAME when FUZZ_OUT is set (kept), else to a temporary directory
# (removed, except when something was found).  FUZZ_CC overrides the compiler
# (default clang).
#
# Exit status: 0 when the time ran out with nothing found; 1 on any crash,
# sanitizer report, leak, timeout (-timeout=5) or RSS limit, or when the
# harness does not build; 77 (meson's "skipped") when there is no clang or
# no libFuzzer runtime.  The last line is "fuzz NAME: N executions, C crashes".
set -uo pipefail

harnesses=(pdu text sense vpd url login rtpg sendtargets)

usage() {
	echo "usage: $0 pdu|text|sense|vpd|url|login|rtpg|sendtargets|long [SECONDS]" >&2
	exit 2
}

[[ $# -ge 1 && $# -le 2 ]] || usage
name=$1
if [[ $name == long ]]; then
	secs=${2:-${FUZZ_SECONDS:-3600}}
	[[ $secs =~ ^[0-9]+$ && $secs -gt 0 ]] || usage
	top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	export FUZZ_OUT=${FUZZ_OUT:-$top/build-fuzz} FUZZ_RESUME=1
	status=0
	summary=()
	for h in "${harnesses[@]}"; do
		rc=0
		out=$(bash "${BASH_SOURCE[0]}" "$h" "$secs" 2>&1 | tee /dev/stderr | tail -n 1) || rc=$?
		((rc == 0 || rc == 77)) || status=1
		summary+=("$out (exit $rc)")
	done
	printf '%s\n' "${summary[@]}"
	exit "$status"
fi
seconds=${2:-${FUZZ_SECONDS:-30}}
[[ $seconds =~ ^[0-9]+$ && $seconds -gt 0 ]] || usage

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

# The pure sources each harness needs, relative to the repository root, and libraries.
libs=()
case $name in
pdu) sources=(initiator/wire/pdu.c) ;;
text) sources=(initiator/wire/text.c) ;;
sense) sources=(initiator/scsi/scsi.c initiator/scsi/scsi_errno.c) ;;
vpd) sources=(initiator/scsi/scsi.c) ;;
url) sources=(initiator/net/url.c) ;;
login) sources=(initiator/login/login.c initiator/wire/text.c initiator/login/chap.c initiator/wire/pdu.c initiator/util/log.c
	initiator/transport/cancel.c) libs=(-lnettle) ;;
rtpg) sources=(initiator/scsi/alua.c initiator/scsi/scsi.c) ;;
sendtargets) sources=(initiator/login/discovery.c initiator/net/portal_addr.c initiator/login/login.c initiator/wire/text.c initiator/login/chap.c initiator/wire/pdu.c
	initiator/util/log.c initiator/transport/cancel.c) libs=(-lnettle) ;;
*) usage ;;
esac

cc=${FUZZ_CC:-clang}
cflags=('-fsanitize=fuzzer,address,undefined' -fno-sanitize-recover=all
	-D_GNU_SOURCE -std=c17 -g -O1 -Wall -Wextra -I "$root")

say() {
	printf 'fuzz %s: %s\n' "$name" "$*"
}

if ! command -v "$cc" >/dev/null 2>&1; then
	say "$cc not found (Debian: apt-get install clang libclang-rt-14-dev), skipping"
	exit 77
fi

if [[ -n ${FUZZ_OUT:-} ]]; then
	work=$FUZZ_OUT/$name
	mkdir -p "$work" || exit 1
	work=$(cd "$work" && pwd)
	keep=1
else
	work=$(mktemp -d "${TMPDIR:-/tmp}/fuzz-$name.XXXXXX") || exit 1
	keep=0
fi
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
	if ((keep == 0)); then
		rm -rf "$work"
	fi
}
trap cleanup EXIT

# ---------------------------------------------------------------- build

bin=$work/fuzz_$name
srcs=("$here/fuzz_$name.c")
for s in "${sources[@]}"; do
	srcs+=("$root/$s")
done
if ! "$cc" "${cflags[@]}" "${srcs[@]}" "${libs[@]}" -o "$bin" 2>"$work/build.log"; then
	# Is it the harness, or a compiler without the libFuzzer runtime?
	probe=$work/probe
	printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
		'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);' \
		'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' \
		>"$probe.c"
	if ! "$cc" -fsanitize=fuzzer,address,undefined "$probe.c" -o "$probe" >/dev/null 2>&1; then
		cat "$work/build.log" >&2
		say "$cc cannot link -fsanitize=fuzzer (Debian: apt-get install libclang-rt-14-dev), skipping"
		exit 77
	fi
	cat "$work/build.log" >&2
	say "the harness does not build"
	exit 1
fi

# ---------------------------------------------------------------- run

corpus=$work/corpus
artifacts=$work/artifacts
if [[ ${FUZZ_RESUME:-0} == 1 ]]; then
	rm -rf "$artifacts" # the grown corpus stays: seeds are added to it
else
	rm -rf "$corpus" "$artifacts"
fi
mkdir -p "$corpus" "$artifacts"
if [[ -d $here/corpus/$name ]]; then
	cp -- "$here/corpus/$name"/* "$corpus"/ 2>/dev/null
fi

say "$(find "$corpus" -type f | wc -l) seeds, $seconds s, in $work"
# libFuzzer's own exit codes (77, 70) would read as "skipped" or be easy
# to miss: every failure is 1.  The outer timeout only guards against a
# harness that stops answering libFuzzer's own time limit.
dict=()
if [[ -f $here/$name.dict ]]; then
	dict=(-dict="$here/$name.dict")
fi
timeout -k 10 $((seconds + 120)) "$bin" \
	-max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 \
	-print_final_stats=1 -error_exitcode=1 -timeout_exitcode=1 \
	"${dict[@]}" -artifact_prefix="$artifacts/" "$corpus" >"$work/fuzz.log" 2>&1
rc=$?

execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/fuzz.log" | tail -n 1)
if [[ -z $execs ]]; then
	# no final stats (killed, or it died in a way libFuzzer did not catch):
	# the last status line has the count
	execs=$(grep -oE '^#[0-9]+' "$work/fuzz.log" | tail -n 1 | tr -d '#')
fi
crashes=$(find "$artifacts" -type f | wc -l)
if ((rc != 0 && crashes == 0)); then
	crashes=1
fi

grep -E '^(INFO: (Seed|Loaded)|stat::|Done )' "$work/fuzz.log"
if ((rc != 0)); then
	keep=1
	echo "---- last lines of $work/fuzz.log" >&2
	tail -n 80 "$work/fuzz.log" >&2
	for f in "$artifacts"/*; do
		[[ -f $f ]] || continue
		echo "---- $f ($(stat -c %s "$f") bytes)" >&2
		od -A d -t x1z -v "$f" | head -n 64 >&2
	done
	say "libFuzzer exited with status $rc"
fi
say "${execs:-0} executions, $crashes crashes"
((rc == 0)) || exit 1
exit 0
