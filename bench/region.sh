#!/usr/bin/env bash
# Measures crop-aware decoding: conveyor bench with the train recipe (RandomResizedCrop)
# decoding only each sample's crop (the default) and with --full-decode, interleaved, on
# both JPEG decoders, and prints each one's median images/s and the gain.
#
#   bench/region.sh [DIR] [--batch 64] [--workers 2] [--rounds 5] [--epochs 2] [--images 1000]
#
# Without DIR it uses the built-in synthetic set (~500x375 JPEGs). The figure of a run is
# its last epoch's images/s.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
dir="" workers=2 batch=64 rounds=5 images=1000 epochs=2
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) workers=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --images) images=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "unknown flag $1" >&2; exit 2 ;;
    *) dir=$1; shift ;;
  esac
done
build_conveyor
[ -n "$dir" ] || dir=$(synth_set "$images")
common=(--recipe train --workers "$workers" --batch "$batch" --epochs "$epochs")
echo "dir=$dir recipe=train workers=$workers batch=$batch epochs=$epochs rounds=$rounds"
machine
find "$dir" -type f -print0 | xargs -0 cat >/dev/null
declare -A runs
for r in $(seq "$rounds"); do
  line="round $r:"
  for dec in turbo go; do
    for mode in region full; do
      flags=()
      [ "$mode" = full ] && flags=(--full-decode)
      v=$(CONVEYOR_DECODER=$dec "$bin" bench "$dir" "${common[@]}" "${flags[@]}" | last)
      runs[$dec-$mode]+=" $v"
      line+=" $dec/$mode $v"
    done
  done
  echo "$line images/s"
done
for dec in turbo go; do
  # shellcheck disable=SC2086
  mr=$(median ${runs[$dec-region]}) mf=$(median ${runs[$dec-full]})
  echo "$dec decoder: median crop-aware $mr, full decode $mf images/s: gain $(ratio "$mr" "$mf")x"
done
echo "(only ratios from one run mean anything: these machines are noisy)"
