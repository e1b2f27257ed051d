"""The micro report's fuzz target (tests/fuzz/micro) at a fixed, derandomized budget, and every
regression input through `python -m dlbench_reports micro DIR` as a user runs it: exit 2, one line
on stderr, no traceback; those named accepted_* render (exit 0)."""
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FUZZ = ROOT / "tests" / "fuzz" / "micro"
REGRESSIONS = sorted((FUZZ / "regressions").glob("*"))

spec = importlib.util.spec_from_file_location("fuzz_micro", FUZZ / "fuzz_micro.py")
fuzz_micro = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fuzz_micro)


def test_mutated_micro_results_are_read_or_refused_cleanly():
    before = fuzz_micro.executed
    fuzz_micro.run(60, derandomize=True)
    assert fuzz_micro.executed - before >= 60


def test_every_corpus_and_regression_input_replays():
    for path in fuzz_micro.inputs_on_disk():
        fuzz_micro.check(path.name, path.read_bytes())


def test_there_is_a_regression_input_per_defect():
    assert len(REGRESSIONS) >= 15


@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.name for p in REGRESSIONS])
def test_a_regression_input_is_one_line_and_exit_2(tmp_path, path):
    shutil.copy(FUZZ / "corpus" / "micro.json", tmp_path / "micro.json")
    name = "allreduce-x.json" if fuzz_micro.is_allreduce(path.name) else "micro.json"
    shutil.copy(path, tmp_path / name)
    p = subprocess.run([sys.executable, "-m", "dlbench_reports", "micro", str(tmp_path)],
                       cwd=ROOT / "reports", capture_output=True, text=True, timeout=120)
    assert "Traceback" not in p.stderr
    if path.name.startswith("accepted_"):
        assert p.returncode == 0, p.stderr
        assert (tmp_path / "micro.md").exists()
    else:
        assert p.returncode == 2, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert str(tmp_path / name) in p.stderr
        assert not (tmp_path / "micro.md").exists()  # refused before anything was written
