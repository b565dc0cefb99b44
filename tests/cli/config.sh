#!/bin/bash
# SPDX-License-Identifier: MIT
#
# cli suite: the configuration file.
#
#   config.sh ISERFUSE_BINARY UNIT_FILE MAN_PAGE
#
# Errors (file:line, exit 1, nothing mounted): unknown keys and options,
# syntax, sections, missing and empty paths, bad values found after the
# file is read, LUNs that cannot be mounted; a mount from a configuration
# section on its mountpoint with its options; the command line wins over
# the file (ro, rw, the last word).  Needs tgt.
# Prints "ok - ..." / "not ok - ..." and "N passed, M failed"; exits 1 if
# anything failed, 77 (skip) when not root.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
. "$here/../lib/cli.sh"

cli_setup config "$@"

cli_target

# ---------------------------------------------------------------- configuration errors
conf=$work/iserfuse.conf
printf '# comment\ninitiator_name = %s\n[lab]\nurl = %s\ncolour = blue\n' "$initiator" "$url" >"$conf"
run_fail1 "unknown key: file and line 5, exit 1" "^iserfuse: $conf:5: unknown key 'colour' in section \[lab\]" \
	"$iserfuse" -o "config=$conf" lab "$mnt"
printf 'options = ro\nthis line has no equals sign\n' >"$conf"
run_fail1 "syntax error: line 2, exit 1" "^iserfuse: $conf:2: syntax error" "$iserfuse" -o "config=$conf" "$url" "$mnt"
printf '[lab]\nurl = %s\n\n[lab]\nurl = %s\n' "$url" "$url" >"$conf"
run_fail1 "a section twice: line 4, exit 1" "^iserfuse: $conf:4: section \[lab\] appears twice" \
	"$iserfuse" -o "config=$conf" lab "$mnt"
printf 'options = ro\n[lab]\nmountpoint = %s\n' "$mnt" >"$conf"
run_fail1 "a section without url: line 2, exit 1" "^iserfuse: $conf:2: section \[lab\] has no url" \
	"$iserfuse" -o "config=$conf" lab
printf '[lab]\nurl = %s\n' "$url" >"$conf"
run_fail1 "an unknown section name, exit 1" "'nosuch' is neither an iscsi:// URL nor a section of $conf" \
	"$iserfuse" -o "config=$conf" nosuch "$mnt"
run_fail1 "a missing -o config file, exit 1" "$work/absent.conf: No such file" \
	"$iserfuse" -o "config=$work/absent.conf" "$url" "$mnt"
printf 'options = queue_depth=16,frobnicate\n' >"$conf"
mkdir -p "$work/conf.d"
run_fail1 "a -o config that is a directory: one line, exit 1" "^iserfuse: $work/conf.d: Is a directory$" \
	"$iserfuse" -o "config=$work/conf.d" "$url" "$mnt"
run_fail1 "an empty -o config=: one line naming the option, exit 1" "^iserfuse: bad option 'config=': the path is empty$" \
	"$iserfuse" -o "config=" "$url" "$mnt"
run_fail1 "an unknown option in the file's options: file and line 1, exit 1" \
	"^iserfuse: $conf:1: unknown option 'frobnicate'\$" "$iserfuse" -o "config=$conf" "$url" "$mnt"
run_fail1 "an unknown option on the command line: one line naming it, not the target, exit 1" \
	"^iserfuse: unknown option 'bogus=1'\$" "$iserfuse" -o ro,bogus=1 "$url" "$mnt"
run_fail1 "an unknown dash option on the command line: one line naming it, exit 1" \
	"^iserfuse: unknown option '-x'\$" "$iserfuse" -x "$url" "$mnt"
# Empty items are skipped, as mount(8) does: these fail only on the closed port.
closed=iscsi://127.0.0.1:1/${url##*/}
run_fail1 "empty -o items are skipped" "^iserfuse: cannot connect to 127.0.0.1:1: " \
	"$iserfuse" -o ro,,queue_depth=5, "$closed" "$mnt"
printf 'options =\n[lab]\nurl = %s\noptions = ro,,queue_depth=5\n' "$closed" >"$conf"
run_fail1 "an empty options = and empty items in the file are skipped" "^iserfuse: cannot connect to 127.0.0.1:1: " \
	"$iserfuse" -o "config=$conf" lab "$mnt"
# Values found bad after the file is read name the file and the line too.
printf '[lab]\n# the portal\nurl = iscsi://127.0.0.1:99999/%s\n' "${url##*/}" >"$conf"
run_fail1 "a bad url = in a section: file and line 3, exit 1" "^iserfuse: $conf:3: bad URL: bad port '99999'\$" \
	"$iserfuse" -o "config=$conf" lab "$mnt"
run_fail1 "--list with a bad url = in a section: file and line 3, exit 1" "^iserfuse: $conf:3: bad URL: bad port '99999'\$" \
	"$iserfuse" --list -o "config=$conf" lab
