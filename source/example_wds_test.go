package source_test

import (
	"archive/tar"
	"bytes"
	"fmt"
	"log"
	"os"
	"testing/fstest"

	"github.com/conveyor-ml/conveyor/source"
)

// A WebDataset shard: samples grouped by key, the label from .cls or .json, other
// members as metadata. The shard here is the one in testdata; os.DirFS(dir) or an
// object-storage file system work the same way.
func ExampleWebDataset() {
	data, err := os.ReadFile("testdata/wds/tiny-000000.tar")
	if err != nil {
		log.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(data))
	for h, err := tr.Next(); err == nil; h, err = tr.Next() {
		fmt.Println("member", h.Name)
	}
	fsys := fstest.MapFS{"train-000000.tar": {Data: data}}
	src, err := source.WebDataset(fsys, []string{"train-000000.tar"}, &source.WebDatasetOptions{Logf: log.Printf})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(src.Len(), "samples, classes", src.Classes(), "shard ends", src.ShardEnds(), "metadata", src.MetadataKeys())
	for i := range src.Len() {
		txt, _ := src.Metadata(i, "txt")
		fmt.Printf("%s label %d txt %q\n", src.Path(i), src.Label(i), txt)
	}
	// Output:
	// member s0.jpg
	// member s0.cls
	// member s0.txt
	// member dir/s1.png
	// member dir/s1.json
	// member s2.webp
	// member s2.cls
	// 3 samples, classes [0 1] shard ends [3] metadata [cls txt json]
	// train-000000.tar/s0 label 1 txt "first"
	// train-000000.tar/dir/s1 label 0 txt ""
	// train-000000.tar/s2 label 1 txt ""
}
