"""report.md and report.html: summary table, plots, environment, statuses with failures shown."""
from __future__ import annotations

import json

from dlbench_reports.records import load
from dlbench_reports.report import build, environment


def test_report_shows_every_point_and_its_failures(results):
    d = results("precision")
    r = build(d)
    md = r.markdown.read_text()
    html = r.html.read_text()
    records = [json.loads(l) for l in (d / "results.jsonl").read_text().splitlines()]
    statuses = [x["status"] for x in records]
    # On the CPU: fp32, fp16 and bf16 run; tf32 (no TF32 on a CPU) is unsupported.
    assert statuses.count("unsupported") == 2 and statuses.count("ok") == 6
    for x in records:
        if x["status"] != "ok":
            assert x["message"] in md and x["message"] in html
    assert md.count("| unsupported |") == 2
    assert "## Failures" in md and "None: every point ended ok" not in md
    for x in records:
        if x["status"] == "ok":
            assert f"{x['metrics']['throughput_img_s']:.2f}" in md
    assert "## Environment" in md and records[0]["environment"]["git_sha"] in md
    names = {p.name for p in r.plots}
    assert {"precision", "memory"} <= names
    for p in r.plots:
        for f in p.files:
            assert f.exists() and f.stat().st_size > 1000
            assert str(f.relative_to(d)) in (md if f.suffix == ".png" else html)


def test_environment_lists_every_value_that_differs(results):
    # The scaling fixture's 1-rank points ran without MPI, the others with Open MPI.
    env = environment(load(results("scaling")))
    assert env["mpi"] == "none (points 1-3); Open MPI v4.1.4 (points 4-9)"
    assert env["git_sha"] == "d509d691d747"
    assert env["time"] == "2026-11-22T07:52:11Z to 2026-11-22T07:52:43Z"


def test_scaling_report_has_efficiency_and_plots(results):
    d = results("scaling")
    r = build(d)
    md = r.markdown.read_text()
    assert {"scaling-1", "overlap", "memory"} <= {p.name for p in r.plots}
    recs = [json.loads(l) for l in (d / "results.jsonl").read_text().splitlines()]
    one = {x["config"]["overlap"]: x["metrics"]["throughput_img_s"]
           for x in recs if x["config"]["ranks"] == 1}
    for x in recs:
        eff = x["metrics"]["throughput_img_s"] / (x["config"]["ranks"] * one[x["config"]["overlap"]])
        assert f"{100 * eff:.1f}%" in md
    assert "None: every point ended ok." in md


def test_convergence_report_states_time_to_accuracy(results):
    d = results("convergence")
    md = build(d).markdown.read_text()
    for l in (d / "results.jsonl").read_text().splitlines():
        c = json.loads(l)["metrics"]["convergence"]
        assert f"{c['time_to_accuracy_s']:.1f} s to {100 * c['target_accuracy']:.1f}%" in md


def test_records_written_before_the_option_table_still_report(results):
    """Records from before metrics.scaling_efficiency existed (and with epochs 0 for "not set")
    validate and render; their efficiency is simply not shown."""
    d = results("scaling")
    lines = []
    for line in (d / "results.jsonl").read_text().splitlines():
        x = json.loads(line)
        x["metrics"].pop("scaling_efficiency", None)
        x["metrics"].pop("scaling_baseline", None)
        x["config"]["epochs"] = 0
        lines.append(json.dumps(x))
    (d / "results.jsonl").write_text("\n".join(lines) + "\n")
    md = build(d).markdown.read_text()
    rows = [l for l in md.splitlines() if l.startswith("| ") and "| ok |" in l]
    assert rows and all("%" not in r for r in rows)


