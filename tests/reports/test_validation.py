"""validate-sim's report (reports/dlbench_reports/validation.py): its verdict, each simulated
point's error against its bound, and an inconclusive verdict's reasons come first, read from the
validation.json validate-sim writes beside the points' folder. The fixture is a real validate-sim
run on a noisy 2-core host (2026-12-01): inconclusive, with 11 reasons."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

from hypothesis import given, settings, strategies as st

from dlbench_reports import validation
from dlbench_reports.records import load
from dlbench_reports.report import build


def test_the_report_opens_with_the_verdict_the_errors_and_the_reasons(results):
    d = results("validate-sim")
    v = json.loads((d / "validation.json").read_text())
    r = build(d / "runs")
    md = r.markdown.read_text()
    first = md.split("\n\n")[1]  # after the title
    assert first.startswith("The simulator against these measured points (dlbench validate-sim): "
                            f"{v['verdict']}: "), first
    assert f"({len(v['disturbed'])} reasons, below)" in first, first
    # The errors' range, each end linked to its simulated point's row.
    errors = sorted(v["points"], key=lambda p: p["error"])
    links = re.findall(r"\[([+-][0-9.]+%)\]\(#point-(\d+)\)", first)
    by_id = {json.loads(l)["point"]["id"]: json.loads(l)["point"]["index"]
             for l in (d / "runs" / "results.jsonl").read_text().splitlines()}
    assert links == [(f"{100 * p['error']:+.1f}%", str(by_id[p["simulated_point"]]))
                     for p in (errors[0], errors[-1])], links
    # A row per point, in validation.json's order, and every reason a line of its own.
    for p in v["points"]:
        row = (f"| {p['ranks']} | {p['overlap']} | {by_id[p['measured_point']]}, "
               f"{by_id[p['simulated_point']]} | {p['measured_step_s']:.4f} | "
               f"{p['simulated_step_s']:.4f} | {100 * p['error']:+.1f}% | "
               f"{100 * p['bound']:.1f}% | {'yes' if p['within'] else 'no'} |")
        assert row in md, row
    for reason in v["disturbed"]:
        assert f"\n- {reason}\n" in md, reason
    assert md.index("The simulator against") < md.index("On this machine") < md.index("## Summary")
    html = r.html.read_text()
    assert html.index("The simulator against") < html.index("On this machine")
    assert html.count("<li>") >= len(v["disturbed"])


def test_this_hosts_simulated_ranks_are_ranks_not_gpus(results):
    from dlbench_reports import headline
    text = headline.markdown(headline.pieces(load(results("validate-sim") / "runs")))
    assert " at 4 ranks with overlap=" in text and "GPUs" not in text, text


def test_a_file_that_is_not_a_validation_is_named_in_its_place(results):
    d = results("validate-sim")
    good = json.loads((d / "validation.json").read_text())
    bad_point = dict(good, points=[dict(good["points"][0], error="x")])
    for content, why in ((b"{", "not valid JSON"), (b"[]", "not a dlbench validate-sim"),
                         (json.dumps(dict(good, verdict="fine")).encode(), "its verdict"),
                         (json.dumps(bad_point).encode(), "point error is not a finite number")):
        (d / "validation.json").write_bytes(content)
        md = build(d / "runs").markdown.read_text()
        line = md.split("\n\n")[1]
        assert line.startswith("The simulator's validation could not be read: "), line
        assert why in line, (why, line)
        assert "## Summary" in md  # the rest of the report is drawn
    (d / "validation.json").unlink()  # the points ran, the validation not yet
    md = build(d / "runs").markdown.read_text()
    assert "The simulator against" not in md and "could not be read" not in md


def test_what_the_file_says_is_escaped_in_html_and_in_a_markdown_table(results):
    d = results("validate-sim")
    v = json.loads((d / "validation.json").read_text())
    v["disturbed"] = ["point 1: <b>bold</b> & more"]
    v["points"][0]["overlap"] = "a|b"
    (d / "validation.json").write_text(json.dumps(v))
    r = build(d / "runs")
    html = r.html.read_text()
    assert "<li>point 1: &lt;b&gt;bold&lt;/b&gt; &amp; more</li>" in html and "<b>bold" not in html
    assert "<td>a|b</td>" in html
    assert "| a\\|b |" in r.markdown.read_text()


def test_a_verdict_that_is_not_inconclusive_gives_no_reasons(results):
    d = results("validate-sim")
    v = json.loads((d / "validation.json").read_text())
    (d / "validation.json").write_text(json.dumps(dict(v, verdict="within")))
    md = build(d / "runs").markdown.read_text()
    assert md.split("\n\n")[1].startswith(
        "The simulator against these measured points (dlbench validate-sim): within: every "
        "simulated step is within its bound of the measured one. Simulated steps from"), md
    assert "cannot be judged" not in md


# A steadiness as validate-sim writes it (suites/harness/core/host_steadiness.h).
STEADY = {"when": "before the runs", "passes": 130, "bytes_per_pass": 201326592.0,
          "median_bytes_per_s": 2.59e10, "min_bytes_per_s": 2.4e10, "max_bytes_per_s": 2.7e10,
          "cv": 0.012}


def test_the_hosts_steadiness_ends_the_paragraph(results):
    d = results("validate-sim")
    v = json.loads((d / "validation.json").read_text())
    after = dict(STEADY, when="after the runs", median_bytes_per_s=1.76e10, cv=0.118)
    (d / "validation.json").write_text(json.dumps(dict(v, host_steadiness=[STEADY, after])))
    first = build(d / "runs").markdown.read_text().split("\n\n")[1]
    assert first.endswith(
        "A memory stream of one thread (nothing of dlbench) moved 25.9 GB/s before the runs, its "
        "passes varying by CV 1.2%, and 17.6 GB/s after the runs, its passes varying by CV "
        "11.8%."), first


def test_a_steadiness_of_the_wrong_shape_is_named():
    for bad, why in [(dict(STEADY, cv="low"), "host_steadiness cv is not a finite number"),
                     (dict(STEADY, when=None), "host_steadiness when is not a string"),
                     ("fast", "its host_steadiness is not a list of objects")]:
        v = validation.parse(dict(GOOD, host_steadiness=[bad]), Path("v.json"))
        assert v.problem == f"v.json: {why}" and not v.steadiness, v.problem


def test_a_validation_before_the_steadiness_says_nothing_of_it(results):
    d = results("validate-sim")
    first = build(d / "runs").markdown.read_text().split("\n\n")[1]
    assert "A memory stream of one thread" not in first


def test_the_report_finds_the_validation_from_inside_the_points_folder(results, monkeypatch):
    d = results("validate-sim")
    monkeypatch.chdir(d / "runs")
    assert validation.load(load(".")).verdict == "inconclusive"


def test_another_suites_report_has_no_validation(results):
    d = results("scaling")
    (d.parent / "validation.json").write_text("{")
    assert validation.load(load(d)) is None


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) |
                    st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)
KEYS = st.sampled_from(["kind", "verdict", "points", "disturbed", "ranks", "overlap", "error",
                        "bound", "within", "measured_point", "simulated_point",
                        "measured_step_s", "simulated_step_s", "host_steadiness", "when",
                        "median_bytes_per_s", "cv"])


GOOD = json.loads((Path(__file__).resolve().parent / "fixtures" / "validate-sim" /
                   "validation.json").read_text())


@settings(max_examples=400, derandomize=True, deadline=None)
@given(where=st.sampled_from(["top", "point", "steadiness", "whole"]), key=KEYS, value=JSON)
def test_any_json_is_a_validation_or_a_problem_never_an_exception(where, key, value):
    """Fuzzed: the fixture's validation, with the host's steadiness, with one field (of the file,
    of its first point or of its first steadiness) set to any JSON value, or any JSON as the whole
    file. parse gives a validation whose fields are of their types, or a problem; the paragraph
    and the table are drawn from either."""
    data = json.loads(json.dumps(GOOD))
    data["host_steadiness"] = [STEADY]
    if where == "top":
        data[key] = value
    elif where == "point":
        data["points"][0][key] = value
    elif where == "steadiness":
        data["host_steadiness"][0][key] = value
    else:
        data = value
    v = validation.parse(data, Path("v.json"))
    if v.problem:
        assert v.problem.startswith("v.json: ") and not v.points and not v.verdict
    else:
        assert v.verdict in validation.VERDICTS and all(isinstance(d, str) for d in v.disturbed)
        for p in v.points:
            assert all(math.isfinite(x) for x in (p.error, p.bound, p.measured_s, p.simulated_s))
        assert all(isinstance(m.when, str) and math.isfinite(m.median_bytes_per_s + m.cv)
                   for m in v.steadiness)
    text = "".join(x if isinstance(x, str) else x[0] for x in validation.pieces(v, {}))
    assert text and all(len(row) == len(validation.HEADER) for row in validation.rows(v, {}))
