"""Model FLOPs utilisation: achieved FLOP/s over the device's dense peak for the precision, from
reports/device_peaks.json (each row with its source). A device with no row has no MFU."""
from __future__ import annotations

import json
import re
from pathlib import Path

from .records import Record

PEAKS_FILE = Path(__file__).resolve().parents[1] / "device_peaks.json"


def load_peaks(path: Path = PEAKS_FILE) -> list[dict]:
    return json.loads(Path(path).read_text())["devices"]


def peak_for(record: Record, peaks: list[dict]) -> tuple[float, dict] | None:
    device = (record.data.get("environment") or {}).get("device", "")
    precision = record.config.get("precision", "fp32")
    for row in peaks:
        if re.search(row["match"], device) and precision in row["peak_flops"]:
            return float(row["peak_flops"][precision]), row
    return None


def mfu(record: Record, peaks: list[dict]) -> float | None:
    found = peak_for(record, peaks)
    achieved = record.get("metrics.achieved_flops_per_s")
    if not found or achieved is None:
        return None
    # Achieved FLOP/s in a record is per rank (one device).
    return achieved / found[0]
