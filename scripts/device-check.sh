#!/usr/bin/env bash
# Runs on a GPU machine, from the repository root, with the bundle that scripts/device-bundle.sh
# packed here (build-device/bundle.tar.gz). It needs no Debian packages and no MPI: the CUDA
# libraries come from the machine (PyTorch's pip packages, or /usr/local/cuda).
#
#   tests: first the op checker on the CUDA backend (dlbench check-ops: every op instance of every
#          model at 32 px and batch 2, and issue 25's shapes, in fp32, tf32, fp16 and bf16, each
#          pass against the float64 reference; its records, check-ops-*.json, next to the
#          record) and one guarded step (--memory-guard) in fp32, bf16 and fp16; then every
#          gpu-labelled test program and script, the cuDNN/cuBLASLt checks, the resnet18 parity
#          step against PyTorch on the same GPU (strict fp32), and the micro suite (its
#          directory, micro-<UTC time>/, next to the record);
#   bench: resnet50, resnet18, vgg16 and alexnet at 224x224: batch 64 and 128 in fp32 and tf32,
#          batch 256 in fp16 and bf16 (PyTorch: AMP with channels_last), those also with
#          --cuda-graph; dlbench and PyTorch alternating, point by point.
# It writes one JSON record, device-check-<UTC time>.json, into $OUT (the device tool's folder)
# or results/device/, and exits 1 if any test failed.
#
# usage: scripts/device-check.sh BUNDLE.tar.gz [tests|bench|all]
# The device tool allows 10 minutes a command: run `tests` and `bench` as two calls there.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bundle_tar=${1:?usage: device-check.sh BUNDLE.tar.gz [tests|bench|all]}
what=${2:-all}
out=${OUT:-$root/results/device}
mkdir -p "$out"
work=$(mktemp -d)
tar -C "$work" -xzf "$bundle_tar"
bin=$work/bundle/bin
dlbench=$bin/dlbench

# CUDA's libraries: PyTorch's pip packages (nvidia/*/lib), then the toolkit's.
cuda_libs=$(python3 - <<'PY' 2>/dev/null
import glob, os
try:
    import nvidia
    dirs = sorted({os.path.dirname(p) for d in nvidia.__path__
                   for p in glob.glob(os.path.join(d, "**", "lib*.so*"), recursive=True)})
    print(":".join(dirs))
except ImportError:
    pass
PY
)
export LD_LIBRARY_PATH=$work/bundle/lib:${cuda_libs}:/usr/local/cuda/lib64
export DLB_SUITES_DIR=$root/suites PYTHONUNBUFFERED=1

json_str() { python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))'; }
results=$work/results.jsonl
failures=0
# check NAME COMMAND...: runs it, records pass (0), skip (77) or fail, the seconds and the tail.
check() {
  local name=$1; shift
  local t0=$SECONDS log=$work/$name.log
  timeout 500 "$@" >"$log" 2>&1
  local rc=$? status=pass
  ((rc == 77)) && status=skip
  ((rc != 0 && rc != 77)) && { status=fail; failures=$((failures + 1)); }
  echo "device-check: $name: $status (exit $rc, $((SECONDS - t0)) s)"
  printf '{"test": "%s", "status": "%s", "exit": %d, "seconds": %d, "tail": %s}\n' "$name" \
    "$status" "$rc" "$((SECONDS - t0))" "$(tail -c 3000 "$log" | json_str)" >>"$results"
}

