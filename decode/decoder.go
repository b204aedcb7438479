package decode

import (
	"fmt"
	"image"
	"os"
)

// Decoder turns encoded images into packed RGB: it sniffs the format, checks the header
// against the pixel limit, decodes, and applies the orientation and resize-first policy
// of its Options. It keeps scratch images between calls (as large as the largest image
// decoded so far), so give each worker its own. A Decoder is not safe for concurrent use.
type Decoder struct {
	opts     Options   // effective options; Backend is resolved to "go" or "turbo"
	backends []backend // tried in order, see registry
	// turbo is the libjpeg-turbo backend when it is loaded (it is also in backends),
	// for tests of its choice of DCT scale.
	turbo *turboJPEG

	rs         Resizer
	full, mid  Image // the decoded image, and the resized one when orientation follows
	rgbScratch       // conversion scratch shared by the backends
	// job is the image in hand. The backends take it through an interface, so a local
	// job would escape to the heap on every decode.
	job job
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
	resolved, err := d.openBackends(backend)
	if err != nil {
		d.closeBackends()
		return nil, err
	}
	d.opts.Backend = resolved
	d.pil = opts.Exact
	return d, nil
}

// Backend returns the JPEG backend in use: "turbo" (libjpeg-turbo) or "go".
func (d *Decoder) Backend() string { return d.opts.Backend }

// WebPBackend returns the WebP decoder in use: "libwebp" or "go" (golang.org/x/image/webp).
// libwebp is used when it can be loaded and the JPEG backend is not "go"; both give the
// same pixels.
func (d *Decoder) WebPBackend() string {
	if d.has(libwebpName) {
		return "libwebp"
	}
	return BackendGo
}

// PNGBackend returns the PNG decoder in use: "libdeflate" (8-bit, non-interlaced PNGs
// inflate with libdeflate.so.0; the others with image/png) or "go" (image/png). libdeflate
// is used when it can be loaded and the JPEG backend is not "go"; both give the same
// pixels. GIF, BMP and TIFF always decode in Go.
func (d *Decoder) PNGBackend() string {
	if d.has(libdeflateName) {
		return "libdeflate"
	}
	return BackendGo
}

// String prints the effective options, with the backend actually in use.
func (d *Decoder) String() string { return d.opts.String() }

// Close releases the native decoders' state (libjpeg-turbo's and libdeflate's), if any.
// The Decoder must not be used afterwards. Close is idempotent and safe on a nil Decoder.
func (d *Decoder) Close() error {
	if d == nil {
		return nil
	}
	return d.closeBackends()
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
// JPEG on the turbo backend at the smallest DCT scale of 1/8, 1/4 and 1/2 that stays
// at least twice the resize target, 3 times at 1/4 and 1/8, the image's extent mapped
// exactly: on real photos at least 45 dB against a full decode and the same resize,
// with no sub-pixel shift (TestDCTScaleNoShift); torchvision never scales in the DCT);
// convert to RGB, dropping alpha; resize per Options.Resize (only shrinking, with the
// antialiased filter of Resizer); and apply the EXIF orientation. Resizing happens before orienting, on the stored axes, so the
// transpose touches only the small image; the result equals orienting first up to ±1 per
// channel. A JPEG that is resized (a YCbCr or greyscale one from libjpeg-turbo, a
// sequential one on the Go backend) is resampled as planes, each at its own resolution,
// and converted to RGB once, at the output size.
//
// With Options.Exact none of those shortcuts is taken: the image decodes in full at full
// scale, is oriented, then resized with Resizer.Exact, and the pixels are Pillow's (see
// Options.Exact); DecodeRegion likewise.
//
// The two backends decode JPEG slightly differently (the colour conversion's rounding,
// and image/jpeg's IDCT for progressive files; at most 1 level on whole sequential files,
// TestGoJPEGMatchesTurbo), so bit-identical output across
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
//     covers twice w×h (3 times at 1/4 and 1/8), as Decode does for its resize target; r maps to the scaled image
//     at exactly that scale, its edges falling between scaled pixels, and the resampler
//     takes the fractions.
//   - A JPEG is resampled plane by plane (luma from r, chroma from the same region of
//     its subsampled planes) and converted to RGB at w×h, unless r's colours lie far
//     outside the RGB cube, when r is converted first; on the Go backend the pixels differ
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
	if dst == nil {
		dst = new(Image)
	}
	if d.opts.Exact {
		if c := h.config(); r != image.Rect(0, 0, c.Width, c.Height) || w != c.Width || ht != c.Height {
			return d.decodeExact(dst, h, data, r, w, ht)
		}
	}
	d.job = d.newJob(h, data, r, w, ht, dst)
	j := &d.job
	out, err := d.decodePixels(j)
	img := j.img
	j.data, j.img = nil, nil // keep neither the caller's bytes nor its image
	if err != nil {
		return nil, err
	}
	o := h.orientation
	if out.planes != nil {
		to := dst
		if o != 1 {
			to = &d.mid
		}
		img = d.rs.resizeYCbCr(to, out.planes, out.crop, out.sx, out.sy, j.tw, j.th)
	} else if wx, wy := wholeSpans(out.crop); out.crop != image.Rect(0, 0, img.Width, img.Height) ||
		img.Width != j.tw || img.Height != j.th || out.sx != wx || out.sy != wy {
		to := dst
		if o != 1 {
			to = &d.mid
		}
		img = d.rs.resize(to, img, out.crop, out.sx, out.sy, j.tw, j.th)
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

// newJob maps the rectangle r of the oriented image, resampled to w×h, to the stored
// axes, and picks where RGB pixels go: straight into dst when nothing follows (so with a
// nil dst, j.img is nil exactly when the backend writes the result itself).
func (d *Decoder) newJob(h header, data []byte, r image.Rectangle, w, ht int, dst *Image) job {
	o := h.orientation
	j := job{h: h, data: data, rs: storedRect(r, o, h.width, h.height), tw: w, th: ht, img: dst, conv: &d.rgbScratch}
	if transposes(o) {
		j.tw, j.th = ht, w
	}
	j.resized = j.rs != image.Rect(0, 0, h.width, h.height) || j.tw != h.width || j.th != h.height
	if j.resized || o != 1 {
		j.img = &d.full
	}
	return j
}

// decodeExact is decode with Options.Exact when it resamples: the whole image decodes at
// full scale and is oriented into d.mid, as PIL opens it, then r is resampled with
// Pillow's arithmetic.
func (d *Decoder) decodeExact(dst *Image, h header, data []byte, r image.Rectangle, w, ht int) (*Image, error) {
	c := h.config()
	full, err := d.decode(&d.mid, h, data, image.Rect(0, 0, c.Width, c.Height), c.Width, c.Height)
	if err != nil {
		return nil, err
	}
	return d.rs.resizeExact(dst, full, r, w, ht), nil
}
