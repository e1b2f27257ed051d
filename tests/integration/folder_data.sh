#!/usr/bin/env bash
# `dlbench run --data=folder`: resnet18 trains on make-dataset's JPEGs through the loader. The
# record says what the input cost (metrics.input: batches, waits, the loader's rate, its verdict
# by the 5% rule), the classes come from the folder, the command reproduces the run, and two
# ranks train on it too. A file that does not decode is skipped and named, or (--bad-images=fail)
# ends the run with one line; a folder that is not one, or classes that disagree, are refused.
# The same images from make-dataset's tar shards (--data=shards). And time to accuracy on JPEGs:
# epochs over train/ to a target on val/, with an MLPerf log.
# Usage: folder_data.sh path/to/dlbench
set -u
dlbench=$(realpath "$1")
export DLB_SOURCE=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

"$dlbench" make-dataset --out="$work/ds" --images=96 --val-images=0 --classes=4 --size=96x80 \
  --shards=2 >/dev/null || fail "make-dataset"
base=(run --model=resnet18 --data=folder --data-path="$work/ds" --batch=8 --image-size=32 --warmup=1)
run=("${base[@]}" --steps=6)
"$dlbench" "${run[@]}" --loader-threads=2 --json="$work/one.json" --trace-steps=3 \
  --trace="$work/one.trace.json" >"$work/one.log" 2>&1 || fail "one rank: $(tail -3 "$work/one.log")"
grep -q "^input: 96 JPEGs (folder) of 4 classes, decoded by libjpeg-turbo, 2 loader thread(s)" "$work/one.log" || fail "no input line: $(cat "$work/one.log")"
/usr/bin/python3 - "$work/one.json" <<'PY' || fail "one rank's record"
import json, os, sys
import jsonschema
r = json.load(open(sys.argv[1]))
schema = json.load(open(os.path.join(os.environ["DLB_SOURCE"], "suites/schema/result.schema.json")))
schema["required"] = [k for k in schema["required"] if k != "point"]  # a sweep's key
try:
    jsonschema.validate(r, schema)
except jsonschema.ValidationError as e:
    sys.exit(f"the record breaks result.schema.json: {e.message} at {list(e.absolute_path)}")
c, m = r["config"], r["metrics"]
assert r["status"] == "ok" and c["data"] == "folder" and c["num_classes"] == 4, c
assert "--data=folder" in r["command"] and "--data-path=" in r["command"], r["command"]
i = m["input"]
assert i["source"] == "folder" and i["source_images"] == 96 and i["classes"] == 4, i
# Every step of the timed phase loaded a batch, those later judged still warming up too.
assert i["batches"] == m["timed_steps"] + m["warmup_discarded_steps"], (i, m["timed_steps"])
assert i["threads"] == 2 and i["images"] == 8 * i["batches"], i
assert i["skipped"] == 0 and i["skipped_files"] == [], i
median = m["step_time_s"]["median"]
assert abs(i["waited_per_step_s"] - i["waited_s"] / i["batches"]) < 1e-12, i
assert abs(i["wait_share_of_step"] - i["waited_per_step_s"] / median) < 1e-9, i
assert i["verdict"] == ("input-bound" if i["waited_per_step_s"] > 0.05 * median else "not input-bound"), i
# CPU time of the threads over the timed phase, plus the batches begun before it and after.
assert i["loader_img_s"] > 0 and 0 < i["loader_cores"] <= i["threads"] + 0.5, i
# The trace: a lane per loader thread (tid 4 + thread), a span per batch made during the window,
# cut at its edges (the window opens just before its first step's span), in a traced step.
t = json.load(open(sys.argv[1].replace(".json", ".trace.json")))["traceEvents"]
names = {e["tid"]: e["args"]["name"] for e in t if e.get("ph") == "M" and e["name"] == "thread_name"}
loader = [e for e in t if e.get("cat") == "loader"]
steps = {e["args"]["step"]: e for e in t if e.get("cat") == "step"}
assert loader, "no loader span in the trace"
first = min(e["ts"] for e in steps.values())
for e in loader:
    assert e["tid"] >= 4 and names[e["tid"]] == f"loader {e['tid'] - 4}", (e, names)
    assert e["name"].startswith("batch ") and e["args"]["step"] in steps, e
    assert e["ts"] >= first - 1000 and e["dur"] >= 0, (e, first)
print(f"1 rank: {m['throughput_img_s']:.1f} img/s, loader {i['loader_img_s']:.0f} img/s, "
      f"waited {1000 * i['waited_per_step_s']:.2f} ms a step: {i['verdict']}")
PY

# The same images from the tar shards: the same classes, through the same loader.
"$dlbench" run --model=resnet18 --data=shards --data-path="$work/ds/shards/shard-*.tar" --batch=8 \
  --image-size=32 --steps=4 --json="$work/shards.json" >"$work/shards.log" 2>&1 ||
  fail "shards: $(tail -3 "$work/shards.log")"
