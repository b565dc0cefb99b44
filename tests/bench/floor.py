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
#   {"series": "raw" | "libiscsi" | "gateway" | "gateway-s" | "gateway-uring"
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
#   gateway/raw randwrite qd32 / gateway/raw randread qd32, goal >= 0.8
#   raw/libiscsi iops qd32     randread, goal >= 1.25
#   raw/libiscsi cpu qd32      randread CPU per I/O, goal <= 0.7
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


class Cells:
    def __init__(self, cells):
        # (series, workload, qd) -> {round: metrics}
        self.by_key = {}
        for c in cells:
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
    defs.extend(_hop_defs("gateway-uring", "nullfuse-uring", " uring"))
    return defs


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
    if r["value"] is not None:
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
    res = compute(cells)
    for r in res:
        print(line(r))
    if len(argv) == 4:
        with open(argv[3], "w") as f:
            json.dump({"cells": cells, "ratios": res}, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
