#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
#
# The ratio arithmetic of tests/bench/run against the floor: the cells over
# the null target (tests/bench/nulltarget.c) and the null FUSE server
# (tests/bench/nullfuse.c) in, ratio lines with their goals out.
#
#   floor.py CELLS.json [--json OUT.json]
#
# CELLS.json is a list of cells, one per peer, workload, queue depth and
# round:
#
#   {"series": "raw" | "libiscsi" | "gateway" | "gateway-readers" | "gateway-s" | "gateway-poll" | "gateway-uring"
#              | "nullfuse-dev" | "nullfuse-mt" | "nullfuse-uring",
#    "workload": "randread" | "randwrite", "qd": 1, "round": 1,
#    "iops": 12345.0,
#    "lat_us": 80.1,          mean latency; absent: qd / iops (Little's law)
#    "cpu_jiffies": 250,      machine-wide user+nice+system+irq+softirq over the cell
#    "hz": 100, "ios": 61725}  clock ticks per second, I/Os done in the cell
#
# Per cell and round: CPU per I/O = cpu_jiffies / hz / ios (microseconds).
# A ratio is computed from the best of the rounds of each of its cells
# (highest IOPS, lowest latency, lowest CPU per I/O: other load only makes
# a cell worse) and, for the spread, within each round that has all its
# cells (min-max over those rounds).
#
#   hop/floor randread qd1     (gateway - raw) mean latency / nullfuse-dev mean latency, goal <= 1.2
#   hop/floor RW qdN           (gateway - raw) CPU per I/O / nullfuse-dev CPU per I/O, goal <= 1.2
#                              (randread qd32, randwrite qd1, randwrite qd32)
#   hop/floor ... uring        the same four with gateway-uring and nullfuse-uring (FUSE over io_uring)
#   gateway/raw RW qdN         IOPS (randread, randwrite at QD1 and QD32), no goal; also
#                              gateway-s/raw and gateway-uring/raw, the other FUSE paths
#   default/-s RW qdN          gateway IOPS / gateway-s IOPS (the readers against libfuse's
#                              one thread), goal >= 0.95
#   event_loop uring/poll iops RW qdN  gateway IOPS / gateway-poll IOPS (the connection's
#                              event thread on its io_uring against poll(2)), no goal
#   gateway/raw randwrite qd32 / gateway/raw randread qd32, goal >= 0.8
#   raw/libiscsi iops qd32     randread, goal >= 1.25
#   raw/libiscsi cpu qd32      randread CPU per I/O, goal <= 0.7
#
#   gateway-uring/gateway iops RW qdN  FUSE over io_uring against /dev/fuse, IOPS, goal >= 1.0
#   qemu-img file/iscsi:// read|write qdN  series qemu-file (qemu-img bench on the gateway's LUN file)
#                              against qemu-iscsi (qemu-img bench on iscsi://, QEMU's own initiator),
#                              IOPS, goal >= 1.0; at QD1 both qemu-img are pinned alike, beside
#                              their initiator (on iscsi:// qemu-img is it; on the file, the daemon)
#   qemu-img file, beside the target/iscsi:// RW qd1  series qemu-file-far (qemu-img on the file
#                              pinned with the null target instead, as fio is) against qemu-iscsi, no goal
#
# Counts per I/O (entries with "kind"; totals over a fixed number of I/Os,
# what the process does with no I/O already subtracted):
#
#   {"kind": "counts", "series": ..., "workload": ..., "qd": 32, "ios": 20000,
#    "syscalls": 46000,                   the daemon's (raw: the tool's) syscalls
#    "syscalls_by_name": {"writev": 20000, ...},
#    "vol_cs": 1500, "invol_cs": 300}     context switches, all its threads
#   {"kind": "instr", "series": ..., "workload": ..., "qd": 32, "ios": 5000,
#    "instr": 23000000}                   user instructions (callgrind), or
#    "na": "why"                          where not measured
#
# and their goal lines (no rounds: one measurement each), for RW in randread, randwrite:
#
#   syscalls/io gateway RW qd32 <= 2.3, cs/io gateway RW qd32 (voluntary + involuntary) <= 0.35,
#   instr/io gateway RW qd32 <= 3100, vol cs/io gateway RW qd1 <= 1.25, syscalls/io gateway RW qd1 <= 5,
#   syscalls/io gateway-uring RW qd1 <= 3, vol cs/io gateway-uring RW qd1 <= 2.0,
#   syscalls/io gateway-uring RW qd32 <= 0.3
#
# and the same goals as sums of what this run measured (DERIVED_GOALS):
#   syscalls/io gateway RW qd32 against raw + nullfuse-dev + 0.14 (same run) <= their sum + 0.14,
#   likewise cs/io qd32 (+ 0.07), instr/io qd32 (+ 236), vol cs/io qd1 (+ 0.06), syscalls/io qd1 (+ 0)
#
# Prints one line per ratio:
#   ratio NAME: VALUE (rounds MIN-MAX) goal <= G PASS|MISS
# with "n/a" (and neither PASS nor MISS) where a cell is missing.

