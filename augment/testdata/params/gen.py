#!/usr/bin/env python3
"""Draws parameters from torchvision's own get_params, for augment's distribution tests
(TestParamsMatchTorchvision), which compare them with the Go ops' draws by two-sample
Kolmogorov-Smirnov tests.

Run from this folder with torchvision installed (made with torchvision 0.14.1):

    python3 gen.py

It writes draws.json: for each case the op's parameters and N draws (floats rounded
to 5 decimals). The Go tests need no Python.
"""
import json

import torch
from torchvision import transforms as T

torch.manual_seed(0)
N = 2000
out = {}

# RandomErasing on a 3x224x224 tensor and a small wide one: (top, left, height, width),
# or the whole image when no try fits.
for name, (h, w, scale, ratio) in {
    "erasing_224": (224, 224, (0.02, 0.33), (0.3, 3.3)),
    "erasing_12x40": (12, 40, (0.1, 0.6), (0.5, 4.0)),
}.items():
    img = torch.zeros(3, h, w)
    draws = []
    for _ in range(N):
        i, j, eh, ew, _ = T.RandomErasing.get_params(img, scale=scale, ratio=ratio, value=[0.0])
        draws.append([i, j, eh, ew])
    out[name] = {"height": h, "width": w, "scale": scale, "ratio": ratio, "draws": draws}

# RandomAffine on a 50x20 image: angle, tx, ty, scale, shear x, shear y.
degrees, translate, scale, shear = (-30.0, 10.0), (0.1, 0.3), (0.7, 1.3), (-10.0, 20.0, -5.0, 5.0)
draws = []
for _ in range(N):
    angle, (tx, ty), s, (shx, shy) = T.RandomAffine.get_params(list(degrees), list(translate), list(scale), list(shear), [50, 20])
    draws.append([round(angle, 5), tx, ty, round(s, 5), round(shx, 5), round(shy, 5)])
out["affine"] = {"width": 50, "height": 20, "degrees": degrees, "translate": translate, "scale": scale,
                 "shear": shear, "draws": draws}

# RandomRotation angles.
out["rotation"] = {"degrees": [-20.0, 45.0],
                   "draws": [round(T.RandomRotation.get_params([-20.0, 45.0]), 5) for _ in range(N)]}

# RandomPerspective corners of a 41x30 image with distortion 0.6.
draws = []
for _ in range(N):
    _, end = T.RandomPerspective.get_params(41, 30, 0.6)
    draws.append([c for p in end for c in p])
out["perspective"] = {"width": 41, "height": 30, "distortion_scale": 0.6, "draws": draws}

# RandomCrop(20x16) offsets of a 45x33 image padded by 4: (top, left).
crop = T.RandomCrop((16, 20), padding=4)
padded = torch.zeros(3, 41, 53)
out["crop"] = {"width": 20, "height": 16, "image_width": 45, "image_height": 33, "padding": 4,
               "draws": [list(crop.get_params(padded, (16, 20))[:2]) for _ in range(N)]}

with open("draws.json", "w") as f:
    json.dump(out, f, separators=(",", ":"))
