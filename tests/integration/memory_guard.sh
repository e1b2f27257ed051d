#!/usr/bin/env bash
# --memory-guard on the CPU: one training step of every reference model at two image sizes
# (alexnet at issue 25's 64 px and its smallest, 63) with each convolution algorithm, every
# buffer surrounded by red zones and checked after every pass: none may be written. A guarded
# run's losses equal an unguarded one's, and the record says the guard was on.
# Usage: memory_guard.sh path/to/dlbench
set -u
dlbench=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/check.sh"

start=$(date +%s)
for case in resnet18:32 resnet18:64 resnet50:32 resnet50:64 vgg16:32 vgg16:64 alexnet:63 \
            alexnet:64 digits-cnn:8 digits-cnn:16; do
  model=${case%:*} size=${case#*:}
  for algo in im2col onednn winograd; do
    "$dlbench" run --model="$model" --image-size="$size" --batch=2 --steps=1 --warmup=0 \
      --conv-algo="$algo" --memory-guard >"$work/out" 2>&1
    rc=$?
    check "$model ${size}px $algo: one guarded step, exit 0" test $rc -eq 0
    ((rc == 0)) || tail -n 5 "$work/out"
  done
done
echo "guarded steps: $(($(date +%s) - start)) s"

run() {  # NAME FLAGS...: losses into $work/NAME.json
  local name=$1
  shift
  "$dlbench" run --model=resnet18 --image-size=32 --batch=2 --steps=3 --warmup=0 \
    --json="$work/$name.json" "$@" >/dev/null 2>&1
}
run plain
run guarded --memory-guard
check "a guarded run's losses are an unguarded one's" /usr/bin/python3 - "$work" <<'PY'
import json, sys
plain, guarded = (json.load(open(f"{sys.argv[1]}/{n}.json")) for n in ("plain", "guarded"))
assert plain["metrics"]["losses"] == guarded["metrics"]["losses"], (plain["metrics"], guarded["metrics"])
assert guarded["config"]["memory_guard"] is True and plain["config"]["memory_guard"] is False
PY
"$dlbench" run --model=digits-cnn --backend=cuda --cuda-graph --memory-guard >"$work/err" 2>&1
check "--memory-guard with --cuda-graph: exit 4" test $? -eq 4
check "... saying why" grep -q "which a replayed CUDA graph runs as one launch" "$work/err"
check_summary memory_guard
