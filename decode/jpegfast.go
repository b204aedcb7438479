package decode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"image"

	"github.com/conveyor-ml/conveyor/internal/jpegseg"
)

// goJPEG is the pure-Go JPEG backend: jpegFast decodes sequential files, and what it
// declines goes on to image/jpeg in the standard library's backend, which decides.
type goJPEG struct {
	dec jpegFast
	up  jpegUpsampler
}

func openJPEGFast() (backend, error) { return new(goJPEG), nil }

func (g *goJPEG) name() string { return "go-jpeg" }

func (g *goJPEG) accepts(h *header) bool { return h.format == JPEG }

// decode inverse-transforms only the blocks that meet j.rs. When a resize follows, the
// planes go on to resizeYCbCr; otherwise rs, which is then the whole image, is converted
// to RGB in j.img, chroma upsampled as libjpeg-turbo does (jpegupsample.go).
func (g *goJPEG) decode(j *job) (decoded, error) {
	var m image.Image
	if guard(JPEG, func() (err error) {
		// One chroma sample more each side, for upsampling at r's edges (planar.go).
		r := j.rs.Inset(-2).Intersect(image.Rect(0, 0, j.h.width, j.h.height))
		m, err = g.dec.decode(j.data, j.h.width, j.h.height, r)
		return err
	}) != nil {
		return decoded{}, errDeclined
	}
	sx, sy := wholeSpans(j.rs)
	if j.resized && planar(m) {
		return decoded{crop: j.rs, sx: sx, sy: sy, planes: m}, nil
	}
	if y, ok := m.(*image.YCbCr); ok && j.rs == y.Rect && g.up.toRGB(j.img, y) {
		return decoded{crop: j.rs, sx: sx, sy: sy}, nil
	}
	return decoded{crop: j.conv.toRGBRegion(j.img, m, j.rs), sx: sx, sy: sy}, nil
}

// footprint: the planes at full resolution, padded to whole MCUs, and the RGB image when
// no resize follows. Frames jpegFast leaves to image/jpeg are declined before the planes
// are allocated, except RGB-coded ones, which it finds only after decoding.
func (g *goJPEG) footprint(j *job) estimate {
	l := &j.frame
	if !l.goFast() {
		return estimate{}
	}
	e := estimate{bytes: 64 * l.blocks(j.h.width, j.h.height), src: j.rs.Size(), sure: !l.rgb}
	if j.resized {
		e.planes = true
	} else {
		e.rgb = true
		e.bytes += 3 * int64(j.rs.Dx()) * int64(j.rs.Dy())
	}
	return e
}

// jpegFast is the pure-Go decoder's JPEG path for sequential Huffman-coded files
// (baseline and extended, 8-bit, greyscale or YCbCr), which are nearly all the JPEGs in
// training sets. It is faster than image/jpeg in four ways: it reads entropy-coded data
// straight from the byte slice through a 64-bit bit buffer, decoding most AC coefficients
// with one table lookup that yields run, size and value together; it skips the inverse
// DCT of every block outside the region it is asked for (the crop of RandomResizedCrop),
// while still Huffman-decoding the whole scan so that a file is accepted or rejected the
// same way whatever the crop; it takes a shortcut for blocks with no AC coefficients; and
// it reuses its planes and tables from one image to the next, so a decode allocates
// nothing once warm.
//
// The inverse DCT is the accurate integer one of the IJG's libjpeg (jidctint.c, the
// "islow" method), which libjpeg-turbo also uses by default. Chroma is upsampled, when
// the whole image is converted to RGB, with libjpeg-turbo's default "fancy" triangle
// filter and its rounding (jpegupsample.go), so that the pixels are within 2 levels of
// libjpeg-turbo's on real 4:2:0 and 4:2:2 photos (TestGoJPEGMatchesTurbo); a resized or
// cropped decode resamples the chroma planes directly (planar.go).
//
// Everything else (progressive, arithmetic-coded, lossless, 12-bit, CMYK, RGB-coded, odd
// sampling factors, odd markers) and any file it finds fault with goes to image/jpeg,
// which decides: the decoder returns errJPEGFallback or the fault, and the caller decodes
// again with the standard library, paying twice only for files that are rare or broken.
// It is at least as strict as image/jpeg about markers, restart numbering and table
// indexes; it does accept a few valid files image/jpeg rejects (restart markers in a
// non-interleaved scan, for one), which libjpeg decodes the same way.
type jpegFast struct {
	data []byte
	pos  int    // the next byte of data to load into acc
	acc  uint64 // entropy-coded bits, the next one in the top bit
	n    int    // valid bits in acc
	pad  int    // zero bits appended to acc at a marker or the end of data: never real

	q          [4][64]int32 // quantisation tables, zigzag order
	dc, ac     [4]huffTable
	qok        [4]bool
	dcok, acok [4]bool

	width, height int
	ncomp         int
	comp          [3]jpegComp
	hmax, vmax    int
	mcusX, mcusY  int
	restart       int  // MCUs per restart interval, 0 for none
	rst           int  // restart markers seen in the current scan
	baseline      bool // SOF0: at most two Huffman tables of each class
	adobe         int  // the Adobe APP14 transform flag, -1 without the segment

	planes [3][]byte
	ycc    image.YCbCr
	gray   image.Gray
	blk    [64]int32
}

