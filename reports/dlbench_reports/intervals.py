"""95% confidence intervals for throughput and for the ratios reports print (docs/metrics.md).

Throughput stays images over the timed wall time. Its interval comes from a bootstrap over the
timed steps: each replicate resamples the steps with replacement and scales the recorded
throughput by the steps' mean over the resample's (a ratio estimator, so the point estimate is
the recorded one). A ratio of two throughputs takes the ratio of independent replicates of each
(the two points ran apart), so its interval carries both sides' noise; a ratio whose interval
holds 1 is shown as not distinguishable. Fewer than MIN_STEPS timed steps (MIN_REPETITIONS
repetitions) give no interval: a percentile bootstrap of a handful of values covers far less than
95% (of three, it is their range). Replicates are seeded, so a report is the
same every time it is rendered."""
from __future__ import annotations

import math
import zlib

import numpy as np

from .records import Record, baseline_record, efficiency

REPLICATES = 2000
MIN_STEPS = 10
MIN_REPETITIONS = 5
# Above this many steps, the bootstrap resamples block means (consecutive steps averaged into
# at most BLOCKS blocks): the memory stays bounded however long --min-time ran, and neighbouring
# steps' correlation stays inside a block.
BLOCKS = 1000
LEVEL = 95.0


def replicates(record: Record) -> np.ndarray | None:
    """REPLICATES bootstrap replicates of the record's throughput, or None (too few steps).
    With 5 or more repetitions, over the repetitions' throughputs (the spread between timed
    phases, which steps of one phase do not show); otherwise over the timed steps. Values near
    the largest double overflow in the sums: those replicates are inf or NaN, silently (the
    interval is then unknown, interval_text), never a numpy warning on stderr."""
    t = record.get("metrics.throughput_img_s")
    seed = zlib.crc32(str(record.get("point.id", "")).encode() + record.system.encode())
    rng = np.random.default_rng(seed)
    reps = record.get("metrics.repetitions.throughput_img_s")
    with np.errstate(all="ignore"):
        if t is not None and isinstance(reps, list) and len(reps) >= MIN_REPETITIONS:
            x = np.asarray(reps, dtype=float)
            return t * x[rng.integers(0, len(x), size=(REPLICATES, len(x)))].mean(axis=1) / x.mean()
        steps = record.get("metrics.step_time_s.all")
        if t is None or not isinstance(steps, list) or len(steps) < MIN_STEPS:
            return None
        return t * _step_ratio(np.asarray(steps, dtype=float), rng)


def _step_ratio(s: np.ndarray, rng) -> np.ndarray:
    """The steps' mean over each resample's mean (REPLICATES of them)."""
    if len(s) > BLOCKS:  # equal blocks of consecutive steps; the remainder joins the last
        size = len(s) // BLOCKS
        s = np.append(s[:size * (BLOCKS - 1)].reshape(BLOCKS - 1, size).mean(axis=1),
                      s[size * (BLOCKS - 1):].mean())
    means = s[rng.integers(0, len(s), size=(REPLICATES, len(s)))].mean(axis=1)
    return s.mean() / means


def interval(samples: np.ndarray | None) -> tuple[float, float] | None:
    """The central LEVEL% of the replicates; its ends may be NaN or inf (finite() tells). None
    where the replicates do not spread (every step the same: a simulation without jitter): an
    interval of zero width would claim a certainty no measurement has."""
    if samples is None:
        return None
    with np.errstate(all="ignore"):
        lo, hi = np.percentile(samples, [(100 - LEVEL) / 2, 100 - (100 - LEVEL) / 2])
    if abs(hi - lo) <= 1e-9 * max(abs(lo), abs(hi)):  # equal but for rounding in the means
        return None
    return float(lo), float(hi)


def finite(iv: tuple[float, float] | None) -> bool:
    """Whether an interval is known: both ends finite."""
    return iv is not None and math.isfinite(iv[0]) and math.isfinite(iv[1])


def throughput_interval(record: Record) -> tuple[float, float] | None:
    return interval(replicates(record))


def ratio_interval(a: Record, b: Record, scale: float = 1.0) -> tuple[float, float] | None:
    """The interval of scale x throughput(a) / throughput(b)."""
    ra, rb = replicates(a), replicates(b)
    if ra is None or rb is None:
        return None
    with np.errstate(all="ignore"):
        return interval(scale * ra / rb)


def efficiency_interval(r: Record, records: list[Record]) -> tuple[float, float] | None:
    """The 95% interval of the scaling efficiency, in %: throughput(N) / (N x throughput(1))."""
    base = baseline_record(r, records)
    if base is None or base is r or efficiency(r) is None:
        return None
    return ratio_interval(r, base, 100.0 / r.config["ranks"])


def interval_text(iv: tuple[float, float], spec: str = ".2f") -> str:
    """'[1.20, 1.45]'; '[n/a]' for an interval whose ends are not finite (replicates that
    overflowed), never '[nan, nan]'."""
    return f"[{iv[0]:{spec}}, {iv[1]:{spec}}]" if finite(iv) else "[n/a]"


def ratio_text(value: float | None, iv: tuple[float, float] | None, spec: str = ".2f",
               unit: str = "x", one: float = 1.0) -> str:
    """'1.32x [1.20, 1.45]'; 'not distinguishable' after it when the interval holds `one`; the
    bare ratio where there is no interval; 'n/a' for a value that is not finite."""
    if value is None:
        return ""
    text = f"{value:{spec}}{unit}" if math.isfinite(value) else "n/a"
    if iv is None:
        return text
    text += " " + interval_text(iv, spec)
    if finite(iv) and iv[0] <= one <= iv[1]:
        text += " not distinguishable"
    return text
