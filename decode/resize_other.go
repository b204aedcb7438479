//go:build !amd64 || purego

package decode

// useAVX2 is false: the assembly kernels exist only for amd64.
var useAVX2 = false

func vert8to16AVX2(*uint16, *uint8, int, *int16, int, int)       { panic("unreachable") }
func vert16to8AVX2(*uint8, *uint16, int, *int16, int, int)       { panic("unreachable") }
func horiz8to16AVX2(*uint16, *uint8, *int32, *int16, int, int)   { panic("unreachable") }
func horiz16to8AVX2(*uint8, *uint16, *int32, *int16, int, int)   { panic("unreachable") }
func horiz16to8x1AVX2(*uint8, *uint16, *int32, *int16, int, int) { panic("unreachable") }
func horiz8to16x1AVX2(*uint16, *uint8, *int32, *int16, int, int) { panic("unreachable") }
func horiz8to16x1ShufAVX2(*uint16, *uint8, *int32, *int16, *uint8, int, int) {
	panic("unreachable")
}
func ycbcrRowAVX2(*uint8, *uint8, *uint8, *uint8, int) { panic("unreachable") }
func upsampleHVAVX2(*uint8, *uint8, *uint8, int)       { panic("unreachable") }
func gamutRowAVX2(*uint8, *uint8, *uint8, int) int32   { panic("unreachable") }
