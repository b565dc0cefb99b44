#!/bin/sh
# SPDX-License-Identifier: MIT
# /init of the iserfuse-lab initramfs (busybox sh, PID 1 in the guest).
#
# stage 1 (in the initramfs):
#   mount proc/sys/dev, insmod virtio/9p/overlay, mount the scratch share
#   (it carries /lab/.lab/config), mount the host root (virtio-9p, read-only)
#   under a tmpfs upper as an overlay on /newroot, mount proc/sys/dev/... and
#   the shares inside it, then switch_root into it. switch_root (not a plain
#   chroot) matters: PID 1 shares its fs root with kthreadd, so the kernel's
#   module autoloader (/sbin/modprobe, crypto-crc32 for rdma_rxe, veth, ...)
#   then runs from the host root with the host's /lib/modules.
# stage 2 (PID 1 again, now in the overlay root, still busybox):
#   run /lab/.lab/cmd with bash under a timeout, output to the 2nd serial port
#   (host stdout), record the exit status in /lab/.lab/exitcode, power off.
BB=/bin/busybox
STAGE=${1:-1}

log() { echo "iserfuse-lab-init: $*" > /dev/console; }
uptime_s() { $BB cut -d' ' -f1 /proc/uptime; }
poweroff_now() {
	$BB sync
	$BB poweroff -f
	$BB sleep 5
	echo o > /proc/sysrq-trigger
	$BB sleep 60
}
die() {
	log "FATAL: $*"
	for d in /scratch/.lab /newroot/lab/.lab /lab/.lab; do
		if [ -d $d ]; then echo 126 > $d/exitcode; echo "$*" > $d/init-error; break; fi
	done
	poweroff_now
}

if [ "$STAGE" = 1 ]; then
	export PATH=/bin:/sbin
	$BB mkdir -p /proc /sys /dev /lower /rw /newroot /scratch
	$BB mount -t proc proc /proc
	$BB mount -t sysfs sysfs /sys
	$BB mount -t devtmpfs devtmpfs /dev
	$BB --install -s /bin
	log "initramfs up at $(uptime_s)s"

	for ko in $(cat /modules.list); do
		insmod "/mods/$ko" 2>/dev/null || log "insmod $ko failed (maybe built in)"
	done

	MSIZE=512000
	O9="trans=virtio,version=9p2000.L,msize=$MSIZE,access=any"
	# Scratch share first: it carries the config.
	mount -t 9p -o $O9,cache=none labscratch /scratch || die "cannot mount scratch share"
	[ -r /scratch/.lab/config ] || die "no /lab/.lab/config"
	. /scratch/.lab/config

	mount -t 9p -o $O9,cache=loose,ro hostroot /lower || die "cannot mount host root"
	mount -t tmpfs -o size=${LAB_TMPFS_SIZE:-50%},mode=0755 labrw /rw || die "tmpfs"
	mkdir -p /rw/upper /rw/work
	mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot \
		|| die "cannot mount overlay"

	R=/newroot
	mount -t proc proc $R/proc
	mount -t sysfs sysfs $R/sys
	mount -t devtmpfs devtmpfs $R/dev
	mkdir -p $R/dev/pts $R/dev/shm
	# what udev/systemd would add: /dev/fd (bash process substitution), stdio links
	ln -sf /proc/self/fd $R/dev/fd
	ln -sf /proc/self/fd/0 $R/dev/stdin
	ln -sf /proc/self/fd/1 $R/dev/stdout
	ln -sf /proc/self/fd/2 $R/dev/stderr
	mount -t devpts -o ptmxmode=0666,mode=0620,gid=5 devpts $R/dev/pts
	mount -t tmpfs -o mode=1777 tmpfs $R/dev/shm
	# fresh /run (no stale pid files or sockets of the host); /tmp and /var/tmp
	# stay the host's, seen through the overlay (writes land in the tmpfs upper)
	mount -t tmpfs -o mode=0755 tmpfs $R/run
	mkdir -p $R/lab
	mount --move /scratch $R/lab || die "move scratch"
	# Extra read-write shares at the same path as on the host:
	# LAB_SHARES="tag1=/path/one tag2=/path/two" (no spaces in paths).
	for s in $LAB_SHARES; do
		tag=${s%%=*}; p=${s#*=}
		mkdir -p "$R$p"
		mount -t 9p -o $O9,cache=none "$tag" "$R$p" || die "cannot mount share $tag at $p"
	done
	mkdir -p $R/run/iserfuse-lab
	cp $BB /init $R/run/iserfuse-lab/
	log "switch_root at $(uptime_s)s"
	exec switch_root $R /run/iserfuse-lab/busybox sh /run/iserfuse-lab/init 2
	die "switch_root failed"
fi

# ------------------------------------------------------------------ stage 2
BB=/run/iserfuse-lab/busybox
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
. /lab/.lab/config
[ -d /sys/kernel/config ] && $BB mount -t configfs configfs /sys/kernel/config 2>/dev/null
$BB hostname "${LAB_HOSTNAME:-iserfuse-lab}"
$BB ip link set lo up

# Command output goes to the second serial port (host stdout), raw mode.
OUT=/dev/ttyS1
$BB stty -F $OUT raw -echo 2>/dev/null || OUT=/dev/console
log "root ready at $(uptime_s)s; running command"
uptime_s > /lab/.lab/t_cmd_start
/usr/bin/env -i \
	PATH=$PATH HOME=/root TERM=dumb LANG=C.UTF-8 RDMA_LAB=1 RDMA_LAB_DIR="$LAB_DIR" \
	/bin/bash -c 'cd "$1" 2>/dev/null || cd /; exec timeout -k 5 "$2" /bin/bash /lab/.lab/cmd' \
	iserfuse-lab "${LAB_CWD:-/}" "${LAB_CMD_TIMEOUT:-3600}" \
	< /dev/null > $OUT 2>&1
rc=$?
uptime_s > /lab/.lab/t_cmd_end
echo "$rc" > /lab/.lab/exitcode
log "command exit status $rc at $(uptime_s)s"
$BB dmesg > /lab/.lab/dmesg.txt 2>/dev/null
$BB sync
poweroff_now
