#!/usr/bin/env bash
# Published scaling points, simulated from their stated hardware (docs/simulation.md, "Published
# points"), each on its preset and roofline-calibrated on its GPU:
# - Horovod (Sergeev and Del Balso 2018; its docs/benchmarks.rst): 128 servers of 4 Pascal GPUs
#   on RoCE-capable 25 Gbit/s Ethernet, tf_cnn_benchmarks at batch 64 a GPU: ResNet-101 at 90%
#   scaling efficiency on 512 GPUs. Reproduced within 5 percentage points.
# - Horovod's VGG-16 (68% at 512 GPUs) and Goyal et al. 2017 (about 90% from 8 to 256 GPUs) are
#   not reproduced; the predictions the documentation gives for them, and the assumption that
#   breaks, are checked here so that the documentation stays true.
# Usage: published_points.sh path/to/dlbench
set -u
dlbench=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/check.sh"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
py="$root/.venv/bin/python"

# Horovod: tensor fusion's 64 MB buffer, all-reduced as backward goes (its default then).
for model in resnet101 vgg16; do
  "$dlbench" simulate --roofline=p100-pcie --model=$model --batch=64 --precision=fp32 \
    --network=horovod-25gbe --ranks=1,16,128,512 --overlap=backward --bucket-mb=64 --no-trace \
    --out="$work/horovod" >"$work/horovod-$model.out" 2>&1
  check "horovod $model: simulated" test $? -eq 0
done
# Goyal et al.: each layer's gradients all-reduced as soon as backprop has them.
"$dlbench" simulate --roofline=p100-sxm2 --model=resnet50 --batch=32 --precision=fp32 \
  --network=big-basin-50gbe --ranks=8,256 --overlap=backward --bucket-mb=0.001 --no-trace \
  --out="$work/goyal" >"$work/goyal.out" 2>&1
check "goyal: simulated" test $? -eq 0
cat "$work/horovod-resnet101.out" "$work/horovod-vgg16.out" "$work/goyal.out"

check "the published points" "$py" - "$work" <<'PY'
import json, sys
def records(name):
    return [json.loads(l) for l in open(f"{sys.argv[1]}/{name}/results.jsonl")]
def efficiency(rs, model, ranks):
    [r] = [r for r in rs if r["config"]["model"] == model and r["config"]["ranks"] == ranks]
    return r["metrics"]["scaling_efficiency"], r

horovod = records("horovod")
e, r = efficiency(horovod, "resnet101", 512)
print(f"horovod resnet101 at 512 GPUs: {e:.1%} (published: 90%)")
assert abs(e - 0.90) <= 0.05, e
# Fitted to Horovod's own single-GPU figure, and the ring its NCCL 2 had.
assert r["simulation"]["calibration_source"]["reference"]["img_s"] == 119.4
assert {x["algorithm"] for x in r["simulation"]["reductions"]} == {"ring"}

e, _ = efficiency(horovod, "vgg16", 512)
print(f"horovod vgg16 at 512 GPUs: {e:.1%} (published: 68%; docs/simulation.md: 83.5%)")
assert abs(e - 0.835) <= 0.005, e

goyal = records("goyal")
e8, _ = efficiency(goyal, "resnet50", 8)
e256, r = efficiency(goyal, "resnet50", 256)
print(f"goyal resnet50 from 8 to 256 GPUs: {e256 / e8:.1%} (published: about 90%; "
      "docs/simulation.md: 100.0%)")
assert abs(e256 / e8 - 1.0) <= 0.005, (e8, e256)
assert {x["algorithm"] for x in r["simulation"]["reductions"]} == {"halving-doubling"}
PY

# Goyal et al. with each GPU's step spread by 9% (a normal jitter): the published 90%, which
# shows what the roofline's ranks at one speed leave out (docs/simulation.md).
"$dlbench" simulate --roofline=p100-sxm2 --model=resnet50 --batch=32 --precision=fp32 \
  --network=big-basin-50gbe --ranks=8,256 --overlap=backward --bucket-mb=0.001 --no-trace \
  --jitter=cv:0.09 --out="$work/goyal-jitter" >"$work/goyal-jitter.out" 2>&1
check "goyal with a 9% jitter: simulated" test $? -eq 0
check "goyal with a 9% jitter: about 90% from 8 to 256 GPUs" "$py" - "$work" <<'PY'
import json, sys
rs = [json.loads(l) for l in open(f"{sys.argv[1]}/goyal-jitter/results.jsonl")]
e = {r["config"]["ranks"]: r["metrics"]["scaling_efficiency"] for r in rs}
print(f"goyal with a 9% jitter, 8 to 256 GPUs: {e[256] / e[8]:.1%}")
assert abs(e[256] / e[8] - 0.90) <= 0.02, e
assert all(r["simulation"]["jitter"] == "cv:0.09" for r in rs)
PY
check_summary published_points
