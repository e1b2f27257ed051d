#!/usr/bin/env bash
# The harness end to end: faults in one point (crash, hang, oom) are recorded with their status,
# later points still run, earlier lines stay intact, --resume reruns only what is missing, and
# every ok point leaves a valid Chrome trace and profile. Usage: harness.sh path/to/dlbench
set -u
dlbench=$1
work=$(mktemp -d)
# A sweep with a CPU point measures the CPU's peak once and keeps it: in this test's own file,
# never the user's cache (measured while tests load the cores, it would be kept too low).
export DLBENCH_PEAK_FILE=$work/peaks.json
trap 'rm -rf "$work"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/check.sh"
statuses() { /usr/bin/python3 -c 'import json,sys; print(" ".join(json.loads(l)["status"] for l in open(sys.argv[1])))' "$1"; }

cat >"$work/three.json" <<'JSON'
{"name": "three", "description": "three quick points",
 "defaults": {"model": "digits-cnn", "image_size": 8, "steps": 3, "warmup": 1, "backend": "cpu"},
 "sweep": {"batch": [4, 8, 16]},
 "cpu": {}}
JSON

# A crash in point 2: recorded as crashed, point 3 still runs, the sweep exits 1.
"$dlbench" --suite="$work/three.json" --out="$work/crash" --inject-fault=crash@2 --no-report >"$work/crash.out" 2>&1
check "crash exits 1" test $? -eq 1
check "crash statuses" test "$(statuses "$work/crash/results.jsonl")" = "ok crashed ok"
check "crash message names the signal" grep -q '"message":"killed by signal 6' "$work/crash/results.jsonl"
first_line=$(head -n 1 "$work/crash/results.jsonl")

# --resume reruns only the crashed point; the first line is untouched.
"$dlbench" --suite="$work/three.json" --out="$work/crash" --resume --no-report >"$work/resume.out" 2>&1
check "resume exits 0" test $? -eq 0
check "resume skipped two" test "$(grep -c 'skipped (--resume)' "$work/resume.out")" -eq 2
check "resume appended one ok" test "$(statuses "$work/crash/results.jsonl")" = "ok crashed ok ok"
check "earlier line intact" test "$(head -n 1 "$work/crash/results.jsonl")" = "$first_line"
check "summary counts the latest record per point" \
  /usr/bin/python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["counts"]=={"ok":3}, s' \
  "$work/crash/summary.json"

# Without --resume an existing directory is refused, and left as it was.
before=$(sha256sum <"$work/crash/results.jsonl")
"$dlbench" --suite="$work/three.json" --out="$work/crash" >/dev/null 2>&1
check "refuses to overwrite" test $? -eq 2
check "refusal leaves results" test "$(sha256sum <"$work/crash/results.jsonl")" = "$before"

# Ranks beyond what the launcher can start on this host: that point fails with the reason before
# anything is launched, the other point still runs, and the sweep exits 1.
too_many=$(( $(nproc) * 4 + 1 ))
cat >"$work/ranks.json" <<JSON
{"name": "ranks", "description": "one rank, then more than this host starts",
 "defaults": {"model": "digits-cnn", "image_size": 8, "batch": 4, "steps": 2, "warmup": 0,
              "backend": "cpu"},
 "sweep": {"ranks": [1, $too_many]},
 "cpu": {}}
JSON
"$dlbench" --suite="$work/ranks.json" --out="$work/ranks" --no-report >"$work/ranks.out" 2>&1
check "too many ranks exits 1" test $? -eq 1
check "too many ranks statuses" test "$(statuses "$work/ranks/results.jsonl")" = "ok failed"
check "too many ranks message" grep -q "ranks=$too_many is more than mpirun starts on this host" \
  "$work/ranks/results.jsonl"

# A schema-valid config that the worker cannot take (a budget that is no size; a non-default
# comm_progress, which once aborted the whole sweep): that point fails with the message, the
# others run, and the sweep exits 1.
cat >"$work/parse.json" <<'JSON'
{"name": "parse", "description": "a budget that is no size between two good points",
 "defaults": {"model": "digits-cnn", "image_size": 8, "batch": 4, "steps": 2, "warmup": 0,
              "backend": "cpu", "comm_progress": "poll"},
 "sweep": {"memory_budget": ["1GiB", "lots", "2GiB"]},
 "cpu": {}}
