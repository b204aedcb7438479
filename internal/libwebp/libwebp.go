// Package libwebp decodes WebP images with libwebp (libwebp.so.7, Debian package
// libwebp7), opened at run time without cgo. It binds three functions of libwebp's simple
// decoding API (decode.h): WebPGetDecoderVersion, WebPGetInfo and WebPDecodeRGBInto, and
// two of its advanced one, WebPInitDecoderConfigInternal and WebPDecode, which crop and
// scale while decoding (DecodeRGBRegion).
//
// libwebp is what PIL decodes WebP with, so the pixels are PIL's. It decodes lossy WebP
// about twice as fast as golang.org/x/image/webp on photos. Every function is safe for
// concurrent use: the simple API keeps no state between calls.
package libwebp

import (
	"errors"
	"fmt"
	"image"
	"runtime"
	"sync"
	"unsafe"

	"github.com/conveyor-ml/conveyor/internal/dl"
)

// ErrDecode is returned for data libwebp cannot decode (corrupt, truncated, animated, or
// not the size given). libwebp's simple API gives no reason.
var ErrDecode = errors.New("libwebp: cannot decode")

// Lib is the loaded libwebp.
type Lib struct {
	version, info, decodeRGBInto, initConfig, decode uintptr
}

var (
	loadOnce sync.Once
	loaded   *Lib
	loadErr  error
)

var libName = dl.Name("libwebp.so.7", "libwebp.7.dylib")

// Load opens libwebp once per process and resolves its symbols; later calls return the
// same *Lib or error. The error names the library or the missing symbols.
func Load() (*Lib, error) {
	loadOnce.Do(func() { loaded, loadErr = load(libName) })
	return loaded, loadErr
}

func load(name string) (*Lib, error) {
	l := &Lib{}
	if err := dl.Bind("libwebp", name, map[string]*uintptr{
		"WebPGetDecoderVersion": &l.version,
		"WebPGetInfo":           &l.info,
		"WebPDecodeRGBInto":     &l.decodeRGBInto,
		// WebPInitDecoderConfig is an inline function of decode.h calling this.
		"WebPInitDecoderConfigInternal": &l.initConfig,
		"WebPDecode":                    &l.decode,
	}); err != nil {
		return nil, err
	}
	return l, nil
}

// Version returns libwebp's version, e.g. "1.2.4".
func (l *Lib) Version() string {
	v := int32(dl.Call(l.version))
	return fmt.Sprintf("%d.%d.%d", v>>16&0xff, v>>8&0xff, v&0xff)
}

// Info returns the size of the WebP image in data, or ErrDecode if libwebp does not
// recognise its header.
func (l *Lib) Info(data []byte) (w, h int, err error) {
	if len(data) == 0 {
		return 0, 0, ErrDecode
	}
	var cw, ch int32
	ok := int32(dl.Call(l.info, uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)),
		uintptr(unsafe.Pointer(&cw)), uintptr(unsafe.Pointer(&ch))))
	runtime.KeepAlive(data)
	if ok == 0 {
		return 0, 0, ErrDecode
	}
	return int(cw), int(ch), nil
}

// DecodeRGB decodes data, a w×h WebP image, into dst as packed RGB rows stride bytes
// apart, dropping alpha (the RGB under transparent pixels is kept, as PIL's
// convert("RGB") does). It fails with ErrDecode, leaving dst's contents unspecified,
// if the image is not w×h or cannot be decoded.
func (l *Lib) DecodeRGB(dst []byte, stride, w, h int, data []byte) error {
	if len(data) == 0 || w <= 0 || h <= 0 || stride < 3*w || len(dst) < (h-1)*stride+3*w {
		return fmt.Errorf("libwebp: DecodeRGB: %dx%d image, stride %d, %d-byte buffer, %d bytes of data", w, h, stride, len(dst), len(data))
	}
	if iw, ih, err := l.Info(data); err != nil || iw != w || ih != h {
		return ErrDecode
	}
	// libwebp checks that the whole image fits in the size given.
	size := (h-1)*stride + 3*w
	r := dl.Call(l.decodeRGBInto, uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)),
		uintptr(unsafe.Pointer(&dst[0])), uintptr(size), uintptr(stride))
	runtime.KeepAlive(data)
	runtime.KeepAlive(dst)
	if r == 0 {
		return ErrDecode
	}
	return nil
}

