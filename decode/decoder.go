package decode

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"math"
	"os"

	"github.com/conveyor-ml/conveyor/internal/libwebp"
	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
	"golang.org/x/image/webp"
)

// Decoder turns encoded images into packed RGB: it sniffs the format, checks the header
// against the pixel limit, decodes, and applies the orientation and resize-first policy
// of its Options. It keeps scratch images between calls (as large as the largest image
// decoded so far), so give each worker its own. A Decoder is not safe for concurrent use.
type Decoder struct {
	opts  Options      // effective options; Backend is resolved to "go" or "turbo"
	turbo *turboJPEG   // the JPEG fast path, nil with the Go backend
	webp  *libwebp.Lib // the WebP fast path, nil with the Go backend or without libwebp
	png   *pngFast     // the PNG fast path, nil with the Go backend or without libdeflate
	jpeg  jpegFast     // the pure-Go JPEG fast path; image/jpeg takes what it declines

	rs        Resizer
	full, mid Image // the decoded image, and the resized one when orientation follows
	canvas    Image // a GIF frame smaller than its logical screen
	lut       [256][3]uint8
	rd        bytes.Reader
}

// NewDecoder returns a Decoder with the given options (nil means the defaults). The
// options are copied, defaulted and validated. With BackendAuto it loads libjpeg-turbo if
// it can and falls back to pure Go silently; Backend reports the outcome.
func NewDecoder(o *Options) (*Decoder, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	backend := opts.Backend
	switch env := os.Getenv(EnvBackend); env {
	case "", BackendAuto:
	case BackendGo, BackendTurbo:
		backend = env
	default:
		return nil, fmt.Errorf("decode: %s=%q: want %q, %q or %q", EnvBackend, env, BackendGo, BackendTurbo, BackendAuto)
	}
	d := &Decoder{opts: opts}
	if backend != BackendGo {
		t, err := newTurboJPEG()
		switch {
		case err == nil:
			d.turbo = t
			backend = BackendTurbo
		case backend == BackendTurbo:
			return nil, fmt.Errorf("decode: backend %q unavailable: %w", BackendTurbo, err)
		default:
			backend = BackendGo
		}
	}
	d.opts.Backend = backend
	if backend != BackendGo {
		d.webp, _ = libwebp.Load() // optional: x/image/webp otherwise
		d.png = newPNGFast()       // optional: image/png otherwise
	}
	return d, nil
}

// Backend returns the JPEG backend in use: "turbo" (libjpeg-turbo) or "go".
func (d *Decoder) Backend() string { return d.opts.Backend }

// WebPBackend returns the WebP decoder in use: "libwebp" or "go" (golang.org/x/image/webp).
// libwebp is used when it can be loaded and the JPEG backend is not "go"; both give the
// same pixels.
func (d *Decoder) WebPBackend() string {
	if d.webp != nil {
		return "libwebp"
	}
	return BackendGo
}

// PNGBackend returns the PNG decoder in use: "libdeflate" (8-bit, non-interlaced PNGs
// inflate with libdeflate.so.0; the others with image/png) or "go" (image/png). libdeflate
// is used when it can be loaded and the JPEG backend is not "go"; both give the same
// pixels. GIF, BMP and TIFF always decode in Go.
func (d *Decoder) PNGBackend() string {
	if d.png != nil {
		return "libdeflate"
	}
	return BackendGo
}

// String prints the effective options, with the backend actually in use.
func (d *Decoder) String() string { return d.opts.String() }

// Close releases the libjpeg-turbo and libdeflate state, if any. The Decoder must not be used
// afterwards. Close is idempotent and safe on a nil Decoder.
func (d *Decoder) Close() error {
	if d == nil {
		return nil
	}
	if d.png != nil {
		d.png.close()
		d.png = nil
	}
	if d.turbo == nil {
		return nil
	}
	t := d.turbo
	d.turbo = nil
	return t.close()
}

// Config reads data's header like ReadConfig and applies this Decoder's limits, so a
// caller can reserve memory for the decode before calling Decode: an image over MaxPixels
// fails here with ErrTooLarge, and one whose file is too small to hold the pixels its
// header claims with a *FormatError, as Decode would. With IgnoreOrientation the size is
// the stored one and Orientation is 1: Config describes what Decode produces.
func (d *Decoder) Config(data []byte) (Config, error) {
	h, err := d.header(data)
	if err != nil {
		return Config{}, err
	}
	return h.config(), nil
}

// header reads data's header and applies the Decoder's limits; with IgnoreOrientation
// the orientation is 1.
func (d *Decoder) header(data []byte) (header, error) {
	h, err := readHeader(data)
	if err != nil {
		return header{}, err
	}
	if err := h.check(data, d.opts.MaxPixels); err != nil {
		return header{}, err
	}
	if d.opts.IgnoreOrientation {
		h.orientation = 1
	}
	return h, nil
}

