#!/usr/bin/env bash
# `dlbench bench allreduce` over MPI on 1, 2 and 3 ranks: every size from 8 B to 1 MiB doubling is
# reduced correctly (#wrong 0 on every rank), times are positive, busbw = algbw x 2(n-1)/n, and the
# library's blocking all-reduce is timed beside it, and each size says how much host work beside it
# lost (beside_compute). Usage: bench_allreduce.sh path/to/dlbench
set -u
dlbench=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
failures=0
for ranks in 1 2 3; do
  if ! "$dlbench" bench allreduce --comm=mpi --ranks=$ranks --max-bytes=1MiB --iters=5 \
    --warmup=1 --json="$work/ar$ranks.json" >"$work/ar$ranks.log" 2>&1; then
    echo "FAIL: bench allreduce --ranks=$ranks exited non-zero"; cat "$work/ar$ranks.log"
    failures=$((failures + 1)); continue
  fi
  /usr/bin/python3 - "$work/ar$ranks.json" "$ranks" <<'PY' || failures=$((failures + 1))
import json, sys
r = json.load(open(sys.argv[1])); n = int(sys.argv[2])
assert r["kind"] == "bench_allreduce" and r["ranks"] == n and r["comm"] == "mpi", r
assert r["buffers"] == "cpu" and "MPI_Allreduce" in r["reference"], r
sizes = [row["bytes"] for row in r["rows"]]
assert sizes == [8 << i for i in range(18)], sizes   # 8 B .. 1 MiB
for row in r["rows"]:
    assert row["wrong"] == 0, row
    assert row["time_s"] > 0 and row["reference_time_s"] > 0, row
    assert abs(row["algbw_gbs"] - row["bytes"] / row["time_s"] / 1e9) < 1e-9 * max(1, row["algbw_gbs"]), row
    assert abs(row["busbw_gbs"] - row["algbw_gbs"] * 2 * (n - 1) / n) < 1e-9 * max(1, row["busbw_gbs"]), row
    # Host work beside the all-reduce: what it lost over the reduction's time alone, from the medians.
    b = row["beside_compute"]
    assert b["work_chunks"] >= 1 and b["work_alone_s"] > 0 and b["work_beside_s"] > 0, row
    assert b["allreduce_beside_s"] > 0, row
    share = max((b["work_beside_s"] - b["work_alone_s"]) / row["time_s"], 0.0)
    assert abs(b["blocks_compute"] - share) < 1e-9 * max(1, share), row
print(f"{n} ranks: {len(sizes)} sizes correct; 1 MiB busbw {r['rows'][-1]['busbw_gbs']:.2f} GB/s "
      f"(MPI_Allreduce {r['rows'][-1]['reference_busbw_gbs']:.2f})")
PY
  grep -q "#wrong" "$work/ar$ranks.log" || { echo "FAIL: no table header"; failures=$((failures + 1)); }
done
[[ $failures -eq 0 ]]
