#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The house rules, checked from the tree (suite unit, test `house`).

  - layers: initiator/ uses nothing of cache/ or gateway/, cache/ nothing
    of gateway/, by include or (with BUILD_DIR) by call;
  - every #include of our own headers ("" or <>) names the file from the
    top of the tree (initiator/session/session.h) or bare within its own
    folder; no ../;
  - no folder includes another folder's *_priv.h;
  - no circle between folders, by include or (with BUILD_DIR, from the
    objects' symbols: who calls or reads what who defines) by call.
    gateway/main.c, gateway/stop.[ch] and gateway/supervisor.[ch], which
    call every step, and gateway/gateway.h, the LUN table every gateway
    folder shares, are the gateway's top and are left out of the circles;
  - each layer and each sub-folder has a README.md: a description, a
    "Threads:" paragraph (sub-folders) and a "May depend on:" paragraph
    that names every folder it includes (or that folder's whole layer);
  - docs/design.md's layer table has one row per folder, and under it
    exactly that folder's source files.

Prints one line per breach and exits 1, else prints the folder graph and
exits 0.  Usage: check.py [REPO_ROOT [BUILD_DIR]]
"""
import json
import os
import re
import subprocess
import sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
build = sys.argv[2] if len(sys.argv) > 2 else None
os.chdir(root)
LAYERS = ["initiator", "cache", "gateway"]
TOP = {"gateway/main.c", "gateway/stop.c", "gateway/stop.h", "gateway/supervisor.c", "gateway/supervisor.h",
       "gateway/gateway.h"}


def tree_files():
    """The source files of the three layers: git's list, else a walk (an export without .git)."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", *LAYERS],
                             capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        out = [os.path.join(d, f) for layer in LAYERS for d, _, fs in os.walk(layer) for f in fs]
    return sorted({f for f in out if f.endswith((".c", ".h")) and os.path.isfile(f)})


files = tree_files()
ours = set(files)
bad = []
inc_graph = {}
call_graph = {}


def layer_of(path):
    return LAYERS.index(path.split("/")[0])


def edge(graph, src, dst, why):
    here, there = os.path.dirname(src), os.path.dirname(dst)
    if here == there:
        return
    if layer_of(dst) > layer_of(src):
        bad.append(f"{why}: {src.split('/')[0]}/ may not depend on {dst.split('/')[0]}/")
    if src in TOP or dst in TOP:
        return
    graph.setdefault(here, {}).setdefault(there, why)


# ---------------------------------------------------------------- includes
for f in files:
    here = os.path.dirname(f)
    for n, line in enumerate(open(f, encoding="utf-8"), 1):
        m = re.match(r'\s*#\s*include\s+([<"])([^">]+)[">]', line)
        if not m:
            continue
        quote, inc = m.groups()
        where = f"{f}:{n}: #include {quote}{inc}{'>' if quote == '<' else quote}"
        if quote == "<" and inc.split("/")[0] not in LAYERS:
            continue  # a system header
        if ".." in inc.split("/"):
            bad.append(f"{where}: no ../ paths; name the file from the top of the tree")
            inc = os.path.normpath(os.path.join(here, inc))
        target = inc if "/" in inc else os.path.join(here, inc)
        if target not in ours:
            if "/" not in inc and not os.path.exists(target):
                bad.append(f"{where} is not in this folder: name it from the top of the tree")
            continue
        if quote == "<":
            bad.append(f"{where}: our own headers are included with quotes")
        if "/" in inc and os.path.dirname(inc) == here:
            bad.append(f"{where}: within its own folder a header is named bare")
        if os.path.dirname(target) != here and target.endswith("_priv.h"):
            bad.append(f"{where}: another folder's private header")
        edge(inc_graph, f, target, where)

# ---------------------------------------------------------------- calls
if build:
    cc = json.load(open(os.path.join(build, "compile_commands.json"), encoding="utf-8"))
    obj_of = {}
    for e in cc:
        src = os.path.relpath(os.path.normpath(os.path.join(e["directory"], e["file"])), os.getcwd())
        if src in ours:
            obj_of[src] = os.path.join(e["directory"], e["output"])
    defined, needs = {}, {}
    for src, obj in obj_of.items():
        if not os.path.exists(obj):
            bad.append(f"{obj}: not built (run ninja first)")
            continue
        syms = subprocess.run(["nm", "-P", obj], capture_output=True, text=True, check=True).stdout
        for line in syms.splitlines():
            parts = line.split()
            if len(parts) < 2:
                continue
            name, kind = parts[0], parts[1]
            if kind == "U":
                needs.setdefault(src, set()).add(name)
            elif kind.isupper():
                defined[name] = src
    for src, names in needs.items():
        for name in sorted(names):
            dst = defined.get(name)
            if dst:
                edge(call_graph, src, dst, f"{src} uses {name} of {dst}")


def circles(graph, kind):
    found = set()
    for start in sorted(graph):
        stack = [(start, [start])]
        seen = set()
        while stack:
            node, path = stack.pop()
            for nxt in sorted(graph.get(node, {})):
                if nxt == start:
                    key = frozenset(path)
                    if key not in found:
                        found.add(key)
                        steps = [f"{a} -> {b} ({graph[a][b]})" for a, b in zip(path, path[1:] + [start])]
                        bad.append(f"circle between folders by {kind}: " + "; ".join(steps))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, path + [nxt]))


