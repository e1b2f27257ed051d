#!/usr/bin/env bash
# The device bundle is self-contained: packed from this build, every library its programs load
# resolves to the bundle's lib/, CUDA's own directory (which stands in for the GPU machine's
# CUDA libraries) or the C library; and its dlbench runs `list` with only those on the library
# path and nothing of this environment.
# usage: device_bundle.sh BUILD_DIR
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$1
work=$(mktemp -d)
# A sweep with a CPU point measures the CPU's peak once and keeps it: in this test's own file,
# never the user's cache (measured while tests load the cores, it would be kept too low).
export DLBENCH_PEAK_FILE=$work/peaks.json
trap 'rm -rf "$work"' EXIT
"$root/scripts/device-bundle.sh" --from "$build" --out "$work" || { echo "FAIL: packing"; exit 1; }
cuda_lib=$(dirname "$(ldd "$build/dlbench" | awk '$1 ~ /^libcudart/ {print $3}')")
path=$work/bundle/lib:$cuda_lib
failures=0
for b in "$work"/bundle/bin/* "$work"/bundle/bin/suites/*; do
  [[ -f $b ]] || continue
  while read -r name arrow where _; do
    [[ $arrow == "=>" ]] || continue
    case $where in
      "$work"/bundle/lib/* | "$cuda_lib"/*) ;;
      */libc.so.* | */libm.so.* | */libdl.so.* | */libpthread.so.* | */librt.so.*) ;;
      *) echo "FAIL: $(basename "$b") loads $name from $where, outside the bundle"; failures=$((failures + 1)) ;;
    esac
  done < <(LD_LIBRARY_PATH=$path ldd "$b")
done
out=$(env -i LD_LIBRARY_PATH="$path" "$work/bundle/bin/dlbench" list 2>&1) \
  || { echo "FAIL: dlbench list in the bundle: $out"; failures=$((failures + 1)); }
grep -q "^models" <<<"$out" || { echo "FAIL: no model list: $out"; failures=$((failures + 1)); }
[[ -x $work/bundle/bin/suites/dlbench_micro ]] \
  || { echo "FAIL: no dlbench_micro where --suite=micro looks for it"; failures=$((failures + 1)); }
echo "bundle: $(ls "$work/bundle/bin" | wc -l) programs, $(ls "$work/bundle/lib" | wc -l) libraries; $failures failures"
exit $((failures > 0))
