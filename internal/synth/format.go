package synth

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/gif"
	"image/png"
	"io"
	"math"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
)

// Format is a file encoding that [Encode] can write.
type Format int

const (
	JPEG            Format = iota // baseline JPEG, 4:2:0, quality 90
	JPEGProgressive               // progressive JPEG (spectral selection), 4:2:0, quality 90
	JPEG444                       // baseline JPEG without chroma subsampling, quality 90
	JPEGGray                      // single-component baseline JPEG, quality 90
	PNG                           // 8-bit RGB PNG
	PNGRGBA                       // 8-bit RGBA PNG with varied alpha
	PNG16                         // 16-bit RGB PNG
	PNGGray                       // 8-bit grayscale PNG
	PNGPalette                    // 8-bit palette PNG (ordered dither to 216 colours)
	GIF                           // GIF with the same palette as PNGPalette
	BMP                           // 24-bit BMP
	TIFF                          // Deflate-compressed RGBA TIFF
	numFormats
)

var formatNames = [numFormats]string{
	"jpeg", "jpeg-progressive", "jpeg-444", "jpeg-gray",
	"png", "png-rgba", "png-16", "png-gray", "png-palette",
	"gif", "bmp", "tiff",
}

// AllFormats returns every Format, in declaration order.
func AllFormats() []Format {
	fs := make([]Format, numFormats)
	for i := range fs {
		fs[i] = Format(i)
	}
	return fs
}

func (f Format) valid() bool { return f >= 0 && f < numFormats }

// String returns a short name such as "jpeg-progressive".
func (f Format) String() string {
	if !f.valid() {
		return fmt.Sprintf("Format(%d)", int(f))
	}
	return formatNames[f]
}

// Ext returns the usual file name extension, without the dot: "jpg", "png",
// "gif", "bmp" or "tif".
func (f Format) Ext() string {
	switch f {
	case JPEG, JPEGProgressive, JPEG444, JPEGGray:
		return "jpg"
	case PNG, PNGRGBA, PNG16, PNGGray, PNGPalette:
		return "png"
	case GIF:
		return "gif"
	case BMP:
		return "bmp"
	case TIFF:
		return "tif"
	}
	return ""
}

// Encode writes img to w in format f. JPEG variants use quality 90. Encode
// first converts img to the pixel type the format stores, so any image works;
// for PNGRGBA an opaque img gets a radial alpha fade (opaque centre, alpha
// about 40 in the corners) so that the file really carries varied alpha.
func Encode(w io.Writer, img image.Image, f Format) error {
	switch f {
	case JPEG:
		return EncodeJPEG(w, img, nil)
	case JPEGProgressive:
		return EncodeJPEG(w, img, &JPEGOptions{Progressive: true})
	case JPEG444:
		return EncodeJPEG(w, img, &JPEGOptions{Subsample444: true})
	case JPEGGray:
		return EncodeJPEG(w, img, &JPEGOptions{Gray: true})
	case PNG:
		return png.Encode(w, opaque(img))
	case PNGRGBA:
		return png.Encode(w, withAlpha(img))
	case PNG16:
		return png.Encode(w, to16(img))
	case PNGGray:
		return png.Encode(w, toGray(img))
	case PNGPalette:
		return png.Encode(w, toPaletted(img))
	case GIF:
		return gif.Encode(w, toPaletted(img), nil)
	case BMP:
		return bmp.Encode(w, opaque(img))
	case TIFF:
		return tiff.Encode(w, opaque(img), &tiff.Options{Compression: tiff.Deflate})
	}
	return fmt.Errorf("synth: unknown format %v", f)
}

// toNRGBA returns img as a tightly packed *image.NRGBA with bounds starting
// at (0, 0), copying unless it already is one.
func toNRGBA(img image.Image) *image.NRGBA {
	if m, ok := img.(*image.NRGBA); ok && m.Rect.Min == (image.Point{}) && m.Stride == 4*m.Rect.Dx() {
		return m
	}
	b := img.Bounds()
	m := image.NewNRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(m, m.Rect, img, b.Min, draw.Src)
	return m
}

// opaque returns img as an opaque *image.NRGBA, so that encoders write RGB.
func opaque(img image.Image) *image.NRGBA {
	m := toNRGBA(img)
	if m.Opaque() {
		return m
	}
	c := image.NewNRGBA(m.Rect)
	copy(c.Pix, m.Pix)
	for i := 3; i < len(c.Pix); i += 4 {
		c.Pix[i] = 0xff
	}
	return c
}

func withAlpha(img image.Image) *image.NRGBA {
	m := toNRGBA(img)
	if !m.Opaque() {
		return m
	}
	c := image.NewNRGBA(m.Rect)
	copy(c.Pix, m.Pix)
	w, h := m.Rect.Dx(), m.Rect.Dy()
	for y := range h {
		dy := 2*(float64(y)+0.5)/float64(h) - 1
		for x := range w {
			dx := 2*(float64(x)+0.5)/float64(w) - 1
			r2 := (dx*dx + dy*dy) / 2
			c.Pix[y*c.Stride+4*x+3] = uint8(255 - 215*math.Min(r2, 1))
		}
	}
	return c
}

// to16 widens to 16 bits per channel by replicating the byte (v*257), the
// exact inverse of taking the high byte.
func to16(img image.Image) *image.NRGBA64 {
	m := opaque(img)
	c := image.NewNRGBA64(m.Rect)
	for i, v := range m.Pix {
		c.Pix[2*i], c.Pix[2*i+1] = v, v
	}
	return c
}

// toGray uses the BT.601 weights of color.GrayModel.
func toGray(img image.Image) *image.Gray {
	m := toNRGBA(img)
	g := image.NewGray(m.Rect)
	for i := range g.Pix {
		p := m.Pix[4*i : 4*i+3 : 4*i+3]
		g.Pix[i] = uint8((19595*uint32(p[0]) + 38470*uint32(p[1]) + 7471*uint32(p[2]) + 1<<15) >> 16)
	}
	return g
}

// webPalette is the 6x6x6 colour cube.
var webPalette = func() color.Palette {
	p := make(color.Palette, 0, 216)
	for r := range 6 {
		for g := range 6 {
			for b := range 6 {
				p = append(p, color.RGBA{uint8(51 * r), uint8(51 * g), uint8(51 * b), 0xff})
			}
		}
	}
	return p
}()

// toPaletted maps onto webPalette with 4x4 ordered (Bayer) dithering, which
// is fast and, unlike error diffusion, needs no state across pixels.
func toPaletted(img image.Image) *image.Paletted {
	bayer := [16]int{0, 8, 2, 10, 12, 4, 14, 6, 3, 11, 1, 9, 15, 7, 13, 5}
	m := toNRGBA(img)
	p := image.NewPaletted(m.Rect, webPalette)
	w := m.Rect.Dx()
	for i := range p.Pix {
		x, y := i%w, i/w
		t := bayer[(y&3)*4+x&3]*16 + 8
		s := m.Pix[4*i : 4*i+3 : 4*i+3]
		r, g, b := (int(s[0])*5+t)/255, (int(s[1])*5+t)/255, (int(s[2])*5+t)/255
		p.Pix[i] = uint8(36*r + 6*g + b)
	}
	return p
}
