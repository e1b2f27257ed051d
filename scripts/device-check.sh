#!/usr/bin/env bash
# Runs on a GPU machine, from the repository root, with the bundle that scripts/device-bundle.sh
# packed here (build-device/bundle.tar.xz). It needs no Debian packages and no MPI: the CUDA
# libraries come from the machine (PyTorch's pip packages, or /usr/local/cuda).
#
# usage: scripts/device-check.sh BUNDLE.tar.xz [triage|tests|bench|all] [--budget-s=N]
#
# A lent GPU is short and fixed (docs/cuda.md, "On a lent GPU"), so the check is a list of rows
# in order of value, each with its planned seconds, and it keeps what it has:
#   - every finished row is appended at once to the record, device-check-<UTC time>.jsonl, in $OUT
#     (the device tool's folder) or results/device/: a kill keeps every finished row. Its first
#     line is the header (version, GPU, PyTorch, budget), its last the summary, which a killed
#     check lacks;
#   - --budget-s=N: a row starts only if its planned seconds fit in what is left, and is stopped
#     at the budget's end (status `timeout`); the rows that did not start are `not_run` (budget);
#   - the rows' files (the op checker's records, the micro suite's results) are packed into
#     device-check-<time>-files.tar.gz after each row that wrote one: the device tool brings back
#     at most 8 files.
# Where no GPU is visible every row that needs one is `skip`, and the check still writes its
# record (tests/integration/device_check.sh runs it so, here).
#
#   tests: the CUDA test programs (each op against the CPU backend, one resnet18 step against the
#          CPU, the library calls); the op checker (dlbench check-ops --backend=cuda: every op
#          instance of every model at 32 px and batch 2, and issue 25's shapes, in fp32, tf32,
#          fp16 and bf16, each pass against the float64 reference); resnet50's per-layer
#          profile at 224 px in bf16 and tf32; one guarded step
#          (--memory-guard) per precision; compute-sanitizer's memcheck over a 2-step run (a
#          refusal of the device is recorded as `refused`, not failed); the end-to-end runs, NCCL
#          on one GPU, the resnet18 parity step against PyTorch on the same GPU; the micro suite;
#   triage: where one step's milliseconds go, beside PyTorch (at most 320 s; every row's whole
#          log kept): the GPU, clocks and versions; dlbench resnet50 bf16 b256 at 224 px with its
#          per-layer profile, trace and cuDNN frontend log; PyTorch's same step under
#          torch.profiler (by operator and by kernel, and its trace); ncu over one dlbench step
#          (each kernel's duration, DRAM bytes and tensor pipes, its NVTX range); then dlbench
#          with --cuda-graph and PyTorch's throughput if the step is under 0.3 s, else the tf32
#          b128 profile. Last, the table of milliseconds per pass kind, dlbench beside PyTorch
#          (python -m dlbench_reports triage), printed and kept as triage/triage.md;
#   bench: resnet50 in bf16 at batch 256 beside PyTorch's eager AMP first (the target,
#          docs/cuda.md), then the other precisions and models: dlbench, PyTorch and dlbench with
#          --cuda-graph alternating, point by point, each its own row.
# Exit: 1 if any row failed, else 0.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
usage="usage: device-check.sh BUNDLE.tar.xz [triage|tests|bench|all] [--budget-s=N]"
bundle_tar=""
what=all
budget=0  # 0: no budget
for arg in "$@"; do
  case $arg in
    --budget-s=*) budget=${arg#--budget-s=} ;;
    triage | tests | bench | all) what=$arg ;;
    -*) echo "device-check: unknown option $arg; $usage" >&2; exit 2 ;;
    *) [[ -z $bundle_tar ]] || { echo "device-check: $usage" >&2; exit 2; }; bundle_tar=$arg ;;
  esac
