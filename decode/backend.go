package decode

import (
	"errors"
	"fmt"
	"image"
)

// backend is one decoder of one or more formats. A Decoder holds the backends of
// registry that could be opened, in its order, and decodes an image with the first one
// that accepts its header and does not decline it; the last, the standard library's,
// takes every format and decides what the others leave.
type backend interface {
	// name identifies the backend in Decoder.WebPBackend and PNGBackend.
	name() string
	// accepts reports whether the backend tries images with header h. It runs for
	// every image, so it looks at the format and header fields only.
	accepts(h *header) bool
	// decode decodes the part j.rs of the image, at a scale of the backend's choosing
	// (libjpeg-turbo scales in the DCT), as planes or as RGB in j.img, or returns
	// errDeclined to leave the image to the next backend: a native decoder's failures,
	// and what a fast path does not handle, are declined, so that the final backend
	// accepts and rejects the same files on every machine.
	decode(j *job) (decoded, error)
	// footprint estimates what decoding j costs the backend (see estimate).
	footprint(j *job) estimate
}

// errDeclined is what a backend returns for an image it leaves to the next one.
var errDeclined = errors.New("decode: backend declined the image")

// job is one image for a backend: its header and bytes, the part of it wanted, and the
// size that part will be resampled to.
type job struct {
	h       header
	data    []byte
	rs      image.Rectangle // the part wanted, on the stored axes
	tw, th  int             // the size rs is resampled to, on the stored axes
	resized bool            // a resize follows, so planes are welcome
	img     *Image          // where RGB pixels go
	conv    *rgbScratch     // conversion scratch the backends share
	frame   jpegLayout      // a JPEG's frame layout, for footprint only
}

// decoded is what a backend produced: where j.rs lies in its pixels, and the pixels
// when they are planes.
type decoded struct {
	crop   image.Rectangle // the rectangle to resample from
	sx, sy span            // the spans of crop that j.rs covers
	planes image.Image     // YCbCr or Gray planes for resizeYCbCr; nil: RGB in j.img
}

// estimate is a backend's upper bound for one job (see Decoder.Footprint).
type estimate struct {
	// bytes is what the backend allocates, and makes the decoders it calls allocate,
	// native ones included: planes, scratch, and the RGB pixels it writes to j.img.
	bytes int64
	// planes and rgb say which outputs the backend may hand on, and src the size of
	// the rectangle it hands on for resampling (crop); the Decoder adds what resampling
	// and orienting that costs.
	planes, rgb bool
	src         image.Point
	// sure means the backend decodes every file whose data agrees with its header;
	// otherwise it may decline (after allocating bytes) and the next backend that
	// accepts the header is counted too.
	sure bool
}

// registration is one entry of registry.
type registration struct {
	open func() (backend, error)
	// native backends call a shared library; they are used only when
	// Options.Backend is not "go" and the primary one loads.
	native bool
	// primary is the native JPEG decoder, which Options.Backend names: without it
	// BackendTurbo fails and BackendAuto decodes every format in Go, so that one
	// setting decides every format's decoder. It comes first, so that no native
	// backend is opened before that is known.
	primary bool
}

// registry lists the backends in the order a Decoder tries them: the native ones first,
// then the Go ones. A backend is one file and one entry here.
var registry = [...]registration{
	{open: openTurbo, native: true, primary: true}, // libjpeg-turbo: JPEG, DCT-scaled (turbo.go)
	{open: openPNGFast, native: true},              // libdeflate: 8-bit PNG (pngfast.go)
	{open: openLibWebP, native: true},              // libwebp: WebP (libwebp.go)
	{open: openJPEGFast},                           // pure-Go sequential JPEG (jpegfast.go)
	{open: openStdlib},                             // standard library and x/image: every format (stdlib.go)
}

// openBackends opens the backends for the requested Options.Backend and returns the
// one in use, "turbo" or "go".
func (d *Decoder) openBackends(want string) (string, error) {
	native := want != BackendGo
	for _, r := range registry {
		if r.native && !native {
			continue
		}
		b, err := r.open()
		switch {
		case err == nil:
			d.backends = append(d.backends, b)
			if t, ok := b.(*turboJPEG); ok {
				d.turbo = t
			}
		case !r.primary:
			// An optional library that is not installed: the Go backends decode its
			// format, with the same pixels.
		case want == BackendTurbo:
			return "", fmt.Errorf("decode: backend %q unavailable: %w", BackendTurbo, err)
		default:
			native = false
		}
	}
	if native {
		return BackendTurbo, nil
	}
	return BackendGo, nil
}

// decodePixels decodes j with the first backend that accepts and does not decline it.
// Only the last backend's error is returned: the others decline instead of failing.
func (d *Decoder) decodePixels(j *job) (decoded, error) {
	for _, b := range d.backends {
		if !b.accepts(&j.h) {
			continue
		}
		if out, err := b.decode(j); err != errDeclined {
			return out, err
		}
	}
	return decoded{}, fmt.Errorf("%w: no decoder for %s", ErrUnsupported, j.h.format)
}

// has reports whether the backend called name is in use.
func (d *Decoder) has(name string) bool {
	for _, b := range d.backends {
		if b.name() == name {
			return true
		}
	}
	return false
}

// closer is implemented by backends that hold native state, which Decoder.Close frees.
type closer interface{ close() error }

// closeBackends closes the backends that hold native state and drops them, so that a
// Decoder used after Close (which it must not be) decodes in Go, as it always did. It
// returns the first error.
func (d *Decoder) closeBackends() error {
	var first error
	kept := d.backends[:0]
	for _, b := range d.backends {
		c, ok := b.(closer)
		if !ok {
			kept = append(kept, b)
			continue
		}
		if err := c.close(); err != nil && first == nil {
			first = err
		}
	}
	d.backends, d.turbo = kept, nil
	return first
}
