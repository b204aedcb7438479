#!/usr/bin/env python3
"""Builds the golden photos: small re-encodings of real photographs shipped by Debian
bookworm's wallpaper packages, covering every format and JPEG subsampling conveyor decodes.

    bench/photos.sh /tmp/conveyor-photos   # the originals (PHOTOS_DERIVED=0 is enough)
    python3 testdata/golden/make_photos.py /tmp/conveyor-photos
    python3 testdata/golden/make_expected.py

It writes testdata/golden/photos/NAME and README.md (every file's source, author and
license, from the packages' debian/copyright). Each photo is centre-cropped to its target
aspect, shrunk with Pillow's LANCZOS, then encoded as listed in PHOTOS; sizes are mostly not
multiples of 8 (JPEG's block size) so that partial blocks and MCUs are exercised. The
committed files are what the tests use; rerunning this script rewrites them identically
only with the same Pillow, libjpeg-turbo and libwebp (the versions go into README.md).
"""
import io
import os
import sys

import PIL
from PIL import Image, ImageChops, features

HERE = os.path.dirname(os.path.abspath(__file__))

# Source packages of bench/photos.sh's classes; the copyright holder and license of each
# file are read from the package's debian/copyright (DEP-5).
PACKAGES = {"kde_plasma": ["plasma-workspace-wallpapers"], "mate_nature": ["mate-backgrounds"],
            "lomiri": ["lomiri-wallpapers-16.04", "lomiri-wallpapers-20.04"]}


def copyright_paragraphs(pkg):
    """Returns (files, copyright, license) for every Files paragraph of pkg's copyright."""
    with open("/usr/share/doc/%s/copyright" % pkg, encoding="utf-8") as f:
        text = f.read()
    out = []
    for para in text.split("\n\n"):
        fields, key = {}, None
        for line in para.splitlines():
            if line[:1] in (" ", "\t") and key:
                fields[key] += " " + line.strip()
            elif ":" in line:
                key, _, v = line.partition(":")
                fields[key] = v.strip()
        if "Files" in fields:
            out.append((fields["Files"].split(), fields.get("Copyright", ""), fields.get("License", "").split()[0]))
    return out


