#!/usr/bin/env bash
# Every C++ and CUDA source of the repository is formatted as .clang-format says. Prints the
# files that are not, and the command that fixes them. Usage: format_check.sh CLANG_FORMAT ROOT
set -euo pipefail
clang_format=$1
root=$2
cd "$root"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files -- '*.cpp' '*.h' '*.cu' '*.cuh')
else
  mapfile -t files < <(find runtime workloads suites tests -name '*.cpp' -o -name '*.h' \
                         -o -name '*.cu' -o -name '*.cuh')
fi
((${#files[@]})) || { echo "format_check: no sources found under $root" >&2; exit 1; }
bad=()
for f in "${files[@]}"; do
  [[ -f $f ]] || continue  # deleted in the work tree, not yet committed
  "$clang_format" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]})); then
  echo "not formatted (${#bad[@]} of ${#files[@]} files):"
  printf '  %s\n' "${bad[@]}"
  echo "fix: $clang_format -i ${bad[*]}"
  exit 1
fi
echo "${#files[@]} files formatted"
