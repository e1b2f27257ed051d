#!/usr/bin/env bash
# `bench allreduce --comm=nccl` on a node with one GPU: one rank reduces device buffers correctly
# at every size, and two ranks are refused with a message (NCCL refuses two ranks on one GPU),
# not a hang or a crash. Where not exactly one GPU is visible it exits 77 (skipped).
# Usage: nccl_one_gpu.sh path/to/dlbench
set -u
dlbench=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gpus=$("$dlbench" list | grep -c "^  *cuda:[0-9]")
if [[ $gpus -ne 1 ]]; then echo "needs exactly one visible GPU, found $gpus: skipped"; exit 77; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
failures=0
timeout 300 "$dlbench" bench allreduce --comm=nccl --ranks=1 --max-bytes=64MiB \
  --json="$work/one.json" || { echo "FAIL: one rank"; failures=$((failures + 1)); }
/usr/bin/env python3 - "$work/one.json" <<'PY' || failures=$((failures + 1))
import json, sys
r = json.load(open(sys.argv[1]))
assert r["comm"] == "nccl" and r["buffers"] == "cuda" and r["ranks"] == 1, r
assert [row["bytes"] for row in r["rows"]] == [8 << i for i in range(24)]
assert all(row["wrong"] == 0 and row["time_s"] > 0 for row in r["rows"]), r["rows"]
print(f"one rank: {len(r['rows'])} sizes correct; 64 MiB algbw {r['rows'][-1]['algbw_gbs']:.1f} GB/s")
PY
# Two ranks need a launcher; a GPU machine without MPI (the device bundle's) skips this part.
if command -v mpirun >/dev/null; then
  out=$(timeout 120 "$dlbench" bench allreduce --comm=nccl --ranks=2 --max-bytes=1KiB 2>&1)
  rc=$?
  if [[ $rc -eq 0 || $rc -eq 124 || "$out" != *"NCCL refuses two ranks on one GPU"* ]]; then
    echo "FAIL: two ranks: exit $rc (want non-zero, no timeout), output: $out"
    failures=$((failures + 1))
  else
    echo "two ranks refused with exit $rc: $(grep -m1 'refuses' <<<"$out")"
  fi
else
  echo "no mpirun: the two-rank refusal is not checked here"
fi
[[ $failures -eq 0 ]]
