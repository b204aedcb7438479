//go:build amd64 && !purego

package decode

import "golang.org/x/sys/cpu"

// useUnfilterAVX selects the assembly PNG unfilters for 3- and 4-byte pixels. Tests turn
// it off to check that the Go loops give the same rows.
var useUnfilterAVX = cpu.X86.HasAVX

// unfilterAVX reverses filter (1 Sub, 3 Average, 4 Paeth) on pixels 1..pixels of cur,
// whose pixel 0 is already unfiltered, given the previous unfiltered row prev; bpp is 3
// or 4, and 4 bytes must be readable at pixels 0..pixels+1 of cur and prev.
//
//go:noescape
func unfilterAVX(filter int, cur, prev *byte, pixels, bpp int)
