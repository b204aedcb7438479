package decode

import (
	"errors"
	"image"
	"slices"

	"github.com/conveyor-ml/conveyor/internal/turbojpeg"
)

// turboJPEG is the libjpeg-turbo JPEG backend. It decodes into packed RGB, or, when a
// resize follows, into its raw YCbCr planes for planar resampling (no upsampling or
// colour conversion at the decoded size), and can scale by 1/8 to 1 in the DCT, which
// makes shrinking a large photo several times cheaper than decoding it at full size.
// libjpeg-turbo's IDCT and chroma upsampling differ slightly from image/jpeg's (a mean of
// about one unit per channel); the differential test bounds it.
type turboJPEG struct {
	dec     *turbojpeg.Decompressor
	factors [][2]int // scaling factors up to 1, smallest first

	bufs [3][]byte // planes of decodePlanes, reused
	ycc  image.YCbCr
	gray image.Gray
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

// decodePlanes decodes a w×h JPEG into its YCbCr (or grey) planes at the DCT scale at
// which a cw×ch part of it still covers reduceGap times tw×th. The result shares the
// decoder's memory until the next call.
func (t *turboJPEG) decodePlanes(data []byte, w, h, cw, ch, tw, th int) (image.Image, error) {
	num, denom := t.scale(cw, ch, tw, th)
	planes, sw, sh, sub, err := t.dec.DecodeYUV(data, num, denom, t.grow)
	if err != nil {
		return nil, err
	}
	if ew, eh := turbojpeg.ScaledSize(w, h, num, denom); sw != ew || sh != eh {
		return nil, errors.New("the library read another size than the header")
	}
	yw, _ := turbojpeg.PlaneSize(0, sw, sh, sub)
	rect := image.Rect(0, 0, sw, sh)
	if sub == turbojpeg.SAMPGray {
		t.gray = image.Gray{Pix: planes[0], Stride: yw, Rect: rect}
		return &t.gray, nil
	}
	cw2, _ := turbojpeg.PlaneSize(1, sw, sh, sub)
	t.ycc = image.YCbCr{
		Y: planes[0], Cb: planes[1], Cr: planes[2], YStride: yw, CStride: cw2,
		SubsampleRatio: turboRatios[sub], Rect: rect,
	}
	return &t.ycc, nil
}

// turboRatios maps TurboJPEG's subsamplings to image.YCbCr's.
var turboRatios = [...]image.YCbCrSubsampleRatio{
	turbojpeg.SAMP444: image.YCbCrSubsampleRatio444,
	turbojpeg.SAMP422: image.YCbCrSubsampleRatio422,
	turbojpeg.SAMP420: image.YCbCrSubsampleRatio420,
	turbojpeg.SAMP440: image.YCbCrSubsampleRatio440,
	turbojpeg.SAMP411: image.YCbCrSubsampleRatio411,
}

// grow returns plane i's buffer with room for n bytes.
func (t *turboJPEG) grow(i, n int) []byte {
	t.bufs[i] = grow(t.bufs[i], n)
	return t.bufs[i]
}

func (t *turboJPEG) close() error { return t.dec.Close() }
