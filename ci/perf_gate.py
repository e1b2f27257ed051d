#!/usr/bin/env python3
"""Performance-regression gate over dlbench result records.

    ci/perf_gate.py --baseline=FILE_OR_DIR --current=DIR [--threshold=5%] [--alpha=0.01]
                    [--verdict=FILE] [--allow-inconclusive]

Points are matched by their config as the suite wrote it. For each point both sides ran:
- step times (metrics.step_time_s.all, every timed step) are compared with a two-sided
  Mann-Whitney U test; a regression needs BOTH p < alpha AND a median slowdown beyond the
  threshold (a significant 1% change is not a regression; a 20% change in noise that does not
  reach significance is not either);
- a point whose sample counts cannot reach p < alpha at all is not a pass: with n1 and n2 steps
  the smallest two-sided p the exact test can give is 2 / C(n1 + n2, n1) (every step of one side
  faster than every step of the other), so 3 steps a side can never go below 0.1. Such a point is
  `inconclusive`, with the number of steps a side that alpha needs, and the gate exits 1 unless
  --allow-inconclusive makes that a warning;
- deterministic metrics (parameter count, FLOPs, peak memory in total and per category) must be
  equal, to the byte;
- a metric present on one side only is reported as missing, and fails the gate.
A point of the baseline that is absent from the current run, or that ended ok in the baseline
but not now, fails the gate. Points new in the current run are listed, not judged.

Prints a table, writes a JSON verdict (default: DIR/perf_gate.json) and exits 0 (pass),
1 (regression, missing data, or inconclusive without --allow-inconclusive) or 2 (unreadable
input). Reads records only; measures nothing.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "reports"))

try:
    from scipy.stats import mannwhitneyu  # noqa: E402
    import jsonschema  # noqa: E402,F401
except ImportError:
    # Run by a Python without the packages: use the project's venv (scripts/install-deps.sh).
    venv = ROOT / ".venv" / "bin" / "python"
    if venv.exists() and Path(sys.executable) != venv:
        os.execv(str(venv), [str(venv), __file__, *sys.argv[1:]])
    sys.exit("perf_gate: needs scipy and jsonschema; run scripts/install-deps.sh")

from dlbench_reports.outputs import check_output, write_text_atomically  # noqa: E402
from dlbench_reports.records import Record, RecordError, latest_per_point, read_records  # noqa

DETERMINISTIC = ["metrics.params", "metrics.flops_per_step", "metrics.forward_flops_per_image",
                 "memory.peak_bytes_total"]


def parse_threshold(text: str) -> float:
    t = text.strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--threshold: '{text}' is not a number or percentage")
    if value > 1 and not t.endswith("%"):
        value /= 100  # "5" means 5%
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"--threshold must be between 0% and 100% (got {text})")
    return value


def parse_alpha(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--alpha: '{text}' is not a number")
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"--alpha must be between 0 and 1 (got {text})")
    return value


def config_key(record: Record) -> str:
    """The point's config as the suite wrote it (stable when a later dlbench adds derived keys
    to the record's full config), else the full config."""
    return json.dumps(record.data.get("suite_config", record.config), sort_keys=True)


def point_name(record: Record) -> str:
    c = record.config
    parts = [c.get("model", "?"), f"b{c.get('batch')}", f"{c.get('image_size')}px",
             c.get("precision", ""), f"{c.get('ranks')}r"]
    parts.append(c.get("overlap", ""))
    return " ".join(str(p) for p in parts if p)


def smallest_p(n1: int, n2: int) -> float:
    """The smallest two-sided p-value an exact Mann-Whitney U test can reach with n1 and n2
    samples: every sample of one side below every sample of the other, one arrangement of
    C(n1 + n2, n1), counted at both tails. (scipy's normal approximation, used for larger or
    tied samples, can print a smaller p than the exact test allows; the exact bound is the one
    that says whether the counts can decide.)"""
    return min(1.0, 2.0 / math.comb(n1 + n2, n1))


