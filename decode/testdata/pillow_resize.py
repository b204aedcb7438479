#!/usr/bin/env python3
"""Writes pillow_resize.json: what Pillow computes for Image.crop(box).resize(size,
BILINEAR) on a seeded noisy RGB image, for decode's TestResizeExactPillow.

    python3 decode/testdata/pillow_resize.py   # from the repository root

The source image is stored in the JSON too (so the test needs no PNG decoder), as are the
Pillow version and every output, base64-encoded raw RGB rows.
"""
import base64
import json
import os
import random

import PIL
from PIL import Image

rnd = random.Random(29)
W, H = 151, 97
# Smooth gradients plus noise plus hard edges: every coefficient matters.
pix = bytearray()
for y in range(H):
    for x in range(W):
        for c in range(3):
            v = (x * (3 + c) + y * (5 - c)) % 256
            if (x // 17 + y // 11) % 2:
                v = 255 - v
            v = min(255, max(0, v + rnd.randint(-40, 40)))
            pix.append(v)
src = Image.frombytes("RGB", (W, H), bytes(pix))

cases = [  # (left, top, right, bottom), (w, h)
    ((0, 0, W, H), (64, 41)), ((0, 0, W, H), (149, 40)), ((0, 0, W, H), (151, 50)),
    ((0, 0, W, H), (90, 77)), ((0, 0, W, H), (180, 120)), ((0, 0, W, H), (7, 5)),
    ((3, 5, 120, 90), (37, 29)), ((10, 0, 11, 97), (4, 9)), ((0, 20, W, 21), (13, 3)),
    ((17, 9, 150, 96), (133, 30)), ((40, 30, 61, 47), (96, 70)), ((1, 1, 150, 96), (23, 61)),
    ((0, 0, 97, 97), (96, 96)), ((5, 7, 77, 93), (80, 101)), ((0, 0, W, H), (1, 1)),
]
out = {"pillow": PIL.__version__, "width": W, "height": H,
       "source": base64.b64encode(bytes(pix)).decode(), "cases": []}
for box, size in cases:
    im = src.crop(box).resize(size, Image.BILINEAR)
    out["cases"].append({"box": list(box), "size": list(size),
                         "pixels": base64.b64encode(im.tobytes()).decode()})
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pillow_resize.json")
with open(path, "w") as f:
    json.dump(out, f, indent=0)
    f.write("\n")
