#!/usr/bin/env bash
# `dlbench validate-sim` on this machine: resnet18 on 2 ranks, none and backward, simulated from
# their one-rank baselines on this host's measured all-reduce. Every point's prediction error must
# be within the bound the measured run-to-run spread allows (exit 0), and that bound must stay a
# bound worth having (under 30%: the simulator that let MPI's progress thread overlap compute for
# free erred by 41% on backward here). Bad input gets one line and exit 2.
# Usage: validate_sim.sh path/to/dlbench
set -u
dlbench=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/check.sh"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

"$dlbench" validate-sim --out="$work/v" --ranks=2 --overlap=none,backward --steps=10 \
  >"$work/out" 2>&1
rc=$?
tail -n 6 "$work/out"
check "every point within the bound (exit 0, got $rc)" test $rc -eq 0
check "validation.json: both points, a bound under 30%, the breakdowns" \
  "$root/.venv/bin/python" - "$work/v/validation.json" <<'PY'
import json, math, sys
v = json.load(open(sys.argv[1]))
assert [(p["ranks"], p["overlap"]) for p in v["points"]] == [(2, "none"), (2, "backward")], v
assert 0 < v["bound"] < 0.3, v["bound"]
for p in v["points"]:
    assert math.isfinite(p["error"]) and abs(p["error"]) <= v["bound"], p
    assert p["measured_scaling_loss"] and p["simulated_scaling_loss"], p
PY
check "the report shows the simulated points" test -f "$work/v/runs/plots/scaling-1.png"

for bad in "--ranks=1" "--repetitions=1" "--overlap=sideways"; do
  "$dlbench" validate-sim --out="$work/bad" $bad >"$work/err" 2>&1
  rc=$?
  check "$bad: exit 2 (got $rc)" test $rc -eq 2
  check "$bad: one line" test "$(wc -l <"$work/err")" -eq 1
done
"$dlbench" validate-sim --out="$work/v" >"$work/err" 2>&1
check "an earlier validation's folder is refused (exit 2)" test $? -eq 2
check_summary validate_sim