def steps_needed(alpha: float) -> int:
    """The fewest steps a side for which the exact test can reach p < alpha."""
    n = 1
    while smallest_p(n, n) >= alpha:
        n += 1
    return n


def deterministic_metrics(record: Record) -> dict[str, object]:
    out = {k: record.get(k) for k in DETERMINISTIC if record.get(k) is not None}
    for cat, v in (record.get("memory.peak_bytes_by_category") or {}).items():
        out[f"memory.peak_bytes_by_category.{cat}"] = v
    return out


def compare_point(base: Record, cur: Record, threshold: float, alpha: float) -> list[dict]:
    checks: list[dict] = []
    if not cur.ok:
        return [{"metric": "status", "baseline": base.data["status"],
                 "current": cur.data["status"], "verdict": "fail",
                 "why": f"ended {cur.data['status']}: {cur.data.get('message', '')}"}]
    b_steps = base.get("metrics.step_time_s.all")
    c_steps = cur.get("metrics.step_time_s.all")
    if b_steps is None and c_steps is None:
        checks.append({"metric": "step_time_s", "verdict": "n/a",
                       "why": "neither side has repeated step times (not a timed point)"})
    elif b_steps is None or c_steps is None:
        side = "baseline" if b_steps is None else "current"
        checks.append({"metric": "step_time_s", "verdict": "fail",
                       "why": f"missing in the {side} ({(base if b_steps is None else cur).where})"})
    else:
        bm, cm = statistics.median(b_steps), statistics.median(c_steps)
        change = cm / bm - 1
        p = float(mannwhitneyu(b_steps, c_steps, alternative="two-sided").pvalue)
        best = smallest_p(len(b_steps), len(c_steps))
        if best >= alpha:
            need = steps_needed(alpha)
            verdict, why = "inconclusive", (
                f"{len(b_steps)} and {len(c_steps)} timed steps cannot reach p < {alpha} (at best "
                f"p = {best:.3g}); the test needs {need} a side")
        elif p < alpha and change > threshold:
            verdict, why = "fail", "slower: significant and beyond the threshold"
        elif p < alpha and change < -threshold:
            verdict, why = "pass", "faster: significant and beyond the threshold"
        elif p < alpha:
            verdict, why = "pass", "significant, within the threshold"
        else:
            verdict, why = "pass", "not significant"
        checks.append({"metric": "step_time_s (median)", "baseline": bm, "current": cm,
                       "change": change, "p_value": p, "n": [len(b_steps), len(c_steps)],
                       "verdict": verdict, "why": why})
    b_det, c_det = deterministic_metrics(base), deterministic_metrics(cur)
    for k in sorted(set(b_det) | set(c_det)):
        if k not in b_det or k not in c_det:
            side = "baseline" if k not in b_det else "current"
            checks.append({"metric": k, "baseline": b_det.get(k), "current": c_det.get(k),
                           "verdict": "fail", "why": f"missing in the {side}"})
        elif b_det[k] != c_det[k]:
            checks.append({"metric": k, "baseline": b_det[k], "current": c_det[k],
                           "change": (c_det[k] / b_det[k] - 1) if b_det[k] else None,
                           "verdict": "fail", "why": "deterministic metric changed"})
        else:
            checks.append({"metric": k, "baseline": b_det[k], "current": c_det[k],
                           "verdict": "pass", "why": "equal"})
    return checks