check list "$dlbench" list
if [[ $what == tests || $what == all ]]; then
  # The op checker first: the first thing a GPU should show is whether each op is right.
  stamp=$(date -u +%Y%m%dT%H%M%SZ)
  check check_ops_models32 "$dlbench" check-ops --backend=cuda --sizes=32 --batches=2 \
    --models=resnet18,resnet50,vgg16,digits-cnn --json="$out/check-ops-models32-$stamp.json"
  check check_ops_alexnet63 "$dlbench" check-ops --backend=cuda --models=alexnet --sizes=63 \
    --batches=2 --json="$out/check-ops-alexnet63-$stamp.json"
  check check_ops_reported "$dlbench" check-ops --backend=cuda --models=alexnet,resnet18 \
    --sizes=64,96 --batches=4 --json="$out/check-ops-reported-$stamp.json"
  for precision in fp32 bf16 fp16; do
    check memory_guard_$precision "$dlbench" run --backend=cuda --model=resnet18 --image-size=64 \
      --batch=2 --steps=1 --warmup=0 --precision=$precision --memory-guard
  done
  check cuda_library_tests "$bin/cuda_library_tests"
  check cuda_memory_tests "$bin/cuda_memory_tests"
  check cuda_kernels_tests "$bin/cuda_kernels_tests"
  check cuda_backend_tests "$bin/cuda_backend_tests"
  check cuda_mixed_precision_tests "$bin/cuda_mixed_precision_tests"
  check cuda_runs bash "$root/tests/gpu/cuda_runs.sh" "$dlbench"
  check nccl_one_gpu bash "$root/tests/gpu/nccl_one_gpu.sh" "$dlbench"
  check parity_resnet18_gpu python3 "$root/tests/parity/torch_parity.py" "$dlbench" \
    "$work/parity" --backend=cuda --torch-device=cuda
  # The micro suite: the GPU's measured peak, every GEMM, convolution and copy row against it,
  # and NCCL's all-reduce. Its results directory (micro.json, peaks.json) comes back in $OUT.
  micro_out=$out/micro-$(date -u +%Y%m%dT%H%M%SZ)
  check micro env DLBENCH_PEAK_FILE="$micro_out/peaks.json" "$dlbench" --suite=micro \
    --out="$micro_out" --no-report
  # A failed row is an error row in micro.json, not a failed run: every row must have run, and
  # the GPU's rows must be there.
  check micro_rows python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
bad = [b["name"] + ": " + b.get("error_message", "") for b in d["benchmarks"] if b.get("error_occurred")]
assert not bad, bad
assert d["context"].get("gpu rows") == "registered", d["context"].get("gpu rows")
assert any(b["name"].startswith("conv/cuda/") for b in d["benchmarks"]), "no cuda conv rows"
print(len(d["benchmarks"]), "rows, none failed")' "$micro_out/micro.json"
fi

