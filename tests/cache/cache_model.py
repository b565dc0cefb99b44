#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Random overlapping reads and writes on a mounted LUN file, checked
against a model of its bytes.

  cache_model.py FILE MODEL BLOCK OPS SEED

MODEL is a copy of FILE's bytes before the run; it is updated in place, so
that afterwards it holds what FILE (and the LUN's backing file, once
written back) must contain.  Writes and reads go through two descriptors,
one buffered (unaligned ranges, some sequential streaks) and one O_DIRECT
(BLOCK-aligned ranges), interleaved; every read is compared with the model
at once.  Ends with fsync.  Prints one line per mismatch; exit 1 if any.
"""
import mmap
import os
import random
import sys

path, model_path, block, ops, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rng = random.Random(seed)
with open(model_path, "rb") as f:
    model = bytearray(f.read())
size = len(model)
# Keep the ranges inside the first 8 MiB: they overlap often and the cache holds part of them.
span = min(size, 8 << 20)
buffered = os.open(path, os.O_RDWR)
direct = os.open(path, os.O_RDWR | os.O_DIRECT)
abuf = mmap.mmap(-1, 1 << 20)  # page aligned, for O_DIRECT
bad = 0
pos = 0
for i in range(ops):
    kind = rng.random()
    use_direct = rng.random() < 0.3
    if use_direct:
        n = block * rng.randint(1, (256 << 10) // block)
        off = block * rng.randrange(0, (span - n) // block)
    else:
        n = rng.randint(1, 300 << 10)
        off = pos if rng.random() < 0.4 else rng.randrange(0, span - n)
        if off + n > span:
            off = 0
        pos = off + n
    if kind < 0.45:
        data = rng.randbytes(n)
        if use_direct:
            abuf[:n] = data
            got = os.pwritev(direct, [memoryview(abuf)[:n]], off)
        else:
            got = os.pwrite(buffered, data, off)
        if got != n:
            print(f"op {i}: short write {got} of {n} at {off}")
            bad += 1
        model[off:off + n] = data
    else:
        if use_direct:
            got = os.preadv(direct, [memoryview(abuf)[:n]], off)
            data = bytes(abuf[:got])
        else:
            data = os.pread(buffered, n, off)
        if data != model[off:off + n]:
            first = next((k for k in range(min(len(data), n)) if data[k] != model[off + k]), len(data))
            print(f"op {i}: {'direct' if use_direct else 'buffered'} read of {n} at {off} differs from "
                  f"the model at byte {off + first} (got {len(data)} bytes)")
            bad += 1
            if bad > 10:
                break
    if i % 500 == 499:
        os.fsync(buffered)
os.fsync(buffered)
os.close(buffered)
os.close(direct)
with open(model_path, "r+b") as f:
    f.write(model)
print(f"{ops} operations, {bad} mismatches")
sys.exit(1 if bad else 0)