done
[[ -n $bundle_tar ]] || { echo "device-check: $usage" >&2; exit 2; }
[[ -f $bundle_tar ]] || { echo "device-check: no bundle at $bundle_tar" >&2; exit 2; }
[[ $budget =~ ^[0-9]+$ ]] || { echo "device-check: --budget-s takes whole seconds" >&2; exit 2; }
# Triage fits one short call: 320 s unless told otherwise.
[[ $what == triage && $budget == 0 ]] && budget=320
start=$SECONDS
deadline=$((budget > 0 ? start + budget : 0))

out=${OUT:-$root/results/device}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# xz-compressed (device-bundle.sh); Python's tarfile where the machine's tar has no xz.
tar -C "$work" -xJf "$bundle_tar" 2>/dev/null ||
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
    "$bundle_tar" "$work" || { echo "device-check: cannot unpack $bundle_tar" >&2; exit 2; }
bin=$work/bundle/bin
stamp=$(date -u +%Y%m%dT%H%M%SZ)
record=$out/device-check-$stamp.jsonl
files=$work/files  # what rows write beside the record, packed after each
mkdir -p "$files"
files_tar=$out/device-check-$stamp-files.tar.gz

# CUDA's libraries: PyTorch's pip packages (nvidia/*/lib), then the toolkit's. Only dlbench's
# programs get the bundle's libraries (their libstdc++ would come before the system's for
# PyTorch), and the path the machine had is kept behind them: the driver's libcuda.so.1 may be
# found only through it.
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
bundle_path=$work/bundle/lib${cuda_libs:+:$cuda_libs}:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# dlbench as every row and script calls it: the real binary (so --suite=micro finds
# suites/dlbench_micro beside it) under the bundle's library path.
dlbench=$work/dlbench
printf '#!/bin/sh\nLD_LIBRARY_PATH=%q exec %q "$@"\n' "$bundle_path" "$bin/dlbench" >"$dlbench"
chmod +x "$dlbench"
# The digits data set (--data=digits) from the bundle: the GPU machine's scikit-learn lives in
# PyTorch's virtual environment, not where Debian puts it.
[[ -f $work/bundle/data/digits.csv.gz ]] && export DLB_DIGITS_PATH=$work/bundle/data/digits.csv.gz
export DLB_SUITES_DIR=$root/suites PYTHONUNBUFFERED=1

json_str() { python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))'; }
# tensor_cores_ok FILE: false when FILE (a run's record, or check-ops' record) counts tf32 or
# 16-bit convolution passes on engines without tensor cores: such a row fails, whatever its exit.
tensor_cores_ok() {
  python3 - "$1" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    sys.exit(0)  # no record: the row's own status says why
n = (r.get("metrics", {}).get("engines") or r.get("summary") or {}).get("without_tensor_cores", 0)
if n:
    print(f"{n} tf32 or 16-bit convolution passes ran on engines without tensor cores")
    sys.exit(1)
PY
}
append() { printf '%s\n' "$1" >>"$record"; }  # one line, appended whole: a kill keeps it
pack_files() {
  [[ -n $(ls -A "$files") ]] || return 0
  tar -C "$files" -czf "$files_tar.tmp" . && mv -f "$files_tar.tmp" "$files_tar"
}

gpus=$("$dlbench" list 2>/dev/null | grep -c "^  *cuda:[0-9]")
torch_info=$(python3 -c '
import json
try:
    import torch
    print(json.dumps({"version": torch.__version__, "cuda": torch.version.cuda,
                      "cudnn": torch.backends.cudnn.version()}))
except Exception:
    print("null")' 2>/dev/null || echo null)
gpu_name=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null \
  | head -1)
append "$(python3 -c '
import json, sys
part, version, gpu, torch_info, budget, gpus, stamp = sys.argv[1:]
print(json.dumps({"kind": "dlbench device check", "part": part, "dlbench_version": version,
                  "started": stamp, "gpu": gpu or None, "cuda_devices_dlbench_sees": int(gpus),
                  "pytorch": json.loads(torch_info), "budget_s": int(budget) or None}))' \
  "$what" "$(cat "$work/bundle/VERSION" 2>/dev/null || echo unknown)" "$gpu_name" "$torch_info" \
  "$budget" "$gpus" "$stamp")"
