package decode_test

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/png"

	"github.com/conveyor-ml/conveyor/decode"
)

// Decode a 640×480 image to RGB with its shorter side resized to 256, as
// torchvision.transforms.Resize(256) would, reusing one destination image.
func ExampleDecoder() {
	var buf bytes.Buffer // stands in for a file read from disk
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, 640, 480))); err != nil {
		panic(err)
	}
	data := buf.Bytes()

	d, err := decode.NewDecoder(&decode.Options{
		Resize: decode.ResizePolicy{Mode: decode.ResizeShorter, Size: 256},
	})
	if err != nil {
		panic(err)
	}
	defer d.Close()

	cfg, err := decode.ReadConfig(data)
	if err != nil {
		panic(err)
	}
	fmt.Println("header:", cfg.Format, cfg.Width, cfg.Height)

	var img decode.Image // reused for every sample
	if _, err := d.Decode(&img, data); err != nil {
		panic(err)
	}
	fmt.Println("decoded:", img.Width, img.Height, len(img.Pix))

	_, err = d.Decode(&img, []byte("not an image"))
	fmt.Println(errors.Is(err, decode.ErrUnsupported), err)
	// Output:
	// header: png 640 480
	// decoded: 341 256 261888
	// true decode: unsupported format: unrecognised signature "not an i"
}
