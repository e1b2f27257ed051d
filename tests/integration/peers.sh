#!/usr/bin/env bash
# The PyTorch peer beside dlbench in a sweep (--systems): every point runs on both systems in
# turn, the peer's records are valid records with config.system = pytorch and its versions, the
# summary gives dlbench/PyTorch per point, a setting PyTorch cannot follow and a peer that cannot
# start are `unsupported` points with the reason while the sweep goes on, and an unknown system
# is refused. Usage: peers.sh path/to/dlbench
set -u
dlbench=$1
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d)
# A sweep with a CPU point measures the CPU's peak once and keeps it: in this test's own file,
# never the user's cache (measured while tests load the cores, it would be kept too low).
export DLBENCH_PEAK_FILE=$work/peaks.json
trap 'rm -rf "$work"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/check.sh"
py=/usr/bin/python3

cat >"$work/two.json" <<'JSON'
{"name": "two", "description": "resnet18 on one and two ranks, each overlap strategy",
 "defaults": {"model": "resnet18", "batch": 2, "image_size": 32, "steps": 4, "warmup": 1,
              "repetitions": 2, "min_time": 0.1, "backend": "cpu"},
 "sweep": {"ranks": [1, 2], "overlap": ["backward", "forward"]},
 "cpu": {}}
JSON

"$dlbench" --suite="$work/two.json" --out="$work/both" --systems=dlbench,pytorch --no-report \
  >"$work/both.out" 2>&1
rc=$?
check "a sweep with a peer exits 0 (unsupported is not a failure)" test $rc -eq 0
((rc == 0)) || cat "$work/both.out"
check "records: valid, alternating systems, forward unsupported for the peer only" \
  $py - "$work/both/results.jsonl" "$root" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[2] + "/reports")
from dlbench_reports.records import read_records
recs = read_records(sys.argv[1])
got = [(r.config["ranks"], r.config["overlap"], r.system, r.data["status"]) for r in recs]
want = []
for ranks in (1, 2):
    for overlap in ("backward", "forward"):
        want.append((ranks, overlap, "dlbench", "ok"))
        # One rank has nothing to overlap: PyTorch runs it; on two, DDP cannot overlap forward.
        bad = overlap == "forward" and ranks == 2
        want.append((ranks, overlap, "pytorch", "unsupported" if bad else "ok"))
assert got == want, got
for r in recs:
    if r.system == "pytorch" and r.ok:
        env = r.data["environment"]
        assert env["system"] == "pytorch" and env["torch"] and env["torchvision"], env
        assert r.data["metrics"]["throughput_img_s"] > 0
        m = r.data["metrics"]
        # warm-up, the steps left out as warm-up and the timed ones: every step's loss
        assert len(m["losses"]) == 1 + m["warmup_discarded_steps"] + m["timed_steps"], m
        # dlbench's timed phase: 2 repetitions of at least 4 steps and 0.1 s each
        assert m["repetitions"]["count"] == 2 and m["timed_steps"] >= 8 - 2, m
        assert r.config["image_size"] == 32 and r.config["num_classes"] == 1000
        assert (env["comm"] == "gloo") == (r.config["ranks"] == 2), env
    if r.data["status"] == "unsupported":
        assert "overlap=forward" in r.data["message"], r.data["message"]
PY
check "summary: a dlbench/pytorch ratio for each point both ran" \
  $py - "$work/both/summary.json" "$work/both/results.jsonl" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
recs = {json.dumps(r["suite_config"], sort_keys=True): r
        for r in map(json.loads, open(sys.argv[2]))}
n = 0
for p in s["points"]:
    both = p["config"]["overlap"] == "backward" or p["config"]["ranks"] == 1
    if p["config"]["system"] == "dlbench" and both:
        peer = recs[json.dumps(dict(p["config"], system="pytorch"), sort_keys=True)]
        want = p["throughput_img_s"] / peer["metrics"]["throughput_img_s"]
        assert abs(p["throughput_ratio_to"]["pytorch"] - want) < 1e-9 * want, p
        n += 1
    else:
        assert "throughput_ratio_to" not in p, p