echo "device-check: $gpus GPU(s) visible to dlbench; record $record"

declare -A count=([pass]=0 [fail]=0 [skip]=0 [refused]=0 [timeout]=0 [not_run]=0)
# gate PLANNED NEEDS_GPU LOG CAP: whether a row that comes up now runs. Sets the caller's `left`
# (the budget's seconds left, or null), `status` (skip with rc 77 where it needs a GPU and none is
# visible, not_run where its planned seconds do not fit, else empty: run it) and `limit` (CAP
# seconds, or what is left of the budget if less); says why in LOG.
gate() {
  local planned=$1 needs_gpu=$2 log=$3
  limit=$4 left=null status="" rc=0
  ((deadline)) && left=$((deadline - SECONDS))
  : >"$log"
  if ((needs_gpu && gpus < 1)); then
    status=skip rc=77
    echo "no CUDA device is visible to dlbench: skipped" >"$log"
  elif ((deadline && SECONDS + planned > deadline)); then
    status=not_run
    echo "not_run (budget): planned ${planned} s, $left s of the budget left" >"$log"
  elif ((deadline && left < limit)); then
    limit=$left
  fi
}
# verdict RC: a row that ran: pass (0), skip (77), timeout (stopped at the budget's end), fail.
verdict() {
  if (($1 == 0)); then echo pass
  elif (($1 == 77)); then echo skip
  elif (($1 == 124 && deadline && SECONDS >= deadline)); then echo timeout
  else echo fail
  fi
}
# row NAME PLANNED_S [--gpu] [--refusal=REGEX] [--engines=RECORD] -- COMMAND...: runs it and
# appends its row: pass (exit 0), skip (77, or no GPU for a --gpu row), refused (a --refusal line
# in its output: a tool that does not support this device), timeout (stopped at the budget's
# end), fail (also a pass whose RECORD counts passes without tensor cores: tensor_cores_ok); or
# not_run when its planned seconds do not fit in what is left of the budget.
row() {
  local name=$1 planned=$2 needs_gpu=0 refusal="" engines=""
  shift 2
  while [[ $1 != -- ]]; do
    case $1 in
      --gpu) needs_gpu=1 ;;
      --refusal=*) refusal=${1#--refusal=} ;;
      --engines=*) engines=${1#--engines=} ;;
    esac
    shift
  done
  shift
  local status rc limit left t0=$SECONDS log=$work/row.log
  gate "$planned" "$needs_gpu" "$log" 600
  if [[ -z $status ]]; then
    timeout -k 10 "$limit" "$@" >"$log" 2>&1
    rc=$?
    status=$(verdict $rc)
    # A tool that does not support this device (its refusal in the output) is not a failure.
    [[ $status == fail && -n $refusal ]] && grep -Eq "$refusal" "$log" && status=refused
    [[ $status == pass && -n $engines ]] && ! tensor_cores_ok "$engines" >>"$log" && status=fail
  fi
  count[$status]=$((count[$status] + 1))
  # A failed row's whole log travels with the files: its record keeps only the tail. Triage
  # keeps every row's.
  if [[ $status == fail || $status == timeout || $what == triage ]]; then
    mkdir -p "$files/logs"
    cp "$log" "$files/logs/$name.log"
  fi
  append "{\"test\": \"$name\", \"status\": \"$status\", \"exit\": $rc, \"planned_s\": $planned, \"budget_left_s\": $left, \"seconds\": $((SECONDS - t0)), \"tail\": $(tail -c 3000 "$log" | json_str)}"
  echo "device-check: $name: $status (exit $rc, $((SECONDS - t0)) s of $planned planned)"
  pack_files
}

