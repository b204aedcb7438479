package decode

import (
	"image"

	"github.com/conveyor-ml/conveyor/internal/libwebp"
)

// libWebP is the libwebp WebP backend (libwebp.so.7, see internal/libwebp). It gives the
// pixels of golang.org/x/image/webp with webpToRGB, about twice as fast on photos.
type libWebP struct{ lib *libwebp.Lib }

// libwebpName is the WebP backend's name, which WebPBackend reports.
const libwebpName = "libwebp"

func openLibWebP() (backend, error) {
	lib, err := libwebp.Load()
	if err != nil {
		return nil, err
	}
	return &libWebP{lib: lib}, nil
}

func (b *libWebP) name() string { return libwebpName }

func (b *libWebP) accepts(h *header) bool { return h.format == WebP }

// decode decodes j.rs into j.img. libwebp decodes no further down than j.rs; when a
// resize follows and j.rs covers at least twice webpGap times the target, libwebp also
// crops to j.rs and scales it down to webpGap times the target on the way out (a box
// filter, like a JPEG's DCT scaling), converting only those pixels to RGB. Unscaled, the
// crop keeps the whole width and the top rows down to an odd count (or the bottom), where
// libwebp's pixels are those of a whole decode: a lossy crop's first row and column, and
// its last row when it ends a pair of rows sharing chroma, are upsampled as an edge. Anything
// libwebp declines (animation, damage) goes to x/image/webp, which decides.
func (b *libWebP) decode(j *job) (decoded, error) {
	w, h := j.h.width, j.h.height
	rs := j.rs
	c := image.Rect(0, 0, w, rs.Max.Y)
	if c.Max.Y%2 == 0 && c.Max.Y < h {
		c.Max.Y++ // a lossy crop's last row is upsampled as an edge when it ends a chroma row
	}
	sw, sh := c.Dx(), c.Dy()
	if j.resized {
		if s, tw, th, ok := webpScale(rs, j.tw, j.th); ok {
			c, sw, sh = s, tw, th
		}
	}
	j.img.Reset(sw, sh)
	var err error
	if c == image.Rect(0, 0, w, h) && sw == w && sh == h {
		err = b.lib.DecodeRGB(j.img.Pix, j.img.Stride, w, h, j.data)
	} else {
		err = b.lib.DecodeRGBRegion(j.img.Pix, j.img.Stride, j.data, w, h, c, sw, sh)
	}
	if err != nil {
		return decoded{}, errDeclined
	}
	x0, x1, sx := scaleSpan(rs.Min.X-c.Min.X, rs.Max.X-c.Min.X, c.Dx(), sw)
	y0, y1, sy := scaleSpan(rs.Min.Y-c.Min.Y, rs.Max.Y-c.Min.Y, c.Dy(), sh)
	return decoded{crop: image.Rect(x0, y0, x1, y1), sx: sx, sy: sy}, nil
}

// webpGap is how many times the target libwebp's scaler leaves for the resize after it.
// Its area averaging then the resize's filter, at 2 times the target (reduceGap, as a
// JPEG's DCT scaling), came to 42.6–44.6 dB against torchvision on real photos
// (bench/fidelity.sh); at 3 times, at least 49.7 dB (median 55).
const webpGap = 3

// webpScale returns the crop libwebp decodes for rs (its top left corner rounded down to
// even, as libwebp takes it) and the size to scale it to, at which rs still covers
// webpGap times tw×th, when that halves the crop or more; ok is false otherwise.
func webpScale(rs image.Rectangle, tw, th int) (c image.Rectangle, sw, sh int, ok bool) {
	c = image.Rect(rs.Min.X&^1, rs.Min.Y&^1, rs.Max.X, rs.Max.Y)
	x := (int64(webpGap*tw)*int64(c.Dx()) + int64(rs.Dx()) - 1) / int64(rs.Dx())
	y := (int64(webpGap*th)*int64(c.Dy()) + int64(rs.Dy()) - 1) / int64(rs.Dy())
	if 2*x > int64(c.Dx()) || 2*y > int64(c.Dy()) {
		return c, 0, 0, false
	}
	return c, int(max(x, 1)), int(max(y, 1)), true
}

// footprint: the RGB image, and libwebp's own memory: a lossless frame is decoded whole
// as 4-byte ARGB plus a few cache rows, a lossy one a few macroblock rows at a time,
// with an alpha plane the size of the image.
func (b *libWebP) footprint(j *job) estimate {
	w, h := int64(j.h.width), int64(j.h.height)
	e := estimate{bytes: 3*w*h + 1<<20, rgb: true, src: j.rs.Size(), sure: true}
	if _, _, lossless, ok := webpFrameSize(j.data); ok && !lossless {
		e.bytes += w*h + 3*w*64
	} else {
		e.bytes += 4*w*(h+32) + w*h
	}
	return e
}
