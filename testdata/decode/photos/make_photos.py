#!/usr/bin/python3
"""Regenerates the real-photo JPEGs of this folder from bench/photos.sh's tree.

    bash bench/photos.sh                      # builds /tmp/conveyor-photos
    /usr/bin/python3 make_photos.py [PHOTOS]  # in this folder; Debian's python3-pil 9.4

Each file is a crop of one Debian wallpaper photograph, resized with Lanczos and saved by
PIL as a baseline JPEG, at sizes that are not multiples of 8 and in both common chroma
subsamplings (see README.md).
"""
import os
import sys

from PIL import Image

photos = sys.argv[1] if len(sys.argv) > 1 else "/tmp/conveyor-photos"

# name: (source under PHOTOS, crop (None: centred, "portrait", or a box), output size, subsampling)
FILES = {
    "seeding-800x599-420.jpg": ("lomiri/seeding_by_Clements_Engelhardt.jpg", None, (800, 599), "4:2:0"),
    "seeding-800x599-422.jpg": ("lomiri/seeding_by_Clements_Engelhardt.jpg", None, (800, 599), "4:2:2"),
    "friends-333x500-420.jpg": ("lomiri/friends_by_Aitzol_Berasategi.jpg", "portrait", (333, 500), "4:2:0"),
    "ladybird-333x500-422.jpg": ("mate_nature/LadyBird.jpg", "portrait", (333, 500), "4:2:2"),
    # Saturated colours: many pixels' YCbCr lie outside the RGB cube.
    "onestandsout-500x333-420.jpg": ("kde_plasma/OneStandsOut.jpg", (480, 267, 2080, 1333), (500, 333), "4:2:0"),
}

for name, (src, box, size, sub) in FILES.items():
    with Image.open(os.path.join(photos, src)) as im:
        im = im.convert("RGB")
        W, H = im.size
        if box is None:  # the widest centred box of the output's aspect
            w = min(W, round(H * size[0] / size[1]))
            h = min(H, round(w * size[1] / size[0]))
        elif box == "portrait":  # the full height, the output's aspect, centred
            h = H
            w = round(H * size[0] / size[1])
        if isinstance(box, tuple):
            im = im.crop(box)
        else:
            x, y = (W - w) // 2, (H - h) // 2
            im = im.crop((x, y, x + w, y + h))
        im = im.resize(size, Image.LANCZOS)
        im.save(name, quality=90, subsampling=sub)
        print(name, im.size, sub, os.path.getsize(name))
