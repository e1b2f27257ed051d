#!/usr/bin/env bash
# Overlap really happens: vgg16 at 32x32 (large late layers) on 2 ranks, in one run of each
# strategy. Within its own run, backward and forward must each hide at least 0.3 of their
# communication under compute, and expose less of it than none does (under 0.9 of none's exposed
# time), while none hides nothing. An all-reduce's span runs from its launch until its completion
# is observed (docs/metrics.md), so spans lying over compute do not by themselves show that the
# reductions progressed: backward's trace must also show, in every traced step, an all-reduce
# seen complete before that step's backward ends.
# Seen over twelve runs on the 2-core Intel Xeon CI host of 2026-11-30: backward and forward hide
# 0.57-0.65 of their comm and expose 0.36-0.75 of none's. None's own exposed time varies most
# (0.49-1.26 s), since the ranks' compute and progress threads share the cores; so the bound
# against none is loose. A failed trio is run once more, and one trio must pass; both are printed.
# Usage: overlap.sh path/to/dlbench
set -u
dlbench=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
attempt() {
for overlap in none backward forward; do
  mpirun -np 2 --oversubscribe "$dlbench" run --ranks=2 --overlap=$overlap --model=vgg16 \
    --image-size=32 --batch=8 --steps=4 --warmup=1 --trace-steps=4 \
    --trace="$work/$overlap.trace.json" --json="$work/$overlap.json" >"$work/$overlap.log" 2>&1 ||
    { echo "FAIL: $overlap run"; cat "$work/$overlap.log"; exit 1; }
done
/usr/bin/python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
m = {o: json.load(open(f"{work}/{o}.json"))["metrics"] for o in ("none", "backward", "forward")}
for o, x in m.items():
    c = x["comm"]
    print(f"{o:8s} step {x['step_time_s']['median']:.3f} s  comm {c['comm_s']:.3f} s  "
          f"comm_exposed {c['comm_exposed_s']:.3f} s  overlap {c['overlap']:.2f}")
    # docs/metrics.md: times within the traced steps, comm = exposed + hidden.
    assert abs(c["comm_s"] - c["comm_exposed_s"] - c["comm_hidden_s"]) < 1e-9, c
    assert 0 <= c["overlap"] <= 1 and c["comm_hidden_s"] >= 0, c
    if "phases" in x:
        assert c["comm_s"] <= x["phases"]["step_s"] + 1e-9, (c, x["phases"])
none = m["none"]["comm"]["comm_exposed_s"]
assert none > 0, "none must expose its all-reduce"
assert m["none"]["comm"]["overlap"] < 0.05, "none's one all-reduce runs after the compute"
for o in ("backward", "forward"):
    c = m[o]["comm"]
    assert c["overlap"] >= 0.3, f"{o} hides too little of its own communication"
    assert c["comm_exposed_s"] < 0.9 * none, f"{o} exposes nearly as much as none"
ev = [e for e in json.load(open(f"{work}/backward.trace.json"))["traceEvents"] if e["ph"] == "X"]
comm = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e["cat"] == "allreduce"]
back = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e["cat"].startswith("backward")]
during = sum(1 for a, b in comm if any(s < b and a < t for s, t in back))
print(f"{during} of {len(comm)} all-reduce spans run during backward spans")
assert during > 0
# A span runs from launch until its completion is observed (docs/metrics.md), so spans over
# compute alone would not show progress: in each traced step, some all-reduce must also be seen
# complete before that step's backward ends.
for step in sorted({e["args"]["step"] for e in ev if e["cat"] == "allreduce"}):
    of_step = [e for e in ev if e["args"].get("step") == step]
    back_end = max(e["ts"] + e["dur"] for e in of_step if e["cat"].startswith("backward"))
    done = [e for e in of_step if e["cat"] == "allreduce" and e["ts"] + e["dur"] < back_end]
    print(f"step {step}: {len(done)} all-reduces complete before its backward ends")
    assert done, f"step {step}: no all-reduce completes during backward"
# Span args (docs/suites.md, "traces/*.trace.json"): a layer pass names its layer and pass; each all-reduce
# its bucket ("all" for none's one reduction) and bytes, which add up, per step, to the
# gradient's bytes (fp32) in each of the strategy's buckets once.
for o in ("none", "backward"):
    rec = json.load(open(f"{work}/{o}.json"))["metrics"]
    ev = [e for e in json.load(open(f"{work}/{o}.trace.json"))["traceEvents"] if e["ph"] == "X"]
    for e in ev:
        if e["cat"] in ("forward", "backward_data", "backward_weights"):
            assert e["args"]["layer"] == e["name"] and e["args"]["pass"] == e["cat"], e
    reduced = {}
    for e in ev:
        if e["cat"] == "allreduce":
            reduced.setdefault(e["args"]["step"], []).append(e["args"])
    assert len(reduced) == 4, (o, sorted(reduced))
    for step, args in reduced.items():
        assert sum(a["bytes"] for a in args) == 4 * rec["params"], (o, step, args)
        buckets = sorted(a["bucket"] for a in args)
        assert buckets == (["all"] if o == "none" else list(range(rec["buckets"]))), (o, buckets)
print("1 passed, 0 failed")
PY
}
for try in 1 2; do
  attempt && exit 0
  echo "attempt $try: overlap check failed"
done
exit 1
