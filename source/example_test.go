package source_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"testing/fstest"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/internal/synth"
	"github.com/conveyor-ml/conveyor/pack"
	"github.com/conveyor-ml/conveyor/pipeline"
	"github.com/conveyor-ml/conveyor/source"
)

// A manifest with label lists and a metadata column: a MultiLabelSource and a
// MetadataSource, whose batches carry multi-hot targets and the captions by slot.
func ExampleManifest_multiLabel() {
	fsys := fstest.MapFS{"list.csv": {Data: []byte(
		"path,labels,caption\n" +
			"a.jpg,cat;dog,two pets\n" +
			"b.jpg,dog,a dog\n")}}
	src, err := source.Manifest(fsys, "list.csv")
	if err != nil {
		log.Fatal(err)
	}
	ml := src.(pipeline.MultiLabelSource)
	md := src.(pipeline.MetadataSource)
	for i := range src.Len() {
		caption, _ := md.Metadata(i, "caption")
		fmt.Printf("%s: labels %v, caption %q\n", src.Path(i), ml.Labels(nil, i), caption)
	}
	fmt.Println(src.Classes(), ml.MultiLabel(), md.MetadataKeys())
	// Output:
	// a.jpg: labels [0 1], caption "two pets"
	// b.jpg: labels [1], caption "a dog"
	// [cat dog] true [caption]
}

// A dataset converted once (conveyor convert, here pipeline.Convert) is a Source of
// stored pixels: a loader over it reads records instead of decoding files.
func ExampleOpenConverted() {
	ctx := context.Background()
	tree := imageFolder(3, 7)
	defer os.RemoveAll(tree)
	dir, err := os.MkdirTemp("", "conveyor-converted-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// Once: what conveyor convert TREE DIR --size 64 does.
	images, err := source.Dir(tree, nil)
	if err != nil {
		log.Fatal(err)
	}
	c, err := cache.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	shorter64 := decode.Options{Resize: decode.ResizePolicy{Mode: decode.ResizeShorter, Size: 64}}
	_, err = pipeline.Convert(ctx, images, c, &pipeline.ConvertOptions{Decode: shorter64})
	if cerr := c.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		log.Fatal(err)
	}

	// Every run after: train from the stored pixels.
	cfg := &pipeline.Config{Batch: pipeline.BatchConfig{Size: 8}, Order: pipeline.OrderConfig{Seed: 1}, Pack: pack.Options{DType: pack.Float32, Normalize: true}}
	if err := pipeline.ApplyRecipe(cfg, "train", 32); err != nil {
		log.Fatal(err)
	}
	src, err := source.OpenConverted(dir, nil) // a Source of stored pixels
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()
	ld, err := pipeline.New(src, cfg) // same Config as for image files; Decode is not used
	if err != nil {
		log.Fatal(err)
	}
	defer ld.Close()

	n := 0
	for b, err := range ld.Epoch(ctx, 0) {
		if err != nil {
			log.Fatal(err)
		}
		n += b.Len
		b.Release()
	}
	fmt.Printf("%d samples of %v from %s\n", n, src.Classes(), ld.Stats().Backends.Decode)
	// Output:
	// 21 samples of [class00 class01 class02] from cache:s2
}

// imageFolder writes a small ImageFolder tree (dir/class00/*.jpg, dir/class01/*.jpg, ...)
// into a new temporary directory, for the examples below.
func imageFolder(classes, perClass int) string {
	dir, err := os.MkdirTemp("", "conveyor-example-")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := synth.WriteTree(dir, &synth.TreeOptions{Classes: classes, PerClass: perClass, Seed: 1}); err != nil {
		log.Fatal(err)
	}
	return dir
}