/usr/bin/python3 -c "
import json; r = json.load(open('$work/shards.json')); i = r['metrics']['input']
assert r['config']['data'] == 'shards' and r['config']['num_classes'] == 4, r['config']
assert i['source'] == 'shards' and i['source_images'] == 96 and i['classes'] == 4, i
" || fail "the shards' record"

if command -v mpirun >/dev/null; then
  mpirun -np 2 --oversubscribe "$dlbench" "${run[@]}" --ranks=2 --json="$work/two.json" \
    >"$work/two.log" 2>&1 || fail "two ranks: $(tail -3 "$work/two.log")"
  /usr/bin/python3 -c "
import json; r = json.load(open('$work/two.json'))
assert r['status'] == 'ok' and r['metrics']['input']['batches'] >= 6, r.get('message')
" || fail "two ranks' record"
fi

# A file that does not decode: skipped, counted, named; or the run's end.
bad=$(find "$work/ds/train/class_001" -name '*.JPEG' | sort | head -1)
printf 'not a jpeg' >"$bad"
"$dlbench" "${base[@]}" --steps=12 --json="$work/skip.json" >"$work/skip.log" 2>&1 || fail "skip: $(tail -3 "$work/skip.log")"
/usr/bin/python3 -c "
import json, sys; i = json.load(open('$work/skip.json'))['metrics']['input']
assert i['skipped'] >= 1 and len(i['skipped_files']) == 1 and '$bad' in i['skipped_files'][0], i
" || fail "the bad file was not skipped and named once"
if "$dlbench" "${base[@]}" --steps=12 --bad-images=fail >"$work/err" 2>&1; then
  fail "--bad-images=fail trained past a bad file"
fi
grep -q "$bad" "$work/err" || fail "--bad-images=fail did not name the file: $(cat "$work/err")"

# Refused before training, with one line and exit 2.
refused() {
  local why=$1
  shift
  "$dlbench" "$@" >"$work/err" 2>&1
  local rc=$?
  [[ $rc -eq 2 && $(wc -l <"$work/err") -eq 1 ]] || fail "$why: exit $rc, $(cat "$work/err")"
}
refused "no --data-path" run --model=resnet18 --data=folder --image-size=32 --steps=1
refused "no train/ folder" run --model=resnet18 --data=folder --data-path="$work/ds/train" --image-size=32 --steps=1
refused "classes disagree" "${run[@]}" --num-classes=10
refused "epochs with no val/" "${run[@]}" --epochs=1
refused "epochs over shards" run --model=resnet18 --data=shards --data-path="$work/ds/shards" --epochs=1
refused "no shards" run --model=resnet18 --data=shards --data-path="$work/ds/train" --image-size=32 --steps=1
refused "a target with no epochs" "${run[@]}" --target-accuracy=0.5

# Time to accuracy through the JPEG path: epochs over train/, evaluations over val/.
"$dlbench" make-dataset --out="$work/tta" --images=320 --val-images=80 --classes=4 --size=64x48 \
  --shards=0 >/dev/null || fail "make-dataset (tta)"
"$dlbench" run --model=resnet18 --data=folder --data-path="$work/tta" --batch=16 --image-size=32 \
  --epochs=10 --target-accuracy=0.8 --lr=0.02 --mllog="$work/tta.mllog" --json="$work/tta.json" \
  >"$work/tta.log" 2>&1 || fail "time to accuracy: $(tail -3 "$work/tta.log")"
/usr/bin/python3 - "$work/tta.json" "$work/tta.mllog" <<'PY' || fail "time to accuracy's record"
import json, sys
m = json.load(open(sys.argv[1]))["metrics"]
c = m["convergence"]
assert c["reached"] and c["time_to_accuracy_s"] > 0 and m["test_samples"] == 80, c
assert len(c["eval_accuracy"]) == c["epochs"] and c["eval_accuracy"][-1] >= 0.8, c
# The loader over every training step of the epochs: 320 / 16 = 20 batches an epoch.
i = m["input"]
assert i["batches"] == 20 * c["epochs"] and i["images"] == 16 * i["batches"], (i, c["epochs"])
assert m["median_step_s"] > 0 and abs(i["wait_share_of_step"] - i["waited_per_step_s"] / m["median_step_s"]) < 1e-9, i
assert i["verdict"] in ("input-bound", "not input-bound") and i["skipped"] == 0, i
log = [json.loads(l.split(":::MLLOG ", 1)[1]) for l in open(sys.argv[2]) if ":::MLLOG" in l]
keys = {e["key"]: e["value"] for e in log}
assert keys["train_samples"] == 320 and keys["eval_samples"] == 80, keys
print(f"time to {100 * c['target_accuracy']:.0f}%: {c['time_to_accuracy_s']:.2f} s, {c['epochs']} epochs, accuracies {c['eval_accuracy']}")
PY
refused "a model of grey images" run --model=digits-cnn --data=folder --data-path="$work/ds" --image-size=32 --steps=1
grep -q "gives RGB images" "$work/err" || fail "the grey model's refusal: $(cat "$work/err")"
[[ $failures -eq 0 ]]
