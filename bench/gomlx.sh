#!/usr/bin/env bash
# GoMLX training fed by conveyor against the same training fed the way GoMLX's examples
# load images (image.Decode + imaging crop/resize in datasets.Parallel goroutines): the
# same CNN, trainer, backend (simplego), batches and augmentation, runs interleaved;
# conveyor runs twice, with its default decoders (libjpeg-turbo when installed) and with
# CONVEYOR_DECODER=go (pure Go, as the baseline's image.Decode).
# Prints each run's images/s and share of the time the trainer waited for data (epochs
# after the first, which compiles the graph), then the medians; then the per-batch cost of
# the adapter's tensor copy, with and without Options.Backend, interleaved too.
#
#   bench/gomlx.sh [DIR] [ROUNDS] [cnn flags...]   # DIR defaults to /tmp/gomlx-photos
#
# DIR is an ImageFolder tree; bench/photos.sh makes one of real photos (PHOTOS_DERIVED=0:
# JPEGs only, no re-encoded duplicates).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
dir=${1:-/tmp/gomlx-photos}
rounds=${2:-5}
shift $(( $# < 2 ? $# : 2 ))
[ -d "$dir" ] || { echo "no $dir: make it with PHOTOS_DERIVED=0 bench/photos.sh $dir" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd integrations/gomlx && go build -o "$tmp/cnn" ./examples/cnn)
machine
arms=(conveyor conveyor-go folder)
declare -A ips wait
for r in $(seq "$rounds"); do
  for arm in "${arms[@]}"; do
    feed=${arm%-go} dec=
    [ "$arm" = conveyor-go ] && dec=go
    line=$(CONVEYOR_DECODER=$dec "$tmp/cnn" -data "$dir" -feed "$feed" -eval=false -epochs 4 -batch 4 -size 32 "$@" | tail -1)
    # "epochs 1-3: 5.1 images/s, 2.3% of the time waiting for data (feed conveyor)"
    read -r i w < <(sed -n 's/.*: \([0-9.]*\) images\/s, \([0-9.]*\)% of the time.*/\1 \2/p' <<<"$line")
    echo "round $r: $arm $i images/s, waiting $w%"
    ips[$arm]+="$i " wait[$arm]+="$w "
  done
done
for feed in "${arms[@]}"; do
  # shellcheck disable=SC2086
  echo "median $feed: $(median ${ips[$feed]}) images/s, waiting $(median ${wait[$feed]})% of the time"
done
echo "tensor copy per 32x224x224x3 float32 batch (interleaved):"
for _ in $(seq "$rounds"); do
  for c in local backend; do
    (cd integrations/gomlx && go test -run XXX -bench "Tensor/$c\$" -benchmem -benchtime 20x . | grep '^Benchmark')
  done
done
