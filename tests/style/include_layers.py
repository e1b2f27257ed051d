#!/usr/bin/env python3
"""The layering rules of the source tree, checked on every #include between folders.

1. The folders of runtime/ include each other without a cycle (each folder's includes of another
   folder are an edge).
2. Named edges never appear, whatever else changes:
   - runtime/ includes neither workloads/ nor suites/, and workloads/ does not include suites/;
   - workloads/ (models and data) does not include runtime/train/: a model or a data set does
     not know how it is trained;
   - runtime/io/ does not include runtime/nn/: files hold host tensors (runtime/core/
     host_tensor.h), not layers;
   - runtime/nn/ includes none of optim/, overlap/, comm/ or train/: layers and the schedule
     know nothing of who updates, synchronises or runs them.
3. Only runtime/backend/ (its registry) and tests include runtime/backend/cuda/: the rest of the
   runtime reaches a GPU through the Backend and DeviceQueue interfaces (comm/'s NCCL
   communicator included).
4. suites/harness/ is a folder per command over core/ (options, records, launcher, schemas):
   a command's folder includes core/ and no other command's (main.cpp hands a command made of
   others their functions); core/ includes no command. Only main.cpp, which dispatches to
   them all, sits at the top of suites/harness/. Includes are read however they are written
   (quotes or brackets, from the root or relative to the file).
Prints the folder graph, then every broken rule. Usage: include_layers.py ROOT"""
import os
import re
import sys
from pathlib import Path

ROOT = Path(sys.argv[1])
SOURCES = {".h", ".cpp", ".cu", ".cuh"}
include = re.compile(r'#include "((?:runtime/)?[a-z_]+)/')

# (from, to, why): folders as "runtime/<name>" or a top-level folder.
FORBIDDEN = [
    ("runtime/*", "workloads", "the runtime does not know the models"),
    ("runtime/*", "suites", "the runtime does not know the harness"),
    ("workloads", "suites", "models and data do not know the harness"),
    ("workloads", "runtime/train", "a model or a data set does not know how it is trained"),
    ("runtime/io", "runtime/nn", "files hold host tensors, not layers"),
    ("runtime/nn", "runtime/optim", "layers do not know who updates them"),
    ("runtime/nn", "runtime/overlap", "layers do not know the sync policy"),
    ("runtime/nn", "runtime/comm", "layers do not know the communicator"),
    ("runtime/nn", "runtime/train", "layers do not know the executor"),
]


# What each folder of suites/harness/ may include besides itself: core/ alone. A command made of
# others (a sweep's simulate block, validate-sim) is handed their functions by main.cpp.
HARNESS_USES = {
    "core": set(),
    "run": {"core"},  # run, maxbatch and worker: one run's training
    "bench": {"core"},
    "list": {"core"},
    "check_ops": {"core"},
    "simulate": {"core"},
    "sweep": {"core"},
    "validate_sim": {"core"},
    "make_dataset": set(),
}


def folder_of(path: Path) -> str:
    parts = path.relative_to(ROOT).parts
    return f"runtime/{parts[1]}" if parts[0] == "runtime" else parts[0]


edges: dict[str, dict[str, str]] = {}  # folder -> {target folder: first file including it}
for top in ("runtime", "workloads", "suites"):
    for f in sorted((ROOT / top).rglob("*")):
        if f.suffix not in SOURCES:
            continue
        folder = folder_of(f)
        for target in include.findall(f.read_text(errors="replace")):
            if target != folder:
                edges.setdefault(folder, {}).setdefault(target, str(f.relative_to(ROOT)))
            edges.setdefault(target, {})


def matches(pattern: str, folder: str) -> bool:
    return folder.startswith(pattern[:-1]) if pattern.endswith("*") else folder == pattern


def cycle_from(start: str) -> list[str] | None:
    inner = {k: [t for t in v if t.startswith("runtime/")] for k, v in edges.items()}
    stack, path, on_path = [(start, iter(sorted(inner.get(start, ()))))], [start], {start}
    while stack:
        node, children = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            on_path.discard(path.pop())
        elif child in on_path:
            return path[path.index(child):] + [child]
        else:
            stack.append((child, iter(sorted(inner.get(child, ())))))
            path.append(child)
            on_path.add(child)
    return None


for folder in sorted(edges):
    print(f"{folder} -> {' '.join(sorted(edges[folder])) or '(nothing)'}")
broken = []
for folder in sorted(edges):
    for target, first in sorted(edges[folder].items()):
        for source, forbidden, why in FORBIDDEN:
            if matches(source, folder) and matches(forbidden, target):
                broken.append(f"{first} includes {target}/: {why}")
    if folder.startswith("runtime/"):
        cycle = cycle_from(folder)
        if cycle:
            broken.append("include cycle between folders: " + " -> ".join(cycle))
cuda_include = re.compile(r'#include "runtime/backend/cuda/')
for source in sorted(ROOT.rglob("*")):
    if source.suffix not in SOURCES or not source.is_file():
        continue
    rel = source.relative_to(ROOT)
    if rel.parts[0] in ("build", "tests", "third_party") or rel.parts[:2] == ("runtime", "backend"):
        continue
    if rel.parts[0] not in ("runtime", "suites", "workloads"):
        continue
    if cuda_include.search(source.read_text(errors="replace")):
        broken.append(f"{rel} includes runtime/backend/cuda/: only the backend registry does "
                      "(the rest reaches a GPU through Backend and DeviceQueue)")
harness = ROOT / "suites" / "harness"
any_include = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]', re.M)


def harness_folder_of(target: str, source: Path) -> str | None:
    """The suites/harness/ folder an include names (as written from the root, or relative to the
    including file), "" for a file at its top, None outside it."""
    for base in (ROOT, source.parent):
        path = Path(os.path.normpath(base / target))
        if path.is_file() or base == source.parent:
            try:
                parts = path.relative_to(harness).parts
            except ValueError:
                continue
            return parts[0] if len(parts) > 1 else ""
    return None


for source in sorted(harness.rglob("*")):
    if source.suffix not in SOURCES or not source.is_file():
        continue
    rel = source.relative_to(harness).parts
    if len(rel) == 1:
        if rel[0] != "main.cpp":
            broken.append(f"suites/harness/{rel[0]}: only main.cpp sits at the top of the "
                          "harness; a file belongs to core/ or a command's folder")
        continue
    folder = rel[0]
    if folder not in HARNESS_USES:
        broken.append(f"suites/harness/{folder}/ is in no rule: add it to HARNESS_USES")
        continue
    for target in any_include.findall(source.read_text(errors="replace")):
        to = harness_folder_of(target, source)
        if to is not None and to != folder and to not in HARNESS_USES[folder]:
            uses = ", ".join(sorted(HARNESS_USES[folder])) or "itself"
            broken.append(f"{source.relative_to(ROOT)} includes suites/harness/{to or '(top)'}/: "
                          f"{folder}/ uses only {uses}")
for line in dict.fromkeys(broken):
    print(line)
if broken:
    sys.exit(1)
print("every layering rule holds")
