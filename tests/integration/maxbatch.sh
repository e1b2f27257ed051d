#!/usr/bin/env bash
# `dlbench maxbatch` on real steps: the batch it finds trains within the budget and the next one
# runs out of memory (`dlbench run`, exit 3), for the naive plan, reuse, reuse with recomputation,
# and reuse with the largest activations swapped until the step fits (--swap=auto); the record is
# valid; a budget too small for the smallest batch exits 1 and says
# so; bad input gets one line and 2.
# Usage: maxbatch.sh path/to/dlbench
set -u
dlbench=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/check.sh"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
model=(--model=resnet18 --image-size=32 --memory-budget=170MiB)

for plan in naive reuse sqrt auto; do
  args=(--memory-plan=$plan)
  [[ $plan == sqrt ]] && args=(--memory-plan=reuse --recompute=sqrt)
  [[ $plan == auto ]] && args=(--memory-plan=reuse --swap=auto)
  "$dlbench" maxbatch "${model[@]}" "${args[@]}" --json="$work/$plan.json" >"$work/$plan.out" 2>&1
  check "$plan: exit 0" test $? -eq 0
  tail -n 1 "$work/$plan.out"
  batch=$("$root/.venv/bin/python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["batch"])' \
    "$work/$plan.json" 2>/dev/null || echo 0)
  check "$plan: a batch was found" test "$batch" -ge 2
  "$dlbench" run "${model[@]}" "${args[@]}" --batch="$batch" --warmup=1 --steps=1 \
    >"$work/$plan.fits" 2>&1
  check "$plan: batch $batch trains within the budget" test $? -eq 0
  "$dlbench" run "${model[@]}" "${args[@]}" --batch=$((batch + 1)) --warmup=1 --steps=1 \
    >"$work/$plan.over" 2>&1
  check "$plan: batch $((batch + 1)) runs out of memory (exit 3)" test $? -eq 3
done

check "the records are valid, with a peak within the budget; reuse fits more, recompute and swap more again" \
  "$root/.venv/bin/python" - "$root/suites/schema/maxbatch.schema.json" "$work" <<'PY'
import json, sys
import jsonschema
schema = json.load(open(sys.argv[1]))
found = {}
for plan in ("naive", "reuse", "sqrt", "auto"):
    r = json.load(open(f"{sys.argv[2]}/{plan}.json"))
    jsonschema.validate(r, schema)
    assert r["config"]["memory_plan"] == ("naive" if plan == "naive" else "reuse"), r["config"]
    assert r["config"]["recompute"] == ("sqrt" if plan == "sqrt" else "none"), r["config"]
    assert r["config"]["swap"] == ("auto" if plan == "auto" else "none"), r["config"]
    # Swapped activations wait in host memory, outside the device's budget.
    swapped = r["memory"]["peak_bytes_by_category"]["host_swap"]
    assert (swapped > 0) == (plan == "auto"), r["memory"]
    assert 0 < r["memory"]["peak_bytes_total"] <= r["config"]["memory_budget"], r["memory"]
    assert not r["reached_limit"]
    probes = {p["batch"]: p["fits"] for p in r["probes"]}
    assert probes[r["batch"]] and not probes[r["batch"] + 1], probes
    found[plan] = r["batch"]
assert found["sqrt"] > found["reuse"] > found["naive"], found
assert found["auto"] > found["reuse"], found
PY

# A run's --max-batch-budget: the same search after its timed steps, in its record.
"$dlbench" run --model=resnet18 --image-size=32 --batch=4 --warmup=1 --steps=1 \
  --memory-plan=reuse --max-batch-budget=170MiB --json="$work/run.json" >"$work/run.out" 2>&1
check "a run with --max-batch-budget: exit 0" test $? -eq 0
check "... records the batch maxbatch found, as the result schema says" \
  "$root/.venv/bin/python" - "$root/suites/schema/result.schema.json" "$work" <<'PY'
import json, sys
import jsonschema
run = json.load(open(f"{sys.argv[2]}/run.json"))
metrics = json.load(open(sys.argv[1]))["properties"]["metrics"]["properties"]
jsonschema.validate(run["metrics"]["max_batch"], metrics["max_batch"])
found = json.load(open(f"{sys.argv[2]}/reuse.json"))
assert run["metrics"]["max_batch"]["batch"] == found["batch"], (run["metrics"], found["batch"])
assert run["metrics"]["max_batch"]["budget_bytes"] == found["config"]["memory_budget"]
PY
mpi_refused=$("$dlbench" run --model=resnet18 --ranks=2 --max-batch-budget=1GiB 2>&1)
check "--max-batch-budget with two ranks: refused" grep -q "searches one rank's step" <<<"$mpi_refused"

"$dlbench" maxbatch --model=resnet18 --image-size=32 --memory-budget=8MiB --json="$work/none.json" \
  >"$work/none.out" 2>&1
check "no batch fits: exit 1" test $? -eq 1
check "... and says so" grep -q "no batch fits: the step of batch 2 needs more than 8.00 MiB" \
  "$work/none.out"
check "... in its record" "$root/.venv/bin/python" -c \
  'import json,sys; r=json.load(open(sys.argv[1])); assert r["batch"] == 0 and not r["probes"][0]["fits"]' \
  "$work/none.json"

refused() {  # WHAT ARGS...: exit 2 and one line naming WHAT
  local what=$1
  shift
  "$dlbench" maxbatch "$@" >"$work/refused.out" 2>&1
  local rc=$?
  check "refused ($*): exit 2" test $rc -eq 2
  check "... naming $what" grep -q -- "$what" "$work/refused.out"
}
refused "--memory-budget" --model=resnet18
refused "--batch" --model=resnet18 --memory-budget=1GiB --batch=4
refused "--ranks" --model=resnet18 --memory-budget=1GiB --ranks=2
refused "--max-batch-budget" --model=resnet18 --memory-budget=1GiB --max-batch-budget=1GiB
refused "--system" --model=resnet18 --memory-budget=1GiB --system=pytorch
# With --cuda-graph a probe warms up two steps (the second is captured), so the search gets as
# far as the backend (here: no GPU), never to a refusal of its own warm-up.
"$dlbench" maxbatch --model=resnet18 --backend=cuda --cuda-graph --memory-budget=1GiB \
  >"$work/graph.out" 2>&1
check "maxbatch --cuda-graph: its probes' warm-up is not refused" \
  bash -c "! grep -q -- '--warmup' '$work/graph.out'"
# A run's search refuses a batch file (its probes need batches of their own sizes), up front.
"$dlbench" run --model=resnet18 --max-batch-budget=1GiB --batch-file="$work/none.safetensors" \
  >"$work/refused.out" 2>&1
check "--max-batch-budget with --batch-file: exit 2" test $? -eq 2
check "... saying why" grep -q "search without --batch-file" "$work/refused.out"
refused "--steps" --model=resnet18 --memory-budget=1GiB --steps=5
refused "unknown model" --model=resnet19 --memory-budget=1GiB
refused "memory-plan" --model=resnet18 --memory-budget=1GiB --memory-plan=squeeze
check_summary maxbatch
