package pipeline

import "fmt"

// Fidelity says how closely the loader's pixels follow torchvision's on PIL images.
type Fidelity int

const (
	// Fast takes the shortcuts that make decoding cheap: JPEGs decode at a reduced DCT
	// scale when the resize allows it, only the crop of RandomResizedCrop is decoded
	// (unless FullDecode), JPEG planes are resampled before converting to RGB, and the
	// resampling kernels keep 16-bit intermediates. Pixels are within a measured bound of
	// torchvision's (docs/DESIGN.md, "Fidelity"; testdata/golden).
	Fast Fidelity = iota
	// Exact gives torchvision 0.14's pixels with Pillow 9.4, bit for bit, with the
	// native decoders (libjpeg-turbo, libwebp): every image decodes in full at full scale
	// (decode.Options.Exact), and Resize, RandomResizedCrop and the decoder's resize use
	// Pillow's arithmetic (decode.Resizer.Exact). EXIF orientation follows
	// Decode.IgnoreOrientation: true matches torchvision's stock ImageFolder (its
	// pil_loader does not rotate), false a loader that calls ImageOps.exif_transpose.
	// The pure-Go JPEG decoder is not bit-exact (docs/DESIGN.md, "Fidelity").
	Exact
)

func (f Fidelity) String() string {
	switch f {
	case Fast:
		return "fast"
	case Exact:
		return "exact"
	}
	return fmt.Sprintf("Fidelity(%d)", int(f))
}

// Set sets f from its name, "fast" or "exact" (f is a flag.Value).
func (f *Fidelity) Set(name string) error {
	for v := Fast; v <= Exact; v++ {
		if v.String() == name {
			*f = v
			return nil
		}
	}
	return fmt.Errorf("pipeline: unknown fidelity %q (want fast or exact)", name)
}