# What dlbench sees (its devices, and why not if it does not start): the first row of every part.
row list 5 -- "$dlbench" list
if [[ $what == tests || $what == all ]]; then
  on=(env LD_LIBRARY_PATH="$bundle_path")
  # Fast and broad first: each op against the CPU backend, one resnet18 step against the CPU.
  row cuda_library_tests 10 -- "${on[@]}" "$bin/cuda_library_tests"
  row cuda_kernels_tests 15 --gpu -- "${on[@]}" "$bin/cuda_kernels_tests"
  row cuda_memory_tests 15 --gpu -- "${on[@]}" "$bin/cuda_memory_tests"
  row cuda_backend_tests 20 --gpu -- "${on[@]}" "$bin/cuda_backend_tests"
  row cuda_mixed_precision_tests 30 --gpu -- "${on[@]}" "$bin/cuda_mixed_precision_tests"
  # The op checker: whether each op is right on the GPU, every model's instances.
  row check_ops_models32 70 --gpu --engines="$files/check-ops-models32.json" -- "$dlbench" check-ops --backend=cuda --conv-algos=heuristic --sizes=32 --batches=2 \
    --models=resnet18,resnet50,vgg16,digits-cnn --json="$files/check-ops-models32.json"
  row check_ops_alexnet63 20 --gpu --engines="$files/check-ops-alexnet63.json" -- "$dlbench" check-ops --backend=cuda --conv-algos=heuristic --models=alexnet \
    --sizes=63 --batches=2 --json="$files/check-ops-alexnet63.json"
  row check_ops_reported 40 --gpu --engines="$files/check-ops-reported.json" -- "$dlbench" check-ops --backend=cuda --conv-algos=heuristic \
    --models=alexnet,resnet18 --sizes=64,96 --batches=4 --json="$files/check-ops-reported.json"
  # Where a step's time goes: resnet50's per-layer profile (each pass's time and cuDNN engine)
  # at 224 px in bf16 and tf32, beside the bench's throughput figures.
  for precision in bf16 tf32; do
    row profile_resnet50_$precision 30 --gpu \
      --engines="$files/profile-resnet50-b64-$precision.record.json" -- \
      "$dlbench" run --backend=cuda --model=resnet50 --batch=64 --image-size=224 \
      --precision=$precision --steps=4 --warmup=1 --trace-steps=3 \
      --profile="$files/profile-resnet50-b64-$precision.json" \
      --json="$files/profile-resnet50-b64-$precision.record.json"
  done
  for precision in fp32 bf16 fp16; do
    row memory_guard_$precision 10 --gpu -- "$dlbench" run --backend=cuda --model=resnet18 \
      --image-size=64 --batch=2 --steps=1 --warmup=0 --precision=$precision --memory-guard
  done
  # memcheck over a 2-step run: every kernel's and library call's accesses. It works on one of
  # the GPU machine's two runtimes; where it refuses the device, that is recorded, not failed.
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  if [[ -x $sanitizer ]]; then
    row memcheck_digits 60 --gpu --refusal='Device not supported|error 999|Unable to (find|load|initiali[sz]e)' \
      -- "${on[@]}" "$sanitizer" --tool memcheck --error-exitcode 99 \
      "$bin/dlbench" run --backend=cuda --model=digits-cnn --batch=32 --steps=2 --warmup=0
  else
    row memcheck_digits 60 --gpu -- sh -c 'echo "compute-sanitizer is not installed"; exit 77'
  fi
  row cuda_runs 75 --gpu -- bash "$root/tests/gpu/cuda_runs.sh" "$dlbench"
  # --decode=gpu: nvJPEG and the image kernels training resnet18 from files and shards, beside
  # --decode=cpu; bench input's GPU rows; and training to a target accuracy.
  row decode_gpu 90 --gpu -- bash "$root/tests/gpu/decode_gpu.sh" "$dlbench"
  # Each class of cuDNN's engines on every distinct layer of resnet50 (fp32), beside the heuristic.
  row bench_conv_classes 40 --gpu -- "$dlbench" bench conv --backend=cuda --model=resnet50 \
    --image-size=224 --batch=32 --repeat=3 --algos=all --json="$files/bench-conv-classes.json"
  row nccl_one_gpu 10 --gpu -- bash "$root/tests/gpu/nccl_one_gpu.sh" "$dlbench"
  row parity_resnet18_gpu 25 --gpu -- python3 "$root/tests/parity/torch_parity.py" "$dlbench" \
    "$work/parity" --backend=cuda --torch-device=cuda
  # The micro suite: the GPU's measured peak, every GEMM, convolution and copy row against it,
  # and NCCL's all-reduce. A failed benchmark is an error row in micro.json, not a failed run:
  # every row must have run, and the GPU's rows must be there.
  cat >"$work/micro_rows.py" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
