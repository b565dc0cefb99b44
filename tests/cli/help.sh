#!/bin/bash
# SPDX-License-Identifier: MIT
#
# cli suite: --help and --version.
#
#   help.sh ISERFUSE_BINARY UNIT_FILE MAN_PAGE
#
# --help (every -o key with its default and range, the same as the man
# page's OPTIONS; the CHAP sources, allow_other, the FUSE options, the
# configuration-section form); no arguments: one usage line, exit 1;
# --version names libfuse and libibverbs (build and run time), checked
# against pkg-config and the library file.
# Prints "ok - ..." / "not ok - ..." and "N passed, M failed"; exits 1 if
# anything failed, 77 (skip) when not root.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
. "$here/../lib/cli.sh"

cli_setup help "$@"

# ---------------------------------------------------------------- --help, --version
rc=0
"$iserfuse" --help >"$work/help" 2>&1 || rc=$?
check_eq "--help exits 0" "$rc" 0
# One table (gateway/settings/options.c) drives --help and must match the man page:
# every -o key --help shows, with its "(default D, MIN..MAX)", is in the
# man page's OPTIONS with the same words, and the other way round.
python3 - "$work/help" "$manpage" >"$work/table.out" 2>&1 <<'PY' || true
import re, sys
helptext = open(sys.argv[1]).read().split("\n\n")
entries, cur = {}, None
for block in helptext:
    if "iserfuse options:" in block:
        for line in block.splitlines():
            m = re.match(r"    -o ([a-z_]+)[= ]", line + " ")
            if m and "," not in line.split()[1]:
                cur = m.group(1)
                entries[cur] = line
            elif cur and line.startswith("      "):
                entries[cur] += " " + line.strip()
            else:
                cur = None
defaults = {}
for k, text in entries.items():
    m = re.search(r"(\(default [^()]*\))$", text)
    defaults[k] = m.group(1) if m else None
man = open(sys.argv[2]).read()
opts = man.split("\n.SH OPTIONS\n", 1)[1].split("\n.SH ", 1)[0]
man_keys = {}
for para in opts.split("\n.TP\n")[1:]:
    head, _, body = para.partition("\n")
    if "_netdev" in head:
        continue  # fstab words, not iserfuse options
    body = re.sub(r"\s+", " ", body.replace("\\-", "-"))
    for key in re.findall(r'(?:\\-o\s*"?\s*|\\fR, "\s*")([a-z_]+)', head):
        man_keys[key] = body
bad = []
for k, d in sorted(defaults.items()):
    if d is None:
        bad.append("--help: %s has no (default ...)" % k)
    elif k not in man_keys:
        bad.append("man page: no entry for -o %s" % k)
    elif d not in man_keys[k]:
        bad.append("man page: -o %s lacks '%s'" % (k, d))
for k in sorted(set(man_keys) - set(defaults)):
    bad.append("--help: no entry for -o %s (in the man page)" % k)
print("\n".join(bad) if bad else "same %d keys" % len(defaults))
PY
check_eq "--help and the man page list the same -o keys, defaults and ranges" "$(cat "$work/table.out")" "same 32 keys"
check_eq "--help shows the CHAP sources once" "$(grep -c 'CHAP credentials come from' "$work/help")" 1
check_eq "--help shows allow_other once" "$(grep -c -- '-o allow_other' "$work/help")" 1
rc=0
"$iserfuse" >"$work/noargs" 2>&1 || rc=$?
check_eq "no arguments: exit 1" "$rc" 1
check_eq "no arguments: one usage line" "$(wc -l <"$work/noargs") $(head -c 6 "$work/noargs")" "1 usage:"
check "--help shows the FUSE options too" grep -q -- "-o auto_unmount" "$work/help"
check "--help shows the configuration-section form" grep -q "NAME \[MOUNTPOINT\]" "$work/help"

"$iserfuse" --version >"$work/version"
fuse_ver=$(pkg-config --modversion fuse3)
ibv_build=$(pkg-config --modversion libibverbs)
ibv_run=$(readlink -f "$(ldconfig -p | awk '$1 == "libibverbs.so.1" { print $NF; exit }')")
ibv_run=${ibv_run##*.so.}
check "--version names libfuse $fuse_ver" grep -qx "libfuse $fuse_ver (built against ${fuse_ver%.*})" "$work/version"
check "--version names libibverbs $ibv_build at build time" grep -q "^libibverbs $ibv_build at build time (rdma-core ${ibv_build#*.*.})" "$work/version"
check "--version names libibverbs $ibv_run at run time" grep -q "^libibverbs $ibv_run at run time" "$work/version"

summary
