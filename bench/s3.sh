#!/usr/bin/env bash
# WebDataset shards in object storage against the same JPEGs in a local folder (issue 17,
# point 7): the built-in synthetic set (~500x375 JPEGs) is written as WebDataset shards
# (examples/wdsshards), uploaded to a local versitygw server (internal/s3test's TestServe)
# behind a proxy adding --latency to every request, then `conveyor bench FOLDER` and
# `conveyor bench s3://.../train-{000000..N}.tar` run interleaved, --rounds times each;
# the medians of the last epoch's images/s, their ratio, and the object store's counters.
#
#   bench/s3.sh [--recipe train] [--workers 2] [--batch 64] [--rounds 5] [--images 1000]
#               [--per 25] [--latency 20ms] [--epochs 3] [--shard-cache-max-bytes 24M] [--order shards]
#               [--shard-prefetch N] [--shard-fetches 4] [--converted 16M]
#
# --converted SHARD_BYTES compares a converted dataset instead: the set is converted
# (conveyor convert --size 256 --shard-bytes SHARD_BYTES), uploaded, and
# `conveyor bench s3://.../conv/` runs against `conveyor bench DIR` of the local copy
# (set --shard-cache-max-bytes below the dataset's size to measure streaming).
#
# The default cache (24M) holds under half of the shards (~55 MB), so every epoch streams
# most of them again; the server's and proxy's CPU time per s3 run is printed, since on a
# small machine they compete with the loader's workers for the same cores.
#
# Needs versitygw (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
recipe=train workers=2 batch=64 rounds=5 images=1000 per=25 latency=20ms epochs=3 limit=24M size=224 order=shards prefetch= fetches=4 converted=
while [ $# -gt 0 ]; do
  case "$1" in
    --recipe) recipe=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --images) images=$2; shift 2 ;;
    --per) per=$2; shift 2 ;;
    --latency) latency=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --shard-cache-max-bytes) limit=$2; shift 2 ;;
    --order) order=$2; shift 2 ;;
    --shard-prefetch) prefetch=$2; shift 2 ;;
    --shard-fetches) fetches=$2; shift 2 ;;
    --converted) converted=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
build_conveyor
src=$(synth_set "$images")
shards=$tmp/shards prefix=wds/
if [ -n "$converted" ]; then
  "$bin" convert "$src" "$shards" --size 256 --shard-bytes "$converted" >/dev/null
  n=$(ls "$shards"/*.shard | wc -l) prefix=conv/ per=converted
else
  go run ./examples/wdsshards -src "$src" -dst "$shards" -per "$per" >/dev/null
  n=$(ls "$shards"/*.tar | wc -l)
  last_shard=$(printf '%06d' $((n - 1)))
fi

go test -c -o "$tmp/s3serve" ./internal/s3test
info=$tmp/s3.json
"$tmp/s3serve" -test.run '^TestServe$' -test.timeout 0 -serve.info "$info" -serve.upload "$shards" \
  -serve.prefix "$prefix" -serve.latency "$latency" >"$tmp/s3serve.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 300); do [ -f "$info" ] && break; kill -0 $server 2>/dev/null || { cat "$tmp/s3serve.log"; exit 1; }; sleep 0.1; done
[ -f "$info" ] || { echo "s3.sh: the server did not start" >&2; cat "$tmp/s3serve.log"; exit 1; }
field() { python3 -c "import json,sys; print(json.load(open('$info'))['$1'])"; }
export AWS_ACCESS_KEY_ID=$(field access_key) AWS_SECRET_ACCESS_KEY=$(field secret_key) AWS_REGION=us-east-1
export AWS_ENDPOINT_URL=$(field proxy) AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_EC2_METADATA_DISABLED=true
if [ -n "$converted" ]; then
  url="s3://$(field bucket)/conv/" local=$shards
else
  url="s3://$(field bucket)/wds/train-{000000..$last_shard}.tar" local=$src
fi
# cpu prints the CPU seconds (user+sys) the server process and its children (versitygw)
# have used so far.
tck=$(getconf CLK_TCK)
cpu() {
  local t=0 p
  for p in $server $(pgrep -P $server || true); do
    t=$((t + $(awk '{print $14 + $15}' /proc/$p/stat)))
  done
  awk -v t=$t -v h=$tck 'BEGIN{printf "%.2f", t/h}'
}

common=(--recipe "$recipe" --workers "$workers" --batch "$batch" --size "$size" --epochs "$epochs" --order "$order")
echo "src=$src ($images images, $(du -sh "$shards" | cut -f1) of shards) shards=$n of $per url=$url latency=$latency recipe=$recipe workers=$workers batch=$batch epochs=$epochs order=$order shard cache limit=$limit prefetch=${prefetch:-default} fetches=$fetches rounds=$rounds"
machine
cat $(find "$local" -type f) >/dev/null
lf=() rs=()
for r in $(seq "$rounds"); do
  l=$("$bin" bench "$local" "${common[@]}" 2>/dev/null | last)
  c0=$(cpu)
  out=$("$bin" bench "$url" "${common[@]}" --shard-cache-max-bytes "$limit" --shard-prefetch "${prefetch:-0}" --shard-fetches "$fetches" 2>/dev/null)
  c1=$(cpu)
  s=$(echo "$out" | last)
  echo "round $r: local $l images/s, s3 $s images/s; server+proxy $(awk -v a=$c0 -v b=$c1 'BEGIN{printf "%.2f", b-a}') CPU-s; $(echo "$out" | grep '^conveyor objstore')"
  lf+=("$l") rs+=("$s")
done
ml=$(median "${lf[@]}") ms=$(median "${rs[@]}")
echo "median (last epoch): local $ml images/s, s3 $ms images/s; ratio $(ratio "$ms" "$ml")"
echo "last s3 run's report:"
echo "$out" | grep -E '^(dataset|throughput|first batch|object store)'