bad = [b["name"] + ": " + b.get("error_message", "") for b in d["benchmarks"] if b.get("error_occurred")]
assert not bad, bad
assert d["context"].get("gpu rows") == "registered", d["context"].get("gpu rows")
assert any(b["name"].startswith("conv/cuda/") for b in d["benchmarks"]), "no cuda conv rows"
print(len(d["benchmarks"]), "rows, none failed")
PY
  row micro 120 --gpu -- bash -c 'DLBENCH_PEAK_FILE="$2/peaks.json" "$1" --suite=micro --out="$2" \
    --no-report && python3 "$3" "$2/micro.json"' micro "$dlbench" "$files/micro" "$work/micro_rows.py"
fi

# bench_row NAME PLANNED_S RUNNER MODEL BATCH PRECISION: one run of dlbench (RUNNER dlbench or
# dlbench-cuda-graph) or of PyTorch's peer at 224x224, 20 timed steps after 5, as a row whose
# `bench` field holds the throughput, the median step and the peak memory, or the error.
bench_row() {
  local name=$1 planned=$2 runner=$3 model=$4 batch=$5 precision=$6
  local common=(--model="$model" --batch="$batch" --image-size=224 --precision="$precision"
                --steps=20 --warmup=5)
  local status rc limit left t0=$SECONDS rec=$work/bench.json log=$work/bench.log
  rm -f "$rec"
  gate "$planned" 1 "$log" 300
  if [[ -z $status ]]; then
    case $runner in
      dlbench) timeout -k 10 "$limit" "$dlbench" run --backend=cuda "${common[@]}" --json="$rec" >"$log" 2>&1 ;;
      dlbench-cuda-graph) timeout -k 10 "$limit" "$dlbench" run --backend=cuda "${common[@]}" --cuda-graph \
                            --json="$rec" >"$log" 2>&1 ;;
      pytorch) timeout -k 10 "$limit" python3 "$root/reports/peers/pytorch_train.py" --backend=cuda \
                 "${common[@]}" >"$rec" 2>"$log" ;;
    esac
    rc=$?
    status=$(verdict $rc)
    [[ $status == pass && $runner != pytorch ]] && ! tensor_cores_ok "$rec" >>"$log" && status=fail
  fi
  count[$status]=$((count[$status] + 1))
  local line
  line=$(python3 - "$rec" "$log" "$name" "$status" "$rc" "$planned" "$((SECONDS - t0))" "$runner" \
    "$model" "$batch" "$precision" "$left" <<'PY'
import json, sys
rec, log, name, status, rc, planned, seconds, runner, model, batch, precision, left = sys.argv[1:]
bench = {"runner": runner, "model": model, "batch": int(batch), "image_size": 224,
         "precision": precision}
try:  # dlbench's record, or the peer's (its last line); the same result schema
    text = open(rec).read().strip()
    try:
        r = json.loads(text)
    except ValueError:
        r = json.loads(text.splitlines()[-1])
    bench["status"] = r.get("status")
    if r.get("status") == "ok":
        m = r["metrics"]
        bench.update(img_s=m["throughput_img_s"], step_median_s=m["step_time_s"]["median"],
                     peak_bytes=r.get("memory", {}).get("peak_bytes_total"))
        if m.get("cuda_graph") is not None:
            bench["cuda_graph"] = m["cuda_graph"]
        env = r.get("environment", {})
        for k in ("torch", "cudnn"):
            if k in env:
                bench[k] = env[k]
    else:
        bench["message"] = r.get("message")
except (OSError, ValueError, IndexError, KeyError, TypeError, AttributeError):
    pass
print(json.dumps({"test": name, "status": status, "exit": int(rc), "planned_s": int(planned),
                  "budget_left_s": json.loads(left),
                  "seconds": int(seconds), "bench": bench,
                  "tail": open(log, errors="replace").read()[-1500:] if status != "pass" else ""}))
PY
)
  append "$line"
  echo "device-check: $name: $status ($((SECONDS - t0)) s) $(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["bench"].get("img_s", ""))' "$line") img/s"
}

