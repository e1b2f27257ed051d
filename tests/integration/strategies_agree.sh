#!/usr/bin/env bash
# The overlap strategies change when gradients are reduced and applied, never what is computed:
# after 3 steps the weights and losses of none, backward and forward agree bit for bit, at one
# rank and at two (small buckets, so the per-bucket paths are taken), for a model with batch norm
# and a residual fork (resnet18) and one with dropout (alexnet); and in fp16, where loss scaling
# completes every reduction before a step's first update, and 16-bit gradients are reduced.
# On two ranks the strategies also run on the reuse memory plan (step-local tensors sharing
# bytes): none alone, backward and forward with recomputation (--recompute=sqrt, whose
# recomputed passes run among the all-reduces and, with forward, after the carried updates), and
# each strategy with every activation swapped to host memory (--swap=all, whose copies and waits
# run among the all-reduces and the carried updates). They move tensors, compute them twice or
# park them in host memory, never change what is computed: the same bits again.
# CI runs that subset. `--wide` runs every reference model (resnet18, resnet50, vgg16, alexnet)
# in fp32 and bf16, and resnet18 in fp16, 5 steps each, with the memory techniques on one rank
# too (18 minutes on 2 cores).
# Usage: strategies_agree.sh path/to/dlbench [--wide]
set -u
dlbench=$1
models=("resnet18 32 fp32" "alexnet 63 fp32" "resnet18 32 fp16")
steps=3 wide=0
if [[ ${2:-} == --wide ]]; then
  steps=5 wide=1
  models=()
  for m in "resnet18 32" "resnet50 32" "vgg16 32" "alexnet 63"; do
    models+=("$m fp32" "$m bf16")
  done
  models+=("resnet18 32 fp16")
elif [[ $# -gt 1 ]]; then
  echo "usage: strategies_agree.sh path/to/dlbench [--wide]" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
failures=0 passed=0
for model in "${models[@]}"; do
  set -- $model
  for ranks in 1 2; do
    variants=(none backward forward)
    # One rank's reuse plan is checked, with poison, by memory_plan_test (ReusePlan).
    [[ $ranks == 2 || $wide == 1 ]] && variants+=(none-reuse backward-recompute forward-recompute
                                                  none-swap backward-swap forward-swap)
    for s in "${variants[@]}"; do
      tag=$1-$3-$ranks-$s
      args=(run --model="$1" --image-size="$2" --precision="$3" --batch=2 --warmup=0 --steps=$steps
            --overlap="${s%-*}" --bucket-mb=1 --save="$work/$tag.safetensors"
            --json="$work/$tag.json")
      # The base variants keep every tensor in its own buffer (the default is reuse), so that
      # none-reuse compares the two plans.
      [[ $s != *-* ]] && args+=(--memory-plan=naive)
      [[ $s == *-reuse ]] && args+=(--memory-plan=reuse)
      [[ $s == *-recompute ]] && args+=(--memory-plan=reuse --recompute=sqrt)
      [[ $s == *-swap ]] && args+=(--memory-plan=reuse --swap=all)
      if [[ $ranks == 1 ]]; then
        "$dlbench" "${args[@]}" >"$work/$tag.log" 2>&1
      else
        mpirun -np 2 --oversubscribe "$dlbench" "${args[@]}" --ranks=2 >"$work/$tag.log" 2>&1
      fi
      if [[ $? != 0 ]]; then
        echo "FAIL: $tag did not run"; cat "$work/$tag.log"; failures=$((failures + 1))
      fi
    done
    if /usr/bin/python3 - "$work" "$1-$3-$ranks" "$wide" <<'PY'
import hashlib, json, sys
work, tag, wide = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
def digest(s):
    return hashlib.sha256(open(f"{work}/{tag}-{s}.safetensors", "rb").read()).hexdigest()
def losses(s):
    return json.load(open(f"{work}/{tag}-{s}.json"))["metrics"]["losses"]
base = ("none", digest("none"), losses("none"))
ok = True
others = ["backward", "forward"] + (["none-reuse", "backward-recompute", "forward-recompute",
                                     "none-swap", "backward-swap", "forward-swap"]
                                    if tag.endswith("-2") or wide else [])
for s in others:
    if digest(s) != base[1] or losses(s) != base[2]:
        print(f"FAIL: {tag}: {s} differs from none: losses {losses(s)} vs {base[2]}")
        ok = False
sys.exit(0 if ok else 1)
PY
    then passed=$((passed + 1)); else failures=$((failures + 1)); fi
  done
done
echo "$passed passed, $failures failed"
[[ $failures == 0 ]]
