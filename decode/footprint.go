package decode

import (
	"fmt"
	"image"

	"github.com/conveyor-ml/conveyor/internal/jpegseg"
	"github.com/conveyor-ml/conveyor/internal/turbojpeg"
)

// Footprint returns an upper bound of the bytes this Decoder allocates to decode data,
// so that a caller can reserve memory for what is actually decoded rather than for the
// header's size: with a zero r as Decode does (Options.Resize applied), otherwise as
// DecodeRegion(dst, data, r, w, h) does. The bound covers the backend's planes and
// scratch, what the decoders it calls allocate (native ones included), the RGB image, the
// resampling and orientation buffers and the result; it assumes a fresh Decoder, whose
// scratch is empty, and a nil dst.
//
// It follows the backend that takes the file and its DCT scaling. A 48-megapixel JPEG
// resized to a shorter side of 256 on the turbo backend decodes at 1/8 scale and needs
// a few megabytes; a sequential JPEG on the Go backend holds its planes at full size
// (1.5 bytes a pixel for 4:2:0) but only the output in RGB. Some inputs decode at full
// size whatever the resize: PNG, WebP, GIF, BMP and TIFF, and on the Go backend
// progressive and CMYK JPEGs, which image/jpeg decodes (a progressive one with 4 bytes
// a coefficient besides); with libjpeg-turbo a progressive or multi-scan JPEG holds its
// coefficients at full resolution in C memory (2 bytes a sample).
//
// A backend that may decline a file its header admits (the libdeflate PNG path for
// 16-bit or interlaced files, the Go JPEG path for RGB-coded ones) is counted together
// with the backend after it. A file whose data contradicts its header (damage, or
// extraneous bytes that stop libjpeg-turbo) is decoded again by the next backend, at full
// size, which the bound does not cover.
//
// Errors are those of Config, plus a plain error for a bad region or size.
func (d *Decoder) Footprint(data []byte, r image.Rectangle, w, h int) (int64, error) {
	hd, err := d.header(data)
	if err != nil {
		return 0, err
	}
	c := hd.config()
	if r == (image.Rectangle{}) {
		r = image.Rect(0, 0, c.Width, c.Height)
		w, h = d.opts.Resize.OutputSize(c.Width, c.Height)
	} else if r.Empty() || !r.In(image.Rect(0, 0, c.Width, c.Height)) || w <= 0 || h <= 0 {
		return 0, fmt.Errorf("decode: region %v of the %dx%d image to %dx%d", r, c.Width, c.Height, w, h)
	}
	if full := image.Rect(0, 0, c.Width, c.Height); d.opts.Exact && (r != full || w != c.Width || h != c.Height) {
		// decodeExact: a full decode (its result kept in the Decoder), then Pillow's
		// passes: an 8-bit intermediate of at most r's rows at the output width, a row
		// of sums, the coefficient tables and the result.
		n, err := d.Footprint(data, full, c.Width, c.Height)
		if err != nil {
			return 0, err
		}
		rw, rh := int64(r.Dx()), int64(r.Dy())
		tables := 12 * (rw + int64(w) + rh + int64(h)) * (rw/int64(w) + rh/int64(h) + 3)
		return n + 3*int64(w)*rh + 12*int64(w) + tables + 3*int64(w)*int64(h), nil
	}
	d.job = d.newJob(hd, data, r, w, h, nil)
	j := &d.job
	defer func() { *j = job{} }()
	intoDst := j.img == nil
	if hd.format == JPEG {
		j.frame = readJPEGLayout(data)
	}
	total := int64(footprintOverhead)
	var after int64 // the most any backend's output costs to resample and orient
	for _, b := range d.backends {
		if !b.accepts(&j.h) {
			continue
		}
		e := b.footprint(j)
		total += e.bytes
		after = max(after, outputCost(j, e, intoDst))
		if e.sure {
			break
		}
	}
	return total + after, nil
}