if [[ $what == triage ]]; then
  tri=$files/triage
  mkdir -p "$tri"
  shape=(--model=resnet50 --batch=256 --image-size=224 --precision=bf16)
  row triage_gpu 10 --gpu -- bash -c 'nvidia-smi && nvidia-smi -q -d CLOCK,PERFORMANCE &&
    "$1" list && python3 -c "import torch; print(\"torch\", torch.__version__, torch.version.cuda,
    torch.backends.cudnn.version())"' triage_gpu "$dlbench"
  # The step itself, with what cuDNN's heuristics returned and the frontend filtered out.
  row triage_dlbench 60 --gpu --engines="$tri/dlbench-record.json" -- env CUDNN_FRONTEND_LOG_INFO=1 \
    CUDNN_FRONTEND_LOG_FILE="$tri/cudnn-frontend.log" "$dlbench" run --backend=cuda "${shape[@]}" \
    --warmup=2 --steps=3 --trace-steps=3 --profile="$tri/dlbench-profile.json" \
    --trace="$tri/dlbench-trace.json" --json="$tri/dlbench-record.json"
  row triage_pytorch 45 --gpu -- python3 "$root/reports/peers/pytorch_profile.py" "${shape[@]}" \
    --warmup=2 --steps=3 --out="$tri"
  # Each kernel of one step (its first, after the plans are made): duration, DRAM bytes, tensor
  # pipes, and the NVTX range (layer and pass) it ran in. A metric this ncu does not know
  # (they differ by architecture) is dropped for the Speed of Light section alone.
  ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  cat >"$work/ncu_row.sh" <<'SH'
