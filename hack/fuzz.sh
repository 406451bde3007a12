#!/usr/bin/env bash
# fuzz.sh runs every fuzz target in the module for FUZZTIME each (default
# 10s), one after another. A crasher fails the run, and Go writes it under
# the package's testdata/fuzz/<target>/, where committing it makes it a seed
# every `go test` replays. The committed corpora live in the same place.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-10s}
total=0
while IFS=: read -r file name; do
  pkg=./$(dirname "$file")
  start=$SECONDS
  log=$(mktemp)
  if ! go test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" >"$log" 2>&1; then
    cat "$log"
    rm -f "$log"
    echo "fuzz: $pkg $name FAILED; the crasher is under $pkg/testdata/fuzz/$name/ (commit it once fixed)" >&2
    exit 1
  fi
  tail -n 2 "$log"
  rm -f "$log"
  echo "fuzz: $pkg $name for $fuzztime ($((SECONDS - start))s with building)"
  total=$((total + 1))
done < <(grep -rEo --include='*_test.go' '^func (Fuzz[A-Za-z0-9_]+)' --exclude-dir=node_modules . | sed -E 's#^\./##; s#:func #:#' | sort)
echo "fuzz: $total targets, none crashed"
