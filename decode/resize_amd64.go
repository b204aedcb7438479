//go:build amd64 && !purego

package decode

// useAVX2 selects the assembly resampling kernels. Tests turn it off to check that the
// Go kernels compute the same pixels.
var useAVX2 = hasAVX2()

// hasAVX2 reports whether the CPU has AVX2 and the OS saves the YMM registers, as
// golang.org/x/sys/cpu decides it.
func hasAVX2() bool {
	maxID, _, _, _ := cpuid(0, 0)
	if maxID < 7 {
		return false
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const osxsave, avx = 1 << 27, 1 << 28
	if ecx1&osxsave == 0 || ecx1&avx == 0 {
		return false
	}
	if xcr0, _ := xgetbv(); xcr0&6 != 6 { // XMM and YMM state
		return false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	return ebx7&(1<<5) != 0
}

func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)

func xgetbv() (eax, edx uint32)

// vert8to16AVX2 is vert8to16 for the first n bytes of a row, n a multiple of 16, with
// pairs pairs of weights (len(w) = 2*pairs).
//
//go:noescape
func vert8to16AVX2(dst *uint16, src *uint8, stride int, w *int16, pairs int, n int)

// vert16to8AVX2 is vert16to8 for the first n samples, n a multiple of 16; stride is in
// bytes.
//
//go:noescape
func vert16to8AVX2(dst *uint8, src *uint16, stride int, w *int16, pairs int, n int)

// horiz8to16AVX2 is horiz8to16 for the first out outputs; w is in wideWeights' layout
// with groups groups of four taps per output.
//
//go:noescape
func horiz8to16AVX2(dst *uint16, src *uint8, start *int32, w *int16, groups int, out int)

// horiz16to8AVX2 is horiz16to8 for the first out outputs.
//
//go:noescape
func horiz16to8AVX2(dst *uint8, src *uint16, start *int32, w *int16, groups int, out int)

// horiz16to8x1AVX2 resamples the first 4*quads outputs of a one-channel intermediate row;
// w is in planeWeights' layout with groups groups of four taps.
//
//go:noescape
func horiz16to8x1AVX2(dst *uint8, src *uint16, start *int32, w *int16, groups int, quads int)

// horiz8to16x1AVX2 is horiz8to16x1 for the first 4*quads outputs of a row of a plane.
//
//go:noescape
func horiz8to16x1AVX2(dst *uint16, src *uint8, start *int32, w *int16, groups int, quads int)

// horiz8to16x1ShufAVX2 is horiz8to16x1AVX2 for quads whose taps lie within 16 bytes of
// their first output's start, with shuf in shuffles' layout. It reads the 16 bytes from
// each quad's start plus 4g for each group g.
//
//go:noescape
func horiz8to16x1ShufAVX2(dst *uint16, src *uint8, start *int32, w *int16, shuf *uint8, groups int, quads int)

// ycbcrRowAVX2 converts 8*blocks pixels of full-resolution planes to packed RGB.
//
//go:noescape
func ycbcrRowAVX2(dst *uint8, y, cb, cr *uint8, blocks int)

// upsampleHVAVX2 is upsampleHV for the outputs of 16*blocks chroma samples, near[0] the
// first; it reads near[-1] and far[-1] through one sample past the last.
//
//go:noescape
func upsampleHVAVX2(dst, near, far *uint8, blocks int)

// gamutRowAVX2 is gamutExcess's sum over 8*blocks samples of a row of a horizontally 2:1
// subsampled image: sample k has chroma cb[2k], cr[2k] and luma y[4k]. It reads 32*blocks
// luma bytes and 16*blocks chroma bytes.
//
//go:noescape
func gamutRowAVX2(y, cb, cr *uint8, blocks int) int32
