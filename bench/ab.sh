#!/usr/bin/env bash
# Compares two conveyor binaries on the same data: runs `A bench ARGS --json` and
# `B bench ARGS --json` alternately ROUNDS times and prints each one's images/s, the
# medians and their ratio B/A. Interleaving keeps a shared machine's drift out of the
# ratio.
#
#   bench/ab.sh OLD_BINARY NEW_BINARY ROUNDS DIR [bench flags...]
#
# e.g. git stash; go build -o /tmp/old ./cmd/conveyor; git stash pop;
#      go build -o /tmp/new ./cmd/conveyor; bench/ab.sh /tmp/old /tmp/new 7 DIR --epochs 3
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,10p' "$0"; exit 2; }
a=$1 b=$2 rounds=$3
shift 3
rate() { "$1" bench "${@:2}" --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["images_per_s"])'; }
ra=() rb=()
for _ in $(seq "$rounds"); do
  ra+=("$(rate "$a" "$@")")
  rb+=("$(rate "$b" "$@")")
done
python3 - "${ra[*]}" "${rb[*]}" <<'PY'
import statistics, sys
a = [float(x) for x in sys.argv[1].split()]
b = [float(x) for x in sys.argv[2].split()]
print("A", " ".join(f"{x:.0f}" for x in a), "median %.1f" % statistics.median(a))
print("B", " ".join(f"{x:.0f}" for x in b), "median %.1f" % statistics.median(b))
print("B/A %.3f" % (statistics.median(b) / statistics.median(a)))
PY
