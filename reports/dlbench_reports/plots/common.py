"""What every plot shares: the device/model/precision title, units and file output."""
from __future__ import annotations

import math
import numbers
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..outputs import check_directory, write_atomically  # noqa: E402
from ..records import Record  # noqa: E402

MIB = 1024.0 * 1024.0
# The memory categories that are the host's, not the device's (runtime/memory/allocator.h): no
# device peak counts them.
HOST_CATEGORIES = ("host_swap", "host_comm")
STRATEGIES = ["none", "backward", "forward"]


def strategy_order(strategy: str) -> tuple:
    """Sort key: none, backward, forward, then anything else by name."""
    return (STRATEGIES.index(strategy) if strategy in STRATEGIES else len(STRATEGIES), strategy)


def device_name(record: Record) -> str:
    env = record.data.get("environment") or {}  # its values are untyped in the schema
    device = env.get("device", "?")
    if device == "cpu":
        threads = env.get("cpu_threads")
        cpu = env.get("cpu", "CPU")
        return f"{cpu}" + (f" ({threads} hardware threads)" if threads else "")
    return str(device)


def describe(records: list[Record], keys=("model", "precision")) -> str:
    """'resnet18, fp32 on <device>': each key's value, or all its values when they differ, over
    the points that ran (all points when none did)."""
    records = [r for r in records if r.ok] or records
    parts = []
    for k in keys:
        values = sorted({str(r.config.get(k)) for r in records})
        parts.append("/".join(values))
    devices = sorted({device_name(r) for r in records})
    return ", ".join(parts) + " on " + " / ".join(devices)


def figure(width=8.0, height=5.0):
    fig, ax = plt.subplots(figsize=(width, height), dpi=110)
    return fig, ax


# The largest magnitude a plot places on an axis. Matplotlib fails beyond about 1e308 on a
# linear axis (its margins and tick range overflow: "Axis limits cannot be NaN or Inf", an
# arange of infinite length) and beyond about 1e250 on a log axis (its tick locator overflows
# in a power, with a RuntimeWarning); 1e200 leaves room for a stack of bars, a margin, or an
# ideal line of ranks times a throughput (tests/reports/test_hostile_reports.py tries both).
MAX_DRAWN = 1e200
# How many values left out, and how much of a note, a figure names: a record of 100,000 points
# or reasons must not make a figure of 100,000 lines (or minutes of drawing).
MAX_NAMED = 5
MAX_NOTE_CHARS = 1500


def drawable(value, log: bool = False) -> bool:
    """Whether a plot can place `value` on an axis: a real number (not a bool, not None), finite
    and of magnitude at most MAX_DRAWN; on a log axis also above 0. The one rule every plot
    applies (through Undrawn) to what a record gives it, so that any value the schema allows is
    drawn or named, never a failure inside matplotlib."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        return False
    try:
        v = float(value)
    except OverflowError:  # an integer beyond any double (JSON integers are unbounded)
        return False
    return math.isfinite(v) and abs(v) <= MAX_DRAWN and (v > 0 or not log)


def value_text(value) -> str:
    """A value as a note names it: '1.7e+308', 'inf', 'nan'; 'null' for None."""
    if value is None:
        return "null"
    try:
        return f"{float(value):.3g}"
    except (TypeError, ValueError, OverflowError):
        return shorten(str(value), 40)


def number_text(value, spec: str = ".2f") -> str:
    """`value` in `spec` ('12.3'), in three significant digits from 1e12 up ('1.7e+308': a fixed
    format would print 309 digits), 'n/a' where it is not finite."""
    v = float(value)
    if not math.isfinite(v):
        return "n/a"
    return f"{v:.3g}" if abs(v) >= 1e12 else f"{v:{spec}}"


def tick_text(value: float) -> str:
    """A drawn number as an axis names it: '4' for a whole number (ranks, batches), '1.5'."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def shorten(text: str, limit: int) -> str:
    """`text`, or its first `limit` characters and how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def bounded_list(items: list[str], limit: int = MAX_NAMED) -> str:
    """'a, b, c' for at most `limit` items, then 'and K more'."""
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


class Undrawn:
    """The values one figure leaves out because drawable() says no, each named for the figure's
    footnote ("point 3 throughput 1.7e+308"). keep() returns the value, or NaN (which matplotlib
    skips: a line breaks there, a bar has no height) in its place."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def keep(self, value, what: str, log: bool = False) -> float:
        if drawable(value, log):
            return float(value)
        self.names.append(f"{what} {value_text(value)}")
        return math.nan

    def of(self, record: Record, value, what: str, log: bool = False) -> float:
        """keep(), naming the record's point."""
        return self.keep(value, f"point {record.data['point']['index']} {what}", log)

    def note(self) -> str:
        if not self.names:
            return ""
        return (f"Not drawn (beyond what a plot can place: finite, at most {MAX_DRAWN:.0e} in "
                f"magnitude, above 0 on a log axis): {bounded_list(self.names)}")


