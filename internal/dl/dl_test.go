package dl

import (
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

func TestBindErrors(t *testing.T) {
	if !Supported {
		t.Skip("run-time loading is not supported on this platform")
	}
	var p uintptr
	err := Bind("x", "libconveyor-missing.so.9", map[string]*uintptr{"f": &p})
	if err == nil || !strings.Contains(err.Error(), "x: cannot open libconveyor-missing.so.9") {
		t.Errorf("missing library: %v", err)
	}
	var strlen, bogus uintptr
	err = Bind("x", Name("libc.so.6", "libSystem.B.dylib"), map[string]*uintptr{"strlen": &strlen, "conveyor_no_such_symbol": &bogus})
	if err == nil || !strings.Contains(err.Error(), "lacks conveyor_no_such_symbol") || strlen == 0 || bogus != 0 {
		t.Errorf("missing symbol: %v (strlen %#x)", err, strlen)
	}
	b := []byte("hello\x00")
	if Call(strlen, uintptr(unsafe.Pointer(&b[0]))) != 5 {
		t.Error("strlen(\"hello\") != 5")
	}
}

// Frame.Call calls the function with its arguments and allocates nothing on amd64.
func TestFrameCall(t *testing.T) {
	if !Supported {
		t.Skip("run-time loading is not supported on this platform")
	}
	var strlen, memset uintptr
	if err := Bind("x", Name("libc.so.6", "libSystem.B.dylib"), map[string]*uintptr{"strlen": &strlen, "memset": &memset}); err != nil {
		t.Fatal(err)
	}
	b := []byte("hello, frames\x00")
	f := &Frame{Fn: strlen, Args: [6]uintptr{uintptr(unsafe.Pointer(&b[0]))}}
	if n := f.Call(); n != 13 || f.Ret != 13 {
		t.Errorf("strlen = %d (Ret %d), want 13", n, f.Ret)
	}
	m := &Frame{Fn: memset, Args: [6]uintptr{uintptr(unsafe.Pointer(&b[0])), 'x', 5}}
	m.Call()
	if string(b[:7]) != "xxxxx, " {
		t.Errorf("memset: %q", b[:7])
	}
	allocs := testing.AllocsPerRun(100, func() { f.Call() })
	if runtime.GOARCH == "amd64" && allocs != 0 {
		t.Errorf("Frame.Call allocates %.1f times", allocs)
	}
	runtime.KeepAlive(b)
}