// Decode decodes data into dst and returns dst (a new Image if dst is nil), reusing
// dst's memory when it is large enough. The result is dst itself, never the Decoder's
// scratch, so it stays valid across later calls.
//
// The steps are: sniff the format from the bytes; read the header and fail with
// ErrTooLarge if width×height exceeds MaxPixels, or with a *FormatError if the file is
// too small to hold that many pixels, before any pixel memory is allocated; decode (a
// JPEG on the turbo backend at the smallest DCT scale that stays at least twice the
// resize target, as Pillow's thumbnail does); convert to RGB, dropping alpha; resize per
// Options.Resize (only shrinking, with the antialiased filter of Resizer); and apply the
// EXIF orientation. Resizing happens before orienting, on the stored axes, so the
// transpose touches only the small image; the result equals orienting first up to ±1 per
// channel. A JPEG that is resized (a YCbCr or greyscale one from libjpeg-turbo, a
// sequential one on the Go backend) is resampled as planes, each at its own resolution,
// and converted to RGB once, at the output size.
//
// The two backends decode JPEG slightly differently (libjpeg-turbo's IDCT and chroma
// upsampling; a mean difference near 1 per channel), so bit-identical output across
// machines needs the same backend on all of them: set Backend or CONVEYOR_DECODER=go.
//
// Errors wrap ErrUnsupported (unknown format, or a feature the format's decoder lacks),
// ErrTooLarge, or are a *FormatError (corrupt or truncated data).
func (d *Decoder) Decode(dst *Image, data []byte) (*Image, error) {
	h, err := d.header(data)
	if err != nil {
		return nil, err
	}
	c := h.config()
	w, ht := d.opts.Resize.OutputSize(c.Width, c.Height)
	return d.decode(dst, h, data, image.Rect(0, 0, c.Width, c.Height), w, ht)
}

// DecodeRegion decodes data and returns the rectangle r of the image resampled to w×h,
// in dst (a new Image if nil). It is the crop-aware decode behind torchvision's
// RandomResizedCrop: the result equals Decode without a resize policy followed by
// Resizer.Resize(r, w, h), but it does less work.
//
//   - r is in the coordinates of the oriented image, whose size Config reports; it must
//     lie inside it and not be empty. The Decoder's resize policy is not used.
//   - Only r's pixels are resampled, and converted to RGB. The rest of the image is
//     entropy-decoded (so a file is accepted or rejected whatever the crop), and with the
//     Go backend's sequential JPEG decoder only the 8×8 blocks of the MCUs that meet r
//     are inverse-transformed; libjpeg-turbo 2.1 and the other decoders produce every
//     pixel.
//   - A JPEG on the turbo backend decodes at the smallest DCT scale at which r still
//     covers twice w×h, as Decode does for its resize target; r's edges then fall on the
//     nearest pixel of the scaled image, within half a scaled pixel.
//   - A JPEG is resampled plane by plane (luma from r, chroma from the same region of
//     its subsampled planes) and converted to RGB at w×h, so chroma is interpolated
//     where converting first would replicate it; on the Go backend the pixels differ
//     from Decode's followed by the crop only along sharp chroma edges (by ±2 at most
//     for 4:4:4 and greyscale). With any other format the pixels equal Decode's followed
//     by the crop, up to ±1 from resampling before orienting.
//
// Errors are Decode's, plus a plain error for a bad r or size.
func (d *Decoder) DecodeRegion(dst *Image, data []byte, r image.Rectangle, w, h int) (*Image, error) {
	hd, err := d.header(data)
	if err != nil {
		return nil, err
	}
	c := hd.config()
	if r.Empty() || !r.In(image.Rect(0, 0, c.Width, c.Height)) {
		return nil, fmt.Errorf("decode: region %v is empty or outside the %dx%d image", r, c.Width, c.Height)
	}
	if w <= 0 || h <= 0 {
		return nil, fmt.Errorf("decode: bad region output size %dx%d", w, h)
	}
	return d.decode(dst, hd, data, r, w, h)
}