def set_top(ax, top: float) -> None:
    """The y axis from 0 to `top`, where `top` is drawable (values near the largest double sum
    to inf); matplotlib's own limits otherwise."""
    if drawable(top) and top > 0:
        ax.set_ylim(0, top)


def footnote(fig, text: str, undrawn: Undrawn | None = None) -> None:
    """A note under everything the axes hold (failed points, missing peaks, values not drawn):
    below the lowest of their tick labels, x labels and legends, a legend placed under an axes
    included, so that nothing overlaps it (save's tight bounding box takes it in). At most
    MAX_NOTE_CHARS of it (a sweep of thousands of failed points, say), the rest in report.md."""
    text = ". ".join(t for t in (text, undrawn.note() if undrawn else "") if t)
    if not text:
        return
    if len(text) > MAX_NOTE_CHARS:
        text = (text[:MAX_NOTE_CHARS] +
                f"... ({len(text) - MAX_NOTE_CHARS} more characters: see report.md)")
    lines = textwrap.wrap(text, width=int(fig.get_figwidth() * 16))
    fig.canvas.draw()  # where what sits under the axes ends
    renderer = fig.canvas.get_renderer()
    boxes = [ax.get_tightbbox(renderer) for ax in fig.axes if ax.get_visible()]
    boxes += [legend.get_window_extent(renderer) for legend in fig.legends]
    lowest = min((b.y0 for b in boxes if b is not None), default=0.0)
    y = lowest / fig.bbox.height - 0.02
    fig.text(0.01, y, "\n".join(lines), fontsize=7, color="#555555", ha="left", va="top",
             gid="footnote")


def save(fig, out_dir: str | Path, name: str) -> list[Path]:
    """Writes NAME.png and NAME.svg, each whole or not at all (outputs.write_atomically: never
    over a directory, device or FIFO put in its place)."""
    out_dir = Path(out_dir)
    check_directory(out_dir, "plots")
    written = []
    for ext in ("png", "svg"):
        final = out_dir / f"{name}.{ext}"
        write_atomically(final, lambda f, ext=ext: fig.savefig(f, format=ext, bbox_inches="tight"),
                         "plot", binary=True)
        written.append(final)
    plt.close(fig)
    return written


# How many of a noisy point's reasons a figure or a table cell names, and how much of each: the
# schema bounds neither (a record with 150,000 reasons took 72 s to report, each plot drawing
# them all).
MAX_REASON_CHARS = 200


def noisy(record: Record) -> str | None:
    """The reasons a point was measured on a noisy machine (the record's noise verdict), at most
    MAX_NAMED of them and then how many more; None for a stable point or a record without a
    verdict."""
    n = record.get("noise")
    if not isinstance(n, dict) or n.get("verdict") != "noisy":
        return None
    reasons = n.get("reasons")
    reasons = reasons if isinstance(reasons, list) else []
    shown = [shorten(str(x), MAX_REASON_CHARS) for x in reasons[:MAX_NAMED]]
    if not shown:
        return "noisy"
    more = len(reasons) - len(shown)
    return "; ".join(shown) + (f"; and {more} more" if more else "")


def status_note(records: list[Record]) -> str:
    """'not plotted: ranks=4 overlap=none (timeout)' for the points that did not end ok, and
    'noisy: ...' with the reasons for the ok points measured on a noisy machine."""
    from ..records import label, varying_keys
    keys = varying_keys(records)
    bad = [r for r in records if not r.ok]
    loud = [r for r in records if r.ok and noisy(r)]
    notes = []
    if bad:
        notes.append("not plotted: " +
                     "; ".join(f"{label(r, keys)} ({r.data['status']})" for r in bad))
    if loud:
        notes.append("noisy (measured while the machine was busy; read with care): " +
                     "; ".join(f"{label(r, keys)} ({noisy(r)})" for r in loud))
    return ". ".join(notes)
