package synth_test

import (
	"bytes"
	"fmt"
	"image"
	_ "image/jpeg" // registers "jpeg" for image.DecodeConfig
	"log"
	"os"
	"path/filepath"

	"github.com/conveyor-ml/conveyor/internal/synth"
)

func Example() {
	img := synth.Generate(1, 3, 0, 500, 375)
	var buf bytes.Buffer
	if err := synth.EncodeJPEG(&buf, img, &synth.JPEGOptions{Progressive: true}); err != nil {
		log.Fatal(err)
	}
	cfg, name, err := image.DecodeConfig(&buf)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(name, cfg.Width, cfg.Height)
	// Output: jpeg 500 375
}

func ExampleWriteTree() {
	dir, err := os.MkdirTemp("", "synth")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	files, err := synth.WriteTree(dir, &synth.TreeOptions{
		Classes:  2,
		PerClass: 2,
		Formats:  []synth.Format{synth.JPEG, synth.PNG},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range files {
		rel, _ := filepath.Rel(dir, f.Path)
		fmt.Println(filepath.ToSlash(rel), f.Label, f.Format)
	}
	// Output:
	// class00/00000.jpg 0 jpeg
	// class00/00001.png 0 png
	// class01/00002.jpg 1 jpeg
	// class01/00003.png 1 png
}
