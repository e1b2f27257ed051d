#!/usr/bin/env bash
# A point measured beside a planted CPU hog (a bounded busy loop on one core, started here) is
# recorded `noisy`, with other processes' CPU time as the reason (suites/harness/core/noise.h).
# Usage: noise.sh path/to/dlbench
set -eu
dlbench=$1
work=$(mktemp -d)
hog=
trap '[[ -n $hog ]] && kill "$hog" 2>/dev/null; rm -rf "$work"' EXIT
timeout 300 sh -c 'while :; do :; done' &
hog=$!
sleep 1
"$dlbench" run --model=digits-cnn --batch=16 --image-size=8 --warmup=2 --steps=60 --min-time=1 \
  --json="$work/hog.json" >"$work/hog.log" 2>&1 || { cat "$work/hog.log"; exit 1; }
kill "$hog"
hog=
/usr/bin/python3 - "$work/hog.json" <<'PY'
import json, sys
n = json.load(open(sys.argv[1]))["noise"]
print(json.dumps(n))
assert n["verdict"] == "noisy", n
assert any(r.startswith("other processes used") for r in n["reasons"]), n
assert n["other_processes_cores"] > 0.25, n
PY
echo "noise: a planted hog made the point noisy"