// jpegComp is one colour component of the frame.
type jpegComp struct {
	id      byte
	idx     int // index in jpegFast.comp and planes
	h, v    int // sampling factors
	tq      int // quantisation table
	td, ta  int // Huffman tables of the current scan
	stride  int // bytes per row of the plane: mcusX*h*8
	bw, bh  int // blocks coded across and down in a scan of this component alone
	x0, x1  int // blocks [x0, x1) × [y0, y1) are inverse-transformed; the rest only decoded
	y0, y1  int
	pred    int32 // DC predictor
	scanned bool
}

// huffTable is a Huffman table with a lookahead of jpegLookBits bits.
type huffTable struct {
	// look[b] for the next jpegLookBits bits b is length<<8 | symbol for a code of at
	// most jpegLookBits bits, 0 for a longer one.
	look [1 << jpegLookBits]uint16
	// fast[b], in AC tables, is value<<8 | run<<4 | bits for a run/size symbol whose code
	// and extra bits fit in the lookahead together (bits of both, value already
	// sign-extended), 0 otherwise.
	fast    [1 << jpegLookBits]int32
	maxcode [17]int32 // the largest code of each length, -1 if none
	delta   [17]int32 // index into vals of a code of each length, minus that code
	vals    [256]uint8
}

const jpegLookBits = 9

// errJPEGFallback says a file is valid as far as jpegFast read it but uses a feature
// jpegFast leaves to image/jpeg.
var errJPEGFallback = errors.New("jpeg feature left to image/jpeg")

// jpegZigzag maps the zigzag index of a coefficient to its natural (row-major) index.
var jpegZigzag = [64]uint8{
	0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5,
	12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6, 7, 14, 21, 28,
	35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
	58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
}

// decode decodes data, whose header says it is w×h, and returns its planes: an
// *image.YCbCr or *image.Gray that shares the decoder's memory until the next call.
// Only the blocks of MCUs that meet the rectangle r are inverse-transformed; pixels
// outside those MCUs are left as they were.
func (d *jpegFast) decode(data []byte, w, h int, r image.Rectangle) (image.Image, error) {
	d.data, d.pos = data, 2
	defer func() { d.data = nil }()
	clear(d.blk[:]) // a block that failed part-way through may have left coefficients
	d.width, d.height, d.ncomp, d.restart, d.adobe = 0, 0, 0, 0, -1
	d.qok, d.dcok, d.acok = [4]bool{}, [4]bool{}, [4]bool{}
	if len(data) < 2 || data[0] != 0xff || data[1] != 0xd8 {
		return nil, errors.New("missing SOI marker")
	}
	for {
		marker, seg, err := d.segment()
		if err != nil {
			return nil, err
		}
		switch {
		case marker == jpegseg.EOI:
			return d.finish()
		case marker == jpegseg.SOF0 || marker == jpegseg.SOF1:
			if d.ncomp != 0 {
				return nil, errJPEGFallback // a second frame
			}
			d.baseline = marker == jpegseg.SOF0
			if err := d.frame(seg, w, h, r); err != nil {
				return nil, err
			}
		case jpegseg.IsSOF(marker):
			return nil, errJPEGFallback // progressive, lossless, arithmetic, hierarchical
		case marker == jpegseg.DHT:
			if err := d.huffman(seg); err != nil {
				return nil, err
			}
		case marker == jpegseg.DQT:
			if err := d.quant(seg); err != nil {
				return nil, err
			}
		case marker == jpegseg.DRI:
			if len(seg) != 2 {
				return nil, errors.New("bad DRI length")
			}
			d.restart = int(binary.BigEndian.Uint16(seg))
		case marker == jpegseg.APP14:
			if len(seg) >= 12 && string(seg[:5]) == "Adobe" {
				d.adobe = int(seg[11])
			}
		case marker == jpegseg.SOS:
			if err := d.scan(seg); err != nil {
				return nil, err
			}
		case marker >= jpegseg.APP0 && marker <= jpegseg.APP15, marker == jpegseg.COM: // APPn, COM
		default:
			return nil, errJPEGFallback // DNL, DHP, EXP, JPGn, ...
		}
	}
}

