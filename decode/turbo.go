package decode

import (
	"slices"

	"github.com/conveyor-ml/conveyor/internal/turbojpeg"
)

// turboJPEG is the libjpeg-turbo JPEG backend. It decodes straight into packed RGB and
// can scale by 1/8 to 1 in the DCT, which makes shrinking a large photo several times
// cheaper than decoding it at full size. libjpeg-turbo's IDCT and chroma upsampling differ
// slightly from image/jpeg's (a mean of about one unit per channel); the differential
// test bounds it.
type turboJPEG struct {
	dec     *turbojpeg.Decompressor
	factors [][2]int // scaling factors up to 1, smallest first
}

func newTurboJPEG() (*turboJPEG, error) {
	lib, err := turbojpeg.Load()
	if err != nil {
		return nil, err
	}
	dec, err := lib.NewDecompressor()
	if err != nil {
		return nil, err
	}
	t := &turboJPEG{dec: dec}
	for _, f := range lib.ScalingFactors() {
		if f[0] <= f[1] {
			t.factors = append(t.factors, f)
		}
	}
	slices.SortFunc(t.factors, func(a, b [2]int) int { return a[0]*b[1] - b[0]*a[1] })
	return t, nil
}

// reduceGap is how many times larger than the resize target a DCT-scaled decode must
// stay, as Pillow's Image.thumbnail(reducing_gap=2.0) does with draft(). DCT scaling is
// a box filter; leaving the last factor of two to the triangle filter keeps the result
// close to decoding at full size (PSNR 39-49 dB against the Go backend on test images,
// where scaling right down to the target gives 34-38 dB).
const reduceGap = 2

// scale returns the smallest scaling factor at which w×h pixels of a JPEG still cover
// reduceGap times tw×th, or 1 if none does.
func (t *turboJPEG) scale(w, h, tw, th int) (num, denom int) {
	for _, f := range t.factors {
		if sw, sh := turbojpeg.ScaledSize(w, h, f[0], f[1]); sw >= tw*reduceGap && sh >= th*reduceGap {
			return f[0], f[1]
		}
	}
	return 1, 1
}

// decode decodes a w×h JPEG into img at the DCT scale at which a cw×ch part of it (the
// whole image, or a crop) still covers reduceGap times tw×th.
func (t *turboJPEG) decode(img *Image, data []byte, w, h, cw, ch, tw, th int) error {
	num, denom := t.scale(cw, ch, tw, th)
	sw, sh := turbojpeg.ScaledSize(w, h, num, denom)
	img.Reset(sw, sh)
	gw, gh, err := t.dec.DecodeRGB(img.Pix, data, num, denom)
	if err != nil {
		return err
	}
	if gw != sw || gh != sh { // the library read another size than image/jpeg; it fit in img
		img.Width, img.Height, img.Stride = gw, gh, 3*gw
		img.Pix = img.Pix[:3*gw*gh]
	}
	return nil
}

func (t *turboJPEG) close() error { return t.dec.Close() }
