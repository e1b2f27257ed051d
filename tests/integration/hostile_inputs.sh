#!/usr/bin/env bash
# Every regression input of the fuzz targets (tests/fuzz/regressions), through the command line
# as a user would give it: weights (--init), a batch (--batch-file), the digits (--data-path) and
# a suite (--suite --dry-run). Each is refused with exit 2 and one line on stderr, naming the file,
# with no internal error; inputs named accepted_* are accepted instead. A run whose loss becomes
# non-finite ends with status "diverged" and exit 7, and does not replace a record already there.
# Usage: hostile_inputs.sh path/to/dlbench
set -u
dlbench=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
inputs=$here/../fuzz/regressions
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0 passed=0

# check NAME WANT_CODE ARGS...: the exit code, and for a refusal one line naming the input.
check() {
  local name=$1 want=$2
  shift 2
  local err rc
  err=$("$dlbench" "$@" 2>&1 >/dev/null)
  rc=$?
  local lines
  lines=$(printf '%s' "$err" | grep -c '' || true)
  if [[ $rc -ne $want ]]; then
    echo "FAIL: $name: exit $rc (want $want): $err"
  elif ((want == 2)) && [[ $lines -ne 1 || $err != "dlbench: error ("* || $err == *"internal error"* ]]; then
    echo "FAIL: $name: want one 'dlbench: error (...)' line, got $lines: $err"
  else
    passed=$((passed + 1))
    return
  fi
  failures=$((failures + 1))
}

want_for() { [[ $(basename "$1") == accepted_* ]] && echo 0 || echo 2; }
quick=(run --model=digits-cnn --image-size=8 --steps=1 --warmup=0 --batch=2)

for f in "$inputs"/safetensors/*; do
  check "safetensors/$(basename "$f")" "$(want_for "$f")" "${quick[@]}" --init="$f"
done
for f in "$inputs"/batch_file/*; do
  check "batch_file/$(basename "$f")" "$(want_for "$f")" run --model=resnet18 --num-classes=10 \
    --steps=1 --warmup=0 --batch-file="$f"
done
for f in "$inputs"/digits_csv/*; do
  gzip -c "$f" >"$work/digits.csv.gz"
  check "digits_csv/$(basename "$f")" "$(want_for "$f")" run --model=digits-cnn --data=digits \
    --epochs=1 --image-size=8 --data-path="$work/digits.csv.gz"
done
for f in "$inputs"/suite/*; do
  cp "$f" "$work/suite.json"
  check "suite/$(basename "$f")" "$(want_for "$f")" --suite="$work/suite.json" --dry-run \
    --out="$work/out"
done

# Shapes past 64 bits, from the command line.
check "image size 2^40" 2 run --model=resnet18 --image-size=1099511627776 --batch=1 --steps=1
check "memory budget past 2^64" 2 run --model=resnet18 --memory-budget=99999999999999999999GiB

# Divergence: lr 1e308 makes the loss NaN by the second step.
echo '{"status": "ok", "kept": true}' >"$work/record.json"
check "diverged" 7 run --model=resnet18 --image-size=32 --batch=2 --steps=3 --warmup=0 \
  --lr=1e308 --json="$work/diverged.json"
if grep -q '"status": "diverged"' "$work/diverged.json" 2>/dev/null; then
  passed=$((passed + 1))
else
  echo "FAIL: the diverged run's record does not say status diverged"
  failures=$((failures + 1))
fi

echo "hostile_inputs: $passed passed, $failures failed"
((failures == 0))
