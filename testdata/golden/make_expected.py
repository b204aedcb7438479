#!/usr/bin/env python3
"""Writes testdata/golden/manifest.json: what torchvision computes for every golden photo,
the reference of pipeline's TestGoldenPhotos.

    python3 testdata/golden/make_expected.py              # regenerate manifest.json
    python3 testdata/golden/make_expected.py --compare DIR

For each photo in photos/ and each torchvision setup it applies to, it records the outputs
of the eval recipe (Resize(256) -> CenterCrop(224)) and of two train crops
(F.resized_crop at a box drawn by RandomResizedCrop.get_params from a fixed seed, to
224x224, the first one then flipped by F.hflip), each as the SHA-256 of

  - the uint8 image before ToTensor, HWC, as np.asarray gives it ("u8"), and
  - ToTensor() then Normalize(IMAGENET mean, std), float32 CHW little-endian ("f32").

Setups: "stock" is torchvision's ImageFolder default loader (pil_loader:
Image.open(f).convert('RGB'), no EXIF orientation); "exif" adds
ImageOps.exif_transpose before convert, and is recorded only for photos whose EXIF
orientation is not 1 (elsewhere it is the same as stock).

Hashes keep the manifest small (the tensors of 38 setups would take megabytes); the Go
test checks Exact against them and, once they match, uses its own Exact output (then
torchvision's, bit for bit) as the reference for Fast's PSNR and shift bounds. To see how
far a failing output is, run the Go test with CONVEYOR_GOLDEN_OUT=DIR, which writes
conveyor's uint8 outputs there as PNG, then --compare DIR: it prints PSNR and the
largest difference of each against torchvision.

The versions used are recorded in the manifest; the test names them when it fails.
"""
import hashlib
import json
import math
import os
import sys
import zlib

import numpy as np
import PIL
import torch
import torchvision
from PIL import Image, ImageOps, features
from torchvision import transforms as T
from torchvision.transforms import functional as F

HERE = os.path.dirname(os.path.abspath(__file__))

# Photos conveyor's Exact cannot match bit for bit: CMYK JPEGs decode with Go's image/jpeg
# (libjpeg-turbo's TurboJPEG API is not used for them), whose IDCT rounds differently from
# libjpeg's. Their torchvision outputs are stored as PNG in expected/, so that the test can
# bound the difference.
PIXELS = {"jpegcmyk_ColdRipple.jpg"}
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
SIZE, SHORT = 224, 256


def load(path, setup):
    with open(path, "rb") as f:
        img = Image.open(f)
        if setup == "exif":
            img = ImageOps.exif_transpose(img)
        return img.convert("RGB")


def orientation(path):
    with Image.open(path) as img:
        return img.getexif().get(0x0112, 1)


def record(img):
    u8 = np.asarray(img, dtype=np.uint8)
    t = T.Normalize(MEAN, STD)(T.ToTensor()(img))
    assert t.dtype == torch.float32
    f32 = t.contiguous().numpy().astype("<f4").tobytes()
    return {"u8": hashlib.sha256(u8.tobytes()).hexdigest(), "f32": hashlib.sha256(f32).hexdigest()}, u8


def outputs(img, seed):
    """Yields (key, record dict, uint8 array) for the eval output and the train crops."""
    ev = T.CenterCrop(SIZE)(T.Resize(SHORT)(img))
    rec, u8 = record(ev)
    yield "eval", rec, u8
    g = torch.Generator().manual_seed(seed)
    for k, flip in (("trainA", True), ("trainB", False)):
        # get_params draws from torch's global generator; fork it so the seed is ours.
        with torch.random.fork_rng():
            torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=g)))
            top, left, h, w = T.RandomResizedCrop.get_params(img, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3))
        out = F.resized_crop(img, top, left, h, w, [SIZE, SIZE], T.InterpolationMode.BILINEAR)
        if flip:
            out = F.hflip(out)
        rec, u8 = record(out)
        rec.update({"box": [left, top, w, h], "flip": flip})
        yield k, rec, u8


def photos():
    d = os.path.join(HERE, "photos")
    return sorted(n for n in os.listdir(d) if not n.startswith("."))


def generate():
    man = {
        "versions": {
            "torch": torch.__version__, "torchvision": torchvision.__version__, "pillow": PIL.__version__,
            "libjpeg_turbo": features.version("libjpeg_turbo") or features.version("jpg"),
            "libwebp": features.version("webp"), "zlib": features.version("zlib"),
        },
        "size": SIZE, "short": SHORT, "mean": MEAN, "std": STD,
        "photos": [],
    }
    for i, name in enumerate(photos()):
        path = os.path.join(HERE, "photos", name)
        setups = ["stock"] + (["exif"] if orientation(path) != 1 else [])
        entry = {"file": name, "orientation": orientation(path), "setups": {}}
        for setup in setups:
            img = load(path, setup)
            s = {"width": img.size[0], "height": img.size[1]}
            # The seed depends on the photo's name only, so adding photos changes no box.
            seed = zlib.crc32(name.encode())
            for key, rec, u8 in outputs(img, seed):
                if name in PIXELS:
                    os.makedirs(os.path.join(HERE, "expected"), exist_ok=True)
                    rec["png"] = "expected/%s.%s.%s.png" % (name, setup, key)
                    Image.fromarray(u8).save(os.path.join(HERE, rec["png"]), optimize=True)
                s[key] = rec
            entry["setups"][setup] = s
        man["photos"].append(entry)
        print(name, ", ".join(setups))
    with open(os.path.join(HERE, "manifest.json"), "w") as f:
        json.dump(man, f, indent=1)
        f.write("\n")


def compare(out_dir):
    """Prints PSNR and max |diff| of conveyor's PNGs in out_dir (NAME.SETUP.KEY.FIDELITY.png)
    against torchvision's outputs."""
    for name in photos():
        path = os.path.join(HERE, "photos", name)
        for setup in ("stock", "exif"):
            if setup == "exif" and orientation(path) == 1:
                continue
            img = load(path, setup)
            for key, _, want in outputs(img, zlib.crc32(name.encode())):
                for fid in ("exact", "fast"):
                    p = os.path.join(out_dir, "%s.%s.%s.%s.png" % (name, setup, key, fid))
                    if not os.path.exists(p):
                        continue
                    got = np.asarray(Image.open(p).convert("RGB")).astype(np.int32)
                    d = got - want.astype(np.int32)
                    mse = float(np.mean(d * d))
                    psnr = math.inf if mse == 0 else 10 * math.log10(255 ** 2 / mse)
                    print("%-36s %-5s %-6s %-5s psnr %6.2f dB  max %3d  mean %+.3f" % (
                        name, setup, key, fid, psnr, int(np.abs(d).max()), float(d.mean())))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--compare":
        compare(sys.argv[2])
    elif len(sys.argv) == 1:
        generate()
    else:
        sys.exit(__doc__)
