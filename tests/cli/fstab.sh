#!/bin/bash
# SPDX-License-Identifier: MIT
#
# cli suite: the fstab forms.
#
#   fstab.sh ISERFUSE_BINARY UNIT_FILE MAN_PAGE
#
# mount.fuse3 with 'iserfuse#URL' and with -t fuse.iserfuse (fstab words
# such as _netdev and nofail accepted); iserfuse itself accepts them;
# mount(8) with fstab lines by URL and by section name, and mount -t
# fuse.iserfuse.  Needs tgt, fuse3; unshare for mount(8).
# Prints "ok - ..." / "not ok - ..." and "N passed, M failed"; exits 1 if
# anything failed, 77 (skip) when not root.
# shellcheck source-path=SCRIPTDIR source=../lib/open.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
. "$here/../lib/cli.sh"

cli_setup fstab "$@"

cli_target

# ---------------------------------------------------------------- the configuration file the fstab lines name
cli_conf

# the pattern the fstab mounts read back at byte 196608 of lun1
cli_mount "a mount to write the pattern" -o "initiator_name=$initiator" "$url" "$mnt"
dd if=/dev/urandom of="$work/pattern" bs=64k count=1 status=none
dd if="$work/pattern" of="$mnt/lun1" bs=64k seek=3 conv=notrunc,fsync status=none
unmount "$mnt" || true

# ---------------------------------------------------------------- fstab forms
if run_ok "mount.fuse3 'iserfuse#URL' MOUNTPOINT -o ro,_netdev,nofail,noauto,x-systemd.automount" \
	env PATH="$(dirname "$iserfuse"):$PATH" mount.fuse3 "iserfuse#$url" "$mnt" \
	-o "ro,_netdev,nofail,noauto,x-systemd.automount,initiator_name=$initiator"; then
	check "mounted as fuse.iserfuse, read-only" grep -qE " $mnt fuse.iserfuse ro[, ]" /proc/mounts
	unmount "$mnt" || true
fi
if run_ok "mount.fuse3 URL MOUNTPOINT -t fuse.iserfuse -o _netdev,nofail,config=..." \
	env PATH="$(dirname "$iserfuse"):$PATH" mount.fuse3 "$url" "$mnt" -t fuse.iserfuse \
	-o "rw,_netdev,nofail,config=$conf"; then
	check "the fuse.iserfuse mount reads lun1" cmp -n 65536 -i 0:196608 "$work/pattern" "$mnt/lun1"
	unmount "$mnt" || true
fi
run_ok "iserfuse itself accepts _netdev,nofail,defaults,comment=x" "$iserfuse" \
	-o "_netdev,nofail,defaults,comment=x,users,initiator_name=$initiator" "$url" "$mnt" && unmount "$mnt"
# mount(8) runs helpers with the standard PATH only: in a private mount
# namespace a tmpfs over /usr/local/bin holds a copy of this build.
if command -v unshare >/dev/null; then
	printf '%s %s fuse.iserfuse ro,_netdev,nofail,initiator_name=%s 0 0\n' "$url" "$mnt" "$initiator" >"$work/fstab"
	printf 'lab %s fuse.iserfuse _netdev,config=%s 0 0\n' "$work/mnt2" "$conf" >>"$work/fstab"
	mkdir -p "$work/mnt2"
	cat >"$work/ns.sh" <<EOF
set -e
mount -t tmpfs tmpfs /usr/local/bin
cp "$iserfuse" /usr/local/bin/iserfuse
mount -T "$work/fstab" "$mnt"
grep " $mnt fuse.iserfuse ro," /proc/mounts
cmp -n 65536 -i 0:196608 "$work/pattern" "$mnt/lun1"
umount "$mnt"
mount -T "$work/fstab" "$work/mnt2"
cmp -n 65536 -i 0:196608 "$work/pattern" "$work/mnt2/lun1"
umount "$work/mnt2"
mount -t fuse.iserfuse -o ro,_netdev,nofail,initiator_name=$initiator "$url" "$mnt"
grep " $mnt fuse.iserfuse ro," /proc/mounts
umount "$mnt"
echo fstab-ok
EOF
	if run_ok "mount(8): fstab lines 'URL MOUNTPOINT fuse.iserfuse ro,_netdev,nofail' and by section name; mount -t fuse.iserfuse" \
		unshare -m --propagation private bash "$work/ns.sh"; then
		check "both fstab mounts read the pattern" grep -q fstab-ok "$work/out"
	fi
fi

summary
