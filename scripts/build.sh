#!/usr/bin/env bash
# Configures (once) and builds dlbench into build/. Incremental: nothing is rebuilt when no source
# changed. CUDA is used when /usr/local/cuda/bin/nvcc exists (DLB_ENABLE_CUDA=0 turns it off).
# The build log goes to build/build.log and is shown only on failure.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$root/build
mkdir -p "$build"
args=(-S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release)
if [[ ${DLB_ENABLE_CUDA:-1} != 0 && -x /usr/local/cuda/bin/nvcc ]]; then
  args+=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
else
  args+=(-DDLB_ENABLE_CUDA=OFF)
fi
jobs=$(nproc 2>/dev/null || echo 2)
if ! { [[ -f $build/CMakeCache.txt ]] || cmake "${args[@]}"; } >"$build/build.log" 2>&1 ||
   ! cmake --build "$build" -j"$jobs" >>"$build/build.log" 2>&1; then
  tail -n 60 "$build/build.log" >&2
  echo "build failed; the full log is $build/build.log" >&2
  exit 1
fi
