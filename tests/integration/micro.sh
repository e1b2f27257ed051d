#!/usr/bin/env bash
# `dlbench --suite=micro` end to end on the CPU: the peak is measured once and kept, every GEMM
# and convolution row is there with its fraction of that peak, the all-reduce rows are correct,
# the report is rendered, and a second run into the same directory is refused without touching
# the first. A training run then records its fraction of the same peak; a peak file that is not
# one costs the record its fraction, never the run. Usage: micro.sh path/to/dlbench
set -u
dlbench=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export DLBENCH_PEAK_FILE=$work/peaks.json
source "$(dirname "${BASH_SOURCE[0]}")/check.sh"
py=/usr/bin/python3

start=$(date +%s)
"$dlbench" --suite=micro --out="$work/m" >"$work/m.out" 2>&1
rc=$?
check "the micro suite exits 0" test $rc -eq 0
((rc == 0)) || cat "$work/m.out"
echo "micro suite: $(($(date +%s) - start)) s"
avx512=0 bf16=0  # oneDNN 2.6 has its Winograd for AVX-512 cores only
grep -qw avx512f /proc/cpuinfo && avx512=1
grep -qw avx512_bf16 /proc/cpuinfo && bf16=1  # and multiplies bf16 natively with AVX-512 BF16
amx=0  # and with AMX stores bf16 channels last, which im2col+matmul takes
grep -qw amx_bf16 /proc/cpuinfo && amx=1
check "rows: every linear layer's GEMM and every distinct conv, each pass, algorithm and precision" \
  $py - "$work/m" "$DLBENCH_PEAK_FILE" "$avx512" "$bf16" "$amx" <<'PY'
import json, sys
d = json.load(open(sys.argv[1] + "/micro.json"))
peaks = json.load(open(sys.argv[2]))["peaks"]
cpu = {p["precision"]: p["flops_per_s"] for p in peaks if p["backend"] == "cpu"}
# fp32's peak, and bf16's where the CPU multiplies bf16 natively; fp16 computes in f32
assert sorted(cpu) == (["bf16", "fp32"] if sys.argv[4] == "1" else ["fp32"]), peaks
rows = [b for b in d["benchmarks"] if b["name"].startswith(("gemm/cpu/", "conv/cpu/"))]
names = [b["name"].removesuffix("/manual_time") for b in rows]
gemm = [n for n in names if n.startswith("gemm/cpu/")]
conv = [n for n in names if n.startswith("conv/cpu/")]
# 8 distinct linear shapes x 3 products x 3 precisions; resnet50 (23) and vgg16 (9) distinct
# convolutions x 3 passes x 2 algorithms (im2col, onednn) x 3 precisions, and Winograd's rows:
# the 3x3 stride-1 ones (resnet50's 4, one a stage, and vgg16's 9) x 3 passes x 3 precisions.
assert len(gemm) == 8 * 3 * 3, len(gemm)
wino = [n for n in conv if n.split("/")[3] == "winograd"]
assert len(wino) == ((4 + 9) * 3 * 3 if sys.argv[3] == "1" else 0), len(wino)
# and im2col+matmul's: the 3 passes in bf16 of every distinct convolution whose passes fit its
# 64 MiB cap (31 of the 32 at micro's shape), where the CPU has AMX
matmul = [n for n in conv if n.split("/")[3] == "matmul"]
if sys.argv[5] == "1":
    assert len(matmul) % 3 == 0 and (23 + 9) * 3 * 3 // 4 <= len(matmul) <= (23 + 9) * 3, \
        len(matmul)
else:
    assert not matmul, matmul
assert all(n.split("/")[2] == "bf16" for n in matmul), matmul
assert len(conv) == (23 + 9) * 3 * 2 * 3 + len(wino) + len(matmul), len(conv)
for b in rows:
    peak = cpu.get(b["name"].split("/")[2], cpu["fp32"])
    assert b["FLOP/s"] > 0 and abs(b["of_peak"] - b["FLOP/s"] / peak) < 1e-6 * b["of_peak"], b
for precision, peak in cpu.items():
    assert float(d["context"][f"peak cpu {precision} flops_per_s"]) == float(f"{peak:.6g}")
ar = json.load(open(sys.argv[1] + "/allreduce-mpi.json"))
assert ar["ranks"] == 2 and all(r["wrong"] == 0 for r in ar["rows"]), ar
PY
check "the report names the convolutions furthest from the peak" \
  grep -q "### Furthest from the peak" "$work/m/micro.md"
check "the conv plot" test -s "$work/m/plots/micro-conv-cpu-fp32.png"
before=$(sha256sum <"$work/m/micro.json")
"$dlbench" --suite=micro --out="$work/m" >"$work/again.out" 2>&1
check "a second run into the same directory: exit 2" test $? -eq 2
check "... naming it" grep -q "already holds micro-benchmark results" "$work/again.out"
check "... and the first results untouched" test "$(sha256sum <"$work/m/micro.json")" = "$before"

# A training run on this host now records its fraction of the peak.
"$dlbench" run --model=digits-cnn --image-size=8 --batch=8 --steps=3 --warmup=1 \
  --json="$work/run.json" >"$work/run.out" 2>&1
check "a run with a peak on file exits 0" test $? -eq 0
check "its record: the fraction of the peak, and which peak" $py - "$work/run.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["metrics"]
p = m["peak"]
want = m["achieved_flops_per_s"] * p["ranks_sharing_it"] / p["flops_per_s"]
assert abs(m["fraction_of_peak_flops"] - want) < 1e-9 * want and p["ranks_sharing_it"] == 1, m
PY
echo '{"peaks": [{"host": 1}]}' >"$DLBENCH_PEAK_FILE"
"$dlbench" run --model=digits-cnn --image-size=8 --batch=8 --steps=3 --warmup=1 \
  --json="$work/run2.json" >"$work/run2.out" 2>&1
check "a bad peak file: the run still exits 0" test $? -eq 0
check "... says why it has no fraction" grep -q "no fraction of peak in the record: peak file .*key 'host'" "$work/run2.out"
check "... and its record has none" \
  $py -c 'import json,sys; assert "fraction_of_peak_flops" not in json.load(open(sys.argv[1]))["metrics"]' "$work/run2.json"
"$dlbench" --suite=micro --out="$work/r" --resume >"$work/resume.out" 2>&1
check "--resume is refused for the micro suite" test $? -eq 2

check_summary micro
