package decode

import "github.com/conveyor-ml/conveyor/internal/libwebp"

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

// decode decodes the whole image into j.img. Anything libwebp declines (animation,
// damage) goes to x/image/webp, which decides.
func (b *libWebP) decode(j *job) (decoded, error) {
	j.img.Reset(j.h.width, j.h.height)
	if b.lib.DecodeRGB(j.img.Pix, j.img.Stride, j.h.width, j.h.height, j.data) != nil {
		return decoded{}, errDeclined
	}
	sx, sy := wholeSpans(j.rs)
	return decoded{crop: j.rs, sx: sx, sy: sy}, nil
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
