#!/usr/bin/env bash
# Bad input to `dlbench run` gets a clear message on stderr and the documented exit code, and
# never overwrites a result already written. Usage: cli_errors.sh path/to/dlbench
set -u
dlbench=$1
work=$(mktemp -d)
# A sweep with a CPU point measures the CPU's peak once and keeps it: in this test's own file,
# never the user's cache (measured while tests load the cores, it would be kept too low).
export DLBENCH_PEAK_FILE=$work/peaks.json
trap 'rm -rf "$work"' EXIT
failures=0 passed=0

# expect CODE MESSAGE-SUBSTRING ARGS...
expect() {
  local code=$1 message=$2
  shift 2
  local err
  err=$("$dlbench" "$@" 2>&1 >/dev/null)
  local rc=$?
  if [[ $rc -ne $code || "$err" != *"$message"* ]]; then
    echo "FAIL: dlbench $* -> exit $rc (want $code), stderr: $err (want '$message')"
    failures=$((failures + 1))
  else
    passed=$((passed + 1))
  fi
}

quick=(run --model=digits-cnn --image-size=8 --steps=1 --warmup=0 --batch=2)
# A mistyped flag: the flag meant, and where the command's flags are listed.
expect 2 "not expected: --modle=resnet18 (did you mean --model? dlbench run --help lists its flags)" run --modle=resnet18
expect 2 "(did you mean --suite? dlbench --help lists the flags)" --suit=scaling
expect 2 "not expected: --zzz (dlbench bench conv --help lists its flags)" bench conv --zzz
expect 2 "(did you mean run? dlbench --help lists the flags)" rnu --model=resnet18
expect 2 "not expected: --inject-faul=crash (dlbench run --help" run --inject-faul=crash  # hidden: not offered
expect 2 "unknown model 'resnet34'" run --model=resnet34
expect 2 "unknown system 'jax' (expected dlbench, pytorch)" run --system=jax
expect 2 "a peer runs beside it in a sweep" run --system=pytorch
expect 2 "--batch must be in [1, 2147483647] (got 0)" run --model=resnet18 --batch=0
expect 2 "--steps must be in [1, 2147483647] (got -3)" run --model=resnet18 --steps=-3
expect 2 "--min-time must be in [0, 4294967296] (got -1)" run --model=resnet18 --min-time=-1
expect 2 "--repetitions must be in [1, 1000] (got 0)" run --model=resnet18 --repetitions=0
expect 2 "--warmup must be in [0, 2147483647]" run --model=resnet18 --warmup=-1
expect 2 "--target-accuracy must be in (0, 1] (got 1.5)" run --model=digits-cnn --data=digits --epochs=2 --target-accuracy=1.5
expect 2 "--mllog needs --epochs over --data=digits or folder" run --model=digits-cnn --mllog=/tmp/x.mllog
expect 2 "--target-accuracy needs --epochs over --data=digits or folder" run --model=digits-cnn --target-accuracy=0.9
expect 2 "--epochs needs --data=digits or folder" run --model=digits-cnn --epochs=1
expect 2 "--data=folder needs --data-path=DIR" run --model=resnet18 --data=folder
expect 2 "--decode=gpu decodes JPEG files, and --data=synthetic has none" run --model=resnet18 --decode=gpu
expect 4 "--decode=gpu needs --backend=cuda" run --model=resnet18 --data=folder --data-path=/nowhere --decode=gpu
expect 2 "unknown decode 'tpu' (expected cpu, gpu)" run --model=resnet18 --decode=tpu
expect 2 "--mllog '/nonexistent/dir/x.mllog': its directory '/nonexistent/dir' cannot be used" run --model=digits-cnn --data=digits --epochs=1 --mllog=/nonexistent/dir/x.mllog
expect 2 "smallest it accepts is 63x63" run --model=alexnet --image-size=32
expect 2 "smallest it accepts is 32x32" run --model=vgg16 --image-size=16
expect 2 "digits data not found at '$work/none.csv.gz'" \
  run --model=digits-cnn --data=digits --epochs=1 --data-path="$work/none.csv.gz"