def gate(baseline: list[Record], current: list[Record], threshold: float, alpha: float) -> dict:
    base_by = {config_key(r): r for r in latest_per_point(baseline)}
    cur_by = {config_key(r): r for r in latest_per_point(current)}
    points = []
    for key, b in base_by.items():
        entry = {"point": point_name(b), "config": b.config, "baseline": b.where}
        c = cur_by.get(key)
        if not b.ok:
            entry.update(verdict="n/a", checks=[], why=f"baseline ended {b.data['status']}")
        elif c is None:
            entry.update(verdict="fail", checks=[], why="missing in the current run")
        else:
            entry["current"] = c.where
            entry["checks"] = compare_point(b, c, threshold, alpha)
            verdicts = {x["verdict"] for x in entry["checks"]}
            entry["verdict"] = "fail" if "fail" in verdicts else \
                "inconclusive" if "inconclusive" in verdicts else "pass"
        points.append(entry)
    new = [{"point": point_name(c), "config": c.config, "current": c.where}
           for k, c in cur_by.items() if k not in base_by]
    failed = sum(p["verdict"] == "fail" for p in points)
    inconclusive = sum(p["verdict"] == "inconclusive" for p in points)
    verdict = "fail" if failed else "inconclusive" if inconclusive else "pass"
    return {"verdict": verdict, "threshold": threshold, "alpha": alpha, "failed_points": failed,
            "inconclusive_points": inconclusive, "points": points, "new_points": new}


def fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def print_table(result: dict) -> None:
    rows = [("point", "metric", "baseline", "current", "change", "p", "verdict")]
    for p in result["points"]:
        if not p["checks"]:
            rows.append((p["point"], "-", "-", "-", "-", "-", f"{p['verdict']}: {p['why']}"))
        for c in p["checks"]:
            if c["verdict"] == "pass" and c.get("why") == "equal":
                continue  # equal deterministic metrics: summarised below
            change = f"{100 * c['change']:+.1f}%" if c.get("change") is not None else "-"
            p_text = f"{c['p_value']:.2g}" if "p_value" in c else "-"
            rows.append((p["point"], c["metric"], fmt(c.get("baseline")), fmt(c.get("current")),
                         change, p_text, f"{c['verdict']}: {c['why']}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())
    equal = sum(1 for p in result["points"] for c in p["checks"] if c.get("why") == "equal")
    print(f"{equal} deterministic metrics equal.")
    for n in result["new_points"]:
        print(f"new point (no baseline, not judged): {n['point']}")
    print(f"verdict: {result['verdict'].upper()} ({result['failed_points']} of "
          f"{len(result['points'])} points failed, {result['inconclusive_points']} inconclusive; "
          f"threshold {100 * result['threshold']:.1f}%, alpha {result['alpha']})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", required=True, help="results.jsonl or a directory holding one")
    ap.add_argument("--current", required=True, help="results.jsonl or a directory holding one")
    ap.add_argument("--threshold", type=parse_threshold, default=0.05,
                    help="median slowdown that counts (default 5%%)")
    ap.add_argument("--alpha", type=parse_alpha, default=0.01, help="Mann-Whitney p below this")
    ap.add_argument("--verdict", help="JSON verdict file (default: CURRENT/perf_gate.json)")
    ap.add_argument("--allow-inconclusive", action="store_true",
                    help="a point too short to judge is a warning, not a failure")
    args = ap.parse_args(argv)
    cur = Path(args.current)
    out = Path(args.verdict) if args.verdict else (cur if cur.is_dir() else cur.parent) / \
        "perf_gate.json"
    try:
        check_output(out, "verdict")  # before any work: a device, FIFO or directory is refused
        baseline = read_records(args.baseline)
        current = read_records(args.current)
    except RecordError as e:
        print(f"perf_gate: error: {e}", file=sys.stderr)
        return 2
    result = gate(baseline, current, args.threshold, args.alpha)
    result["baseline"], result["current"] = str(args.baseline), str(args.current)
    print_table(result)
    try:  # whole or not at all, never renamed over a special file (outputs.write_atomically)
        write_text_atomically(out, json.dumps(result, indent=2) + "\n")
    except RecordError as e:
        print(f"perf_gate: error: {e}", file=sys.stderr)
        return 2
    print(f"verdict written to {out}")
    if result["verdict"] == "inconclusive" and args.allow_inconclusive:
        print(f"perf_gate: warning: {result['inconclusive_points']} point(s) inconclusive "
              "(--allow-inconclusive)", file=sys.stderr)
        return 0
    return 0 if result["verdict"] == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
