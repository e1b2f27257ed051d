#!/usr/bin/env bash
# Builds dlbench here for sm_90 (H100/H200) and packs what a GPU machine needs to run it and its
# GPU tests: build-device/bundle.tar.xz holds bin/ (dlbench and the test programs) and lib/ (every
# shared library they load except the C library and CUDA's own: the GPU machine brings those,
# from its CUDA toolkit or PyTorch's pip packages). A GPU machine has no Debian packages and no
# MPI, and takes at most 64 MiB with the working tree; the packed bundle must fit.
#
# usage: scripts/device-bundle.sh                     build build-device/, then pack
#        scripts/device-bundle.sh --from BUILD --out DIR   pack an existing build into DIR/bundle
#                                                     (and DIR/bundle.tar.xz), no build
# Then, on the GPU machine: scripts/device-check.sh build-device/bundle.tar.xz [tests|bench] --budget-s=N
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$root/build-device
out=$root/build-device
from=""
while (($#)); do
  case $1 in
    --from) from=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "device-bundle: unknown argument $1" >&2; exit 2 ;;
  esac
done

if [[ -z $from ]]; then
  "$root/scripts/install-deps.sh"
  [[ -x /usr/local/cuda/bin/nvcc ]] || { echo "device-bundle: needs the CUDA toolkit at /usr/local/cuda" >&2; exit 1; }
  echo "device-bundle: building for sm_90 in $build"
  mkdir -p "$build"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DDLB_ENABLE_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 >"$build/configure.log" 2>&1 \
    || { echo "device-bundle: configure failed; see $build/configure.log" >&2; exit 1; }
  cmake --build "$build" -j"$(nproc)" --target dlbench dlbench_micro unit_tests gradcheck_tests \
    cuda_library_tests cuda_memory_tests cuda_kernels_tests cuda_backend_tests \
    cuda_mixed_precision_tests \
    >"$build/bundle-build.log" 2>&1 \
    || { echo "device-bundle: build failed; see $build/bundle-build.log" >&2; exit 1; }
  from=$build
fi

bundle=$out/bundle
rm -rf "$bundle" "$out/bundle.tar.xz"
mkdir -p "$bundle/bin" "$bundle/lib"
cp "$from/dlbench" "$bundle/bin/"
# The digits data set (--data=digits): the GPU machine has scikit-learn only inside PyTorch's
# virtual environment, not where Debian puts it; device-check.sh points DLB_DIGITS_PATH here.
digits=/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz
if [[ -f $digits ]]; then
  mkdir -p "$bundle/data"
  cp "$digits" "$bundle/data/"
fi
# Where `dlbench --suite=micro` looks for it: beside dlbench, under suites/.
if [[ -x $from/suites/dlbench_micro ]]; then
  mkdir -p "$bundle/bin/suites"
  cp "$from/suites/dlbench_micro" "$bundle/bin/suites/"
fi
for t in unit_tests gradcheck_tests cuda_library_tests cuda_memory_tests cuda_kernels_tests \
         cuda_backend_tests cuda_mixed_precision_tests; do
  [[ -x $from/tests/$t ]] && cp "$from/tests/$t" "$bundle/bin/"
done

# Every library the programs load, but the C library's and CUDA's (the GPU machine's own).
is_system_or_cuda() {
  case $1 in
    linux-vdso.so* | ld-linux* | libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so*) return 0 ;;
    libcuda.so* | libcudart.so* | libcublas* | libcudnn* | libnccl.so* | libnvrtc* | libnvJitLink*) return 0 ;;
  esac
  return 1
}
for b in "$bundle"/bin/* "$bundle"/bin/suites/*; do
  [[ -f $b ]] || continue
  ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  is_system_or_cuda "$name" || cp -L "$path" "$bundle/lib/$name"
done

git -C "$root" describe --always --dirty --abbrev=12 >"$bundle/VERSION" 2>/dev/null || echo unknown >"$bundle/VERSION"
# xz (its fast level): the libraries compress to two thirds of gzip's size, in seconds.
tar -C "$out" -cf - bundle | xz -T0 -2 >"$out/bundle.tar.xz"
bytes=$(stat -c %s "$out/bundle.tar.xz")
limit=$((48 << 20))  # leaves room for the working tree within the GPU machine's 64 MiB
echo "device-bundle: $out/bundle.tar.xz is $((bytes >> 20)) MiB ($(ls "$bundle/bin" | wc -l) programs, $(ls "$bundle/lib" | wc -l) libraries)"
if ((bytes > limit)); then
  echo "device-bundle: over the $((limit >> 20)) MiB budget" >&2
  exit 1
fi
