"""The PyTorch peer's point file (reports/peers/pytorch_train.py), checked as dlbench checks a
point: types, values and ranges from suites/schema/suite.schema.json's config, 64-bit integers,
strict JSON; a refusal is one line naming the file and the key, exit 2, and no record. Records are
strict JSON: a metric that is not finite makes the point failed. None of this needs PyTorch."""
from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys

import jsonschema
import pytest

from conftest import ROOT

PEER = ROOT / "reports" / "peers" / "pytorch_train.py"
HARNESS_POINT = ROOT / "tests" / "fuzz" / "peer_point" / "corpus" / "harness_point.json"
_spec = importlib.util.spec_from_file_location("pytorch_train", PEER)
peer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(peer)


def point_file(tmp_path, **changes):
    p = json.loads(HARNESS_POINT.read_text())
    p["resolved"].update(changes)
    p["record"] = str(tmp_path / "record.json")
    path = tmp_path / "point.json"
    path.write_text(json.dumps(p))
    return path


def run_peer(path):
    return subprocess.run([sys.executable, str(PEER), f"--point={path}"], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("changes, message", [
    ({"batch": "2"}, r"resolved\.batch: '2' is not of type 'integer'"),
    ({"batch": 0}, r"resolved\.batch: 0 is less than the minimum of 1"),
    ({"backend": "CPU"}, r"resolved\.backend: 'CPU' is not one of \['cpu', 'cuda'\]"),
    ({"bucket_mb": -1}, r"resolved\.bucket_mb: -1 is less than or equal to the minimum of 0"),
    ({"steps": 3.0}, r"resolved\.steps: expected an integer, got 3\.0"),
    ({"seed": 2**64}, r"resolved\.seed: 18446744073709551616 is too large"),
    ({"momentum": True}, r"resolved\.momentum: True is not of type 'number'"),
    ({"batchsize": 2}, r"resolved: Additional properties are not allowed"),
], ids=["batch a string", "batch 0", "backend CPU", "bucket_mb -1", "steps 3.0", "seed 2^64",
        "momentum true", "unknown key"])
def test_a_bad_point_is_one_line_naming_the_file_and_key_and_no_record(tmp_path, changes,
                                                                      message):
    path = point_file(tmp_path, **changes)
    with pytest.raises(peer.PointError, match=rf"^{path}: {message}"):
        peer.read_point(str(path))
    p = run_peer(path)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and str(path) in p.stderr, p.stderr
    assert not (tmp_path / "record.json").exists()


def test_what_is_not_json_or_not_a_file_is_refused(tmp_path):
    path = point_file(tmp_path)
    path.write_text(path.read_text().replace('"lr": 0.01', '"lr": Infinity'))
    with pytest.raises(peer.PointError, match="not valid JSON: Infinity is not JSON"):
        peer.read_point(str(path))
    path.write_text(path.read_text().replace('"lr": Infinity', '"lr": 1e999'))
    with pytest.raises(peer.PointError, match="1e999 is too large"):
        peer.read_point(str(path))
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(peer.PointError, match="not a regular file"):
        peer.read_point(str(fifo))
    with pytest.raises(peer.PointError, match="not a regular file"):
        peer.read_point("/dev/zero")


def test_the_harness_point_is_accepted_with_nulls_as_not_set(tmp_path):
    c, out = peer.read_point(str(point_file(tmp_path, backend=None)))
    assert out == str(tmp_path / "record.json")
    assert c["backend"] == "cpu" and c["batch"] == 2 and "comm" not in c


def test_the_parity_point_with_a_batch_file_is_accepted(tmp_path):
    path = point_file(tmp_path, data="batch-file", batch_file="b.safetensors",
                      init="i.safetensors")
    c, _ = peer.read_point(str(path))
    assert c["batch_file"] == "b.safetensors"
    with pytest.raises(peer.PointError, match=r"resolved\.data: 'batch-file' is not one of"):
        peer.read_point(str(point_file(tmp_path, data="batch-file")))


def test_a_record_with_a_non_finite_metric_is_failed_strict_json(tmp_path):
    c, _ = peer.read_point(str(point_file(tmp_path)))
    c["system"] = "pytorch"
    rec = peer.record(c, "ok", metrics={"throughput_img_s": math.inf, "timed_seconds": 0.0,
                                        "losses": [1.0]})
    text = peer.record_text(rec)
    assert "Infinity" not in text and "NaN" not in text
    out = json.loads(text)
    assert out["status"] == "failed" and "metrics.throughput_img_s" in out["message"]
    assert "metrics" not in out
    out["point"] = {"index": 1, "id": "x"}
    schema = json.loads((ROOT / "suites" / "schema" / "result.schema.json").read_text())
    jsonschema.validate(out, schema)
    peer.write_record(str(tmp_path / "r.json"), rec)
    assert json.loads((tmp_path / "r.json").read_text())["status"] == "failed"


def test_a_record_directory_that_does_not_exist_is_refused_before_training(tmp_path):
    p = json.loads(HARNESS_POINT.read_text())
    p["record"] = str(tmp_path / "no" / "such" / "record.json")
    (tmp_path / "point.json").write_text(json.dumps(p))
    r = run_peer(tmp_path / "point.json")
    assert r.returncode == 2 and "its directory does not exist" in r.stderr


def test_a_record_path_that_is_a_fifo_is_refused_before_training_and_left_alone(tmp_path):
    """The record was written through PATH.tmp and renamed over whatever PATH was."""
    import os
    import stat
    p = json.loads(HARNESS_POINT.read_text())
    fifo = tmp_path / "record.fifo"
    os.mkfifo(fifo)
    p["record"] = str(fifo)
    (tmp_path / "point.json").write_text(json.dumps(p))
    r = run_peer(tmp_path / "point.json")
    assert r.returncode == 2 and "it exists and is not a regular file" in r.stderr, r.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["point.json", "record.fifo"]


def test_the_timed_phase_rules_are_dlbenchs():
    """The cases of tests/unit/timed_phase_test.cpp: the peer times the same kind of steps."""
    assert [peer.extra_steps(20, 1.0, t) for t in (0.0, 1.0, 3.0, 2.01)] == [0, 0, 40, 21]
    assert peer.extra_steps(20, 0.0, 3.0) == 0
    assert peer.extra_steps(1, 1e-9, 1e9) == 2**31 - 2
    assert peer.unsettled_steps([0.30, 0.20, 0.104, 0.25, 0.10, 0.11, 0.10, 0.11]) == 2
    assert peer.unsettled_steps([0.10, 0.11, 0.10, 0.11, 0.10, 0.11]) == 0
    assert peer.unsettled_steps([0.9] * 4 + [0.1] * 4) == 4
    assert peer.unsettled_steps([0.9, 0.1, 0.1]) == 0
    assert peer.unsettled_steps([0.1001] + [0.1] * 5) == 0
    assert peer.unsettled_steps([0.106] + [0.1] * 5) == 1
    j = peer.repetition_json([90.0, 100.0, 110.0])
    assert (j["count"], j["median"], j["mean"]) == (3, 100.0, 100.0)
    assert j["stddev"] == pytest.approx(10.0, rel=1e-15)
    assert j["cv"] == pytest.approx(0.1, rel=1e-15)