// decoderConfig is libwebp's WebPDecoderConfig (decode.h, ABI version 2.x) on a 64-bit
// machine: the bitstream's features (40 bytes), the output buffer (WebPDecBuffer, 120
// bytes: colorspace, size, whether the memory is the caller's, then a union whose RGBA
// view is pointer, stride, size, then padding and a private pointer) and the options (76
// bytes), 240 in all.
type decoderConfig struct {
	features [10]int32

	colorspace, width, height, external int32
	rgba                                uintptr
	stride                              int32
	_                                   int32
	size                                uintptr
	_                                   [56]byte // the rest of the union (its YUVA view)
	_                                   [4]uint32
	_                                   uintptr // private_memory

	bypassFiltering, noFancyUpsampling          int32
	useCropping, cropLeft, cropTop              int32
	cropWidth, cropHeight                       int32
	useScaling, scaledWidth, scaledHeight       int32
	useThreads, dithering, flip, alphaDithering int32
	_                                           [5]uint32
}

const (
	decoderABIVersion = 0x0209 // WEBP_DECODER_ABI_VERSION of libwebp 1.2; only the major byte must match
	modeRGB           = 0      // MODE_RGB
)

// DecodeRGBRegion decodes the rectangle r of data, a w×h WebP image, scaled to sw×sh,
// into dst as packed RGB rows stride bytes apart (dropping alpha as DecodeRGB does).
// libwebp decodes no further down than r and scales on the way out, converting only the
// scaled pixels to RGB; r.Min must be even (libwebp rounds it down). With sw×sh the size
// of r the pixels are those DecodeRGB gives inside r. It fails with ErrDecode if the
// image is not w×h or cannot be decoded.
func (l *Lib) DecodeRGBRegion(dst []byte, stride int, data []byte, w, h int, r image.Rectangle, sw, sh int) error {
	if len(data) == 0 || r.Empty() || !r.In(image.Rect(0, 0, w, h)) || r.Min.X%2 != 0 || r.Min.Y%2 != 0 ||
		sw <= 0 || sh <= 0 || stride < 3*sw || len(dst) < (sh-1)*stride+3*sw {
		return fmt.Errorf("libwebp: DecodeRGBRegion: %v of a %dx%d image to %dx%d, stride %d, %d-byte buffer, %d bytes of data", r, w, h, sw, sh, stride, len(dst), len(data))
	}
	if iw, ih, err := l.Info(data); err != nil || iw != w || ih != h {
		return ErrDecode
	}
	c := new(decoderConfig)
	if dl.Call(l.initConfig, uintptr(unsafe.Pointer(c)), decoderABIVersion) == 0 {
		return fmt.Errorf("libwebp %s: WebPInitDecoderConfig refused ABI version %#x", l.Version(), decoderABIVersion)
	}
	c.colorspace, c.external = modeRGB, 1
	c.rgba, c.stride, c.size = uintptr(unsafe.Pointer(&dst[0])), int32(stride), uintptr((sh-1)*stride+3*sw)
	if r != image.Rect(0, 0, w, h) {
		c.useCropping = 1
		c.cropLeft, c.cropTop, c.cropWidth, c.cropHeight = int32(r.Min.X), int32(r.Min.Y), int32(r.Dx()), int32(r.Dy())
	}
	if sw != r.Dx() || sh != r.Dy() {
		c.useScaling, c.scaledWidth, c.scaledHeight = 1, int32(sw), int32(sh)
	}
	status := dl.Call(l.decode, uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)), uintptr(unsafe.Pointer(c)))
	runtime.KeepAlive(data)
	runtime.KeepAlive(dst)
	runtime.KeepAlive(c)
	if int32(status) != 0 || c.width != int32(sw) || c.height != int32(sh) {
		return ErrDecode
	}
	return nil
}
