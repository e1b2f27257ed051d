#!/usr/bin/env bash
# The input suite (suites/input.json, its cpu block): its dataset block's images are made into
# the output folder before the points, every point of data folder reads them (its record's
# command says where), the report draws where input bounds training, and --resume takes the
# images made before. A suite that reads images without naming them, and a --data-path where
# nothing is, are refused with one line before any point runs. Usage: input_suite.sh dlbench
set -u
dlbench=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
DLB_SOURCE=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

"$dlbench" --suite=input --out="$work/s" >"$work/s.log" 2>&1 || fail "the suite: $(tail -5 "$work/s.log")"
grep -q "^images: 480 training and 0 validation JPEGs of 10 classes" "$work/s.log" ||
  fail "no dataset line: $(head -5 "$work/s.log")"
[[ -d $work/s/dataset/train/class_009 ]] || fail "no dataset in the output folder"
/usr/bin/python3 - "$work/s" <<'PY' || fail "the records"
import json, sys
out = sys.argv[1]
rs = [json.loads(l) for l in open(f"{out}/results.jsonl")]
assert [r["status"] for r in rs] == ["ok"] * 3, [r.get("message") for r in rs]
synthetic = [r for r in rs if r["config"]["data"] == "synthetic"]
jpeg = [r for r in rs if r["config"]["data"] == "folder"]
assert len(synthetic) == 1 and "input" not in synthetic[0]["metrics"], synthetic
assert sorted(r["metrics"]["input"]["threads"] for r in jpeg) == [1, 2], jpeg
for r in jpeg:
    assert f"--data-path={out}/dataset" in r["command"], r["command"]
    assert r["metrics"]["input"]["source_images"] == 480, r["metrics"]["input"]
report = open(f"{out}/report.md").read()
assert "![Input pipeline](plots/input.png)" in report and "| loader threads |" in report, report[:2000]
# Its first paragraph answers the suite's question, each rate linked to its row.
first = report.split("\n\n")[1]
syn = next(i + 1 for i, r in enumerate(rs) if r["config"]["data"] == "synthetic")
assert first.startswith("On this machine") and f"img/s](#point-{syn}) on synthetic data" in first, first
assert "on the JPEG files at [" in first and "The loader's own rate" in first, first
loader = [r["metrics"]["input"]["loader_img_s"] for r in jpeg]
step = rs[syn - 1]["metrics"]["throughput_img_s"]
assert ("input does not bound training" in first) == any(v >= step for v in loader), first
print("input suite:", ", ".join(f"{r['config'].get('loader_threads', '-')} thread(s) "
                               f"{r['metrics']['throughput_img_s']:.0f} img/s" for r in rs))
PY
# --resume: the images made before are taken, not made again.
"$dlbench" --suite=input --out="$work/s" --resume --no-report >"$work/r.log" 2>&1 || fail "--resume: $(tail -3 "$work/r.log")"
grep -q "^images: $work/s/dataset (made before)" "$work/r.log" || fail "--resume made the images again: $(head -3 "$work/r.log")"
# A dataset block changed since: the images made before are not taken for its.
sed 's/"images": 480/"images": 400/' "$DLB_SOURCE/suites/input.json" >"$work/changed.json"
if "$dlbench" --suite="$work/changed.json" --out="$work/s" --resume --no-report >"$work/err" 2>&1; then
  fail "a changed dataset block took the images made before"
fi
grep -q "made from other options than the suite's dataset block" "$work/err" || fail "changed: $(cat "$work/err")"
# Points of shards, and a dataset block that makes none.
sed 's/"loader_threads": 2/"loader_threads": 2, "data": "shards"/' "$DLB_SOURCE/suites/input.json" >"$work/shards.json"
if "$dlbench" --suite="$work/shards.json" --out="$work/sh" --no-report >"$work/err" 2>&1; then
  fail "shards points with no shards made ran"
fi
grep -q "a dataset block that makes no shards" "$work/err" || fail "shards: $(cat "$work/err")"
[[ ! -e $work/sh ]] || fail "the refused suite wrote its output folder"

# A suite of image points that names no images; a --data-path where nothing is.
cat >"$work/bare.json" <<'JSON'
{"name": "bare", "description": "d", "defaults": {"model": "resnet18", "data": "folder", "steps": 1},
 "sweep": {"loader_threads": [1]}, "cpu": {}}
JSON
if "$dlbench" --suite="$work/bare.json" --out="$work/bare" --no-report >"$work/err" 2>&1; then
  fail "a suite of image points with no images ran"
fi
grep -q "give --data-path=DIR, or the suite a dataset block" "$work/err" || fail "bare: $(cat "$work/err")"
[[ $(grep -c . "$work/err") -eq 1 ]] || fail "bare: not one line: $(cat "$work/err")"
if "$dlbench" --suite="$work/bare.json" --out="$work/bare2" --data-path="$work/nothing" --no-report >"$work/err" 2>&1; then
  fail "a --data-path where nothing is ran"
fi
grep -q -- "--data-path=$work/nothing: no such file or folder" "$work/err" || fail "nothing: $(cat "$work/err")"
[[ $failures -eq 0 ]]
