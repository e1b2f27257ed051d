#!/usr/bin/env bash
# `dlbench simulate` end to end: a suite of the digits CNN on 1 and 2 ranks, traced, whose
# 2-rank points get their measured scaling-loss breakdown from their traces, and whose one-rank
# points (with their profiles) calibrate the simulator; the simulated records are valid, their
# scaling-loss parts add up to the step beyond the one-rank step, their one-rank point is the
# calibrated step, the same seed gives the same steps, a record's command makes it again, and the report draws them. Bad input (an unknown preset, a network file
# with a missing or negative field, ranks below 1, a calibration of another model or batch, a
# straggler beyond the ranks, a jitter that is not one) gets one line and exit 2, and leaves
# results.jsonl as it was; a suite whose simulate block names an unknown preset runs no point.
# Usage: simulate.sh path/to/dlbench
set -u
dlbench=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/check.sh"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
py="$root/.venv/bin/python"

cat >"$work/suite.json" <<'JSON'
{"name": "simcal", "description": "measured points, and one-rank ones to calibrate the simulator",
 "defaults": {"backend": "cpu", "model": "digits-cnn", "image_size": 8, "steps": 6, "warmup": 2},
 "sweep": {"batch": [8, 16], "ranks": [1, 2]},
 "cpu": {"defaults": {"backend": "cpu"}}}
JSON
"$dlbench" --suite="$work/suite.json" --out="$work/r" --trace-steps=2 >"$work/suite.out" 2>&1
check "the calibration suite runs" test $? -eq 0

"$dlbench" simulate --from="$work/r" --network=dgx-h100 --ranks=1,2,8,64 --steps=10 \
  >"$work/sim.out" 2>&1
check "simulate: exit 0" test $? -eq 0
cat "$work/sim.out" | head -4
check "a calibration per measured point" test -f "$work/r/calibration/digits-cnn-b8-8px-fp32-cpu-reuse-none-10c.json" -a \
  -f "$work/r/calibration/digits-cnn-b16-8px-fp32-cpu-reuse-none-10c.json"

check "the records: valid, parts adding up, the one-rank point the calibration's step" \
  "$py" - "$root" "$work/r" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1] + "/reports")
from dlbench_reports.records import read_records
records = read_records(sys.argv[2])  # validates every line against the schema
sim = [r.data for r in records if r.data["mode"] == "simulated"]
assert len(sim) == 2 * 3 * 4, len(sim)
measured = [r.data for r in records if r.data["mode"] == "measured" and r.data["config"]["ranks"] == 2]
assert len(measured) == 2 and all(r["status"] == "ok" for r in measured), measured
for r in measured + sim:
    l = r["metrics"]["scaling_loss"]
    parts = l["exposed_comm_s"] + l["waiting_for_slowest_s"] + l["compute_slowdown_s"] + l["rest_s"]
    assert abs(l["step_s"] - l["one_rank_step_s"] - parts) < 1e-9 * l["step_s"], r["point"]
    if r["mode"] == "measured":  # (on a loaded machine one rank can be the slower)
        assert l["step_s"] > 0 and l["one_rank_step_s"] > 0, l
        continue
    assert abs(r["metrics"]["scaling_efficiency"] - l["one_rank_step_s"] / l["step_s"]) < 1e-9
    assert r["simulation"]["network"]["name"] == "dgx-h100"
    if r["config"]["ranks"] == 1:
        cal = json.load(open(f'{sys.argv[2]}/calibration/{r["simulation"]["calibration"]}.json'))
        assert abs(l["step_s"] - cal["step_ms"] / 1e3) < 1e-9, (l, cal["step_ms"])
        assert r["simulation"]["reductions"] == []
    else:
        assert r["simulation"]["reductions"], r["point"]
PY

"$dlbench" simulate --calibration="$work/r/calibration/digits-cnn-b8-8px-fp32-cpu-reuse-none-10c.json" \
  --network=pcie-25gbe --ranks=16 --overlap=backward --steps=10 --out="$work/a" >/dev/null 2>&1
"$dlbench" simulate --calibration="$work/r/calibration/digits-cnn-b8-8px-fp32-cpu-reuse-none-10c.json" \
  --network=pcie-25gbe --ranks=16 --overlap=backward --steps=10 --out="$work/b" >/dev/null 2>&1
check "the same seed, the same simulated steps" "$py" - "$work" <<'PY'
import json, sys
a, b = (json.loads(open(f"{sys.argv[1]}/{d}/results.jsonl").readline()) for d in "ab")
assert a["metrics"]["step_time_s"]["all"] == b["metrics"]["step_time_s"]["all"]
assert a["simulation"]["replayed_ranks"] == 16  # measured jitter: every rank its own speed
PY

