#!/usr/bin/env bash
# Runs every fuzz target of the module for a short budget each, so CI keeps them runnable
# and fast: a target that stalls (go test's -timeout) or finds a crash fails the run. A
# failing input is written under the package's testdata/fuzz/ for `go test` to replay.
#
# The budget is a count of executions (FUZZTIME, default 40000x), not a duration: with a
# duration, Go's fuzz coordinator (before Go 1.27, golang/go#75804) can fail a target with
# a bare "context deadline exceeded" when a busy machine delays a worker at the deadline,
# having found nothing. Minimising a new input is bounded by count (FUZZMINIMIZE) too.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-40000x}
minimize=${FUZZMINIMIZE:-200x}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r file; do
  pkg=./$(dirname "${file#./}")
  for target in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
    echo "fuzz $pkg $target ($fuzztime)"
    go test -timeout 5m -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" "$pkg" > "$log" 2>&1 || {
      tail -40 "$log"; exit 1; }
    tail -1 "$log"
  done
done
