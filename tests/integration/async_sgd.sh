#!/usr/bin/env bash
# Asynchronous SGD (--sync=async; runtime/overlap/param_server.h) under mpirun: the digits CNN
# reaches 95% test accuracy at 2 and 4 ranks, with and without a 2x straggler, each rank's
# gradients applied alone by rank 0 (the rate scaled to the batch each update sees, 0.05 x b/32);
# the record carries the updates' staleness; every rank ends with the same weights; the straggler
# is named in the record; and rank 0's record counts the server's host copies (host_comm: its
# gradients, master weights and momentum, and a reply of the weights and a word per other rank).
# Usage: async_sgd.sh path/to/dlbench
set -u
dlbench=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
source "$(dirname "${BASH_SOURCE[0]}")/check.sh"

for ranks in 2 4; do
  batch=$((32 / ranks))
  lr=$(/usr/bin/python3 -c "print(0.05 * $batch / 32)")
  for straggler in none "$((ranks - 1)):2"; do
    extra=()
    [[ $straggler != none ]] && extra=(--straggler="$straggler")
    name="async-$ranks-${straggler/:/x}"
    OMP_NUM_THREADS=1 mpirun -np "$ranks" --oversubscribe "$dlbench" run --ranks="$ranks" \
      --model=digits-cnn --image-size=8 --data=digits --batch=$batch --epochs=30 --lr="$lr" \
      --target-accuracy=0.95 --sync=async "${extra[@]}" --json="$work/$name.json" \
      >"$work/$name.log" 2>&1
    check "$name: runs (see log)" test $? -eq 0 || tail -5 "$work/$name.log"
    check "$name: reaches 95%, staleness recorded, the same weights on every rank" \
      /usr/bin/python3 - "$work/$name.json" "$ranks" "$straggler" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
m, ranks = r["metrics"], int(sys.argv[2])
c, a = m["convergence"], m["async"]
print(f"{sys.argv[1].split('/')[-1]}: {c['status']} in {c['epochs']} epochs, "
      f"{c['time_to_accuracy_s']} s; {a['updates']} updates, staleness median "
      f"{a['staleness_median']}, max {a['staleness_max']}")
assert c["reached"] is True and c["time_to_accuracy_s"] > 0, c
assert a["updates"] > 0 and 0 <= a["staleness_median"] <= a["staleness_max"], a
assert "host copies" in a["transport"], a
assert m["weights_identical_across_ranks"] is True
assert r["config"]["sync"] == "async" and r["config"]["ranks"] == ranks
assert r["config"]["straggler"] == (None if sys.argv[3] == "none" else sys.argv[3])
memory = r["memory"]["peak_bytes_by_category"]
n = memory["gradients"] // 4  # the flat gradient buffer, all this step's gradients hold
assert memory["host_comm"] == 4 * (3 * n + (ranks - 1) * (n + 1) + 1), memory
PY
  done
done
check_summary async_sgd
