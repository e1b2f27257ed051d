#!/usr/bin/env python3
"""Writes the seed corpora (corpus/<target>/) and the regression inputs of the defects that
fuzzing found (regressions/<target>/), one file each, named for what it holds. Each regression
input is refused with a one-line error and exit 2 (tests/integration/hostile_inputs.sh), except
those named accepted_*: inputs that were wrongly refused, which must now be accepted. Deterministic:
running it again rewrites the same bytes. Inputs that later fuzzing runs find are added to
regressions/ by scripts/fuzz.sh as they are (crash-<sha1>), not by this script.

    python3 tests/fuzz/make_inputs.py
"""
import gzip
import json
import struct
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DIGITS = Path("/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz")


def safetensors(tensors, metadata=None, header=None, length_delta=0, pad=True):
    """tensors: name -> (dtype, shape, bytes), laid out in order. `header` replaces the JSON."""
    h, data, off = {}, b"", 0
    if metadata is not None:
        h["__metadata__"] = metadata
    for name, (dtype, shape, raw) in tensors.items():
        h[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        data += raw
    text = header if header is not None else json.dumps(h, separators=(",", ":")).encode()
    if pad and header is None:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text) + length_delta) + text + data


def f32(values):
    return struct.pack(f"<{len(values)}f", *values)


def i64(values):
    return struct.pack(f"<{len(values)}q", *values)


def batch(n, c=3, side=4, images=None, labels=None, extra=None):
    t = {"images": ("F32", [n, c, side, side],
                    images if images is not None else f32([(i % 7) / 7 for i in range(n * c * side * side)])),
         "labels": ("I64", [n], labels if labels is not None else i64([i % 10 for i in range(n)]))}
    if extra:
        t.update(extra)
    return safetensors(t)


def write(folder, name, data):
    path = HERE / folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode())