circles(inc_graph, "include")
circles(call_graph, "call")

# ---------------------------------------------------------------- READMEs
folders = sorted({os.path.dirname(f) for f in files} | set(LAYERS))
for d in folders:
    readme = os.path.join(d, "README.md")
    if not os.path.isfile(readme):
        bad.append(f"{d}/ has no README.md")
        continue
    text = open(readme, encoding="utf-8").read()
    body = re.sub(r"^#.*\n", "", text).strip()
    if len(body.split("\n\n")[0].split()) < 8:
        bad.append(f"{readme}: no description of what the folder owns")
    if d in LAYERS:
        continue
    if not re.search(r"^Threads:", text, re.M):
        bad.append(f"{readme}: no \"Threads:\" paragraph")
    m = re.search(r"^May depend on:(.*?)(\n\n|\Z)", text, re.S | re.M)
    if not m:
        bad.append(f"{readme}: no \"May depend on:\" paragraph")
        continue
    said = m.group(1)
    for graph in (inc_graph, call_graph):
        for dep in sorted(graph.get(d, {})):
            if f"`{dep}/`" not in said and f"`{dep.split('/')[0]}/`" not in said:
                bad.append(f"{readme}: \"May depend on:\" does not name `{dep}/` ({graph[d][dep]})")

# ---------------------------------------------------------------- the layer table
design = open("docs/design.md", encoding="utf-8").read()
table = re.search(r"^## Layers\n(.*?)^## ", design, re.S | re.M)
rows = {}
current = None
for line in (table.group(1) if table else "").splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) < 3 or cells[0].startswith("---") or cells[0] == "folder":
        continue
    if cells[0]:
        current = cells[0].strip("`").rstrip("/")
        rows.setdefault(current, set())
    if current and cells[1]:
        for name in re.findall(r"`([^`]+)`", cells[1]):
            m = re.fullmatch(r"(.+)\.\[ch\]", name)
            for one in ([m.group(1) + ".c", m.group(1) + ".h"] if m else [name]):
                rows[current].add(os.path.join(current, one))
if not rows:
    bad.append("docs/design.md: no layer table under \"## Layers\"")
for d in folders:
    if d not in rows and d in LAYERS and not any(os.path.dirname(f) == d for f in files):
        continue  # a layer with sub-folders only
    if d not in rows:
        bad.append(f"docs/design.md's layer table has no row for {d}/")
        continue
    have = {f for f in files if os.path.dirname(f) == d}
    for f in sorted(have - rows[d]):
        bad.append(f"docs/design.md's layer table does not name {f} under {d}/")
    for f in sorted(rows[d] - have):
        if not (f.endswith(".h") and f[:-2] + ".c" in rows[d] and f[:-2] + ".c" in have) and \
           not (f.endswith(".c") and f[:-2] + ".h" in have):
            bad.append(f"docs/design.md's layer table names {f}, which is not in the tree")

for b in bad:
    print(b)
if bad:
    sys.exit(1)
for kind, graph in (("include", inc_graph), ("call", call_graph)):
    for d in sorted(graph):
        print(f"{kind}: {d} -> {', '.join(sorted(graph[d]))}")
