#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
#
# Unit test of tests/bench/floor.py: the ratio lines against values worked
# out by hand from small cell lists.

import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import floor  # noqa: E402


def cell(series, workload, qd, iops, rnd=1, lat_us=None, jiffies=None, ios=None, hz=100):
    c = {"series": series, "workload": workload, "qd": qd, "round": rnd, "iops": iops, "hz": hz}
    if lat_us is not None:
        c["lat_us"] = lat_us
    if jiffies is not None:
        c["cpu_jiffies"] = jiffies
        c["ios"] = ios
    return c


# One round.  CPU per I/O = jiffies / 100 * 1e6 / ios:
#   randread qd1:   raw 20000 IOPS (Little: 50 us), gateway 90 us, nullfuse-dev 25 us
#   randread qd32:  raw 200 / 200000 -> 10 us, gateway 300 / 150000 -> 20 us, nullfuse-dev 100 / 200000 -> 5 us,
#                   libiscsi 25000 IOPS, 200 / 125000 -> 16 us
#   randwrite qd1:  raw 50 / 100000 -> 5 us, gateway 60 / 50000 -> 12 us, nullfuse-dev 40 / 100000 -> 4 us
#   randwrite qd32: raw 100 / 250000 -> 4 us, gateway 100 / 200000 -> 5 us, nullfuse-dev 100 / 250000 -> 4 us
# gateway-s (IOPS only): 12500, 30000, 10000, 41000 (randread qd1, qd32, randwrite qd1, qd32)
# gateway-poll (IOPS only): 8000, 30000, 12500, 32000
# gateway-uring and nullfuse-uring, over FUSE over io_uring:
#   randread qd1:   gateway-uring 14000 IOPS, 70 us; nullfuse-uring 20 us
#   randread qd32:  gateway-uring 36000 IOPS, 270 / 180000 -> 15 us; nullfuse-uring 100 / 250000 -> 4 us
#   randwrite qd1:  gateway-uring 12000 IOPS, 48 / 60000 -> 8 us; nullfuse-uring 30 / 100000 -> 3 us
#   randwrite qd32: gateway-uring 45000 IOPS, 110 / 220000 -> 5 us; nullfuse-uring 90 / 300000 -> 3 us
ONE_ROUND = [
    cell("raw", "randread", 1, 20000),
    cell("gateway", "randread", 1, 10000, lat_us=90),
    cell("nullfuse-dev", "randread", 1, 40000, lat_us=25),
    cell("raw", "randread", 32, 40000, jiffies=200, ios=200000),
    cell("gateway", "randread", 32, 30000, jiffies=300, ios=150000),
    cell("nullfuse-dev", "randread", 32, 80000, jiffies=100, ios=200000),
    cell("libiscsi", "randread", 32, 25000, jiffies=200, ios=125000),
    cell("raw", "randwrite", 1, 20000, jiffies=50, ios=100000),
    cell("gateway", "randwrite", 1, 10000, jiffies=60, ios=50000),
    cell("nullfuse-dev", "randwrite", 1, 40000, jiffies=40, ios=100000),
    cell("raw", "randwrite", 32, 50000, jiffies=100, ios=250000),
    cell("gateway", "randwrite", 32, 40000, jiffies=100, ios=200000),
    cell("nullfuse-dev", "randwrite", 32, 90000, jiffies=100, ios=250000),
    cell("gateway-s", "randread", 1, 12500),
    cell("gateway-s", "randread", 32, 30000),
    cell("gateway-s", "randwrite", 1, 10000),
    cell("gateway-s", "randwrite", 32, 41000),
    cell("gateway-poll", "randread", 1, 8000),
    cell("gateway-poll", "randread", 32, 30000),
    cell("gateway-poll", "randwrite", 1, 12500),
    cell("gateway-poll", "randwrite", 32, 32000),
    cell("gateway-uring", "randread", 1, 14000, lat_us=70),
    cell("nullfuse-uring", "randread", 1, 50000, lat_us=20),
    cell("gateway-uring", "randread", 32, 36000, jiffies=270, ios=180000),
    cell("nullfuse-uring", "randread", 32, 100000, jiffies=100, ios=250000),
    cell("gateway-uring", "randwrite", 1, 12000, jiffies=48, ios=60000),
    cell("nullfuse-uring", "randwrite", 1, 50000, jiffies=30, ios=100000),
    cell("gateway-uring", "randwrite", 32, 45000, jiffies=110, ios=220000),
    cell("nullfuse-uring", "randwrite", 32, 100000, jiffies=90, ios=300000),
    cell("qemu-file", "read", 1, 9000),
    cell("qemu-iscsi", "read", 1, 10000),
    cell("qemu-file", "read", 32, 60000),
    cell("qemu-iscsi", "read", 32, 50000),
    cell("qemu-file", "write", 1, 8000),
    cell("qemu-iscsi", "write", 1, 8000),
    cell("qemu-file", "write", 32, 30000),
    cell("qemu-iscsi", "write", 32, 40000),
    cell("qemu-file-far", "read", 1, 5000),
    cell("qemu-file-far", "write", 1, 6000),
]

