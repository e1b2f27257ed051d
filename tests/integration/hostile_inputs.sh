#!/usr/bin/env bash
# Every regression input of the fuzz targets (tests/fuzz/regressions), through the command line
# as a user would give it: weights (--init), a batch (--batch-file), the digits (--data-path), a
# suite (--suite --dry-run), a point file (worker --point), a peak file ($DLBENCH_PEAK_FILE) and a
# results.jsonl (--resume). Each is refused with exit 2 and one line on stderr, naming the file,
# with no internal error, and changes no file already written; inputs named accepted_* are
# accepted instead. Then flags past what holds them, and empty values. A run whose loss becomes
# non-finite ends with status "diverged" and exit 7, and does not replace a record already there.
# Usage: hostile_inputs.sh path/to/dlbench
set -u
dlbench=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
inputs=$here/../fuzz/regressions
work=$(mktemp -d)
# A sweep with a CPU point measures the CPU's peak once and keeps it: in this test's own file,
# never the user's cache (measured while tests load the cores, it would be kept too low).
export DLBENCH_PEAK_FILE=$work/peaks.json
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

# Point files, as the worker reads them.
for f in "$inputs"/point_file/*; do
  check "point_file/$(basename "$f")" "$(want_for "$f")" worker --point="$f"
done
# Peak files: `bench peak` refuses one it cannot read before measuring; a training run writes its
# record without the fraction of peak, and says why.
for f in "$inputs"/peak_file/*; do
  DLBENCH_PEAK_FILE=$f check "peak_file/$(basename "$f")" 2 bench peak
done
mkdir -p "$work/peak_dir"
for peak in "$inputs/peak_file/negative_threads" "$work/peak_dir" "$inputs/peak_file/top_level_array/under"; do
  rm -f "$work/peaked.json"
  DLBENCH_PEAK_FILE=$peak check "a run beside peak file $(basename "$peak")" 0 "${quick[@]}" \
    --json="$work/peaked.json"
  if [[ -f $work/peaked.json ]] && ! grep -q '"peak"' "$work/peaked.json"; then
    passed=$((passed + 1))
  else
    echo "FAIL: a run beside peak file $peak: no record, or a record with its peak"
    failures=$((failures + 1))
  fi
done
# results.jsonl as --resume reads it: refused whole and left as it was, or, for a torn last line
# (accepted_*), the torn bytes moved aside, every whole record kept, and the sweep completed.
for f in "$inputs"/results/*; do
  name=results/$(basename "$f")
  rm -rf "$work/resumed" && mkdir -p "$work/resumed" && cp "$f" "$work/resumed/results.jsonl"
  check "$name" "$(want_for "$f")" --suite=smoke --out="$work/resumed" --resume --no-report
  if [[ $(want_for "$f") == 2 ]]; then
    if cmp -s "$f" "$work/resumed/results.jsonl" && ! ls "$work/resumed"/*.torn-* >/dev/null 2>&1; then
      passed=$((passed + 1))
    else
      echo "FAIL: $name: a refused --resume changed results.jsonl or set a torn tail aside"
      failures=$((failures + 1))
    fi
  else
    whole=$(tr -cd '\n' <"$f" | wc -c)
    torn=$(ls "$work/resumed"/results.jsonl.torn-* 2>/dev/null | wc -l)
    lines=$(wc -l <"$work/resumed/results.jsonl")
    if ((torn == 1)) && ((lines == whole + 2)) && "$here/../../.venv/bin/python" -c \
        "import sys; sys.path.insert(0, '$here/../../reports'); from dlbench_reports.records import read_records; read_records('$work/resumed')"; then
      passed=$((passed + 1))
    else
      echo "FAIL: $name: want the torn tail set aside and $((whole + 2)) records, got $torn and $lines"
      failures=$((failures + 1))
    fi
  fi
done

# A trace name that fits rank 0's file but not rank 1's (".rank1" more): refused before any rank
# runs, not after the run.
check "--trace: rank 1's file past NAME_MAX" 2 "${quick[@]}" --ranks=2 --trace-steps=1 \
  --trace="$work/$(printf 't%.0s' {1..245}).json"

# The simulator's files and check-ops' instance texts: each refused before any record or check.
for f in "$inputs"/calibration/*; do
  check "calibration/$(basename "$f")" "$(want_for "$f")" simulate --calibration="$f" \
    --network=dgx-h100 --ranks=2 --out="$work/sim-calibration"
done
for f in "$inputs"/network/*; do
  check "network/$(basename "$f")" "$(want_for "$f")" simulate --roofline=h100-sxm \
    --model=digits-cnn --batch=8 --precision=bf16 --network="$f" --ranks=2 --out="$work/sim-network"
done
for f in "$inputs"/device/*; do
  check "device/$(basename "$f")" "$(want_for "$f")" simulate --roofline="$f" --model=resnet50 \
    --batch=256 --precision=bf16 --network=dgx-h100 --ranks=2 --out="$work/sim-device"
done
for f in "$inputs"/op_instance/*; do
  check "op_instance/$(basename "$f")" "$(want_for "$f")" check-ops --backend=cpu \
    --instance="$(cat "$f")"
done
for d in sim-calibration sim-network sim-device; do
  if [[ -e $work/$d/results.jsonl ]]; then
    echo "FAIL: a refused simulator input appended records to $d"
    failures=$((failures + 1))
  fi
done

# Flags out of the range of what holds them, empty values, names that are no name.
check "bench allreduce --iters=2^32" 2 bench allreduce --iters=4294967296
check "bench allreduce --iters=2^31" 2 bench allreduce --iters=2147483648
check "bench allreduce --max-bytes=1e19" 2 bench allreduce --max-bytes=1e19
check "--comm-timeout=1e10" 2 "${quick[@]}" --comm-timeout=1e10
check "--lr=1e-46" 2 "${quick[@]}" --lr=1e-46
check "--lr=1e39" 2 "${quick[@]}" --lr=1e39
check "--momentum=1e39" 2 "${quick[@]}" --momentum=1e39
check "--weight-decay=1e39" 2 "${quick[@]}" --weight-decay=1e39
check "--dropout=0.99999999" 2 "${quick[@]}" --dropout=0.99999999
# One number grammar (runtime/core/parse_number.h): no hex, no leading space, no underflow, no
# sign on an unsigned number, and a size of at least one whole byte, whatever reads it.
for budget in 0x10 0.5 1e-300 " 4GiB" 4GiBs; do
  check "--memory-budget=$budget" 2 "${quick[@]}" --memory-budget="$budget"
done
for lr in 0x1p-3 " 0.1" 1e-400 nan inf; do check "--lr=$lr" 2 "${quick[@]}" --lr="$lr"; done
check "--min-time=nan" 2 "${quick[@]}" --min-time=nan
check "--lr=3e38 scaled past a float" 2 "${quick[@]}" --lr=3e38 --lr-scaling=linear --batch=1024
check "--lr=1e-37 scaled below a float" 2 "${quick[@]}" --lr=1e-37 --lr-scaling=linear
check "check-ops --seed=-1" 2 check-ops --backend=cpu --instance='relu:shape=2x3' --seed=-1
check "simulate --seed=-1" 2 simulate --roofline=h100-sxm --model=resnet50 --batch=64 --seed=-1
check "simulate --bucket-mb=0x10" 2 simulate --roofline=h100-sxm --model=resnet50 --batch=64 \
  --bucket-mb=0x10
# A network whose numbers make a simulated record's overflow: refused before any record is
# appended (the folder stays empty), naming the --network given.
for broken in "net latency_us 1e308" "node bandwidth_gbs 5e-324"; do
  read -r part key value <<<"$broken"
  python3 -c "import json,sys; n=json.load(open(sys.argv[1])); n['$part']['$key']=$value; json.dump(n, open(sys.argv[2], 'w'))" \
    "$here/../../suites/networks/dgx-h100.json" "$work/net.json"
  rm -rf "$work/sim"
  check "simulate --network with $key $value" 2 simulate --roofline=h100-sxm --model=resnet50 \
    --batch=64 --network="$work/net.json" --ranks=1,2,16 --out="$work/sim"
  if [[ -e $work/sim/results.jsonl ]]; then
    echo "FAIL: simulate with $key $value appended records before refusing"
    failures=$((failures + 1))
  fi
done
check "check-ops --sizes=0x20" 2 check-ops --backend=cpu --sizes=0x20 --list
for inst in 'dropout:shape=4x5,p=0x1p-1' 'dropout:shape=4x5,p=1e-400' 'dropout:shape=4x5,p= 0.5' \
            'relu:shape=0x2' 'relu:shape=+2x3' 'sgd:shape=10,copy=-0'; do
  check "check-ops --instance=$inst" 2 check-ops --backend=cpu --instance="$inst"
done
check "--image-size=2^63-1" 2 run --model=resnet18 --image-size=9223372036854775807
check "--out= swallowing --dry-run" 2 --suite=smoke --out= --dry-run
check "--json= swallowing --trace-steps" 2 "${quick[@]}" --json= --trace-steps=1
check "an empty argument" 2 --suite=smoke --out "" --dry-run
check "--suite=micro --timeout=0" 2 --suite=micro --timeout=0 --out="$work/micro"
check "--timeout=1e300" 2 --suite=smoke --timeout=1e300 --out="$work/t"
check "bench conv --backend=2" 2 bench conv --backend=2
check "a value ending in = is a value" 0 --suite=smoke --out="$work/a=" --dry-run
check "a newline in a value stays one line" 2 run --model=$'x\ny'
# Files that are no regular file: a directory, a FIFO (which must not hang), a device.
mkfifo "$work/not_a_file.json"
mkdir -p "$work/peak_dir.json"
check "a directory as the suite" 2 --suite="$work/peak_dir.json" --dry-run
check "a FIFO as the suite" 2 --suite="$work/not_a_file.json" --dry-run
check "a FIFO as the weights" 2 "${quick[@]}" --init="$work/not_a_file.json"
check "/dev/zero as the batch" 2 run --model=resnet18 --batch-file=/dev/zero
check "a FIFO as the digits" 2 run --model=digits-cnn --data=digits --data-path="$work/not_a_file.json"
check "--out under a regular file" 2 --suite=smoke --out="$inputs/point_file/top_level_array/out" --no-report
printf '{"name": "r", "description": "ranks past int", "defaults": {"model": "digits-cnn"},
  "sweep": {"ranks": [2147483648, 4294967296]}, "cpu": {}}' >"$work/ranks.json"
check "ranks 2^31 and 2^32 in a suite" 2 --suite="$work/ranks.json" --out="$work/ranks" --no-report

# Shapes past 64 bits, from the command line.
check "image size 2^40" 2 run --model=resnet18 --image-size=1099511627776 --batch=1 --steps=1
check "memory budget past 2^64" 2 run --model=resnet18 --memory-budget=99999999999999999999GiB

# Divergence: lr 1e38 (near the largest float) makes the loss NaN by the second step.
echo '{"status": "ok", "kept": true}' >"$work/record.json"
check "diverged" 7 run --model=resnet18 --image-size=32 --batch=2 --steps=3 --warmup=0 \
  --lr=1e38 --json="$work/diverged.json"
if grep -q '"status": "diverged"' "$work/diverged.json" 2>/dev/null; then
  passed=$((passed + 1))
else
  echo "FAIL: the diverged run's record does not say status diverged"
  failures=$((failures + 1))
fi

# Round 4, item 3: work whose memory is estimated above the machine's (DLBENCH_HOST_MEMORY stands
# in for it here) is refused before it allocates: exit 3, one line with the estimate, in seconds,
# and a record already at its --json path stays as it was.
check_memory() {  # check_memory NAME ARGS...
  local name=$1
  shift
  local err rc
  err=$(DLBENCH_HOST_MEMORY=512MiB timeout 60 "$dlbench" "$@" 2>&1 >/dev/null)
  rc=$?
  if [[ $rc -eq 3 && $(printf '%s' "$err" | grep -c '') -eq 1 && $err == *"would take about"* ]]; then
    passed=$((passed + 1))
  else
    echo "FAIL: $name: exit $rc (want 3 and one line with the estimate): $err"
    failures=$((failures + 1))
  fi
}
echo '{"kept": true}' >"$work/kept.json"
check_memory "check-ops sgd 2^31 - 1" check-ops --backend=cpu --instance=sgd:shape=2147483647,copy=0 \
  --json="$work/kept.json"
check_memory "check-ops linear 2^28 outputs" check-ops --backend=cpu \
  --instance=linear:shape=2x8,out=268435456
check_memory "check-ops --batches=100000" check-ops --backend=cpu --models=resnet18 --sizes=32 \
  --batches=100000 --ops=conv
check_memory "run --sync=stale:1000" run --model=resnet18 --image-size=32 --batch=2 --steps=1 \
  --warmup=0 --sync=stale:1000 --json="$work/kept.json"
check_memory "run --batch=4096" run --model=resnet18 --image-size=32 --batch=4096 --steps=1 \
  --warmup=0
if [[ $(cat "$work/kept.json") == '{"kept": true}' ]]; then
  passed=$((passed + 1))
else
  echo "FAIL: a refused run changed the record at its --json path"
  failures=$((failures + 1))
fi
export DLBENCH_HOST_MEMORY=512MiB
check "maxbatch: a budget above the machine's memory" 2 maxbatch --model=digits-cnn \
  --image-size=8 --memory-budget=1.8e19
check "maxbatch: a budget within it" 0 maxbatch --model=digits-cnn --image-size=8 \
  --memory-budget=256MiB
unset DLBENCH_HOST_MEMORY
DLBENCH_HOST_MEMORY=lots check "an unreadable DLBENCH_HOST_MEMORY" 2 "${quick[@]}"

# The reports and the PyTorch peer (reports/)
root=$(cd "$here/../.." && pwd)
fixtures=$root/tests/reports/fixtures
reports=(env PYTHONPATH="$root/reports" "$root/.venv/bin/python" -m dlbench_reports)
# check_cmd NAME WANT_CODE PREFIX COMMAND...: the exit code within 120 s, and for a refusal one
# line starting with PREFIX, without a traceback.
check_cmd() {
  local name=$1 want=$2 prefix=$3
  shift 3
  local err rc
  err=$(timeout 120 "$@" 2>&1 >"$work/stdout")
  rc=$?
  if [[ $rc -ne $want ]]; then
    echo "FAIL: $name: exit $rc (want $want): $err"
  elif ((want == 2)) && [[ $(printf '%s' "$err" | grep -c '') -ne 1 || $err != "$prefix"* ]]; then
    echo "FAIL: $name: want one '$prefix' line, got: $err"
  else
    passed=$((passed + 1))
    return
  fi
  failures=$((failures + 1))
}
edit_records() {  # edit_records DIR PYTHON-EXPRESSION-ON-r: applied to every record of DIR
  "$root/.venv/bin/python" - "$1/results.jsonl" "$2" <<'PY'
import json, sys
path, change = sys.argv[1], sys.argv[2]
records = [json.loads(line) for line in open(path)]
for r in records:
    exec(change)
open(path, "w").write("".join(json.dumps(r) + "\n" for r in records))
PY
}

# 8: records the schema accepts: a target reached with no time recorded, no image size.
cp -r "$fixtures/convergence" "$work/conv"
edit_records "$work/conv" 'r["metrics"]["convergence"]["time_to_accuracy_s"] = None; r["config"]["image_size"] = None'
check_cmd "report: reached, time to accuracy null" 0 "" "${reports[@]}" report "$work/conv"
check_cmd "compare: image size null" 0 "" "${reports[@]}" compare "$work/conv"
# 9: micro.json of the wrong shape: a rate that is a string.
cp -r "$fixtures/micro" "$work/micro"
sed -i '0,/"FLOP\/s": \([0-9.e+]*\)/s//"FLOP\/s": "\1"/' "$work/micro/micro.json"
check_cmd "micro: a rate that is a string" 2 "dlbench: error: $work/micro/micro.json: " \
  "${reports[@]}" micro "$work/micro"
# 10: traces that are /dev/zero and a FIFO: skipped and said so, not read.
cp -r "$fixtures/overlap" "$work/traces"
mkfifo "$work/fifo"
edit_records "$work/traces" "r.get('paths', {}).get('traces') and r['paths'].update(traces=['/dev/zero', '$work/fifo'])"
check_cmd "report: traces /dev/zero and a FIFO" 0 "" "${reports[@]}" report "$work/traces"
if grep -q "^report: skipped the timeline of point .*/dev/zero" "$work/stdout"; then
  passed=$((passed + 1))