// decode is Decode and DecodeRegion: it decodes the rectangle r of the oriented image,
// resampled to w×h, into dst. Resampling happens on the stored axes, then orientation.
func (d *Decoder) decode(dst *Image, h header, data []byte, r image.Rectangle, w, ht int) (*Image, error) {
	o := h.orientation
	rs := storedRect(r, o, h.width, h.height)
	tw, th := w, ht // the target size, on the stored axes
	if transposes(o) {
		tw, th = ht, w
	}
	if dst == nil {
		dst = new(Image)
	}
	resized := rs != image.Rect(0, 0, h.width, h.height) || tw != h.width || th != h.height
	img := dst // decode straight into dst when nothing follows
	if resized || o != 1 {
		img = &d.full
	}
	crop, sx, sy, planes, err := d.decodePixels(img, h, data, rs, tw, th, resized)
	if err != nil {
		return nil, err
	}
	if planes != nil {
		out := dst
		if o != 1 {
			out = &d.mid
		}
		img = d.rs.resizeYCbCr(out, planes, crop, sx, sy, tw, th)
	} else if wx, wy := wholeSpans(crop); crop != image.Rect(0, 0, img.Width, img.Height) ||
		img.Width != tw || img.Height != th || sx != wx || sy != wy {
		out := dst
		if o != 1 {
			out = &d.mid
		}
		img = d.rs.resize(out, img, crop, sx, sy, tw, th)
	}
	switch {
	case o != 1:
		orient(dst, img, o)
	case img != dst: // decoded at exactly the target size
		dst.Reset(img.Width, img.Height)
		copy(dst.Pix, img.Pix)
	}
	return dst, nil
}

// decodePixels decodes the part rs (stored axes) of an image into img and returns where
// rs lies in img: the rectangle to resample from, and the spans of it rs covers.
//
// A JPEG with the turbo backend is decoded whole at the DCT scale at which rs still covers
// reduceGap times tw×th; rs's edges then fall between pixels of the scaled image, and the
// spans carry the fractions. The Go path's sequential JPEG decoder inverse-transforms only
// the blocks that meet rs; other decoders decode the whole image. When a resize follows
// (resized), a JPEG's planes come back in planes, for resizeYCbCr, and img is untouched;
// otherwise only rs (rounded out to the chroma grid) is converted to RGB in img.
func (d *Decoder) decodePixels(img *Image, h header, data []byte, rs image.Rectangle, tw, th int, resized bool) (crop image.Rectangle, sx, sy span, planes image.Image, err error) {
	if h.format == JPEG && d.turbo != nil {
		// Planes when a resize follows; anything DecodeYUV declines is decoded to RGB.
		// CMYK, a libjpeg warning (which image/jpeg may accept) or an error: image/jpeg
		// decides, so both backends accept the same files.
		if resized {
			if m, err := d.turbo.decodePlanes(data, h.width, h.height, rs.Dx(), rs.Dy(), tw, th); err == nil {
				crop, sx, sy = scaleRect(rs, h, m.Bounds())
				return crop, sx, sy, m, nil
			}
		}
		if d.turbo.decode(img, data, h.width, h.height, rs.Dx(), rs.Dy(), tw, th) == nil {
			crop, sx, sy = scaleRect(rs, h, image.Rect(0, 0, img.Width, img.Height))
			return crop, sx, sy, nil, nil
		}
	}
	crop = rs
	sx, sy = wholeSpans(rs)
	if h.format == PNG && d.png != nil && d.png.decode(img, data, h.width, h.height) {
		return crop, sx, sy, nil, nil
	}
	if h.format == WebP && d.webp != nil {
		// Anything libwebp declines (animation, damage) goes to x/image/webp, which decides.
		img.Reset(h.width, h.height)
		if d.webp.DecodeRGB(img.Pix, img.Stride, h.width, h.height, data) == nil {
			return crop, sx, sy, nil, nil
		}
	}
	if h.format == JPEG {
		var m image.Image
		if guard(JPEG, func() (err error) {
			m, err = d.jpeg.decode(data, h.width, h.height, rs)
			return err
		}) == nil {
			if resized && planar(m) {
				return rs, sx, sy, m, nil
			}
			return d.toRGBRegion(img, m, rs), sx, sy, nil, nil
		}
	}
	err = guard(h.format, func() error {
		d.rd.Reset(data)
		m, err := decodeGo(h.format, &d.rd)
		d.rd.Reset(nil)
		if err != nil {
			return err
		}
		b := m.Bounds()
		if h.format == GIF {
			if p, ok := m.(*image.Paletted); ok {
				restoreTransparent(p, data)
			}
			if b != image.Rect(0, 0, h.width, h.height) {
				d.gifCanvas(img, m, h.width, h.height)
				return nil
			}
		}
		if b.Dx() != h.width || b.Dy() != h.height {
			return fmt.Errorf("decoded %dx%d, header says %dx%d", b.Dx(), b.Dy(), h.width, h.height)
		}
		if h.format == WebP {
			if y := webpYCbCr(m); y != nil {
				webpToRGB(img, y)
				return nil
			}
		}
		crop = d.toRGBRegion(img, m, rs)
		return nil
	})
	return crop, sx, sy, nil, err
}

