#!/bin/bash
# SPDX-License-Identifier: MIT
# run-in-guest.sh - run a command inside a throw-away QEMU guest that boots
# Debian's own kernel (it has rdma_rxe, ib_iser, ib_isert, LIO, FUSE, ...) with
# the HOST root file system shared read-only (virtio-9p) under a tmpfs overlay,
# so everything installed on the host (tgt, rdma-core, a build tree) is usable
# in the guest without building an image. The guest has no network card.
#
#   iserfuse-lab/run-in-guest.sh [options] [--] 'shell snippet'
#   iserfuse-lab/run-in-guest.sh [options] -- prog arg...
#
# Options:
#   -m MB         guest memory in MiB (default 2048)
#   -c N          guest vCPUs (default: number of host CPUs)
#   -t SEC        wall-clock limit for the whole run, boot included (default 900);
#                 the command itself gets SEC-30 s inside the guest
#   -o DIR        host scratch dir, mounted read-write at /lab in the guest
#                 (default: a fresh dir under $RDMA_LAB_CACHE/runs; it is printed)
#   -s DIR        share host DIR read-write at the same path in the guest
#                 (repeatable; all other writes go to the tmpfs overlay and vanish)
#   -C DIR        working directory of the command in the guest (default: $PWD)
#   -e NAME=VALUE environment variable for the command (repeatable)
#   -d FILE       FILE (a regular file or block device) as an extra virtio-blk
#                 disk, format=raw, cache=none (O_DIRECT on the host);
#                 repeatable: /dev/vda, /dev/vdb, ... in the guest, in order,
#                 once the command has run `modprobe virtio_blk` (no udev there)
#   --tcg | --kvm force the accelerator (default: KVM only on hardware KVM, see README)
#   --no-install  do not apt-get install missing host packages
#   -v            print the guest kernel console after the run
#
# Exit status: the command's exit status in the guest (124: the command timed
# out in the guest); 125: the lab failed (no status came back from the guest);
# 130/143: interrupted on the host.
set -euo pipefail

LAB_SRC=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
CACHE=${RDMA_LAB_CACHE:-/var/tmp/iserfuse-lab-cache}
MEM=2048
CPUS=$(nproc 2>/dev/null || echo 1)
TIMEOUT=900
BOOT_TIMEOUT=${RDMA_LAB_BOOT_TIMEOUT:-120}
OUTDIR=
SHARES=()
ENVS=()
DISKS=()
CWD=$PWD
ACCEL=auto
INSTALL=1
VERBOSE=0

usage() { sed -n '2,33p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2; }
while [ $# -gt 0 ]; do
	case "$1" in
	-m) MEM=$2; shift 2 ;;
	-c) CPUS=$2; shift 2 ;;
	-t) TIMEOUT=$2; shift 2 ;;
	-o) OUTDIR=$2; shift 2 ;;
	-s) SHARES+=("$(readlink -f "$2")"); shift 2 ;;
	-C) CWD=$2; shift 2 ;;
	-e) ENVS+=("$2"); shift 2 ;;
	-d) DISKS+=("$(readlink -f "$2")"); shift 2 ;;
	--tcg) ACCEL=tcg; shift ;;
	--kvm) ACCEL=kvm; shift ;;
	--no-install) INSTALL=0; shift ;;
	-v) VERBOSE=1; shift ;;
	-h|--help) usage ;;
	--) shift; break ;;
	-*) echo "run-in-guest: unknown option $1" >&2; usage ;;
	*) break ;;
	esac
