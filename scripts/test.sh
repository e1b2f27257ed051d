#!/usr/bin/env bash
# Installs, builds and runs every test: GoogleTest suites (unit, gradient checks), the command
# line's error handling, and parity with PyTorch. Extra arguments go to ctest (e.g. -L unit).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
jobs=$(nproc 2>/dev/null || echo 2)
ctest --test-dir "$root/build" --output-on-failure -j"$jobs" "$@"
