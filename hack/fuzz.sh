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
  go test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" 2>&1 | tail -n 3
  echo "fuzz: $pkg $name for $fuzztime ($((SECONDS - start))s with building)"
  total=$((total + 1))
done < <(grep -rEo --include='*_test.go' '^func (Fuzz[A-Za-z0-9_]+)' --exclude-dir=node_modules . | sed -E 's#^\./##; s#:func #:#' | sort)
echo "fuzz: $total targets, none crashed"
