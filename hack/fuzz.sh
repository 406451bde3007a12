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
  corpus="$pkg/testdata/fuzz/$name"
  before=$(ls "$corpus" 2>/dev/null | sort || true)
  if ! go test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" >"$log" 2>&1; then
    after=$(ls "$corpus" 2>/dev/null | sort || true)
    # Go's fuzzing engine sometimes ends a timed run with "context deadline
    # exceeded" when the time runs out while a worker is still busy (a
    # fresh input being minimised, say). A crash always writes its input
    # under testdata/fuzz/<target>/; with no new file there nothing
    # crashed, so that ending counts as the run it was.
    if [[ "$before" == "$after" ]] && grep -q 'context deadline exceeded' "$log" && ! grep -q -- '--- FAIL:.*\|panic:\|Failing input written' <(grep -v '^--- FAIL: Fuzz' "$log"); then
      echo "fuzz: $pkg $name: the engine timed out at the end of its $fuzztime with no crasher written; not a failure"
      tail -n 3 "$log"
      rm -f "$log"
      total=$((total + 1))
      continue
    fi
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
