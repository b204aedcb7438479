package decode

import (
	"errors"
	"image"
	"math"
	"slices"

	"github.com/conveyor-ml/conveyor/internal/jpegseg"
	"github.com/conveyor-ml/conveyor/internal/libjpeg"
	"github.com/conveyor-ml/conveyor/internal/turbojpeg"
)

// turboJPEG is the libjpeg-turbo JPEG backend (libturbojpeg.so.0, see internal/turbojpeg).
// It decodes into packed RGB, or, when a resize follows, into its raw YCbCr planes for
// planar resampling (no upsampling or colour conversion at the decoded size), and can
// scale by 1/8, 1/4 or 1/2 in the DCT, which makes shrinking a large photo several times
// cheaper than decoding it at full size.
// Its pixels differ from the Go decoder's by the colour conversion's rounding (at most 1
// level on whole sequential files, TestGoJPEGMatchesTurbo).
//
// Where the same library's libjpeg API loads (internal/libjpeg), planes at full scale are
// decoded through it instead, from the top down to the iMCU row holding the crop's last
// row, and no further: the same samples, without the entropy decoding and IDCT of the
// rows below the crop.
type turboJPEG struct {
	dec     *turbojpeg.Decompressor
	rows    *libjpeg.Decoder // nil where libjpeg's API is not available
	factors [][2]int         // scaling factors up to 1, smallest first

	bufs [3][]byte // planes of decodePlanes, reused
	ycc  image.YCbCr
	gray image.Gray
}

func openTurbo() (backend, error) {
	t, err := newTurboJPEG()
	if err != nil {
		return nil, err
	}
	return t, nil
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
	if l, err := libjpeg.Load(); err == nil {
		t.rows = l.NewDecoder()
	}
	for _, f := range lib.ScalingFactors() {
		if f[0] <= f[1] && fastScale(f[0], f[1]) {
			t.factors = append(t.factors, f)
		}
	}
	slices.SortFunc(t.factors, func(a, b [2]int) int { return a[0]*b[1] - b[0]*a[1] })
	return t, nil
}

// reduceGap is how many times larger than the resize target a DCT-scaled decode must
// stay; the coarse scales need more (scaleGap). DCT scaling is close to a box filter;
// leaving at least the last factor of two to the resampler's triangle filter keeps the
// result close to decoding at full size and resizing, as torchvision does (it never
// scales in the DCT). TestDCTScaleNoShift holds the bound.
const reduceGap = 2

// fastScale reports whether the DCT scale num/denom is one decode uses: 1/8, 1/4, 1/2
// and 1, the scales Pillow's draft() uses too. libjpeg-turbo has SIMD inverse DCTs for
// those only; at 3/8 it decoded a 2560×1600 photo's planes in 12 ms where 1/2 took 9, and
// 5/8 to 7/8 (17-24 ms) were slower than decoding at full size (14 ms), so the in-between
// scales buy nothing (bench/RESULTS.md).
func fastScale(num, denom int) bool {
	return num == denom || num == 1 && (denom == 2 || denom == 4 || denom == 8)
}

// scaleGap returns how many times larger than the target a decode at num/denom must
// stay. Measured on the 38 photos of bench/photos.sh against a full decode and the same
// resize (shorter sides 256, 160, 100): 1/2 (and the in-between scales, no longer used)
// stays above 47 dB from twice the target up; 1/4 (a 2×2 inverse DCT, which aliases fine
// texture) falls to 43 dB at 2.6 times and is above 50 dB from 3; 1/8 (the blocks'
// averages) is at 40 dB at twice, 44 dB at 2.6 times for a 16×24 output of a detailed
// photo, above 48 dB from 3; scaling right down to the target gives 33-38 dB.
func scaleGap(num, denom int) float64 {
	if 4*num <= denom { // 1/4, 1/8
		return 3
	}
	return reduceGap
}

// scale returns the smallest scaling factor at which w×h pixels of a JPEG still cover
// scaleGap times tw×th, or 1 if none does.
func (t *turboJPEG) scale(w, h, tw, th int) (num, denom int) {
	for _, f := range t.factors {
		g := scaleGap(f[0], f[1])
		if sw, sh := turbojpeg.ScaledSize(w, h, f[0], f[1]); float64(sw) >= g*float64(tw) && float64(sh) >= g*float64(th) {
			return f[0], f[1]
		}
	}
	return 1, 1
}

func (t *turboJPEG) name() string { return "libjpeg-turbo" }

func (t *turboJPEG) accepts(h *header) bool { return h.format == JPEG }

