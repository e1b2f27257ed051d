#!/usr/bin/env bash
# Installs, builds and runs every test: GoogleTest suites (unit, gradient checks), the command
# line's error handling, the harness, MPI, reports and parity with PyTorch; then the unit and
# gradient-check tests again under AddressSanitizer + UBSan, where any report is a failure; and the
# fuzz targets' seed corpora and regression inputs (scripts/fuzz.sh), under the same sanitizers.
# Extra arguments go to the first ctest (e.g. -L unit).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
jobs=$(nproc 2>/dev/null || echo 2)
# Tests run side by side, and none is timed: idle OpenMP threads sleep rather than spin, so that
# one test's pool does not take the cores from the next (tests/CMakeLists.txt has the figures).
export OMP_WAIT_POLICY=passive
ctest --test-dir "$root/build" --output-on-failure -j"$jobs" "$@"

echo "== the unit and gradient-check tests under AddressSanitizer + UBSan (build-asan/)"
"$root/scripts/build.sh" --sanitize
# Less the reuse plan's vgg16 and alexnet trainings (memory_plan_test.cpp): 5 minutes under the
# sanitizers, for the layers and plan code that resnet18's and resnet50's instances run too; the
# first ctest ran them whole.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$root/build-asan" --output-on-failure -j"$jobs" -L "unit|gradcheck" \
    -E 'ReusePlan\.SharesNoLiveByteAndTrainsTheSameBits/(vgg16|alexnet)'


echo "== every reader's fuzz corpus and regression inputs under AddressSanitizer + UBSan (build-fuzz/)"
"$root/scripts/fuzz.sh"
