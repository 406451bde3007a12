#!/usr/bin/env bash
# test-summary.sh LOG COMMAND...: run COMMAND (go test), showing its output
# as it comes and keeping a copy in LOG. When it fails, repeat each failed
# test's own lines (its "--- FAIL" line and what it reported) and the
# failed packages at the very end: the controllers' error logs of a whole
# package (namespaces being deleted, an API server stopping) otherwise bury
# them, and CI shows only the tail of a long run.
set -uo pipefail
log=$1
shift
mkdir -p "$(dirname "$log")"
"$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if ((status != 0)); then
  echo
  echo "test-summary: failed (exit $status); the failures, from $log:"
  # A failure's lines are its "--- FAIL" line and the indented report
  # after it; log lines of the controllers start with "{" and are left out.
  awk '/^[[:space:]]*--- FAIL/ {show=1; print; next}
       show && /^[[:space:]]+[^[:space:]{]/ {print; next}
       {show=0}
       /^FAIL[[:space:]]/ || /^panic:/ {print}' "$log" | head -c 20000
fi
exit "$status"
