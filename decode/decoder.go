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
	"os"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
	"golang.org/x/image/webp"
)

// Decoder turns encoded images into packed RGB: it sniffs the format, checks the header
// against the pixel limit, decodes, and applies the orientation and resize-first policy
// of its Options. It keeps scratch images between calls (as large as the largest image
// decoded so far), so give each worker its own. A Decoder is not safe for concurrent use.
type Decoder struct {
	opts  Options    // effective options; Backend is resolved to "go" or "turbo"
	turbo *turboJPEG // the JPEG fast path, nil with the Go backend

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
	return d, nil
}

// Backend returns the JPEG backend in use: "turbo" (libjpeg-turbo) or "go". Other
// formats always decode in Go.
func (d *Decoder) Backend() string { return d.opts.Backend }

// String prints the effective options, with the backend actually in use.
func (d *Decoder) String() string { return d.opts.String() }

// Close releases the libjpeg-turbo instance, if any. The Decoder must not be used
// afterwards. Close is idempotent and safe on a nil Decoder.
func (d *Decoder) Close() error {
	if d == nil || d.turbo == nil {
		return nil
	}
	t := d.turbo
	d.turbo = nil
	return t.close()
}

// Config reads data's header like ReadConfig and applies this Decoder's pixel limit, so a
// caller can reserve memory for the decode before calling Decode: an image over MaxPixels
// fails here with ErrTooLarge, as Decode would.
func (d *Decoder) Config(data []byte) (Config, error) {
	c, err := ReadConfig(data)
	if err != nil {
		return Config{}, err
	}
	if err := checkSize(c.Width, c.Height, d.opts.MaxPixels); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Decode decodes data into dst and returns dst (a new Image if dst is nil), reusing
// dst's memory when it is large enough. The result is dst itself, never the Decoder's
// scratch, so it stays valid across later calls.
//
// The steps are: sniff the format from the bytes; read the header and fail with
// ErrTooLarge if width×height exceeds MaxPixels, before any pixel memory is allocated;
// decode (a JPEG on the turbo backend at the smallest DCT scale that stays at least twice
// the resize target, as Pillow's thumbnail does); convert to RGB, dropping alpha; resize
// per Options.Resize (only shrinking, with the antialiased filter of Resizer); and apply
// the EXIF orientation. Resizing happens before orienting, on the stored axes, so the
// transpose touches only the small image; the result equals orienting first up to ±1 per
// channel.
//
// The two backends decode JPEG slightly differently (libjpeg-turbo's IDCT and chroma
// upsampling; a mean difference near 1 per channel), so bit-identical output across
// machines needs the same backend on all of them: set Backend or CONVEYOR_DECODER=go.
//
// Errors wrap ErrUnsupported (unknown format, or a feature the format's decoder lacks),
// ErrTooLarge, or are a *FormatError (corrupt or truncated data).
func (d *Decoder) Decode(dst *Image, data []byte) (*Image, error) {
	h, err := readHeader(data)
	if err != nil {
		return nil, err
	}
	if err := checkSize(h.width, h.height, d.opts.MaxPixels); err != nil {
		return nil, err
	}
	o := h.orientation
	if d.opts.IgnoreOrientation {
		o = 1
	}
	// The target size, on the stored axes.
	tw, th := h.width, h.height
	if transposes(o) {
		tw, th = th, tw
	}
	tw, th = d.opts.Resize.OutputSize(tw, th)
	if transposes(o) {
		tw, th = th, tw
	}
	if dst == nil {
		dst = new(Image)
	}
	img := dst // decode straight into dst when nothing follows
	if tw != h.width || th != h.height || o != 1 {
		img = &d.full
	}
	if err := d.decodePixels(img, h, data, tw, th); err != nil {
		return nil, err
	}
	if img.Width != tw || img.Height != th {
		out := dst
		if o != 1 {
			out = &d.mid
		}
		if _, err := d.rs.Resize(out, img, image.Rect(0, 0, img.Width, img.Height), tw, th); err != nil {
			return nil, err
		}
		img = out
	}
	switch {
	case o != 1:
		orient(dst, img, o)
	case img != dst: // the turbo backend decoded at exactly the target size
		dst.Reset(img.Width, img.Height)
		copy(dst.Pix, img.Pix)
	}
	return dst, nil
}

// decodePixels decodes data into img, at its full size w×h or, for a JPEG with the
// turbo backend, at a DCT scale no smaller than tw×th.
func (d *Decoder) decodePixels(img *Image, h header, data []byte, tw, th int) error {
	if h.format == JPEG && d.turbo != nil {
		// CMYK, a libjpeg warning (which image/jpeg may accept) or an error: image/jpeg
		// decides, so both backends accept the same files.
		if err := d.turbo.decode(img, data, h.width, h.height, tw, th); err == nil {
			return nil
		}
	}
	return guard(h.format, func() error {
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
		toRGB(img, m, &d.lut)
		return nil
	})
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

// webpYCbCr returns the VP8 planes of a lossy WebP image, or nil for a lossless one.
func webpYCbCr(m image.Image) *image.YCbCr {
	var y *image.YCbCr
	switch m := m.(type) {
	case *image.YCbCr:
		y = m
	case *image.NYCbCrA:
		y = &m.YCbCr
	}
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