// decode decodes j at the DCT scale at which j.rs still covers scaleGap times the
// target: into planes when a resize follows, else, or when the planes are declined, into
// RGB. rs's edges then fall between pixels of the scaled image, and the spans carry the
// fractions (see scaleRect). Anything libjpeg-turbo declines (CMYK, a libjpeg warning, which image/jpeg
// may accept, or an error) goes on to the Go backends, which decide, so that both JPEG
// backends accept the same files.
func (t *turboJPEG) decode(j *job) (decoded, error) {
	h := &j.h
	cw, ch := j.rs.Dx(), j.rs.Dy()
	if j.resized {
		// Where the planes are converted first (planar.go), libjpeg-turbo's vertical
		// chroma upsampling of the crop's last row reads the chroma row below when that
		// row is odd (the one above when it is even): decode down to the next row then,
		// and no further, since a row past an iMCU row's end costs the whole next one.
		bottom := j.rs.Max.Y
		if bottom%2 == 0 {
			bottom = min(bottom+1, h.height)
		}
		if m, num, denom, err := t.decodePlanes(j.data, h.width, h.height, cw, ch, j.tw, j.th, bottom); err == nil {
			crop, sx, sy := scaleRect(j.rs, num, denom, m.Bounds())
			return decoded{crop: crop, sx: sx, sy: sy, planes: m}, nil
		}
	}
	img := j.img
	num, denom, err := t.decodeRGB(img, j.data, h.width, h.height, cw, ch, j.tw, j.th)
	if err != nil {
		return decoded{}, errDeclined
	}
	crop, sx, sy := scaleRect(j.rs, num, denom, image.Rect(0, 0, img.Width, img.Height))
	return decoded{crop: crop, sx: sx, sy: sy}, nil
}

// decodeRGB decodes a w×h JPEG into img at the DCT scale at which a cw×ch part of it
// (the whole image, or a crop) still covers scaleGap times tw×th, and returns that scale.
func (t *turboJPEG) decodeRGB(img *Image, data []byte, w, h, cw, ch, tw, th int) (num, denom int, err error) {
	num, denom = t.scale(cw, ch, tw, th)
	sw, sh := turbojpeg.ScaledSize(w, h, num, denom)
	img.Reset(sw, sh)
	gw, gh, err := t.dec.DecodeRGB(img.Pix, data, num, denom)
	if err != nil {
		return 0, 0, err
	}
	if gw != sw || gh != sh { // the library read another size than image/jpeg; it fit in img
		img.Width, img.Height, img.Stride = gw, gh, 3*gw
		img.Pix = img.Pix[:3*gw*gh]
	}
	return num, denom, nil
}

// decodePlanes decodes a w×h JPEG into its YCbCr (or grey) planes at the DCT scale at
// which a cw×ch part of it still covers scaleGap times tw×th, at least down to row
// bottom-1 (of the full-size image), and returns them with that scale. The planes share
// the decoder's memory until the next call.
func (t *turboJPEG) decodePlanes(data []byte, w, h, cw, ch, tw, th, bottom int) (m image.Image, num, denom int, err error) {
	num, denom = t.scale(cw, ch, tw, th)
	if num == denom && t.rows != nil {
		m, err := t.decodeRows(data, w, h, bottom)
		if !errors.Is(err, libjpeg.ErrUnsupported) {
			return m, 1, 1, err
		}
	}
	m, err = t.decodeYUV(data, w, h, num, denom)
	return m, num, denom, err
}

