package decode

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// DefaultMaxPixels is the default Options.MaxPixels: PIL's Image.MAX_IMAGE_PIXELS, the size
// beyond which PIL warns of a decompression bomb (about 0.5 GB of RGB pixels).
const DefaultMaxPixels = 178956970

// Backends for Options.Backend.
const (
	BackendAuto  = "auto"  // libjpeg-turbo for JPEG and libwebp for WebP when they can be loaded, else Go
	BackendGo    = "go"    // pure Go: the package's sequential JPEG decoder, the standard library and golang.org/x/image
	BackendTurbo = "turbo" // libjpeg-turbo for JPEG (NewDecoder fails without it); libwebp when it loads
)

// EnvBackend names the environment variable that, set to "go", makes every new Decoder
// use the pure-Go backend whatever its Options say. It is read by NewDecoder.
const EnvBackend = "CONVEYOR_DECODER"

// ResizeMode says how a Decoder sizes images right after decoding.
type ResizeMode int

const (
	// ResizeNone keeps the decoded size.
	ResizeNone ResizeMode = iota
	// ResizeShorter scales the image so that its shorter side is ResizePolicy.Size, like
	// torchvision.transforms.Resize(size) with an int size.
	ResizeShorter
	// ResizeFit scales the image to the largest size that fits inside
	// ResizePolicy.Width×Height, keeping its aspect ratio.
	ResizeFit
)

func (m ResizeMode) String() string {
	switch m {
	case ResizeNone:
		return "none"
	case ResizeShorter:
		return "shorter"
	case ResizeFit:
		return "fit"
	}
	return fmt.Sprintf("ResizeMode(%d)", int(m))
}

// ResizePolicy is the resize-first step of decoding. It only ever shrinks: an image
// already at or below the target size is left as decoded.
type ResizePolicy struct {
	Mode          ResizeMode // default ResizeNone
	Size          int        // target shorter side for ResizeShorter; default 0 (unset)
	Width, Height int        // bounding box for ResizeFit; default 0 (unset)
}

// String returns the policy in the form "none", "shorter(256)" or "fit(640x480)".
func (p ResizePolicy) String() string {
	switch p.Mode {
	case ResizeShorter:
		return fmt.Sprintf("shorter(%d)", p.Size)
	case ResizeFit:
		return fmt.Sprintf("fit(%dx%d)", p.Width, p.Height)
	}
	return p.Mode.String()
}

// Validate reports whether p is consistent: the sizes its mode needs are positive, and
// the ones it ignores are zero (so a forgotten Mode does not silently skip resizing). No
// size may exceed 2^31-1.
func (p ResizePolicy) Validate() error {
	if p.Size > maxSide || p.Width > maxSide || p.Height > maxSide {
		return fmt.Errorf("decode: resize policy %v has a size above %d", p, maxSide)
	}
	switch p.Mode {
	case ResizeNone:
		if p.Size != 0 || p.Width != 0 || p.Height != 0 {
			return fmt.Errorf("decode: resize policy %v has sizes set (Size %d, Width %d, Height %d)", p, p.Size, p.Width, p.Height)
		}
	case ResizeShorter:
		if p.Size <= 0 || p.Width != 0 || p.Height != 0 {
			return fmt.Errorf("decode: resize policy %v needs Size > 0 and no Width or Height", p)
		}
	case ResizeFit:
		if p.Width <= 0 || p.Height <= 0 || p.Size != 0 {
			return fmt.Errorf("decode: resize policy %v needs Width, Height > 0 and no Size", p)
		}
	default:
		return fmt.Errorf("decode: unknown resize mode %v", p.Mode)
	}
	return nil
}

// OutputSize returns the size a w×h image (after orientation) has after p is applied.
//
// ResizeShorter rounds the longer side like torchvision's _compute_resized_output_size:
// int(size * long / short), truncated. ResizeFit makes the limiting side exactly the box's
// and rounds the other to the nearest integer (at least 1).
func (p ResizePolicy) OutputSize(w, h int) (int, int) {
	switch p.Mode {
	case ResizeShorter:
		short, long := min(w, h), max(w, h)
		if short <= p.Size {
			return w, h
		}
		// Python computes size*long exactly, then divides in float64 with one rounding;
		// the product is far below 2^53, so float64(size*long)/float64(short) is the same.
		nl := int(float64(int64(p.Size)*int64(long)) / float64(short))
		if w <= h {
			return p.Size, nl
		}
		return nl, p.Size
	case ResizeFit:
		if w <= p.Width && h <= p.Height {
			return w, h
		}
		// Compare w/h with Width/Height without rounding: w*Height vs Width*h.
		if int64(w)*int64(p.Height) >= int64(p.Width)*int64(h) {
			return p.Width, max(1, roundDiv(int64(h)*int64(p.Width), int64(w)))
		}
		return max(1, roundDiv(int64(w)*int64(p.Height), int64(h))), p.Height
	}
	return w, h
}

