#!/usr/bin/env python3
"""Generates the golden images of augment's geometry tests (TestGeometryGolden).

Run from this folder with torchvision and Pillow installed (made with torchvision 0.14.1
and Pillow 9.4.0; the perspective coefficients follow torchvision >= 0.15, see
perspective_coeffs):

    python3 gen.py

It writes golden.bin.gz, the gzipped raw RGB bytes of the two source images and of every
case's output one after the other, and cases.json, which lists the sources and each case's
function, parameters, size and offset in it. The Go tests read them and need no Python.
"""
import gzip
import json
import math

import numpy as np
import torch
from PIL import Image
from torchvision import transforms as T
from torchvision.transforms import InterpolationMode
from torchvision.transforms import functional as F
from torchvision.transforms import functional_pil as F_pil


def source(w, h, seed):
    # A smooth gradient with discs and noise: edges and flat areas for the samplers.
    rng = np.random.RandomState(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.zeros((h, w, 3))
    for c in range(3):
        img[..., c] = 40 + 170 * (x / w * (c + 1) % 1.0) + 30 * np.sin((x + 2 * y) / (3 + c))
    for _ in range(4):
        cx, cy, r = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(3, min(w, h) / 3)
        inside = np.clip(r - np.hypot(x - cx, y - cy), 0, 1)[..., None]
        img = img * (1 - inside) + rng.uniform(0, 255, 3) * inside
    img += rng.normal(0, 6, img.shape)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB")


def perspective_coeffs(startpoints, endpoints):
    # torchvision >= 0.15's _get_perspective_coeffs: least squares in float64, rounded to
    # float32. (0.14, installed here, solves in float32, off by about 1e-7.)
    a = torch.zeros(8, 8, dtype=torch.float64)
    for i, (p1, p2) in enumerate(zip(endpoints, startpoints)):
        a[2 * i, :] = torch.tensor([p1[0], p1[1], 1, 0, 0, 0, -p2[0] * p1[0], -p2[0] * p1[1]])
        a[2 * i + 1, :] = torch.tensor([0, 0, 0, p1[0], p1[1], 1, -p2[1] * p1[0], -p2[1] * p1[1]])
    b = torch.tensor(startpoints, dtype=torch.float64).view(8)
    return torch.linalg.lstsq(a, b, driver="gels").solution.to(torch.float32).tolist()


MODES = {"nearest": InterpolationMode.NEAREST, "bilinear": InterpolationMode.BILINEAR,
         "bicubic": InterpolationMode.BICUBIC}
srcs = {"rect": source(45, 33, 1), "square": source(32, 32, 2)}
blob = bytearray()


def put(im):
    off = len(blob)
    blob.extend(im.tobytes())
    return {"offset": off, "width": im.size[0], "height": im.size[1]}


sources = {name: put(im) for name, im in srcs.items()}
cases = []


def add(kind, src, out, **params):
    cases.append({"kind": kind, "src": src, "out": put(out), **params})


affines = [
    (0, (0, 0), 1, (0, 0)),
    (17, (0, 0), 1, (0, 0)),
    (-33.3, (3, -2), 1.25, (0, 0)),
    (0, (0, 0), 0.7, (0, 0)),
    (0, (4, 3), 1, (0, 0)),
    (0, (1.5, -0.25), 1, (0, 0)),
    (5, (0, 0), 1, (25, 0)),
    (0, (-6, 2), 1, (0, -20)),
    (140, (1, 1), 0.9, (-10, 8)),
    (90, (0, 0), 1, (0, 0)),
    (-180, (2, 0), 1.1, (0, 0)),
    (45, (0, 0), 2.5, (30, -30)),
]
for src in srcs:
    for interp in MODES:
        for i, (angle, tr, scale, shear) in enumerate(affines):
            fill = [10, 200, 30] if i % 2 else [0, 0, 0]
            out = F.affine(srcs[src], angle=angle, translate=list(tr), scale=scale, shear=list(shear),
                           interpolation=MODES[interp], fill=fill)
            add("affine", src, out, angle=angle, translate=list(tr), scale=scale, shear=list(shear),
                interpolation=interp, fill=fill)

for src in srcs:
    for interp in MODES:
        for i, angle in enumerate([0, 90, 180, 270, -90, 30, -72.5, 123.4, 359.9, 45, 1e-3]):
            for expand in (False, True):
                fill = [255, 0, 128] if i % 2 else [0, 0, 0]
                out = F.rotate(srcs[src], angle, interpolation=MODES[interp], expand=expand, fill=fill)
                add("rotate", src, out, angle=angle, expand=expand, interpolation=interp, fill=fill)

for src in srcs:
    w, h = srcs[src].size
    start = [[0, 0], [w - 1, 0], [w - 1, h - 1], [0, h - 1]]
    ends = [
        start,
        [[3, 2], [w - 5, 1], [w - 2, h - 4], [6, h - 1]],
        [[10, 7], [w - 1, 0], [w - 9, h - 8], [0, h - 3]],
    ]
    for interp in MODES:
        for i, end in enumerate(ends):
            fill = [7, 8, 9] if i % 2 else [0, 0, 0]
            coeffs = perspective_coeffs(start, end)
            # F.perspective's PIL branch with those coefficients.
            pil = {"nearest": Image.NEAREST, "bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC}[interp]
            out = F_pil.perspective(srcs[src], coeffs, interpolation=pil, fill=fill)
            add("perspective", src, out, end=end, interpolation=interp, fill=fill, coeffs=coeffs)

for mode in ("constant", "edge", "reflect", "symmetric"):
    for pad in ([1, 2, 3, 4], [0, 5, 0, 0], [50, 3, 47, 40]):
        fill = [20, 40, 60] if mode == "constant" else 0
        out = F.pad(srcs["rect"], pad, fill=fill, padding_mode=mode)
        add("pad", "rect", out, padding=pad, mode=mode, fill=fill if mode == "constant" else [0, 0, 0])

# RandomCrop with padding and pad_if_needed: torchvision pads in turn (padding, then the
# missing width, then the missing height), each padding mirroring the image the one before
# made. get_params is replaced to crop the whole padded image, which the Go test compares
# with every crop position.
full = staticmethod(lambda img, output_size: (0, 0, img.size[1], img.size[0]))
for mode in ("constant", "edge", "reflect", "symmetric"):
    for pad, crop in (([1, 2, 3, 4], [60, 50]), ([5, 0, 0, 3], [110, 40]), ([0, 0, 0, 0], [50, 40]),
                      ([2, 3, 1, 0], [40, 30]), ([9, 1, 0, 6], [48, 90])):
        fill = [20, 40, 60] if mode == "constant" else 0
        t = T.RandomCrop((crop[1], crop[0]), padding=pad, pad_if_needed=True, fill=fill, padding_mode=mode)
        t.get_params = full
        out = t(srcs["rect"])
        add("padcrop", "rect", out, padding=pad, crop=crop, mode=mode,
            fill=fill if mode == "constant" else [0, 0, 0])

# The autoaugment shears, as torchvision's _apply_op: about the top-left corner.
for src in srcs:
    for interp in MODES:
        for axis in ("x", "y"):
            for i, mag in enumerate([0.27, -0.31, 0.9, -0.99]):
                fill = [10, 20, 30] if i % 2 else [0, 0, 0]
                deg = math.degrees(math.atan(mag))
                shear = [deg, 0.0] if axis == "x" else [0.0, deg]
                out = F.affine(srcs[src], angle=0.0, translate=[0, 0], scale=1.0, shear=shear,
                               interpolation=MODES[interp], fill=fill, center=[0, 0])
                add("shear", src, out, axis=axis, magnitude=mag, interpolation=interp, fill=fill)

with gzip.GzipFile("golden.bin.gz", "wb", mtime=0) as f:
    f.write(bytes(blob))
with open("cases.json", "w") as f:
    f.write('{"sources": %s,\n"cases": [\n' % json.dumps(sources))
    f.write(",\n".join(json.dumps(c) for c in cases))
    f.write("\n]}\n")
print(len(cases), "cases")
