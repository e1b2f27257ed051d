#!/usr/bin/env bash
# scripts/device-check.sh keeps what it has, as a lent GPU's short, fixed time needs (issue 27):
#   1. with this build's bundle and no GPU, every row that needs one is `skip`, the rest pass, and
#      the record ends with its summary; exit 0;
#   2. with a fake GPU (a bundle whose programs say there is one and take a second each) and
#      --budget-s=30, a row runs exactly when its planned seconds fit in what is left of the
#      budget as it comes up (the record says how much was), and is `not_run` otherwise;
#   3. killed in the middle, the record keeps every row that had finished, each a whole line.
# usage: device_check.sh BUILD_DIR
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# check_record FILE PYTHON: runs PYTHON with `rows` (the record's lines as JSON, header first).
check_record() {
  python3 - "$1" <<PY || fail "$2"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
rows = [json.loads(l) for l in lines]  # every line whole
assert rows[0]["kind"] == "dlbench device check", rows[0]
$3
PY
}

# 1. This build's bundle, no GPU.
"$root/scripts/device-bundle.sh" --from "$build" --out "$work/real" >/dev/null || fail "packing"
# No GPU, even on a machine with one (CUDA sees none with an empty CUDA_VISIBLE_DEVICES).
OUT=$work/out1 CUDA_VISIBLE_DEVICES= bash "$root/scripts/device-check.sh" "$work/real/bundle.tar.xz" \
  all >"$work/1.log" 2>&1
rc=$?
((rc == 0)) || fail "no GPU: exit $rc: $(tail -5 "$work/1.log")"
record=$(ls "$work"/out1/device-check-*.jsonl 2>/dev/null | head -1)
if [[ -z $record ]]; then
  fail "no GPU: no record"
else
  check_record "$record" "no GPU: rows" '
tests = [r for r in rows[1:-1]]
assert rows[-1]["summary"]["fail"] == 0, rows[-1]
assert rows[0]["cuda_devices_dlbench_sees"] == 0, rows[0]
ran = {r["test"]: r["status"] for r in tests}
# dlbench lists what it sees, and the library calls need no device: cuDNN and cuBLASLt check
# them here.
assert ran.pop("list") == "pass", ran
assert ran.pop("cuda_library_tests") == "pass", ran
assert ran and all(s == "skip" for s in ran.values()), ran
assert any(t.startswith("bench resnet50-b256-bf16") for t in ran), sorted(ran)
print(len(tests), "rows: cuda_library_tests passed, the rest skipped")'
fi

# 1b. The triage part, no GPU: its rows skip, within its 320 s budget, every row's log is kept,
# and the table is still written (saying what is missing) and printed last.
OUT=$work/out1b CUDA_VISIBLE_DEVICES= bash "$root/scripts/device-check.sh" \
  "$work/real/bundle.tar.xz" triage >"$work/1b.log" 2>&1 || fail "triage, no GPU: exit $?"
record=$(ls "$work"/out1b/device-check-*.jsonl 2>/dev/null | head -1)
if [[ -z $record ]]; then
  fail "triage, no GPU: no record"
else
  check_record "$record" "triage, no GPU: rows" '
assert rows[0]["part"] == "triage" and rows[0]["budget_s"] == 320, rows[0]
ran = {r["test"]: r["status"] for r in rows[1:-1]}
assert ran.pop("list") == "pass", ran
assert sorted(ran) == ["triage_dlbench", "triage_gpu", "triage_ncu", "triage_pytorch",
                       "triage_tf32_profile"], sorted(ran)
assert all(s == "skip" for s in ran.values()), ran
print("triage rows skipped")'
  mkdir -p "$work/files1b"
  tar -C "$work/files1b" -xzf "$work"/out1b/device-check-*-files.tar.gz 2>/dev/null ||
    fail "triage, no GPU: no files tarball"
  [[ -f $work/files1b/triage/triage.md && -f $work/files1b/logs/triage_ncu.log ]] ||
    fail "triage, no GPU: no table or no row logs in the files: $(cd "$work/files1b" && find .)"
  grep -q "no per-layer profile" "$work/files1b/triage/triage.md" 2>/dev/null ||
    fail "triage, no GPU: the table does not say what is missing"
  tail -n 3 "$work/1b.log" | grep -q "device-check: wrote" || fail "triage: the summary is not last"
  grep -q "| \*\*total\*\* |" "$work/1b.log" || fail "triage: the table was not printed"
fi
# A part the check does not know, or no bundle: the usage, exit 2.
bash "$root/scripts/device-check.sh" triage >/dev/null 2>&1; rc=$?
((rc == 2)) || fail "triage without a bundle: exit $rc"
bash "$root/scripts/device-check.sh" "$work/real/bundle.tar.xz" triaje >/dev/null 2>&1; rc=$?
((rc == 2)) || fail "an unknown part: exit $rc"

# A fake bundle: dlbench lists one cuda device, and every program takes a second and passes.
fake=$work/fake/bundle
mkdir -p "$fake/bin" "$fake/lib"
cat >"$fake/bin/dlbench" <<'SH'
#!/bin/sh
if [ "$1" = list ]; then printf 'models\n  resnet18\ndevices\n  cuda:0 Fake GPU\n'; exit 0; fi
sleep 1
SH
for t in cuda_library_tests cuda_kernels_tests cuda_memory_tests cuda_backend_tests \
         cuda_mixed_precision_tests; do
  printf '#!/bin/sh\nsleep 1\n' >"$fake/bin/$t"
done
chmod +x "$fake"/bin/*
echo fake >"$fake/VERSION"
tar -C "$work/fake" -cJf "$work/fake.tar.xz" bundle

# 2. A budget: a row starts only while its planned seconds fit.
# (The repository's GPU scripts that run under it fail against the fake dlbench: that is fine
# here, where only which rows ran is in question.)
OUT=$work/out2 bash "$root/scripts/device-check.sh" "$work/fake.tar.xz" tests --budget-s=30 \
  >"$work/2.log" 2>&1
check_record "$(ls "$work"/out2/device-check-*.jsonl | head -1)" "budget: rows" '
tests = rows[1:-1]
status = [r["status"] for r in tests]
assert rows[0]["budget_s"] == 30, rows[0]
# A row ran exactly when its planned seconds fit in what was left as it came up (the fake
# programs take a second each, so some fit and later ones do not).
for r in tests:
    fits = r["planned_s"] <= r["budget_left_s"]
    assert (r["status"] != "not_run") == fits, r
    if not fits:
        assert "not_run (budget)" in r["tail"], r
assert status.count("pass") >= 2 and "not_run" in status, status
assert rows[-1]["summary"]["not_run"] == status.count("not_run"), rows[-1]
print(status.count("pass"), "ran,", status.count("not_run"), "not run")'

# 3. A kill in the middle keeps the finished rows.
OUT=$work/out3 setsid bash "$root/scripts/device-check.sh" "$work/fake.tar.xz" tests \
  >"$work/3.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
  record=$(ls "$work"/out3/device-check-*.jsonl 2>/dev/null | head -1)
  [[ -n $record ]] && (($(wc -l <"$record") >= 4)) && break
  sleep 0.2
done
{ kill -KILL -- -"$pid"; wait "$pid"; } 2>/dev/null
check_record "$record" "kill: rows kept" '
assert len(rows) >= 4, rows
assert all("summary" not in r for r in rows), rows[-1]
assert [r["status"] for r in rows[1:4]] == ["pass"] * 3, rows[1:4]  # list and two programs
print(len(rows) - 1, "rows kept after the kill")'

echo "device check: $failures failures"
exit $((failures > 0))
