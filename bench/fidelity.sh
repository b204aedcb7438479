#!/usr/bin/env bash
# Measures how far conveyor's default (fast) decode path is from torchvision's pixels on
# real photos: the eval recipe (Resize(256) then CenterCrop(224)) and fixed-box
# RandomResizedCrops to 224x224, per image, against torchvision 0.14 on PIL 9.4 run by
# /usr/bin/python3 on the same files (PIL.Image.open -> convert('RGB') -> transforms).
#
#   bench/fidelity.sh [PHOTOS] [INET]      # defaults /tmp/conveyor-photos, /tmp/conveyor-imagenet-like
#
# PHOTOS is bench/photos.sh's tree, INET bench/imagenet-like.sh's (both built when
# missing). FIDELITY_BIN=path runs a prebuilt bench/fidelity binary instead of `go run`
# (to measure another revision); FIDELITY_BOXES sets the crops per image (default 2);
# FIDELITY_KEEP=1 keeps the raw outputs; FIDELITY_LIST=1 prints every sample;
# FIDELITY_EXACT=1 measures Fidelity Exact's decoding (decode.Options.Exact) instead of the
# fast path (every sample should then be identical: "inf" dB).
#
# Prints, per tree, recipe and format: samples, worst PSNR (and its file), median, how
# many are below 45 dB, the largest error in levels, and the mean sub-pixel shift of
# conveyor's output against torchvision's (dx, dy in output pixels, least squares on the
# intensity gradients; positive is right/down), signed and absolute, which shows a
# systematic geometric error that PSNR alone would not.
set -euo pipefail
cd "$(dirname "$0")/.."
photos=${1:-/tmp/conveyor-photos}
inet=${2:-/tmp/conveyor-imagenet-like}
[ -d "$photos" ] || bash bench/photos.sh "$photos"
[ -d "$inet" ] || bash bench/imagenet-like.sh "$photos" "$inet" >/dev/null
out=$(mktemp -d /tmp/conveyor-fidelity.XXXXXX)
[ "${FIDELITY_KEEP:-0}" = 1 ] || trap 'rm -rf "$out"' EXIT
if [ -n "${FIDELITY_BIN:-}" ]; then
  "$FIDELITY_BIN" -out "$out" -boxes "${FIDELITY_BOXES:-2}" -exact="${FIDELITY_EXACT:-0}" "$photos" "$inet"
else
  go run ./bench/fidelity -out "$out" -boxes "${FIDELITY_BOXES:-2}" -exact="${FIDELITY_EXACT:-0}" "$photos" "$inet"
fi
/usr/bin/python3 - "$out" "$photos" "$inet" <<'PY'
import os, sys, statistics
import numpy as np
import PIL, torch, torchvision
from PIL import Image
import torchvision.transforms as T
import torchvision.transforms.functional as F

Image.MAX_IMAGE_PIXELS = None
out, photos, inet = sys.argv[1:4]
print(f"reference: torchvision {torchvision.__version__}, Pillow {PIL.__version__}, torch {torch.__version__}")
evalt = T.Compose([T.Resize(256), T.CenterCrop(224)])

def shift(a, b):
    """(dx, dy) moving b onto a, least squares on the gradients of (a+b)/2."""
    la, lb = a.sum(axis=2), b.sum(axis=2)
    m = (la + lb) / 2
    gx = (m[1:-1, 2:] - m[1:-1, :-2]) / 2
    gy = (m[2:, 1:-1] - m[:-2, 1:-1]) / 2
    d = (la - lb)[1:-1, 1:-1]
    sxx, sxy, syy = (gx * gx).sum(), (gx * gy).sum(), (gy * gy).sum()
    sxd, syd = (gx * d).sum(), (gy * d).sum()
    det = sxx * syy - sxy * sxy
    if det == 0:
        return 0.0, 0.0
    return -(syy * sxd - sxy * syd) / det, -(sxx * syd - sxy * sxd) / det

rows = []
cache = (None, None)
with open(os.path.join(out, "manifest.tsv")) as f:
    lines = [l.rstrip("\n").split("\t") for l in f]
for recipe, path, box, raw in lines:
    if cache[0] != path:
        with Image.open(path) as im:
            cache = (path, im.convert("RGB"))
    im = cache[1]
    if recipe == "eval":
        ref = evalt(im)
    else:
        x, y, w, h = map(int, box.split())
        ref = F.resized_crop(im, y, x, h, w, [224, 224])
    ref = np.asarray(ref, dtype=np.float64)
    got = np.fromfile(os.path.join(out, raw), dtype=np.uint8).reshape(224, 224, 3).astype(np.float64)
    mse = ((got - ref) ** 2).mean()
    psnr = float("inf") if mse == 0 else 10 * np.log10(255 ** 2 / mse)
    dx, dy = shift(got, ref)
    tree = "photos" if path.startswith(os.path.abspath(photos)) else "imagenet-like"
    fmt = os.path.splitext(path)[1].lower().lstrip(".").replace("jpeg", "jpg")
    rows.append((tree, recipe, fmt, path, box, psnr, int(np.abs(got - ref).max()), dx, dy))
    if os.environ.get("FIDELITY_LIST") == "1":
        print(f"{recipe}\t{os.path.relpath(path, '/tmp')}\t{box}\t{psnr:.1f} dB\tmax {rows[-1][6]}\tshift {dx:+.3f} {dy:+.3f}")

def summary(name, rs):
    ps = [r[5] for r in rs]
    fin = [p for p in ps if p != float("inf")]
    worst = min(rs, key=lambda r: r[5])
    n45 = sum(p < 45 for p in ps)
    mdx = statistics.fmean(r[7] for r in rs); mdy = statistics.fmean(r[8] for r in rs)
    adx = statistics.fmean(abs(r[7]) for r in rs); ady = statistics.fmean(abs(r[8]) for r in rs)
    med = statistics.median(ps)
    print(f"{name:32s} {len(rs):5d}  worst {worst[5]:5.2f} dB ({os.path.basename(worst[3])} {worst[4]})  "
          f"median {med:5.1f}  <45 dB: {n45:3d}  max err {max(r[6] for r in rs):3d}  "
          f"shift mean ({mdx:+.3f}, {mdy:+.3f}) |mean| ({adx:.3f}, {ady:.3f})")

print(f"{'tree/recipe/format':32s} {'n':>5s}")
keys = sorted({(r[0], r[1], r[2]) for r in rows})
for k in keys:
    summary("/".join(k), [r for r in rows if (r[0], r[1], r[2]) == k])
for tree in ("photos", "imagenet-like"):
    for recipe in ("eval", "train"):
        rs = [r for r in rows if r[0] == tree and r[1] == recipe]
        if rs:
            summary(f"{tree}/{recipe}/all", rs)
summary("all", rows)
PY
