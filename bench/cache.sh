#!/usr/bin/env bash
# The cache's two figures, each measured interleaved in one run:
#
#  1. converted: `conveyor convert SRC DST --size 256 --codec s2` once, then train from DST
#     (`conveyor bench DST`) against PyTorch's DataLoader (bench/peers/torch_dataloader.py;
#     PEER=path runs another script with the same flags and output) on the original JPEGs:
#     images/s, the ratio, and images per CPU-second (per core).
#  2. fill: the first epoch of `conveyor bench SRC --cache DIR` (a fresh cache) against the
#     same epoch without a cache, and the epochs after it.
#
#   bench/cache.sh [SRC] [--recipe train] [--workers 2] [--batch 64] [--rounds 5] [--images 1000] [--codec s2]
#
# Without SRC it uses the built-in synthetic set (~500x375 JPEGs) in $CONVEYOR_SYNTH_DIR
# (default /tmp/conveyor-synth-N). Needs python3-torch python3-torchvision for the peer.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
src="" recipe=train workers=2 batch=64 rounds=5 images=1000 size=224 codec=s2
while [ $# -gt 0 ]; do
  case "$1" in
    --recipe) recipe=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --images) images=$2; shift 2 ;;
    --codec) codec=$2; shift 2 ;;
    -*) echo "unknown flag $1" >&2; exit 2 ;;
    *) src=$1; shift ;;
  esac
done
peer=${PEER:-bench/peers/torch_dataloader.py}
[ -f "$peer" ] || { echo "cache.sh: no peer script $peer" >&2; exit 2; }
build_conveyor
[ -n "$src" ] || src=$(synth_set "$images")
dst=$tmp/converted
common=(--recipe "$recipe" --workers "$workers" --batch "$batch" --size "$size")
echo "src=$src recipe=$recipe workers=$workers batch=$batch size=$size codec=$codec rounds=$rounds"
machine
cat $(find "$src" -type f) >/dev/null
/usr/bin/time -f '%e s wall, %U s user, %S s sys' "$bin" convert "$src" "$dst" --size 256 --codec "$codec" --workers "$workers" 2>&1 | tail -2
"$bin" inspect "$dst" | head -12

# Images per CPU-second of the whole process (user+sys), from GNU time.
percpu() { awk -v n="$1" '/ s user/ {print sprintf("%.1f", n/($4+$7))}'; }

echo "== 1. converted $codec dataset vs PyTorch on the original files (last of 3 epochs, images/s)"
cv=() pc=() pt=()
for r in $(seq "$rounds"); do
  out=$(/usr/bin/time -f '%e s wall, %U s user, %S s sys' "$bin" bench "$dst" "${common[@]}" --epochs 3 2>&1)
  c=$(echo "$out" | last)
  n=$(echo "$out" | sed -n 's/.*total images=\([0-9]*\).*/\1/p')
  k=$(echo "$out" | percpu "$n")
  p=$(/usr/bin/python3 "$peer" "$src" "${common[@]}" --epochs 2 | last)
  echo "round $r: converted $c images/s ($k images per CPU-second), torch $p images/s"
  cv+=("$c") pc+=("$k") pt+=("$p")
done
mc=$(median "${cv[@]}") mk=$(median "${pc[@]}") mp=$(median "${pt[@]}")
echo "median: converted $mc images/s, $mk images per CPU-second; torch $mp images/s; ratio $(ratio "$mc" "$mp")x"

echo "== 2. filling a cache: epoch 0 with a fresh cache vs without, then epochs 1-2 (images/s)"
epochs() { grep 'epoch=' | sed -n 's/.*images_per_s=\([0-9.]*\).*/\1/p' | tr '\n' ' '; }
f0=() n0=()
for r in $(seq "$rounds"); do
  rm -rf "$tmp/fill"
  a=$("$bin" bench "$src" "${common[@]}" --epochs 3 | epochs)
  b=$("$bin" bench "$src" "${common[@]}" --epochs 3 --cache "$tmp/fill" --cache-codec "$codec" 2>/dev/null)
  stored=$(echo "$b" | sed -n 's/.*stored=\([0-9]*\).*/\1/p' | tail -1)
  b=$(echo "$b" | epochs)
  echo "round $r: no cache [$a]  cache [$b] stored $stored"
  n0+=("$(echo "$a" | awk '{print $1}')") f0+=("$(echo "$b" | awk '{print $1}')")
done
m0=$(median "${n0[@]}") m1=$(median "${f0[@]}")
echo "median first epoch: no cache $m0, filling $m1 images/s; slowdown $(awk -v a="$m0" -v b="$m1" 'BEGIN{printf "%.1f%%", 100*(1-b/a)}')"
