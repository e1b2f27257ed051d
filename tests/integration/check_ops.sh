#!/usr/bin/env bash
# `dlbench check-ops` on the CPU, as CI runs it: every op instance of every reference model at
# 32 px and batch 2 (alexnet, which needs 63 px, at 63), and the shapes of issue 25's report
# (alexnet at 64 px and resnet18 at 96 px, batch 4), with every convolution algorithm and
# precision; none may fail, and the record is valid. A pass broken on purpose is caught, with a
# command that reproduces it alone; bad input gets one clear line and its exit code.
# Usage: check_ops.sh path/to/dlbench
set -u
dlbench=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/check.sh"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
py=/usr/bin/python3

run_grid() {  # NAME ARGS...: the grid named, into $work/NAME.json
  local name=$1
  shift
  local start=$(date +%s)
  "$dlbench" check-ops --backend=cpu --json="$work/$name.json" "$@" >"$work/$name.out" 2>&1
  local rc=$?
  echo "check-ops $name: $(($(date +%s) - start)) s, $(tail -n 1 "$work/$name.out")"
  check "$name: exit 0" test $rc -eq 0
  ((rc == 0)) || grep -A4 '^fail' "$work/$name.out" | head -40
}
run_grid models32 --models=resnet18,resnet50,vgg16,digits-cnn --sizes=32 --batches=2
run_grid alexnet63 --models=alexnet --sizes=63 --batches=2
# alexnet's updates and loss scaling are alexnet63's instances (its parameters do not depend on
# the image's size or the batch), 13 s of check
run_grid reported --models=alexnet --sizes=64 --batches=4 \
  --ops=conv,linear,relu,max_pool,adaptive_avg_pool,dropout,softmax_cross_entropy
run_grid reported96 --models=resnet18 --sizes=96 --batches=4

# oneDNN 2.6 has its Winograd for AVX-512 cores only; elsewhere the winograd rows run the heuristic's.
avx512=0 bf16=0
grep -qw avx512f /proc/cpuinfo && avx512=1
# and multiplies bf16 natively with AVX-512 BF16; with AMX, a bf16 run stores activations channels
# last, which im2col+matmul (--conv-algo=matmul) takes; without AMX, it takes their NCHW layers'
# backward-filter passes
amx=0
grep -qw avx512_bf16 /proc/cpuinfo && bf16=1
grep -qw amx_bf16 /proc/cpuinfo && amx=1
check "the records are valid, cover every op, precision and algorithm, and fail nothing" \
  "$root/.venv/bin/python" - "$root/suites/schema/check_ops.schema.json" "$work" "$avx512" "$bf16" \
  "$amx" <<'PY'
import glob, json, sys
import jsonschema
schema = json.load(open(sys.argv[1]))
ops, precisions, algos, winograd = set(), set(), set(), set()
native = {}  # bf16 convolution passes of oneDNN's direct algorithm: did each run in bf16?
matmul = {}  # bf16 convolution passes under --conv-algo=matmul: did each run im2col+matmul?
for path in glob.glob(sys.argv[2] + "/*.json"):
    r = json.load(open(path))
    jsonschema.validate(r, schema)
    assert r["summary"]["failed"] == 0 and r["summary"]["checks"] == len(r["rows"]), path
    for row in r["rows"]:
        assert row["status"] == "ok", row
        ops.add(row["op"]); precisions.add(row["precision"]); algos.add(row["conv_algo"])
        if row["conv_algo"] == "winograd" and "jit_wino_4x3" in row["algorithm"]:
            winograd.add((row["pass"], row["precision"]))
        if row["op"] == "conv" and row["conv_algo"] == "onednn" and row["precision"] == "bf16" \
                and row["pass"] != "backward_bias":
            native[row["instance"], row["pass"]] = "bf16" in row["algorithm"]
        if row["op"] == "conv" and row["conv_algo"] == "matmul" and row["precision"] == "bf16" \
                and row["pass"] != "backward_bias":
            matmul[row["instance"], row["pass"]] = row["algorithm"].startswith("im2col+matmul")
assert ops == {"conv", "linear", "batch_norm", "relu", "max_pool", "adaptive_avg_pool",
               "dropout", "add", "softmax_cross_entropy", "sgd", "loss_scale"}, ops
assert precisions == {"fp32", "bf16", "fp16"}, precisions
assert algos == {None, "im2col", "onednn", "winograd", "matmul"}, algos
# oneDNN's Winograd ran, and passed, every pass in every precision (its 3x3 stride-1 layers),
# the forward with its ReLU too (alexnet's and vgg16's convolutions, which the CPU fuses)
assert winograd == ({(p, q) for p in ("forward", "forward_relu", "backward_data", "backward_weights")
                     for q in ("fp32", "bf16", "fp16")} if sys.argv[3] == "1" else set()), winograd
