#!/usr/bin/env python3
"""Fuzz target of the records reader (reports/ and ci/), with Hypothesis.

Two kinds of input. Mutated records (corpus/*.jsonl, lines of tests/reports/fixtures): values
replaced by other JSON types, huge, negative, infinite or NaN numbers, empty lists, deep nesting,
deleted keys, and whole lines cut short or spliced with bytes that are not UTF-8. And extreme
records: whole results files of the fixtures' sweeps (a scaling sweep, sync modes, a global
batch sweep, ...) in which the newer fields (metrics.async, convergence, noise reasons,
scaling_loss, engines, learning_rate, throughput, ...) take the extreme values their schema
allows (1.7e308, 5e-324, 2^63 - 1, 150,000 reasons), built from result.schema.json itself.

Each results.jsonl goes through read_records, and what it accepts through the report's summary
table, the data of the convergence plot, `compare`'s cells and the regression gate against the
seed; an extreme one (and every input replayed) through the full report, plots and all, with a
numpy RuntimeWarning counted as a failure (it would reach the user's stderr). The only exception
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
import warnings
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT / "reports"))

from dlbench_reports.records import (RESULT_SCHEMA, RecordError, ResultSet,  # noqa
                                     latest_per_point, read_records)
from dlbench_reports.compare import system_from_records  # noqa
from dlbench_reports.plots import common, convergence  # noqa
from dlbench_reports.report import build, summary_rows  # noqa

_spec = importlib.util.spec_from_file_location("perf_gate", ROOT / "ci" / "perf_gate.py")
perf_gate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(perf_gate)

SEEDS = [p.read_bytes() for p in sorted((HERE / "corpus").glob("*.jsonl"))]
SEED_RECORDS = [json.loads(line) for s in SEEDS for line in s.splitlines() if line.strip()]

executed = 0
last_input = b""


def check(data: bytes, full_report: bool = False) -> None:
    """The property: any bytes as results.jsonl are read, or refused with RecordError; with
    full_report, what is read also renders the whole report without a RuntimeWarning."""
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
        if full_report:
            render_report(Path(tmp))


def render_report(directory: Path) -> None:
    """The report a user renders (plots, report.md, report.html), numpy's RuntimeWarnings as
    errors: a record the schema accepts renders, or is refused with RecordError."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            build(directory)
    except RecordError:
        pass
    finally:
        common.plt.close("all")  # a plot refused half drawn leaves its figure open


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


# Extreme records: the values at the edges of what result.schema.json allows, by type and bounds.
SCHEMA = json.loads(RESULT_SCHEMA.read_text())
FIXTURES = ROOT / "tests" / "reports" / "fixtures"
# The largest double, beyond what a plot draws (common.MAX_DRAWN), the smallest normal and
# subnormal ones, and the ordinary.
EXTREME_FLOATS = [1.7e308, 1e300, 1e201, 2.2250738585072014e-308, 5e-324, 0.0, 0.5]
EXTREME_INTS = [0, 1, 2**53 + 1, 2**63 - 1, 10**300]
LONG_LENGTHS = [0, 1, 2, 7, 1000, 150000]
# The fields the newer reports read, as dotted paths into a record (each a schema node).
EXTREME_FIELDS = [
    "metrics.throughput_img_s", "metrics.async", "metrics.async.staleness_median",
    "metrics.convergence", "metrics.convergence.time_to_accuracy_s",
    "metrics.convergence.run_seconds", "metrics.convergence.eval_accuracy",
    "metrics.convergence.epoch_end_seconds", "metrics.convergence.target_accuracy", "noise",
    "metrics.scaling_loss", "metrics.engines", "metrics.learning_rate", "metrics.step_time_s",
    "metrics.repetitions", "metrics.scaling_efficiency", "metrics.phases", "metrics.comm",
    "metrics.achieved_flops_per_s", "metrics.fraction_of_peak_flops", "metrics.max_batch",
    "config.ranks", "config.batch", "config.sync", "config.straggler"]


def schema_node(dotted: str) -> dict:
    node = SCHEMA
    for part in dotted.split("."):
        node = node["properties"][part]
    return node


def within(value, node: dict) -> bool:
    """Whether a number keeps to the node's bounds."""
    return (value >= node.get("minimum", value) and value <= node.get("maximum", value)
            and ("exclusiveMinimum" not in node or value > node["exclusiveMinimum"])
            and ("exclusiveMaximum" not in node or value < node["exclusiveMaximum"]))


