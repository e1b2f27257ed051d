"""A peer (config.system, reports/peers/) in the reports: the ratio per point in the summary and
in `compare`, its curve beside dlbench's in the scaling and batch plots, and none of its records
in the plots of dlbench's insides. The fixture is a real CPU sweep with --systems=dlbench,pytorch
(resnet18, ranks 1 and 2, batch 2 and 4)."""
from __future__ import annotations

import json

import pytest

from dlbench_reports.compare import compare
from dlbench_reports.records import load, peer_ratio, peers
from dlbench_reports.report import build


def pairs(d):
    """{(ranks, batch): {system: throughput}} from the fixture's records."""
    out: dict = {}
    for line in (d / "results.jsonl").read_text().splitlines():
        r = json.loads(line)
        c = r["config"]
        out.setdefault((c["ranks"], c["batch"]), {})[c["system"]] = r["metrics"]["throughput_img_s"]
    return out


def test_ratio_is_dlbench_over_the_peer_at_the_same_point(results):
    d = results("peers")
    rs = load(d)
    assert peers(rs.records) == ["pytorch"]
    want = {k: v["dlbench"] / v["pytorch"] for k, v in pairs(d).items()}
    seen = 0
    for r in rs.records:
        ratio = peer_ratio(r, rs.records, "pytorch")
        if r.system == "pytorch":
            assert ratio is None
        else:
            assert abs(ratio - want[(r.config["ranks"], r.config["batch"])]) < 1e-12
            seen += 1
    assert seen == 4


def test_report_has_a_ratio_column_and_the_peer_curves(results):
    d = results("peers")
    report = build(d)
    md = report.markdown.read_text()
    header = next(l for l in md.splitlines() if l.startswith("| # |"))
    assert "| vs pytorch [95%] |" in header
    for v in pairs(d).values():
        assert f"| {v['dlbench'] / v['pytorch']:.2f}x |" in md
    assert "pytorch torch" in md  # the peer's versions, under Environment
    names = {p.name for p in report.plots}
    assert {"scaling-1", "scaling-2", "batch-1", "batch-2"} <= names, names
    scaling = (d / "plots" / "scaling-1.svg").read_text()
    assert 'id="throughput:backward"' in scaling
    assert 'id="throughput:PyTorch DDP (overlaps backward)"' in scaling
    batch = (d / "plots" / "batch-1.svg").read_text()
    assert 'id="throughput:pytorch"' in batch and 'id="peak_memory"' in batch


def test_compare_splits_a_directory_by_system(results):
    d = results("peers")
    header, table, legend = compare([str(d)])
    assert header[4:7] == ["[1] img/s", "[2] img/s", "[1]/[2]"]
    assert "peers dlbench" in legend[0] and "peers pytorch" in legend[1]
    best: dict = {}
    for (ranks, batch), v in pairs(d).items():
        for system, t in v.items():
            if t > best.get((ranks, system), (0, None))[0]:
                best[(ranks, system)] = (t, batch)
    for row in table:
        ranks = int(row[3])
        (mine, b1), (theirs, b2) = best[(ranks, "dlbench")], best[(ranks, "pytorch")]
        # dlbench over its peer, as the report divides; best points at two batches say so.
        want = f"{mine / theirs:.3g}x" + ("" if b1 == b2 else f" (differ: batch {b1}/{b2})")
        assert row[6] == want, row


def test_compare_makes_cuda_graph_points_a_system_of_their_own(results):
    """A graph run is never the best of one cell with the steps run op by op."""
    d = results("peers")
    lines = (d / "results.jsonl").read_text().splitlines()
    ok = [json.loads(l) for l in lines if json.loads(l)["status"] == "ok"
          and json.loads(l)["config"].get("system", "dlbench") == "dlbench"]
    graph = dict(ok[0])
    graph["config"] = dict(ok[0]["config"], cuda_graph=True)
    graph["metrics"] = dict(ok[0]["metrics"], throughput_img_s=10 * max(
        r["metrics"]["throughput_img_s"] for r in ok))
    graph["point"] = dict(ok[0]["point"], id=ok[0]["point"]["id"] + "-graph")
    (d / "results.jsonl").write_text("\n".join(lines + [json.dumps(graph)]) + "\n")
    header, table, legend = compare([str(d)])
    assert any("peers dlbench cuda-graph" in line for line in legend), legend
    assert "peers dlbench (" in legend[0]
    ranks = ok[0]["config"]["ranks"]
    row = next(r for r in table if int(r[3]) == ranks)
    best_eager = max(r["metrics"]["throughput_img_s"] for r in ok if r["config"]["ranks"] == ranks)
    assert float(row[4].split()[0]) == pytest.approx(best_eager, abs=0.05)  # "156.1 (b4)"