// roundDiv returns a/b rounded to the nearest integer, halves up; a >= 0, b > 0.
func roundDiv(a, b int64) int { return int((2*a + b) / (2 * b)) }

// maxSide bounds ResizePolicy's sizes: no format stores a larger side, and sizes below
// it keep OutputSize's products within an int64.
const maxSide = math.MaxInt32

// maxPixelsBound bounds Options.MaxPixels: 2^40 pixels (3 TiB of RGB). Below it, no size
// computed from a header (rows, planes, a decode's footprint) can wrap an int64.
const maxPixelsBound = 1 << 40

// Options configure a Decoder. The zero value is valid and means the defaults.
type Options struct {
	// MaxPixels bounds width×height as read from an image's header, before any pixel
	// memory is allocated; larger images fail with ErrTooLarge. At most 2^40;
	// default DefaultMaxPixels.
	MaxPixels int64
	// IgnoreOrientation leaves JPEG pixels as stored instead of applying the EXIF
	// orientation tag. Default false (orientation is applied, like PIL's exif_transpose).
	IgnoreOrientation bool
	// Resize is applied right after decoding and orientation. Default ResizeNone.
	Resize ResizePolicy
	// Exact makes the pixels Pillow 9.4's, as torchvision 0.14 sees them through
	// PIL.Image.open(f).convert('RGB'): every image decodes in full at full scale (no DCT
	// scaling, no crop-aware or planar shortcut), is oriented, then resized (Resize, and
	// DecodeRegion's resampling) with Resizer.Exact; 16-bit greyscale is clamped to 255
	// as PIL's mode I conversion does. Bit-identical with the native decoders
	// (libjpeg-turbo, libpng-equivalent PNG, libwebp); the pure-Go JPEG decoder differs
	// from libjpeg-turbo (docs/DESIGN.md, "Fidelity", has the measured bound). Slower:
	// a camera photo decodes in full. Default false.
	Exact bool
	// Backend chooses the native decoders: BackendAuto, BackendGo or BackendTurbo. Setting
	// the environment variable CONVEYOR_DECODER=go forces BackendGo. Default BackendAuto.
	Backend string
}

// EnsureDefaults fills in the defaults of unset fields and returns o; on a nil o it
// returns a new Options with all defaults. NewDecoder calls it on its copy of the options,
// then Validate.
func (o *Options) EnsureDefaults() *Options {
	if o == nil {
		o = &Options{}
	}
	if o.MaxPixels == 0 {
		o.MaxPixels = DefaultMaxPixels
	}
	if o.Backend == "" {
		o.Backend = BackendAuto
	}
	return o
}

// Validate reports every problem with o, joined (errors.Join), each naming its field;
// nil means o is usable. Call EnsureDefaults first, so that unset fields are not
// reported.
func (o *Options) Validate() error {
	var errs []error
	if o.MaxPixels <= 0 || o.MaxPixels > maxPixelsBound {
		errs = append(errs, fmt.Errorf("decode: MaxPixels %d not in [1, %d]", o.MaxPixels, int64(maxPixelsBound)))
	}
	switch o.Backend {
	case BackendAuto, BackendGo, BackendTurbo:
	default:
		errs = append(errs, fmt.Errorf("decode: unknown backend %q (want %q, %q or %q)", o.Backend, BackendAuto, BackendGo, BackendTurbo))
	}
	errs = append(errs, o.Resize.Validate())
	return errors.Join(errs...)
}

// String prints every option, for a training log:
// "max_pixels=178956970 orientation=exif resize=shorter(256) backend=auto".
func (o *Options) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "max_pixels=%d", o.MaxPixels)
	if o.IgnoreOrientation {
		b.WriteString(" orientation=ignore")
	} else {
		b.WriteString(" orientation=exif")
	}
	fmt.Fprintf(&b, " resize=%v backend=%s", o.Resize, o.Backend)
	if o.Exact {
		b.WriteString(" exact=true")
	}
	return b.String()
}