import json
import sys


def cell_metrics(c):
    """The metrics of one cell: iops, lat_us, cpu_us (None where not measurable)."""
    iops = c.get("iops")
    iops = float(iops) if iops else None
    lat = c.get("lat_us")
    if lat is None and iops:
        lat = float(c["qd"]) * 1e6 / iops
    cpu = None
    j, hz, ios = c.get("cpu_jiffies"), c.get("hz"), c.get("ios")
    if j is not None and hz and ios:
        cpu = float(j) / float(hz) * 1e6 / float(ios)
    return {"iops": iops, "lat_us": float(lat) if lat is not None else None, "cpu_us": cpu}


# metric -> is a higher value better?
HIGHER_BETTER = {"iops": True, "lat_us": False, "cpu_us": False}


def timed_cells(cells):
    """The timed cells (those without a "kind")."""
    return [c for c in cells if "kind" not in c]


class Cells:
    def __init__(self, cells):
        # (series, workload, qd) -> {round: metrics}
        self.by_key = {}
        for c in timed_cells(cells):
            k = (c["series"], c["workload"], int(c["qd"]))
            self.by_key.setdefault(k, {})[int(c.get("round", 1))] = cell_metrics(c)

    def best(self, series, workload, qd, metric):
        vals = [m[metric] for m in self.by_key.get((series, workload, qd), {}).values() if m[metric] is not None]
        if not vals:
            return None
        return max(vals) if HIGHER_BETTER[metric] else min(vals)

    def in_round(self, series, workload, qd, metric, rnd):
        m = self.by_key.get((series, workload, qd), {}).get(rnd)
        return None if m is None else m[metric]

    def rounds(self):
        return sorted({r for per in self.by_key.values() for r in per})