WANT_ONE_ROUND = {
    "hop/floor randread qd1": (1.6, "MISS"),       # (90 - 50) / 25
    "hop/floor randread qd32": (2.0, "MISS"),      # (20 - 10) / 5
    "hop/floor randwrite qd1": (1.75, "MISS"),     # (12 - 5) / 4
    "hop/floor randwrite qd32": (0.25, "PASS"),    # (5 - 4) / 4
    "gateway/raw randread qd1": (0.5, None),
    "gateway/raw randread qd32": (0.75, None),
    "gateway/raw randwrite qd1": (0.5, None),
    "gateway/raw randwrite qd32": (0.8, None),
    "gateway/raw randwrite qd32 / gateway/raw randread qd32": (0.8 / 0.75, "PASS"),
    "raw/libiscsi iops qd32": (1.6, "PASS"),       # 40000 / 25000
    "raw/libiscsi cpu qd32": (0.625, "PASS"),      # 10 / 16
    "gateway-s/raw randread qd1": (0.625, None),    # 12500 / 20000
    "gateway-s/raw randread qd32": (0.75, None),
    "gateway-s/raw randwrite qd1": (0.5, None),
    "gateway-s/raw randwrite qd32": (0.82, None),   # 41000 / 50000
    "gateway-uring/raw randread qd1": (0.7, None),  # 14000 / 20000
    "gateway-uring/raw randread qd32": (0.9, None),
    "gateway-uring/raw randwrite qd1": (0.6, None),
    "gateway-uring/raw randwrite qd32": (0.9, None),
    "event_loop uring/poll iops randread qd1": (1.25, None),    # 10000 / 8000
    "event_loop uring/poll iops randread qd32": (1.0, None),
    "event_loop uring/poll iops randwrite qd1": (0.8, None),    # 10000 / 12500
    "event_loop uring/poll iops randwrite qd32": (1.25, None),  # 40000 / 32000
    "default/-s randread qd1": (0.8, "MISS"),      # 10000 / 12500
    "default/-s randread qd32": (1.0, "PASS"),
    "default/-s randwrite qd1": (1.0, "PASS"),
    "default/-s randwrite qd32": (40000 / 41000, "PASS"),
    "hop/floor randread qd1 uring": (1.0, "PASS"),     # (70 - 50) / 20
    "hop/floor randread qd32 uring": (1.25, "MISS"),   # (15 - 10) / 4
    "hop/floor randwrite qd1 uring": (1.0, "PASS"),    # (8 - 5) / 3
    "hop/floor randwrite qd32 uring": (1 / 3, "PASS"),  # (5 - 4) / 3
    "gateway-uring/gateway iops randread qd1": (1.4, "PASS"),     # 14000 / 10000
    "gateway-uring/gateway iops randread qd32": (1.2, "PASS"),    # 36000 / 30000
    "gateway-uring/gateway iops randwrite qd1": (1.2, "PASS"),
    "gateway-uring/gateway iops randwrite qd32": (1.125, "PASS"),  # 45000 / 40000
    "qemu-img file/iscsi:// read qd1": (0.9, "MISS"),
    "qemu-img file/iscsi:// read qd32": (1.2, "PASS"),
    "qemu-img file/iscsi:// write qd1": (1.0, "PASS"),
    "qemu-img file/iscsi:// write qd32": (0.75, "MISS"),
    "qemu-img file, beside the target/iscsi:// read qd1": (0.5, None),    # 5000 / 10000
    "qemu-img file, beside the target/iscsi:// write qd1": (0.75, None),  # 6000 / 8000
}


