#!/usr/bin/env bash
# quiet.sh WHAT LOG COMMAND...: run COMMAND with its output (the Go
# toolchain's "go: downloading …" lines, say) in LOG, and print one
# progress line for WHAT instead. On failure the log is printed, so
# nothing is hidden when it matters, and COMMAND's exit status returned.
set -uo pipefail
what=$1 log=$2
shift 2
mkdir -p "$(dirname "$log")"
start=$SECONDS
cr=""
if [[ -t 2 ]]; then # a terminal sees the line change in place
  printf '%s…' "$what" >&2
  cr="\r"
fi
"$@" >"$log" 2>&1
status=$?
if ((status != 0)); then
  printf '%b%s failed after %ss (log: %s):\n' "$cr" "$what" "$((SECONDS - start))" "$log" >&2
  cat "$log" >&2
  exit "$status"
fi
printf '%b%s: done in %ss\n' "$cr" "$what" "$((SECONDS - start))" >&2