printf '[lab]\nurl = %s\nsecret_file = %s\n' "$url" "$work/absent.secret" >"$conf"
run_fail1 "a missing secret_file = in a section: file and line 3, exit 1" \
	"^iserfuse: $conf:3: secret_file $work/absent.secret: No such file or directory\$" "$iserfuse" -o "config=$conf" lab "$mnt"
printf '[lab]\nurl = %s\nsecret_file =\n' "$url" >"$conf"
run_fail1 "an empty secret_file = in a section: file and line 3, exit 1" \
	"^iserfuse: $conf:3: key 'secret_file' is empty: a path expected\$" "$iserfuse" -o "config=$conf" lab "$mnt"
printf '[lab]\nurl = %s\nmountpoint = %s\n' "$url" "$work/absent.mnt" >"$conf"
run_fail1 "a missing mountpoint = in a section: file and line 3, exit 1" \
	"^iserfuse: $conf:3: mount point $work/absent.mnt: No such file or directory\$" "$iserfuse" -o "config=$conf" lab
printf 'options = ro\n[lab]\nurl = %s\noptions = transport=carrier-pigeon\n' "$url" >"$conf"
run_fail1 "a bad transport= in a section's options: file and line 4, exit 1" \
	"^iserfuse: $conf:4: bad option 'transport=carrier-pigeon'" "$iserfuse" -o "config=$conf" lab "$mnt"
run_fail1 "a bad log_level, exit 1" "log_level=loud" "$iserfuse" -o log_level=loud "$url" "$mnt"
# A LUN in the URL that cannot be mounted: named lun<N>, as the logs name it.
run_fail1 "a LUN the target lacks: lun7, exit 1" "^iserfuse: lun7 does not exist on $TGT_IQN\$" "$iserfuse" "$url/7" "$mnt"
run_fail1 "a LUN that is no disk (tgtd's controller): lun0, exit 1" \
	"^iserfuse: lun0 is not a disk \\(peripheral device type 0x0c\\)\$" "$iserfuse" "$url/0" "$mnt"

# ---------------------------------------------------------------- a mount from a configuration section
cli_conf
if run_ok "iserfuse lab mounts section [lab] on its mountpoint" "$iserfuse" -o "config=$conf" lab; then
	check "the section's options apply (umask=022: lun1 is 0644)" test "$(stat -c %a "$mnt/lun1")" = 644
	check_eq "the mount shows lun1, .stats and by-id" "$(ls -A "$mnt" | tr '\n' ' ')" ".stats by-id lun1 "
	check "fusermount3 -u unmounts" unmount "$mnt"
fi

# ---------------------------------------------------------------- the command line wins over the file
if run_ok "iserfuse NAME MOUNTPOINT with -o ro on the command line" "$iserfuse" -o "config=$conf,ro" lab "$mnt"; then
	check_eq "-o ro: lun1 is 0444 & ~022" "$(stat -c %a "$mnt/lun1")" 444
	check "-o ro: writing fails" bash -c "! dd if=/dev/zero of='$mnt/lun1' bs=512 count=1 conv=notrunc status=none 2>/dev/null"
	unmount "$mnt" || true
fi

printf 'options = ro\n[rolab]\nurl = %s\noptions = initiator_name=%s\n' "$url" "$initiator" >"$work/ro.conf"
if run_ok "options = ro in the file's global part" "$iserfuse" -o "config=$work/ro.conf" rolab "$mnt"; then
	check "the file's ro reaches the kernel mount" grep -qE " $mnt fuse.iserfuse ro[, ]" /proc/mounts
	check_eq "the file's ro: lun1 is 0400" "$(stat -c %a "$mnt/lun1")" 400
	unmount "$mnt" || true
fi
# -o rw on the command line undoes the file's ro: the files and the kernel mount are read-write.
if run_ok "-o rw on the command line over the file's ro" "$iserfuse" -o "config=$work/ro.conf,rw" rolab "$mnt"; then
	check "-o rw: the kernel mount is rw" grep -qE " $mnt fuse.iserfuse rw[, ]" /proc/mounts
	check_eq "-o rw: lun1 is 0600" "$(stat -c %a "$mnt/lun1")" 600
	check "-o rw: writing works" dd if=/dev/zero of="$mnt/lun1" bs=512 count=1 conv=notrunc,fsync status=none
	unmount "$mnt" || true
fi
if run_ok "-o ro,rw: the last word wins" "$iserfuse" -o "ro,rw,initiator_name=$initiator" "$url" "$mnt"; then
	check "-o ro,rw: writing works on a rw kernel mount" bash -c \
		"grep -qE ' $mnt fuse.iserfuse rw[, ]' /proc/mounts && dd if=/dev/zero of='$mnt/lun1' bs=512 count=1 conv=notrunc,fsync status=none"
	unmount "$mnt" || true
fi

summary