def _div(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def _hop(gw, raw, floor):
    if gw is None or raw is None:
        return None
    return _div(gw - raw, floor)


def _hop_defs(gw, floor, suffix):
    """The four hop/floor lines of one FUSE path: the gateway series gw against the null server floor."""
    defs = [(f"hop/floor randread qd1{suffix}",
             lambda g: _hop(g(gw, "randread", 1, "lat_us"), g("raw", "randread", 1, "lat_us"),
                            g(floor, "randread", 1, "lat_us")), "<=", 1.2)]
    for rw, qd in (("randread", 32), ("randwrite", 1), ("randwrite", 32)):
        defs.append((f"hop/floor {rw} qd{qd}{suffix}",
                     lambda g, rw=rw, qd=qd: _hop(g(gw, rw, qd, "cpu_us"), g("raw", rw, qd, "cpu_us"),
                                                  g(floor, rw, qd, "cpu_us")), "<=", 1.2))
    return defs


WORKLOADS = [(rw, qd) for rw in ("randread", "randwrite") for qd in (1, 32)]
# qemu-img bench has no random offsets: it reads or writes at ascending offsets
QEMU_WORKLOADS = [(rw, qd) for rw in ("read", "write") for qd in (1, 32)]


def ratio_defs():
    """(name, function of a getter(series, workload, qd, metric), goal op, goal)."""
    defs = _hop_defs("gateway", "nullfuse-dev", "")
    for gw in ("gateway", "gateway-s", "gateway-uring"):
        for rw, qd in WORKLOADS:
            defs.append((f"{gw}/raw {rw} qd{qd}",
                         lambda g, gw=gw, rw=rw, qd=qd: _div(g(gw, rw, qd, "iops"), g("raw", rw, qd, "iops")),
                         None, None))
    defs.append(("gateway/raw randwrite qd32 / gateway/raw randread qd32",
                 lambda g: _div(_div(g("gateway", "randwrite", 32, "iops"), g("raw", "randwrite", 32, "iops")),
                                _div(g("gateway", "randread", 32, "iops"), g("raw", "randread", 32, "iops"))),
                 ">=", 0.8))
    defs.append(("raw/libiscsi iops qd32",
                 lambda g: _div(g("raw", "randread", 32, "iops"), g("libiscsi", "randread", 32, "iops")), ">=", 1.25))
    defs.append(("raw/libiscsi cpu qd32",
                 lambda g: _div(g("raw", "randread", 32, "cpu_us"), g("libiscsi", "randread", 32, "cpu_us")),
                 "<=", 0.7))
    for rw, qd in WORKLOADS:
        defs.append((f"default/-s {rw} qd{qd}",
                     lambda g, rw=rw, qd=qd: _div(g("gateway", rw, qd, "iops"), g("gateway-s", rw, qd, "iops")),
                     ">=", 0.95))
    for rw, qd in WORKLOADS:
        defs.append((f"event_loop uring/poll iops {rw} qd{qd}",
                     lambda g, rw=rw, qd=qd: _div(g("gateway", rw, qd, "iops"), g("gateway-poll", rw, qd, "iops")),
                     None, None))
    defs.extend(_hop_defs("gateway-uring", "nullfuse-uring", " uring"))
    for rw, qd in WORKLOADS:
        defs.append((f"gateway-uring/gateway iops {rw} qd{qd}",
                     lambda g, rw=rw, qd=qd: _div(g("gateway-uring", rw, qd, "iops"), g("gateway", rw, qd, "iops")),
                     ">=", 1.0))
    for rw, qd in QEMU_WORKLOADS:
        defs.append((f"qemu-img file/iscsi:// {rw} qd{qd}",
                     lambda g, rw=rw, qd=qd: _div(g("qemu-file", rw, qd, "iops"), g("qemu-iscsi", rw, qd, "iops")),
                     ">=", 1.0))
    for rw in ("read", "write"):
        defs.append((f"qemu-img file, beside the target/iscsi:// {rw} qd1",
                     lambda g, rw=rw: _div(g("qemu-file-far", rw, 1, "iops"), g("qemu-iscsi", rw, 1, "iops")),
                     None, None))
    return defs


class Counts:
    """Counts per I/O by (series, workload, qd): syscalls, vol_cs, invol_cs, cs, instr, by_name."""

    def __init__(self, cells):
        self.by_key = {}
        for c in cells:
            kind = c.get("kind")
            if kind not in ("counts", "instr"):
                continue
            k = (c["series"], c["workload"], int(c["qd"]))
            m = self.by_key.setdefault(k, {})
            ios = c.get("ios")
            if kind == "instr":
                m["instr"] = _div(c.get("instr"), float(ios)) if ios else None
                if c.get("na"):
                    m["instr_na"] = c["na"]
                continue
            per = {n: _div(c.get(n), float(ios)) if ios else None for n in ("syscalls", "vol_cs", "invol_cs")}
            m.update(per)
            m["cs"] = None if per["vol_cs"] is None or per["invol_cs"] is None else per["vol_cs"] + per["invol_cs"]
            m["by_name"] = {n: v / float(ios) for n, v in (c.get("syscalls_by_name") or {}).items() if ios}

    def get(self, series, workload, qd, metric):
        return self.by_key.get((series, workload, qd), {}).get(metric)


# (metric, its name in the line, series, qd, goal op, goal), for each workload
COUNT_GOALS = [
    ("syscalls", "syscalls/io", "gateway", 32, "<=", 2.3),
    ("cs", "cs/io", "gateway", 32, "<=", 0.35),
    ("instr", "instr/io", "gateway", 32, "<=", 3100),
    ("vol_cs", "vol cs/io", "gateway", 1, "<=", 1.25),
    ("syscalls", "syscalls/io", "gateway", 1, "<=", 5),
    ("syscalls", "syscalls/io", "gateway-uring", 1, "<=", 3),
    ("vol_cs", "vol cs/io", "gateway-uring", 1, "<=", 2.0),
    ("syscalls", "syscalls/io", "gateway-uring", 32, "<=", 0.3),
]


# The same goals as the sum the fixed ones were made of, with what this run
# measured: (metric, its name in the line, series, qd, the peer series
# added, the margin over their sum).  The fixed goals above are the issue's
# numbers from one machine (null FUSE server QD1: 0.19 voluntary switches per
# I/O there; where its every read sleeps, 1.0); these follow the machine.
DERIVED_GOALS = [
    ("syscalls", "syscalls/io", "gateway", 32, ("raw", "nullfuse-dev"), 0.14),
    ("cs", "cs/io", "gateway", 32, ("raw", "nullfuse-dev"), 0.07),
    ("instr", "instr/io", "gateway", 32, ("raw", "nullfuse-dev"), 236),
    ("vol_cs", "vol cs/io", "gateway", 1, ("raw", "nullfuse-dev"), 0.06),
    ("syscalls", "syscalls/io", "gateway", 1, ("raw", "nullfuse-dev"), 0),
]


def _verdict(value, op, goal):
    if value is None or op is None:
        return None
    return "PASS" if (value <= goal if op == "<=" else value >= goal) else "MISS"


def compute_counts(cells):
    """The goal lines of the counts per I/O: a list as compute() gives (min, max None, rounds 0)."""
    cs = Counts(cells)
    out = []
    for metric, label, series, qd, op, goal in COUNT_GOALS:
        for rw in ("randread", "randwrite"):
            v = cs.get(series, rw, qd, metric)
            out.append({"name": f"{label} {series} {rw} qd{qd}", "value": v, "min": None, "max": None,
                        "rounds": 0, "goal_op": op, "goal": goal, "verdict": _verdict(v, op, goal)})
    for metric, label, series, qd, peers, margin in DERIVED_GOALS:
        for rw in ("randread", "randwrite"):
            v = cs.get(series, rw, qd, metric)
            parts = [cs.get(p, rw, qd, metric) for p in peers]
            goal = None if None in parts else round(sum(parts) + margin, 3)
            out.append({"name": f"{label} {series} {rw} qd{qd} against {' + '.join(peers)} + {margin} (same run)",
                        "value": v, "min": None, "max": None, "rounds": 0,
                        "goal_op": None if goal is None else "<=", "goal": goal,
                        "verdict": _verdict(v, "<=", goal) if goal is not None else None})
    return out


COUNT_SERIES = ["gateway", "gateway-readers", "gateway-s", "gateway-poll", "gateway-uring", "raw", "nullfuse-dev", "nullfuse-uring"]


def counts_table(cells, top=3):
    """Lines of the counts per I/O: rows series x workload x QD; syscalls, the top ones by name,
    voluntary and involuntary context switches, user instructions; then why an instr cell is n/a."""
    cs = Counts(cells)
    order = {s: i for i, s in enumerate(COUNT_SERIES)}
    keys = sorted(cs.by_key, key=lambda k: (order.get(k[0], len(order)), k[0], k[1], k[2]))
    lines = [f"{'series':<14} {'workload':<10} {'QD':>3} {'syscalls':>8}  {'top syscalls by name':<44} "
             f"{'vol cs':>7} {'invol cs':>8} {'user instr':>10}"]

    def f(x, spec):
        return "n/a" if x is None else format(x, spec)

    notes = []
    for k in keys:
        m = cs.by_key[k]
        # the top ones of at least 0.005 a I/O (not the odd getuid of a FUSE request's credentials)
        names = sorted(((n, v) for n, v in (m.get("by_name") or {}).items() if v >= 0.005),
                       key=lambda kv: (-kv[1], kv[0]))[:top]
        top_s = " ".join(f"{n} {v:.2f}" for n, v in names) or "n/a"
        lines.append(f"{k[0]:<14} {k[1]:<10} {k[2]:>3} {f(m.get('syscalls'), '.2f'):>8}  {top_s:<44} "
                     f"{f(m.get('vol_cs'), '.3f'):>7} {f(m.get('invol_cs'), '.3f'):>8} {f(m.get('instr'), '.0f'):>10}")
        if m.get("instr_na"):
            notes.append(f"user instr n/a for {k[0]} {k[1]} qd{k[2]}: {m['instr_na']}")
    return lines + notes


def compute(cells):
    """A list of {name, value, min, max, rounds, goal_op, goal, verdict} from the cell list."""
    cs = Cells(cells)
    out = []
    for name, fn, op, goal in ratio_defs():
        value = fn(cs.best)
        per_round = []
        for r in cs.rounds():
            v = fn(lambda s, w, q, m, r=r: cs.in_round(s, w, q, m, r))
            if v is not None:
                per_round.append(v)
        verdict = None
        if value is not None and op is not None:
            verdict = "PASS" if (value <= goal if op == "<=" else value >= goal) else "MISS"
        out.append({"name": name, "value": value,
                    "min": min(per_round) if per_round else None, "max": max(per_round) if per_round else None,
                    "rounds": len(per_round), "goal_op": op, "goal": goal, "verdict": verdict})
    return out


def fmt(x):
    return "n/a" if x is None else f"{x:.3f}"


def line(r):
    s = f"ratio {r['name']}: {fmt(r['value'])}"
    if r["value"] is not None and r["min"] is not None:
        s += f" (rounds {fmt(r['min'])}-{fmt(r['max'])})"
    if r["goal_op"] is not None:
        s += f" goal {r['goal_op']} {r['goal']}"
        if r["verdict"]:
            s += f" {r['verdict']}"
    return s


def table(cells):
    """Lines of the best cells: IOPS, mean latency and machine CPU per I/O, with the IOPS range."""
    cs = Cells(cells)
    lines = [f"{'series':<14} {'workload':<10} {'QD':>3} {'IOPS':>9} {'(range)':>17} {'lat us':>8} {'CPU us/IO':>10}"]
    for (s, w, q) in sorted(cs.by_key):
        iops = [m["iops"] for m in cs.by_key[(s, w, q)].values() if m["iops"] is not None]
        rng = f"{min(iops):.0f}-{max(iops):.0f}" if iops else "n/a"
        b = cs.best(s, w, q, "iops")
        lat = cs.best(s, w, q, "lat_us")
        cpu = cs.best(s, w, q, "cpu_us")
        lines.append(f"{s:<14} {w:<10} {q:>3} {'n/a' if b is None else f'{b:.0f}':>9} {rng:>17} "
                     f"{'n/a' if lat is None else f'{lat:.1f}':>8} {'n/a' if cpu is None else f'{cpu:.1f}':>10}")
    return lines


def main(argv):
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--json"):
        print("usage: floor.py CELLS.json [--json OUT.json]", file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        cells = json.load(f)
    print("Against the floor: null target (tests/bench/nulltarget.c) and null FUSE server (tests/bench/nullfuse.c), best of rounds;")
    print("latency = mean; CPU per I/O = machine-wide user+nice+system+irq+softirq over the cell / I/Os")
    for s in table(cells):
        print(s)
    cnt = Counts(cells)
    if cnt.by_key:
        print()
        print("Counts per I/O (fixed I/O count per cell; syscalls and context switches of the daemon, or of the raw")
        print("tool, with what it does idle subtracted; user instructions under callgrind)")
        for s in counts_table(cells):
            print(s)
        print()
    res = compute(cells) + compute_counts(cells)
    for r in res:
        print(line(r))
    if len(argv) == 4:
        per_io = [{"series": k[0], "workload": k[1], "qd": k[2], **m} for k, m in sorted(cnt.by_key.items())]
        with open(argv[3], "w") as f:
            json.dump({"cells": cells, "counts_per_io": per_io, "ratios": res}, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
