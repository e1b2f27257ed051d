#!/usr/bin/env bash
# NVTX checked without Nsight (issue 27, item 5): a two-rank CPU training run (mpirun, MPI
# all-reduces overlapped with backward, small buckets) under tests/nvtx/nvtx_recorder.cpp, an
# NVTX injection library that logs every range pushed and popped. What an Nsight Systems timeline
# would show must be there, and agree with the run's Chrome trace:
#   - on every thread, ranges nest: each pop closes the thread's innermost open range, and none
#     is left open;
#   - every traced step is a "step" range whose children on the main thread are the step's passes
#     in order, each named as its span in the trace: the layers' forward and backward passes, the
#     loss, the optimizer's "sgd bucket" updates;
#   - each of the step's all-reduces in the trace has its launch range, "allreduce of bucket N";
#   - both ranks log the same ranges.
# CMake registers it where the build has NVTX's headers (from the CUDA toolkit) and MPI.
# usage: nvtx_ranges.sh DLBENCH RECORDER_LIBRARY MPIEXEC
set -u
dlbench=$1
recorder=$2
mpiexec=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
timeout 300 "$mpiexec" -np 2 -x NVTX_INJECTION64_PATH="$recorder" -x DLB_NVTX_LOG="$work/nvtx" \
  "$dlbench" run --ranks=2 --model=digits-cnn --image-size=8 --batch=8 --steps=4 --warmup=1 \
  --trace-steps=2 --overlap=backward --bucket-mb=0.01 --trace="$work/trace.json" \
  >"$work/run.log" 2>&1 || { echo "FAIL: the run: $(tail -5 "$work/run.log")"; exit 1; }
python3 - "$work/nvtx" "$work/trace.json" <<'PY'
import json, sys
base, trace_path = sys.argv[1:]

def tree(path):
    """Each thread's ranges as nested [name, children]; checks that pops close pushes."""
    roots, stacks = {}, {}
    for n, line in enumerate(open(path), 1):
        kind, _, rest = line.rstrip("\n").partition(" ")
        thread, _, name = rest.partition(" ")
        stack = stacks.setdefault(thread, [])
        if kind == "push":
            node = [name, []]
            (stack[-1][1] if stack else roots.setdefault(thread, [])).append(node)
            stack.append(node)
        else:
            assert kind == "pop", f"{path}:{n}: {line!r}"
            assert stack, f"{path}:{n}: a pop with no range open on thread {thread}"
            stack.pop()
    for thread, stack in stacks.items():
        assert not stack, f"{path}: thread {thread} ends inside {[s[0] for s in stack]}"
    return roots

def names(nodes):
    return [n[0] for n in nodes]

ranks = [tree(f"{base}.{r}") for r in (0, 1)]
main = ranks[0]["0"]
assert names(ranks[1]["0"]) == names(main), "the ranks' top-level ranges differ"
steps = [n for n in main if n[0] == "step"]
assert len(steps) == 5, f"{len(steps)} step ranges, want warmup 1 + 4 timed: {names(main)}"

# The trace's spans of each traced step, in start order: the last two of the 4 timed steps (after
# the warm-up step: steps 3 and 4 of 0-4), which are the NVTX ranges' steps[3 + k].
events = [e for e in json.load(open(trace_path))["traceEvents"] if e.get("ph") == "X"]
traced = sorted((e for e in events if e["cat"] == "step"), key=lambda e: e["ts"])
assert [e["args"]["step"] for e in traced] == [3, 4], [e["args"] for e in traced]
for k, s in enumerate(traced):
    inside = sorted((e for e in events if s["ts"] <= e["ts"] <= s["ts"] + s["dur"] and e is not s
                     and e["cat"] != "allreduce"), key=lambda e: e["ts"])
    want = [e["name"] for e in inside]
    got = [c for c in names(steps[3 + k][1]) if not c.startswith(("allreduce of", "wait of",
                                                                  "progress of"))]
    assert got == want, f"traced step {k}: NVTX {got}\n  trace {want}"
    reductions = sum(1 for e in events if e["cat"] == "allreduce"
                     and s["ts"] <= e["ts"] <= s["ts"] + s["dur"])
    launches = [c for c in names(steps[3 + k][1]) if c.startswith("allreduce of bucket")]
    assert reductions >= 1 and len(launches) >= reductions, (reductions, launches)
    assert len(set(launches)) == len(launches), f"a bucket launched twice: {launches}"
layers = {n for n in want if n not in ("loss", "sgd bucket")}
print(f"NVTX: {len(steps)} steps, each {len(want)} passes as traced ({len(layers)} layers), "
      f"{len(launches)} bucket all-reduces; nested on every thread of both ranks")
PY