# with AVX-512 BF16, every bf16 pass of oneDNN's direct convolution multiplied bf16, and passed
assert native and (sys.argv[4] != "1" or set(native.values()) == {True}), native
# under --conv-algo=matmul, with AMX (channels-last bf16) every bf16 pass ran im2col+matmul; with
# AVX-512 BF16 alone (NCHW), exactly the backward-filter passes did; elsewhere none could
if sys.argv[5] == "1":
    assert set(matmul.values()) == {True}, matmul
elif sys.argv[4] == "1":
    assert matmul and all(v == (p == "backward_weights") for (_, p), v in matmul.items()), matmul
else:
    assert set(matmul.values()) == {False}, matmul
PY

# A backend that moves one element of every convolution's weight gradient by 1%.
"$dlbench" check-ops --backend=cpu --models=resnet18 --sizes=32 --batches=2 --ops=conv \
  --precisions=fp32 --perturb=conv.backward_weights --json="$work/broken.json" >"$work/broken.out" 2>&1
check "a broken pass: exit 1" test $? -eq 1
check "... every failure is that pass" "$py" - "$work/broken.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
failed = [r for r in rows if r["status"] == "fail"]
assert failed and all(r["pass"] == "backward_weights" for r in failed), failed[:3]
assert len(failed) == len([r for r in rows if r["pass"] == "backward_weights"])
PY
check "... the output names the worst element and its bound" grep -q "worst element: dw\[" "$work/broken.out"
repro=$(grep -m1 "reproduce: " "$work/broken.out" | sed 's/.*reproduce: dlbench //')
check "... and a command that reproduces it" test -n "$repro"
eval "\"$dlbench\" $repro" >"$work/repro.out" 2>&1
check "... which fails alone: exit 1" test $? -eq 1
check "... on one check" grep -q "1 instances, 1 checks, 1 failed" "$work/repro.out"

# perf mode times each pass (and judges none: a timed update has run more than once).
"$dlbench" check-ops --backend=cpu --mode=perf --repeats=2 --models=resnet18 --sizes=32 \
  --batches=2 --ops=conv,sgd,loss_scale --json="$work/perf.json" >"$work/perf.out" 2>&1
check "perf mode: exit 0" test $? -eq 0
check "... a time for every pass, and GFLOP/s work for convolutions" "$py" - "$work/perf.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
assert rows and all(r["perf"]["seconds"] > 0 for r in rows if r["status"] == "ok"), rows[:2]
assert all(r["perf"]["flops"] > 0 for r in rows if r["op"] == "conv"), rows[:2]
PY

# grad mode checks the reference itself.
"$dlbench" check-ops --backend=cpu --mode=grad --models=resnet18 --sizes=32 --batches=2 \
  >"$work/grad.out" 2>&1
check "grad mode: exit 0" test $? -eq 0

refused() {  # CODE PATTERN ARGS...: exits CODE with one line matching PATTERN
  local code=$1 pattern=$2
  shift 2
  "$dlbench" check-ops "$@" >"$work/err.out" 2>&1
  local rc=$?
  check "check-ops $*: exit $code" test $rc -eq "$code"
  check "check-ops $*: says '$pattern'" grep -q "$pattern" "$work/err.out"
}
refused 2 "unknown model 'resnet9'" --models=resnet9
refused 2 "too small for alexnet: the smallest it accepts is 63x63" --models=alexnet --sizes=32
refused 2 "unknown 'conv3d'" --ops=conv3d
refused 2 "has no algorithm 'auto'" --backend=cpu --conv-algos=auto
refused 2 "has no algorithm 'heuristic'" --backend=cpu --conv-algos=heuristic
refused 4 "tf32: the cpu backend does not support it" --backend=cpu --precisions=tf32
refused 2 "unknown 'fp8'" --backend=cpu --precisions=fp8
refused 2 "'kernal' is not a field" --instance='conv:shape=1x3x8x8,k=4,kernal=3,stride=1,pad=1,groups=1,bias=0'
refused 2 "expected compare, perf or grad" --mode=fast
refused 2 "not a pass it can break" --backend=cpu --perturb=conv.sideways --models=resnet18 --sizes=32 --batches=2
refused 2 "the filters select no check" --backend=cpu --ops=relu --passes=update --models=resnet18 --sizes=32 --batches=2
refused 2 "give it without --models" --instance='relu:shape=2x3' --models=resnet18
refused 2 "its directory '/nonexistent' cannot be used" --backend=cpu --instance='relu:shape=2x3' --json=/nonexistent/r.json
refused 2 "has no algorithm 'auto'" --backend=cpu --conv-algos=auto --list
refused 2 "more than 2^31 elements" --backend=cpu --models=vgg16 --sizes=4096 --batches=64 --list
# Without a GPU: a build with no CUDA backend says so; one with it, that no device is visible.
if "$dlbench" list 2>/dev/null | grep -q "^  cuda  compiled in"; then
  "$dlbench" list 2>/dev/null | grep -q "cuda: no device visible" &&
    refused 2 "no CUDA device is visible" --backend=cuda
else
  refused 4 "this build has no cuda backend" --backend=cuda
fi
check_summary check_ops