def counts(series, workload, qd, ios, syscalls, vol, invol, by_name=None):
    return {"kind": "counts", "series": series, "workload": workload, "qd": qd, "ios": ios,
            "syscalls": syscalls, "vol_cs": vol, "invol_cs": invol, "syscalls_by_name": by_name or {}}


def instr(series, workload, qd, ios, n=None, na=None):
    c = {"kind": "instr", "series": series, "workload": workload, "qd": qd, "ios": ios, "instr": n}
    if na:
        c["na"] = na
    return c


# Per I/O:
#   gateway randread qd32:  syscalls 50000 / 20000 = 2.5, cs (5000 + 1000) / 20000 = 0.3, instr 2e7 / 5000 = 4000
#   gateway randwrite qd32: syscalls 2.0, cs 0.4, instr n/a
#   gateway randread qd1:   syscalls 4.5, vol cs 1.3
#   gateway-uring randread qd1: syscalls 2.0, vol cs 2.5; qd32: syscalls 0.2
COUNT_CELLS = [
    counts("gateway", "randread", 32, 20000, 50000, 5000, 1000,
           {"writev": 20000, "read": 20000, "poll": 5000, "futex": 1000, "getuid": 2}),  # getuid: too few to show
    instr("gateway", "randread", 32, 5000, 20_000_000),
    counts("gateway", "randwrite", 32, 20000, 40000, 8000, 0),
    instr("gateway", "randwrite", 32, 5000, na="hangs under valgrind"),
    counts("gateway", "randread", 1, 10000, 45000, 13000, 100),
    counts("gateway-uring", "randread", 1, 10000, 20000, 25000, 0, {"io_uring_enter": 20000, "getgid": 3}),
    counts("gateway-uring", "randread", 32, 20000, 4000, 100, 0),
]

WANT_COUNTS = {
    "syscalls/io gateway randread qd32": (2.5, "MISS"),
    "syscalls/io gateway randwrite qd32": (2.0, "PASS"),
    "cs/io gateway randread qd32": (0.3, "PASS"),
    "cs/io gateway randwrite qd32": (0.4, "MISS"),
    "instr/io gateway randread qd32": (4000, "MISS"),
    "instr/io gateway randwrite qd32": (None, None),
    "vol cs/io gateway randread qd1": (1.3, "MISS"),
    "vol cs/io gateway randwrite qd1": (None, None),
    "syscalls/io gateway randread qd1": (4.5, "PASS"),
    "syscalls/io gateway randwrite qd1": (None, None),
    "syscalls/io gateway-uring randread qd1": (2.0, "PASS"),
    "syscalls/io gateway-uring randwrite qd1": (None, None),
    "vol cs/io gateway-uring randread qd1": (2.5, "MISS"),
    "vol cs/io gateway-uring randwrite qd1": (None, None),
    "syscalls/io gateway-uring randread qd32": (0.2, "PASS"),
    "syscalls/io gateway-uring randwrite qd32": (None, None),
}


def by_name(res):
    return {r["name"]: r for r in res}


