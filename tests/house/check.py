#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The house rules, checked from the tree (suite unit, test `house`).

  - layers: initiator/ includes nothing of cache/ or gateway/, cache/
    nothing of gateway/;
  - every #include of our own headers names the file from the top of the
    tree (initiator/session/session.h) or bare within its own folder;
  - no folder includes another folder's *_priv.h;
  - no circle between folders (gateway/main.c, the start-up sequence that
    calls every step, and gateway/gateway.h, the LUN table every gateway
    folder shares, are the gateway's top and are left out);
  - every sub-folder has a README.md whose "May depend on:" names every
    folder it includes (or its whole layer, as `cache/`);
  - docs/design.md's layer table names every source file.

Prints one line per breach and exits 1, else prints the folder graph and
exits 0.  Usage: check.py [REPO_ROOT]
"""
import os
import re
import subprocess
import sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
os.chdir(root)
LAYERS = ["initiator", "cache", "gateway"]
TOP = {"gateway/main.c", "gateway/gateway.h"}

files = subprocess.check_output(["git", "ls-files", *LAYERS], text=True).split()
files = [f for f in files if f.endswith((".c", ".h")) and os.path.isfile(f)]
ours = set(files)
bad = []
graph = {}

for f in files:
    here = os.path.dirname(f)
    for n, line in enumerate(open(f, encoding="utf-8"), 1):
        m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
        if not m:
            continue
        inc = m.group(1)
        target = inc if "/" in inc else os.path.join(here, inc)
        if target not in ours:
            if "/" not in inc and not os.path.exists(os.path.join(here, inc)):
                bad.append(f"{f}:{n}: #include \"{inc}\" is not in this folder: name it from the top of the tree")
            continue
        if "/" in inc and os.path.dirname(inc) == here:
            bad.append(f"{f}:{n}: #include \"{inc}\": within its own folder a header is named bare")
        if ".." in inc.split("/"):
            bad.append(f"{f}:{n}: #include \"{inc}\": no ../ paths")
        there = os.path.dirname(target)
        if there == here:
            continue
        if target.endswith("_priv.h"):
            bad.append(f"{f}:{n}: includes {target}, another folder's private header")
        lf, lt = LAYERS.index(f.split("/")[0]), LAYERS.index(target.split("/")[0])
        if lt > lf:
            bad.append(f"{f}:{n}: includes {target}: {f.split('/')[0]}/ may not depend on {target.split('/')[0]}/")
        if f in TOP or target in TOP:
            continue
        graph.setdefault(here, set()).add(there)

# circles between folders
def cycle_from(start):
    stack, seen = [(start, [start])], set()
    while stack:
        node, path = stack.pop()
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                return path + [start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, path + [nxt]))
    return None

reported = set()
for folder in sorted(graph):
    c = cycle_from(folder)
    if c and frozenset(c) not in reported:
        reported.add(frozenset(c))
        bad.append("circle between folders: " + " -> ".join(c))

# READMEs
folders = sorted({os.path.dirname(f) for f in files} - set(LAYERS))
for d in folders:
    readme = os.path.join(d, "README.md")
    if not os.path.isfile(readme):
        bad.append(f"{d}/ has no README.md")
        continue
    text = open(readme, encoding="utf-8").read()
    m = re.search(r"May depend on:(.*?)(\n\n|\Z)", text, re.S)
    said = m.group(1) if m else ""
    for dep in sorted(graph.get(d, ())):
        if f"`{dep}/`" not in said and f"`{dep.split('/')[0]}/`" not in said:
            bad.append(f"{readme}: \"May depend on:\" does not name `{dep}/`, which it includes")

# the layer table
design = open("docs/design.md", encoding="utf-8").read()
for f in files:
    base = os.path.basename(f)
    stem, ext = os.path.splitext(base)
    if not re.search(rf"`{re.escape(stem)}(\.\[ch\]|{re.escape(ext)})`", design):
        bad.append(f"docs/design.md's layer table does not name {f}")

for b in bad:
    print(b)
if bad:
    sys.exit(1)
for d in sorted(graph):
    print(f"{d} -> {', '.join(sorted(graph[d]))}")
