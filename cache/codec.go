package cache

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"runtime/debug"

	"github.com/conveyor-ml/conveyor/decode"
	"github.com/klauspost/compress/zstd"
)

// Codec says how a record's pixels are stored.
type Codec string

// Codecs. S2 is the default.
const (
	Raw  Codec = "raw"  // packed RGB as is: largest, no decoding cost
	S2   Codec = "s2"   // github.com/klauspost/compress/s2: fast, lossless
	Zstd Codec = "zstd" // zstandard: smaller and slower than s2, lossless
	JPEG Codec = "jpeg" // re-encoded as baseline JPEG at Options.Quality: smallest, lossy
)

// Codecs lists every codec.
var Codecs = []Codec{Raw, S2, Zstd, JPEG}

// ParseCodec returns the codec named s.
func ParseCodec(s string) (Codec, error) {
	for _, c := range Codecs {
		if string(c) == s {
			return c, nil
		}
	}
	return "", fmt.Errorf("cache: unknown codec %q (have %v)", s, Codecs)
}

// Lossless reports whether decoding returns exactly the pixels that were stored.
func (c Codec) Lossless() bool { return c != JPEG }

func (c Codec) id() int {
	for i, x := range Codecs {
		if x == c {
			return i
		}
	}
	return -1
}

func codecByID(id uint32) (Codec, error) {
	if int(id) < len(Codecs) {
		return Codecs[id], nil
	}
	return "", fmt.Errorf("unknown codec id %d", id)
}

// Coder holds one goroutine's codec state and buffers: it encodes records for Put and
// decodes the payloads Read returns. It is not safe for concurrent use; make one per
// goroutine with Cache.NewCoder. After warm-up, encoding and decoding s2 and raw
// records allocate nothing.
type Coder struct {
	c    *Cache
	rec  []byte // record being built: header, path, payload
	rd   []byte // records read by Load
	zenc *zstd.Encoder
	zdec *zstd.Decoder
	jdec *decode.Decoder
	rgba *image.RGBA
	jbuf bytes.Buffer
	jin  []byte // a JPEG payload, copied out of the mapping for the decoder
	sum  bool   // Load sums every payload, even one a read of the Cache found right
}

// NewCoder returns a Coder for c.
func (c *Cache) NewCoder() *Coder { return &Coder{c: c} }

// Close releases the Coder's codec state.
func (d *Coder) Close() {
	if d.zenc != nil {
		d.zenc.Close()
	}
	if d.zdec != nil {
		d.zdec.Close()
	}
	if d.jdec != nil {
		d.jdec.Close()
	}
	*d = Coder{c: d.c}
}

// encode appends img's pixels, encoded with codec, to dst.
func (d *Coder) encode(dst []byte, codec Codec, img *decode.Image) ([]byte, error) {
	pix := packed(img)
	switch codec {
	case Raw:
		return append(dst, pix...), nil
	case S2:
		return encodeBands(dst, pix, img.Width, img.Height)
	case Zstd:
		if d.zenc == nil {
			var err error
			// Decode insists on a frame content size equal to the record's: single-segment
			// frames always carry one (others omit it below 256 bytes), and zero frames
			// make an empty image a frame rather than no bytes at all.
			d.zenc, err = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault),
				zstd.WithSingleSegment(true), zstd.WithZeroFrames(true))
			if err != nil {
				return nil, fmt.Errorf("cache: zstd: %w", err)
			}
		}
		return d.zenc.EncodeAll(pix, dst), nil
	case JPEG:
		r := d.rgbaOf(img)
		d.jbuf.Reset()
		if err := jpeg.Encode(&d.jbuf, r, &jpeg.Options{Quality: d.c.opts.Quality}); err != nil {
			return nil, fmt.Errorf("cache: jpeg: %w", err)
		}
		return append(dst, d.jbuf.Bytes()...), nil
	}
	return nil, fmt.Errorf("cache: unknown codec %q", codec)
}

// packed returns img's pixels without row padding, compacting in place when needed.
func packed(img *decode.Image) []byte {
	n := 3 * img.Width * img.Height
	if img.Stride != 3*img.Width {
		for y := 1; y < img.Height; y++ {
			copy(img.Pix[y*3*img.Width:], img.Row(y))
		}
		img.Stride = 3 * img.Width
	}
	return img.Pix[:n]
}

func (d *Coder) rgbaOf(img *decode.Image) *image.RGBA {
	r := image.Rect(0, 0, img.Width, img.Height)
	if d.rgba == nil || cap(d.rgba.Pix) < 4*img.Width*img.Height {
		d.rgba = image.NewRGBA(r)
	}
	d.rgba.Pix = d.rgba.Pix[:4*img.Width*img.Height]
	d.rgba.Stride, d.rgba.Rect = 4*img.Width, r
	for y := range img.Height {
		src, dst := img.Row(y), d.rgba.Pix[y*4*img.Width:]
		for x := range img.Width {
			dst[4*x], dst[4*x+1], dst[4*x+2], dst[4*x+3] = src[3*x], src[3*x+1], src[3*x+2], 0xff
		}
	}
	return d.rgba
}