// scaleRect maps the rectangle rs of an h.width×h.height image to the same image decoded
// at a DCT scale into b: the whole pixels of b it touches, and the spans within them.
func scaleRect(rs image.Rectangle, h header, b image.Rectangle) (crop image.Rectangle, sx, sy span) {
	x0, x1, sx := scaleSpan(rs.Min.X, rs.Max.X, h.width, b.Dx())
	y0, y1, sy := scaleSpan(rs.Min.Y, rs.Max.Y, h.height, b.Dy())
	return image.Rect(x0, y0, x1, y1), sx, sy
}

// toRGBRegion converts the part rs (relative to m's origin) of a decoded image to RGB in
// img, rounded out to the chroma grid, and returns where rs lies in img.
func (d *Decoder) toRGBRegion(img *Image, m image.Image, rs image.Rectangle) image.Rectangle {
	b := m.Bounds()
	sub, ok := m.(interface {
		SubImage(image.Rectangle) image.Image
	})
	if !ok || rs == b.Sub(b.Min) {
		toRGB(img, m, &d.lut)
		return rs
	}
	ra := alignRect(m, rs.Add(b.Min))
	toRGB(img, sub.SubImage(ra), &d.lut)
	return rs.Add(b.Min).Sub(ra.Min)
}

// alignRect rounds r out to the chroma grid of a subsampled YCbCr image, so that its
// sub-image keeps the fast conversion path; other images need no rounding.
func alignRect(m image.Image, r image.Rectangle) image.Rectangle {
	y := asYCbCr(m)
	if y == nil {
		return r
	}
	hs, vs, ok := chromaShifts(y.SubsampleRatio)
	if !ok {
		return r
	}
	o := y.Rect.Min
	r.Min.X = o.X + (r.Min.X-o.X)>>hs<<hs
	r.Min.Y = o.Y + (r.Min.Y-o.Y)>>vs<<vs
	return r
}

// scaleSpan maps the samples [a, b) of n to an image scaled to sn samples: it returns the
// whole samples [lo, hi) that the scaled interval touches, and the interval within them.
func scaleSpan(a, b, n, sn int) (lo, hi int, sp span) {
	if sn == n {
		return a, b, span{0, float64(b - a)}
	}
	// Exact products first, so that the image's own edges map to 0 and sn exactly.
	fa, fb := float64(int64(a)*int64(sn))/float64(n), float64(int64(b)*int64(sn))/float64(n)
	lo = int(math.Floor(fa))
	hi = min(int(math.Ceil(fb)), sn)
	return lo, hi, span{fa - float64(lo), min(fb, float64(sn)) - fa}
}

// decodeGo decodes with the standard library or golang.org/x/image.
func decodeGo(format string, r io.Reader) (image.Image, error) {
	switch format {
	case JPEG:
		return jpeg.Decode(r)
	case PNG:
		return png.Decode(r)
	case GIF:
		return gif.Decode(r) // the first frame
	case BMP:
		return bmp.Decode(r)
	case TIFF:
		return tiff.Decode(r)
	case WebP:
		return webp.Decode(r)
	}
	return nil, errors.New("no decoder")
}

// asYCbCr returns the YCbCr planes of m, or nil if it has none.
func asYCbCr(m image.Image) *image.YCbCr {
	switch m := m.(type) {
	case *image.YCbCr:
		return m
	case *image.NYCbCrA:
		return &m.YCbCr
	}
	return nil
}

// webpYCbCr returns the VP8 planes of a lossy WebP image, or nil for a lossless one.
func webpYCbCr(m image.Image) *image.YCbCr {
	y := asYCbCr(m)
	if y == nil || y.SubsampleRatio != image.YCbCrSubsampleRatio420 || y.Rect.Min != (image.Point{}) {
		return nil
	}
	return y
}

// restoreTransparent puts back the colour of the first frame's transparent palette entry,
// which image/gif replaces with transparent black (see gifFirstPalette).
func restoreTransparent(p *image.Paletted, data []byte) {
	table, ti := gifFirstPalette(data)
	if ti < 0 || ti >= len(p.Palette) || 3*ti+3 > len(table) {
		return
	}
	p.Palette[ti] = color.NRGBA{table[3*ti], table[3*ti+1], table[3*ti+2], 0}
}

// gifCanvas places a GIF frame smaller than the logical screen on a w×h black canvas.
func (d *Decoder) gifCanvas(img *Image, m image.Image, w, h int) {
	toRGB(&d.canvas, m, &d.lut)
	img.Reset(w, h)
	clear(img.Pix)
	b := m.Bounds().Intersect(image.Rect(0, 0, w, h))
	for y := b.Min.Y; y < b.Max.Y; y++ {
		src := d.canvas.Row(y - m.Bounds().Min.Y)[3*(b.Min.X-m.Bounds().Min.X):]
		copy(img.Row(y)[3*b.Min.X:3*b.Max.X], src)
	}
}
