#!/usr/bin/env bash
# The ranks and threads a suite starts follow the CPUs the process may use
# (runtime/core/host_cpus.h), shown by --dry-run: narrowed to one CPU by taskset, a 2-rank point
# is oversubscribed; with OMP_PROC_BIND, which pins the main thread to one CPU, it is not (on a
# host with 2 or more); and ranks that fit get hardware threads of their own (--map-by
# slot:PE=N), not Open MPI's one core each.
# Usage: cpu_mask.sh path/to/dlbench
set -u
dlbench=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/check.sh"
cd "$work" || exit 1
cpus=$(nproc)
first_two_ranks() { "$@" --suite=scaling --dry-run 2>&1 | grep -m1 " ranks=2 "; }
line=$(first_two_ranks taskset -c "$(taskset -pc $$ | sed 's/.*: *//; s/[,-].*//')" "$dlbench")
check "one CPU: 2 ranks oversubscribed, no CPUs mapped ($line)" \
  bash -c '[[ "$0" == *"--oversubscribe"* && "$0" != *"--map-by"* ]]' "$line"
if ((cpus >= 2)); then
  per=$((cpus / 2))
  for env in "" "OMP_PROC_BIND=true"; do
    line=$(first_two_ranks env $env "$dlbench")
    check "$cpus CPUs ${env:-}: 2 ranks of $per threads, each on $per CPUs ($line)" \
      bash -c '[[ "$0" != *"--oversubscribe"* && "$0" == *"--map-by slot:PE=$1 --use-hwthread-cpus"* ]]' \
      "$line" "$per"
  done
fi
check_summary cpu_mask