# A simulated record's command is the `dlbench simulate` that makes it, not a `dlbench run`: run
# again (into another folder), it gives the same simulated steps.
cmd=$("$py" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["command"])' \
  "$work/a/results.jsonl")
check "a simulated record's command is dlbench simulate" test "${cmd%% --*}" = "dlbench simulate"
cmd=${cmd% --out=*}  # its --out comes last; this run writes elsewhere
eval "\"\$dlbench\" ${cmd#dlbench } --out=\"\$work/again\"" >/dev/null 2>&1
check "its command run again makes the same steps" "$py" - "$work" <<'PY'
import json, sys
a, b = (json.loads(open(f"{sys.argv[1]}/{d}/results.jsonl").readline()) for d in ("a", "again"))
assert a["metrics"]["step_time_s"]["all"] == b["metrics"]["step_time_s"]["all"]
assert a["suite_config"] == b["suite_config"], (a["suite_config"], b["suite_config"])
PY
# One made --from a results folder names the one calibration file it came from (--from with the
# model and batch would re-make every calibration of them), and the folder as --out.
check "a --from record's command names its calibration file" "$py" - "$work" <<'PY'
import json, sys
w = sys.argv[1]
sim = [json.loads(l) for l in open(f"{w}/r/results.jsonl") if '"simulated"' in l]
for r in sim:
    key = r["simulation"]["calibration"]
    assert f"--calibration={w}/r/calibration/{key}.json" in r["command"], r["command"]
    assert r["command"].endswith(f"--out={w}/r") and "--from" not in r["command"], r["command"]
PY

(cd "$root/reports" && "$py" -m dlbench_reports report "$work/r" >"$work/report.out" 2>&1)
check "the report renders the simulated points" test $? -eq 0
# Bounded staleness simulated: the strategy none by default, the point's id and command naming
# stale:2, and on a slow network each step's reduction hidden behind the next two steps' compute,
# so that 64 stale ranks lose less to communication than 64 synchronous ones.
for sync in sync stale:2; do
  "$dlbench" simulate --calibration="$work/r/calibration/digits-cnn-b8-8px-fp32-cpu-reuse-none-10c.json" \
    --network=pcie-25gbe --ranks=64 --sync=$sync --overlap=none --jitter=none --steps=10 \
    --out="$work/sync-${sync/:/}" >/dev/null 2>&1
done
"$dlbench" simulate --calibration="$work/r/calibration/digits-cnn-b8-8px-fp32-cpu-reuse-none-10c.json" \
  --network=pcie-25gbe --ranks=64 --sync=stale:2 --jitter=none --steps=10 --out="$work/stale-default" \
  >/dev/null 2>&1
check "stale:2 simulated: its strategy none, named in its id's config and command, less exposed comm" \
  "$py" - "$work" <<'PY'
import json, sys
w = sys.argv[1]
sync, stale = (json.loads(open(f"{w}/{d}/results.jsonl").readline()) for d in ("sync-sync", "sync-stale2"))
assert "sync" not in sync["suite_config"], sync["suite_config"]
assert stale["suite_config"]["sync"] == "stale:2", stale["suite_config"]
assert stale["point"]["id"] != sync["point"]["id"]
assert "--sync=stale:2" in stale["command"], stale["command"]
assert stale["config"]["sync"] == "stale:2", stale["config"]
ls, lt = (r["metrics"]["scaling_loss"] for r in (sync, stale))
assert lt["exposed_comm_s"] < ls["exposed_comm_s"], (lt, ls)
default = [json.loads(l) for l in open(f"{w}/stale-default/results.jsonl")]
assert [r["suite_config"]["overlap"] for r in default] == ["none"], default
PY
# Independent ranks simulated: they reduce only their meeting's 4-byte token, whose latency is
# all they lose to the network; the synchronous point's reductions are the whole buffer's.
"$dlbench" simulate --calibration="$work/r/calibration/digits-cnn-b8-8px-fp32-cpu-reuse-none-10c.json" \
  --network=pcie-25gbe --ranks=64 --sync=independent --jitter=none --steps=10 \
  --out="$work/independent" >/dev/null 2>&1
check "independent simulated: one meeting of 4 bytes, the step one rank's and its meeting's" \
  "$py" - "$work" <<'PY'