@st.composite
def extreme_value(draw, node: dict, depth: int = 0):
    """A value the schema node allows, at the edges: numbers from EXTREME_FLOATS and
    EXTREME_INTS (either sign) within its bounds, arrays up to 150,000 items long, objects with
    every required property and some of the others."""
    if "enum" in node:
        return draw(st.sampled_from(node["enum"]))
    types = node.get("type", ["number", "string", "array"])
    kind = draw(st.sampled_from(types if isinstance(types, list) else [types]))
    if kind in ("number", "integer"):
        pool = EXTREME_INTS + ([] if kind == "integer" else EXTREME_FLOATS)
        allowed = [v for v in pool + [-v for v in pool] if within(v, node)]
        return draw(st.sampled_from(allowed or [node.get("minimum", 1)]))
    if kind == "string":  # a long one alone, not as each of 150,000 items
        long = ["y" * 5000] if depth == 0 else []
        return draw(st.sampled_from(["", "x", "stale:1", "stale:x", "async", "1:2"] + long))
    if kind == "boolean":
        return draw(st.booleans())
    if kind == "null":
        return None
    if kind == "array":
        n = max(draw(st.sampled_from(LONG_LENGTHS if depth == 0 else [0, 1, 3])),
                node.get("minItems", 0))
        item = draw(extreme_value(node.get("items", {"type": ["number", "string"]}), depth + 1))
        return [item] * n  # one value repeated: 150,000 draws would take minutes
    props = node.get("properties", {})
    keys = [k for k in props if k in node.get("required", []) or draw(st.booleans())]
    return {k: draw(extreme_value(props[k], depth + 1)) for k in keys}


def fixture_groups() -> list[list[dict]]:
    """The records of each fixture sweep, and two sweeps made from the convergence run: sync
    modes on 2 ranks with and without a straggler, and a one-rank global-batch sweep, so that
    every plot of the report has records to draw."""
    groups = [[json.loads(line) for line in p.read_text().splitlines() if line.strip()]
              for p in sorted(FIXTURES.glob("*/results.jsonl"))]
    base = json.loads((FIXTURES / "convergence" / "results.jsonl").read_text().splitlines()[0])
    sync = [variant(base, i, ranks=2, sync=mode, straggler=straggler)
            for i, (mode, straggler) in enumerate(
                (m, s) for m in ("sync", "stale:2", "async") for s in (None, "1:2"))]
    for r in sync:
        if r["config"]["sync"] == "async":
            r["metrics"]["async"] = {"updates": 10, "staleness_median": 1.5, "staleness_max": 4,
                                     "transport": "host copies"}
    batches = [variant(base, i, batch=b) for i, b in enumerate((32, 64, 128))]
    return groups + [sync, batches]


def variant(base: dict, index: int, **config) -> dict:
    r = json.loads(json.dumps(base))
    r["point"]["index"] = index
    r["point"]["id"] = f"{r['point']['id']}-{index}"
    r["config"].update(config)
    r["suite_config"] = dict(r.get("suite_config", {}), **config)
    return r


GROUPS = fixture_groups()


def has(record: dict, dotted: str) -> bool:
    node = record
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def put(record: dict, dotted: str, value) -> None:
    """Sets a dotted path, making the objects on the way (and the suite config's copy of a
    config key, which the plots group by)."""
    *parents, last = dotted.split(".")
    node = record
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    if parents == ["config"]:
        record.setdefault("suite_config", {})[last] = value


@st.composite
def extreme_results(draw) -> bytes:
    """A fixture sweep with 1 to 6 extreme values put into its records, each into one record or
    into all of them (an axis whose every point is extreme fails where one point does not)."""
    records = json.loads(json.dumps(draw(st.sampled_from(GROUPS))))
    for _ in range(draw(st.integers(1, 6))):
        field = draw(st.sampled_from(EXTREME_FIELDS))
        values: dict[str, object] = {}  # one value per path, the same in every record
        for record in records if draw(st.booleans()) else [draw(st.sampled_from(records))]:
            where = field
            while "." in where and not has(record, where.rsplit(".", 1)[0]):
                where = where.rsplit(".", 1)[0]  # the whole object, with its required keys
            if where not in values:
                values[where] = draw(extreme_value(schema_node(where)))
            put(record, where, json.loads(json.dumps(values[where])))
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def run(examples: int, derandomize: bool, seed_value: int = 0) -> None:
    """`examples` mutated inputs through check(); Hypothesis shrinks a failure and raises it."""
    @settings(max_examples=examples, derandomize=derandomize, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(mutated_lines())
    def fuzz_one(data: bytes) -> None:
        check(data)

    (fuzz_one if derandomize else seed(seed_value)(fuzz_one))()


def run_extreme(examples: int, derandomize: bool, seed_value: int = 0) -> None:
    """`examples` extreme results files through check() and the full report. Not shrunk: at a
    report a second, shrinking one failure took over five minutes; the input that failed is
    saved whole (main)."""
    @settings(max_examples=examples, derandomize=derandomize, database=None, deadline=None,
              suppress_health_check=list(HealthCheck),
              phases=[Phase.explicit, Phase.reuse, Phase.generate])
    @given(extreme_results())
    def fuzz_one(data: bytes) -> None:
        check(data, full_report=True)

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
            check(p.read_bytes(), full_report=True)
        print(f"replay: records: {len(inputs_on_disk())} inputs, no defect")
        return 0
    start, rounds = time.monotonic(), 0
    try:
        while time.monotonic() - start < a.seconds:
            # Alternately: an extreme file costs a whole report (about a second), a mutated one
            # a few milliseconds.
            if rounds % 2 == 0:
                run(200, False, rounds)
            else:
                run_extreme(4, False, rounds)
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
