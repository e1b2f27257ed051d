#!/usr/bin/env bash
# Runs a libFuzzer target once on every file of the given folders (its seed corpus and every
# input that ever crashed it): the regression test of a fuzz target. Any crash, sanitizer report
# or escaped exception fails it.
#   replay.sh FUZZER DIR...
set -euo pipefail
fuzzer=$1
shift
files=()
for dir in "$@"; do
  [[ -d $dir ]] || continue
  while IFS= read -r -d '' f; do files+=("$f"); done < <(find "$dir" -type f ! -name '.*' -print0 | sort -z)
done
if ((${#files[@]} == 0)); then
  echo "replay: no inputs under $*" >&2
  exit 1
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! "$fuzzer" -runs=1 "${files[@]}" >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "replay: $(basename "$fuzzer") failed on an input above" >&2
  exit 1
fi
echo "replay: $(basename "$fuzzer"): ${#files[@]} inputs, no defect"
