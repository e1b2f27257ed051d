#!/usr/bin/env bash
# A failed peer never hangs the job. The last rank stops responding (SIGSTOP: alive, silent) or
# dies (SIGKILL) mid-step; with --comm-timeout=3 the job must end within 30 s, and a silent peer
# must surface as a CommError (exit 5) on rank 0. Both MPI progress modes, and the parameter
# server of --sync=async.
# Usage: comm_failure.sh path/to/dlbench
set -u
dlbench=$1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
log=$(mktemp)
trap 'rm -f "$log"' EXIT
failures=0 passed=0
for progress in thread poll; do
  for fault in rank-stops rank-dies; do
    start=$(date +%s)
    timeout 60 mpirun -np 2 --oversubscribe "$dlbench" run --ranks=2 --model=digits-cnn \
      --image-size=8 --batch=4 --steps=5 --warmup=1 --overlap=backward --comm-progress=$progress \
      --comm-timeout=3 --inject-fault=$fault >"$log" 2>&1
    rc=$? took=$(($(date +%s) - start))
    ok=1
    [[ $rc -eq 0 || $rc -eq 124 || $took -gt 30 ]] && ok=0
    if [[ $fault == rank-stops ]]; then
      [[ $rc -eq 5 ]] && grep -q "error (communication error): all-reduce .*did not complete within 3 s" "$log" || ok=0
    fi
    if [[ $ok -eq 1 ]]; then
      passed=$((passed + 1))
    else
      echo "FAIL: $fault with $progress progress: exit $rc after ${took}s"
      tail -5 "$log"
      failures=$((failures + 1))
    fi
  done
done
# Asynchronous SGD: rank 0, serving a rank that stopped, gives up at the timeout too: at the
# flush of a short run, and in the course of a long one (100,000 steps, a minute and more of
# rank 0's own, which it does not wait to finish).
# async_stop NAME STEPS WITHIN_S MESSAGE: exit 5 within WITHIN_S seconds, saying MESSAGE.
async_stop() {
  local name=$1 steps=$2 within=$3 message=$4 start rc took
  start=$(date +%s)
  timeout 60 mpirun -np 2 --oversubscribe "$dlbench" run --ranks=2 --model=digits-cnn \
    --image-size=8 --batch=4 --steps="$steps" --warmup=1 --sync=async --comm-timeout=3 \
    --inject-fault=rank-stops >"$log" 2>&1
  rc=$? took=$(($(date +%s) - start))
  if [[ $rc -eq 5 && $took -le $within ]] &&
    grep -q "error (communication error): $message" "$log"; then
    passed=$((passed + 1))
  else
    echo "FAIL: $name: exit $rc after ${took}s"
    tail -5 "$log"
    failures=$((failures + 1))
  fi
}
async_stop "async with a stopped rank" 5 30 "a message from rank 1 .*did not complete within 3 s"
async_stop "async with a rank stopped in a long run" 100000 20 \
  "asynchronous SGD: rank 1 has pushed no gradients for"
echo "$passed passed, $failures failed"
[[ $failures -eq 0 ]]