done
[ $# -ge 1 ] || usage
if [ $# -eq 1 ]; then CMD=$1; else CMD=$(printf '%q ' "$@"); fi

msg() { echo "iserfuse-lab: $*" >&2; }
fail() { msg "ERROR: $*"; exit 125; }
[ "$(id -u)" = 0 ] || fail "must run as root (apt-get, 9p export of /, KVM)"
case "$MEM$CPUS$TIMEOUT" in *[!0-9]*) fail "-m, -c and -t take numbers" ;; esac
mkdir -p "$CACHE/runs"

# ---------------------------------------------------------------- packages
# The VM itself (qemu, Debian kernel, busybox for the initramfs) and the user
# space the guest uses straight from the host root: RDMA, targets, initiators,
# FUSE, capture and load tools. Idempotent; extra ones via RDMA_LAB_EXTRA_PKGS.
PKGS=(qemu-system-x86 linux-image-amd64 busybox-static kmod cpio iproute2 procps
      rdma-core ibverbs-providers ibverbs-utils rdmacm-utils
      tgt libiscsi-bin fuse3 fio
      ${RDMA_LAB_EXTRA_PKGS:-})
ensure_packages() {
	local missing=() p prc=/usr/sbin/policy-rc.d made_prc=0 rc=0
	for p in "${PKGS[@]}"; do
		[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = 'install ok installed' ] || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	[ $INSTALL = 1 ] || fail "missing packages: ${missing[*]} (--no-install given)"
	msg "installing: ${missing[*]} (log: $CACHE/apt.log)"
	export DEBIAN_FRONTEND=noninteractive
	# keep tgt, iscsid & co from being started on the host by their postinst
	if [ ! -e $prc ]; then printf '#!/bin/sh\nexit 101\n' > $prc; chmod +x $prc; made_prc=1; fi
	{ apt-get install -y --no-install-recommends "${missing[@]}" ||
	  { apt-get update && apt-get install -y --no-install-recommends "${missing[@]}"; }
	} > "$CACHE/apt.log" 2>&1 || rc=$?
	[ $made_prc = 1 ] && rm -f $prc
	if [ $rc != 0 ]; then tail -20 "$CACHE/apt.log" >&2; fail "apt-get install failed"; fi
}
exec 9>"$CACHE/.lock"
flock 9          # one apt-get / initramfs build at a time
ensure_packages

# ---------------------------------------------------------------- kernel
# Newest Debian kernel in /boot whose modules include rdma_rxe.
KVER=
for v in $(ls -1 /boot/vmlinuz-* 2>/dev/null | sed 's|/boot/vmlinuz-||' | sort -rV); do
	if [ -e "/lib/modules/$v/modules.dep" ] &&
	   [ -n "$(find "/lib/modules/$v/kernel/drivers/infiniband/sw/rxe" -name 'rdma_rxe.ko*' 2>/dev/null)" ]; then
		KVER=$v; break
	fi
done
[ -n "$KVER" ] || fail "no /boot/vmlinuz-* with rdma_rxe modules (install linux-image-amd64)"
VMLINUZ=/boot/vmlinuz-$KVER
# Boot the uncompressed ELF vmlinux through its PVH entry when the kernel has
# one: it skips the BIOS->bzImage path and the in-guest XZ decompression, which
# under TCG saves ~3 s of the ~6.5 s boot. Falls back to the bzImage.
extract_vmlinux() {
	local out off magic tool
	out="$CACHE/vmlinux-$KVER-$(stat -c '%s-%Y' "$VMLINUZ")"
	KERNEL=$VMLINUZ
	grep -q '^CONFIG_PVH=y' "/boot/config-$KVER" 2>/dev/null || return 0
	if [ ! -s "$out" ]; then
		for magic in '\xfd7zXZ\x00:xz -dc --single-stream' '\x28\xb5\x2f\xfd:zstd -qdc' '\x1f\x8b\x08:gzip -dc'; do
			# (|| true: head/xz stop reading early, SIGPIPE upstream is expected)
			off=$(LC_ALL=C grep -obUaP "${magic%%:*}" "$VMLINUZ" 2>/dev/null | head -1 | cut -d: -f1 || true)
			[ -n "$off" ] || continue
			tool=${magic#*:}
			{ tail -c +$((off + 1)) "$VMLINUZ" | $tool > "$out.tmp" 2>/dev/null; } || true
			if [ "$(head -c 4 "$out.tmp" | od -An -c | tr -d ' ')" = '177ELF' ]; then mv "$out.tmp" "$out"; break; fi
			rm -f "$out.tmp"
		done
	fi
	[ -s "$out" ] && KERNEL=$out
	return 0
}

# ---------------------------------------------------------------- initramfs
# Tiny: static busybox + virtio/9p/overlay modules + guest-init.sh as /init.
# Everything else (modprobe, /lib/modules, tools) comes from the host root.
INIT_MODS="virtio_pci 9pnet_virtio 9p overlay"
build_initramfs() {
	local key out tmp m ko b
	# key: kernel build (a Debian update can keep the ABI name), modules, busybox, init
	key=$( { echo "$KVER $INIT_MODS"; stat -c '%n %s %Y' "$VMLINUZ" "/lib/modules/$KVER/modules.dep";
		cat /bin/busybox "$LAB_SRC/guest-init.sh"; } | sha256sum | cut -c1-16)
	out="$CACHE/initramfs-$KVER-$key.cpio.gz"
	INITRD=$out
	[ -s "$out" ] && return 0
	msg "building initramfs $out"
	tmp=$(mktemp -d "$CACHE/initramfs.XXXXXX")
	mkdir -p "$tmp"/{bin,sbin,dev,proc,sys,mods,lower,rw,newroot,scratch}
	cp /bin/busybox "$tmp/bin/busybox"
	ln -s busybox "$tmp/bin/sh"
	cp "$LAB_SRC/guest-init.sh" "$tmp/init"; chmod 755 "$tmp/init"
	: > "$tmp/modules.list"
	for m in $INIT_MODS; do
		modprobe -S "$KVER" --show-depends "$m" | awk '$1=="insmod"{print $2}'
	done | awk '!seen[$0]++' > "$tmp/modpaths"
	while read -r ko; do
		b=$(basename "$ko")
		case "$ko" in
		*.ko.xz) xz -dc "$ko" > "$tmp/mods/${b%.xz}"; b=${b%.xz} ;;
		*.ko.zst) zstd -qdc "$ko" > "$tmp/mods/${b%.zst}"; b=${b%.zst} ;;
		*) cp "$ko" "$tmp/mods/$b" ;;
		esac
		echo "$b" >> "$tmp/modules.list"
	done < "$tmp/modpaths"
	rm -f "$tmp/modpaths"
	[ -s "$tmp/modules.list" ] || fail "could not resolve initramfs modules for $KVER"
	(cd "$tmp" && find . -print0 | cpio --null -o -H newc --quiet | gzip -1) > "$out.tmp"
	mv "$out.tmp" "$out"
	rm -rf "$tmp"
	find "$CACHE" -maxdepth 1 -name 'initramfs-*.cpio.gz' ! -newer "$out" ! -samefile "$out" -mtime +7 -delete 2>/dev/null || true
}
build_initramfs
[ "${RDMA_LAB_BZIMAGE:-0}" = 1 ] && KERNEL=$VMLINUZ || extract_vmlinux
flock -u 9