import json, sys
w = sys.argv[1]
sync = json.loads(open(f"{w}/sync-sync/results.jsonl").readline())
[ind] = [json.loads(l) for l in open(f"{w}/independent/results.jsonl")]
assert ind["config"]["sync"] == "independent" and ind["suite_config"]["overlap"] == "none", ind
[meeting] = ind["simulation"]["reductions"]
assert meeting["bucket"] == "meeting" and meeting["bytes"] == 4, meeting
assert [r["bucket"] for r in sync["simulation"]["reductions"]] == ["all"], sync["simulation"]
l = ind["metrics"]["scaling_loss"]
assert 0 < l["exposed_comm_s"] <= meeting["seconds"] * 1.000001, (l, meeting)
assert abs(l["step_s"] - l["one_rank_step_s"] - l["exposed_comm_s"]) < 1e-9, l
PY
refused_sim() {
  local what=$1 message=$2
  shift 2
  "$dlbench" simulate --calibration="$work/r/calibration/digits-cnn-b8-8px-fp32-cpu-reuse-none-10c.json" \
    --ranks=2 --out="$work/refused-sync" "$@" >"$work/err.out" 2>&1
  local rc=$?
  check "$what: refused (got $rc), one line, no record" test $rc -ne 0 -a \
    "$(wc -l <"$work/err.out")" -eq 1 -a ! -e "$work/refused-sync/results.jsonl"
  check "$what: says why" grep -qF -- "$message" "$work/err.out"
  cat "$work/err.out"
}
refused_sim "--sync=async on one rank" "--sync=async needs at least 2 ranks" --sync=async --ranks=1
refused_sim "--sync=async with the strategy backward" "--sync=async pushes whole steps' gradients" \
  --sync=async --overlap=backward
"$dlbench" simulate --roofline=h100-sxm --model=resnet50 --batch=64 --precision=fp32 --sync=async --ranks=2 \
  --out="$work/refused-sync" >"$work/err.out" 2>&1
check "--sync=async on a GPU calibration: refused, one line, no record" test $? -ne 0 -a \
  "$(wc -l <"$work/err.out")" -eq 1 -a ! -e "$work/refused-sync/results.jsonl"
check "--sync=async on a GPU calibration: says why" grep -qF "calibrate on the CPU backend" "$work/err.out"
# Asynchronous SGD simulated: every rank replayed, its strategy none and its ranks from 2 by
# default, no reductions, and on a 25 GbE network the parameter server saturating. Where it
# saturates depends on this machine's calibration (16 ranks on one, 32 on another), so the checks
# hold for any: more ranks help at first; the throughput never passes the server's bound (a push
# served costs at least the optimizer's time and the reply's copy, 7/5 of it); from 256 ranks on
# more ranks add nothing; and the step's growth is the ranks' waits for their replies.
"$dlbench" simulate --calibration="$work/r/calibration/digits-cnn-b8-8px-fp32-cpu-reuse-none-10c.json" \
  --network=pcie-25gbe --sync=async --jitter=none --steps=10 --out="$work/async" >"$work/async.out" 2>&1
check "--sync=async simulated" test $? -eq 0
check "async simulated: every rank replayed, the server's throughput bounding it" \
  "$py" - "$root" "$work/async" "$work/r/calibration/digits-cnn-b8-8px-fp32-cpu-reuse-none-10c.json" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1] + "/reports")
from dlbench_reports.records import read_records
records = [r.data for r in read_records(sys.argv[2])]
ranks = [r["config"]["ranks"] for r in records]
assert ranks == [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024], ranks
for r in records:
    assert r["suite_config"]["sync"] == "async" and r["suite_config"]["overlap"] == "none", r
    assert "--sync=async" in r["command"], r["command"]
    assert r["simulation"]["replayed_ranks"] == r["config"]["ranks"], r["simulation"]
    assert r["simulation"]["reductions"] == [], r["simulation"]
    l = r["metrics"]["scaling_loss"]
    assert l["waiting_for_slowest_s"] == 0, l
    parts = l["exposed_comm_s"] + l["compute_slowdown_s"] + l["rest_s"]
    assert abs(l["step_s"] - l["one_rank_step_s"] - parts) < 1e-9 * l["step_s"], l