// Decode turns the payload of r, as Read returned it, into dst's pixels (a new Image when
// dst is nil) and returns the image. A payload that does not
// decode to exactly r's size is ErrCorrupt: it is counted and the record forgotten, as
// Read does for a checksum mismatch.
//
// The payload may be a mapping of the shard (see Read): a fault reading it, the file cut
// short under the mapping, is returned as a damaged record rather than crashing.
func (d *Coder) Decode(dst *decode.Image, r Ref, payload []byte) (*decode.Image, error) {
	img, _, err := d.DecodeRows(dst, r, payload, 0, int(r.Height))
	return img, err
}

// DecodeRows is Decode for the rows y0 to y1-1 of r (0 ≤ y0 ≤ y1 ≤ r.Height), for a
// reader that keeps only part of the image, such as a random crop: it returns an image
// holding at least those rows, whose row 0 is the record's row top. An s2 record
// decompresses only the bands holding those rows and a raw one copies only them; the
// other codecs decode the whole image (top is 0). The bands it skips are not checked: a
// payload checksum (Read's) is what vouches for them.
func (d *Coder) DecodeRows(dst *decode.Image, r Ref, payload []byte, y0, y1 int) (_ *decode.Image, top int, err error) {
	defer d.c.guardFault(r, &err, debug.SetPanicOnFault(true))
	w, h := int(r.Width), int(r.Height)
	n := 3 * w * h
	bad := func(why string, err error) error {
		if err != nil {
			why += ": " + err.Error()
		}
		return d.c.damaged(r, fmt.Errorf("%w: %s payload: %s", ErrCorrupt, r.Codec, why))
	}
	// Bound the pixels before reserving memory for them, as the zstd decoder's limit
	// does, and before 3*w*h can overflow: a record's header is checksummed, not trusted.
	if uint64(r.Width)*uint64(r.Height) > decode.DefaultMaxPixels {
		return nil, 0, bad(fmt.Sprintf("%dx%d is over %d pixels", w, h, int64(decode.DefaultMaxPixels)), nil)
	}
	if y0 < 0 || y1 > h || y0 > y1 {
		return nil, 0, fmt.Errorf("cache: %s: rows %d to %d of a %dx%d record", r.Path, y0, y1, w, h)
	}
	if dst == nil {
		dst = new(decode.Image)
	}
	switch r.Codec {
	case Raw:
		if len(payload) != n {
			return nil, 0, bad(fmt.Sprintf("%d bytes for %dx%d", len(payload), w, h), nil)
		}
		// Copy rather than alias: the payload may be a read-only mapping or a buffer the
		// next read reuses, and augmentation may work in place.
		dst.Reset(w, y1-y0)
		copy(dst.Pix, payload[3*w*y0:3*w*y1])
		return dst, y0, nil
	case S2:
		top, err := decodeBands(dst, payload, w, h, y0, y1)
		if err != nil {
			return nil, 0, bad("s2", err)
		}
		return dst, top, nil
	case Zstd:
		// The frame must declare exactly the record's size and a window no larger, so a
		// damaged or hostile payload cannot make the decoder allocate more than that.
		var zh zstd.Header
		if err := zh.Decode(payload); err != nil || !zh.HasFCS || zh.FrameContentSize != uint64(n) || zh.WindowSize > uint64(max(n, 1<<10)) {
			return nil, 0, bad(fmt.Sprintf("frame declares %d bytes, window %d, for %dx%d", zh.FrameContentSize, zh.WindowSize, w, h), err)
		}
		if d.zdec == nil {
			var err error
			d.zdec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
				zstd.WithDecoderMaxMemory(uint64(d.c.maxRecordBytes())), zstd.WithDecoderMaxWindow(uint64(d.c.maxRecordBytes())))
			if err != nil {
				return nil, 0, fmt.Errorf("cache: zstd: %w", err)
			}
		}
		dst.Reset(w, h)
		out, err := d.zdec.DecodeAll(payload, dst.Pix[:0])
		if err != nil || len(out) != n {
			return nil, 0, bad(fmt.Sprintf("decoded %d bytes for %dx%d", len(out), w, h), err)
		}
		return dst, 0, nil
	case JPEG:
		if d.jdec == nil {
			var err error
			// The Decoder outlives this record: its pixel limit must not be this record's
			// size. Config below holds every payload to exactly its record's size.
			d.jdec, err = decode.NewDecoder(&decode.Options{IgnoreOrientation: true})
			if err != nil {
				return nil, 0, fmt.Errorf("cache: %w", err)
			}
		}
		// The JPEG decoder may be native code (libjpeg-turbo), where a fault in mapped
		// memory could not be recovered: it reads a copy, which costs little beside the
		// decode.
		d.jin = append(d.jin[:0], payload...)
		payload = d.jin
		cfg, err := d.jdec.Config(payload)
		if err != nil || cfg.Width != w || cfg.Height != h {
			return nil, 0, bad(fmt.Sprintf("jpeg of %dx%d for %dx%d", cfg.Width, cfg.Height, w, h), err)
		}
		img, err := d.jdec.Decode(dst, payload)
		if err != nil {
			return nil, 0, bad("jpeg", err)
		}
		return img, 0, nil
	}
	return nil, 0, bad("unknown codec", nil)
}

func grow(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), len(b)+n)
		copy(nb, b)
		return nb
	}
	return b
}