def main():
    # safetensors: what PyTorch's safetensors writes, and every dtype dlbench reads.
    write("corpus/safetensors", "empty", safetensors({}))
    write("corpus/safetensors", "one_f32", safetensors({"w": ("F32", [2, 2], f32([1, 2, 3, 4]))}))
    write("corpus/safetensors", "metadata", safetensors(
        {"b": ("F32", [3], f32([0, 1, 2])), "a": ("I64", [1], i64([7]))}, metadata={"format": "pt"}))
    write("corpus/safetensors", "half_types", safetensors(
        {"h": ("F16", [2], b"\x00\x3c\x00\xc0"), "b": ("BF16", [2], b"\x80\x3f\x00\x40"),
         "s": ("F32", [], f32([5])), "z": ("F32", [0, 3], b"")}))
    write("corpus/safetensors", "batch", batch(2))
    bad = "regressions/safetensors"
    write(bad, "shape_overflows_int64", safetensors({}, header=json.dumps(
        {"w": {"dtype": "F32", "shape": [2**40, 2**40], "data_offsets": [0, 0]}}).encode()))
    two = {"a": ("F32", [2], f32([1, 2])), "b": ("F32", [2], f32([3, 4]))}
    good = safetensors(two)
    write(bad, "overlapping_offsets", good.replace(b'"data_offsets":[8,16]', b'"data_offsets":[4,12]'))
    write(bad, "shifted_offsets", good.replace(b'"data_offsets":[0,8]', b'"data_offsets":[1,9]'))
    write(bad, "header_length_one_short", safetensors(two, length_delta=-1))
    write(bad, "nul_and_garbage_after_header", safetensors(
        {}, header=b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}\x00\x00garbage') + f32([1]))
    write(bad, "float_offsets", safetensors(
        {}, header=b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0.0,4.0]}}') + f32([1]))
    write(bad, "metadata_not_a_string_map", safetensors(
        {"a": ("F32", [1], f32([1]))}, metadata={"x": [1, 2]}))
    write(bad, "header_nested_5000_deep", safetensors(
        {}, header=b'{"a":' + b"[" * 5000 + b"]" * 5000 + b"}"))
    write(bad, "negative_dimension", safetensors(
        {}, header=b'{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}'))
    write(bad, "header_length_past_file", struct.pack("<Q", 2**63) + b"{}")

    # Batch files for a model of 3 channels and 10 classes.
    write("corpus/batch_file", "two_images", batch(2))
    write("corpus/batch_file", "four_images_8px", batch(4, side=8))
    bad = "regressions/batch_file"
    write(bad, "no_images", batch(0))
    write(bad, "images_of_no_pixel", batch(2, side=0, images=b""))
    write(bad, "byte_count_wraps", safetensors({}, header=json.dumps(
        {"images": {"dtype": "F32", "shape": [2**61, 1, 2, 2], "data_offsets": [0, 0]},
         "labels": {"dtype": "I64", "shape": [2**61], "data_offsets": [0, 0]}}).encode()))
    write(bad, "extra_tensor", batch(2, extra={"extra": ("F32", [1], f32([0]))}))
    write(bad, "nan_image", batch(2, images=f32([float("nan")] * 96)))
    write(bad, "inf_image", batch(2, images=f32([float("inf")] * 96)))
    write(bad, "label_out_of_range", batch(2, labels=i64([3, 10])))
    write(bad, "negative_label", batch(2, labels=i64([-1, 0])))

    # The digits CSV: real lines of scikit-learn's file.
    lines = gzip.decompress(DIGITS.read_bytes()).decode().splitlines()
    write("corpus/digits_csv", "first_lines", "\n".join(lines[:4]) + "\n")
    write("corpus/digits_csv", "crlf", "\r\n".join(lines[4:6]) + "\r\n")
    row = lines[0].split(",")
    def with_label(label):
        return ",".join(row[:64] + [label]) + "\n"
    def with_pixel(pixel):
        return ",".join([pixel] + row[1:]) + "\n"
    bad = "regressions/digits_csv"
    write(bad, "fractional_label", with_label("3.7"))
    write(bad, "two_numbers_in_a_field", with_label("1 2"))
    write(bad, "nan_label", with_label("nan"))
    write(bad, "nan_pixel", with_pixel("nan"))
    write(bad, "inf_pixel", with_pixel("inf"))
    write(bad, "huge_pixel", with_pixel("3e38"))
    write(bad, "short_line", ",".join(row[:10]) + "\n")

    # Suites: every shipped suite.
    for suite in sorted((ROOT / "suites").glob("*.json")):
        write("corpus/suite", suite.stem, suite.read_bytes())
    base = {"name": "x", "description": "a hostile suite", "defaults": {"model": "resnet18"},
            "sweep": {"batch": [1]}, "cpu": {}}
    def suite(**changes):
        s = json.loads(json.dumps(base))
        for k, v in changes.items():
            s[k] = v
        return json.dumps(s)
    bad = "regressions/suite"
    write(bad, "nested_5000_deep", '{"name":"x","sweep":{"batch":' + "[" * 5000 + "]" * 5000 + "}}")
    write(bad, "integer_2_to_63", suite(sweep={"batch": [2**63]}))
    write(bad, "integer_2_to_64", suite(sweep={"steps": [2**64]}))
    write(bad, "memory_budget_past_2_to_64", suite(
        defaults={"model": "resnet18", "memory_budget": "99999999999999999999GiB"}))
    write(bad, "million_points", suite(sweep={"batch": list(range(1, 1001)),
                                              "steps": list(range(1, 1001))}))
    write(bad, "points_overflow_64_bits", suite(sweep={  # 1000^7 > 2^64
        k: list(range(1, 1001)) for k in ("batch", "steps", "warmup", "seed", "ranks", "image_size",
                                          "num_classes")}))
    write(bad, "accepted_comm_keys", suite(defaults={"model": "resnet18", "comm_timeout": 5,
                                            "comm_progress": "poll"}))
    write(bad, "nul_byte", suite().replace('"x"', '"x\\u0000"', 1)[:-1] + "\x00}")

    # Records (reports/ and ci/): one real record, broken one way each.
    record = json.loads((HERE / "records/corpus/ci.jsonl").read_text().splitlines()[0])
    def broken(change):
        r = json.loads(json.dumps(record))
        change(r)
        return json.dumps(r) + "\n"  # Python writes NaN and Infinity literals, which JSON lacks
    def setter(dotted, value):
        def change(r):
            *parents, last = dotted.split(".")
            for k in parents:
                r = r[k]
            r[last] = value
        return change
    bad = "records/regressions"
    write(bad, "not_utf8.jsonl", json.dumps(record).encode().replace(b'"ok"', b'"o\xff"', 1) + b"\n")
    write(bad, "peak_bytes_a_string.jsonl", broken(setter("memory.peak_bytes_total", "8496252")))
    write(bad, "empty_step_times.jsonl", broken(setter("metrics.step_time_s.all", [])))
    write(bad, "nested_100000_deep.jsonl", "[" * 100000 + "]" * 100000 + "\n")
    write(bad, "negative_throughput.jsonl", broken(setter("metrics.throughput_img_s", -5.0)))
    write(bad, "infinite_throughput.jsonl", broken(setter("metrics.throughput_img_s", float("inf"))))
    write(bad, "nan_throughput.jsonl", broken(setter("metrics.throughput_img_s", float("nan"))))
    write(bad, "negative_step_times.jsonl", broken(setter("metrics.step_time_s.all", [-0.1, 0.2])))
    write(bad, "zero_step_times.jsonl", broken(setter("metrics.step_time_s.all", [0.0, 0.0, 0.0])))
    write(bad, "peak_bytes_minus_1.jsonl", broken(setter("memory.peak_bytes_total", -1)))
    write(bad, "peak_bytes_1_5.jsonl", broken(setter("memory.peak_bytes_total", 1.5)))
    write(bad, "peak_bytes_2_to_70.jsonl", broken(setter("memory.peak_bytes_total", 2**70)))