# name, source (class/stem), size (w, h), encoding. JPEG: (subsampling 0 4:4:4, 1 4:2:2,
# 2 4:2:0), progressive, quality; exif orientation where given (the pixels stored as they
# are, the tag saying how to turn them).
PHOTOS = [
    ("jpeg420_base_Garden.jpg", "mate_nature/Garden", (800, 599), ("jpeg", 2, False, 90)),
    ("jpeg420_base_BytheWater.jpg", "kde_plasma/BytheWater", (333, 500), ("jpeg", 2, False, 85)),
    ("jpeg420_base_Picture1A.jpg", "lomiri/Picture_1A_by_freespace", (901, 677), ("jpeg", 2, False, 80)),
    ("jpeg420_small_LadyBird.jpg", "mate_nature/LadyBird", (301, 227), ("jpeg", 2, False, 90)),
    ("jpeg422_base_OneStandsOut.jpg", "kde_plasma/OneStandsOut", (640, 401), ("jpeg", 1, False, 90)),
    ("jpeg422_base_seeding.jpg", "lomiri/seeding_by_Clements_Engelhardt", (777, 437), ("jpeg", 1, False, 85)),
    ("jpeg444_base_DarkestHour.jpg", "kde_plasma/DarkestHour", (500, 333), ("jpeg", 0, False, 90)),
    ("jpeg444_base_RainDrops.jpg", "mate_nature/RainDrops", (599, 374), ("jpeg", 0, False, 95)),
    ("jpeg420_prog_Kite.jpg", "kde_plasma/Kite", (512, 321), ("jpeg", 2, True, 85)),
    ("jpeg420_prog_Wine.jpg", "lomiri/Wine_by_Jakkub_Mede", (333, 500), ("jpeg", 2, True, 85)),
    ("jpeg422_prog_Wood.jpg", "mate_nature/Wood", (613, 460), ("jpeg", 1, True, 90)),
    ("jpeg444_prog_summer1am.jpg", "kde_plasma/summer_1am", (450, 281), ("jpeg", 0, True, 90)),
    ("jpeg444_prog_Dragonfly.jpg", "lomiri/Dragonfly_by_Bolly", (543, 407), ("jpeg", 0, True, 85)),
    ("jpeggrey_base_Grey.jpg", "kde_plasma/Grey", (500, 313), ("jpeg", 0, False, 90)),
    ("jpeggrey_prog_aitzgorri.jpg", "lomiri/aitzgorri_by_Aitzol_Berasategi", (451, 300), ("jpeg", 0, True, 90)),
    ("jpegcmyk_ColdRipple.jpg", "kde_plasma/ColdRipple", (480, 300), ("cmyk", 90)),
    ("jpeg420_exif6_ColorfulCups.jpg", "kde_plasma/ColorfulCups", (500, 313), ("jpeg", 2, False, 90, 6)),
    ("jpeg420_exif3_TwoWings.jpg", "mate_nature/TwoWings", (467, 292), ("jpeg", 2, False, 90, 3)),
    ("jpeg422_exif8_Blinds.jpg", "mate_nature/Blinds", (421, 263), ("jpeg", 1, True, 90, 8)),
    ("jpeg420_exif5_Kleiber.jpg", "lomiri/Kleiber_by_Lukas_Baubkus", (600, 338), ("jpeg", 2, False, 85, 5)),
    ("png_rgb_EveningGlow.png", "kde_plasma/EveningGlow", (360, 225), ("png", "RGB")),
    ("png_rgb_small_YellowFlower.png", "mate_nature/YellowFlower", (350, 219), ("png", "RGB")),
    ("png_rgba_Path.png", "kde_plasma/Path", (341, 213), ("png", "RGBA")),
    ("png_grey_Storm.png", "mate_nature/Storm", (390, 260), ("png", "L")),
    ("png_grey16_GreenMeadow.png", "mate_nature/GreenMeadow", (320, 256), ("png", "I;16")),
    ("png_greyalpha_sunset.png", "lomiri/sunset_by_Aitzol_Berasategi", (300, 200), ("png", "LA")),
    ("png_palette_Aqua.png", "mate_nature/Aqua", (400, 250), ("png", "P")),
    ("webp_lossy_Dune.webp", "mate_nature/Dune", (640, 400), ("webp", False)),
    ("webp_lossy_FreshFlower.webp", "mate_nature/FreshFlower", (533, 401), ("webp", False)),
    ("webp_lossy_picos.webp", "lomiri/picosdeeuropa_by_Aitzol_Berasategi", (459, 344), ("webp", False)),
    ("webp_lossless_FallenLeaf.webp", "kde_plasma/FallenLeaf", (400, 250), ("webp", True)),
    ("webp_lossless_greentock.webp", "lomiri/greentock_by_Peter_Nerlich", (333, 250), ("webp", True)),
]