// footprintOverhead bounds the small allocations of a decode: headers, readers, image
// structs, the calls into native libraries.
const footprintOverhead = 64 << 10

// outputCost bounds what happens after a backend's output e: resampling (with planes,
// resizeYCbCr; with RGB, resize), orientation, and the result. With intoDst the backend
// writes the result itself.
func outputCost(j *job, e estimate, intoDst bool) int64 {
	if intoDst {
		return 0
	}
	out := 3 * int64(j.tw) * int64(j.th)
	if !j.resized { // only orientation: the decoded image to the result
		return out
	}
	cw, ch := int64(e.src.X), int64(e.src.Y)
	tw, th := int64(j.tw), int64(j.th)
	tmp := max(th*cw, ch*tw) + 16 // samples of the intermediate image, either pass order
	plans := planBytes(cw, tw) + planBytes(ch, th)
	var resample int64
	if e.planes {
		// Three output planes; the intermediate buffer and the row of sums may grow
		// for each plane; luma's and chroma's weight tables.
		resample = 3*tw*th + 3*2*tmp + 3*4*max(cw, tw) + 2*plans
		if cw*ch <= convertFirstArea*tw*th {
			// Or converted first: a window of the crop's RGB rows (the vertical taps
			// and 32 more), two rows of upsampled chroma, and RGB's resampling.
			taps := 2*((ch+th-1)/th) + 4
			resample = max(resample, 3*cw*min(ch, taps+32)+16+2*(cw+16)+2*3*tmp+4*3*max(cw, tw)+plans)
		}
	}
	if e.rgb {
		resample = max(resample, 2*3*tmp+4*3*max(cw, tw)+plans)
	}
	if j.h.orientation != 1 {
		out *= 2 // resampled into the Decoder's scratch, then oriented into the result
	}
	return resample + out
}

// planBytes bounds an axisPlan's tables for resampling n samples to out: the first tap
// of each output, the weights in every layout the kernels use, and one output's exact
// weights. Each output reads at most 2n/out+1 samples, padded to a multiple of 4.
func planBytes(n, out int64) int64 {
	taps := 2*((n+out-1)/out) + 6
	return 4*out + (2+8+2)*out*taps + 8*taps + 256
}

// jpegLayout is what a JPEG's headers before its first scan say about the memory its
// decoders allocate.
type jpegLayout struct {
	ok         bool // a complete frame header was found
	sof        byte // its marker
	precision  int
	ncomp      int
	h, v       [4]int // sampling factors
	hmax, vmax int
	rgb        bool // coded as RGB: components named R, G, B, or an Adobe transform 0
	firstScan  int  // components in the first scan, 0 if the walk did not reach it
}

// readJPEGLayout walks data's segments up to the first scan.
func readJPEGLayout(data []byte) jpegLayout {
	var l jpegLayout
	var ids [4]byte
	adobe := -1
	w := jpegseg.Walker{Data: data, Pos: 2}
	for {
		s, err := w.Next()
		if err != nil || jpegseg.Standalone(s.Marker) && (s.Marker < jpegseg.RST0 || s.Marker > jpegseg.RST7) {
			break
		}
		b := s.Body
		switch {
		case jpegseg.IsSOF(s.Marker) && l.sof == 0:
			l.sof = s.Marker
			if len(b) < 6 || b[5] < 1 || b[5] > 4 || len(b) < 6+3*int(b[5]) {
				return l
			}
			l.precision, l.ncomp, l.hmax, l.vmax = int(b[0]), int(b[5]), 1, 1
			for i := range l.ncomp {
				c := b[6+3*i:]
				ids[i], l.h[i], l.v[i] = c[0], max(1, int(c[1]>>4)), max(1, int(c[1]&15))
				l.hmax, l.vmax = max(l.hmax, l.h[i]), max(l.vmax, l.v[i])
			}
			if l.ncomp == 1 { // a single component is coded in 8×8 blocks whatever its factors
				l.h[0], l.v[0], l.hmax, l.vmax = 1, 1, 1, 1
			}
			l.ok = true
		case s.Marker == jpegseg.APP14 && len(b) >= 12 && string(b[:5]) == "Adobe":
			adobe = int(b[11])
		case s.Marker == jpegseg.SOS:
			if len(b) > 0 {
				l.firstScan = int(b[0])
			}
			l.rgb = l.ncomp == 3 && (adobe == 0 || ids[0] == 'R' && ids[1] == 'G' && ids[2] == 'B')
			return l
		}
	}
	l.rgb = l.ncomp == 3 // the walk stopped short: an Adobe segment may follow
	return l
}

