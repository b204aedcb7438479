package decode

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
	"golang.org/x/image/webp"
)

// Format names returned by Sniff and reported in Config and FormatError.
const (
	JPEG = "jpeg"
	PNG  = "png"
	GIF  = "gif"
	BMP  = "bmp"
	TIFF = "tiff"
	WebP = "webp"
)

// Sniff returns the format of data from its leading bytes ("jpeg", "png", "gif", "bmp",
// "tiff" or "webp"), or "" if they match none. It never looks at file names. It is safe
// for concurrent use.
func Sniff(data []byte) string {
	switch {
	case len(data) >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff:
		return JPEG
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		return PNG
	case bytes.HasPrefix(data, []byte("GIF87a")), bytes.HasPrefix(data, []byte("GIF89a")):
		return GIF
	case bytes.HasPrefix(data, []byte("II*\x00")), bytes.HasPrefix(data, []byte("MM\x00*")):
		return TIFF
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		return WebP
	case len(data) >= 10 && data[0] == 'B' && data[1] == 'M' &&
		data[6] == 0 && data[7] == 0 && data[8] == 0 && data[9] == 0:
		// "BM" alone is too weak; the reserved fields after the file size are zero (the
		// same signature golang.org/x/image/bmp registers).
		return BMP
	}
	return ""
}

// Config is what an image's header says about it.
type Config struct {
	Format string // as returned by Sniff
	// Width and Height are the size after orientation: an EXIF orientation of 5 to 8
	// swaps the stored width and height.
	Width, Height int
	// Orientation is the EXIF orientation tag of a JPEG, 1 to 8, or 1 when there is none
	// (and for other formats).
	Orientation int
}

// ReadConfig reads the header of an encoded image, without decoding pixels. The size it
// reports is the one a Decoder with default Options produces before resizing. It is safe
// for concurrent use.
func ReadConfig(data []byte) (Config, error) {
	h, err := readHeader(data)
	if err != nil {
		return Config{}, err
	}
	return h.config(), nil
}

// config returns what ReadConfig reports for h.
func (h header) config() Config {
	c := Config{Format: h.format, Width: h.width, Height: h.height, Orientation: h.orientation}
	if transposes(c.Orientation) {
		c.Width, c.Height = c.Height, c.Width
	}
	return c
}

// header is what readHeader learns about an encoded image.
type header struct {
	format        string
	width, height int  // as stored, before orientation
	orientation   int  // EXIF orientation, 1 to 8
	sof           byte // a JPEG's frame header marker (see jpegseg.IsSOF), 0 if none
}

// readHeader sniffs data and decodes its header. Errors are ErrUnsupported (unknown or
// unsupported format) or *FormatError (corrupt header).
func readHeader(data []byte) (header, error) {
	f := Sniff(data)
	if f == "" {
		if len(data) == 0 {
			return header{}, fmt.Errorf("%w: empty input (0 bytes)", ErrUnsupported)
		}
		return header{}, fmt.Errorf("%w: unrecognised signature %q", ErrUnsupported, data[:min(len(data), 8)])
	}
	h := header{format: f, orientation: 1}
	var jm jpegMarkers
	if f == JPEG {
		jm = scanJPEG(data)
		h.orientation, h.sof = jm.orientation, jm.sof
	}
	var cfg image.Config
	err := guard(f, func() (err error) {
		r := bytes.NewReader(data)
		switch f {
		case JPEG:
			// The common frames are read here without allocating (this runs twice per
			// sample in the loader); image/jpeg reads, and judges, the rest.
			if w, h, ok := jm.frameSize(); ok {
				cfg.Width, cfg.Height = w, h
				return nil
			}
			cfg, err = jpeg.DecodeConfig(r)
		case PNG:
			cfg, err = png.DecodeConfig(r)
		case GIF:
			cfg, err = gif.DecodeConfig(r)
		case BMP:
			cfg, err = bmp.DecodeConfig(r)
		case TIFF:
			cfg, err = tiff.DecodeConfig(r)
		case WebP:
			cfg, err = webp.DecodeConfig(r)
		}
		return err
	})
	if err != nil {
		return header{}, err
	}
	h.width, h.height = cfg.Width, cfg.Height
	if h.width <= 0 || h.height <= 0 {
		return header{}, &FormatError{Format: f, Err: fmt.Errorf("image size %dx%d", h.width, h.height)}
	}
	if f == WebP {
		// An extended (VP8X) file's header gives the canvas size, but the decoder
		// allocates what the VP8 or VP8L frame says; a canvas that differs from the
		// frame would let a small canvas smuggle in a huge frame.
		fw, fh, _, ok := webpFrameSize(data)
		if !ok {
			return header{}, &FormatError{Format: f, Err: errors.New("no VP8 or VP8L frame header")}
		}
		if fw != h.width || fh != h.height {
			return header{}, &FormatError{Format: f, Err: fmt.Errorf("canvas %dx%d differs from frame %dx%d", h.width, h.height, fw, fh)}
		}
	}
	return h, nil
}

// checkSize returns ErrTooLarge if a w×h image exceeds limit pixels.
func checkSize(w, h int, limit int64) error {
	if n := int64(w) * int64(h); n > limit {
		return fmt.Errorf("%w: %dx%d is %d pixels, limit %d", ErrTooLarge, w, h, n, limit)
	}
	return nil
}

// guard runs a third-party decoder: it turns a panic into a *FormatError and classifies
// the decoder's error as ErrUnsupported (a feature the decoder lacks) or *FormatError.
func guard(format string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &FormatError{Format: format, Err: fmt.Errorf("decoder panic: %v", r)}
		}
	}()
	err = f()
	if err == nil {
		return nil
	}
	var (
		ju jpeg.UnsupportedError
		pu png.UnsupportedError
		tu tiff.UnsupportedError
	)
	if errors.As(err, &ju) || errors.As(err, &pu) || errors.As(err, &tu) || errors.Is(err, bmp.ErrUnsupported) {
		return fmt.Errorf("%w: %s: %w", ErrUnsupported, format, err)
	}
	return &FormatError{Format: format, Err: err}
}