// segment reads the next marker from d.pos, skipping fill bytes and, as libjpeg and
// image/jpeg do, any stray bytes and stuffed zeros before it, and returns the marker and
// its segment's body (nil for markers without one). d.pos moves past the segment.
// Restart markers out of place are skipped as image/jpeg skips them; a stuffed zero after
// fill bytes, TEM and a second SOI are left to image/jpeg.
func (d *jpegFast) segment() (byte, []byte, error) {
	w := jpegseg.Walker{Data: d.data, Pos: d.pos, Lax: true}
	for {
		s, err := w.Next()
		d.pos = w.Pos
		switch {
		case err == jpegseg.ErrEnd:
			return 0, nil, errors.New("no EOI marker: truncated")
		case err != nil:
			return 0, nil, fmt.Errorf("marker 0x%02x: %w", s.Marker, err)
		case s.Marker >= jpegseg.RST0 && s.Marker <= jpegseg.RST7:
			continue
		case s.Marker == 0x00, s.Marker == jpegseg.TEM, s.Marker == jpegseg.SOI:
			return 0, nil, errJPEGFallback // odd markers: leave them to image/jpeg
		}
		return s.Marker, s.Body, nil
	}
}

// frame reads a baseline or extended sequential frame header and sizes the planes.
func (d *jpegFast) frame(seg []byte, w, h int, r image.Rectangle) error {
	if len(seg) < 6 {
		return errors.New("short SOF segment")
	}
	if seg[0] != 8 {
		return errJPEGFallback // 12-bit
	}
	d.height = int(binary.BigEndian.Uint16(seg[1:]))
	d.width = int(binary.BigEndian.Uint16(seg[3:]))
	d.ncomp = int(seg[5])
	if d.width != w || d.height != h {
		return fmt.Errorf("frame is %dx%d, header said %dx%d", d.width, d.height, w, h)
	}
	if d.ncomp != 1 && d.ncomp != 3 {
		return errJPEGFallback // CMYK, or unusual
	}
	if len(seg) != 6+3*d.ncomp {
		return errors.New("bad SOF length")
	}
	d.hmax, d.vmax = 1, 1
	for i := 0; i < d.ncomp; i++ {
		c := &d.comp[i]
		b := seg[6+3*i:]
		*c = jpegComp{id: b[0], idx: i, h: int(b[1] >> 4), v: int(b[1] & 15), tq: int(b[2])}
		if c.h < 1 || c.h > 4 || c.v < 1 || c.v > 4 || c.tq > 3 {
			return errors.New("bad component sampling factors or table")
		}
		for j := 0; j < i; j++ {
			if d.comp[j].id == c.id {
				return errors.New("repeated component ID")
			}
		}
		d.hmax, d.vmax = max(d.hmax, c.h), max(d.vmax, c.v)
	}
	if d.ncomp == 1 {
		// A single component is coded in 8×8 blocks whatever its sampling factors say.
		d.comp[0].h, d.comp[0].v, d.hmax, d.vmax = 1, 1, 1, 1
	} else if d.comp[1].h != 1 || d.comp[1].v != 1 || d.comp[2].h != 1 || d.comp[2].v != 1 {
		return errJPEGFallback // chroma at other than the lowest rate
	} else if _, ok := ycbcrRatio(d.hmax, d.vmax); !ok {
		return errJPEGFallback
	}
	d.mcusX = (d.width + 8*d.hmax - 1) / (8 * d.hmax)
	d.mcusY = (d.height + 8*d.vmax - 1) / (8 * d.vmax)
	// The MCUs that meet r; inverse-transform only their blocks.
	mx0, mx1 := r.Min.X/(8*d.hmax), (r.Max.X+8*d.hmax-1)/(8*d.hmax)
	my0, my1 := r.Min.Y/(8*d.vmax), (r.Max.Y+8*d.vmax-1)/(8*d.vmax)
	for i := 0; i < d.ncomp; i++ {
		c := &d.comp[i]
		c.stride = d.mcusX * c.h * 8
		rows := d.mcusY * c.v * 8
		// A scan of this component alone codes only the blocks that hold its samples.
		cw := (d.width*c.h + d.hmax - 1) / d.hmax
		ch := (d.height*c.v + d.vmax - 1) / d.vmax
		c.bw, c.bh = (cw+7)/8, (ch+7)/8
		c.x0, c.x1, c.y0, c.y1 = mx0*c.h, mx1*c.h, my0*c.v, my1*c.v
		if n := c.stride * rows; cap(d.planes[i]) < n {
			d.planes[i] = make([]byte, n)
		} else {
			d.planes[i] = d.planes[i][:n]
		}
	}
	return nil
}

