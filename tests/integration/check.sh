# Sourced by the integration scripts: `check DESCRIPTION COMMAND...` runs the command and counts
# it as passed (exit 0) or failed (anything else, printed, and check returns 1: `check ... ||
# cat LOG` shows a failure's log); `check_summary NAME` prints the counts and returns non-zero when
# anything failed.
failures=0 passed=0
check() {
  local what=$1
  shift
  if "$@"; then
    passed=$((passed + 1))
  else
    echo "FAIL: $what"
    failures=$((failures + 1))
    return 1  # so that `check ... || cat LOG` shows the log of what failed
  fi
}
check_summary() {
  echo "$1: $passed passed, $failures failed"
  [[ $failures -eq 0 ]]
}
