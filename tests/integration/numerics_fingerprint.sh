#!/usr/bin/env bash
# A fingerprint of what training computes: for each reference model (resnet18, resnet50, alexnet,
# the digits CNN), precision (fp32, bf16, fp16), overlap strategy and rank count (1 and 2), three
# steps from the same seed at batch 2 with 1 MB buckets, and one line of the SHA-256 of the
# saved weights and buffers and of the losses. Two builds that compute the same thing print the
# same lines, byte for byte: a refactoring that must not change numerics diffs the two outputs.
# Usage: numerics_fingerprint.sh path/to/dlbench [--techniques] [RUN FLAGS...] > fingerprint.txt
# (about 4 minutes, 2 cores; 6 with --techniques, below); RUN FLAGS are added to every run, so
# that two settings that must compute the same thing (--memory-plan=naive, and the default
# reuse) diff the same way.
set -u
dlbench=$1
shift
techniques=0
if [[ ${1:-} == --techniques ]]; then
  techniques=1
  shift
fi
extra=("$@")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
status=0
# One configuration: fingerprint TAG RANKS RUN-ARGS...
fingerprint() {
  local tag=$1 ranks=$2
  shift 2
  local args=(run --batch=2 --warmup=0 --steps=3 --bucket-mb=1 "$@"
              --save="$work/$tag.safetensors" --json="$work/$tag.json" "${extra[@]}")
  if [[ $ranks == 1 ]]; then
    "$dlbench" "${args[@]}" >"$work/$tag.log" 2>&1
  else
    mpirun -np 2 --oversubscribe "$dlbench" "${args[@]}" --ranks=2 >"$work/$tag.log" 2>&1
  fi
  if [[ $? != 0 ]]; then
    echo "$tag did not run: $(tail -n 1 "$work/$tag.log")"
    status=1
    return
  fi
  local weights losses
  weights=$(sha256sum <"$work/$tag.safetensors" | cut -c1-16)
  losses=$(/usr/bin/python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["metrics"]["losses"]))' "$work/$tag.json")
  echo "$tag weights $weights losses $losses"
}
for model in "resnet18 32" "resnet50 32" "alexnet 63" "digits-cnn 8"; do
  set -- $model
  for precision in fp32 bf16 fp16; do
    for ranks in 1 2; do
      for s in none backward forward; do
        fingerprint "$1-$precision-$ranks-$s" "$ranks" --model="$1" --image-size="$2" \
          --precision="$precision" --overlap="$s"
      done
    done
  done
done
# With --techniques, the step's techniques too, each on its own (overlap none): bounded
# staleness, recomputation and swapping every candidate, for resnet18 and the digits CNN in fp32
# and bf16 on 1 and 2 ranks; and swapping to a budget (--swap=auto) that resnet18's step fits only
# by swapping.
if [[ $techniques == 1 ]]; then
  for model in "resnet18 32" "digits-cnn 8"; do
    set -- $model
    for precision in fp32 bf16; do
      for ranks in 1 2; do
        for t in "stale2 --sync=stale:2" "sqrt --recompute=sqrt" "swapall --swap=all"; do
          set -- $model $t
          fingerprint "$1-$precision-$ranks-$3" "$ranks" --model="$1" --image-size="$2" \
            --precision="$precision" "$4"
        done
      done
    done
  done
  # The budget: the step's peak without swapping less a quarter of its activations, so that it
  # fits only by swapping (a fixed budget stops fitting at all when the layers' workspace grows).
  "$dlbench" run --model=resnet18 --image-size=32 --batch=2 --warmup=0 --steps=1 --bucket-mb=1 \
    --json="$work/unswapped.json" "${extra[@]}" >"$work/unswapped.log" 2>&1
  budget=$(/usr/bin/python3 -c 'import json,sys
m = json.load(open(sys.argv[1]))["memory"]
peak, activations = m["peak_bytes_total"], m["peak_bytes_by_category"]["activations"]
print(peak - activations // 4)' "$work/unswapped.json")
  fingerprint resnet18-fp32-1-swapauto 1 --model=resnet18 --image-size=32 --swap=auto \
    --memory-budget="$budget"
fi
exit $status