assert n == 3, n  # backward on 1 and 2 ranks, forward on 1
PY
check "the console table has the ratio column" grep -q "vs pytorch" "$work/both.out"

# A peer that cannot start: unsupported points with the reason; dlbench's points still run.
DLBENCH_PEER_PYTHON=$work/no-python "$dlbench" --suite="$work/two.json" --out="$work/none" \
  --systems=pytorch,dlbench --no-report >"$work/none.out" 2>&1
check "a missing peer exits 0" test $? -eq 0
check "a missing peer is unsupported, naming what it needs" \
  $py - "$work/none/results.jsonl" "$work/no-python" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert [r["suite_config"]["system"] for r in recs] == ["pytorch", "dlbench"] * 4
for r in recs:
    if r["suite_config"]["system"] == "pytorch":
        assert r["status"] == "unsupported", r
        assert "imports torch, torchvision" in r["message"] and sys.argv[2] in r["message"], r
    else:
        assert r["status"] == "ok", r
PY

# The peer by hand: what it cannot reproduce is unsupported, with the reason; one rank ignores a
# batch job's Slurm variables (they name the job's size, not the point's).
alone=(env -u SLURM_PROCID -u SLURM_NTASKS -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE
       -u PMI_RANK -u PMI_SIZE)  # whatever launcher runs the tests, these start no ranks
by_hand=("$py" "$root/reports/peers/pytorch_train.py" --model=resnet18 --batch=2 --image-size=32
         --steps=1 --warmup=0)
peer=("${alone[@]}" "${by_hand[@]}")
status_of() { $py -c 'import json,sys; r=json.loads(sys.stdin.read().splitlines()[-1]); print(r["status"], r.get("message", ""))'; }
check "CPU fp16, which dlbench computes in f32: unsupported" \
  grep -q "^unsupported precision=fp16 on the CPU" <<<"$("${peer[@]}" --precision=fp16 2>/dev/null | status_of)"
check "CPU bf16 is PyTorch's CPU autocast: it trains" \
  grep -q "^ok" <<<"$("${peer[@]}" --precision=bf16 2>/dev/null | status_of)"
# ... and dlbench's own CPU bf16 record says whether its products ran natively: they do exactly
# where the CPU has AVX-512 BF16, and compute on f32 copies elsewhere; with AMX, a backward-filter
# pass whose sum is short computes on f32 copies too (docs/cpu.md), so the run is partly native,
# its forward and backward-data passes native.
"$dlbench" run --model=resnet18 --batch=2 --image-size=32 --steps=2 --warmup=0 --precision=bf16 \
  --json="$work/bf16.json" >"$work/bf16.out" 2>&1
native=emulated
grep -qw avx512_bf16 /proc/cpuinfo && native=native
grep -qw amx_bf16 /proc/cpuinfo && native="partly native"
check "a dlbench CPU bf16 record: metrics.arithmetic is $native, and the run says so" \
  $py - "$work/bf16.json" "$work/bf16.out" "$native" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))["metrics"]["arithmetic"]
verdict, passes, native = sys.argv[3], a["convolution_passes"], a["native_convolution_passes"]
assert a["verdict"] == verdict and a["data"] == "bf16", a
if verdict == "partly native":
    assert 2 * passes // 3 <= native < passes, a
else:
    assert native == (passes if verdict == "native" else 0), a
assert f"bf16 products: {verdict} (" in open(sys.argv[2]).read()
PY
check "two ranks without a launcher: unsupported" \
  grep -q "^unsupported ranks=2 needs the processes started by mpirun or srun" \
  <<<"$("${peer[@]}" --ranks=2 2>/dev/null | status_of)"