expect 2 "needs --epochs" run --model=digits-cnn --data=digits
digits=(run --model=digits-cnn --image-size=8 --data=digits --batch=32 --epochs=3)
expect 2 "is as long as the run or longer" "${digits[@]}" --lr-warmup=3
expect 2 "is as long as the run or longer" "${digits[@]}" --lr-warmup=1000steps
expect 2 "--lr-schedule: unknown schedule 'linear'" "${digits[@]}" --lr-schedule=linear
expect 2 "a decay after 3 epochs is not before the run's end" "${digits[@]}" --lr-schedule=step:1,3
expect 2 "--lr-warmup: '-1' is not a warm-up" "${digits[@]}" --lr-warmup=-1
expect 2 "--lr-warmup and --lr-schedule need --epochs" "${quick[@]}" --lr-schedule=cosine
expect 2 "--lr-reference-batch must be in [1, 2147483647] (got 0)" "${quick[@]}" --lr-reference-batch=0
expect 2 "--straggler=2:2: rank 2 is beyond the 2 ranks" "${quick[@]}" --ranks=2 --straggler=2:2
expect 2 "--sync: unknown mode 'stale:-1'" "${quick[@]}" --sync=stale:-1
expect 2 "--sync=async needs at least 2 ranks" "${quick[@]}" --sync=async
expect 2 "--sync=async pushes whole steps' gradients: it takes --overlap=none" "${quick[@]}" --ranks=2 --sync=async --overlap=forward
expect 2 "--sync=async keeps fp32 weights and gradients" "${quick[@]}" --ranks=2 --sync=async --precision=bf16
expect 2 "--sync=async with --lr-warmup or --lr-schedule" "${digits[@]}" --ranks=2 --sync=async --lr-schedule=cosine
expect 2 "--sync: unknown mode 'async:2'" "${quick[@]}" --sync=async:2
expect 2 "--sync=independent reduces no gradients, so there is nothing to overlap" "${quick[@]}" --ranks=2 --sync=independent --overlap=backward
expect 2 "--sync=independent with --epochs: each rank trains a model of its own" "${digits[@]}" --ranks=2 --sync=independent
expect 2 "--sync=stale:2 schedules its own all-reduce, behind the next steps: it takes --overlap=none" "${quick[@]}" --sync=stale:2 --overlap=backward
expect 2 "--sync=stale:1: fp16's loss scaling checks this step's gradients" "${quick[@]}" --sync=stale:1 --precision=fp16
expect 2 "the factor is how many times slower the rank computes, from 1" "${quick[@]}" --straggler=0:0.5
expect 2 "--straggler: 'x:2' is not RANK:FACTOR" "${quick[@]}" --straggler=x:2
expect 2 "--straggler slows a rank's passes on the host: it needs --backend=cpu" "${quick[@]}" --backend=cuda --straggler=0:2
expect 2 "cannot read safetensors file '$work/missing.safetensors'" "${quick[@]}" --init="$work/missing.safetensors"
printf 'garbage!' >"$work/bad.safetensors"
expect 2 "not a valid safetensors file" "${quick[@]}" --init="$work/bad.safetensors"
expect 2 "not a valid safetensors file" "${quick[@]}" --batch-file="$work/bad.safetensors"
expect 3 "would exceed the memory budget of 1.00 MiB" \
  run --model=resnet18 --image-size=32 --batch=2 --memory-budget=1MiB
expect 2 "is not a size" "${quick[@]}" --memory-budget=lots
expect 4 "does not support conv in tf32" "${quick[@]}" --precision=tf32
expect 2 "--loss-scale must be positive (got 0)" "${quick[@]}" --precision=fp16 --loss-scale=0
expect 2 "--loss-scale must be positive (got -8)" "${quick[@]}" --precision=fp16 --loss-scale=-8
expect 2 "--loss-scale applies to precision fp16 only" "${quick[@]}" --precision=bf16 --loss-scale=8
expect 4 "--cuda-graph needs --backend=cuda: the cpu backend runs each op as it is called" \
  "${quick[@]}" --cuda-graph
expect 2 "--cuda-graph: expected true or false, got 'maybe'" "${quick[@]}" --cuda-graph=maybe
expect 2 "--memory-plan: unknown memory plan 'bogus' (expected naive, reuse, reorder)" "${quick[@]}" \
  --memory-plan=bogus
expect 4 "--memory-plan=reuse packs tensors into shared buffers" "${quick[@]}" --memory-plan=reuse \
  --memory-guard
expect 4 "--dump writes every activation and gradient after the last step" "${quick[@]}" \
  --memory-plan=reuse --dump="$work/dump.safetensors"
expect 2 "--recompute: unknown policy 'every:0' (expected none, sqrt or every:K with K >= 1)" \
  "${quick[@]}" --memory-plan=reuse --recompute=every:0
expect 2 "--recompute: unknown policy 'half'" "${quick[@]}" --memory-plan=reuse --recompute=half
expect 2 "--recompute=sqrt frees activations for the memory plan to reuse" "${quick[@]}" \
  --memory-plan=naive --recompute=sqrt
expect 2 "--swap: 'a,,b' is not none, all, auto or a list of tensor names" "${quick[@]}" \
  --memory-plan=reuse --swap=a,,b
expect 2 "--swap=all frees activations' device bytes for the memory plan to reuse" "${quick[@]}" \
  --memory-plan=naive --swap=all
