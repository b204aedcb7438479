#!/usr/bin/env bash
# Regenerates the sequential-JPEG fixtures of decode's fast path (jpegfast_test.go):
# JPEGs of one 77×59 texture in every layout the fast path handles or declines, each with
# the luma (or grey) plane libjpeg decodes with its accurate integer IDCT beside it
# (NAME.y.pgm, `djpeg -dct int -grayscale`), which the fast path must match exactly.
# Needs Debian's libjpeg-turbo-progs (cjpeg, djpeg 2.1) and python3-pil.
set -euo pipefail
cd "$(dirname "$0")"
/usr/bin/python3 - <<'PY'
from PIL import Image, ImageDraw
import random
random.seed(6)
w, h = 77, 59  # not a multiple of any MCU size: partial MCUs on both edges
im = Image.new("RGB", (w, h))
px = im.load()
for y in range(h):
    for x in range(w):
        px[x, y] = ((x * 7 + y * 2) % 256, (y * 5 + random.randint(0, 60)) % 256, ((x * y) >> 3) % 256)
d = ImageDraw.Draw(im)
for _ in range(12):
    x, y = random.randint(-10, w), random.randint(-10, h)
    d.ellipse([x, y, x + random.randint(4, 30), y + random.randint(4, 30)],
              fill=tuple(random.randint(0, 255) for _ in range(3)))
im.save("texture.png")
im.save("/tmp/conveyor-texture.ppm")
PY
src=/tmp/conveyor-texture.ppm
for s in 1x1 2x1 2x2 1x2 4x1 4x2; do
  cjpeg -quality 85 -sample "$s,1x1,1x1" "$src" > "sample-$s.jpg"
done
cjpeg -quality 90 -sample 2x2 -restart 3B "$src" > restart.jpg      # a restart marker every 3 MCUs
cjpeg -quality 80 -grayscale "$src" > gray.jpg
cjpeg -quality 80 -grayscale -restart 5B "$src" > gray-restart.jpg
cjpeg -quality 95 -optimize "$src" > optimized.jpg                  # per-image Huffman tables, long codes
cjpeg -quality 100 -sample 1x1 "$src" > q100.jpg                      # large coefficients
cjpeg -quality 3 "$src" > q3-extended.jpg                             # 16-bit DQT: an SOF1 frame
printf '0: 0 63 0 0;\n1: 0 63 0 0;\n2: 0 63 0 0;\n' > /tmp/conveyor-scans.txt
cjpeg -quality 85 -scans /tmp/conveyor-scans.txt -restart 4B "$src" > non-interleaved.jpg
printf '0: 0 63 0 0;\n1 2: 0 63 0 0;\n' > /tmp/conveyor-scans.txt
cjpeg -quality 85 -scans /tmp/conveyor-scans.txt "$src" > luma-then-chroma.jpg
cjpeg -quality 85 -arithmetic "$src" > arithmetic.jpg                 # declined: image/jpeg decides
for f in *.jpg; do
  [ "$f" = arithmetic.jpg ] && continue
  djpeg -dct int -grayscale -pnm "$f" > "${f%.jpg}.y.pgm"
done
rm -f "$src" /tmp/conveyor-scans.txt
