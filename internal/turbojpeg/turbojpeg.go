package turbojpeg

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/conveyor-ml/conveyor/internal/jpegseg"
)

// Chrominance subsampling, as reported by [Decompressor.Header] (enum TJSAMP).
const (
	SAMP444  = 0 // TJSAMP_444: no chroma subsampling
	SAMP422  = 1 // TJSAMP_422
	SAMP420  = 2 // TJSAMP_420: what image/jpeg and most cameras write
	SAMPGray = 3 // TJSAMP_GRAY
	SAMP440  = 4 // TJSAMP_440
	SAMP411  = 5 // TJSAMP_411
)

// JPEG colorspaces, as reported by [Decompressor.Header] (enum TJCS).
const (
	CSRGB   = 0 // TJCS_RGB
	CSYCbCr = 1 // TJCS_YCbCr
	CSGray  = 2 // TJCS_GRAY
	CSCMYK  = 3 // TJCS_CMYK: not decodable to RGB, see ErrUnsupported
	CSYCCK  = 4 // TJCS_YCCK: not decodable to RGB, see ErrUnsupported
)

// Values from turbojpeg.h (2.1) that the binding uses.
const (
	pfRGB = 0 // TJPF_RGB

	flagFastUpsample  = 256   // TJFLAG_FASTUPSAMPLE
	flagStopOnWarning = 8192  // TJFLAG_STOPONWARNING
	flagLimitScans    = 32768 // TJFLAG_LIMITSCANS: refuse progressive files with > 500 scans (CPU bomb)

	errWarning = 0 // TJERR_WARNING

	// decodeFlags keeps the default accurate DCT and smooth upsampling.
	// TJFLAG_STOPONWARNING makes the first warning stop the decode, so that a
	// warning is unambiguous (see the package comment); TJFLAG_LIMITSCANS is
	// ignored by libraries older than 2.1.
	decodeFlags = flagStopOnWarning | flagLimitScans
)

var (
	// ErrUnsupported is returned by DecodeRGB for JPEGs it cannot turn into
	// RGB: CMYK and YCCK images (libjpeg-turbo has no CMYK->RGB conversion).
	// image/jpeg decodes those.
	ErrUnsupported = errors.New("turbojpeg: unsupported JPEG")
	// ErrClosed is returned when a Decompressor is used after Close.
	ErrClosed = errors.New("turbojpeg: decompressor is closed")
)

// Lib is the loaded libturbojpeg. It is safe for concurrent use.
type Lib struct {
	initDecompress    uintptr // tjhandle tjInitDecompress(void)
	decompressHeader3 uintptr // int tjDecompressHeader3(h, buf, size, *w, *h, *subsamp, *cs)
	decompress2       uintptr // int tjDecompress2(h, buf, size, dst, w, pitch, h, pf, flags)
	decompressYUV     uintptr // int tjDecompressToYUVPlanes(h, buf, size, planes, w, strides, h, flags)
	destroy           uintptr // int tjDestroy(h)
	getErrorStr       uintptr // char *tjGetErrorStr(void)
	getErrorStr2      uintptr // char *tjGetErrorStr2(h); 0 before 2.0
	getErrorCode      uintptr // int tjGetErrorCode(h); 0 before 2.0

	factors [][2]int // from tjGetScalingFactors, largest first
}

var (
	loadOnce sync.Once
	loaded   *Lib
	loadErr  error
)

// Load opens libturbojpeg.so.0 and resolves the symbols this package uses.
// The library is opened once per process and never closed; later calls
// return the same *Lib or error. The error names the library or the missing
// symbols.
func Load() (*Lib, error) {
	loadOnce.Do(func() { loaded, loadErr = load(libName) })
	return loaded, loadErr
}

