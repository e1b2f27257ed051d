#!/usr/bin/env python3
"""Fuzz target of the micro report's reader (reports/dlbench_reports/micro.py), with Hypothesis.

Mutates real results (corpus/: a `dlbench --suite=micro` run's micro.json and allreduce-mpi.json):
values replaced by other JSON types, huge, negative, infinite or NaN numbers (Google Benchmark
writes NaN and Infinity), names cut or given a wrong part, deleted keys, deep nesting, thousands of
distinct convolutions, and whole files cut short or spliced with bytes that are not UTF-8. Each
input goes through the reader (read_micro, or read_allreduce for a file whose name holds
"allreduce"), and what it accepts through the tables (markdown) and every conv plot, whose size
must stay within its bound. The only exception allowed to escape is RecordError (one line, exit 2);
anything else is a defect, and its input is saved under regressions/.

    fuzz_micro.py --replay       every file of corpus/ and regressions/, once
    fuzz_micro.py --seconds 60   fuzz for 60 s; prints the examples run
    (tests/reports/test_fuzz_micro.py runs a fixed, derandomized budget under pytest)
"""
from __future__ import annotations

import argparse
import hashlib
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

from dlbench_reports import micro  # noqa: E402
from dlbench_reports.plots import common  # noqa: E402
from dlbench_reports.records import RecordError  # noqa: E402

MICRO_SEED = json.loads((HERE / "corpus" / "micro.json").read_text())
ALLREDUCE_SEED = json.loads((HERE / "corpus" / "allreduce-mpi.json").read_text())
# The widest a conv plot may be: MAX_CONV_LAYERS_DRAWN layers at 0.32 inch each.
MAX_WIDTH_IN = max(8.0, 0.32 * micro.MAX_CONV_LAYERS_DRAWN)

executed = 0
last_input: tuple[str, bytes] = ("micro.json", b"")


def is_allreduce(name: str) -> bool:
    """An input named *allreduce* is an allreduce-<comm>.json; any other, a micro.json."""
    return "allreduce" in name


def check_plots(rows: list) -> None:
    """Every conv plot the report would draw, not saved: its size is bounded whatever the rows."""
    for backend, precision in sorted({(r.backend, r.precision) for r in rows if r.kind == "conv"}):
        fig = micro.conv_plot(rows, backend, precision)
        width = fig.get_figwidth()
        bars = sum(len(c.patches) for c in fig.axes[0].containers)
        common.plt.close(fig)
        assert width <= MAX_WIDTH_IN, f"conv plot {width} inches wide"
        assert bars <= 3 * micro.MAX_CONV_LAYERS_DRAWN, f"conv plot of {bars} bars"


def check(name: str, data: bytes) -> None:
    """The property: any bytes as micro.json (or as an allreduce-*.json beside the seed's
    micro.json) are read, or refused with RecordError; what is read renders."""
    global executed, last_input
    executed += 1
    last_input = (name, data)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("allreduce-x.json" if is_allreduce(name) else "micro.json")
        path.write_bytes(data)
        try:
            if is_allreduce(name):
                allreduces = [micro.read_allreduce(path)]
                m = micro.Micro(MICRO_SEED["context"], [], [], {})
            else:
                allreduces, m = [], micro.read_micro(path)
        except RecordError:
            return
        micro.markdown(m.rows, m.context, allreduces, m.failed)
        check_plots(m.rows)


json_values = st.recursive(
    st.none() | st.booleans() | st.text(max_size=8)
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                               max_size=3),
    max_leaves=6)


