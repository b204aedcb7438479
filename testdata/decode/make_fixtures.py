#!/usr/bin/python3
"""Regenerates the fixtures in this directory (see README.md).

Run from this directory with Debian's python3-pil and webp (cwebp) installed:
    /usr/bin/python3 make_fixtures.py
"""
import io
import struct
import subprocess
import zlib

from PIL import Image, ImageOps

W, H = 64, 48


def blocks():
    """An asymmetric pattern of flat 8x8 blocks: JPEG at quality 100 and 4:4:4 keeps it
    almost exactly, so decoders agree to a unit or two."""
    im = Image.new("RGB", (W, H))
    px = im.load()
    for y in range(H):
        for x in range(W):
            bx, by = x // 8, y // 8
            px[x, y] = ((bx * 37 + by * 11) % 256, (bx * 13 + by * 53) % 256, (by * 40 + 20) % 256)
    return im


def gradient(alpha=False):
    im = Image.new("RGBA" if alpha else "RGB", (W, H))
    px = im.load()
    for y in range(H):
        for x in range(W):
            c = (x * 4, y * 5, (x + y) * 2)
            if alpha:
                c += ((x * 4) % 256,)  # alpha 0 down the left edge, RGB kept under it
            px[x, y] = c
    return im


def jpeg(im, **kw):
    b = io.BytesIO()
    im.save(b, "JPEG", **kw)
    return b.getvalue()


def write(name, data):
    with open(name, "wb") as f:
        f.write(data)


def png_chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


# EXIF orientation 1..8, and what PIL's exif_transpose makes of each.
src = blocks()
for o in range(1, 9):
    exif = Image.Exif()
    exif[0x0112] = o
    write(f"orient-{o}.jpg", jpeg(src, quality=100, subsampling=0, exif=exif.tobytes()))
    ImageOps.exif_transpose(Image.open(f"orient-{o}.jpg")).convert("RGB").save(f"orient-{o}-pil.png")

# CMYK (PIL writes Adobe inverted CMYK) and progressive JPEGs.
g = gradient()
g.save("gradient.png")
write("cmyk.jpg", jpeg(g.convert("CMYK"), quality=95))
write("progressive.jpg", jpeg(g, quality=90, progressive=True))
# A JPEG under a PNG name: sniffing must go by content.
write("jpeg-named.png", jpeg(g, quality=90))

# WebP lossy, lossless, and both with alpha (-exact keeps RGB under transparent pixels).
ga = gradient(alpha=True)
ga.save("gradient-alpha.png")
subprocess.run(["cwebp", "-quiet", "-q", "90", "gradient.png", "-o", "lossy.webp"], check=True)
subprocess.run(["cwebp", "-quiet", "-lossless", "gradient.png", "-o", "lossless.webp"], check=True)
subprocess.run(["cwebp", "-quiet", "-q", "90", "-exact", "gradient-alpha.png", "-o", "lossy-alpha.webp"], check=True)
subprocess.run(["cwebp", "-quiet", "-lossless", "-exact", "gradient-alpha.png", "-o", "lossless-alpha.webp"], check=True)

# GIF whose transparent index has a non-black palette colour: PIL's convert('RGB') keeps it.
p = Image.new("P", (16, 8))
pal = [0] * 768
for i in range(16):
    pal[3 * i:3 * i + 3] = [i * 16, 255 - i * 16, 100]
pal[15:18] = [200, 100, 50]  # index 5
p.putpalette(pal)
p.putdata([(x + y) % 16 for y in range(8) for x in range(16)])
p.save("transparent.gif", transparency=5)
Image.open("transparent.gif").convert("RGB").save("transparent-gif-pil.png")

# Headers claiming huge images, with nothing after them: ErrTooLarge before any pixels.
write("huge.png", b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0)))
jfif = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
sof = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, 65535, 65535, 3) + b"\x01\x22\x00\x02\x11\x01\x03\x11\x01"
write("huge.jpg", b"\xff\xd8" + jfif + sof)

# Damaged files.
good_jpeg = jpeg(g, quality=90)
write("truncated.jpg", good_jpeg[: len(good_jpeg) // 2])
good_png = open("gradient.png", "rb").read()
write("truncated.png", good_png[: len(good_png) // 2])
bad = bytearray(good_png)
bad[len(bad) // 2] ^= 0xFF  # inside IDAT: the chunk CRC no longer matches
write("corrupt.png", bytes(bad))
bad = bytearray(good_jpeg)
i = bad.index(b"\xff\xc4")  # DHT: claim more codes than the segment holds
bad[i + 5:i + 21] = b"\xff" * 16
write("corrupt.jpg", bytes(bad))
write("empty.bin", b"")
write("text.txt", b"This is a text file, not an image.\n")

# What PIL (libwebp) decodes the lossy WebPs to: VP8 is limited-range BT.601 with libwebp's
# "fancy" chroma upsampling, which the decoder reproduces.
Image.open("lossy.webp").convert("RGB").save("lossy-webp-pil.png")
Image.open("lossy-alpha.webp").convert("RGB").save("lossy-alpha-webp-pil.png")
