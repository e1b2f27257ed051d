#!/usr/bin/env python3
"""Fuzz target of the PyTorch peer's point-file reader (read_point in
reports/peers/pytorch_train.py), with Hypothesis. Validates only: nothing is trained, and PyTorch is not imported.

Mutates real point files (corpus/: one the harness wrote for a `--systems=dlbench,pytorch` sweep,
the parity test's, one written by hand): config values replaced by other JSON types, huge,
negative, fractional, infinite or NaN numbers, names of other case, deleted or unknown keys, deep
nesting, and whole files cut short or spliced with bytes that are not UTF-8. Each input goes
through read_point. It must be refused with PointError (one line naming the file and the key,
exit 2), or accepted with a config that makes a record valid against
suites/schema/result.schema.json, written as strict JSON. Anything else is a defect, and its input
is saved under regressions/.

    fuzz_peer_point.py --replay       every file of corpus/ and regressions/, once
    fuzz_peer_point.py --seconds 60   fuzz for 60 s; prints the examples run
    (tests/reports/test_fuzz_peer_point.py runs a fixed, derandomized budget under pytest)
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

import jsonschema
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]

_spec = importlib.util.spec_from_file_location("pytorch_train",
                                               ROOT / "reports" / "peers" / "pytorch_train.py")
peer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(peer)

RESULT_SCHEMA = json.loads((ROOT / "suites" / "schema" / "result.schema.json").read_text())
RECORD = jsonschema.Draft202012Validator(RESULT_SCHEMA)
SEEDS = [json.loads(p.read_text()) for p in sorted((HERE / "corpus").glob("*.json"))]

executed = 0
last_input = b""


def check(data: bytes) -> None:
    """The property: any bytes as a point file are refused with PointError, or accepted with a
    config whose record (as the peer writes it when it cannot train it) is a valid record in
    strict JSON."""
    global executed, last_input
    executed += 1
    last_input = data
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "point.json"
        path.write_bytes(data)
        try:
            c, out = peer.read_point(str(path))
        except peer.PointError as e:
            assert "\n" not in str(e) and str(e).startswith(str(path)), str(e)
            return
    assert isinstance(out, str) and out
    c["system"] = "pytorch"
    rec = json.loads(peer.record_text(peer.record(c, "unsupported", message="fuzz")))
    rec["point"] = {"index": 1, "id": "fuzz"}  # what the harness adds
    errors = list(RECORD.iter_errors(rec))
    assert not errors, f"an accepted point makes an invalid record: {errors[0].message}"


json_values = st.recursive(
    st.none() | st.booleans() | st.text(max_size=8)
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                               max_size=3),
    max_leaves=6)

NUMBERS = [0, -1, 1, 0.5, 1.0, 2.0, 1e-300, 2**63 - 1, 2**63, 2**64 - 1, 2**64, 2**70, 1e308,
           float("inf"), float("-inf"), float("nan"), True, "2", "CPU", "cuda", "FP16", ""]


@st.composite
def mutated_point(draw) -> bytes:
    point = json.loads(json.dumps(draw(st.sampled_from(SEEDS))))
    resolved = point.get("resolved", {})
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["value", "number", "delete", "unknown", "null", "top",
                                     "deep"]))
        keys = sorted(resolved) or ["model"]
        key = draw(st.sampled_from(keys))
        if kind == "value":
            resolved[key] = draw(json_values)
        elif kind == "number":
            resolved[key] = draw(st.sampled_from(NUMBERS))
        elif kind == "delete":
            resolved.pop(key, None)
        elif kind == "unknown":
            resolved[draw(st.sampled_from(["Batch", "init", "batch_file", "foo", ""]))] = \
                draw(json_values)
        elif kind == "null":
            resolved[key] = None
        elif kind == "deep":
            resolved[key] = json.loads("[" * 60 + "]" * 60)
        else:
            point[draw(st.sampled_from(["record", "resolved"]))] = draw(json_values)
    text = json.dumps(point).encode()  # NaN and Infinity as Python writes them
    tail = draw(st.sampled_from(["whole", "whole", "cut", "bytes", "deep"]))
    if tail == "cut":
        text = text[:draw(st.integers(0, len(text)))]
    elif tail == "bytes":
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.binary(min_size=1, max_size=4)) + text[at:]
    elif tail == "deep":
        text = b"[" * 100000 + b"]" * 100000
    return text


def run(examples: int, derandomize: bool, seed_value: int = 0) -> None:
    """`examples` mutated inputs through check(); Hypothesis shrinks a failure and raises it."""
    @settings(max_examples=examples, derandomize=derandomize, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(mutated_point())
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
        print(f"replay: peer_point: {len(inputs_on_disk())} inputs, no defect")
        return 0
    start, rounds = time.monotonic(), 0
    try:
        while time.monotonic() - start < a.seconds:
            run(200, False, rounds)
            rounds += 1
    except Exception:
        name = "crash-" + hashlib.sha1(last_input).hexdigest()
        (HERE / "regressions" / name).write_bytes(last_input)
        print(f"fuzz: peer_point: a defect; its input is tests/fuzz/peer_point/regressions/{name}",
              file=sys.stderr)
        raise
    elapsed = time.monotonic() - start
    print(f"fuzz: peer_point: Done {executed} runs in {elapsed:.0f} second(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
