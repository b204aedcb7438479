// Command wdsshards writes an ImageFolder tree as WebDataset tar shards, shuffled so
// that every shard holds a mix of classes (as WebDataset datasets are written), and
// prints the sample count of each shard: the WebDatasetOptions.ShardSamples that let a
// loader index the shards lazily.
//
//	go run ./examples/wdsshards [-src DIR] -dst SHARDS [-per 1000] [-prefix train] [-seed 1]
//	conveyor bench 'SHARDS/train-*.tar'
//
// Without -src it writes the examples' generated set. A file's key is its path without
// the extension; when a folder holds the same name in several formats (a.jpg, a.png),
// WriteWebDataset keeps the keys apart. Shards are written under temporary names and
// renamed when all are done: a run that fails leaves nothing in SHARDS.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/conveyor-ml/conveyor/examples/toy"
	"github.com/conveyor-ml/conveyor/source"

	"github.com/conveyor-ml/conveyor/pipeline"
)

func main() {
	src := flag.String("src", "", "ImageFolder tree DIR/CLASS/*.jpg (JPEG, PNG or WebP files); default: the examples' generated set")
	dst := flag.String("dst", "", "folder the shards are written into (created)")
	per := flag.Int("per", 1000, "samples per shard")
	prefix := flag.String("prefix", "train", "shard names: PREFIX-000000.tar, …")
	seed := flag.Uint64("seed", 1, "shuffle seed; 0 keeps the folder's order (by class)")
	flag.Parse()
	if err := run(*src, *dst, *prefix, *per, *seed); err != nil {
		log.Fatal(err)
	}
}

func run(srcDir, dst, prefix string, per int, seed uint64) error {
	if dst == "" {
		return errors.New("wdsshards: -dst is required")
	}
	if per <= 0 {
		return fmt.Errorf("wdsshards: -per %d is not positive", per)
	}
	srcDir, cleanup, err := toy.DataDir(srcDir)
	if err != nil {
		return err
	}
	defer cleanup()
	folder, err := source.Dir(srcDir, nil)
	if err != nil {
		return err
	}
	order := make([]int, folder.Len())
	for i := range order {
		order[i] = i
	}
	if seed != 0 {
		rand.New(rand.NewPCG(seed, 0x77647373)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	view, err := source.Subset(folder, order)
	if err != nil {
		return err
	}
	src := view.(pipeline.FileSource) // a Subset of files has files
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	var counts []int
	var written []string // temporary files, renamed to their shard names at the end
	defer func() {
		for _, tmp := range written {
			os.Remove(tmp) // gone already when renamed
		}
	}()
	for from := 0; from < src.Len(); from += per {
		to := min(from+per, src.Len())
		name := filepath.Join(dst, fmt.Sprintf("%s-%06d.tar", prefix, len(counts)))
		tmp := filepath.Join(dst, "."+filepath.Base(name)+".partial")
		written = append(written, tmp)
		if err := writeShard(tmp, name, src, from, to); err != nil {
			return err
		}
		counts = append(counts, to-from)
	}
	for k, tmp := range written {
		if err := os.Rename(tmp, filepath.Join(dst, fmt.Sprintf("%s-%06d.tar", prefix, k))); err != nil {
			return err
		}
	}
	fmt.Printf("%d samples of %d classes in %d shards in %s\nShardSamples: %v\nClasses: %q\n", src.Len(), len(src.Classes()), len(counts), dst, counts, src.Classes())
	return nil
}

// writeShard writes samples [from, to) of src to the file tmp, the shard name's
// temporary name.
func writeShard(tmp, name string, src pipeline.FileSource, from, to int) error {
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	err = source.WriteWebDataset(w, src, from, to)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("wdsshards: %s: %w", name, err)
	}
	return nil
}