ncu=$1 bin=$2 out=$3
shift 3
run=("$bin" run --backend=cuda "$@" --warmup=0 --steps=1)
[ -x "$ncu" ] || { echo "ncu is not installed"; exit 77; }
common=(--nvtx --csv --page raw --print-units base --launch-count 1500 --target-processes all)
metrics=gpu__time_duration.sum,dram__bytes.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
"$ncu" "${common[@]}" --metrics "$metrics" "${run[@]}" >"$out" 2>"$out.err" && exit 0
grep -Eq "metric|Metric" "$out.err" || { cat "$out.err"; exit 1; }
echo "ncu refused a metric; the Speed of Light section alone:"; cat "$out.err"
"$ncu" "${common[@]}" --section SpeedOfLight --metrics dram__bytes.sum "${run[@]}" >"$out"
SH
  row triage_ncu 120 --gpu --refusal='ERR_NVGPUCTRPERM|not supported on this device' -- \
    env LD_LIBRARY_PATH="$bundle_path" bash "$work/ncu_row.sh" "$ncu" "$bin/dlbench" \
    "$tri/ncu.csv" "${shape[@]}"
  # A fast step (under 0.3 s) is worth its throughput beside PyTorch's; a slow one, the tf32 view.
  step_s=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metrics"]["step_time_s"]["median"])' \
    "$tri/dlbench-record.json" 2>/dev/null || echo 9)
  if python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) < 0.3 else 1)' "$step_s"; then
    bench_row "bench resnet50-b256-bf16 dlbench-cuda-graph" 30 dlbench-cuda-graph resnet50 256 bf16
    bench_row "bench resnet50-b256-bf16 pytorch" 30 pytorch resnet50 256 bf16
  else
    row triage_tf32_profile 60 --gpu --engines="$tri/dlbench-record-tf32-b128.json" -- \
      "$dlbench" run --backend=cuda --model=resnet50 --batch=128 \
      --image-size=224 --precision=tf32 --warmup=2 --steps=3 --trace-steps=3 \
      --profile="$tri/dlbench-profile-tf32-b128.json" --json="$tri/dlbench-record-tf32-b128.json"
  fi
  # The table last: milliseconds per pass kind, dlbench beside PyTorch.
  PYTHONPATH=$root/reports python3 -m dlbench_reports triage "$tri" >"$work/triage.log" 2>&1 ||
    echo "device-check: the triage table failed: $(tail -3 "$work/triage.log")"
  pack_files
fi

if [[ $what == bench || $what == all ]]; then
  # The target first (resnet50 bf16 at batch 256 against PyTorch's eager AMP), then the other
  # 16-bit rows, then fp32 and tf32; dlbench and PyTorch alternate, point by point. The planned
  # seconds include start-up: cuDNN's plans for dlbench, the import and cuDNN's for PyTorch.
  points=(
    "resnet50 256 bf16 60" "resnet50 256 fp16 60" "resnet50 128 tf32 50" "resnet50 128 fp32 60"
    "resnet18 256 bf16 40" "vgg16 256 bf16 60" "alexnet 256 bf16 30"
    "resnet18 128 tf32 40" "vgg16 64 fp32 60" "alexnet 128 fp32 30"
    "resnet50 64 fp32 45" "resnet50 64 tf32 40" "resnet18 64 fp32 30" "resnet18 128 fp32 35"
    "resnet18 64 tf32 30" "resnet18 256 fp16 40" "vgg16 64 tf32 50" "vgg16 128 fp32 80"
    "vgg16 128 tf32 70" "vgg16 256 fp16 60" "alexnet 64 fp32 25" "alexnet 64 tf32 25"
    "alexnet 128 tf32 25" "alexnet 256 fp16 30")
  for p in "${points[@]}"; do
    read -r model batch precision planned <<<"$p"
    point="$model-b$batch-$precision"
    bench_row "bench $point dlbench" "$planned" dlbench "$model" "$batch" "$precision"
    bench_row "bench $point pytorch" "$planned" pytorch "$model" "$batch" "$precision"
    if [[ $precision == fp16 || $precision == bf16 ]]; then
      bench_row "bench $point dlbench-cuda-graph" "$planned" dlbench-cuda-graph "$model" "$batch" \
        "$precision"
    fi
  done
fi

append "$(python3 -c '
import json, sys
keys = ["pass", "fail", "skip", "refused", "timeout", "not_run"]
vals = dict(zip(keys, map(int, sys.argv[1:7])))
print(json.dumps({"summary": vals, "seconds": int(sys.argv[7])}))' \
  "${count[pass]}" "${count[fail]}" "${count[skip]}" "${count[refused]}" "${count[timeout]}" \
  "${count[not_run]}" "$((SECONDS - start))")"
pack_files
[[ -f $files/triage/triage.md ]] && cat "$files/triage/triage.md"
echo "device-check: wrote $record; ${count[pass]} passed, ${count[fail]} failed, ${count[skip]} skipped, ${count[refused]} refused, ${count[timeout]} stopped at the budget, ${count[not_run]} not run"
exit $((count[fail] > 0))