def fit(im, size):
    """Centre-crops im to size's aspect ratio, then shrinks it to size."""
    w, h = im.size
    tw, th = size
    if w * th > tw * h:  # too wide
        cw = round(h * tw / th)
        im = im.crop(((w - cw) // 2, 0, (w - cw) // 2 + cw, h))
    else:
        ch = round(w * th / tw)
        im = im.crop((0, (h - ch) // 2, w, (h - ch) // 2 + ch))
    return im.resize(size, Image.LANCZOS)


def encode(im, enc):
    b = io.BytesIO()
    kind = enc[0]
    if kind == "jpeg":
        sub, prog, q = enc[1], enc[2], enc[3]
        kw = {}
        if len(enc) > 4:
            exif = Image.Exif()
            exif[0x0112] = enc[4]
            kw["exif"] = exif.tobytes()
        im.save(b, "JPEG", quality=q, subsampling=sub, progressive=prog, optimize=prog, **kw)
    elif kind == "cmyk":
        # As a print workflow separates it (grey component replacement), with real black:
        # PIL's own RGB -> CMYK conversion leaves K at 0.
        c, m, y = [ch.point(lambda v: 255 - v) for ch in im.convert("RGB").split()]
        k = ImageChops.darker(ImageChops.darker(c, m), y)
        c, m, y = [ImageChops.subtract(ch, k) for ch in (c, m, y)]
        Image.merge("CMYK", (c, m, y, k)).save(b, "JPEG", quality=enc[1])
    elif kind == "png":
        mode = enc[1]
        if mode == "I;16":
            # Real 16-bit levels: the grey photo stretched over 0..65535.
            g = im.convert("L")
            im16 = Image.new("I;16", g.size)
            im16.putdata([v * 257 for v in g.getdata()])
            im = im16
        elif mode == "RGBA":
            # A real alpha channel: a radial falloff, fully transparent in a corner.
            a = Image.radial_gradient("L").resize(im.size).point(lambda v: 255 - v)
            im = im.convert("RGB")
            im.putalpha(a)
        elif mode == "LA":
            g = im.convert("L")
            a = Image.linear_gradient("L").resize(im.size)
            im = Image.merge("LA", (g, a))
        elif mode == "P":
            im = im.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
        else:
            im = im.convert(mode)
        im.save(b, "PNG", optimize=True)
    elif kind == "webp":
        if enc[1]:
            im.save(b, "WEBP", lossless=True, quality=100, method=4)
        else:
            im.save(b, "WEBP", quality=85, method=4)
    return b.getvalue()


def source_of(src):
    """Returns the package, the original's path in it, its copyright and license."""
    cls, stem = src.split("/")
    for pkg in PACKAGES[cls]:
        paras = copyright_paragraphs(pkg)
        for files, holder, lic in paras:
            for pat in files:
                if os.path.basename(pat) == stem + ".jpg":
                    return pkg, pat, holder, lic
        if cls == "kde_plasma":  # one Files: * paragraph; themes are folders
            files, holder, lic = paras[0]
            return pkg, "usr/share/wallpapers/%s/contents/images/" % stem, holder, lic
    sys.exit("no copyright entry for %s" % src)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_photos.py DIR   (DIR from bench/photos.sh)")
    src_dir = sys.argv[1]
    out = os.path.join(HERE, "photos")
    os.makedirs(out, exist_ok=True)
    rows = []
    for name, src, size, enc in PHOTOS:
        im = Image.open(os.path.join(src_dir, src + ".jpg"))
        im.load()
        mode = im.mode
        im = fit(im.convert("RGB") if mode != "L" else im, size)
        if name.startswith("jpeggrey"):
            im = im.convert("L")
        data = encode(im, enc)
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        pkg, orig, holder, lic = source_of(src)
        rows.append("| %s | %dx%d | %s | %s | %s | %s |" % (name, size[0], size[1], pkg, orig, holder, lic))
        print("%-36s %6d bytes" % (name, len(data)))
    versions = "Pillow %s, libjpeg-turbo %s, libwebp %s" % (
        PIL.__version__, features.version("libjpeg_turbo") or features.version("jpg"), features.version("webp"))
    with open(os.path.join(HERE, "README.md"), "w") as f:
        f.write(README_HEAD % versions)
        f.write("\n".join(rows) + "\n")
        f.write(README_TAIL)


README_HEAD = """# Golden photos

Real photographs, small and re-encoded, for the end-to-end tests that compare conveyor's
pixels with torchvision's (`pipeline/golden_test.go`, `TestGoldenPhotos`). `photos/` is
written by `make_photos.py` from the photographs in Debian bookworm's wallpaper packages
(`bench/photos.sh` fetches them); `expected/` and `manifest.json` by `make_expected.py`,
which runs torchvision on them. Encoded with %s.

## Licenses

Each file is a derivative (cropped, shrunk, re-encoded) of the original named below and is
distributed under that original's license, as its package's `debian/copyright` states:
GPL-2+ (plasma-workspace-wallpapers: "Copyright 2014 KDE Visual Design Group";
mate-backgrounds: the author named), CC-BY-4.0, CC-BY-SA-3.0 or -4.0 (attribution to the author
named; derivatives under the same license) or CC0-1.0. The license texts are in
`/usr/share/common-licenses/GPL-2` on Debian and at https://creativecommons.org/licenses/.
The expected outputs in `expected/` are derivatives of the same photos under the same
licenses.

| file | size | package | original | copyright | license |
|---|---|---|---|---|---|
"""

README_TAIL = """
The `exif` photos store their pixels unrotated with an EXIF Orientation tag (3, 5, 6, 8);
`png_grey16` holds 16-bit levels (the grey photo times 257); `png_rgba`, `png_greyalpha`
carry a synthetic alpha channel; `png_palette` is the photo quantised to 256 colours.
"""

if __name__ == "__main__":
    main()
