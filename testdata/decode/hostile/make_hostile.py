#!/usr/bin/python3
"""Regenerates the hostile corpus in this directory (see ../README.md).

Run from this directory with Debian's python3-pil installed:
    /usr/bin/python3 make_hostile.py
Every file is deterministic (random bytes come from a seeded generator).
"""
import io
import random
import struct
import zlib

from PIL import Image


def write(name, data):
    with open(name, "wb") as f:
        f.write(data)


def png_chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png(w, h, idat, depth=8, colour=2):
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, colour, 0, 0, 0))
            + png_chunk(b"IDAT", idat) + png_chunk(b"IEND", b""))


def jpeg(**kw):
    im = Image.new("RGB", (16, 16))
    im.putdata([(x * 16, y * 16, 128) for y in range(16) for x in range(16)])
    b = io.BytesIO()
    im.save(b, "JPEG", quality=90, **kw)
    return b.getvalue()


def set_sof_size(data, w, h):
    """Rewrites the frame header (SOF0..SOF2) of a JPEG to claim w x h."""
    b = bytearray(data)
    for marker in (b"\xff\xc0", b"\xff\xc1", b"\xff\xc2"):
        i = b.find(marker)
        if i >= 0:
            b[i + 5:i + 9] = struct.pack(">HH", h, w)
            return bytes(b)
    raise ValueError("no SOF")


# Headers that claim far more pixels than any limit: ErrTooLarge before any pixel memory.
# A PNG can claim 100000x100000; JPEG sizes are 16-bit, so 65535x65535 is the most a JPEG
# can claim (DNL aside). Both have real image data after the header.
write("png-100000x100000.png", png(100000, 100000, zlib.compress(b"\0" * 301, 9)))
write("jpeg-65535x65535.jpg", set_sof_size(jpeg(), 65535, 65535))
# A VP8 (lossy WebP) key frame claiming 16383x16383, VP8's maximum (268 M pixels).
vp8 = b"\x10\x02\x00" + b"\x9d\x01\x2a" + struct.pack("<HH", 16383, 16383) + b"\0" * 32
write("webp-16383x16383.webp", b"RIFF" + struct.pack("<I", 4 + 8 + len(vp8)) + b"WEBP"
      + b"VP8 " + struct.pack("<I", len(vp8)) + vp8)

# Headers within the default limit whose files are far too small to hold the pixels: a
# decoder that trusts them allocates hundreds of MB for a few hundred bytes.
write("png-12000x12000-tiny.png", png(12000, 12000, zlib.compress(b"\0" * 1000, 9)))
write("jpeg-progressive-12000x12000-tiny.jpg", set_sof_size(jpeg(progressive=True), 12000, 12000))
gif = bytearray(b"GIF89a" + struct.pack("<HHBBB", 12000, 12000, 0x80, 0, 0) + bytes(6)
                + b"\x2c" + struct.pack("<HHHHB", 0, 0, 1, 1, 0) + b"\x02\x02\x44\x01\x00\x3b")
write("gif-screen-12000x12000-tiny.gif", bytes(gif))

# A PNG with a huge zlib stream: 2000x2000 RGB needs 12 MB of filtered rows, the IDAT
# stream inflates to 256 MiB of zeros (about 250 KB compressed).
write("png-zlib-bomb.png", png(2000, 2000, zlib.compress(b"\0" * (256 << 20), 9)))

# A GIF whose first frame lies partly outside the logical screen.
write("gif-frame-outside.gif", b"GIF89a" + struct.pack("<HHBBB", 16, 16, 0x80, 0, 0) + bytes(6)
      + b"\x2c" + struct.pack("<HHHHB", 10, 10, 16, 16, 0) + b"\x02\x02\x44\x01\x00\x3b")

# Random bytes behind each format's magic number.
rng = random.Random(20261121)
magics = {
    "jpg": b"\xff\xd8\xff",
    "png": b"\x89PNG\r\n\x1a\n",
    "gif": b"GIF89a",
    "bmp": b"BM\x00\x10\x00\x00\x00\x00\x00\x00",
    "tiff": b"II*\x00",
    "webp": b"RIFF\x00\x10\x00\x00WEBPVP8 ",
}
for ext, magic in magics.items():
    write("random." + ext, magic + bytes(rng.randrange(256) for _ in range(4096)))
