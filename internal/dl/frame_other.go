//go:build !((darwin || freebsd || linux) && !android && amd64)

package dl

// Call calls f.Fn with f.Args and returns its result, which it also stores in f.Ret.
// On this platform it goes through Call, which allocates.
func (f *Frame) Call() uintptr {
	f.Ret = Call(f.Fn, f.Args[:]...)
	return f.Ret
}
