#!/usr/bin/env bash
# Runs the pytest suite of reports/ and ci/ with the project's venv (scripts/install-deps.sh).
# pytest's exit code 5 (nothing collected) is a failure here, never a pass.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
python=$root/.venv/bin/python
if [[ ! -x $python ]]; then
  echo "run_pytest: $python is missing; run scripts/install-deps.sh" >&2
  exit 1
fi
DLBENCH_BIN=${1:?usage: run_pytest.sh DLBENCH_BINARY} "$python" -m pytest -q -p no:cacheprovider \
  "$root/tests/reports"
rc=$?
if ((rc == 5)); then
  echo "run_pytest: pytest collected no tests" >&2
  exit 1
fi
exit $rc