func load(name string) (*Lib, error) {
	h, err := dlopen(name)
	if err != nil {
		return nil, fmt.Errorf("turbojpeg: cannot open %s: %w", name, err)
	}
	l := &Lib{}
	var missing []string
	sym := func(name string, required bool) uintptr {
		p, err := dlsym(h, name)
		if err != nil || p == 0 {
			if required {
				missing = append(missing, name)
			}
			return 0
		}
		return p
	}
	l.initDecompress = sym("tjInitDecompress", true)
	l.decompressHeader3 = sym("tjDecompressHeader3", true)
	l.decompress2 = sym("tjDecompress2", true)
	l.destroy = sym("tjDestroy", true)
	l.decompressYUV = sym("tjDecompressToYUVPlanes", true)
	l.getErrorStr = sym("tjGetErrorStr", true)
	getScalingFactors := sym("tjGetScalingFactors", true)
	l.getErrorStr2 = sym("tjGetErrorStr2", false)
	l.getErrorCode = sym("tjGetErrorCode", false)
	if len(missing) > 0 {
		return nil, fmt.Errorf("turbojpeg: %s lacks %s (need TurboJPEG API 1.4 or later)",
			name, strings.Join(missing, ", "))
	}

	var n int32
	p := tjGetScalingFactors(getScalingFactors, unsafe.Pointer(&n))
	if p == 0 || n <= 0 || n > 64 {
		return nil, fmt.Errorf("turbojpeg: tjGetScalingFactors returned %d factors", n)
	}
	// The table is a static C array of {int num, denom;}.
	sf := unsafe.Slice((*[2]int32)(cptr(p)), n)
	for _, f := range sf {
		if f[0] > 0 && f[1] > 0 {
			l.factors = append(l.factors, [2]int{int(f[0]), int(f[1])})
		}
	}
	return l, nil
}

// ScalingFactors returns the scaling factors {num, denom} DecodeRGB accepts,
// largest first: {2,1}, {15,8} ... {1,1} ... {1,8} with libjpeg-turbo 2.x.
// The caller may modify the result.
func (l *Lib) ScalingFactors() [][2]int {
	return append([][2]int(nil), l.factors...)
}

func (l *Lib) validFactor(num, denom int) bool {
	for _, f := range l.factors {
		if f[0] == num && f[1] == denom {
			return true
		}
	}
	return false
}

// ScaledSize returns the dimensions of a width x height image decoded at
// scaling factor num/denom, rounding up like TJSCALED.
func ScaledSize(width, height, num, denom int) (int, int) {
	return (width*num + denom - 1) / denom, (height*num + denom - 1) / denom
}

// Decompressor is a TurboJPEG decompression instance. It is not safe for
// concurrent use; several Decompressors may be used in parallel.
type Decompressor struct {
	lib     *Lib
	st      *cstate // nil after Close
	cleanup runtime.Cleanup
}

// cstate is what C sees of a Decompressor. It is separate from the
// Decompressor so that a cleanup can free the handle of a Decompressor that
// was dropped without Close.
type cstate struct {
	h       uintptr    // tjhandle
	out     [4]int32   // tjDecompressHeader3 results: width, height, subsamp, colorspace
	dirty   bool       // h has read a datastream since tjInitDecompress
	planes  [3]uintptr // tjDecompressToYUVPlanes destinations (pinned Go memory)
	strides [3]int32
}

// NewDecompressor returns a new decompression instance (tjInitDecompress).
// Close it to free its C memory; an unreachable Decompressor is
// freed by the garbage collector as a last resort.
func (l *Lib) NewDecompressor() (*Decompressor, error) {
	runtime.LockOSThread() // the library keeps its global error string per thread
	defer runtime.UnlockOSThread()
	h := tjInitDecompress(l.initDecompress)
	if h == 0 {
		return nil, &Error{Op: "tjInitDecompress", Msg: l.errorString(0)}
	}
	d := &Decompressor{lib: l, st: &cstate{h: h}}
	d.cleanup = runtime.AddCleanup(d, func(st *cstate) {
		if st.h != 0 {
			tjDestroy(l.destroy, st.h)
		}
	}, d.st)
	return d, nil
}

// Close frees the instance (tjDestroy). It is idempotent.
func (d *Decompressor) Close() error {
	st := d.st
	if st == nil {
		return nil
	}
	d.st = nil
	d.cleanup.Stop()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if tjDestroy(d.lib.destroy, st.h) != 0 {
		return &Error{Op: "tjDestroy", Msg: d.lib.errorString(0)}
	}
	return nil
}

// reset replaces the handle with a fresh one (about 0.7 us).
//
// libjpeg keeps Huffman and quantization tables in the instance from one
// datastream to the next, so on a used instance a file that lacks them
// decodes with the previous file's: a file without DQT, which fails on a
// fresh instance, "succeeds" with wrong pixels, and a Motion-JPEG frame
// without DHT, which gets the standard tables on a fresh instance, gets the
// last file's (TestNoStateAcrossImages). Decoding on a fresh instance makes
// the output a function of the file alone, as the determinism rule requires.
//
// libjpeg-turbo 2.x also returns from an error inside jpeg_read_header
// without jpeg_abort_decompress, leaving the instance mid-header: the next
// call on it misreads a valid file ("Bogus Huffman table definition").
func (d *Decompressor) reset() error {
	st := d.st
	h := tjInitDecompress(d.lib.initDecompress)
	if h == 0 {
		return &Error{Op: "tjInitDecompress", Msg: d.lib.errorString(0)}
	}
	tjDestroy(d.lib.destroy, st.h)
	st.h, st.dirty = h, false
	runtime.KeepAlive(d) // no cleanup of the old handle while it is replaced
	return nil
}

