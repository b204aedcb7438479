#!/usr/bin/env bash
# Runs conveyor and PyTorch's DataLoader (../shared/bench/anchor_torch.py) interleaved on the
# same ImageFolder tree, same recipe, batch size and workers, and prints each one's median
# images/s and the ratio. These machines are noisy: only ratios from one run mean anything.
#
#   bench/compare.sh [DIR] [--recipe train|eval] [--workers 2] [--batch 64] [--rounds 5] [--images 1000]
#
# Without DIR it uses conveyor's built-in synthetic set (~500x375 JPEGs), written once to
# $CONVEYOR_SYNTH_DIR (default /tmp/conveyor-synth-N).
# Needs: apt-get install -y python3-torch python3-torchvision python3-pil
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
dir="" recipe=train workers=2 batch=64 rounds=5 images=1000 size=224 epochs=2
while [ $# -gt 0 ]; do
  case "$1" in
    --recipe) recipe=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --images) images=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    -*) echo "unknown flag $1" >&2; exit 2 ;;
    *) dir=$1; shift ;;
  esac
done
anchor=${ANCHOR:-../shared/bench/anchor_torch.py}
bin=$(mktemp -d)/conveyor
go build -o "$bin" ./cmd/conveyor
if [ -z "$dir" ]; then
  dir=${CONVEYOR_SYNTH_DIR:-/tmp/conveyor-synth-$images}
  "$bin" bench --images "$images" --synthetic-dir "$dir" --batch "$batch" --workers "$workers" >/dev/null
fi
common=(--recipe "$recipe" --workers "$workers" --batch "$batch" --size "$size" --epochs "$epochs")
echo "dir=$dir recipe=$recipe workers=$workers batch=$batch size=$size epochs=$epochs rounds=$rounds"
echo "each figure is the last epoch's images/s (steady state: worker start-up excluded on both sides)"
machine
# Warm the page cache so neither side pays for the first read.
cat $(find "$dir" -type f) >/dev/null
cv=() cg=() pt=()
for r in $(seq "$rounds"); do
  c=$("$bin" bench "$dir" "${common[@]}" | last)
  g=$(CONVEYOR_DECODER=go "$bin" bench "$dir" "${common[@]}" | last)
  p=$(/usr/bin/python3 "$anchor" "$dir" "${common[@]}" | last)
  echo "round $r: conveyor $c, conveyor(go decoder) $g, torch $p images/s"
  cv+=("$c") cg+=("$g") pt+=("$p")
done
mc=$(median "${cv[@]}") mg=$(median "${cg[@]}") mp=$(median "${pt[@]}")
echo "median images/s: conveyor $mc ($("$bin" bench "$dir" --epochs 1 --images 10 --json 2>/dev/null | sed -n 's/.*"decode_backend":"\([a-z]*\)".*/\1/p') decoder), conveyor(go decoder) $mg, torch $mp"
echo "ratio conveyor/torch $(ratio "$mc" "$mp")x; go decoder/torch $(ratio "$mg" "$mp")x"
