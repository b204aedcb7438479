package dl

import (
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
