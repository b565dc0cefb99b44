#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Syscall-level checks of fallocate, SEEK_DATA/SEEK_HOLE and O_DIRECT on
one LUN file of an iserfuse mount, against the target's backing file.

    fsops_check.py LUN_FILE BACKING_FILE BLOCK_SIZE thin|thick

Prints "ok - ..." / "not ok - ..." lines (details on "# " lines); exits 1
if any check failed.  The LUN is overwritten.
"""
import ctypes
import errno
import mmap
import os
import sys

FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
FALLOC_FL_COLLAPSE_RANGE = 0x08
FALLOC_FL_ZERO_RANGE = 0x10
FALLOC_FL_INSERT_RANGE = 0x20
MiB = 1 << 20

libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]

lun, backing, bs, kind = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
thin = kind == "thin"
name = os.path.basename(lun)
failed = 0


def report(ok, what, detail=None):
    global failed
    print(("ok - " if ok else "not ok - ") + f"{name}: {what}")
    if not ok:
        failed += 1
        if detail:
            print(f"#   {detail}")


def fallocate(fd, mode, off, length):
    """0 or the errno."""
    if libc.fallocate(fd, mode, off, length) == 0:
        return 0
    return ctypes.get_errno()


def seek(fd, off, whence):
    try:
        return os.lseek(fd, off, whence)
    except OSError as e:
        return errno.errorcode.get(e.errno, e.errno)


def blocks(path):
    return os.stat(path).st_blocks


def backing_bytes(off, n):
    with open(backing, "rb") as f:
        f.seek(off)
        return f.read(n)


size = os.stat(lun).st_size
img = bytearray(os.urandom(16 * MiB))  # what the first 16 MiB of the LUN should hold
fd = os.open(lun, os.O_RDWR)
os.pwrite(fd, img, 0)
os.fsync(fd)
before = blocks(backing)


def same_as_expected(off, n, what):
    got = os.pread(fd, n, off)
    want = bytes(img[off:off + n])
    report(got == want, f"{what}: reads back as expected")
    report(backing_bytes(off, n) == want, f"{what}: backing file holds the same bytes")


# -------- aligned punch: blocks go back to the target's file system
rc = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 1 * MiB, 2 * MiB)
report(rc == 0, "punch hole 1 MiB + 2 MiB succeeds", f"errno {rc}")
img[1 * MiB:3 * MiB] = bytes(2 * MiB)
after = blocks(backing)
if thin:
    report(after <= before - 2 * MiB // 512,
           "punch hole frees the backing file's blocks (stat %b)", f"{before} -> {after} 512-byte blocks")
else:
    report(after == before, "thick LUN: punching writes zeroes, allocation unchanged", f"{before} -> {after}")
same_as_expected(0, 4 * MiB, "punched range")

# -------- unaligned punch: partial edge blocks zeroed, the rest kept
for off, n in ((5 * MiB + 100, 10000), (5 * MiB + 3 * bs - 7, 2 * bs + 14), (7 * MiB + 1, 5)):
    rc = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, n)
    report(rc == 0, f"unaligned punch {off}+{n} succeeds", f"errno {rc}")
    img[off:off + n] = bytes(n)
    same_as_expected(off - 2 * bs - 3, n + 4 * bs + 6 if n + 4 * bs + 6 < 64 * 1024 else 64 * 1024,
                     f"unaligned punch {off}+{n}")

# -------- zero range: zeroes, allocation kept
off, n = 9 * MiB + 3, 70000
rc = fallocate(fd, FALLOC_FL_ZERO_RANGE, off, n)
report(rc == 0, f"zero range {off}+{n} succeeds", f"errno {rc}")
img[off:off + n] = bytes(n)
same_as_expected(9 * MiB - 4096, 80000, "zero range")
rc = fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 10 * MiB, 1 * MiB)
img[10 * MiB:11 * MiB] = bytes(MiB)
report(rc == 0, "zero range | keep size, aligned 1 MiB succeeds", f"errno {rc}")
same_as_expected(10 * MiB - bs, MiB + 2 * bs, "zero range | keep size")
if thin:
    with open(backing, "rb") as b:
        report(seek(b.fileno(), 10 * MiB, os.SEEK_HOLE) > 10 * MiB,
               "zero range leaves the blocks allocated in the backing file")

# -------- whole file unchanged elsewhere
same_as_expected(0, 16 * MiB, "whole first 16 MiB")

# -------- SEEK_DATA / SEEK_HOLE against the backing file
with open(backing, "rb") as b:
    bfd = b.fileno()
    offsets = [0, 5, MiB - 1, MiB, MiB + 4097, 3 * MiB - 1, 3 * MiB, 12 * MiB, 16 * MiB, 16 * MiB + 5,
               size // 2, size - 4096, size - 1, size, size + 4096]
    for whence, wname in ((os.SEEK_DATA, "SEEK_DATA"), (os.SEEK_HOLE, "SEEK_HOLE")):
        got = [seek(fd, o, whence) for o in offsets]
        if thin:
            want = [seek(bfd, o, whence) for o in offsets]
        else:
            want = [(o if whence == os.SEEK_DATA else size) if o < size else "ENXIO" for o in offsets]
        report(got == want, f"{wname} matches the {'backing file' if thin else 'all-data answer'}",
               f"offsets {offsets}: got {got}, want {want}")

# -------- other modes, sizes
for mode, what in ((FALLOC_FL_COLLAPSE_RANGE, "collapse range"), (FALLOC_FL_INSERT_RANGE, "insert range"),
                   (FALLOC_FL_PUNCH_HOLE, "punch hole without keep size")):
    rc = fallocate(fd, mode, 0, 64 * 1024)
    report(rc == errno.EOPNOTSUPP, f"{what} is EOPNOTSUPP", f"errno {rc}")
report(fallocate(fd, 0, 0, size) == 0, "plain fallocate of the whole LUN succeeds")
rc = fallocate(fd, 0, size - 4096, 8192)
report(rc == errno.EFBIG, "plain fallocate past the end is EFBIG", f"errno {rc}")
rc = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, size - 4096, 8192)
report(rc == 0, "punch hole crossing the end succeeds (clamped)", f"errno {rc}")
report(os.pread(fd, 4096, size - 4096) == bytes(4096), "punched last 4 KiB reads as zeroes")
os.close(fd)

# -------- O_DIRECT: aligned I/O works, misaligned is EINVAL
dfd = os.open(lun, os.O_RDWR | os.O_DIRECT)
buf = mmap.mmap(-1, 3 * 65536)
buf[:] = os.urandom(len(buf))
try:
    n = os.pwritev(dfd, [memoryview(buf)[:65536]], 12 * MiB)
    img[12 * MiB:12 * MiB + 65536] = buf[:65536]
    rbuf = mmap.mmap(-1, 65536)
    got = os.preadv(dfd, [rbuf], 12 * MiB)
    report(n == 65536 and got == 65536 and rbuf[:] == buf[:65536], "O_DIRECT aligned write and read")
except OSError as e:
    report(False, "O_DIRECT aligned write and read", str(e))
for what, fn in (("read at a misaligned offset", lambda: os.preadv(dfd, [memoryview(buf)[:bs]], bs // 2)),
                 ("read of a misaligned length", lambda: os.preadv(dfd, [memoryview(buf)[:bs + 100]], 0)),
                 ("write at a misaligned offset", lambda: os.pwritev(dfd, [memoryview(buf)[:bs]], 12 * MiB + 1)),
                 ("write of a misaligned length", lambda: os.pwritev(dfd, [memoryview(buf)[:bs - 1]], 12 * MiB))):
    try:
        fn()
        report(False, f"O_DIRECT {what} is EINVAL", "it succeeded")
    except OSError as e:
        report(e.errno == errno.EINVAL, f"O_DIRECT {what} is EINVAL", f"errno {e.errno}")
os.close(dfd)
fd = os.open(lun, os.O_RDONLY)
same_as_expected(12 * MiB - bs, 65536 + 2 * bs, "after O_DIRECT")
os.close(fd)
sys.exit(1 if failed else 0)