# ---------------------------------------------------------------- run dir
RUNID=$(date +%Y%m%d-%H%M%S)-$$
if [ -z "$OUTDIR" ]; then
	OUTDIR="$CACHE/runs/$RUNID"
	# keep the 20 newest run dirs
	find "$CACHE/runs" -mindepth 1 -maxdepth 1 -type d -printf '%T@ %p\n' | sort -rn |
		tail -n +20 | cut -d' ' -f2- | while read -r d; do rm -rf -- "$d"; done
fi
mkdir -p "$OUTDIR/.lab"
OUTDIR=$(readlink -f "$OUTDIR")
rm -f "$OUTDIR"/.lab/{exitcode,init-error,t_cmd_start,t_cmd_end,dmesg.txt,console.log}
{
	for e in "${ENVS[@]}"; do
		case "$e" in [A-Za-z_]*=*) printf 'export %s=%q\n' "${e%%=*}" "${e#*=}" ;;
		*) fail "-e wants NAME=VALUE, got: $e" ;; esac
	done
	printf '%s\n' "$CMD"
} > "$OUTDIR/.lab/cmd"
GUEST_TIMEOUT=$(( TIMEOUT > 60 ? TIMEOUT - 30 : TIMEOUT * 2 / 3 ))
share_cfg=
VIRTFS=(-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
        -virtfs "local,path=$OUTDIR,mount_tag=labscratch,security_model=none,multidevs=remap")
