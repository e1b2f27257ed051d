"""The MLCommons compliance checker on a real convergence log written by dlbench."""
from __future__ import annotations

import json
import subprocess

from dlbench_reports.mllog_check import check


def train_with_log(dlbench_bin, tmp_path):
    log = tmp_path / "run.mllog"
    record = tmp_path / "record.json"
    p = subprocess.run([str(dlbench_bin), "run", "--model=digits-cnn", "--data=digits",
                        "--epochs=10", "--batch=32", "--lr=0.05", "--target-accuracy=0.9",
                        f"--mllog={log}", f"--json={record}"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return log, json.loads(record.read_text())


def test_a_real_convergence_log_is_compliant(dlbench_bin, tmp_path):
    log, record = train_with_log(dlbench_bin, tmp_path)
    valid, messages = check(log)
    assert valid, messages
    conv = record["metrics"]["convergence"]
    assert conv["reached"] and conv["eval_accuracy"][-1] >= 0.9
    events = [json.loads(l[len(":::MLLOG "):]) for l in log.read_text().splitlines()]
    keys = [e["key"] for e in events]
    assert keys.count("eval_accuracy") == conv["epochs"]
    stop = events[keys.index("run_stop")]
    start = events[keys.index("run_start")]
    assert stop["metadata"]["status"] == "success"
    # time_to_accuracy_s is measured from run_start to the last eval; the log agrees to 50 ms.
    assert abs((stop["time_ms"] - start["time_ms"]) / 1e3 - conv["time_to_accuracy_s"]) < 0.05
    assert events[keys.index("global_batch_size")]["value"] == 32
    assert events[keys.index("submission_benchmark")]["value"] == "digits-cnn"


def test_the_checker_rejects_a_log_that_breaks_its_rules(dlbench_bin, tmp_path):
    log, _ = train_with_log(dlbench_bin, tmp_path)
    lines = log.read_text().splitlines()
    broken = tmp_path / "broken.mllog"
    broken.write_text("\n".join(l for l in lines if '"key":"run_stop"' not in l) + "\n")
    valid, messages = check(broken)
    assert not valid
    assert any("run_stop" in m for m in messages)
    no_epoch = tmp_path / "no_epoch.mllog"
    no_epoch.write_text("\n".join(l.replace('"metadata":{"epoch_num":1}', '"metadata":{}')
                                  for l in lines) + "\n")
    valid, messages = check(no_epoch)
    assert not valid
