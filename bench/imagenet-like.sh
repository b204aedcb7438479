#!/usr/bin/env bash
# Builds an ImageFolder tree of ImageNet-sized JPEGs cut from REAL photographs, for the
# JPEG-folder benchmark (the synthetic set flatters a loader: its content is smooth):
#
#   bench/imagenet-like.sh [PHOTOS] [DIR] [N]
#   bench/compare.sh DIR --recipe train --batch 64
#
# PHOTOS is bench/photos.sh's tree (default /tmp/conveyor-photos; built when missing),
# DIR the output (default /tmp/conveyor-imagenet-like), N the number of images (1000).
# Each image is a random crop of one of PHOTOS' 38 JPEG photographs (a quarter to all of
# its shorter side, aspect 3:4 to 4:3 of ImageNet's usual shapes), resized with Lanczos so
# that its longer side is 500 (ImageNet's median file is 500x375 or 500x333), and saved by
# PIL as a baseline JPEG at quality 90 with 4:2:0 chroma, as most of ImageNet's files are.
# Classes are PHOTOS' classes. Deterministic (seed 1). Needs python3-pil.
set -euo pipefail
cd "$(dirname "$0")/.."
photos=${1:-/tmp/conveyor-photos}
dir=${2:-/tmp/conveyor-imagenet-like}
n=${3:-1000}
dir=${dir%/}
[ -d "$photos" ] || bash bench/photos.sh "$photos"
if [ -f "$dir/.conveyor-imagenet-like" ] && [ "$(cat "$dir/.conveyor-imagenet-like")" = "$n $photos" ]; then
  echo "$dir"
  exit 0
fi
[ ! -e "$dir" ] || [ -f "$dir/.conveyor-imagenet-like" ] || [ -z "$(ls -A "$dir")" ] ||
  { echo "imagenet-like: $dir exists and was not made by this script" >&2; exit 1; }
tmp="$dir.tmp.$$"
rm -rf "$tmp"
/usr/bin/python3 - "$photos" "$tmp" "$n" <<'PY'
import os, random, sys
from PIL import Image
photos, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
srcs = sorted((c, os.path.join(photos, c, f)) for c in os.listdir(photos)
              if os.path.isdir(os.path.join(photos, c))
              for f in os.listdir(os.path.join(photos, c)) if f.lower().endswith((".jpg", ".jpeg")))
if not srcs:
    sys.exit(f"imagenet-like: no JPEGs under {photos}")
rng = random.Random(1)
opened = {}
for i in range(n):
    cls, path = srcs[i % len(srcs)]
    im = opened.get(path)
    if im is None:
        im = opened[path] = Image.open(path).convert("RGB")
    W, H = im.size
    side = rng.uniform(0.25, 1.0) * min(W, H)
    aspect = rng.choice([4 / 3, 3 / 2, 1.0, 3 / 4, 2 / 3, 4 / 3, 4 / 3])
    w, h = min(W, round(side * max(aspect, 1))), min(H, round(side / min(aspect, 1)))
    x, y = rng.randrange(W - w + 1), rng.randrange(H - h + 1)
    crop = im.crop((x, y, x + w, y + h))
    s = 500 / max(w, h)
    crop = crop.resize((max(1, round(w * s)), max(1, round(h * s))), Image.LANCZOS)
    os.makedirs(os.path.join(out, cls), exist_ok=True)
    crop.save(os.path.join(out, cls, f"{i:05d}.jpg"), quality=90, subsampling="4:2:0")
PY
echo "$n $photos" > "$tmp/.conveyor-imagenet-like"
rm -rf "$dir"
mv "$tmp" "$dir"
echo "$dir"