// decodeYUV decodes a w×h JPEG into its planes at the DCT scale num/denom through
// TurboJPEG.
func (t *turboJPEG) decodeYUV(data []byte, w, h, num, denom int) (image.Image, error) {
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

// decodeRows decodes a w×h JPEG at full scale into its planes through libjpeg's API,
// stopping below row bottom-1 when the file ends with an EOI marker. A truncated file
// (no EOI) is decoded whole, so that its damage is found whichever crop is asked for.
// The planes' slices end with the last row decoded: the resampler reads only the crop's
// rows, and chroma rows up to ceil(bottom/2), which the last iMCU row holds.
func (t *turboJPEG) decodeRows(data []byte, w, h, bottom int) (image.Image, error) {
	if n := len(data); n < 2 || data[n-2] != 0xff || data[n-1] != jpegseg.EOI {
		bottom = h
	}
	p, err := t.rows.DecodeRaw(data, bottom, t.grow)
	if err != nil {
		return nil, err
	}
	if p.Width != w || p.Height != h {
		return nil, errors.New("the library read another size than the header")
	}
	rect := image.Rect(0, 0, w, h)
	if p.Comps == 1 {
		t.gray = image.Gray{Pix: p.Pix[0][:p.Rows*p.Stride[0]], Stride: p.Stride[0], Rect: rect}
		return &t.gray, nil
	}
	ratio, ok := rowRatios[[2]int{p.H[0], p.V[0]}]
	if !ok {
		return nil, libjpeg.ErrUnsupported
	}
	crows := (p.Rows + p.V[0] - 1) / p.V[0]
	t.ycc = image.YCbCr{
		Y: p.Pix[0][:p.Rows*p.Stride[0]], Cb: p.Pix[1][:crows*p.Stride[1]], Cr: p.Pix[2][:crows*p.Stride[2]],
		YStride: p.Stride[0], CStride: p.Stride[1], SubsampleRatio: ratio, Rect: rect,
	}
	return &t.ycc, nil
}

// rowRatios maps luma's sampling factors (chroma's being 1×1) to image.YCbCr's ratios.
var rowRatios = map[[2]int]image.YCbCrSubsampleRatio{
	{1, 1}: image.YCbCrSubsampleRatio444,
	{2, 1}: image.YCbCrSubsampleRatio422,
	{2, 2}: image.YCbCrSubsampleRatio420,
	{1, 2}: image.YCbCrSubsampleRatio440,
	{4, 1}: image.YCbCrSubsampleRatio411,
	{4, 2}: image.YCbCrSubsampleRatio410,
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

func (t *turboJPEG) close() error {
	if t.rows != nil {
		t.rows.Close()
	}
	return t.dec.Close()
}

// scaleRect maps the rectangle rs of an image to the same image decoded at the DCT scale
// num/denom into b: the whole pixels of b it touches, and the spans within them.
//
// The scale is exactly num/denom on both axes, whatever b's size. An n-sample side
// decodes to ceil(n·num/denom) samples, of which only n·num/denom hold the image: the
// last one is part padding (the IDCT of the edge block's padded samples), so its centre
// is not at the image's scaled edge. Mapping n to all ceil(n·num/denom) samples instead
// would stretch the image by up to a scaled pixel and shift the output by up to a third
// of an output pixel on sides that are not multiples of 8 (TestDCTScaleNoShift).
func scaleRect(rs image.Rectangle, num, denom int, b image.Rectangle) (crop image.Rectangle, sx, sy span) {
	x0, x1, sx := dctSpan(rs.Min.X, rs.Max.X, num, denom, b.Dx())
	y0, y1, sy := dctSpan(rs.Min.Y, rs.Max.Y, num, denom, b.Dy())
	return image.Rect(x0, y0, x1, y1), sx, sy
}

// dctSpan maps the samples [a, b) of a side scaled by num/denom to sn samples: it returns
// the whole samples [lo, hi) that the scaled interval touches, and the interval within
// them.
func dctSpan(a, b, num, denom, sn int) (lo, hi int, sp span) {
	if num == denom {
		return a, b, span{0, float64(b - a)}
	}
	// Exact products first; a/denom is exact in float64 for the powers of two and
	// within an ulp otherwise.
	fa := float64(int64(a)*int64(num)) / float64(denom)
	fb := min(float64(int64(b)*int64(num))/float64(denom), float64(sn))
	lo = min(int(math.Floor(fa)), sn-1)
	hi = max(min(int(math.Ceil(fb)), sn), lo+1)
	return lo, hi, span{fa - float64(lo), fb - fa}
}

// scaleSpan maps the samples [a, b) of n to an image that n was resampled to sn samples
// (libwebp's scaler, which maps the edges onto each other): it returns the whole samples
// [lo, hi) that the scaled interval touches, and the interval within them.
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

// footprint: the planes or the RGB image at the DCT scale decode picks, and libjpeg's
// own memory: a few rows of each component at that scale (measured under half a
// megabyte for an 8000-pixel-wide baseline file at any scale), and for a progressive or
// multi-scan file the whole image's coefficients at full resolution, two bytes each,
// which DCT scaling does not shrink.
func (t *turboJPEG) footprint(j *job) estimate {
	w, h := j.h.width, j.h.height
	num, denom := t.scale(j.rs.Dx(), j.rs.Dy(), j.tw, j.th)
	sw, sh := turbojpeg.ScaledSize(w, h, num, denom)
	crop, _, _ := scaleRect(j.rs, num, denom, image.Rect(0, 0, sw, sh))
	l := &j.frame
	e := estimate{src: crop.Size()}
	vmax := 4
	if l.ok {
		vmax = l.vmax
	}
	e.bytes = int64(l.comps())*int64(sw+64)*int64(16*vmax+16) + 1<<20
	if l.multiScan() {
		e.bytes += 128 * l.blocks(w, h)
	}
	if sub, ok := l.turboSubsamp(); j.resized && ok {
		// tjDecompressToYUVPlanes takes these for certain; it declines the others before
		// the planes are allocated.
		for i := range 3 {
			if i == 0 || sub != turbojpeg.SAMPGray {
				pw, ph := turbojpeg.PlaneSize(i, sw, sh, sub)
				e.bytes += int64(pw) * int64(ph)
			}
		}
		e.planes, e.sure = true, true
		return e
	}
	e.bytes += 3 * int64(sw) * int64(sh)
	e.rgb = true
	e.sure = l.ok && l.precision == 8 && l.ncomp != 4 && turboFrame(l.sof)
	return e
}