// Header reads the JPEG header (tjDecompressHeader3): image size, chroma
// subsampling (SAMP*) and colorspace (CS*). It reads only up to the first
// scan, so it is cheap and suited to bounding the size of an image before
// decoding it.
//
// A libjpeg warning in the header (for example an unknown JFIF revision) is
// not an error here when all four results were filled in; DecodeRGB stops at
// such a warning.
func (d *Decompressor) Header(jpeg []byte) (width, height, subsamp, colorspace int, err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return d.header(jpeg)
}

// header does Header's work; the caller holds the OS thread.
func (d *Decompressor) header(jpeg []byte) (width, height, subsamp, colorspace int, err error) {
	st := d.st
	if st == nil {
		return 0, 0, 0, 0, ErrClosed
	}
	if len(jpeg) == 0 {
		return 0, 0, 0, 0, &Error{Op: "tjDecompressHeader3", Msg: "empty input"}
	}
	o := &st.out
	*o = [4]int32{0, 0, -1, -1}
	rc := tjDecompressHeader3(d.lib.decompressHeader3, st.h,
		unsafe.Pointer(unsafe.SliceData(jpeg)), uintptr(len(jpeg)),
		unsafe.Pointer(&o[0]), unsafe.Pointer(&o[1]), unsafe.Pointer(&o[2]), unsafe.Pointer(&o[3]))
	runtime.KeepAlive(jpeg)
	runtime.KeepAlive(d) // else its cleanup may tjDestroy st.h during the call
	st.dirty = true
	width, height, subsamp, colorspace = int(o[0]), int(o[1]), int(o[2]), int(o[3])
	if rc == 0 {
		if width <= 0 || height <= 0 {
			// Since 2.1 a tables-only datastream succeeds with no results.
			return 0, 0, 0, 0, &Error{Op: "tjDecompressHeader3", Msg: "no image in datastream"}
		}
		return width, height, subsamp, colorspace, nil
	}
	e := d.lib.lastError("tjDecompressHeader3", st.h)
	if width == 0 {
		// The results are written only once jpeg_read_header has returned
		// (and jpeg_abort_decompress has run): libjpeg bailed out of it,
		// leaving the instance unusable, and the error was fatal even if
		// tjGetErrorCode says warning (an earlier warning sets it).
		d.reset() // on failure dirty stays set and the next decode retries
		e.Warning = false
		return 0, 0, 0, 0, e
	}
	// tjDecompressHeader3 fails on results it could not fill in, so a
	// warning with all four valid came from a complete header; anything else
	// is an error, however it is flagged.
	if e.Warning && height > 0 && subsamp >= 0 && colorspace >= 0 {
		return width, height, subsamp, colorspace, nil
	}
	e.Warning = false
	return width, height, subsamp, colorspace, e
}

// DecodeRGB decodes jpeg into dst as packed RGB (3 bytes per pixel, rows
// 3*width bytes apart) at scaling factor num/denom, which must be one of
// ScalingFactors. dst must hold at least 3*w*h bytes, where w, h =
// ScaledSize(width, height, num, denom) for the size Header reports; the
// scaled size is returned. Grayscale JPEGs come out with R = G = B.
//
// On error dst may have been partly written. The library keeps no pointer to
// jpeg or dst after the call returns.
func (d *Decompressor) DecodeRGB(dst []byte, jpeg []byte, num, denom int) (width, height int, err error) {
	return d.decode(dst, jpeg, num, denom, decodeFlags)
}

