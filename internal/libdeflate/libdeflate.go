// Package libdeflate inflates whole zlib streams with libdeflate (libdeflate.so.0, Debian
// package libdeflate0), opened at run time without cgo. libdeflate decompresses a buffer
// whose output size is known in one call, two to three times faster than compress/zlib;
// package decode uses it for PNG, whose filtered size the header gives.
package libdeflate

import (
	"errors"
	"runtime"
	"sync"
	"unsafe"

	"github.com/conveyor-ml/conveyor/internal/dl"
)

// ErrData is returned for a stream that is corrupt, fails its Adler-32 check, or does not
// inflate to exactly the size expected.
var ErrData = errors.New("libdeflate: bad or mis-sized zlib data")

// Lib is the loaded libdeflate.
type Lib struct {
	alloc, free, zlibDecompress uintptr
}

var (
	loadOnce sync.Once
	loaded   *Lib
	loadErr  error
)

var libName = dl.Name("libdeflate.so.0", "libdeflate.0.dylib")

// Load opens libdeflate once per process; later calls return the same *Lib or error.
func Load() (*Lib, error) {
	loadOnce.Do(func() { loaded, loadErr = load(libName) })
	return loaded, loadErr
}

func load(name string) (*Lib, error) {
	l := &Lib{}
	if err := dl.Bind("libdeflate", name, map[string]*uintptr{
		"libdeflate_alloc_decompressor": &l.alloc,
		"libdeflate_free_decompressor":  &l.free,
		"libdeflate_zlib_decompress":    &l.zlibDecompress,
	}); err != nil {
		return nil, err
	}
	return l, nil
}

// Decompressor holds libdeflate's decompressor state (about 32 KB of C memory). It is not
// safe for concurrent use; Close frees it.
type Decompressor struct {
	lib *Lib
	h   uintptr
}

// NewDecompressor allocates a decompressor.
func (l *Lib) NewDecompressor() (*Decompressor, error) {
	h := dl.Call(l.alloc)
	if h == 0 {
		return nil, errors.New("libdeflate: libdeflate_alloc_decompressor failed")
	}
	return &Decompressor{lib: l, h: h}, nil
}

// Close frees the decompressor; it is idempotent.
func (d *Decompressor) Close() {
	if d.h != 0 {
		dl.Call(d.lib.free, d.h)
		d.h = 0
	}
}

// Zlib inflates the zlib stream in into out, which must be exactly the inflated size:
// anything else, like a corrupt stream or a failed checksum, is ErrData.
func (d *Decompressor) Zlib(out, in []byte) error {
	if d.h == 0 {
		return errors.New("libdeflate: decompressor is closed")
	}
	if len(in) == 0 || len(out) == 0 {
		return ErrData
	}
	// A NULL actual_out_nbytes_ret asks for exactly len(out) bytes (LIBDEFLATE_SHORT_OUTPUT
	// otherwise); LIBDEFLATE_SUCCESS is 0.
	r := int32(dl.Call(d.lib.zlibDecompress, d.h, uintptr(unsafe.Pointer(&in[0])), uintptr(len(in)),
		uintptr(unsafe.Pointer(&out[0])), uintptr(len(out)), 0))
	runtime.KeepAlive(in)
	runtime.KeepAlive(out)
	if r != 0 {
		return ErrData
	}
	return nil
}
