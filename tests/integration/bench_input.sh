#!/usr/bin/env bash
# `dlbench bench input`: dlbench's loader, PyTorch's DataLoader (where Debian's python3-torch
# is) and DALI's CPU pipeline (where scripts/install-deps.sh --dali put it) on make-dataset's
# files, each thread count in turn, a row per system and thread count with its rounds, and the
# record's median within them; the GPU's decoder (dlbench-gpu) where a GPU is visible. Without
# DALI, --systems=dali is refused with one line naming how to install it, and without a GPU
# dlbench-gpu. Bad options: one line, exit 2.
# Usage: bench_input.sh path/to/dlbench
set -u
dlbench=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

"$dlbench" make-dataset --out="$work/ds" --images=48 --val-images=0 --classes=3 --size=80x64 \
  --shards=0 >/dev/null || fail "make-dataset"
systems=dlbench,dlbench-full-decode
/usr/bin/python3 -c "import torch, torchvision" 2>/dev/null && systems=$systems,pytorch
source=$(dirname "$(dirname "$(dirname "$(realpath "${BASH_SOURCE[0]}")")")")
if [[ -x $source/.venv-dali/bin/python ]] || python3 -c "import nvidia.dali" 2>/dev/null; then
  systems=$systems,dali
else
  if "$dlbench" bench input --data-path="$work/ds" --systems=dali --batches=1 >"$work/err" 2>&1; then
    fail "--systems=dali ran without DALI"
  fi
  grep -q "the dali peer needs a Python that imports nvidia.dali;.*install-deps.sh --dali" "$work/err" ||
    fail "no DALI: $(cat "$work/err")"
  "$dlbench" bench input --data-path="$work/ds" --systems=dali-gpu --batches=1 >"$work/err" 2>&1 &&
    fail "--systems=dali-gpu ran without DALI"
  grep -q "the dali-gpu peer needs a Python that imports nvidia.dali;" "$work/err" ||
    fail "no DALI (dali-gpu): $(cat "$work/err")"
fi
# The GPU's decoder, where a GPU is visible; elsewhere one line naming what it needs, exit 2.
if "$dlbench" list | grep -q "^  *cuda:[0-9]"; then
  systems=$systems,dlbench-gpu
else
  "$dlbench" bench input --data-path="$work/ds" --systems=dlbench-gpu --batches=1 >"$work/err" 2>&1
  rc=$?
  [[ $rc == 2 && $(wc -l <"$work/err") == 1 ]] &&
    grep -q "^dlbench: error (invalid argument): --systems=dlbench-gpu decodes on a GPU: " "$work/err" ||
    fail "dlbench-gpu without a GPU: exit $rc, $(cat "$work/err")"
fi
"$dlbench" bench input --data-path="$work/ds" --threads=1,2 --batch=8 --image-size=32 --batches=3 \
  --rounds=2 --systems=$systems --json="$work/in.json" >"$work/in.log" 2>&1 ||
  fail "bench input: $(tail -5 "$work/in.log")"
/usr/bin/python3 - "$work/in.json" "$systems" <<'PY' || fail "the record"
import json, sys
r = json.load(open(sys.argv[1])); systems = sys.argv[2].split(",")
assert r["kind"] == "bench_input" and r["images_in_folder"] == 48, r
rows = {(x["system"], x["threads"]): x for x in r["rows"]}
assert set(rows) == {(s, t) for s in systems for t in (1, 2)}, rows.keys()
for x in rows.values():
    assert len(x["rounds"]) == 2 and all(v > 0 for v in x["rounds"]), x
    assert x["min_img_s"] <= x["median_img_s"] <= x["max_img_s"], x
print(", ".join(f"{s} x{t}: {x['median_img_s']:.0f} img/s" for (s, t), x in sorted(rows.items())))
PY
for bad in --threads=0 --batches=0 --systems=tensorflow --image-size=0; do
  if "$dlbench" bench input --data-path="$work/ds" $bad >"$work/err" 2>&1; then fail "$bad accepted"; fi
  [[ $(wc -l <"$work/err") -eq 1 ]] || fail "$bad: not one line: $(cat "$work/err")"
done
"$dlbench" bench input --data-path="$work/nowhere" >"$work/err" 2>&1 && fail "a missing folder accepted"
[[ $failures -eq 0 ]]
