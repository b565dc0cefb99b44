#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
#
# The guest side of qemu.sh (runs in the lab guest, tests/lab/):
#
#   qemu-guest.py DISK DIR SECS
#
# Rounds of O_DIRECT I/O on the first half of DISK (the LUN file as a
# virtio-blk disk): each round writes 8 MiB (chunks of 4 KiB to 1 MiB, sizes
# drawn per round) in which every 4 KiB block carries the round number and
# its own byte offset, flushes (fsync: a FLUSH to the disk), then reads the
# 8 MiB back in other chunks and compares.  The region moves by 8 MiB each
# round.  Beside the rounds, fio keeps a steady load on the second half
# (randrw 64k-1M, libaio QD32, O_DIRECT, SECS seconds), so that requests
# are in flight whenever the worker dies.  DIR/started is written when the
# first round starts; the rounds go on for SECS seconds and then until
# DIR/host.done exists (at most SECS + 40 s).  Exit status 0 when every
# round verified and fio exits 0; 1 at the first I/O error or wrong block
# (one line naming round, offset and what was read) or when fio fails (its
# stderr in DIR/fio.err).  One line per round and a closing line with the
# rounds, the bytes and the longest single I/O (ms).
import mmap
import os
import random
import subprocess
import sys
import time

BLOCK = 4096
REGION = 8 << 20
CHUNKS = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20]


def block(rnd, off):
    """The 4 KiB block of round rnd at byte offset off of the disk."""
    stamp = b'iserfuse-qemu round %08d offset %012d\n' % (rnd, off)
    return stamp.ljust(64, b'.') * (BLOCK // 64)


def chunks(rng, start, length):
    """(offset, size) pairs covering [start, start + length), sizes from CHUNKS."""
    off, end = start, start + length
    while off < end:
        n = min(rng.choice(CHUNKS), end - off)
        yield off, n
        off += n


def main():
    disk, out, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
    fd = os.open(disk, os.O_RDWR | os.O_DIRECT)
    size = os.lseek(fd, 0, os.SEEK_END)
    regions = size // 2 // REGION
    if regions < 1:
        print(f'{disk}: {size} bytes, less than one region')
        return 1
    buf = mmap.mmap(-1, max(CHUNKS))  # page-aligned, as O_DIRECT wants
    view = memoryview(buf)
    worst = 0.0
    moved = 0

    def timed(what, rnd, off, fn):
        nonlocal worst
        t = time.monotonic()
        try:
            n = fn()
        except OSError as e:
            print(f'round {rnd}: {what} at offset {off}: {e}')
            sys.exit(1)
        worst = max(worst, time.monotonic() - t)
        return n

    half = size // 2 // BLOCK * BLOCK
    fio_err = open(os.path.join(out, 'fio.err'), 'w')
    fio = subprocess.Popen(['fio', '--name=load', f'--filename={disk}', f'--offset={half}',
                            f'--size={size - half}', '--bsrange=64k-1m', '--rw=randrw',
                            '--ioengine=libaio', '--direct=1', '--iodepth=32', '--time_based',
                            f'--runtime={int(secs)}', '--output=/dev/null'],
                           stdout=subprocess.DEVNULL, stderr=fio_err)
    with open(os.path.join(out, 'started'), 'w') as f:
        f.write(f'{time.time()}\n')
    t0 = time.monotonic()
    rnd = 0
    while True:
        el = time.monotonic() - t0
        if el >= secs and (os.path.exists(os.path.join(out, 'host.done')) or el >= secs + 40):
            break
        rnd += 1
        start = ((rnd - 1) % regions) * REGION
        rng = random.Random(rnd)
        for off, n in chunks(rng, start, REGION):
            view[:n] = b''.join(block(rnd, o) for o in range(off, off + n, BLOCK))
            w = timed('write', rnd, off, lambda: os.pwrite(fd, view[:n], off))
            if w != n:
                print(f'round {rnd}: short write at offset {off}: {w} of {n}')
                return 1
        timed('fsync', rnd, start, lambda: os.fsync(fd))
        for off, n in chunks(rng, start, REGION):
            r = timed('read', rnd, off, lambda: os.preadv(fd, [view[:n]], off))
            if r != n:
                print(f'round {rnd}: short read at offset {off}: {r} of {n}')
                return 1
            for o in range(off, off + n, BLOCK):
                got = bytes(view[o - off:o - off + BLOCK])
                if got != block(rnd, o):
                    print(f'round {rnd}: wrong block at offset {o}: {got[:63]!r}')
                    return 1
        moved += 2 * REGION
        print(f'round {rnd} verified ({start >> 20}-{(start + REGION) >> 20} MiB) at {time.monotonic() - t0:.1f} s',
              flush=True)
    os.close(fd)
    frc = fio.wait()
    if frc != 0:
        print(f'the steady load: fio exit {frc}')
        return 1
    print(f'{rnd} rounds verified, {moved >> 20} MiB moved in {time.monotonic() - t0:.1f} s, '
          f'longest I/O {worst * 1000:.0f} ms')
    return 0


if __name__ == '__main__':
    sys.exit(main())