by = {r["config"]["ranks"]: r for r in records}
img = {n: r["metrics"]["throughput_img_s"] for n, r in by.items()}
calibration = json.load(open(sys.argv[3]))
serve_s = 1.4 * calibration["optimizer_ms"] * 1e-3 * calibration["scale"]
assert img[4] > img[2], img
assert max(img.values()) <= calibration["batch"] / serve_s, (img, serve_s)
assert all(0.9 * img[256] <= img[n] <= 1.02 * img[256] for n in (512, 1024)), img
assert img[1024] < 0.1 * 512 * img[2], img
l = by[1024]["metrics"]["scaling_loss"]
assert l["exposed_comm_s"] > 0.9 * (l["step_s"] - l["one_rank_step_s"]), l
PY
refused_sim "--sync=stale:2 with the strategy backward" "--sync=stale:2 schedules its own all-reduce" \
  --sync=stale:2 --overlap=backward
refused_sim "--sync=sometimes" "is not sync, stale:K, async or independent" --sync=sometimes
refused_sim "--sync=independent with the strategy forward" "--sync=independent reduces no gradients" \
  --sync=independent --overlap=forward

check "a scaling plot and a scaling-loss plot per batch" test -f "$work/r/plots/scaling-loss-2.png" -a \
  -f "$work/r/plots/scaling-2.png"

before=$(sha256sum "$work/r/results.jsonl")
refused() {
  local what=$1
  shift
  "$dlbench" simulate --from="$work/r" "$@" >"$work/err.out" 2>&1
  local rc=$?
  check "$what: exit 2 (got $rc)" test $rc -eq 2
  check "$what: one line" test "$(wc -l <"$work/err.out")" -eq 1
  check "$what: results.jsonl unchanged" test "$(sha256sum "$work/r/results.jsonl")" = "$before"
  cat "$work/err.out"
}
refused "an unknown preset" --network=dgx-z9
"$py" - "$root/suites/networks/dgx-h100.json" "$work" <<'PY'
import json, sys
net = json.load(open(sys.argv[1]))
missing = dict(net); del missing["gpus_per_node"]
json.dump(missing, open(sys.argv[2] + "/missing.json", "w"))
negative = json.loads(json.dumps(net)); negative["net"]["latency_us"] = -5
json.dump(negative, open(sys.argv[2] + "/negative.json", "w"))
PY
refused "a network file without gpus_per_node" --network="$work/missing.json"
refused "a network file with a negative latency" --network="$work/negative.json"
refused "ranks below 1" --ranks=0,2
refused "a calibration of another model" --model=resnet50
refused "a calibration of another batch" --batch=32
refused "a straggler beyond the ranks" --ranks=2,4 --straggler=2:3
refused "a straggler faster than the rest" --ranks=4 --straggler=1:0.5
refused "a jitter that is no spread" --jitter=wide

# Calibrations that are no measurement, as files and as the records they come from: a backend
# dlbench has not, a step of 1e-300 s (it would claim 1e300 img/s), each refused naming the file
# and its key, before any record.
cal="$work/r/calibration/digits-cnn-b8-8px-fp32-cpu-reuse-none-10c.json"
"$py" - "$cal" "$work" <<'PY'
import json, sys
cal = json.load(open(sys.argv[1]))
json.dump(dict(cal, backend="tpu"), open(sys.argv[2] + "/tpu.json", "w"))
json.dump(dict(cal, step_ms=1e-300), open(sys.argv[2] + "/instant.json", "w"))
PY
for f in tpu instant; do
  "$dlbench" simulate --calibration="$work/$f.json" --network=dgx-h100 --ranks=2 \
    --out="$work/cal-$f" >"$work/err.out" 2>&1
  rc=$?
  check "a calibration file ($f): exit 2 (got $rc), one line naming it" test $rc -eq 2 -a \
    "$(wc -l <"$work/err.out")" -eq 1
  check "a calibration file ($f): named" grep -q "$work/$f.json" "$work/err.out"
  check "a calibration file ($f): no record" test ! -e "$work/cal-$f/results.jsonl"
  cat "$work/err.out"
done
cp -r "$work/r" "$work/instant"
"$py" - "$work/instant/results.jsonl" <<'PY'
import json, sys
records = [json.loads(line) for line in open(sys.argv[1])]
for r in records:
    times = r.get("metrics", {}).get("step_time_s", {})
    if "all" in times:
        times["all"] = [1e-300 for _ in times["all"]]
open(sys.argv[1], "w").write("".join(json.dumps(r) + "\n" for r in records))
PY
before_instant=$(sha256sum "$work/instant/results.jsonl")
"$dlbench" simulate --from="$work/instant" >"$work/err.out" 2>&1
rc=$?
check "steps of 1e-300 s: exit 2 (got $rc), named by the record's key" test $rc -eq 2 -a \
  "$(grep -c "step_time_s" "$work/err.out")" -eq 1
