// Package libwebp decodes WebP images with libwebp (libwebp.so.7, Debian package
// libwebp7), opened at run time without cgo. It binds three functions of libwebp's simple
// decoding API (decode.h): WebPGetDecoderVersion, WebPGetInfo and WebPDecodeRGBInto.
//
// libwebp is what PIL decodes WebP with, so the pixels are PIL's. It decodes lossy WebP
// about twice as fast as golang.org/x/image/webp on photos. Every function is safe for
// concurrent use: the simple API keeps no state between calls.
package libwebp

import (
	"errors"
	"fmt"
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
	version, info, decodeRGBInto uintptr
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