func (d *Decompressor) decode(dst, jpeg []byte, num, denom, flags int) (int, int, error) {
	st := d.st
	if st == nil {
		return 0, 0, ErrClosed
	}
	if !d.lib.validFactor(num, denom) {
		return 0, 0, fmt.Errorf("turbojpeg: scaling factor %d/%d is not one of tjGetScalingFactors", num, denom)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st.dirty {
		if err := d.reset(); err != nil {
			return 0, 0, err
		}
	}
	// Every C call costs two small Go allocations inside purego, so the size
	// comes from a Go scan of the markers when it can (see frameHeader), and
	// from tjDecompressHeader3 for files the scan does not vouch for.
	w, h, ncomp, ok := frameHeader(jpeg)
	if !ok {
		var cs int
		var err error
		// Tables this leaves in the instance come from jpeg itself, which
		// tjDecompress2 reads again: no reset needed in between.
		w, h, _, cs, err = d.header(jpeg)
		if w <= 0 || h <= 0 {
			return 0, 0, err
		}
		// Past a header error with a known size (e.g. an unusual
		// subsampling) tjDecompress2 may still succeed, and past a header
		// warning it stops at the same warning.
		if cs == CSCMYK || cs == CSYCCK {
			ncomp = 4
		}
	}
	if ncomp == 4 {
		return 0, 0, fmt.Errorf("%w: 4-component (CMYK/YCCK) JPEG", ErrUnsupported)
	}
	sw, sh := ScaledSize(w, h, num, denom)
	if need := 3 * sw * sh; len(dst) < need {
		return 0, 0, fmt.Errorf("turbojpeg: dst holds %d bytes, %dx%d RGB needs %d", len(dst), sw, sh, need)
	}
	// tjDecompress2 picks the largest scaling factor whose output fits in
	// sw x sh, and writes at most sh rows of 3*sw bytes: memory-safe whatever
	// the file says. Asking for exactly the scaled size selects num/denom (or,
	// for tiny images, a larger factor with the same output size).
	rc := tjDecompress2(d.lib.decompress2, st.h,
		unsafe.Pointer(unsafe.SliceData(jpeg)), uintptr(len(jpeg)),
		unsafe.Pointer(unsafe.SliceData(dst)), sw, 3*sw, sh, pfRGB, flags)
	runtime.KeepAlive(jpeg)
	runtime.KeepAlive(dst)
	runtime.KeepAlive(d) // else its cleanup may tjDestroy st.h during the call
	st.dirty = true
	if rc != 0 {
		return 0, 0, d.lib.lastError("tjDecompress2", st.h)
	}
	return sw, sh, nil
}

// frameHeader returns the size and component count from the first SOF
// segment, walking the markers from SOI the way libjpeg's read_markers does.
// It reports ok only for a plain structure (no junk between segments, a
// frame type libjpeg-turbo 2.x decodes, a whole frame header, nonzero size);
// on such a file libjpeg either reads the same SOF or fails, so the size is
// the one it decodes. Anything else is left to tjDecompressHeader3.
// FuzzDecodeRGB checks the agreement.
func frameHeader(b []byte) (w, h, ncomp int, ok bool) {
	if len(b) < 4 || b[0] != 0xff || b[1] != 0xd8 {
		return 0, 0, 0, false
	}
	// Strict: bytes other than a marker where one must be are "extraneous
	// data", a libjpeg warning.
	walk := jpegseg.Walker{Data: b, Pos: 2}
	for {
		s, err := walk.Next()
		if err != nil {
			return 0, 0, 0, false
		}
		switch m := s.Marker; {
		case m >= jpegseg.RST0 && m <= jpegseg.RST7 || m == jpegseg.TEM: // no length
		case m == jpegseg.SOF0 || m == jpegseg.SOF1 || m == jpegseg.SOF2 || m == 0xc9 || m == 0xca:
			// SOF0/1/2/9/10: P(1) Y(2) X(2) Nf(1).
			if len(s.Body) < 6 {
				return 0, 0, 0, false
			}
			h = int(s.Body[1])<<8 | int(s.Body[2])
			w = int(s.Body[3])<<8 | int(s.Body[4])
			ncomp = int(s.Body[5])
			return w, h, ncomp, w > 0 && h > 0 && ncomp > 0
		case m == jpegseg.DHT || m == jpegseg.DAC || m == jpegseg.DQT || m == jpegseg.DRI || m == jpegseg.DNL ||
			m >= jpegseg.APP0 && m <= jpegseg.APP15 || m == jpegseg.COM:
			// DHT, DAC, DQT, DRI, DNL, APPn, COM: libjpeg consumes exactly
			// their length or fails.
		default:
			// SOI, EOI, SOS before SOF, 0x00, other SOF types, unknown
			// markers: libjpeg fails or warns.
			return 0, 0, 0, false
		}
	}
}

func csName(cs int) string {
	switch cs {
	case CSCMYK:
		return "CMYK"
	case CSYCCK:
		return "YCCK"
	}
	return fmt.Sprint(cs)
}