check "steps of 1e-300 s: results.jsonl unchanged" \
  test "$(sha256sum "$work/instant/results.jsonl")" = "$before_instant"
cat "$work/err.out"
refused "a normal jitter too wide to keep every rank's speed above 0" --jitter=cv:0.5

# A suite's simulate block on a network that names its device (dgx-h100: h100-sxm) calibrates
# from that device's roofline when the points ran on another (here, this CPU), for the model the
# block names; `calibration: measured` keeps this CPU's measured one-rank points; `roofline` on a
# network that names no device is refused before any point.
for mode in auto measured; do
  cat >"$work/block-$mode.json" <<JSON
{"name": "block", "description": "a simulate block's calibration ($mode)",
 "defaults": {"backend": "cpu", "model": "digits-cnn", "image_size": 8, "steps": 6, "warmup": 2},
 "sweep": {"batch": [8]},
 "cpu": {"defaults": {"backend": "cpu"},
         "simulate": {"networks": ["dgx-h100"], "ranks": [8], "overlap": ["backward"],
                      "calibration": "$mode", "model": "resnet50", "batch": 64,
                      "image_size": 224, "precision": "bf16"}}}
JSON
  "$dlbench" --suite="$work/block-$mode.json" --out="$work/block-$mode" --trace-steps=2 \
    >"$work/block-$mode.out" 2>&1
  check "a simulate block ($mode) runs" test $? -eq 0
done
check "calibration auto on a CPU: the roofline of the network's device, the block's model" \
  "$py" - "$work" <<'PY'
import json, sys
def simulated(mode):
    lines = open(f"{sys.argv[1]}/block-{mode}/results.jsonl").read().splitlines()
    return [r for r in map(json.loads, lines) if r["mode"] == "simulated"]
auto, measured = simulated("auto"), simulated("measured")
assert len(auto) == 1 and len(measured) == 1, (len(auto), len(measured))
a, m = auto[0], measured[0]
assert a["simulation"]["calibration_source"]["method"] == "roofline", a["simulation"]
assert a["simulation"]["calibration_source"]["device_file"].endswith("suites/devices/h100-sxm.json")
assert (a["config"]["model"], a["config"]["batch"], a["config"]["precision"]) == ("resnet50", 64, "bf16")
assert a["command"].startswith("dlbench simulate --roofline=h100-sxm"), a["command"]
assert m["simulation"]["calibration_source"]["method"] == "profile", m["simulation"]
assert (m["config"]["model"], m["config"]["batch"]) == ("digits-cnn", 8)
PY
cat >"$work/block-nodevice.json" <<'JSON'
{"name": "block", "description": "roofline on a network without a device",
 "defaults": {"backend": "cpu", "model": "digits-cnn", "image_size": 8, "steps": 2, "warmup": 1},
 "sweep": {"batch": [8]},
 "simulate": {"networks": ["pcie-25gbe"], "ranks": [8], "calibration": "roofline"},
 "cpu": {"defaults": {"backend": "cpu"}}}
JSON
sed 's/"calibration": "roofline"/"model": "resnet500"/' "$work/block-nodevice.json" \
  >"$work/block-nomodel.json"
for f in nodevice nomodel; do
  "$dlbench" --suite="$work/block-$f.json" --out="$work/block-$f" >"$work/err.out" 2>&1
  rc=$?
  check "a simulate block ($f): exit 2 (got $rc), one line" test $rc -eq 2 -a \
    "$(wc -l <"$work/err.out")" -eq 1
  check "a simulate block ($f): no point run" test ! -e "$work/block-$f/results.jsonl"
  cat "$work/err.out"
done

# A suite whose simulate block names an unknown preset is refused before its first point.
cat >"$work/badsim.json" <<'JSON'
{"name": "badsim", "description": "a simulate block on a network that does not exist",
 "defaults": {"backend": "cpu", "model": "digits-cnn", "image_size": 8, "steps": 2, "warmup": 1},
 "sweep": {"batch": [8]},
 "simulate": {"networks": ["dgx-z9"], "ranks": [8]},
 "cpu": {"defaults": {"backend": "cpu"}}}
JSON
"$dlbench" --suite="$work/badsim.json" --out="$work/badsim" >"$work/err.out" 2>&1
rc=$?
check "a simulate block on an unknown preset: exit 2 (got $rc)" test $rc -eq 2
check "a simulate block on an unknown preset: named" grep -q "dgx-z9" "$work/err.out"
check "a simulate block on an unknown preset: no point run" test ! -e "$work/badsim/results.jsonl"
cat "$work/err.out"
check_summary simulate
