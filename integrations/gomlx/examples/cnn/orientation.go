package main

import (
	"fmt"
	"image"
	"os"
	"path/filepath"

	"github.com/conveyor-ml/conveyor/pipeline"
	"github.com/disintegration/imaging"
)

// orientations are the classes of -task orientation: how far each copy of a photograph is
// rotated clockwise.
var orientations = []string{"000", "090", "180", "270"}

// orientationTree writes the photographs of src (files under root) into dir as an
// ImageFolder tree of four classes, each photograph once per class: its shorter side
// resized to side pixels, then rotated by 0, 90, 180 or 270 degrees. Predicting the
// rotation is a task with a label in every photograph, which a few dozen of them can teach
// (the sky is up, faces and trees stand upright), where their source package is not.
func orientationTree(src pipeline.Source, root, dir string, side int) error {
	for _, c := range orientations {
		if err := os.MkdirAll(filepath.Join(dir, c), 0o755); err != nil {
			return err
		}
	}
	for i := range src.Len() {
		p := filepath.Join(root, filepath.FromSlash(src.Path(i)))
		img, err := imaging.Open(p, imaging.AutoOrientation(true))
		if err != nil {
			return fmt.Errorf("cnn: %s: %w", p, err)
		}
		if b := img.Bounds(); b.Dx() < b.Dy() {
			img = imaging.Resize(img, side, 0, imaging.Linear)
		} else {
			img = imaging.Resize(img, 0, side, imaging.Linear)
		}
		for k, c := range orientations {
			var r image.Image = img
			switch k { // imaging rotates counter-clockwise
			case 1:
				r = imaging.Rotate270(img)
			case 2:
				r = imaging.Rotate180(img)
			case 3:
				r = imaging.Rotate90(img)
			}
			name := filepath.Join(dir, c, fmt.Sprintf("%03d.jpg", i))
			if err := imaging.Save(r, name, imaging.JPEGQuality(95)); err != nil {
				return err
			}
		}
	}
	return nil
}
