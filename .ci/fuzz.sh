#!/usr/bin/env bash
# Runs every fuzz target of the module for a short budget each (FUZZTIME, default 10s), so
# CI keeps them runnable and fast: a target that stalls or finds a crash fails the run.
# A failing input is written under the package's testdata/fuzz/ for `go test` to replay.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-10s}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r file; do
  pkg=./$(dirname "${file#./}")
  for target in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
    echo "fuzz $pkg $target ($fuzztime)"
    go test -timeout 5m -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" > "$log" 2>&1 || {
      tail -40 "$log"; exit 1; }
    tail -1 "$log"
  done
done