class TestFloor(unittest.TestCase):
    def test_one_round(self):
        res = by_name(floor.compute(ONE_ROUND))
        self.assertEqual(set(res), set(WANT_ONE_ROUND))
        for name, (value, verdict) in WANT_ONE_ROUND.items():
            with self.subTest(name=name):
                self.assertAlmostEqual(res[name]["value"], value, places=9)
                self.assertAlmostEqual(res[name]["min"], value, places=9)
                self.assertAlmostEqual(res[name]["max"], value, places=9)
                self.assertEqual(res[name]["rounds"], 1)
                self.assertEqual(res[name]["verdict"], verdict)

    def test_little_law_and_cpu(self):
        m = floor.cell_metrics(cell("raw", "randread", 32, 64000, jiffies=50, ios=320000))
        self.assertAlmostEqual(m["lat_us"], 500.0)   # 32 / 64000 s
        self.assertAlmostEqual(m["cpu_us"], 1.5625)  # 0.5 s / 320000
        m = floor.cell_metrics(cell("gateway", "randread", 1, 10000, lat_us=97.5))
        self.assertEqual(m["lat_us"], 97.5)
        self.assertIsNone(m["cpu_us"])

    def test_best_of_rounds_and_spread(self):
        cells = [
            # round 1: raw 50 us (20000 IOPS), gateway 90, floor 25 -> 1.6
            cell("raw", "randread", 1, 20000, rnd=1),
            cell("gateway", "randread", 1, 10000, rnd=1, lat_us=90),
            cell("nullfuse-dev", "randread", 1, 40000, rnd=1, lat_us=25),
            # round 2: raw 40 us (25000 IOPS), gateway 100, floor 20 -> 3.0
            cell("raw", "randread", 1, 25000, rnd=2),
            cell("gateway", "randread", 1, 9000, rnd=2, lat_us=100),
            cell("nullfuse-dev", "randread", 1, 45000, rnd=2, lat_us=20),
        ]
        r = by_name(floor.compute(cells))
        # best of each cell: raw 40, gateway 90, floor 20 -> 2.5
        self.assertAlmostEqual(r["hop/floor randread qd1"]["value"], 2.5)
        self.assertAlmostEqual(r["hop/floor randread qd1"]["min"], 1.6)
        self.assertAlmostEqual(r["hop/floor randread qd1"]["max"], 3.0)
        self.assertEqual(r["hop/floor randread qd1"]["rounds"], 2)
        # IOPS: best gateway 10000 / best raw 25000; rounds 0.5 and 0.36
        self.assertAlmostEqual(r["gateway/raw randread qd1"]["value"], 0.4)
        self.assertAlmostEqual(r["gateway/raw randread qd1"]["min"], 0.36)
        self.assertAlmostEqual(r["gateway/raw randread qd1"]["max"], 0.5)

    def test_missing_is_na(self):
        cells = [c for c in ONE_ROUND if c["series"] != "libiscsi"]
        cells.append(cell("gateway", "randwrite", 32, None, rnd=2))  # a failed cell in round 2
        r = by_name(floor.compute(cells))
        for name in ("raw/libiscsi iops qd32", "raw/libiscsi cpu qd32"):
            self.assertIsNone(r[name]["value"])
            self.assertIsNone(r[name]["verdict"])
            self.assertEqual(floor.line(r[name]), f"ratio {name}: n/a goal {r[name]['goal_op']} {r[name]['goal']}")
        self.assertAlmostEqual(r["gateway/raw randwrite qd32"]["value"], 0.8)  # the None cell does not count

    def test_missing_fuse_paths_are_na(self):
        # a kernel without FUSE over io_uring, a run without -s: those lines are n/a, the others stay
        cells = [c for c in ONE_ROUND if c["series"] not in ("gateway-s", "gateway-uring", "nullfuse-uring")]
        r = by_name(floor.compute(cells))
        for name in ("default/-s randread qd1", "default/-s randwrite qd32", "hop/floor randread qd1 uring",
                     "hop/floor randwrite qd32 uring", "gateway-uring/raw randread qd1", "gateway-s/raw randread qd32"):
            with self.subTest(name=name):
                self.assertIsNone(r[name]["value"])
                self.assertIsNone(r[name]["verdict"])
                self.assertEqual(r[name]["rounds"], 0)
        self.assertEqual(floor.line(r["default/-s randread qd32"]), "ratio default/-s randread qd32: n/a goal >= 0.95")
        self.assertAlmostEqual(r["hop/floor randread qd1"]["value"], 1.6)
        # the gateway-uring series without its floor: its hop lines are n/a, its gateway/raw lines are not
        cells = [c for c in ONE_ROUND if c["series"] != "nullfuse-uring"]
        r = by_name(floor.compute(cells))
        self.assertIsNone(r["hop/floor randread qd32 uring"]["value"])
        self.assertAlmostEqual(r["gateway-uring/raw randread qd32"]["value"], 0.9)

    def test_derived_goals(self):
        # QD1 randread: raw vol cs 10000 / 10000 = 1.0, nullfuse-dev 9900 / 10000 = 0.99, so the goal is
        # 1.0 + 0.99 + 0.06 = 2.05; gateway 20000 / 10000 = 2.0 PASS.  Syscalls: 1.0 + 2.0 + 0 = 3.0; gateway 4.0 MISS.
        # QD32 randread instructions: raw 1e7 / 5000 = 2000, nullfuse-dev 5e6 / 5000 = 1000, + 236 = 3236;
        # gateway 2e7 / 5000 = 4000 MISS.
        cells = COUNT_CELLS[:4] + [
            counts("gateway", "randread", 1, 10000, 40000, 20000, 0),
            counts("raw", "randread", 1, 10000, 10000, 10000, 0),
            counts("nullfuse-dev", "randread", 1, 10000, 20000, 9900, 0),
            instr("raw", "randread", 32, 5000, 10_000_000),
            instr("nullfuse-dev", "randread", 32, 5000, 5_000_000),
        ]
        res = by_name(floor.compute_counts(cells))
        r = res["vol cs/io gateway randread qd1 against raw + nullfuse-dev + 0.06 (same run)"]
        self.assertAlmostEqual(r["value"], 2.0)
        self.assertAlmostEqual(r["goal"], 2.05)
        self.assertEqual(r["verdict"], "PASS")
        r = res["syscalls/io gateway randread qd1 against raw + nullfuse-dev + 0 (same run)"]
        self.assertAlmostEqual(r["goal"], 3.0)
        self.assertEqual(r["verdict"], "MISS")
        r = res["instr/io gateway randread qd32 against raw + nullfuse-dev + 236 (same run)"]
        self.assertAlmostEqual(r["goal"], 3236)
        self.assertEqual(r["verdict"], "MISS")
        self.assertEqual(floor.line(r), "ratio instr/io gateway randread qd32 against raw + nullfuse-dev + 236 "
                                        "(same run): 4000.000 goal <= 3236.0 MISS")
        # the fixed goal of the same cell stays as it was
        self.assertEqual(res["vol cs/io gateway randread qd1"]["verdict"], "MISS")

    def test_counts(self):
        # the count entries leave the timed ratios alone
        self.assertEqual(floor.compute(ONE_ROUND + COUNT_CELLS), floor.compute(ONE_ROUND))
        res = by_name(floor.compute_counts(ONE_ROUND + COUNT_CELLS))
        fixed = {n: r for n, r in res.items() if not n.endswith("(same run)")}
        self.assertEqual(set(fixed), set(WANT_COUNTS))
        for r in res.values():  # no raw or nullfuse-dev counts: no sum to hold against
            if r["name"].endswith("(same run)"):
                self.assertIsNone(r["goal"])
                self.assertIsNone(r["verdict"])
        for name, (value, verdict) in WANT_COUNTS.items():
            with self.subTest(name=name):
                if value is None:
                    self.assertIsNone(res[name]["value"])
                else:
                    self.assertAlmostEqual(res[name]["value"], value, places=9)
                self.assertEqual(res[name]["verdict"], verdict)
        self.assertEqual(floor.line(res["syscalls/io gateway randread qd32"]),
                         "ratio syscalls/io gateway randread qd32: 2.500 goal <= 2.3 MISS")
        self.assertEqual(floor.line(res["instr/io gateway randwrite qd32"]),
                         "ratio instr/io gateway randwrite qd32: n/a goal <= 3100")

    def test_counts_table(self):
        lines = floor.counts_table(COUNT_CELLS)
        self.assertEqual(len(lines), 1 + 5 + 1)  # header, five rows, one note
        rows = [ln.split() for ln in lines[1:6]]
        # gateway first (randread qd1, qd32, randwrite qd32), then gateway-uring
        self.assertEqual([r[:3] for r in rows], [["gateway", "randread", "1"], ["gateway", "randread", "32"],
                                                 ["gateway", "randwrite", "32"], ["gateway-uring", "randread", "1"],
                                                 ["gateway-uring", "randread", "32"]])
        self.assertEqual(rows[1], ["gateway", "randread", "32", "2.50", "read", "1.00", "writev", "1.00",
                                   "poll", "0.25", "0.250", "0.050", "4000"])
        self.assertEqual(rows[2][3:], ["2.00", "n/a", "0.400", "0.000", "n/a"])
        # under 0.005 a I/O a name is left out
        self.assertEqual(rows[3][3:], ["2.00", "io_uring_enter", "2.00", "2.500", "0.000", "n/a"])
        self.assertEqual(lines[6], "user instr n/a for gateway randwrite qd32: hangs under valgrind")

    def test_lines(self):
        r = by_name(floor.compute(ONE_ROUND))
        self.assertEqual(floor.line(r["hop/floor randread qd1"]),
                         "ratio hop/floor randread qd1: 1.600 (rounds 1.600-1.600) goal <= 1.2 MISS")
        self.assertEqual(floor.line(r["gateway/raw randread qd32"]),
                         "ratio gateway/raw randread qd32: 0.750 (rounds 0.750-0.750)")
        self.assertEqual(floor.line(r["raw/libiscsi iops qd32"]),
                         "ratio raw/libiscsi iops qd32: 1.600 (rounds 1.600-1.600) goal >= 1.25 PASS")
        self.assertEqual(floor.line(r["default/-s randread qd1"]),
                         "ratio default/-s randread qd1: 0.800 (rounds 0.800-0.800) goal >= 0.95 MISS")
        self.assertEqual(floor.line(r["hop/floor randread qd32 uring"]),
                         "ratio hop/floor randread qd32 uring: 1.250 (rounds 1.250-1.250) goal <= 1.2 MISS")

    def test_command_line(self):
        with tempfile.TemporaryDirectory() as d:
            cells, out = os.path.join(d, "cells.json"), os.path.join(d, "out.json")
            with open(cells, "w") as f:
                json.dump(ONE_ROUND, f)
            p = subprocess.run([sys.executable, floor.__file__, cells, "--json", out],
                               capture_output=True, text=True, check=True)
            self.assertIn("ratio hop/floor randwrite qd32: 0.250 (rounds 0.250-0.250) goal <= 1.2 PASS", p.stdout)
            with open(out) as f:
                saved = json.load(f)
            self.assertEqual(len(saved["ratios"]), len(WANT_ONE_ROUND) + len(WANT_COUNTS) + 2 * len(floor.DERIVED_GOALS))
            self.assertEqual(saved["counts_per_io"], [])
        with tempfile.TemporaryDirectory() as d:
            cells, out = os.path.join(d, "cells.json"), os.path.join(d, "out.json")
            with open(cells, "w") as f:
                json.dump(ONE_ROUND + COUNT_CELLS, f)
            p = subprocess.run([sys.executable, floor.__file__, cells, "--json", out],
                               capture_output=True, text=True, check=True)
            self.assertIn("ratio cs/io gateway randwrite qd32: 0.400 goal <= 0.35 MISS", p.stdout)
            self.assertIn("Counts per I/O", p.stdout)
            with open(out) as f:
                saved = json.load(f)
            per = {(c["series"], c["workload"], c["qd"]): c for c in saved["counts_per_io"]}
            self.assertAlmostEqual(per[("gateway", "randread", 32)]["instr"], 4000)
            self.assertAlmostEqual(per[("gateway", "randread", 32)]["by_name"]["poll"], 0.25)


if __name__ == "__main__":
    unittest.main()
