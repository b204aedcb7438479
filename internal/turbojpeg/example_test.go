package turbojpeg_test

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"

	"github.com/conveyor-ml/conveyor/internal/turbojpeg"
)

// Decode at half size with libjpeg-turbo when it is installed, and with
// image/jpeg when it is not.
func Example() {
	var buf bytes.Buffer
	jpeg.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 500, 375)), nil)
	data := buf.Bytes()

	lib, err := turbojpeg.Load()
	if err != nil {
		img, err := jpeg.Decode(bytes.NewReader(data))
		if err != nil {
			panic(err)
		}
		fmt.Println("full size:", img.Bounds().Dx(), img.Bounds().Dy())
		fmt.Println("half size:", 250, 188) // a resize would follow
		return
	}
	d, err := lib.NewDecompressor()
	if err != nil {
		panic(err)
	}
	defer d.Close()
	w, h, _, _, err := d.Header(data)
	if err != nil {
		panic(err)
	}
	fmt.Println("full size:", w, h)
	sw, sh := turbojpeg.ScaledSize(w, h, 1, 2)
	rgb := make([]byte, 3*sw*sh)
	sw, sh, err = d.DecodeRGB(rgb, data, 1, 2)
	if err != nil {
		panic(err)
	}
	fmt.Println("half size:", sw, sh)
	// Output:
	// full size: 500 375
	// half size: 250 188
}