check "one rank inside a Slurm job of 4 tasks trains alone" \
  grep -q "^ok" <<<"$("${alone[@]}" SLURM_PROCID=0 SLURM_NTASKS=4 "${by_hand[@]}" 2>/dev/null |
                     status_of)"
# A point that asks for a CUDA graph (a point file, as the harness writes it): the peer runs eagerly.
$py - "$work/graph-point.json" <<'PY'
import json, sys
config = {"model": "resnet18", "batch": 2, "image_size": 32, "num_classes": 10, "steps": 1,
          "warmup": 0, "backend": "cpu", "precision": "fp32", "ranks": 1, "cuda_graph": True}
json.dump({"resolved": config, "record": sys.argv[1] + ".record"}, open(sys.argv[1], "w"))
PY
"${alone[@]}" "$py" "$root/reports/peers/pytorch_train.py" --point="$work/graph-point.json" \
  >/dev/null 2>&1
check "cuda_graph=true: the peer's point is unsupported, named" \
  grep -q '"cuda_graph=true: the peer trains eagerly' "$work/graph-point.json.record"
# A point timed for a minimum time and repeated: the peer runs dlbench's timed phase (steps, then
# more at the measured pace until 1 s, three times), each phase's throughput in the record.
$py - "$work/rep-point.json" <<'PY'
import json, sys
config = {"model": "resnet18", "batch": 2, "image_size": 32, "num_classes": 10, "steps": 2,
          "warmup": 0, "backend": "cpu", "precision": "fp32", "ranks": 1, "repetitions": 3,
          "min_time": 1.0}
json.dump({"resolved": config, "record": sys.argv[1] + ".record"}, open(sys.argv[1], "w"))
PY
"${alone[@]}" "$py" "$root/reports/peers/pytorch_train.py" --point="$work/rep-point.json" \
  >/dev/null 2>&1
check "min_time=1, repetitions=3: the peer's point is ok with its repetitions" $py - \
  "$work/rep-point.json.record" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["status"] == "ok", r
m = r["metrics"]
reps = m["repetitions"]
assert reps["count"] == 3 and len(reps["throughput_img_s"]) == 3, reps
# A 32-pixel resnet18 step on 2 images takes far less than half a second: min_time asked for
# more than the 2 steps of each phase.
assert m["timed_steps"] > 6, m["timed_steps"]
assert len(m["step_time_s"]["all"]) == m["timed_steps"]
# Each phase's throughput is its images over its time; together they are the record's.
assert min(reps["throughput_img_s"]) <= m["throughput_img_s"] <= max(reps["throughput_img_s"])
PY
"${peer[@]}" --steps=0 >/dev/null 2>"$work/steps.err"
check "--steps=0 by hand: exit 2, named" test $? -eq 2
check "... with the bound" grep -q -- "--steps must be >= 1 (got 0)" "$work/steps.err"

# Names that are not systems are refused before anything runs.
"$dlbench" --suite="$work/two.json" --out="$work/bad" --systems=dlbench,tensorflow >"$work/bad.out" 2>&1
check "unknown system: exit 2" test $? -eq 2
check "unknown system: named, with the known ones" \
  grep -q "unknown system 'tensorflow' (known: dlbench, pytorch)" "$work/bad.out"
check "unknown system: nothing written" test ! -e "$work/bad/results.jsonl"
"$dlbench" --suite="$work/two.json" --out="$work/twice" --systems=dlbench,dlbench >"$work/twice.out" 2>&1
check "a system named twice: exit 2" test $? -eq 2
sed 's/"sweep": {/"sweep": {"system": ["dlbench", "mxnet"], /' "$work/two.json" >"$work/mx.json"
"$dlbench" --suite="$work/mx.json" --dry-run >"$work/mx.out" 2>&1
check "unknown system in a suite file: exit 2" test $? -eq 2
check "unknown system in a suite file: named" grep -q "mxnet" "$work/mx.out"

check_summary peers