i=0
for s in "${SHARES[@]}"; do
	case "$s" in *[[:space:]=\'\"]*) fail "share path must not contain blanks, quotes or '=': $s" ;; esac
	[ -d "$s" ] || fail "not a directory: $s"
	VIRTFS+=(-virtfs "local,path=$s,mount_tag=share$i,security_model=none,multidevs=remap")
	share_cfg+=" share$i=$s"
	i=$((i+1))
done
# -d: raw virtio-blk disks; a comma in a QEMU option value is written twice
DRIVES=()
i=0
for d in "${DISKS[@]}"; do
	[ -f "$d" ] || [ -b "$d" ] || fail "not a file or block device: $d"
	DRIVES+=(-drive "file=${d//,/,,},format=raw,if=none,id=disk$i,cache=none"
	         -device "virtio-blk-pci,drive=disk$i")
	i=$((i+1))
done
case "$CWD" in *\'*) fail "working directory must not contain a quote: $CWD" ;; esac
cat > "$OUTDIR/.lab/config" <<EOF
LAB_SHARES="${share_cfg# }"
LAB_CWD='$CWD'
LAB_CMD_TIMEOUT=$GUEST_TIMEOUT
LAB_TMPFS_SIZE=50%
LAB_DIR='$LAB_SRC'
EOF

# ---------------------------------------------------------------- accel
# KVM only where /dev/kvm is hardware KVM (kvm_intel/kvm_amd). On these sandbox
# machines /dev/kvm is kvm_pvm (pagetable-based VM): KVM_CREATE_VM works, but a
# stock kernel never gets out of its decompressor (600 s tried: the PVM host
# emulates non-PVM guests instruction by instruction) and -cpu host/max abort on
# MSR 0x10a. So "auto" uses TCG there. If an auto-chosen KVM guest does not
# reach its command within the boot watchdog, the run is retried with TCG.
if [ "$ACCEL" = auto ]; then
	if [ -c /dev/kvm ] && [ -w /dev/kvm ] && [ ! -d /sys/module/kvm_pvm ] &&
	   { [ -d /sys/module/kvm_intel ] || [ -d /sys/module/kvm_amd ]; }; then
		ACCEL=kvm; FALLBACK=tcg
	else
		ACCEL=tcg; FALLBACK=
	fi
else
	FALLBACK=
fi

CONSOLE_LOG="$OUTDIR/.lab/console.log"
QPID=
cleanup() { [ -n "$QPID" ] && kill "$QPID" 2>/dev/null; QPID=; }
trap 'cleanup; msg "interrupted"; exit 130' INT
trap 'cleanup; msg "terminated"; exit 143' TERM
trap 'cleanup' EXIT

run_qemu() {  # run_qemu ACCEL -> sets QRC, BOOTED
	local accel=$1 acc t_end
	if [ "$accel" = kvm ]; then acc=(-accel kvm -cpu host); else acc=(-accel tcg,thread=multi -cpu max); fi
	local q=(qemu-system-x86_64 -nodefaults -no-user-config -display none -monitor none
		-machine "${RDMA_LAB_MACHINE:-q35}" "${acc[@]}" -smp "$CPUS" -m "$MEM" -no-reboot
		-kernel "$KERNEL" -initrd "$INITRD"
		-append "console=ttyS0 panic=-1 quiet loglevel=4 8250.nr_uarts=2 rdma_lab=1"
		-serial "file:$CONSOLE_LOG" -serial stdio
		-nic none -device virtio-rng-pci
		"${VIRTFS[@]}" "${DRIVES[@]}" ${RDMA_LAB_QEMU_EXTRA:-})
	msg "kernel $KVER, accel $accel, ${MEM} MiB, $CPUS vCPU, scratch $OUTDIR"
	rm -f "$OUTDIR/.lab/t_cmd_start"
	T0=$(date +%s.%N)
	timeout -k 10 "$TIMEOUT" "${q[@]}" < /dev/null &
	QPID=$!
	BOOTED=0
	t_end=$(( $(date +%s) + BOOT_TIMEOUT ))
	while kill -0 "$QPID" 2>/dev/null; do
		if [ $BOOTED = 0 ]; then
			if [ -e "$OUTDIR/.lab/t_cmd_start" ]; then
				BOOTED=1
				T_BOOT=$(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
			elif [ "$(date +%s)" -ge $t_end ]; then
				msg "guest did not reach its command within ${BOOT_TIMEOUT}s (accel $accel); stopping it"
				kill "$QPID" 2>/dev/null
			fi
		fi
		sleep 0.2
	done
	set +e; wait "$QPID"; QRC=$?; set -e
	QPID=
	[ -e "$OUTDIR/.lab/t_cmd_start" ] && BOOTED=1
	return 0
}

T_BOOT='?'
run_qemu "$ACCEL"
if [ $BOOTED = 0 ] && [ -n "$FALLBACK" ]; then
	msg "retrying with $FALLBACK"
	ACCEL=$FALLBACK
	run_qemu "$ACCEL"
fi
wall=$(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')

if [ $VERBOSE = 1 ] && [ -f "$CONSOLE_LOG" ]; then
	echo "----- guest console -----" >&2; cat "$CONSOLE_LOG" >&2; echo "-------------------------" >&2
fi
if [ -s "$OUTDIR/.lab/exitcode" ] && [ ! -e "$OUTDIR/.lab/init-error" ]; then
	rc=$(cat "$OUTDIR/.lab/exitcode")
	tcs=$(cat "$OUTDIR/.lab/t_cmd_start" 2>/dev/null || echo '?')
	tce=$(cat "$OUTDIR/.lab/t_cmd_end" 2>/dev/null || echo '?')
	cmdt=$(awk -v a="$tcs" -v b="$tce" 'BEGIN{ if (a+0 > 0 && b+0 > 0) printf "%.1f", b-a; else print "?" }')
	msg "guest exit status $rc; host wall ${wall}s = boot ${T_BOOT}s (guest kernel ${tcs}s) + command ${cmdt}s + shutdown (accel $ACCEL)"
	[ "$rc" = 124 ] && msg "the command hit the guest-side limit of ${GUEST_TIMEOUT}s"
	exit "$rc"
fi
msg "no exit status from the guest (qemu/timeout rc $QRC, wall ${wall}s)"
[ "$QRC" = 124 ] && msg "guest killed at the ${TIMEOUT}s limit"
[ -f "$OUTDIR/.lab/init-error" ] && msg "init error: $(cat "$OUTDIR/.lab/init-error")"
[ -f "$CONSOLE_LOG" ] && [ $VERBOSE = 0 ] && { echo "----- last console lines -----" >&2; tail -40 "$CONSOLE_LOG" >&2; }
exit 125
