"""Shared fixtures: committed result records (real CPU runs of dlbench), copied to a temporary
directory so that rendering never writes into the repository."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "reports"))
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture
def results(tmp_path):
    """results('scaling') -> a copy of fixtures/scaling in tmp_path."""
    def copy(name: str) -> Path:
        dst = tmp_path / name
        shutil.copytree(FIXTURES / name, dst)
        return dst
    return copy


@pytest.fixture
def dlbench_bin() -> Path:
    path = Path(os.environ.get("DLBENCH_BIN", ROOT / "build" / "dlbench"))
    assert path.exists(), f"{path} is missing: build dlbench first (scripts/build.sh)"
    return path
