package decode

// Image is an 8-bit RGB image with packed pixels: byte 3*x+c of row y, at
// Pix[y*Stride+3*x+c], is channel c (0 red, 1 green, 2 blue) of pixel (x, y).
//
// Images are the currency between decode, augment and the loader. Their memory is owned by
// whoever allocated them (usually a Decoder or an augment.Context) and is reused for the
// next sample, so an Image is valid only until its owner's next call.
type Image struct {
	Pix    []uint8
	Width  int
	Height int
	Stride int // bytes per row, at least 3*Width
}

// Reset makes m a width×height image with Stride 3*width, reusing m.Pix's memory when it
// is large enough. Pixel contents are unspecified afterwards.
func (m *Image) Reset(width, height int) {
	n := 3 * width * height
	if cap(m.Pix) < n {
		m.Pix = make([]uint8, n)
	}
	m.Pix = m.Pix[:n]
	m.Width, m.Height, m.Stride = width, height, 3*width
}

// FlipHorizontal reverses the order of the pixels in every row of m, in place.
func (m *Image) FlipHorizontal() {
	for y := range m.Height {
		row := m.Row(y)
		for i, j := 0, len(row)-3; i < j; i, j = i+3, j-3 {
			a, b := row[i:i+3:i+3], row[j:j+3:j+3]
			a[0], a[1], a[2], b[0], b[1], b[2] = b[0], b[1], b[2], a[0], a[1], a[2]
		}
	}
}

// Row returns the 3*Width bytes of row y.
func (m *Image) Row(y int) []uint8 {
	o := y * m.Stride
	return m.Pix[o : o+3*m.Width]
}
