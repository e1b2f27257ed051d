#!/usr/bin/env bash
# The fuzz targets of every reader of outside input (tests/fuzz/README.md): builds them into
# build-fuzz/ (clang, libFuzzer, AddressSanitizer + UBSan), replays each target's seed corpus and
# regression inputs, and with --seconds N fuzzes each target for N seconds: the C++ readers
# with libFuzzer; with Hypothesis, the records reader of reports/ and ci/, the micro report's
# reader and the PyTorch peer's point-file reader (tests/fuzz/{records,micro,peer_point}).
#
#   scripts/fuzz.sh               replay only (scripts/test.sh runs this)
#   scripts/fuzz.sh --seconds 15  replay, then fuzz each target for 15 s (CI runs this)
#
# An input that crashes a target is saved under tests/fuzz/regressions/<target>/ (commit it with
# the fix), and the run fails. Prints the executions per target.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=0
if [[ ${1:-} == --seconds ]]; then
  seconds=${2:?--seconds needs a number}
elif [[ $# -gt 0 ]]; then
  echo "usage: scripts/fuzz.sh [--seconds N]" >&2
  exit 2
fi
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" --fuzz
fuzz=$root/tests/fuzz
bin=$root/build-fuzz/tests/fuzz
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

failed=0
targets=(safetensors batch_file digits_csv suite peak_file point_file results calibration network
         device op_instance jpeg tar)
for target in "${targets[@]}"; do
  bash "$fuzz/replay.sh" "$bin/${target}_fuzzer" "$fuzz/corpus/$target" "$fuzz/regressions/$target" ||
    failed=1
done
# The Python readers' Hypothesis targets: a crash is saved under tests/fuzz/<target>/regressions/.
python_targets=("$fuzz/records/fuzz_records.py" "$fuzz/micro/fuzz_micro.py"
                "$fuzz/peer_point/fuzz_peer_point.py")
for target in "${python_targets[@]}"; do
  "$root/.venv/bin/python" "$target" --replay || failed=1
done
((seconds > 0)) || exit $failed

fuzz_one() {  # TARGET: libFuzzer for $seconds, its summary line printed
  local target=$1
  mkdir -p "$fuzz/regressions/$target"  # where a crash's input goes (git keeps no empty folder)
  local work
  work=$(mktemp -d)  # new inputs go here; the committed corpus stays as it is
  local log=$work/log status=0
  if ! "$bin/${target}_fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
         -dict="$fuzz/json.dict" -artifact_prefix="$fuzz/regressions/$target/" \
         "$work" "$fuzz/corpus/$target" >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "fuzz: $target: a defect; its input is in tests/fuzz/regressions/$target/" >&2
    status=1
  fi
  local runs
  runs=$(grep -Eo '^Done [0-9]+ runs in [0-9]+ second' "$log" | tail -1 || true)
  echo "fuzz: $target: ${runs:-no summary} ($(ls "$work" | wc -l) new corpus inputs)"
  rm -rf "$work"
  return $status
}

# One target per core at a time: each is a single process and thread, so they share nothing but
# the machine, and each still gets its $seconds of a core.
jobs=$(nproc 2>/dev/null || echo 2)
running=0
for target in "${targets[@]}" "${python_targets[@]}"; do
  if ((running >= jobs)); then
    wait -n || failed=1
    running=$((running - 1))
  fi
  if [[ $target == *.py ]]; then
    "$root/.venv/bin/python" "$target" --seconds "$seconds" &
  else
    fuzz_one "$target" &
  fi
  running=$((running + 1))
done
while ((running > 0)); do
  wait -n || failed=1
  running=$((running - 1))
done
exit $failed