JSON
"$dlbench" --suite="$work/parse.json" --out="$work/parse" --no-report >"$work/parse.out" 2>&1
check "unparsable point exits 1" test $? -eq 1
check "unparsable point statuses" test "$(statuses "$work/parse/results.jsonl")" = "ok failed ok"
check "unparsable point message" grep -q 'lots' "$work/parse/results.jsonl"

# A hang is killed at the timeout; an injected OOM is recorded as oom.
"$dlbench" --suite="$work/three.json" --out="$work/hang" --inject-fault=hang@1 --timeout=3 --no-report >/dev/null 2>&1
check "hang statuses" test "$(statuses "$work/hang/results.jsonl")" = "timeout ok ok"
"$dlbench" --suite="$work/three.json" --out="$work/oom" --inject-fault=oom@3 --no-report >/dev/null 2>&1
check "oom exits 0" test $? -eq 0
check "oom statuses" test "$(statuses "$work/oom/results.jsonl")" = "ok ok oom"
# The worker wrote the oom record itself, with its error's message; the harness added the tail.
check "worker records its failure" /usr/bin/python3 - "$work/oom" <<'PY'
import glob, json, sys
own = [json.load(open(f)) for f in glob.glob(sys.argv[1] + "/points/3-*.record.json")]
assert len(own) == 1 and own[0]["status"] == "oom", own
assert own[0]["message"] == "injected out-of-memory fault", own[0]
last = [json.loads(l) for l in open(sys.argv[1] + "/results.jsonl")][-1]
assert last["message"] == own[0]["message"] and "stderr_tail" in last, last
PY

# Every ok point has a trace that parses, with forward spans for every layer in its profile
# (but views: flatten's output is its input's bytes).
check "traces and profiles" /usr/bin/python3 - "$work/oom" <<'PY'
import glob, json, sys
out = sys.argv[1]
recs = [json.loads(l) for l in open(out + "/results.jsonl")]
for r in recs:
    if r["status"] != "ok":
        continue
    trace = json.load(open(r["paths"]["trace"]))
    prof = json.load(open(r["paths"]["profile"]))
    fwd = {e["name"] for e in trace["traceEvents"] if e.get("cat") == "forward"}
    # a view, or a ReLU fused into the batch norm before it, runs no pass
    layers = {l["name"] for l in prof["layers"] if not l["view"] and not l["fused_into"]}
    assert layers and layers <= fwd, (layers - fwd)
    assert prof["traced_steps"] == 3
PY

# Every record of every run above, and every shipped suite, against the JSON schemas, checked by
# an independent implementation (python3-jsonschema).
check "schemas" /usr/bin/python3 - "$work" "$(dirname "$0")/../../suites" <<'PY'
import glob, json, sys, jsonschema
work, suites = sys.argv[1], sys.argv[2]
result = json.load(open(suites + "/schema/result.schema.json"))
suite = json.load(open(suites + "/schema/suite.schema.json"))
n = 0
for path in glob.glob(work + "/*/results.jsonl"):
    for line in open(path):
        jsonschema.validate(json.loads(line), result)
        n += 1
assert n >= 10, n  # crash 3 + resume 1, hang 3, oom 3 (and the runs below, once written)
for path in glob.glob(suites + "/*.json"):
    jsonschema.validate(json.load(open(path)), suite)
PY

# The shipped smoke suite, as CI runs it. With no CPU peak kept yet, the sweep measures one
# first, and every record gives its fraction of it (the reports' MFU); a later sweep reuses it.
export DLBENCH_PEAK_FILE=$work/smoke-peaks.json
"$dlbench" --suite=smoke --out="$work/smoke" >"$work/smoke.out" 2>&1
check "smoke suite" test "$(statuses "$work/smoke/results.jsonl")" = "ok ok"
check "smoke table" grep -q "2 points: 2 ok" "$work/smoke.out"
check "the CPU's peak measured once, before the points" grep -q "^measured this CPU's fp32 peak once" \
  "$work/smoke.out"