def harness_inputs():
    """Peak files, point files and results.jsonl as --resume reads it (round 3)."""
    peak = {"host": "node1", "device": "AMD EPYC Processor", "backend": "cpu", "precision": "fp32",
            "threads": 2, "flops_per_s": 1.2e11, "flops_method": "best of 5 square matrix products",
            "bytes_per_s": 2.1e10, "bytes_method": "best of 10 STREAM-style adds",
            "measured_at": "2026-11-26T05:00:00Z"}
    gpu = dict(peak, device="NVIDIA H100 80GB HBM3", backend="cuda", precision="bf16", threads=0,
               flops_per_s=7.0e14, bytes_per_s=3.0e12)
    def peaks(*entries):
        return json.dumps({"kind": "dlbench_peaks", "peaks": list(entries)}, indent=2) + "\n"
    write("corpus/peak_file", "cpu_and_gpu", peaks(peak, gpu))
    write("corpus/peak_file", "no_peaks", peaks())
    bad = "regressions/peak_file"
    write(bad, "negative_threads", peaks(dict(peak, threads=-4)))
    write(bad, "zero_threads_on_a_cpu", peaks(dict(peak, threads=0)))
    write(bad, "threads_1_7", peaks(dict(peak, threads=1.7)))
    write(bad, "threads_1e30", peaks(dict(peak, threads=1e30)))
    write(bad, "threads_2_to_64_minus_1", peaks(dict(peak, threads=2**64 - 1)))
    write(bad, "subnormal_flops", peaks(dict(peak, flops_per_s=5e-324)))
    write(bad, "rate_a_string", peaks(dict(peak, bytes_per_s="fast")))
    write(bad, "top_level_array", json.dumps([peak]))

    point = {"suite": "smoke", "index": 1, "id": "ae60907f78988f46",
             "config": {"model": "digits-cnn", "image_size": 8, "batch": 2, "steps": 1,
                        "warmup": 0, "backend": "cpu"},
             "record": "record.json", "trace_steps": 0, "trace": "", "profile": "", "mllog": "",
             "suite_file": "suites/smoke.json", "fault": ""}
    def point_with(**changes):
        p = json.loads(json.dumps(point))
        p.update(changes)
        return json.dumps(p, indent=2) + "\n"
    write("corpus/point_file", "digits", point_with())
    bad = "regressions/point_file"
    write(bad, "top_level_array", json.dumps([point]))
    write(bad, "record_a_number", point_with(record=5))
    write(bad, "trace_steps_a_string", point_with(trace_steps="3"))
    write(bad, "config_a_list", point_with(config=[1]))
    write(bad, "unknown_fault", point_with(fault="explode"))
    write(bad, "lr_1e_minus_46", point_with(config=dict(point["config"], lr=1e-46)))
    write(bad, "ranks_2_to_31", point_with(config=dict(point["config"], ranks=2**31)))

    lines = (HERE / "records/corpus/ci.jsonl").read_text().splitlines()
    write("corpus/results", "ci.jsonl", "\n".join(lines) + "\n")
    record = json.loads(lines[0])
    def results_with(change):
        r = json.loads(json.dumps(record))
        change(r)
        return json.dumps(r) + "\n" + lines[1] + "\n"
    bad = "regressions/results"
    write(bad, "accepted_torn_last_line.jsonl", lines[0] + "\n" + lines[1][:len(lines[1]) // 2])
    write(bad, "point_without_index.jsonl", results_with(lambda r: r["point"].pop("index")))
    write(bad, "point_index_1_5.jsonl", results_with(lambda r: r["point"].update(index=1.5)))
    write(bad, "without_suite_config.jsonl", results_with(lambda r: r.pop("suite_config")))
    write(bad, "ok_without_metrics.jsonl", results_with(lambda r: r.pop("metrics")))
    write(bad, "message_a_number.jsonl", results_with(lambda r: r.update(message=3)))
    write(bad, "system_a_number.jsonl", results_with(lambda r: r["suite_config"].update(system=1)))
    write(bad, "torn_line_in_the_middle.jsonl", lines[0][:40] + "\n" + lines[1] + "\n")
    write(bad, "system_null.jsonl", results_with(lambda r: r["suite_config"].update(system=None)))
    no_index = json.loads(lines[0])
    del no_index["point"]["index"]
    write(bad, "torn_tail_after_a_bad_line.jsonl",
          json.dumps(no_index) + "\n" + lines[1][:len(lines[1]) // 2])


def simulator_inputs():
    """The simulator's files (calibration, network and device) and check-ops instance texts."""
    environment = {"host": "seed", "backend": "cpu", "device": "cpu", "git_sha": "0", "cuda": "none",
                   "dlbench_version": "0.1.0", "driver": "none", "cudnn": "none", "nccl": "none",
                   "mpi": "none", "time": "2026-01-01T00:00:00Z"}
    layer = {"name": "conv1", "forward_ms": 0.2, "backward_data_ms": 0.1,
             "backward_weights_ms": 0.1, "backward_ms": 0.0, "recompute_ms": 0.0}
    calibration = {"kind": "dlbench calibration", "model": "digits-cnn", "batch": 8,
                   "image_size": 8, "num_classes": 10, "fused_relus": False, "precision": "fp32",
                   "backend": "cpu", "device": "cpu: seed", "memory_plan": "reuse",
                   "recompute": "none", "source": {"method": "profile", "environment": environment},
                   "step_ms": 1.5, "scale": 1.1, "loss_ms": 0.05, "optimizer_ms": 0.1,
                   "layers": [dict(layer, name=name) for name in (
                       "features.0", "features.1", "features.2", "features.3", "features.4",
                       "flatten", "classifier.0", "classifier.1", "classifier.2",
                       "classifier.3")],
                   "jitter": [0.9, 1.0, 1.1]}
    def calibration_with(**changes):
        return json.dumps(dict(calibration, **changes), indent=1) + "\n"
    write("corpus/calibration", "digits_cnn.json", calibration_with())
    bad = "regressions/calibration"
    write(bad, "backend_tpu.json", calibration_with(backend="tpu"))
    write(bad, "step_1e_minus_300.json", calibration_with(step_ms=1e-300))
    write(bad, "scale_1e_minus_300.json", calibration_with(scale=1e-300))
    write(bad, "layers_empty.json", calibration_with(layers=[]))
    write(bad, "jitter_a_string.json", calibration_with(jitter="wide"))
    for name, value in [("a_string", "x"), ("an_array", [1]), ("a_number", 5), ("empty", {})]:
        write(bad, f"environment_{name}.json",
              calibration_with(source={"method": "profile", "environment": value}))

    for name in ("dgx-h100", "horovod-25gbe", "big-basin-50gbe"):
        write("corpus/network", name + ".json", (ROOT / f"suites/networks/{name}.json").read_text())
    net = json.loads((ROOT / "suites/networks/dgx-h100.json").read_text())
    def network_with(level, **changes):
        n = json.loads(json.dumps(net))
        n[level].update(changes)
        return json.dumps(n, indent=1) + "\n"
    bad = "regressions/network"
    write(bad, "latency_1e308.json", network_with("net", latency_us=1e308))
    write(bad, "bandwidth_5e_minus_324.json", network_with("node", bandwidth_gbs=5e-324))

    for name in ("h100-sxm", "p100-pcie"):
        write("corpus/device", name + ".json", (ROOT / f"suites/devices/{name}.json").read_text())
    device = json.loads((ROOT / "suites/devices/h100-sxm.json").read_text())
    def device_with(**changes):
        return json.dumps(dict(device, **changes), indent=1) + "\n"
    bad = "regressions/device"
    write(bad, "reference_empty.json", device_with(reference=[]))
    write(bad, "peak_bytes_0.json", device_with(peak_bytes_per_s=0))

    for name, text in [("conv", "conv:shape=2x4x7x6,k=6,kernel=3,stride=2,pad=1,groups=2,bias=1"),
                       ("linear", "linear:shape=3x10,out=7"), ("sgd", "sgd:shape=1000,copy=1"),
                       ("dropout", "dropout:shape=4x500,p=0.5"),
                       ("max_pool", "max_pool:shape=2x3x7x7,kernel=3,stride=2,pad=1")]:
        write("corpus/op_instance", name, text)
    bad = "regressions/op_instance"
    write(bad, "hex_shape", "sgd:shape=0x10,copy=0")
    write(bad, "hex_probability", "dropout:shape=4x5,p=0x1p-1")
    write(bad, "leading_space_probability", "dropout:shape=4x5,p= 0.5")
    write(bad, "underflow_probability", "dropout:shape=4x5,p=1e-400")
    write(bad, "tensor_past_2_to_31", "linear:shape=2x8,out=2147483648")


if __name__ == "__main__":
    main()
    harness_inputs()
    simulator_inputs()
