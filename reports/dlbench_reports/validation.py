"""What `dlbench validate-sim` concluded, at the top of its sweep's report. validate-sim writes
validation.json beside the sweep's folder (DIR/validation.json for the points in DIR/runs) before
the report is drawn; this reads it as a paragraph, a table of each simulated point's error
against its bound, and the reasons of an inconclusive verdict (docs/simulation.md, "In brief").

    The simulator against these measured points (dlbench validate-sim): inconclusive: the host
    was busy or changed speed (under a run alone or a fixed memory stream), or the runs varied
    too much, so the errors cannot be judged (11 reasons, below). Simulated steps from -5.4% to
    +9.6% of the measured ones, against bounds of 49.4% to 66.7%.

A file that is not a validation (unreadable, or not of this shape) is named in one line in its
place, and the rest of the report is drawn as usual."""
from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from pathlib import Path

from . import headline
from .records import RecordError, ResultSet, read_json_file

Piece = headline.Piece

SUITE = "validate-sim"  # the suite validate-sim writes (suites/harness/validate_sim)

VERDICTS = {
    "within": "every simulated step is within its bound of the measured one",
    "outside": "a simulated step is outside its bound of the measured one, on a host that held "
               "still",
    "inconclusive": "the host was busy or changed speed (under a run alone or a fixed memory "
                    "stream), or the runs varied too much, so the errors cannot be judged",
}


@dataclass
class Point:
    ranks: int
    overlap: str
    measured_point: str  # the records' point ids
    simulated_point: str
    measured_s: float
    simulated_s: float
    error: float  # simulated / measured - 1
    bound: float
    within: bool


@dataclass
class Steadiness:
    """The host's steadiness, measured by validate-sim before and after its runs
    (suites/harness/core/host_steadiness.h)."""
    when: str  # "before the runs", "after the runs"
    median_bytes_per_s: float
    cv: float  # of its passes' times


@dataclass
class Validation:
    path: Path
    verdict: str = ""
    points: list[Point] = field(default_factory=list)
    disturbed: list[str] = field(default_factory=list)
    steadiness: list[Steadiness] = field(default_factory=list)  # none in a validation before it
    problem: str = ""  # why the file is not read as a validation ("" when it is)


def _number(p: dict, key: str, what: str = "point") -> float:
    v = p.get(key)
    try:  # (an integer beyond any double overflows)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
            raise ValueError
    except (ValueError, OverflowError):
        raise ValueError(f"{what} {key} is not a finite number") from None
    return float(v)


def _text(p: dict, key: str, what: str = "point") -> str:
    v = p.get(key)
    if not isinstance(v, str):
        raise ValueError(f"{what} {key} is not a string")
    return v


def _point(p) -> Point:
    if not isinstance(p, dict):
        raise ValueError("a point is not an object")
    ranks, within = p.get("ranks"), p.get("within")
    if isinstance(ranks, bool) or not isinstance(ranks, int) or not isinstance(within, bool):
        raise ValueError("a point's ranks or within is not of its type")
    return Point(ranks, _text(p, "overlap"), _text(p, "measured_point"),
                 _text(p, "simulated_point"), _number(p, "measured_step_s"),
                 _number(p, "simulated_step_s"), _number(p, "error"), _number(p, "bound"),
                 within)


def _steadiness(data: dict) -> list[Steadiness]:
    measured = data.get("host_steadiness", [])
    if not isinstance(measured, list) or not all(isinstance(m, dict) for m in measured):
        raise ValueError("its host_steadiness is not a list of objects")
    what = "host_steadiness"
    return [Steadiness(_text(m, "when", what), _number(m, "median_bytes_per_s", what),
                       _number(m, "cv", what)) for m in measured]


def parse(data, path: Path) -> Validation:
    """validation.json's content as a Validation, or one whose `problem` says why it is not one."""
    v = Validation(path)
    try:
        if not isinstance(data, dict) or data.get("kind") != "dlbench validate-sim":
            raise ValueError("not a dlbench validate-sim validation")
        if not isinstance(data.get("verdict"), str) or data["verdict"] not in VERDICTS:
            raise ValueError("its verdict is not within, outside or inconclusive")
        points, disturbed = data.get("points"), data.get("disturbed")
        if not isinstance(points, list) or not isinstance(disturbed, list) or not all(
                isinstance(d, str) for d in disturbed):
            raise ValueError("its points or disturbed is not a list of its type")
        v.verdict, v.points, v.disturbed = data["verdict"], [_point(p) for p in points], disturbed
        v.steadiness = _steadiness(data)
    except ValueError as e:
        v.verdict, v.points, v.disturbed, v.steadiness = "", [], [], []
        v.problem = f"{path}: {e}"
    return v


