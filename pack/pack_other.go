//go:build !amd64 || purego

package pack

// hasFMA is false: the float32 kernels exist only for amd64.
var hasFMA = false

func packNCHW32FMA(red, green, blue *float32, src *uint8, k *fmaConsts, n int) { panic("unreachable") }
func packNHWC32FMA(dst *float32, src *uint8, k *fmaConsts, n int)              { panic("unreachable") }

func packNCHW32FMAMirror(red, green, blue *float32, src *uint8, k *fmaConsts, n int) {
	panic("unreachable")
}