def paths_of(node, prefix=()):
    """Every key path of `node`; of a long list (the benchmarks), its first 4 entries and 4 more
    spread over it."""
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from paths_of(v, prefix + (k,))
    elif isinstance(node, list):
        picks = sorted(set(range(min(4, len(node))))
                       | {i * len(node) // 4 for i in range(4)} - {len(node)})
        for i in picks:
            yield from paths_of(node[i], prefix + (i,))


def many_layers(doc: dict, n: int) -> None:
    """n distinct convolutions, each one pass of the first conv row: the plot must cap them."""
    rows = [b for b in doc.get("benchmarks", []) if isinstance(b, dict)
            and str(b.get("name", "")).startswith("conv/")]
    if not rows:
        return
    parts = rows[0]["name"].split("/")
    for i in range(n):
        doc["benchmarks"].append(dict(rows[0], name="/".join(
            parts[:4] + [f"m.layer{i}"] + parts[5:])))


@st.composite
def name_mutation(draw, name: str) -> str:
    parts = name.split("/")
    at = draw(st.integers(0, len(parts) - 1))
    how = draw(st.sampled_from(["drop", "replace", "extra"]))
    if how == "drop":
        del parts[at]
    elif how == "replace":
        parts[at] = draw(st.sampled_from(["", "CPU", "fp64", "x" * 300, "forward", "copy",
                                          "backward_weights", "conv", "gemm"]))
    else:
        parts.insert(at, draw(st.text(max_size=3)))
    return "/".join(parts)


@st.composite
def mutated_file(draw) -> tuple[str, bytes]:
    allreduce = draw(st.booleans())
    doc = json.loads(json.dumps(ALLREDUCE_SEED if allreduce else MICRO_SEED))
    for _ in range(draw(st.integers(1, 4))):
        paths = [p for p in paths_of(doc) if p]
        where = draw(st.sampled_from(paths))
        parent = doc
        for k in where[:-1]:
            parent = parent[k]
        kind = draw(st.sampled_from(["value", "delete", "empty", "deep", "number", "name",
                                     "layers"]))
        if kind == "delete" and isinstance(parent, dict):
            del parent[where[-1]]
        elif kind == "empty":
            parent[where[-1]] = draw(st.sampled_from([[], {}, ""]))
        elif kind == "deep":
            parent[where[-1]] = json.loads("[" * 60 + "]" * 60)
        elif kind == "number":
            parent[where[-1]] = draw(st.sampled_from(
                [0, -1, 1.5, 2**63, 2**70, float("inf"), float("-inf"), float("nan"), 1e308,
                 "1e308", "nan", "-3"]))
        elif kind == "name" and isinstance(parent, dict) and isinstance(parent.get("name"), str):
            parent["name"] = draw(name_mutation(parent["name"]))
        elif kind == "layers" and not allreduce:
            many_layers(doc, draw(st.sampled_from([micro.MAX_CONV_LAYERS_DRAWN + 1, 400])))
        else:
            parent[where[-1]] = draw(json_values)
    text = json.dumps(doc).encode()  # NaN and Infinity as Google Benchmark writes them
    tail = draw(st.sampled_from(["whole", "whole", "cut", "bytes", "deep"]))
    if tail == "cut":
        text = text[:draw(st.integers(0, len(text)))]
    elif tail == "bytes":
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.binary(min_size=1, max_size=4)) + text[at:]
    elif tail == "deep":
        text = b"[" * 100000 + b"]" * 100000
    return ("allreduce-mutated.json" if allreduce else "micro.json"), text


def run(examples: int, derandomize: bool, seed_value: int = 0) -> None:
    """`examples` mutated inputs through check(); Hypothesis shrinks a failure and raises it."""
    @settings(max_examples=examples, derandomize=derandomize, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(mutated_file())
    def fuzz_one(named: tuple[str, bytes]) -> None:
        check(*named)

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
            check(p.name, p.read_bytes())
        print(f"replay: micro: {len(inputs_on_disk())} inputs, no defect")
        return 0
    start, rounds = time.monotonic(), 0
    try:
        while time.monotonic() - start < a.seconds:
            run(50, False, rounds)
            rounds += 1
    except Exception:
        name, data = last_input
        saved = ("allreduce-" if is_allreduce(name) else "") + "crash-" + \
            hashlib.sha1(data).hexdigest()
        (HERE / "regressions" / saved).write_bytes(data)
        print(f"fuzz: micro: a defect; its input is tests/fuzz/micro/regressions/{saved}",
              file=sys.stderr)
        raise
    elapsed = time.monotonic() - start
    print(f"fuzz: micro: Done {executed} runs in {elapsed:.0f} second(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
