#!/bin/bash
# SPDX-License-Identifier: MIT
#
# cli suite: the man page's examples.
#
#   examples.sh ISERFUSE_BINARY UNIT_FILE MAN_PAGE
#
# Every runnable command line of the man page's EXAMPLES, against the test
# target (URLs, mount points and files swapped for the test's own).  Needs
# tgt, qemu-img.
# Prints "ok - ..." / "not ok - ..." and "N passed, M failed"; exits 1 if
# anything failed, 77 (skip) when not root.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
. "$here/../lib/cli.sh"

cli_setup examples "$@"

cli_target

# ---------------------------------------------------------------- the man page's examples
# Each command line of EXAMPLES runs against the test target: its URLs,
# mount points and files are swapped for the test's own.  iSER needs an
# RDMA device; systemctl, /etc/iserfuse.conf and fstab lines need the
# installed system (the fstab forms are checked above).
mkdir -p "$work/ex-disk" "$work/ex-ro"
printf 'username = nobody\npassword = not-needed-here\n' >"$work/ex-secret"
chmod 600 "$work/ex-secret"
awk '/^\.SH EXAMPLES/ { f = 1; next } /^\.SH/ { f = 0 } f' "$manpage" |
	awk '/^\.nf/ { b = 1; next } /^\.fi/ { b = 0 } b && !/^\./' | sed 's/\\-/-/g' >"$work/examples"
nex=0
while IFS= read -r line; do
	case $line in
	*'?iser'* | systemctl* | *fuse.iserfuse* | 'iserfuse lab'*)
		echo "# man page example not run here: $line"
		continue
		;;
	esac
	cmd=${line//'iscsi://[2001:db8::10]:3261/iqn.2026-11.org.example:disk'/$url}
	cmd=${cmd//'iscsi://192.0.2.10/iqn.2026-11.org.example:disk'/$url}
	cmd=${cmd//'iscsi://192.0.2.10'/iscsi://127.0.0.1:$port}
	cmd=${cmd//\/mnt\//$work/ex-}
	cmd=${cmd//\/var\/tmp\//$work/}
	cmd=${cmd//'$HOME/.iscsi-secret'/$work/ex-secret}
	nex=$((nex + 1))
	run_ok "man page example: $line" env PATH="$(dirname "$iserfuse"):$PATH" bash -c "$cmd" || true
done <"$work/examples"
check "the man page has at least 6 runnable examples ($nex)" test "$nex" -ge 6
check "the qcow2 example wrote an image" test -s "$work/disk.qcow2"
for m in "$work/ex-disk" "$work/ex-ro"; do
	is_mounted "$m" && unmount "$m"
done

summary
