"""`dlbench compare`: systems side by side, with published reference rows."""
from __future__ import annotations

import json

from dlbench_reports.compare import compare, main


def scale_throughput(path, factor):
    lines = [json.loads(l) for l in path.read_text().splitlines()]
    for r in lines:
        if r["status"] == "ok":
            r["metrics"]["throughput_img_s"] *= factor
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))


def test_rows_are_model_size_precision_ranks_with_best_throughput(results, tmp_path):
    a = results("scaling")
    b = tmp_path / "faster"
    b.mkdir()
    (b / "results.jsonl").write_text((a / "results.jsonl").read_text())
    scale_throughput(b / "results.jsonl", 2.0)
    header, table, legend = compare([str(a), str(b)])
    assert header[:4] == ["model", "image", "precision", "ranks"]
    recs = [json.loads(l) for l in (a / "results.jsonl").read_text().splitlines()]
    for row in table:
        ranks = int(row[3])
        best = max(r["metrics"]["throughput_img_s"] for r in recs if r["config"]["ranks"] == ranks)
        assert row[:4] == ["resnet18", "32px", "fp32", str(ranks)]
        assert row[4].startswith(f"{best:,.1f} (b8)")
        assert row[6] == "0.5x"  # [1]/[2], as the report divides: the first over the other
    assert header[6] == "[1]/[2]"
    assert [r[3] for r in table] == ["1", "2", "4"]
    assert "measured" in legend[0] and str(a) in legend[0]


def test_a_ratio_of_points_that_differ_beyond_the_row_says_how(results, tmp_path):
    a = results("scaling")
    b = tmp_path / "other"
    b.mkdir()
    lines = [json.loads(l) for l in (a / "results.jsonl").read_text().splitlines()]
    for r in lines:
        r["config"]["batch"] = 16
    (b / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    header, table, _ = compare([str(a), str(b)])
    for row in table:
        assert row[6] == "1x (differ: batch 8/16)"


def test_results_with_no_row_in_common_are_refused(results, tmp_path, capsys):
    a = results("scaling")
    b = tmp_path / "other"
    b.mkdir()
    lines = [json.loads(l) for l in (a / "results.jsonl").read_text().splitlines()]
    for r in lines:
        r["config"]["model"] = "vgg16"
    (b / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    from dlbench_reports.__main__ import main as cli
    assert cli(["compare", str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert "share no (model, image size, precision, ranks) row" in err
    assert "resnet18 32px fp32 x1" in err and "vgg16 32px fp32 x1" in err


def test_references_and_time_to_accuracy(results, capsys):
    conv = results("convergence")
    assert main([str(conv)], "default", None) == 0
    out = capsys.readouterr().out
    recs = [json.loads(l) for l in (conv / "results.jsonl").read_text().splitlines()]
    for r in recs:
        c = r["metrics"]["convergence"]
        assert f"[1] {c['time_to_accuracy_s']:.1f} s to 95.0% test accuracy (digits)" in out
    # Published rows appear with their sources; none of them matches a digits row.
    assert "DeepLearningExamples: NVIDIA DGX A100" in out and "Lambda: " in out
    assert "MLPerf: MLPerf Training v3.0 closed" in out and "808.0 s to 75.90% top-1" in out
    assert "https://github.com/NVIDIA/DeepLearningExamples" in out
    assert "| resnet50 | 224px | fp16 | 8 | - |" in out


def test_rows_in_common_are_counted_by_directory_not_by_system(results, tmp_path, capsys):
    # The peers directory has dlbench and PyTorch on the same rows; the other directory shares
    # none of them. Two systems of one directory agreeing is not two directories to compare.
    a = results("peers")
    b = tmp_path / "other"
    b.mkdir()
    lines = [json.loads(l) for l in (results("scaling") / "results.jsonl").read_text().splitlines()]
    for r in lines:
        r["config"]["model"] = "vgg16"
    (b / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    from dlbench_reports.__main__ import main as cli
    assert cli(["compare", str(a), str(b)]) == 2
    assert "share no (model, image size, precision, ranks) row" in capsys.readouterr().err
