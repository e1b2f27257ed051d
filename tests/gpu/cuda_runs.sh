#!/usr/bin/env bash
# The CUDA backend end to end on a GPU, through the command line:
#   1. resnet18 trains in fp32 and tf32, with heuristic and autotuned engines; the per-layer
#      profile names each convolution pass's cuDNN engine and its workspace;
#   2. running out of the GPU's memory exits 3; an out-of-memory under a small --memory-budget
#      is recorded as `oom` by a suite, and `dlbench run` exits 3;
#   3. data-parallel digits training on one GPU over NCCL (no MPI launcher) reaches 90% accuracy.
# Where no GPU is visible it exits 77 (skipped).
# Usage: cuda_runs.sh path/to/dlbench
set -u
dlbench=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# The suite of part 2, checked here with or without a GPU (it was invalid, unseen, until a GPU
# first ran this script).
cat >"$work/oom.json" <<'JSON'
{"name": "oom", "description": "A point beyond its memory budget is recorded as oom.",
 "defaults": {"backend": "cuda", "model": "resnet50", "batch": 64, "image_size": 224,
              "steps": 2, "warmup": 1, "memory_budget": "256MiB"},
 "sweep": {"ranks": [1]}, "cpu": {"defaults": {"backend": "cpu"}}}
JSON
"$dlbench" --suite="$work/oom.json" --out="$work/oom-dry" --dry-run >"$work/dry.log" 2>&1 \
  || { echo "FAIL: the oom suite is refused: $(tail -3 "$work/dry.log")"; exit 1; }
gpus=$("$dlbench" list | grep -c "^  *cuda:[0-9]")
if [[ $gpus -lt 1 ]]; then echo "no CUDA device is visible: skipped"; exit 77; fi

for precision in fp32 tf32; do
  for algo in heuristic autotune; do
    out=$work/r18-$precision-$algo
    timeout 300 "$dlbench" run --backend=cuda --model=resnet18 --batch=32 --image-size=64 \
      --steps=10 --warmup=2 --precision=$precision --conv-algo=$algo --trace-steps=2 \
      --json="$out.json" --profile="$out.profile.json" || { fail "resnet18 $precision $algo"; continue; }
    python3 - "$out.json" "$out.profile.json" <<'PY' || fail "resnet18 $precision $algo record"
import json, math, sys
r = json.load(open(sys.argv[1]))
p = json.load(open(sys.argv[2]))
assert r["status"] == "ok", r["status"]
m = r["metrics"]
assert m["throughput_img_s"] > 0 and all(math.isfinite(x) for x in m["losses"]), m
convs = [l for l in p["layers"] if l["kind"] == "conv2d"]
assert convs and all(len(l["algorithms"]) == 3 for l in convs), convs[:1]
a = convs[0]["algorithms"][0]
# Layers of one shape share a plan (resnet18's layer1 convolutions); the first of a shape does not.
assert not a["plan_shared"], convs[0]
assert any(l["algorithms"][0]["plan_shared"] for l in convs), "no plan was shared"
print(f"{r['config']['precision']} {r['config']['conv_algo']}: {m['throughput_img_s']:.0f} img/s, "
      f"conv1 forward engine {a['algorithm']} workspace {a['workspace_bytes']}")
PY
  done
done

# One class of cuDNN's engines per run: every pass runs an engine of that class, or says why not
# (refused) and runs the heuristic's; a cpu algorithm is refused before anything runs (exit 2).
for class in tensor_core other; do
  out=$work/r18-bf16-$class
  timeout 300 "$dlbench" run --backend=cuda --model=resnet18 --batch=32 --image-size=64 \
    --steps=4 --warmup=1 --precision=bf16 --conv-algo=class:$class --trace-steps=2 \
    --json="$out.json" --profile="$out.profile.json" || { fail "resnet18 bf16 class:$class"; continue; }
  python3 - "$out.profile.json" "$class" <<'PY' || fail "resnet18 bf16 class:$class profile"
import json, sys
p, want = json.load(open(sys.argv[1])), sys.argv[2]
passes = [a for l in p["layers"] if l["kind"] == "conv2d" for a in l["algorithms"]]
wrong = [a for a in passes if a.get("engine_class") != want and "refused" not in a]
assert passes and not wrong, wrong[:2]
ran = sum("refused" not in a for a in passes)
assert ran > 0, "no pass ran an engine of the class"
print(f"class:{want}: {ran} of {len(passes)} passes on it")
PY
done
"$dlbench" run --backend=cuda --model=digits-cnn --steps=1 --conv-algo=im2col >"$work/im2col.log" 2>&1
rc=$?
[[ $rc -eq 2 ]] || fail "--conv-algo=im2col on cuda: exit $rc, want 2: $(tail -1 "$work/im2col.log")"

# More than the GPU holds (resnet50 at batch 2048 needs ~190 GB of activations, and its largest
# tensor, 1.6e9 elements, stays below cuDNN's 2^31): cudaMalloc fails, the caching allocator
# releases its cache and retries, then it is OutOfMemory: exit 3.
timeout 300 "$dlbench" run --backend=cuda --model=resnet50 --batch=2048 --image-size=224 \
  --steps=1 --warmup=0 >"$work/device-oom.log" 2>&1
rc=$?
[[ $rc -eq 3 ]] || fail "device oom run: exit $rc, want 3: $(tail -2 "$work/device-oom.log")"

# An allocation beyond the budget: `dlbench run` exits 3, and a suite records the point as oom.
timeout 120 "$dlbench" run --backend=cuda --model=resnet50 --batch=64 --image-size=224 \
  --steps=2 --memory-budget=256MiB >"$work/oom.log" 2>&1
rc=$?
[[ $rc -eq 3 ]] || fail "oom run: exit $rc, want 3: $(tail -2 "$work/oom.log")"
timeout 300 "$dlbench" --suite="$work/oom.json" --out="$work/oom" --no-report >"$work/oom-suite.log" 2>&1 \
  || fail "oom suite: exit $?: $(tail -3 "$work/oom-suite.log")"
python3 - "$work/oom/results.jsonl" <<'PY' || fail "oom record"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert len(recs) == 1 and recs[0]["status"] == "oom", [r["status"] for r in recs]
print("oom recorded:", recs[0]["message"][:120])
PY

# Data parallel over NCCL on one GPU, one process: NCCL bootstraps without MPI.
timeout 300 "$dlbench" run --backend=cuda --comm=nccl --model=digits-cnn --data=digits \
  --batch=32 --epochs=20 --target-accuracy=0.9 --json="$work/digits.json" \
  || fail "digits over nccl"
python3 - "$work/digits.json" <<'PY' || fail "digits record"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["status"] == "ok" and r["config"]["comm"] == "nccl", (r["status"], r["config"])
acc = r["metrics"]["test_accuracy"]
assert acc >= 0.9, acc
print(f"digits over nccl: test accuracy {acc:.3f}")
PY
exit $((failures > 0))