bench=$work/bench.jsonl
if [[ $what == bench || $what == all ]]; then
  for model in resnet50 resnet18 vgg16 alexnet; do
    # fp32 and tf32 at batch 64 and 128; fp16 and bf16 (PyTorch: AMP with channels_last) at 256,
    # the batch of the GPU target for resnet50 bf16 (1.2x PyTorch eager AMP, docs/cuda.md).
    for config in 64:fp32 64:tf32 128:fp32 128:tf32 256:fp16 256:bf16; do
      batch=${config%%:*} precision=${config##*:}
      {
        point="$model b$batch $precision"
        "$dlbench" run --backend=cuda --model=$model --batch=$batch --image-size=224 \
          --precision=$precision --steps=20 --warmup=5 --json="$work/d.json" >"$work/d.log" 2>&1
        drc=$?
        # The 16-bit rows again with the step replayed from a CUDA graph (--cuda-graph).
        grc=skipped
        if [[ $precision == fp16 || $precision == bf16 ]]; then
          "$dlbench" run --backend=cuda --model=$model --batch=$batch --image-size=224 \
            --precision=$precision --steps=20 --warmup=5 --cuda-graph --json="$work/g.json" \
            >"$work/g.log" 2>&1
          grc=$?
        fi
        python3 "$root/reports/peers/pytorch_train.py" --backend=cuda --model=$model \
          --batch=$batch --image-size=224 --precision=$precision --steps=20 --warmup=5 \
          >"$work/t.json" 2>"$work/t.log"
        trc=$?
        python3 - "$work/d.json" "$work/t.json" "$drc" "$trc" "$model" "$batch" "$precision" \
          "$work/d.log" "$work/t.log" "$work/g.json" "$grc" "$work/g.log" >>"$bench" <<'PY'
import json, sys
dpath, tpath, drc, trc, model, batch, precision, dlog, tlog, gpath, grc, glog = sys.argv[1:]
row = {"model": model, "batch": int(batch), "image_size": 224, "precision": precision}
def record(path, rc):
    try:
        return json.load(open(path)) if rc == "0" else None
    except (OSError, ValueError):
        return None
d = record(dpath, drc)
t, t_error = None, None
try:  # the PyTorch peer's record (reports/peers/pytorch_train.py), ok or not
    rec = json.loads(open(tpath).read().strip().splitlines()[-1])
    if rec["status"] == "ok":
        m = rec["metrics"]
        t = {"img_s": m["throughput_img_s"], "step_median_s": m["step_time_s"]["median"],
             "peak_bytes": rec.get("memory", {}).get("peak_bytes_total"),
             "torch": rec["environment"]["torch"], "cudnn": rec["environment"]["cudnn"]}
    else:
        t_error = f"{rec['status']}: {rec.get('message', '')}"
except (OSError, ValueError, IndexError, KeyError, TypeError):
    pass
if d:
    m = d["metrics"]
    row["dlbench"] = {"img_s": m["throughput_img_s"], "step_median_s": m["step_time_s"]["median"],
                      "peak_bytes": d.get("memory", {}).get("peak_bytes_total")}
else:
    row["dlbench"] = {"error": open(dlog).read()[-800:]}
row["pytorch"] = t if t else {"error": t_error or open(tlog).read()[-800:]}
if d and t:
    row["ratio_dlbench_over_pytorch"] = row["dlbench"]["img_s"] / t["img_s"]
if grc != "skipped":
    g = record(gpath, grc)
    if g:
        m = g["metrics"]
        row["dlbench_cuda_graph"] = {"img_s": m["throughput_img_s"],
                                     "step_median_s": m["step_time_s"]["median"],
                                     "peak_bytes": g.get("memory", {}).get("peak_bytes_total"),
                                     "graph": m.get("cuda_graph")}
        if t:
            row["ratio_cuda_graph_over_pytorch"] = m["throughput_img_s"] / t["img_s"]
    else:
        row["dlbench_cuda_graph"] = {"error": open(glog).read()[-800:]}
print(json.dumps(row))
PY
        echo "device-check: bench $point: $(tail -1 "$bench" | python3 -c 'import json,sys; r=json.load(sys.stdin); g=r.get("dlbench_cuda_graph"); print(r.get("dlbench",{}).get("img_s","failed"), "" if g is None else "(graph: %s)" % g.get("img_s","failed"), "vs", r.get("pytorch",{}).get("img_s","failed"), "img/s")')"
        rm -f "$work/d.json" "$work/t.json" "$work/g.json"
      }
    done
  done
fi

stamp=$(date -u +%Y%m%dT%H%M%SZ)
record=$out/device-check-$stamp.json
python3 - "$results" "$bench" "$work/bundle/VERSION" "$what" >"$record" <<'PY'
import json, os, subprocess, sys
results, bench, version, what = sys.argv[1:]
def lines(p):
    return [json.loads(l) for l in open(p)] if os.path.exists(p) else []
def run(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
try:
    import torch
    torch_info = {"version": torch.__version__, "cuda": torch.version.cuda,
                  "cudnn": torch.backends.cudnn.version()}
except ImportError:
    torch_info = None
print(json.dumps({
    "kind": "dlbench device check", "part": what,
    "dlbench_version": open(version).read().strip(),
    "gpu": run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                "--format=csv,noheader"]),
    "pytorch": torch_info,
    "tests": lines(results), "bench": lines(bench)}, indent=1))
PY
echo "device-check: wrote $record; $failures failed"
rm -rf "$work"
exit $((failures > 0))