def load(rs: ResultSet) -> Validation | None:
    """The validation beside a validate-sim sweep's folder; None for another suite's, or where
    there is none (the points were run, the validation not yet)."""
    path = rs.directory.resolve().parent / "validation.json"
    if rs.suite != SUITE or not path.exists():
        return None
    try:
        return parse(read_json_file(path, "validation"), path)
    except RecordError as e:
        return Validation(path, problem=str(e))


def _percent(x: float) -> str:
    return f"{100 * x:+.1f}%"


def pieces(v: Validation, index_of: dict[str, int]) -> list[Piece]:
    """The paragraph: the verdict in words, the errors' range, each end linked to its simulated
    point's row where the summary has it, and the host's steadiness where it was measured."""
    if v.problem:
        return [f"The simulator's validation could not be read: {v.problem}."]
    out: list[Piece] = ["The simulator against these measured points (dlbench validate-sim): ",
                        f"{v.verdict}: {VERDICTS[v.verdict]}"]
    if v.disturbed and v.verdict == "inconclusive":
        n = len(v.disturbed)
        out.append(f" ({n} reason{'s' if n != 1 else ''}, below)")
    out.append(".")
    if v.points:
        out += _errors(v, index_of)
    return out + _steadiness_sentence(v.steadiness)


def _errors(v: Validation, index_of: dict[str, int]) -> list[Piece]:
    """The errors' range, each end linked to its simulated point's row, and the bounds'."""
    low, high = min(v.points, key=lambda p: p.error), max(v.points, key=lambda p: p.error)
    link = [(_percent(p.error), index_of[p.simulated_point]) if p.simulated_point in index_of
            else _percent(p.error) for p in (low, high)]
    bounds = sorted(p.bound for p in v.points)
    return [" Simulated steps from ", link[0], " to ", link[1], " of the measured ones, against "
            f"bounds of {100 * bounds[0]:.1f}% to {100 * bounds[-1]:.1f}%."]


def _steadiness_sentence(measured: list[Steadiness]) -> list[Piece]:
    """How steady the host was, in one sentence ([] when validate-sim did not measure it)."""
    if not measured:
        return []
    said = [f"{m.median_bytes_per_s / 1e9:.1f} GB/s {m.when}, its passes varying by CV "
            f"{100 * m.cv:.1f}%" for m in measured]
    return [" A memory stream of one thread (nothing of dlbench) moved " + ", and ".join(said) +
            "."]


HEADER = ["ranks", "overlap", "points (measured, simulated)", "measured step s",
          "simulated step s", "error", "bound", "within"]


def rows(v: Validation, index_of: dict[str, int]) -> list[list[str]]:
    """A row per simulated point; its points by their rows' numbers in the summary ('?' where the
    summary has no such point)."""
    def number(point_id: str) -> str:
        return str(index_of.get(point_id, "?"))
    return [[str(p.ranks), p.overlap, f"{number(p.measured_point)}, {number(p.simulated_point)}",
             f"{p.measured_s:.4f}", f"{p.simulated_s:.4f}", _percent(p.error),
             f"{100 * p.bound:.1f}%", "yes" if p.within else "no"] for p in v.points]


def point_indices(rs: ResultSet) -> dict[str, int]:
    """Each record's point id to its row in the summary (#point-N)."""
    out = {}
    for r in rs.records:
        point = r.data.get("point") or {}
        if isinstance(point.get("id"), str) and isinstance(point.get("index"), int):
            out[point["id"]] = point["index"]
    return out


def markdown_lines(rs: ResultSet, v: Validation | None) -> list[str]:
    """The paragraph, the table and the reasons of `v` (load's), in Markdown ([] for None)."""
    if v is None:
        return []
    index_of = point_indices(rs)
    out = [headline.markdown(pieces(v, index_of)), ""]
    if v.points:
        out += ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |"
                for row in rows(v, index_of)] + [""]
    if v.disturbed and v.verdict == "inconclusive":
        out += ["Why the errors cannot be judged:", "", *[f"- {d}" for d in v.disturbed], ""]
    return out


def html_parts(rs: ResultSet, v: Validation | None) -> list[str]:
    """The same in HTML."""
    if v is None:
        return []
    e = html.escape
    index_of = point_indices(rs)
    out = [f"<p>{headline.html_text(pieces(v, index_of))}</p>"]
    if v.points:
        out.append("<div class='wide'><table><tr>" + "".join(f"<th>{e(h)}</th>" for h in HEADER) +
                   "</tr>" + "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>"
                                     for row in rows(v, index_of)) + "</table></div>")
    if v.disturbed and v.verdict == "inconclusive":
        out.append("<p>Why the errors cannot be judged:</p><ul>" +
                   "".join(f"<li>{e(d)}</li>" for d in v.disturbed) + "</ul>")
    return out
