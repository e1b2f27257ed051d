#!/usr/bin/env bash
# NCCL refuses two ranks on one GPU: dlbench must say so and exit, not hang or crash. Runs where
# exactly one GPU is visible (exit 77, skipped, elsewhere). Usage: nccl_one_gpu.sh path/to/dlbench
set -u
dlbench=$1
gpus=$("$dlbench" list | grep -c "^  *cuda:[0-9]")
if [[ $gpus -ne 1 ]]; then echo "needs exactly one visible GPU, found $gpus: skipped"; exit 77; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(timeout 120 "$dlbench" bench allreduce --comm=nccl --ranks=2 --max-bytes=1KiB 2>&1)
rc=$?
if [[ $rc -eq 0 || $rc -eq 124 || "$out" != *"NCCL refuses two ranks on one GPU"* ]]; then
  echo "FAIL: exit $rc (want non-zero, no timeout), output: $out"
  exit 1
fi
echo "refused with exit $rc: $(grep -m1 'refuses' <<<"$out")"
