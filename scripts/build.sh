#!/usr/bin/env bash
# Configures (once) and builds dlbench into build/. Incremental: nothing is rebuilt when no source
# changed. CUDA is used when /usr/local/cuda/bin/nvcc exists (DLB_ENABLE_CUDA=0 turns it off).
# The build log goes to build/build.log and is shown only on failure.
#
#   scripts/build.sh              everything, into build/
#   scripts/build.sh --sanitize   the unit and gradient-check tests with AddressSanitizer and
#                                 UBSan, CPU code only, into build-asan/
#   scripts/build.sh --fuzz       the libFuzzer targets of tests/fuzz with clang, ASan and UBSan,
#                                 CPU code only, into build-fuzz/
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$root/build
args=(-DCMAKE_BUILD_TYPE=Release)
targets=()
if [[ ${1:-} == --sanitize ]]; then
  build=$root/build-asan
  # -O1 keeps the tests fast enough and the reports' stacks readable.
  args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g"
        -DDLB_SANITIZE=ON -DDLB_ENABLE_CUDA=OFF)
  targets=(--target unit_tests gradcheck_tests)
elif [[ ${1:-} == --fuzz ]]; then
  build=$root/build-fuzz
  args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g"
        -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DDLB_FUZZ=ON -DDLB_ENABLE_CUDA=OFF)
  targets=(--target fuzzers)
elif [[ ${DLB_ENABLE_CUDA:-1} != 0 && -x /usr/local/cuda/bin/nvcc ]]; then
  args+=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
else
  args+=(-DDLB_ENABLE_CUDA=OFF)
fi
# ccache: paths under the clone are hashed relative to it, and the compiler's working directory
# not at all, so that a fresh clone (as CI builds) reuses the objects of any other.
export CCACHE_BASEDIR=$root CCACHE_NOHASHDIR=true
mkdir -p "$build"
jobs=$(nproc 2>/dev/null || echo 2)
if ! { [[ -f $build/CMakeCache.txt ]] || cmake -S "$root" -B "$build" "${args[@]}"; } \
       >"$build/build.log" 2>&1 ||
   ! cmake --build "$build" -j"$jobs" "${targets[@]}" >>"$build/build.log" 2>&1; then
  tail -n 60 "$build/build.log" >&2
  echo "build failed; the full log is $build/build.log" >&2
  exit 1
fi
