#!/usr/bin/env bash
# Compares two conveyor binaries on the same data: runs `A bench ARGS --json` and
# `B bench ARGS --json` alternately ROUNDS times and prints each one's images/s, the
# medians and their ratio B/A, and the same for the CPU time (user + system) each spent
# per image. Interleaving keeps a shared machine's drift out of the ratio; CPU time per
# image moves less than throughput while other jobs share the cores.
#
#   bench/ab.sh OLD_BINARY NEW_BINARY ROUNDS DIR [bench flags...]
#
# e.g. git stash; go build -o /tmp/old ./cmd/conveyor; git stash pop;
#      go build -o /tmp/new ./cmd/conveyor; bench/ab.sh /tmp/old /tmp/new 7 DIR --epochs 3
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,10p' "$0"; exit 2; }
a=$1 b=$2 rounds=$3
shift 3
# rate prints images/s and CPU milliseconds per image of one run.
rate() {
  "$1" bench "${@:2}" --json 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); c=d["cpu"]
print(d["images_per_s"], 1000*(c["user_s"]+c["sys_s"])/d["images"])'
}
ra=() rb=()
for _ in $(seq "$rounds"); do
  ra+=("$(rate "$a" "$@")")
  rb+=("$(rate "$b" "$@")")
done
python3 - "${ra[*]}" "${rb[*]}" <<'PY'
import statistics, sys
def parse(s):
    v = [float(x) for x in s.split()]
    return v[0::2], v[1::2]
a, ac = parse(sys.argv[1])
b, bc = parse(sys.argv[2])
print("A", " ".join(f"{x:.0f}" for x in a), "median %.1f" % statistics.median(a))
print("B", " ".join(f"{x:.0f}" for x in b), "median %.1f" % statistics.median(b))
print("B/A %.3f" % (statistics.median(b) / statistics.median(a)))
print("CPU ms/image A", " ".join(f"{x:.3f}" for x in ac), "median %.3f" % statistics.median(ac))
print("CPU ms/image B", " ".join(f"{x:.3f}" for x in bc), "median %.3f" % statistics.median(bc))
print("CPU A/B %.3f" % (statistics.median(ac) / statistics.median(bc)))
PY