// ycbcrRatio returns the image.YCbCr subsampling of luma factors h×v over chroma 1×1.
func ycbcrRatio(h, v int) (image.YCbCrSubsampleRatio, bool) {
	switch {
	case h == 1 && v == 1:
		return image.YCbCrSubsampleRatio444, true
	case h == 2 && v == 1:
		return image.YCbCrSubsampleRatio422, true
	case h == 2 && v == 2:
		return image.YCbCrSubsampleRatio420, true
	case h == 1 && v == 2:
		return image.YCbCrSubsampleRatio440, true
	case h == 4 && v == 1:
		return image.YCbCrSubsampleRatio411, true
	case h == 4 && v == 2:
		return image.YCbCrSubsampleRatio410, true
	}
	return 0, false
}

// quant reads a DQT segment.
func (d *jpegFast) quant(seg []byte) error {
	for len(seg) > 0 {
		pq, tq := seg[0]>>4, int(seg[0]&15)
		if tq > 3 || pq > 1 {
			return errors.New("bad DQT table")
		}
		n := 64 << pq
		if len(seg) < 1+n {
			return errors.New("short DQT segment")
		}
		for k := range 64 {
			if pq == 0 {
				d.q[tq][k] = int32(seg[1+k])
			} else {
				d.q[tq][k] = int32(binary.BigEndian.Uint16(seg[1+2*k:]))
			}
		}
		d.qok[tq] = true
		seg = seg[1+n:]
	}
	return nil
}

// huffman reads a DHT segment and builds its tables.
func (d *jpegFast) huffman(seg []byte) error {
	for len(seg) > 0 {
		if len(seg) < 17 {
			return errors.New("short DHT segment")
		}
		tc, th := seg[0]>>4, int(seg[0]&15)
		if tc > 1 || th > 3 {
			return errors.New("bad DHT table class or index")
		}
		total := 0
		for _, c := range seg[1:17] {
			total += int(c)
		}
		if total == 0 || total > 256 || len(seg) < 17+total {
			return errors.New("bad DHT symbol count")
		}
		t := &d.dc[th]
		if tc == 1 {
			t = &d.ac[th]
		}
		if err := t.build(seg[1:17], seg[17:17+total], tc == 1); err != nil {
			return err
		}
		if tc == 0 {
			d.dcok[th] = true
		} else {
			d.acok[th] = true
		}
		seg = seg[17+total:]
	}
	return nil
}

// build makes the tables for the given code counts per length and symbols.
func (t *huffTable) build(counts, vals []byte, ac bool) error {
	clear(t.look[:])
	clear(t.fast[:])
	copy(t.vals[:], vals)
	code, k := int32(0), 0
	for l := 1; l <= 16; l++ {
		n := int32(counts[l-1])
		t.delta[l] = int32(k) - code
		if n == 0 {
			t.maxcode[l] = -1
		} else {
			t.maxcode[l] = code + n - 1
		}
		if code+n > 1<<l {
			return errors.New("bad Huffman table: codes overflow their length")
		}
		for range n {
			if l <= jpegLookBits {
				sym := vals[k]
				shift := jpegLookBits - l
				for b := code << shift; b < (code+1)<<shift; b++ {
					t.look[b] = uint16(l)<<8 | uint16(sym)
					if run, size := int32(sym>>4), int(sym&15); ac && size != 0 && l+size <= jpegLookBits {
						extra := (b >> (jpegLookBits - l - size)) & (1<<size - 1)
						t.fast[b] = extend(extra, size)<<8 | run<<4 | int32(l+size)
					}
				}
			}
			code++
			k++
		}
		code <<= 1
	}
	return nil
}

// extend turns the s extra bits v of a coefficient into its signed value.
func extend(v int32, s int) int32 {
	if v < 1<<(s-1) {
		v += -1<<s + 1
	}
	return v
}

// finish checks that every component was scanned and returns the image.
func (d *jpegFast) finish() (image.Image, error) {
	if d.ncomp == 0 {
		return nil, errors.New("no frame header")
	}
	for i := 0; i < d.ncomp; i++ {
		if !d.comp[i].scanned {
			return nil, errors.New("a component has no scan")
		}
	}
	rect := image.Rect(0, 0, d.width, d.height)
	if d.ncomp == 1 {
		c := &d.comp[0]
		d.gray = image.Gray{Pix: d.planes[0], Stride: c.stride, Rect: rect}
		return &d.gray, nil
	}
	// RGB-coded files (Adobe transform 0, or components named R, G, B) are image/jpeg's.
	if d.adobe == 0 || d.comp[0].id == 'R' && d.comp[1].id == 'G' && d.comp[2].id == 'B' {
		return nil, errJPEGFallback
	}
	ratio, _ := ycbcrRatio(d.hmax, d.vmax)
	d.ycc = image.YCbCr{
		Y: d.planes[0], Cb: d.planes[1], Cr: d.planes[2],
		YStride: d.comp[0].stride, CStride: d.comp[1].stride,
		SubsampleRatio: ratio, Rect: rect,
	}
	return &d.ycc, nil
}