else
  echo "FAIL: the report does not say it skipped the traces: $(cat "$work/stdout")"
  failures=$((failures + 1))
fi
# 13: 100,000 distinct convolutions in 1.5 GB of address space: the conv plot stays bounded.
mkdir "$work/wide"
"$root/.venv/bin/python" - "$fixtures/micro/micro.json" "$work/wide/micro.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
row = next(b for b in d["benchmarks"] if b["name"].startswith("conv/"))
parts = row["name"].split("/")
d["benchmarks"] = [dict(row, name="/".join(parts[:4] + [f"m.layer{i}"] + parts[5:]))
                   for i in range(100000)]
json.dump(d, open(sys.argv[2], "w"))
PY
check_cmd "micro: 100,000 conv rows" 0 "" bash -c 'ulimit -v 1500000 && exec "$@"' _ \
  "${reports[@]}" micro "$work/wide"
# 15: the PyTorch peer's point file: a batch that is a string; no record is written.
"$root/.venv/bin/python" - "$root/tests/fuzz/peer_point/corpus/harness_point.json" \
  "$work/point.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["resolved"]["batch"] = "2"
p["record"] = sys.argv[2] + ".record"
json.dump(p, open(sys.argv[2], "w"))
PY
check_cmd "peer: batch a string" 2 "pytorch_train: error: $work/point.json: resolved.batch: " \
  /usr/bin/python3 "$root/reports/peers/pytorch_train.py" --point="$work/point.json"
if [[ -e $work/point.json.record ]]; then
  echo "FAIL: the peer wrote a record for a point it refused"
  failures=$((failures + 1))
fi

echo "hostile_inputs: $passed passed, $failures failed"
((failures == 0))
