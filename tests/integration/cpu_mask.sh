#!/usr/bin/env bash
# The ranks and threads a suite starts follow the CPUs the process may use
# (runtime/core/host_cpus.h), shown by --dry-run: narrowed to one CPU by taskset, a 2-rank point
# is oversubscribed and its ranks unbound (Open MPI would bind them to cores outside the mask);
# with OMP_PROC_BIND, which pins the main thread to one CPU, it is not (on a host with 2 or
# more); and ranks that fit get hardware threads of their own (--map-by slot:PE=N), not Open
# MPI's one core each. Then runs for real: one rank bound to OpenMP places, and a 2-rank point
# taskset to one CPU and not (where mpirun is): the ranks stay on the CPUs they were given, and
# each record's noise says how they shared them (suites/harness/core/host_share.h).
# Usage: cpu_mask.sh path/to/dlbench
set -u
dlbench=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/check.sh"
cd "$work" || exit 1
unset OMP_NUM_THREADS OMP_PROC_BIND OMP_PLACES  # the cases below set their own
cpus=$(nproc)
# Fewer CPUs than the machine has online (a container's cpuset): mpirun's ranks run unbound.
narrowed=$((cpus < $(getconf _NPROCESSORS_ONLN)))
first_two_ranks() { "$@" --suite=scaling --dry-run 2>&1 | grep -m1 " ranks=2 "; }
line=$(first_two_ranks taskset -c "$(taskset -pc $$ | sed 's/.*: *//; s/[,-].*//')" "$dlbench")
check "one CPU: 2 ranks oversubscribed, left unbound ($line)" \
  bash -c '[[ "$0" == *"--oversubscribe"* && "$0" == *"--bind-to none"* && "$0" != *"--map-by"* ]]' "$line"
per=$((cpus / 2))
if ((cpus >= 2 && !narrowed)); then
  for env in "" "OMP_PROC_BIND=true"; do
    line=$(first_two_ranks env $env "$dlbench")
    check "$cpus CPUs ${env:-}: 2 ranks of $per threads, each on $per CPUs ($line)" \
      bash -c '[[ "$0" != *"--oversubscribe"* && "$0" == *"--map-by slot:PE=$1 --use-hwthread-cpus"* ]]' \
      "$line" "$per"
  done
elif ((cpus >= 2)); then
  line=$(first_two_ranks "$dlbench")
  check "$cpus CPUs of a narrower cpuset: 2 ranks unbound ($line)" \
    bash -c '[[ "$0" == *"--bind-to none"* && "$0" != *"--map-by"* ]]' "$line"
fi
# One rank whose OpenMP threads are bound to places: with OMP_PROC_BIND the main thread's mask
# is one CPU, but the places hold them all; with OMP_PLACES naming one CPU, its pool of a thread
# per CPU is bound to that one, and so oversubscribed.
one_rank() {
  env "$@" "$dlbench" run --model=digits-cnn --batch=8 --image-size=8 --steps=5 --json=one.json \
    >one.log 2>&1 && /usr/bin/python3 -c 'import json,sys
n = json.load(open(sys.argv[1]))["noise"]
print(n["ranks_on_host"], n["usable_cpus"], n["rank_cpus"], n["threads_per_rank"], n["oversubscribed"])' one.json
}
if ((cpus >= 2 && !narrowed)); then
  got=$(one_rank OMP_PROC_BIND=true)
  check "OMP_PROC_BIND: one rank on every CPU ($got)" test "$got" = "1 $cpus $cpus $cpus False"
fi
got=$(one_rank OMP_PLACES="{$(taskset -pc $$ | sed 's/.*: *//; s/[,-].*//')}")
check "OMP_PLACES of one CPU: its pool on that one ($got)" bash -c '[[ "$0" == "1 1 1 "*" "* ]]' "$got"
((cpus >= 2)) && check "... and so oversubscribed ($got)" bash -c '[[ "$0" == *" True" ]]' "$got"
if ! command -v mpirun >/dev/null; then
  echo "cpu_mask: no mpirun here: the 2-rank points are not run"
  check_summary cpu_mask
  exit
fi
cat >two.json <<'JSON'
{"name": "two", "description": "one 2-rank point",
 "defaults": {"model": "digits-cnn", "image_size": 8, "batch": 8, "steps": 20, "warmup": 1,
              "backend": "cpu"},
 "sweep": {"ranks": [2]}, "cpu": {}}
JSON
# The record's noise: ranks on the host, the CPUs between them, each rank's, threads, verdict.
placement() {
  /usr/bin/python3 -c 'import json,sys
n = json.loads(open(sys.argv[1]).readline())["noise"]
print(n["ranks_on_host"], n["usable_cpus"], n["rank_cpus"], n["threads_per_rank"], n["oversubscribed"])' "$1"
}
first=$(taskset -pc $$ | sed 's/.*: *//; s/[,-].*//')
taskset -c "$first" "$dlbench" --suite=two.json --out=one-cpu --no-report >one-cpu.log 2>&1
check "a 2-rank point runs under taskset (one-cpu.log)" test $? -eq 0 || cat one-cpu.log
check "under taskset its ranks share the one CPU: $(placement one-cpu/results.jsonl 2>&1)" \
  test "$(placement one-cpu/results.jsonl 2>&1)" = "2 1 1 1 True"
if ((cpus >= 2)); then
  "$dlbench" --suite=two.json --out=all --no-report >all.log 2>&1
  check "a 2-rank point runs on every CPU (all.log)" test $? -eq 0 || cat all.log
  # Mapped, each rank has its share and the two have 2 x share; unbound, each has all.
  want="2 $((2 * per)) $per $per False"
  ((narrowed)) && want="2 $cpus $cpus $per False"
  check "each rank's CPUs: $(placement all/results.jsonl 2>&1), want $want" \
    test "$(placement all/results.jsonl 2>&1)" = "$want"
fi
check_summary cpu_mask
