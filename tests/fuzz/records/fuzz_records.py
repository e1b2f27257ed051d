#!/usr/bin/env python3
"""Fuzz target of the records reader (reports/ and ci/), with Hypothesis.

Mutates real records (corpus/*.jsonl, lines of tests/reports/fixtures): values replaced by other
JSON types, huge, negative, infinite or NaN numbers, empty lists, deep nesting, deleted keys, and
whole lines cut short or spliced with bytes that are not UTF-8. Each mutated results.jsonl goes
through read_records, and what it accepts through the report's summary table, the data of the
convergence plot, `compare`'s cells and the regression gate against the seed. The only exception
allowed to escape is RecordError (the clean one-line error, exit 2); anything else is a defect,
and its input is saved under regressions/.

    fuzz_records.py --replay       every file of corpus/ and regressions/, once
    fuzz_records.py --seconds 60   fuzz for 60 s; prints the examples run
    (tests/reports/test_fuzz_records.py runs a fixed, derandomized budget under pytest)
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT / "reports"))

from dlbench_reports.records import RecordError, ResultSet, latest_per_point, read_records  # noqa
from dlbench_reports.compare import system_from_records  # noqa
from dlbench_reports.plots import convergence  # noqa
from dlbench_reports.report import summary_rows  # noqa

_spec = importlib.util.spec_from_file_location("perf_gate", ROOT / "ci" / "perf_gate.py")
perf_gate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(perf_gate)

SEEDS = [p.read_bytes() for p in sorted((HERE / "corpus").glob("*.jsonl"))]
SEED_RECORDS = [json.loads(line) for s in SEEDS for line in s.splitlines() if line.strip()]

executed = 0
last_input = b""


def check(data: bytes) -> None:
    """The property: any bytes as results.jsonl are read, or refused with RecordError."""
    global executed, last_input
    executed += 1
    last_input = data
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "results.jsonl"
        path.write_bytes(data)
        try:
            records = read_records(path)
        except RecordError:
            return
        rs = ResultSet(Path(tmp), latest_per_point(records))
        summary_rows(rs, [])
        system_from_records(tmp, "dlbench", rs.records, False)
        for r in rs.records:
            if r.ok and r.get("metrics.convergence"):
                convergence.legend_tail(convergence.curve(r))
        seed_path = Path(tmp) / "seed.jsonl"
        seed_path.write_bytes(SEEDS[0])
        perf_gate.gate(read_records(seed_path), records, 0.05, 0.01)


json_values = st.recursive(
    st.none() | st.booleans() | st.text(max_size=8)
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                               max_size=3),
    max_leaves=6)


def paths_of(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from paths_of(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node[:4]):
            yield from paths_of(v, prefix + (i,))


@st.composite
def mutated_lines(draw) -> bytes:
    record = json.loads(json.dumps(draw(st.sampled_from(SEED_RECORDS))))
    for _ in range(draw(st.integers(1, 4))):
        paths = [p for p in paths_of(record) if p]
        where = draw(st.sampled_from(paths))
        parent = record
        for k in where[:-1]:
            parent = parent[k]
        kind = draw(st.sampled_from(["value", "delete", "empty", "deep", "number"]))
        if kind == "delete" and isinstance(parent, dict):
            del parent[where[-1]]
        elif kind == "empty":
            parent[where[-1]] = []
        elif kind == "deep":
            parent[where[-1]] = json.loads("[" * 60 + "]" * 60)
        elif kind == "number":
            parent[where[-1]] = draw(st.sampled_from(
                [0, -1, 1.5, 2**63, 2**70, float("inf"), float("-inf"), float("nan"), 1e308]))
        else:
            parent[where[-1]] = draw(json_values)
    line = json.dumps(record).encode()  # NaN and Infinity as Python writes them
    tail = draw(st.sampled_from(["whole", "cut", "bytes", "deep"]))
    if tail == "cut":
        line = line[:draw(st.integers(0, len(line)))]
    elif tail == "bytes":
        at = draw(st.integers(0, len(line)))
        line = line[:at] + draw(st.binary(min_size=1, max_size=4)) + line[at:]
    elif tail == "deep":
        line = b"[" * 100000 + b"]" * 100000
    return line + b"\n"


def run(examples: int, derandomize: bool, seed_value: int = 0) -> None:
    """`examples` mutated inputs through check(); Hypothesis shrinks a failure and raises it."""
    @settings(max_examples=examples, derandomize=derandomize, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(mutated_lines())
    def fuzz_one(data: bytes) -> None:
        check(data)

    (fuzz_one if derandomize else seed(seed_value)(fuzz_one))()


def inputs_on_disk() -> list[Path]:
    return sorted(p for d in ("corpus", "regressions") for p in (HERE / d).glob("*")
                  if p.is_file())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replay", action="store_true")
    ap.add_argument("--seconds", type=float, default=0)
    a = ap.parse_args()
    if a.replay:
        for p in inputs_on_disk():
            check(p.read_bytes())
        print(f"replay: records: {len(inputs_on_disk())} inputs, no defect")
        return 0
    start, rounds = time.monotonic(), 0
    try:
        while time.monotonic() - start < a.seconds:
            run(200, False, rounds)
            rounds += 1
    except Exception:
        name = "crash-" + hashlib.sha1(last_input).hexdigest()
        (HERE / "regressions" / name).write_bytes(last_input)
        print(f"fuzz: records: a defect; its input is tests/fuzz/records/regressions/{name}",
              file=sys.stderr)
        raise
    elapsed = time.monotonic() - start
    print(f"fuzz: records: Done {executed} runs in {elapsed:.0f} second(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
