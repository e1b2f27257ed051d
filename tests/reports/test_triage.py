"""The device check's triage table (`python -m dlbench_reports triage DIR`), from hand-made files
of the kinds the triage rows write: each pass kind's milliseconds on both sides, the rates, the
engines and kernels named, and a table still written (with notes) when every input is missing."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from dlbench_reports.__main__ import main as cli
from dlbench_reports.triage import kernel_kind, table


def conv(name, fwd, dgrad, wgrad, flops, engines):
    return {"name": name, "kind": "conv2d", "forward_ms": fwd, "backward_data_ms": dgrad,
            "backward_weights_ms": wgrad, "backward_ms": None, "forward_flops": flops,
            "algorithms": [{"pass": p, "algorithm": e, "workspace_bytes": 0, "plan_shared": False,
                            "engine_notes": ["tensor_core"]}
                           for p, e in zip(("forward", "backward_data", "backward_filter"),
                                           engines)]}


@pytest.fixture
def triage_dir(tmp_path):
    layers = [
        conv("conv1", 2.0, 3.0, 4.0, 2e9, ("eng28", "eng0", "eng1")),
        conv("layer1.0.conv1", 1.0, 1.0, 1.0, 1e9, ("eng28", "eng3", "eng1")),
        {"name": "bn1", "kind": "batch_norm", "forward_ms": 0.5, "backward_ms": 0.25,
         "backward_data_ms": None, "backward_weights_ms": None, "algorithms": []},
        {"name": "relu", "kind": "relu", "forward_ms": 0.1, "backward_data_ms": 0.2,
         "backward_weights_ms": None, "algorithms": []},
        {"name": "maxpool", "kind": "max_pool2d", "forward_ms": 0.3, "backward_data_ms": 0.7,
         "backward_weights_ms": None, "algorithms": []},
    ]
    (tmp_path / "dlbench-profile.json").write_text(
        json.dumps({"traced_steps": 3, "statistic": "median", "layers": layers}))
    (tmp_path / "dlbench-record.json").write_text(json.dumps(
        {"metrics": {"phases": {"loss_s": 0.0004, "optimizer_s": 0.002}}}))
    kernels = [  # microseconds over 3 profiled steps
        ("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc", 3, 3000),
        ("sm90_xmma_dgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nchw", 3, 6000),
        ("sm90_xmma_wgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc", 3, 4500),
        ("cudnn::bn_fw_tr_1C11_kernel_NCHW<__nv_bfloat16, float, 512, true, 1>", 3, 1500),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::threshold_kernel>", 6, 600),
        ("void at::native::(anonymous namespace)::max_pool_forward_nhwc<c10::BFloat16>", 3, 300),
        ("void (anonymous namespace)::cunn_SoftMaxForward<4, float, float>", 3, 90),
        ("void at::native::multi_tensor_apply_kernel<at::native::TensorListMetadata<3>>", 3, 900),
    ]
    (tmp_path / "pytorch-kernels.csv").write_text(
        "name,launches,device_us\n" + "".join(f'"{n}",{c},{us}\n' for n, c, us in kernels))
    (tmp_path / "pytorch-profile.json").write_text(json.dumps({"steps": 3}))
    return tmp_path


def row(text, kind):
    line = next(l for l in text.splitlines() if l.startswith(f"| {kind} |"))
    return [c.strip() for c in line.strip("|").split("|")]


def test_each_kind_sums_both_sides(triage_dir):
    t = table(triage_dir)
    fwd = row(t, "conv forward")
    assert fwd[1:3] == ["3.00", "1.00"]  # 2 + 1 ms; 3000 us over 3 steps
    assert fwd[3] == "1.0 TFLOP/s"  # 3e9 FLOPs in 3 ms
    assert fwd[4] == "eng28"
    assert fwd[5].startswith("sm90_xmma_fprop")
    dgrad = row(t, "conv data gradient")
    assert dgrad[1:3] == ["4.00", "2.00"]
    assert dgrad[4] == "eng0, eng3"  # the engine that took longest first
    assert row(t, "conv weight gradient")[1:3] == ["5.00", "1.50"]
    assert row(t, "batch norm")[1:3] == ["0.75", "0.50"]
    assert row(t, "element-wise")[1:3] == ["0.30", "0.20"]
    assert row(t, "pooling")[1:3] == ["1.00", "0.10"]
    assert row(t, "loss")[1:3] == ["0.40", "0.03"]
    assert row(t, "optimizer")[1:3] == ["2.00", "0.30"]
    assert row(t, "**total**")[1:3] == ["16.45", "5.63"]


def test_kernel_names_fall_into_their_kinds():
    assert kernel_kind("ncclDevKernel_AllReduce_Sum_bf16_RING_LL") == "all-reduce"
    assert kernel_kind("cutlass_80_wgrad_tensorop_s1688") == "conv weight gradient"
    assert kernel_kind("something_unheard_of") == "other"


def test_ncu_bytes_give_a_rate(triage_dir):
    (triage_dir / "ncu.csv").write_text(
        '"Kernel Name","dram__bytes.sum"\n'
        '"","byte"\n'  # ncu's units row
        '"cudnn::bn_fw_tr_1C11_kernel_NCHW","750,000,000"\n')
    assert row(table(triage_dir), "batch norm")[3] == "1000 GB/s"  # 0.75 GB in 0.75 ms


def test_missing_inputs_still_give_a_table_that_says_so(tmp_path, capsys):
    assert cli(["triage", str(tmp_path)]) == 0
    text = (tmp_path / "triage.md").read_text()
    assert "| **total** |  |  | | | |" in text
    assert "- dlbench: no per-layer profile" in text
    assert "- PyTorch: no PyTorch profile" in text
    assert capsys.readouterr().out == text


def test_a_folder_that_is_not_one_is_one_line(tmp_path, capsys):
    assert cli(["triage", str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


PEER_PYTHON = "/usr/bin/python3"  # Debian's PyTorch, which scripts/install-deps.sh installs


def has_torch() -> bool:
    return bool(shutil.which(PEER_PYTHON)) and subprocess.run(
        [PEER_PYTHON, "-c", "import torch, torchvision"], capture_output=True).returncode == 0


@pytest.mark.skipif(not has_torch(), reason="no PyTorch for /usr/bin/python3")
def test_the_pytorch_profile_on_the_cpu_feeds_the_table(tmp_path):
    """The profiler script's files, made on the CPU (no kernels there: the table says so by an
    empty PyTorch column), read back by the table."""
    script = Path(__file__).resolve().parents[2] / "reports" / "peers" / "pytorch_profile.py"
    done = subprocess.run([PEER_PYTHON, str(script), "--model=resnet18", "--batch=2",
                           "--image-size=32", "--precision=fp32", "--backend=cpu", "--warmup=1",
                           "--steps=2", f"--out={tmp_path}"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "pytorch-profile.json").read_text())
    assert summary["steps"] == 2 and len(summary["step_ms"]) == 2 and summary["img_s"] > 0
    ops = (tmp_path / "pytorch-ops.csv").read_text().splitlines()
    assert ops[0] == "name,calls,host_us,device_us"
    assert any(line.startswith("aten::convolution,") for line in ops), ops[:10]
    assert (tmp_path / "pytorch-kernels.csv").read_text() == "name,launches,device_us\n"
    json.loads((tmp_path / "pytorch-trace.json").read_text())
    assert "no PyTorch profile" not in table(tmp_path)
