# Generates the golden files that photo_golden_test.go compares with: an input image,
# the output of torchvision's functional ops and of autoaugment._apply_op on it, and the
# magnitude tables of the three policies. Written with torchvision 0.14.1, Pillow 9.4.0
# and torch 1.13.1 (Debian 12's python3-torchvision):
#
#     cd augment/testdata/photo && /usr/bin/python3 gen.py
#
# The Go tests read only the files; they need no Python.
import json

import numpy as np
import torchvision.transforms.functional as F
from PIL import Image
from torchvision.transforms import InterpolationMode, autoaugment as A

rng = np.random.default_rng(19)
h, w = 47, 61
yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
base = np.stack([40 + 3 * xx, 30 + 3.5 * yy, 128 + 60 * np.sin(xx / 5.0 + yy / 7.0)], -1)
img = base + rng.normal(0, 12, (h, w, 3))
img[5:15, 8:20] = [250, 3, 120]  # a saturated patch
img[30:40, 40:55] *= 0.3  # a dark one
img = np.clip(img, 0, 255).astype(np.uint8)
im = Image.fromarray(img, "RGB")
im.save("input.png")

fill = [10, 20, 30]
cases = {
    "solarize_128": lambda: F.solarize(im, 128),
    "solarize_178.5": lambda: F.solarize(im, 178.5),
    "posterize_3": lambda: F.posterize(im, 3),
    "posterize_6": lambda: F.posterize(im, 6),
    "autocontrast": lambda: F.autocontrast(im),
    "equalize": lambda: F.equalize(im),
    "invert": lambda: F.invert(im),
    "sharpness_0.1": lambda: F.adjust_sharpness(im, 0.1),
    "sharpness_1.9": lambda: F.adjust_sharpness(im, 1.9),
    "blur_5x3_1.3": lambda: F.gaussian_blur(im, [5, 3], [1.3, 1.3]),
    "blur_9x9_0.7": lambda: F.gaussian_blur(im, [9, 9], [0.7, 0.7]),
}
ops = [
    ("Identity", 0.0), ("ShearX", 0.27), ("ShearX", -0.09), ("ShearY", 0.2),
    ("TranslateX", 27.4), ("TranslateY", -13.9), ("Rotate", 9.0), ("Rotate", -30.0),
    ("Brightness", 0.27), ("Color", -0.54), ("Contrast", 0.9), ("Sharpness", -0.27),
    ("Posterize", 5.0), ("Solarize", 178.5), ("AutoContrast", 0.0), ("Equalize", 0.0),
    ("Invert", 0.0),
]
for name, mag in ops:
    cases[f"op_{name}_{mag:g}_nearest"] = (
        lambda n=name, m=mag: A._apply_op(im, n, m, InterpolationMode.NEAREST, fill))
for name, mag in [("ShearX", 0.27), ("ShearY", -0.3), ("Rotate", 17.0), ("TranslateY", 13.9)]:
    cases[f"op_{name}_{mag:g}_bilinear"] = (
        lambda n=name, m=mag: A._apply_op(im, n, m, InterpolationMode.BILINEAR, fill))

# AutoAugment.forward with get_params forced to a given (sub-policy, probabilities,
# signs), named aa_<policy>_<id>_<prob0>_<prob1>_<sign0>_<sign1>.
import torch  # noqa: E402

for policy, tid, probs, signs in [
    ("imagenet", 0, (0.3, 0.5), (1, 0)),
    ("imagenet", 0, (0.4, 0.6), (0, 1)),  # probabilities equal to p: both run
    ("imagenet", 18, (0.1, 0.9), (0, 0)),
    ("imagenet", 17, (0.2, 0.7), (1, 1)),
    ("imagenet", 14, (0.5, 0.99), (0, 1)),
    ("imagenet", 13, (0.61, 0.2), (1, 1)),
    ("cifar10", 1, (0.1, 0.1), (0, 1)),
    ("svhn", 1, (0.5, 0.5), (1, 0)),
]:
    aa = A.AutoAugment(A.AutoAugmentPolicy(policy), fill=fill)
    aa.get_params = lambda n, t=tid, p=probs, s=signs: (t, torch.tensor(p), torch.tensor(s))
    cases[f"aa_{policy}_{tid}_{probs[0]:g}_{probs[1]:g}_{signs[0]}_{signs[1]}"] = (lambda a=aa: a(im))

for name, fn in cases.items():
    fn().save(f"{name}.png")


def space(d):
    return {k: [float(x) for x in v.reshape(-1).tolist()] + [] if v.ndim > 0 else None
            for k, (v, signed) in d.items()} | {"_signed": [k for k, (v, s) in d.items() if s]}


# Keys name the bins and the image's width×height; torchvision 0.14 passes (height, width).
mags = {
    "RandAugment_31_224x160": space(A.RandAugment()._augmentation_space(31, (160, 224))),
    "RandAugment_10_61x47": space(A.RandAugment()._augmentation_space(10, (47, 61))),
    "TrivialAugmentWide_31": space(A.TrivialAugmentWide()._augmentation_space(31)),
    "AutoAugment_10_224x160": space(A.AutoAugment()._augmentation_space(10, (160, 224))),
}
with open("magnitudes.json", "w") as f:
    json.dump(mags, f, indent=1)
    f.write("\n")
