"""Model FLOPs utilisation: achieved FLOP/s over the device's dense peak for the precision, from
reports/device_peaks.json (each row with its source); for a device with no row (a CPU's model
name names no datasheet), over the machine's measured peak the record carries
(metrics.fraction_of_peak_flops: dlbench bench peak, or the sweep's first CPU point). With
neither, no MFU."""
from __future__ import annotations

import json
import re
from pathlib import Path

from .plots import common
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


def mfu_and_basis(record: Record, peaks: list[dict]) -> tuple[float, str] | None:
    """(MFU, "datasheet" or "measured"), or None where the record has no peak to divide by."""
    found = peak_for(record, peaks)
    achieved = record.get("metrics.achieved_flops_per_s")
    if found and achieved is not None:
        # Achieved FLOP/s in a record is per rank (one device).
        return achieved / found[0], "datasheet"
    measured = record.get("metrics.fraction_of_peak_flops")
    if measured is not None:
        return float(measured), "measured"
    return None


def mfu(record: Record, peaks: list[dict]) -> float | None:
    found = mfu_and_basis(record, peaks)
    return found[0] if found else None


def mfu_text(record: Record, peaks: list[dict]) -> str:
    """'41.2%' over a datasheet peak, '12.3% (m)' over the measured one, 'n/a' with neither. A
    run faster than the measured peak says that the peak is too low (the matrix product it was
    measured with is slower than the run's own kernels): '(m, peak too low)'."""
    found = mfu_and_basis(record, peaks)
    if found is None:
        return "n/a"
    percent = common.number_text(100 * found[0], ".1f")  # n/a where it is not finite
    if found[1] == "measured":
        return f"{percent}% " + ("(m, peak too low)" if found[0] > 1 else "(m)")
    return f"{percent}%"
