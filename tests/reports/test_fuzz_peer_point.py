"""The PyTorch peer's point-file fuzz target (tests/fuzz/peer_point) at a fixed, derandomized
budget, and every regression input through `pytorch_train.py --point=FILE` as the harness runs it:
exit 2, one line on stderr naming the file, no traceback, no record written. The peer needs no
PyTorch to refuse a point, so this runs with the venv's Python."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FUZZ = ROOT / "tests" / "fuzz" / "peer_point"
PEER = ROOT / "reports" / "peers" / "pytorch_train.py"
REFUSED = sorted(p for p in (FUZZ / "regressions").glob("*") if not p.name.startswith("accepted_"))

spec = importlib.util.spec_from_file_location("fuzz_peer_point", FUZZ / "fuzz_peer_point.py")
fuzz_peer_point = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fuzz_peer_point)


def test_mutated_points_are_checked_or_refused_cleanly():
    before = fuzz_peer_point.executed
    fuzz_peer_point.run(150, derandomize=True)
    assert fuzz_peer_point.executed - before >= 150


def test_every_corpus_and_regression_input_replays():
    for path in fuzz_peer_point.inputs_on_disk():
        fuzz_peer_point.check(path.read_bytes())


def test_accepted_inputs_are_accepted_and_the_others_refused():
    for path in sorted((FUZZ / "regressions").glob("*")) + sorted((FUZZ / "corpus").glob("*")):
        accepted = path.parent.name == "corpus" or path.name.startswith("accepted_")
        try:
            fuzz_peer_point.peer.read_point(str(path))
            assert accepted, f"{path.name} was accepted"
        except fuzz_peer_point.peer.PointError:
            assert not accepted, f"{path.name} was refused"


@pytest.mark.parametrize("path", REFUSED, ids=[p.name for p in REFUSED])
def test_a_regression_input_is_one_line_and_exit_2(path):
    p = subprocess.run([sys.executable, str(PEER), f"--point={path}"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and str(path) in p.stderr, p.stderr
    assert "its directory does not exist" not in p.stderr  # refused for what it holds
