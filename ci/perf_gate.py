#!/usr/bin/env python3
"""Performance-regression gate over dlbench result records.

    ci/perf_gate.py --baseline=FILE_OR_DIR --current=DIR [--threshold=5%] [--alpha=0.01]
                    [--verdict=FILE]

Points are matched by their config as the suite wrote it. For each point both sides ran:
- step times (metrics.step_time_s.all, every timed step) are compared with a two-sided
  Mann-Whitney U test; a regression needs BOTH p < alpha AND a median slowdown beyond the
  threshold (a significant 1% change is not a regression; a 20% change in noise that does not
  reach significance is not either);
- deterministic metrics (parameter count, FLOPs, peak memory in total and per category) must be
  equal, to the byte;
- a metric present on one side only is reported as missing, and fails the gate.
A point of the baseline that is absent from the current run, or that ended ok in the baseline
but not now, fails the gate. Points new in the current run are listed, not judged.

Prints a table, writes a JSON verdict (default: DIR/perf_gate.json) and exits 0 (pass),
1 (regression or missing data) or 2 (unreadable input). Reads records only; measures nothing.
"""
from __future__ import annotations

import argparse
import json
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
        if p < alpha and change > threshold:
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
            entry["verdict"] = "fail" if any(x["verdict"] == "fail" for x in entry["checks"]) \
                else "pass"
        points.append(entry)
    new = [{"point": point_name(c), "config": c.config, "current": c.where}
           for k, c in cur_by.items() if k not in base_by]
    failed = sum(p["verdict"] == "fail" for p in points)
    return {"verdict": "fail" if failed else "pass", "threshold": threshold, "alpha": alpha,
            "failed_points": failed, "points": points, "new_points": new}


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
          f"{len(result['points'])} points failed; threshold {100 * result['threshold']:.1f}%, "
          f"alpha {result['alpha']})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", required=True, help="results.jsonl or a directory holding one")
    ap.add_argument("--current", required=True, help="results.jsonl or a directory holding one")
    ap.add_argument("--threshold", type=parse_threshold, default=0.05,
                    help="median slowdown that counts (default 5%%)")
    ap.add_argument("--alpha", type=float, default=0.01, help="Mann-Whitney p below this")
    ap.add_argument("--verdict", help="JSON verdict file (default: CURRENT/perf_gate.json)")
    args = ap.parse_args(argv)
    try:
        baseline = read_records(args.baseline)
        current = read_records(args.current)
    except RecordError as e:
        print(f"perf_gate: error: {e}", file=sys.stderr)
        return 2
    result = gate(baseline, current, args.threshold, args.alpha)
    result["baseline"], result["current"] = str(args.baseline), str(args.current)
    print_table(result)
    cur = Path(args.current)
    out = Path(args.verdict) if args.verdict else (cur if cur.is_dir() else cur.parent) / \
        "perf_gate.json"
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    os.replace(tmp, out)
    print(f"verdict written to {out}")
    return 1 if result["verdict"] == "fail" else 0


if __name__ == "__main__":
    sys.exit(main())
