//go:build !amd64 || purego

package decode

// useUnfilterAVX is false: the assembly unfilters exist only for amd64.
var useUnfilterAVX = false

func unfilterAVX(filter int, cur, prev *byte, pixels, bpp int) { panic("unreachable") }
