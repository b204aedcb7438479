#!/usr/bin/env bash
# Runs conveyor and PyTorch's DataLoader (bench/peers/torch_dataloader.py) interleaved on the
# same ImageFolder tree, same recipe, batch size and workers, and prints each one's median
# images/s and the ratio. These machines are noisy: only ratios from one run mean anything.
#
#   bench/compare.sh [DIR] [--recipe train|eval|randaugment] [--workers 2] [--batch 64]
#                    [--rounds 5] [--images 1000] [--size 224] [--epochs 2] [--go-decoder]
#                    [--mixup A] [--cutmix A] [--smoothing E] [--fidelity exact,fast]
#
# Each round runs conveyor then the peer, each for --epochs epochs; a round's figure is the
# last epoch's images/s. --go-decoder adds a column for conveyor with its pure-Go JPEG
# decoder (CONVEYOR_DECODER=go). PEER=path runs another peer script with the same flags and
# output (such as the reference anchor script bench/RESULTS.md cites).
#
# Without DIR it uses conveyor's built-in synthetic set (~500x375 JPEGs), written once to
# $CONVEYOR_SYNTH_DIR (default /tmp/conveyor-synth-N). --mixup, --cutmix and --smoothing go to
# both sides (batch-level mixing with soft labels). --fidelity runs conveyor once per listed
# fidelity (conveyor bench --fidelity), a column each; by default the recipe's.
# Needs: apt-get install -y python3-torch python3-torchvision python3-pil
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
dir="" recipe=train workers=2 batch=64 rounds=5 images=1000 size=224 epochs=2 godec=0 mix=() fids=
while [ $# -gt 0 ]; do
  case "$1" in
    --recipe) recipe=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --images) images=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --go-decoder) godec=1; shift ;;
    --fidelity) fids=$2; shift 2 ;;
    --mixup|--cutmix|--smoothing) mix+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "unknown flag $1" >&2; exit 2 ;;
    *) dir=$1; shift ;;
  esac
done
peer=${PEER:-bench/peers/torch_dataloader.py}
[ -f "$peer" ] || { echo "compare.sh: no peer script $peer" >&2; exit 2; }
build_conveyor
[ -n "$dir" ] || dir=$(synth_set "$images")
common=(--recipe "$recipe" --workers "$workers" --batch "$batch" --size "$size" --epochs "$epochs" ${mix[@]+"${mix[@]}"})
# The JPEG decoder conveyor uses here (turbo, or go without cgo/libjpeg-turbo), from a tiny set.
backend=$("$bin" bench --images 10 --synthetic-dir "$tmp/tiny" --batch 5 --workers 1 --json 2>/dev/null | sed -n 's/.*"decode_backend":"\([a-z]*\)".*/\1/p' || true)
echo "dir=$dir recipe=$recipe ${mix[*]+${mix[*]} }workers=$workers batch=$batch size=$size epochs=$epochs rounds=$rounds peer=$peer"
echo "each figure is the last epoch's images/s (steady state when --epochs > 1: worker start-up excluded on both sides)"
machine
# Warm the page cache so neither side pays for the first read.
find "$dir" -type f -print0 | xargs -0 cat >/dev/null
cv=() cg=() pt=()
IFS=, read -r -a fidlist <<<"$fids"
declare -A fv=()
for r in $(seq "$rounds"); do
  c=$("$bin" bench "$dir" "${common[@]}" | last)
  line="round $r: conveyor $c"
  for f in ${fidlist[@]+"${fidlist[@]}"}; do
    x=$("$bin" bench "$dir" "${common[@]}" --fidelity "$f" | last)
    line+=", conveyor($f) $x"
    fv[$f]+="$x "
  done
  if [ "$godec" = 1 ]; then
    g=$(CONVEYOR_DECODER=go "$bin" bench "$dir" "${common[@]}" | last)
    line+=", conveyor(go decoder) $g"
    cg+=("$g")
  fi
  p=$(/usr/bin/python3 "$peer" "$dir" "${common[@]}" | last)
  echo "$line, torch $p images/s"
  cv+=("$c") pt+=("$p")
done
mc=$(median "${cv[@]}") mp=$(median "${pt[@]}")
if [ "$godec" = 1 ]; then
  mg=$(median "${cg[@]}")
  echo "median images/s: conveyor $mc ($backend decoder), conveyor(go decoder) $mg, torch $mp"
  echo "ratio conveyor/torch $(ratio "$mc" "$mp")x; go decoder/torch $(ratio "$mg" "$mp")x"
else
  echo "median images/s: conveyor $mc ($backend decoder), torch $mp"
  echo "ratio conveyor/torch $(ratio "$mc" "$mp")x"
fi
for f in ${fidlist[@]+"${fidlist[@]}"}; do
  # shellcheck disable=SC2086 # the figures are space-separated on purpose
  mf=$(median ${fv[$f]})
  echo "conveyor($f): median $mf images/s, ratio to torch $(ratio "$mf" "$mp")x"
done
echo "(only ratios from one run mean anything: these machines are noisy)"
