#!/usr/bin/env bash
# The autotuner against a manual sweep and today's fixed defaults: on one dataset, runs
# `conveyor bench` with each manual setting, with the loader tuning itself (no
# --workers/--io-workers/--prefetch) and with --no-autotune (the static defaults),
# interleaved ROUNDS times, and prints each setting's median images/s (last epoch and
# whole run), the best manual point and the tuned run's ratios to it and to the defaults.
#
#   bench/autotune.sh ROUNDS 'SETTING;SETTING;...' DIR [bench flags...]
#
# Each SETTING is a set of bench flags, e.g. '--workers 1;--workers 2;--workers 4' or
# '--io-workers 16 --prefetch 2;--io-workers 64 --prefetch 4'; it runs with
# --no-autotune, so what it leaves out keeps its static default. Examples:
#   bench/autotune.sh 3 '--workers 1;--workers 2;--workers 3;--workers 4' /tmp/conveyor-synth-1000 --epochs 4
#   bench/autotune.sh 3 '--io-workers 16;--io-workers 64 --prefetch 4' /tmp/conveyor-synth-1000 --read-latency 20ms --epochs 3
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
[ $# -ge 3 ] || { sed -n '2,13p' "$0"; exit 2; }
rounds=$1 sweep=$2 dir=$3
shift 3
build_conveyor
machine
IFS=';' read -r -a points <<<"$sweep"
for i in "${!points[@]}"; do points[i]="${points[i]} --no-autotune"; done
points+=("--no-autotune" "")
out=$tmp/rates
: >"$out"
for r in $(seq "$rounds"); do
  for i in "${!points[@]}"; do
    # shellcheck disable=SC2086 # a setting is several flags
    "$bin" bench "$dir" "$@" ${points[$i]} --json 2>/dev/null | python3 -c '
import json, sys
r = json.load(sys.stdin)
t = r["settings"].get("tuned") or {}
print(sys.argv[1], r["epochs"][-1]["images_per_s"], r["images_per_s"], t.get("workers", ""), t.get("io_workers", ""), t.get("prefetch", ""))' "$i" >>"$out"
  done
  echo "round $r done" >&2
done
python3 - "$out" "${points[@]}" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
names = [n.replace(" --no-autotune", "") for n in sys.argv[2:]]
names[-1] = "autotuned"
names[-2] = "static defaults (--no-autotune)"
res = []
for i, name in enumerate(names):
    mine = [r for r in rows if int(r[0]) == i]
    last = statistics.median(float(r[1]) for r in mine)
    total = statistics.median(float(r[2]) for r in mine)
    chosen = " ".join(f"{r[3]}/{r[4]}/{r[5]}" for r in mine if len(r) > 3)
    res.append((name, last, total, [float(r[1]) for r in mine], chosen))
w = max(len(n) for n in names)
print(f"{'setting':<{w}}  last epoch  whole run  rounds (last epoch)")
for name, last, total, raw, chosen in res:
    extra = f"  tuned workers/reads/batches: {chosen}" if name == "autotuned" else ""
    print(f"{name:<{w}}  {last:10.1f}  {total:9.1f}  {' '.join(f'{x:.0f}' for x in raw)}{extra}")
manual = res[:-2]
best = max(manual, key=lambda r: r[1])
tuned, static = res[-1], res[-2]
print(f"best manual point: {best[0]} ({best[1]:.1f})")
print(f"autotuned / best manual: last epoch {tuned[1] / best[1]:.2f}, whole run {tuned[2] / best[2]:.2f}")
print(f"autotuned / static defaults: last epoch {tuned[1] / static[1]:.2f}, whole run {tuned[2] / static[2]:.2f}")
PY