// comps returns the component count, 4 when unknown.
func (l *jpegLayout) comps() int {
	if !l.ok {
		return 4
	}
	return l.ncomp
}

// blocks returns the 8×8 blocks of a w×h frame, each component padded to whole MCUs:
// the planes of every decoder here hold 64 samples a block.
func (l *jpegLayout) blocks(w, h int) int64 {
	if !l.ok { // four components with any sampling: at most 3 more blocks a row and column
		return 4 * int64((w+7)/8+3) * int64((h+7)/8+3)
	}
	mx, my := int64((w+8*l.hmax-1)/(8*l.hmax)), int64((h+8*l.vmax-1)/(8*l.vmax))
	n := 0
	for i := range l.ncomp {
		n += l.h[i] * l.v[i]
	}
	return mx * my * int64(n)
}

// multiScan reports whether libjpeg may keep the whole image's coefficients: a
// progressive frame, or a sequential one whose first scan leaves components out.
func (l *jpegLayout) multiScan() bool {
	return !l.ok || l.sof == 0xc2 || l.sof == 0xca || l.firstScan < l.ncomp
}

// goFast reports whether jpegFast takes the frame: sequential Huffman, 8-bit, greyscale or
// YCbCr with chroma at the lowest rate. It declines the others before allocating.
func (l *jpegLayout) goFast() bool {
	if !l.ok || (l.sof != jpegseg.SOF0 && l.sof != jpegseg.SOF1) || l.precision != 8 {
		return false
	}
	switch l.ncomp {
	case 1:
		return true
	case 3:
		_, ok := ycbcrRatio(l.hmax, l.vmax)
		return ok && l.h[1] == 1 && l.v[1] == 1 && l.h[2] == 1 && l.v[2] == 1
	}
	return false
}

// turboSubsamp returns the TurboJPEG subsampling of a frame that
// tjDecompressToYUVPlanes decodes: 8-bit greyscale or YCbCr, chroma at the lowest rate,
// luma at one of TurboJPEG's ratios. It declines the others before the planes are
// allocated.
func (l *jpegLayout) turboSubsamp() (int, bool) {
	if !l.ok || l.precision != 8 || l.rgb || !turboFrame(l.sof) {
		return 0, false
	}
	if l.ncomp == 1 {
		return turbojpeg.SAMPGray, true
	}
	if l.ncomp != 3 || l.h[1] != 1 || l.v[1] != 1 || l.h[2] != 1 || l.v[2] != 1 {
		return 0, false
	}
	switch [2]int{l.h[0], l.v[0]} {
	case [2]int{1, 1}:
		return turbojpeg.SAMP444, true
	case [2]int{2, 1}:
		return turbojpeg.SAMP422, true
	case [2]int{2, 2}:
		return turbojpeg.SAMP420, true
	case [2]int{1, 2}:
		return turbojpeg.SAMP440, true
	case [2]int{4, 1}:
		return turbojpeg.SAMP411, true
	}
	return 0, false
}

// turboFrame reports whether libjpeg-turbo 2.x decodes frames with marker sof: Huffman
// or arithmetic, sequential or progressive.
func turboFrame(sof byte) bool {
	return sof == jpegseg.SOF0 || sof == jpegseg.SOF1 || sof == jpegseg.SOF2 || sof == 0xc9 || sof == 0xca
}
