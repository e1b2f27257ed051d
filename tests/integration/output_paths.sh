#!/usr/bin/env bash
# Every output path of every command, pointed at something that is not a regular file: a
# character device, a FIFO, a socket, a directory, a link to a device, a folder that is a file, a
# name past NAME_MAX and one that is not UTF-8. Each is refused before any work, with one line and
# exit 2, and the special file is still what it was. Devices are made with mknod in a private
# temporary folder (root only: otherwise those cases are skipped and say so), never the machine's
# own /dev. A record written before is never changed by a refused run, and a link to a regular
# file is written through and stays a link.
# Usage: output_paths.sh path/to/dlbench path/to/python-with-reports
set -u
dlbench=$1
python=${2:-python3}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d)
export DLBENCH_PEAK_FILE=$work/peaks.json
trap 'rm -rf "$work"' EXIT
failures=0 passed=0 skipped=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# refused NAME CMD...: exit 2, one 'error' line on stderr, within 60 s (a FIFO opened for writing
# would block forever), and no temporary file left in $work.
refused() {
  local name=$1
  shift
  local err rc lines
  err=$(timeout 60 "$@" 2>&1 >/dev/null)
  rc=$?
  lines=$(printf '%s' "$err" | grep -c '')
  if [[ $rc -ne 2 ]]; then
    fail "$name: exit $rc (want 2): $err"
  elif [[ $lines -ne 1 || $err != *"error"* || $err == *"internal error"* || $err == *Traceback* ]]; then
    fail "$name: want one error line, got $lines: $err"
  elif ls -A "$work" | grep -q '^\.dlbench-'; then
    fail "$name: a temporary file was left: $(ls -A "$work")"
  else
    passed=$((passed + 1))
  fi
}
# still KIND PATH: the special file is still there, as it was (test -c, -p, -S, -d).
still() {
  if test "$1" "$2"; then passed=$((passed + 1)); else fail "$2 is no longer $1"; fi
}

mkfifo "$work/fifo"
mkdir "$work/dir"
printf 'x' >"$work/file"
"$python" -c "import socket; socket.socket(socket.AF_UNIX).bind('$work/sock')"
targets=("$work/fifo:-p" "$work/dir:-d" "$work/sock:-S")
if [[ $(id -u) == 0 ]] && mknod "$work/null" c 1 3 2>/dev/null && mknod "$work/full" c 1 7; then
  ln -s "$work/null" "$work/to-null"
  targets+=("$work/null:-c" "$work/full:-c" "$work/to-null:-c")
else
  echo "skip: not root (or mknod refused): the device cases did not run"
  skipped=1
fi

quick=(run --model=digits-cnn --image-size=8 --steps=2 --warmup=0 --batch=2)
for entry in "${targets[@]}"; do
  path=${entry%:*} kind=${entry##*:}
  for flag in --json --save --dump --profile; do
    extra=()
    [[ $flag == --profile ]] && extra=(--trace-steps=1)
    refused "run $flag=$path" "$dlbench" "${quick[@]}" "${extra[@]}" "$flag=$path"
  done
  refused "run --trace=$path" "$dlbench" "${quick[@]}" --trace-steps=1 --trace="$path"
  refused "maxbatch --json=$path" "$dlbench" maxbatch --model=digits-cnn --image-size=8 \
    --memory-budget=64MiB --json="$path"
  refused "check-ops --json=$path" "$dlbench" check-ops --backend=cpu \
    --instance='relu:shape=2x3' --json="$path"
  refused "bench conv --json=$path" "$dlbench" bench conv --model=resnet18 --batch=1 \
    --image-size=32 --json="$path"
  refused "bench allreduce --json=$path" "$dlbench" bench allreduce --ranks=1 --max-bytes=64 \
    --json="$path"
  still "$kind" "$path"
done
# The MLPerf log is written as the run goes, never renamed: a directory or a socket is refused,
# and a character device takes it (the device stays one).
for path in "$work/dir" "$work/sock"; do
  refused "run --mllog=$path" "$dlbench" run --model=digits-cnn --data=digits --epochs=1 \
    --image-size=8 --mllog="$path"
done
if ((skipped == 0)); then
  "$dlbench" run --model=digits-cnn --data=digits --epochs=1 --image-size=8 \
    --mllog="$work/null" >/dev/null 2>&1 && passed=$((passed + 1)) || fail "--mllog to a device"
  still -c "$work/null"
fi
# Folders: --out of a sweep, simulate and validate-sim, where something that is not a directory
# stands (a FIFO, a regular file, a path under a regular file).
for path in "$work/fifo" "$work/file" "$work/file/sub"; do
  refused "--suite --out=$path" "$dlbench" --suite=smoke --out="$path" --dry-run
  refused "simulate --out=$path" "$dlbench" simulate --roofline=h100-sxm --model=resnet50 \
    --batch=64 --out="$path"
  refused "validate-sim --out=$path" "$dlbench" validate-sim --out="$path"
done
still -p "$work/fifo"

# Paths no record can carry, or no file system can hold: refused before the run, not after it.
refused "--trace not UTF-8" "$dlbench" "${quick[@]}" --trace-steps=1 --trace="$work/t"$'\xff'".json"
refused "--json past NAME_MAX" "$dlbench" "${quick[@]}" --json="$work/$(printf 'a%.0s' {1..256})"
refused "--json in a missing folder" "$dlbench" "${quick[@]}" --json="$work/missing/r.json"
refused "check-ops --json past NAME_MAX" "$dlbench" check-ops --backend=cpu \
  --instance='relu:shape=2x3' --json="$work/$(printf 'a%.0s' {1..256})"

# A record written before stays as it was when a later run is refused; a link to a regular file
# is written through, and stays a link.
"$dlbench" "${quick[@]}" --json="$work/record.json" >/dev/null 2>&1 || fail "a quick run failed"
cp "$work/record.json" "$work/record.before"
refused "run --json=record --trace=fifo" "$dlbench" "${quick[@]}" --json="$work/record.json" \
  --trace-steps=1 --trace="$work/fifo"
cmp -s "$work/record.json" "$work/record.before" && passed=$((passed + 1)) ||
  fail "a refused run changed the record written before it"
ln -s "$work/record.json" "$work/link.json"
"$dlbench" "${quick[@]}" --json="$work/link.json" >/dev/null 2>&1 || fail "a run through a link failed"
[[ -L $work/link.json ]] && ! cmp -s "$work/record.json" "$work/record.before" &&
  passed=$((passed + 1)) || fail "a link to the record was replaced, or not written through"

# The reports check their outputs as the C++ side does.
reports=(env PYTHONPATH="$here/../../reports" "$python" -m dlbench_reports)
mkdir -p "$work/results"
cp "$here/../reports/fixtures/scaling/results.jsonl" "$work/results/"
refused "compare --out=fifo" "${reports[@]}" compare "$work/results" --out="$work/fifo"
refused "compare --out=dir" "${reports[@]}" compare "$work/results" --out="$work/dir"
refused "compare --out=/proc/self/status" "${reports[@]}" compare "$work/results" \
  --out=/proc/self/status
ln -sf "$work/fifo" "$work/results/report.md"
refused "report over a FIFO" "${reports[@]}" report "$work/results"
still -p "$work/fifo"

echo "$passed passed, $failures failed"
((failures == 0))