def test_report_says_what_the_suite_is_how_to_read_it_and_how_to_rerun_a_point(results):
    d = results("overlap")
    (d / "summary.json").write_text(json.dumps({"suite": "overlap", "description": "Hiding "
                                                "all-reduce, measured."}))
    lines = [json.loads(l) for l in (d / "results.jsonl").read_text().splitlines()]
    lines[0]["command"] = "dlbench run --model=alexnet --ranks=2 --bucket-mb=1"
    (d / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    r = build(d)
    md, html = r.markdown.read_text(), r.html.read_text()
    for text in (md, html):
        assert "Hiding all-reduce, measured." in text
        assert "How to read this" in text and "compare each strategy" in text
        assert "Running a point again" in text
        assert "dlbench run --model=alexnet --ranks=2 --bucket-mb=1" in text
    assert md.index("How to read this") < md.index("## Summary")


def test_noisy_points_are_marked_in_the_table_the_plots_and_the_count(results):
    d = results("overlap")
    lines = [json.loads(l) for l in (d / "results.jsonl").read_text().splitlines()]
    lines[0]["noise"] = {"verdict": "noisy", "reasons": ["other processes used 0.81 cores "
                                                         "during the run"]}
    lines[1]["noise"] = {"verdict": "stable", "reasons": []}
    (d / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    r = build(d)
    md = r.markdown.read_text()
    assert "1 of the ok points measured on a noisy machine" in md
    # One word in the table, so the row stays one line; the reasons under it.
    assert "| noisy |" in md
    assert "- point 1: other processes used 0.81 cores during the run" in md
    assert "<li>point 1: other processes used 0.81 cores during the run</li>" in (
        r.html.read_text())
    assert "| stable |" in md
    from dlbench_reports.plots import common, overlap
    fig = overlap.render(load(d).records)
    notes = " ".join(t.get_text().replace("\n", " ") for t in fig.texts)
    assert "noisy (measured while the machine was busy" in notes
    assert "other processes used 0.81 cores" in notes


def test_mfu_falls_back_to_the_measured_peak_and_says_so(results):
    """A CPU has no datasheet row: its MFU is the record's fraction of the measured peak,
    marked (m), in the table and on the precision plot; a datasheet row, where there is one,
    comes first."""
    from dlbench_reports import peaks
    from dlbench_reports.plots import precision
    d = results("precision")
    lines = [json.loads(l) for l in (d / "results.jsonl").read_text().splitlines()]
    ok = [r for r in lines if r["status"] == "ok"]
    for i, r in enumerate(ok):
        r["metrics"]["fraction_of_peak_flops"] = 0.01 * (i + 1)
    (d / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    md = build(d).markdown.read_text()
    for i in range(len(ok)):
        assert f"| {i + 1:.1f}% (m) |" in md
    rs = load(d)
    labels = {t.get_gid(): t.get_text() for t in precision.render(rs.records, []).axes[0].texts
              if t.get_gid()}
    for r in rs.ok:
        want = f"MFU {100 * r.get('metrics.fraction_of_peak_flops'):.1f}% (m)"
        assert labels[f"mfu:{r.config['model']}:{r.config['precision']}"].split("\n")[0] == want
    cpu = rs.ok[0].data["environment"]["device"]
    sheet = [{"name": "test CPU", "match": f"^{cpu}$", "peak_flops": {"fp32": 2.0e11},
              "source": "a peak made up for this test"}]
    r = next(r for r in rs.ok if r.config["precision"] == "fp32")
    assert peaks.mfu_and_basis(r, sheet) == (r.get("metrics.achieved_flops_per_s") / 2.0e11,
                                             "datasheet")
    assert peaks.mfu_text(r, []).endswith("% (m)")
    # Faster than the measured peak: the peak is what is wrong, and the text says so.
    r.data["metrics"]["fraction_of_peak_flops"] = 1.974
    assert peaks.mfu_text(r, []) == "197.4% (m, peak too low)"
    del r.data["metrics"]["fraction_of_peak_flops"]
    assert peaks.mfu_text(r, []) == "n/a"


def test_simulated_rows_are_honest_beside_measured_ones(results, dlbench_bin):
    """Simulated points beside measured ones (the scaling suite's report): an interval only where
    the steps spread (jitter), so none for a simulation without jitter; the command that re-makes
    a simulated point is its `dlbench simulate`; a key a row lacks is an empty cell, never
    'None'."""
    import subprocess
    d = results("scaling")
    for jitter in ("none", "cv:0.05"):
        subprocess.run([str(dlbench_bin), "simulate", "--roofline=h100-sxm", "--model=resnet18",
                        "--batch=8", "--image-size=32", "--precision=fp32", "--ranks=8",
                        "--overlap=backward", f"--jitter={jitter}", f"--out={d}"],
                       check=True, capture_output=True)
    md = build(d).markdown.read_text()
    table = md[md.index("## Summary"):md.index("## Failures")]
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    assert "None" not in table
    sim = [row for row in rows if "| dgx-h100 |" in row]
    assert len(sim) == 2
    none_row = next(row for row in sim if "| none |" in row)
    cv_row = next(row for row in sim if "| cv:0.05 |" in row)
    assert "[" not in none_row.split("| ok |")[1].split("|")[0], none_row  # img/s, no interval
    assert "[" in cv_row.split("| ok |")[1].split("|")[0], cv_row
    again = md[md.index("## Running a point again"):]
    simulated = [line for line in again.splitlines() if line.startswith("- point") and
                 "dlbench simulate" in line]
    assert len(simulated) == 2 and all("mpirun" not in line for line in simulated)
    assert all("--roofline=h100-sxm" in line and "--ranks=8" in line for line in simulated)


def test_scaling_report_answers_its_question_first_each_figure_linked_to_its_row(results,
                                                                               dlbench_bin):
    """The first paragraph: the one-rank throughput, the efficiency at the most ranks with why
    it falls (ranks sharing one CPU's threads), and the simulated efficiency at the most GPUs
    with where its compute came from, the best strategy's and the worst's where they differ;
    each figure a link to its row's anchor."""
    import re
    import subprocess
    d = results("scaling")
    subprocess.run([str(dlbench_bin), "simulate", "--roofline=h100-sxm", "--model=resnet50",
                    "--batch=64", "--image-size=224", "--precision=bf16", "--ranks=8,1024",
                    f"--out={d}"], check=True, capture_output=True)
    r = build(d)
    md = r.markdown.read_text()
    # Each figure's heading is its own: measured and simulated scaling loss are told apart.
    heads = [line for line in md.splitlines() if line.startswith("### ")]
    assert len(heads) == len(set(heads)), heads
    first = md.split("\n\n")[1]
    assert first.startswith("On this machine (cpu: ")
    links = re.findall(r"\[([^\]]+)\]\(#point-(\d+)\)", first)
    assert len(links) == 4, first
    records = {x["point"]["index"]: x for x in map(json.loads, (d / "results.jsonl").open())}
    (t, one), (eff, most), (sim, far) = [(text, int(n)) for text, n in links[:3]]
    assert records[one]["config"]["ranks"] == 1
    assert t == f"{records[one]['metrics']['throughput_img_s']:.1f} img/s"
    assert records[most]["config"]["ranks"] == 4 and records[most]["mode"] == "measured"
    assert eff == f"{100 * records[most]['metrics']['scaling_efficiency']:.1f}%"
    assert "share the machine's 2 hardware threads" in first
    assert records[far]["config"]["ranks"] == 1024 and records[far]["mode"] == "simulated"
    assert sim == f"{100 * records[far]['metrics']['scaling_efficiency']:.1f}%"
    assert "compute from the roofline of NVIDIA H100" in first and "h100-sxm.json" in first
    # A roofline has no measured steps to draw a jitter from: its ranks run at one speed, and
    # what they keep is the most real ranks could.
    assert records[far]["simulation"]["jitter"] == "none"
    assert records[far]["suite_config"]["jitter"] == "measured"  # as asked: the id keeps it
    assert "every rank at one speed, so an upper bound" in first
    # The worst strategy at the same ranks (the roofline's overlap=none), below the best.
    worse = records[int(links[3][1])]
    assert worse["config"]["ranks"] == 1024 and worse["mode"] == "simulated"
    assert (worse["metrics"]["scaling_efficiency"] <
            records[far]["metrics"]["scaling_efficiency"])
    assert f"with overlap={worse['config']['overlap']})" in first
    # Every strategy that keeps what the best does, to the 0.1 point shown, is named with it: on
    # the roofline, backward and forward both hide the all-reduce (it named backward alone).
    at_most = [x for x in records.values()
               if x["mode"] == "simulated" and x["config"]["ranks"] == 1024]
    top = max(x["metrics"]["scaling_efficiency"] for x in at_most)
    tied = sorted(x["config"]["overlap"] for x in at_most
                  if 100 * (top - x["metrics"]["scaling_efficiency"]) < 0.05)
    named = re.search(r"at 1,024 GPUs with (.*?) \(", first).group(1)
    assert len(tied) >= 2 and sorted(
        c.removeprefix("overlap=") for c in named.split(" or ")) == tied, (named, tied)
    for n in (one, most, far):
        assert f'<a id="point-{n}"></a>{n} |' in md
        assert f"<tr id='point-{n}'>" in r.html.read_text()


def test_every_figure_has_a_caption_and_no_image_is_wider_than_the_page(results):
    """report.html: every plot a <figure> with a caption under it (what the figure shows, which
    points share cores...), images scaled to the page (max-width 100%), and every table in a box
    that scrolls sideways (the scaling summary's 19 columns ran past the page's right edge in
    Chromium). Rendered for each fixture with plots."""
    from html.parser import HTMLParser

    class Figures(HTMLParser):
        def __init__(self):
            super().__init__()
            self.stack, self.images, self.captions, self.text = [], [], [], ""
            self.tables, self.wide = [], []

        def handle_starttag(self, tag, attrs):
            self.stack.append(tag)
            if tag == "img":
                self.images.append("figure" in self.stack)
                self.stack.pop()  # a void element
            if tag == "table":
                self.tables.append(self.stack[-2:-1] == ["div"] and self.wide[-1:] == [True])
            if tag == "div":
                self.wide.append(("class", "wide") in attrs)
            if tag == "figcaption":
                self.text = ""

        def handle_endtag(self, tag):
            if tag == "figcaption":
                self.captions.append(self.text.strip())
            if self.stack and self.stack[-1] == tag:
                self.stack.pop()

        def handle_data(self, data):
            self.text += data

    for name in ("scaling", "batch", "precision", "memory", "convergence", "overlap"):
        page = build(results(name)).html.read_text()
        assert "img{max-width:100%" in page and ".wide{overflow-x:auto" in page, name
        f = Figures()
        f.feed(page)
        assert f.tables and all(f.tables), (name, f.tables)
        assert f.images and all(f.images), (name, f.images)
        assert len(f.captions) == len(f.images) and all(len(c) > 40 for c in f.captions), \
            (name, f.captions)


def test_the_first_paragraph_keeps_to_one_configuration(results):
    """The peers fixture sweeps batch 2 and 4: the efficiency beside batch 2's one-rank figure is
    batch 2's (point 5's 25.3%), not the best of any batch (batch 4's 34.7%)."""
    import re
    d = results("peers")
    first = build(d).markdown.read_text().split("\n\n")[1]
    records = {x["point"]["index"]: x for x in map(json.loads, (d / "results.jsonl").open())}
    points = [int(n) for n in re.findall(r"\(#point-(\d+)\)", first)]
    assert len(points) == 2 and "at batch 2 per rank" in first, first
    assert {records[n]["config"]["batch"] for n in points} == {2}
    assert records[points[1]]["config"]["ranks"] == 2


def test_a_batch_sweep_answers_in_its_first_paragraph_and_shows_only_columns_with_values(results):
    d = results("batch")
    r = build(d)
    md = r.markdown.read_text()
    records = [json.loads(l) for l in (d / "results.jsonl").read_text().splitlines()]
    small = min(records, key=lambda x: x["config"]["batch"])
    large = max(records, key=lambda x: x["config"]["batch"])
    first = md.split("\n\n")[1]  # under the title
    for x in (small, large):
        assert (f"[{x['metrics']['throughput_img_s']:.1f} img/s](#point-{x['point']['index']}) "
                f"at batch {x['config']['batch']}") in first, first
        assert f"[{x['memory']['peak_bytes_total'] / 2**20:.1f} MiB]" in first
    header = next(line for line in md.splitlines() if line.startswith("| # |"))
    # One rank everywhere (efficiency 100% by definition), no all-reduce, no target accuracy.
    for gone in ("efficiency", "comm exposed/all ms", "time to accuracy"):
        assert f"| {gone} |" not in header, header
    for kept in ("status", "img/s [95%]", "step median ms", "peak MiB"):
        assert f"| {kept} |" in header, header


def test_a_simulated_sweep_names_each_model_its_best_choice_and_its_worst():
    """results/simulate-dgx-h100 (committed): resnet50 and vgg16, three strategies and two bucket
    sizes each. The paragraph answers for both models, at the most GPUs, what the best choice
    keeps and what the worst one does, each a link to its row."""
    import re
    from pathlib import Path
    from dlbench_reports import headline
    rs = load(Path(__file__).resolve().parents[2] / "results" / "simulate-dgx-h100")
    text = headline.markdown(headline.pieces(rs))
    by_index = {r.data["point"]["index"]: r for r in rs.records}
    links = [(t, by_index[int(n)]) for t, n in re.findall(r"\[([^\]]+)\]\(#point-(\d+)\)", text)]
    assert [r.config["model"] for _, r in links] == ["resnet50", "resnet50", "vgg16", "vgg16"]
    for (best_text, best), (worst_text, worst) in (links[:2], links[2:]):
        at = [r for r in rs.records if r.config["model"] == best.config["model"]
              and r.config["ranks"] == 1024]
        effs = [r.data["metrics"]["scaling_efficiency"] for r in at]
        assert best.data["metrics"]["scaling_efficiency"] == max(effs)
        assert worst.data["metrics"]["scaling_efficiency"] == min(effs)
        assert best_text == f"{100 * max(effs):.1f}%" and worst_text == f"{100 * min(effs):.1f}%"
        assert (f"with overlap={worst.config['overlap']} and "
                f"{worst.config['bucket_mb']:g} MB buckets)") in text
    assert text.endswith("(a model, not a measurement).")


def test_the_input_paragraph_keeps_gpu_decoding_apart(tmp_path):
    """The input suite's first paragraph: its loader sentences are about the points decoded on
    the CPU; a point decoded on the GPU (--decode=gpu) gets a sentence of its own, linked."""
    from dlbench_reports import headline
    from dlbench_reports.records import Record

    def record(index, data, threads=None, decode="cpu", rate=100.0, loader=50.0):
        d = {"status": "ok", "point": {"index": index, "id": str(index)},
             "config": {"model": "resnet18", "precision": "bf16", "batch": 64, "data": data,
                        "decode": decode},
             "environment": {"device": "NVIDIA H200"}, "metrics": {"throughput_img_s": rate}}
        if data == "folder":
            d["metrics"]["input"] = {"threads": threads, "decode": decode, "loader_img_s": loader,
                                     "decoder": "nvjpeg hardware" if decode == "gpu"
                                     else "libjpeg-turbo"}
        return Record(d, tmp_path, index)

    records = [record(0, "synthetic", rate=3000.0), record(1, "folder", 1, rate=900.0),
               record(2, "folder", 16, rate=2500.0, loader=3100.0),
               record(3, "folder", 1, "gpu", rate=2900.0, loader=90000.0)]
    text = headline.markdown(headline.input_pieces(records))
    assert "[900.0 img/s](#point-1) with 1 loader thread(s)" in text, text
    assert "[2500.0 img/s](#point-2) with 16" in text, text
    assert "passes the step's from 16 thread(s)" in text, text
    assert text.endswith("Decoded on the GPU (nvjpeg hardware), it trains at "
                         "[2900.0 img/s](#point-3) with 1 loader thread(s) reading the files."), text
