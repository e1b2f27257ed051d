#!/usr/bin/env bash
# A fingerprint of what training computes: for each reference model (resnet18, resnet50, alexnet,
# the digits CNN), precision (fp32, bf16, fp16), overlap strategy and rank count (1 and 2), three
# steps from the same seed at batch 2 with 1 MB buckets, and one line of the SHA-256 of the
# saved weights and buffers and of the losses. Two builds that compute the same thing print the
# same lines, byte for byte: a refactoring that must not change numerics diffs the two outputs.
# Usage: numerics_fingerprint.sh path/to/dlbench [RUN FLAGS...] > fingerprint.txt
# (about 5 minutes, 2 cores); RUN FLAGS are added to every run, so that two settings that must
# compute the same thing (--memory-plan=naive, and the default reuse) diff the same way.
set -u
dlbench=$1
shift
extra=("$@")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
status=0
for model in "resnet18 32" "resnet50 32" "alexnet 63" "digits-cnn 8"; do
  set -- $model
  for precision in fp32 bf16 fp16; do
    for ranks in 1 2; do
      for s in none backward forward; do
        tag=$1-$precision-$ranks-$s
        args=(run --model="$1" --image-size="$2" --precision="$precision" --batch=2 --warmup=0
              --steps=3 --overlap="$s" --bucket-mb=1 --save="$work/$tag.safetensors"
              --json="$work/$tag.json" "${extra[@]}")
        if [[ $ranks == 1 ]]; then
          "$dlbench" "${args[@]}" >"$work/$tag.log" 2>&1
        else
          mpirun -np 2 --oversubscribe "$dlbench" "${args[@]}" --ranks=2 >"$work/$tag.log" 2>&1
        fi
        if [[ $? != 0 ]]; then
          echo "$tag did not run: $(tail -n 1 "$work/$tag.log")"
          status=1
          continue
        fi
        weights=$(sha256sum <"$work/$tag.safetensors" | cut -c1-16)
        losses=$(/usr/bin/python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["metrics"]["losses"]))' "$work/$tag.json")
        echo "$tag weights $weights losses $losses"
      done
    done
  done
done
exit $status
