#!/usr/bin/env python3
"""Writes the regression inputs of the micro report's fuzz target (tests/fuzz/micro/regressions):
corpus/micro.json and corpus/allreduce-mpi.json (a real `dlbench --suite=micro` run on the CPU)
broken one way each, one file per defect found. A file whose name holds "allreduce" is an
allreduce-<comm>.json; any other, a micro.json. Each is refused by `python -m dlbench_reports micro
DIR` with one line naming the file and the key and exit 2, except those named accepted_*, which
must be accepted. Deterministic.

    python3 tests/fuzz/micro/make_inputs.py
"""
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
MICRO = json.loads((HERE / "corpus" / "micro.json").read_text())
ALLREDUCE = json.loads((HERE / "corpus" / "allreduce-mpi.json").read_text())


def write(name: str, doc) -> None:
    # Python writes NaN and Infinity literals, as Google Benchmark does for a counter.
    (HERE / "regressions" / name).write_text(json.dumps(doc, indent=1) + "\n")


def changed(doc: dict, change) -> dict:
    out = json.loads(json.dumps(doc))
    change(out)
    return out


def first_row(key, value):
    def change(doc):
        doc["benchmarks"][0][key] = value
    return change


def conv_layers(n: int) -> dict:
    """n distinct convolutions (one pass each), from the first conv row."""
    row = next(b for b in MICRO["benchmarks"] if b["name"].startswith("conv/"))
    parts = row["name"].split("/")
    rows = [dict(row, name="/".join(parts[:4] + [f"m.layer{i}"] + parts[5:])) for i in range(n)]
    return dict(MICRO, benchmarks=rows)


def main() -> None:
    write("rate_a_string.json", changed(MICRO, first_row("FLOP/s", "95885639528")))
    write("name_a_number.json", changed(MICRO, first_row("name", 5)))
    write("of_peak_a_list.json", changed(MICRO, first_row("of_peak", [0.5])))
    write("name_too_few_parts.json", changed(MICRO, first_row("name", "conv/cpu/fp32/forward")))
    write("precision_unknown.json", changed(MICRO, first_row(
        "name", "gemm/cpu/fp64/32x4096x9216/forward/manual_time")))
    write("time_unit_unknown.json", changed(MICRO, first_row("time_unit", "min")))

    def peak_text(doc):
        doc["context"]["peak cpu fp32 flops_per_s"] = "fast"
    write("peak_text.json", changed(MICRO, peak_text))

    def benchmarks_an_object(doc):
        doc["benchmarks"] = {"name": "gemm"}
    write("benchmarks_an_object.json", changed(MICRO, benchmarks_an_object))
    write("accepted_of_peak_infinity.json", changed(MICRO, first_row("of_peak", float("inf"))))
    write("accepted_rate_nan.json", changed(MICRO, first_row("FLOP/s", float("nan"))))
    write("accepted_500_conv_layers.json", conv_layers(500))

    def rows_a_list_of_lists(doc):
        doc["rows"] = [list(r.values()) for r in doc["rows"]]
    write("allreduce_rows_lists.json", changed(ALLREDUCE, rows_a_list_of_lists))

    def rows_an_object(doc):
        doc["rows"] = doc["rows"][0]
    write("allreduce_rows_an_object.json", changed(ALLREDUCE, rows_an_object))

    def row_without_busbw(doc):
        del doc["rows"][0]["busbw_gbs"]
    write("allreduce_row_without_busbw.json", changed(ALLREDUCE, row_without_busbw))

    def no_rows(doc):
        del doc["rows"]
    write("allreduce_no_rows.json", changed(ALLREDUCE, no_rows))

    def row_time_infinity(doc):
        doc["rows"][0]["time_s"] = float("inf")
    write("accepted_allreduce_time_infinity.json", changed(ALLREDUCE, row_time_infinity))


if __name__ == "__main__":
    main()
