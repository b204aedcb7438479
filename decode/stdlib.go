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

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
	"golang.org/x/image/webp"
)

// stdlib is the last backend: the standard library and golang.org/x/image decode every
// format, and decide every file the backends before it decline, so its errors are the
// ones a Decoder returns.
type stdlib struct {
	rd bytes.Reader
	up jpegUpsampler
}

func openStdlib() (backend, error) { return new(stdlib), nil }

func (s *stdlib) name() string { return BackendGo }

func (s *stdlib) accepts(*header) bool { return true }

// decode decodes the whole image and converts the part j.rs (rounded out to the chroma
// grid) to RGB in j.img: lossy WebP with libwebp's arithmetic, a GIF frame smaller than
// its logical screen on a black canvas, a JPEG with subsampled chroma whole, upsampled
// as libjpeg-turbo does (jpegupsample.go).
func (s *stdlib) decode(j *job) (decoded, error) {
	h := &j.h
	out := decoded{crop: j.rs}
	out.sx, out.sy = wholeSpans(j.rs)
	err := guard(h.format, func() error {
		s.rd.Reset(j.data)
		m, err := decodeGo(h.format, &s.rd)
		s.rd.Reset(nil)
		if err != nil {
			return err
		}
		b := m.Bounds()
		if h.format == GIF {
			if p, ok := m.(*image.Paletted); ok {
				restoreTransparent(p, j.data)
			}
			if b != image.Rect(0, 0, h.width, h.height) {
				j.conv.gifCanvas(j.img, m, h.width, h.height)
				return nil
			}
		}
		if b.Dx() != h.width || b.Dy() != h.height {
			return fmt.Errorf("decoded %dx%d, header says %dx%d", b.Dx(), b.Dy(), h.width, h.height)
		}
		if h.format == WebP {
			if y := webpYCbCr(m); y != nil {
				webpToRGB(j.img, y)
				return nil
			}
		}
		if y, ok := m.(*image.YCbCr); ok && h.format == JPEG && s.up.toRGB(j.img, y) {
			return nil // the whole image, chroma upsampled as libjpeg-turbo does
		}
		out.crop = j.conv.toRGBRegion(j.img, m, j.rs)
		return nil
	})
	return out, err
}

// stdOverhead bounds what the Go decoders allocate besides pixels and per-block tables:
// Huffman and LZW tables, inflate's window, readers.
const stdOverhead = 256 << 10

// footprint: each decoder's image at full size (no Go decoder scales or crops), with
// what it allocates besides, and the RGB conversion of j.rs. Inflate and the WebP
// decoders build new Huffman tables for every block, garbage the bound allows a byte of
// file for (files from common encoders need a tenth of that).
func (s *stdlib) footprint(j *job) estimate {
	w, h := int64(j.h.width), int64(j.h.height)
	px := w * h
	// toRGBRegion rounds the region out to the chroma grid by at most 3 pixels; a JPEG
	// is converted whole.
	rgb := 3 * min(w, int64(j.rs.Dx())+4) * min(h, int64(j.rs.Dy())+4)
	if j.h.format == JPEG {
		rgb = 3 * px
	}
	e := estimate{rgb: true, src: j.rs.Size(), sure: true, bytes: stdOverhead + int64(len(j.data)) + rgb}
	switch j.h.format {
	case JPEG:
		// image/jpeg's planes, padded to whole MCUs; a progressive file's coefficients
		// (four bytes each); the CMYK or RGBA image a 4-component or RGB-coded file
		// becomes.
		l := &j.frame
		blocks := l.blocks(j.h.width, j.h.height)
		e.bytes += 64 * blocks
		if !l.ok || l.sof == 0xc2 {
			e.bytes += 256 * blocks
		}
		if !l.ok || l.ncomp == 4 || l.rgb {
			e.bytes += 4 * px
		}
	case PNG:
		e.bytes += pngGoBytes(j.data, w, h)
	case GIF:
		e.bytes += px + 6*px // the frame, at most the screen; the canvas and the screen in RGB
	case BMP:
		e.bytes += 4*px + 4*w
	case TIFF:
		// Up to 16-bit RGBA (8 bytes a pixel), and a strip as large inflated into a
		// bytes.Buffer, whose doublings allocate up to four times that.
		e.bytes += 40 * px
	case WebP:
		e.bytes += webpGoBytes(j.data, w, h)
	}
	return e
}

// pngGoBytes bounds image/png's memory for a w×h PNG: its image (8 bytes a pixel for
// 16-bit colour, 1 for grey without transparency or a palette, 4 otherwise), twice for
// an interlaced file, whose passes are images of their own, and two rows per pass.
func pngGoBytes(data []byte, w, h int64) int64 {
	ihdr, ok := pngIHDR(data)
	if !ok {
		return 16*w*h + 16*(8*w+1)
	}
	var bpp int64 = 4
	switch {
	case ihdr.depth == 16:
		bpp = 8
	case ihdr.colour == 3, ihdr.colour == 0 && !pngHasTRNS(data):
		bpp = 1
	}
	rows := 2 * (1 + (w*int64(ihdr.channels())*int64(ihdr.depth)+7)/8)
	if ihdr.interlace != 0 {
		return 2*bpp*w*h + 7*rows
	}
	return bpp*w*h + rows
}

// webpGoBytes bounds golang.org/x/image/webp's memory for a w×h WebP: lossy frames are
// 4:2:0 planes padded to whole macroblocks, with an alpha plane that may itself be
// coded losslessly; lossless frames are 4 bytes a pixel, with a second copy for a
// colour-indexing transform and the transforms' own images.
func webpGoBytes(data []byte, w, h int64) int64 {
	if _, _, lossless, ok := webpFrameSize(data); ok && !lossless {
		pw, ph := (w+15)&^15, (h+15)&^15
		return pw*ph*3/2 + 5*w*h
	}
	return 12 * w * h
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
func (s *rgbScratch) gifCanvas(img *Image, m image.Image, w, h int) {
	toRGB(&s.canvas, m, &s.lut)
	img.Reset(w, h)
	clear(img.Pix)
	b := m.Bounds().Intersect(image.Rect(0, 0, w, h))
	for y := b.Min.Y; y < b.Max.Y; y++ {
		src := s.canvas.Row(y - m.Bounds().Min.Y)[3*(b.Min.X-m.Bounds().Min.X):]
		copy(img.Row(y)[3*b.Min.X:3*b.Max.X], src)
	}
}