if grep -qw avx512_bf16 /proc/cpuinfo; then  # and its bf16 peak, where it multiplies bf16 natively
  check "... and its bf16 peak" grep -q "^measured this CPU's bf16 peak once" "$work/smoke.out"
fi
check "... and kept" test -s "$work/smoke-peaks.json"
check "... each record's fraction of it" /usr/bin/python3 -c '
import json, sys
for line in open(sys.argv[1]):
    m = json.loads(line)["metrics"]
    assert 0 < m["fraction_of_peak_flops"] and m["peak"]["file"] == sys.argv[2], m
' "$work/smoke/results.jsonl" "$work/smoke-peaks.json"

# A finished sweep renders its report when reports/' Python is there; a renderer that fails is
# a note, and the sweep's exit status and records stay what the points made them.
check "report rendered" test -s "$work/smoke/report.md" -a -s "$work/smoke/report.html" \
  -a -s "$work/smoke/plots/memory.png"
check "report line" grep -q "^report: .*report.md" "$work/smoke.out"
DLBENCH_PYTHON=/bin/false "$dlbench" --suite=smoke --out="$work/smoke2" >"$work/smoke2.out" 2>&1
check "failed renderer keeps exit 0" test $? -eq 0
check "failed renderer is said" grep -q "report: rendering failed (exit code 1); the results are unaffected" "$work/smoke2.out"
check "failed renderer keeps records" test "$(statuses "$work/smoke2/results.jsonl")" = "ok ok"
check "a kept peak is not measured again" bash -c '! grep -q "peak once" "$1"' _ "$work/smoke2.out"
export DLBENCH_PEAK_FILE=$work/peaks.json

# A convergence point: trained to its target, time-to-accuracy recorded, an MLPerf log written.
cat >"$work/conv.json" <<'JSON'
{"name": "conv", "description": "digits to 80%",
 "defaults": {"model": "digits-cnn", "image_size": 8, "batch": 32, "lr": 0.05, "backend": "cpu",
              "data": "digits", "epochs": 6, "target_accuracy": 0.8},
 "sweep": {}, "cases": [{"seed": 1}, {"seed": 2, "target_accuracy": 1.0, "epochs": 1}], "cpu": {}}
JSON
"$dlbench" --suite="$work/conv.json" --out="$work/conv" --no-report >"$work/conv.out" 2>&1
check "convergence sweep" test "$(statuses "$work/conv/results.jsonl")" = "ok ok"
check "convergence records" /usr/bin/python3 - "$work/conv" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1] + "/results.jsonl")]
reached, missed = (r["metrics"]["convergence"] for r in recs)
assert reached["reached"] and reached["status"] == "success", reached
assert reached["eval_accuracy"][-1] >= 0.8 > max(reached["eval_accuracy"][:-1] + [0])
assert 0 < reached["time_to_accuracy_s"] <= reached["run_seconds"]
assert not missed["reached"] and missed["status"] == "aborted" and missed["time_to_accuracy_s"] is None
for r, status in zip(recs, ["success", "aborted"]):
    lines = open(r["paths"]["mllog"]).read().splitlines()
    events = [json.loads(l[len(":::MLLOG "):]) for l in lines]
    assert all(l.startswith(":::MLLOG ") for l in lines)
    stop = [e for e in events if e["key"] == "run_stop"]
    assert len(stop) == 1 and stop[0]["metadata"]["status"] == status
PY

# The trace holds the last --trace-steps of the timed --steps (steps count from 0, warm-up
# included: warm-up 2, timed 2-7, traced 6 and 7), which are never left out as warm-up.
"$dlbench" run --model=digits-cnn --image-size=8 --batch=8 --steps=6 --warmup=2 --trace-steps=2 \
  --trace="$work/window.trace.json" --json="$work/window.json" >"$work/window.out" 2>&1
check "a traced run" test $? -eq 0
check "the trace window is the last traced steps of the timed ones" /usr/bin/python3 -c '
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
assert sorted({e["args"]["step"] for e in ev if e.get("ph") == "X"}) == [6, 7], ev[:3]
m = json.load(open(sys.argv[2]))["metrics"]
assert m["warmup_discarded_steps"] <= 6 - 2 and m["timed_steps"] + m["warmup_discarded_steps"] == 6
' "$work/window.trace.json" "$work/window.json"

check_summary harness
