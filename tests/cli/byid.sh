#!/bin/bash
# SPDX-License-Identifier: MIT
#
# cli suite: by-id/ names.
#
#   byid.sh ISERFUSE_BINARY UNIT_FILE MAN_PAGE
#
# The by-id/ links of a mount against libiscsi's view of VPD 0x83 (iscsi-
# inq): t10-, one wwn-0x per NAA designator, udev's scsi- name; the links
# resolve to lun1.  Needs tgt, libiscsi-bin.
# Prints "ok - ..." / "not ok - ..." and "N passed, M failed"; exits 1 if
# anything failed, 77 (skip) when not root.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
. "$here/../lib/cli.sh"

cli_setup byid "$@"

cli_target

cli_mount "a mount" -o "initiator_name=$initiator" "$url" "$mnt"

# by-id/ against libiscsi's view of VPD 0x83 (iscsi-inq prints binary designators raw).
timeout 30 iscsi-inq -i "$initiator-inq" -e 1 -c 131 "$url/1" >"$work/inq" 2>&1 || true
t10=$(awk -F'[][]' '/^Designator Type:\(1\)/ { t = 1; next } t && /^Designator:/ { print $2; exit }' "$work/inq" |
	tr -s ' ' '_')
naa=$(grep -c '^Designator Type:(3) NAA' "$work/inq" || true)
check "iscsi-inq shows a T10 vendor ID ($t10) and $naa NAA designator(s)" test -n "$t10" -a "$naa" -ge 1
check_eq "by-id/t10-$t10 -> ../lun1" "$(readlink "$mnt/by-id/t10-$t10" || true)" ../lun1
check_eq "one by-id/wwn-0x... per NAA designator" "$(find "$mnt/by-id" -name 'wwn-0x*' | wc -l)" "$naa"
firsts=$(awk -F'[][]' '/^Designator Type:\(3\)/ { n = 1; next } n && /^Designator:/ { printf "%s", substr($2, 1, 1); n = 0 }' "$work/inq" | od -An -tx1 | tr -d ' \n' | sed 's/0a$//')
mine=$(cd "$mnt/by-id" && for f in wwn-0x*; do printf '%s' "${f:6:2}"; done)
check_eq "the wwn names start with the NAA bytes iscsi-inq shows" "$(echo "$mine" | fold -w2 | sort | tr -d '\n')" "$(echo "$firsts" | fold -w2 | sort | tr -d '\n')"
# udev's scsi_id prefers NAA 6 (IEEE Registered Extended) to tgtd's NAA 3 (locally assigned), which comes first
naa6=$(cd "$mnt/by-id" && for f in wwn-0x6*; do [[ -e $f ]] && printf '%s' "${f#wwn-0x}"; done)
check "tgtd reports an NAA 6 designator ($naa6)" test "${#naa6}" -eq 32
check_eq "by-id/scsi-<id> is udev's name: 3 and the NAA 6 designator" "$(cd "$mnt/by-id" && echo scsi-*)" "scsi-3$naa6"
check "by-id links resolve to lun1" cmp -n 65536 "$mnt/by-id/t10-$t10" "$mnt/lun1"
unmount "$mnt" || true

summary
