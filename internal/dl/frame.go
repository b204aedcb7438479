package dl

// Frame is a C call of up to six integer or pointer arguments, prepared once and made
// many times with Frame.Call, which allocates nothing on linux/amd64 (and the BSDs and
// macOS on amd64) where Call, through purego, allocates twice a call.
type Frame struct {
	Fn   uintptr
	Args [6]uintptr
	Ret  uintptr
}