# --conv-math chooses among cuDNN's engines for 16-bit convolutions: refused where it means nothing.
expect 2 "--conv-math: unknown conv math 'quick' (expected strict, fast)" "${quick[@]}" --conv-math=quick
expect 2 "--conv-math chooses among cuDNN's engines for fp16 and bf16 convolutions, and means nothing with --backend=cpu --precision=bf16" \
  "${quick[@]}" --precision=bf16 --conv-math=fast
expect 2 "means nothing with --backend=cuda --precision=tf32" \
  "${quick[@]}" --backend=cuda --precision=tf32 --conv-math=strict
expect 2 "--conv-math chooses among cuDNN's engines, and means nothing with --backend=cpu" \
  check-ops --backend=cpu --instance='relu:shape=2x3' --conv-math=strict
expect 2 "--conv-math: unknown 'quick' (strict or fast)" \
  check-ops --backend=cpu --instance='relu:shape=2x3' --conv-math=quick
# The default plan is reuse, and naive under --memory-guard and --dump (which need it).
plan_of() {
  "$dlbench" "${quick[@]}" "$@" --json="$work/plan.json" >/dev/null 2>&1 &&
    /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["memory"]["plan"]["name"])' "$work/plan.json"
}
for want in "reuse:" "naive:--memory-guard" "naive:--dump=$work/d.safetensors" "naive:--memory-plan=naive"; do
  got=$(plan_of ${want#*:})
  if [[ $got == "${want%%:*}" ]]; then passed=$((passed + 1)); else
    echo "FAIL: the memory plan with '${want#*:}' is '$got', not ${want%%:*}"
    failures=$((failures + 1))
  fi
done
expect 2 "--swap=auto swaps the largest activations until the step fits --memory-budget" \
  "${quick[@]}" --memory-plan=reuse --swap=auto
expect 2 "--swap: the step has no tensor named 'conv9' (of the 5 that can be swapped, the largest: features.2" "${quick[@]}" --memory-plan=reuse \
  --swap=conv9
expect 2 "--swap: 'features.0.weight' cannot be swapped: it is a param tensor" "${quick[@]}" \
  --memory-plan=reuse --swap=features.0.weight
expect 4 "--swap with --cuda-graph" run --backend=cuda --model=resnet18 --steps=3 --cuda-graph \
  --memory-plan=reuse --swap=all
# Refused before a backend is made, so these need no GPU.
graph=(run --backend=cuda --model=resnet18 --steps=3 --cuda-graph)
expect 2 "--cuda-graph needs --warmup of at least 2 (got 1)" "${graph[@]}" --warmup=1
expect 4 "no spans of its passes to trace" "${graph[@]}" --trace-steps=1
expect 4 "--cuda-graph captures one rank's step; with --ranks=2" "${graph[@]}" --ranks=2
expect 2 "fp64" "${quick[@]}" --precision=fp64
expect 2 "--profile is read from traced steps: give --trace-steps=N" "${quick[@]}" \
  --profile="$work/p.json"
expect 2 "--no-such-flag" "${quick[@]}" --no-such-flag
expect 2 "--dropout must be in [0, 1) (got 1)" "${quick[@]}" --dropout=1
expect 2 "--lr must be positive" "${quick[@]}" --lr=0
expect 2 "--conv-algo: unknown conv algo 'fastest' (expected heuristic, autotune, im2col, onednn, winograd, auto, matmul, class:fft, class:winograd, class:tensor_core, class:other)" \
  "${quick[@]}" --conv-algo=fastest
expect 2 "--conv-algo: unknown conv algo 'class:gemm'" "${quick[@]}" --conv-algo=class:gemm
expect 2 "--conv-algo=class:fft names a class of cuDNN engines (the cuda backend's)" \
  "${quick[@]}" --conv-algo=class:fft
expect 2 "no convolution algorithm for its forward pass fits --workspace-limit=1.00 KiB: im2col needs at least" \
  run --model=resnet18 --image-size=32 --batch=2 --steps=1 --workspace-limit=1KiB
expect 2 "--comm=nccl reduces device buffers: it needs --backend=cuda" "${quick[@]}" --comm=nccl
expect 2 "--comm=local serves one rank" "${quick[@]}" --comm=local --ranks=2
# The CUDA backend where there is none: a bad request (2) on a machine without a GPU; a build
# without CUDA says so as unsupported (4).
if "$dlbench" list | grep -q "cuda: not compiled"; then
  expect 4 "this build has no CUDA backend" "${quick[@]}" --backend=cuda
elif ! "$dlbench" list | grep -q "^  *cuda:[0-9]"; then
  expect 2 "--backend=cuda: no CUDA device is visible on this machine" "${quick[@]}" --backend=cuda
fi

# The suite harness's own bad input.
expect 2 "unknown suite 'scalling' (shipped: algorithms, batch, ci, convergence, input, memory, overlap, precision, scaling, smoke" --suite=scalling
printf '{"name": "x", "description": "", "defaults": {"batch": 0}, "sweep": {"batch": [1]}, "cpu": {}}' >"$work/bad_suite.json"
expect 2 "$work/bad_suite.json: invalid suite:" --suite="$work/bad_suite.json"
expect 2 "/defaults/batch: expected a value >= 1, got 0" --suite="$work/bad_suite.json"
printf '{"name": ' >"$work/torn_suite.json"
expect 2 "$work/torn_suite.json: not valid JSON" --suite="$work/torn_suite.json"
expect 2 "--timeout must be in (0, 4294967296] (got 0)" --suite=smoke --timeout=0 --out="$work/t0"
expect 2 "--launcher" --suite=smoke --launcher=ssh
expect 2 "--timeout: expected a number" --timeout=abc list
expect 2 "expected crash@I, hang@I or oom@I" --suite=smoke --inject-fault=boom@1 --out="$work/f"
expect 2 "give a subcommand or --suite=NAME"

# A good run writes its record; a later failing run leaves it intact.
"$dlbench" "${quick[@]}" --json="$work/r.json" >/dev/null || { echo "FAIL: quick run"; failures=$((failures + 1)); }
before=$(sha256sum <"$work/r.json")
expect 2 "unknown model" run --model=nope --json="$work/r.json"
expect 3 "memory budget" run --model=resnet18 --image-size=32 --memory-budget=1MiB --json="$work/r.json"
if [[ "$(sha256sum <"$work/r.json")" != "$before" ]]; then
  echo "FAIL: a failed run changed an existing record"
  failures=$((failures + 1))
fi

# The micro-benchmark commands produce their tables.
if "$dlbench" bench conv --model=digits-cnn --image-size=8 --batch=2 --repeat=1 | grep -q "features.2"; then
  passed=$((passed + 1))
else
  echo "FAIL: bench conv"; failures=$((failures + 1))
fi
# Winograd's row says unsupported on the layers it cannot run (the strided ones), and times the rest.
if "$dlbench" bench conv --model=resnet18 --image-size=32 --batch=2 --repeat=1 --algos=winograd \
  >"$work/wino.out" && grep -qE "^layer2.0.conv1 +winograd .*unsupported" "$work/wino.out" &&
  grep -qE "^layer1.0.conv1 +winograd +64x128x576 +[0-9.]+ " "$work/wino.out"; then
  passed=$((passed + 1))
else
  echo "FAIL: bench conv --algos=winograd"; cat "$work/wino.out"; failures=$((failures + 1))
fi
expect 2 "--algos: the cpu backend has no algorithm 'fft' (it has: im2col, onednn, winograd, matmul)" \
  bench conv --algos=fft
expect 2 "--ranks must be in [1, 2147483647]" bench allreduce --ranks=0
expect 2 "--comm: foo not in" bench allreduce --comm=foo
expect 2 "more than mpirun starts on this host" bench allreduce --ranks=$(( $(nproc) * 4 + 1 ))
# Without a visible GPU, nccl is refused before any rank starts (exit 4, unsupported).
if "$dlbench" list | grep -qE "cuda: (no device visible|not compiled)"; then
  expect 4 "no CUDA device is visible" bench allreduce --comm=nccl --ranks=2
fi

# --print-step prints the step's program and trains nothing: no record, even with --json; a spec
# whose choices do not go together is refused as a run would refuse it.
out=$("$dlbench" run --model=digits-cnn --image-size=8 --batch=2 --ranks=2 --sync=stale:2 \
  --json="$work/print.json" --print-step)
if [[ $? -eq 0 && "$out" == *"transforms: loss, step state, optimizer state, sync"* &&
      "$out" == *"stale gradients 1"* && ! -e "$work/print.json" ]]; then
  passed=$((passed + 1))
else
  echo "FAIL: --print-step: $out"; failures=$((failures + 1))
fi
expect 2 "takes --overlap=none" run --model=digits-cnn --ranks=2 --sync=stale:2 --overlap=forward --print-step
# A run's own rules too, beyond the spec's: --print-step refuses what the run would.
expect 2 "--loss-scale applies to precision fp16 only" "${quick[@]}" --precision=bf16 --loss-scale=8 --print-step
expect 2 "--print-step builds the step from --batch and --image-size" run --model=digits-cnn \
  --batch-file="$work/none.safetensors" --print-step
expect 2 "maxbatch takes no --print-step" maxbatch --model=digits-cnn --memory-budget=64MiB --print-step

echo "$passed passed, $failures failed"
[[ $failures -eq 0 ]]
