#!/usr/bin/env python3
"""The folders of runtime/ include each other without a cycle: each folder's includes of another
folder are an edge, and the graph must be acyclic (core at the bottom, train near the top).
Prints the folder graph and any cycle. Usage: include_layers.py ROOT"""
import re
import sys
from pathlib import Path

root = Path(sys.argv[1]) / "runtime"
include = re.compile(r'#include "runtime/([a-z_]+)/')
edges: dict[str, set[str]] = {}
for f in root.rglob("*"):
    if f.suffix not in {".h", ".cpp", ".cu", ".cuh"}:
        continue
    folder = f.relative_to(root).parts[0]
    for target in include.findall(f.read_text(errors="replace")):
        if target != folder:
            edges.setdefault(folder, set()).add(target)
        edges.setdefault(target, set())


def cycle_from(start: str) -> list[str] | None:
    stack, path, on_path = [(start, iter(sorted(edges.get(start, ()))))], [start], {start}
    while stack:
        node, children = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            on_path.discard(path.pop())
        elif child in on_path:
            return path[path.index(child):] + [child]
        else:
            stack.append((child, iter(sorted(edges.get(child, ())))))
            path.append(child)
            on_path.add(child)
    return None


for folder in sorted(edges):
    print(f"{folder} -> {' '.join(sorted(edges[folder])) or '(nothing)'}")
for folder in sorted(edges):
    cycle = cycle_from(folder)
    if cycle:
        print("include cycle between folders: " + " -> ".join(cycle))
        sys.exit(1)
print("no include cycle between runtime/ folders")
