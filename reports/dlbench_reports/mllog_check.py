"""The MLCommons compliance checker (mlperf-logging) on a dlbench :::MLLOG log.

dlbench logs every key the training ruleset's common rules ask for, and runs the checker's own
rules unchanged, with one exception, stated here and nowhere hidden:

- `submission_benchmark` must name an MLPerf benchmark, and its value selects the benchmark's
  rule file (closed_/open_<benchmark>.yaml: reference hyperparameters and the quality target).
  dlbench's benchmarks (the digits CNN, resnet18 on digits) are not MLPerf benchmarks, so that
  value list and the per-benchmark file do not apply. The check keeps the key required
  (EXACTLY_ONE) and non-empty.

Everything else (submission_*, cache_clear, init/run start and stop with status, epoch and eval
events with epoch_num, eval_accuracy, train/eval samples, precision and parallelism disclosure,
gradient_accumulation_steps, config_filename, timing of init) is the checker's own rule.
The package, submission-directory, RCP and result-summarizer checkers need a submission's
directory layout and reference convergence points and are not run.
"""
from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path

import yaml

from .records import RecordError, unreadable

RULESET = "6.1.0"
USAGE = "training"
NOT_APPLIED = {"submission_benchmark": "the value list of MLPerf benchmarks and the "
                                       "per-benchmark rule file it selects"}


def _derived_configs(workdir: Path) -> Path:
    from mlperf_logging import compliance_checker
    pkg = Path(compliance_checker.__file__).parent / f"{USAGE}_{RULESET}"
    common = yaml.safe_load((pkg / "common.yaml").read_text())
    open_common = yaml.safe_load((pkg / "open_common.yaml").read_text())
    open_path = workdir / "open_common.yaml"
    for rule in common:
        key = rule.get("KEY", {})
        if key.get("NAME") == "submission_division":
            # Same checks; the division's rules are our derived open_common below.
            key["CHECK"] = " v['value'] == 'open' "
            key["POST"] = (f" enqueue_config('{open_path}'); "
                           "s['compile_time_mins'] = 240 ")
    for rule in open_common:
        key = rule.get("KEY", {})
        if key.get("NAME") == "submission_benchmark":
            key["CHECK"] = " v['value'] != '' "
            key.pop("POST", None)
    open_path.write_text(yaml.safe_dump(open_common, sort_keys=False))
    common_path = workdir / "common.yaml"
    common_path.write_text(yaml.safe_dump(common, sort_keys=False))
    return common_path


def check(path: str | Path) -> tuple[bool, list[str]]:
    """Runs the checker; returns (valid, its messages)."""
    from mlperf_logging.compliance_checker import mlp_compliance

    path = Path(path)
    if not path.exists():
        return False, [f"{path}: no such file"]
    why = unreadable(path)
    if why is not None:  # the checker would read /dev/zero whole, or wait on a FIFO
        raise RecordError(f"{path}: cannot read the MLPerf log: {why}")
    workdir = Path(tempfile.mkdtemp(prefix="dlbench-mllog-"))
    messages: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record):
            messages.append(record.getMessage())

    handler = Collect(level=logging.WARNING)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        config = _derived_configs(workdir)
        checker = mlp_compliance.make_checker(USAGE, RULESET, quiet=False, werror=True)
        valid = checker.check_file(str(path), str(config))
    finally:
        root.removeHandler(handler)
        shutil.rmtree(workdir, ignore_errors=True)
    return bool(valid), messages


def main(path: str) -> int:
    valid, messages = check(path)
    for m in messages:
        print(m)
    print(f"{path}: {'compliant' if valid else 'NOT compliant'} with the MLPerf {USAGE} "
          f"{RULESET} rules, except: " + "; ".join(f"{k} ({v})" for k, v in NOT_APPLIED.items()))
    return 0 if valid else 1
