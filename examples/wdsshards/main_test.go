package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/source"

	"github.com/conveyor-ml/conveyor/internal/synth"
)

// The shards hold every image once, shuffled, with its folder's label.
func TestShards(t *testing.T) {
	tree, dst := t.TempDir(), t.TempDir()
	if _, err := synth.WriteTree(tree, &synth.TreeOptions{Classes: 3, PerClass: 7, Seed: 2}); err != nil {
		t.Fatal(err)
	}
	if err := run(tree, dst, "train", 8, 1); err != nil {
		t.Fatal(err)
	}
	folder, err := source.Dir(tree, nil)
	if err != nil {
		t.Fatal(err)
	}
	src, err := source.WebDatasetGlob(filepath.Join(dst, "train-*.tar"), &source.WebDatasetOptions{Classes: folder.Classes()})
	if err != nil {
		t.Fatal(err)
	}
	if src.Len() != 21 || len(src.Shards()) != 3 || src.Bad() != 0 {
		t.Fatalf("%d samples in %d shards, %d bad", src.Len(), len(src.Shards()), src.Bad())
	}
	label := map[string]int{}
	for i := range folder.Len() {
		p := folder.Path(i)
		label[strings.TrimSuffix(p, filepath.Ext(p))] = folder.Label(i)
	}
	inOrder := 0
	for i := range src.Len() {
		_, key, _ := strings.Cut(src.Path(i), "/")
		l, ok := label[key]
		if !ok || l != src.Label(i) {
			t.Fatalf("sample %s: label %d, folder has %d (%v)", src.Path(i), src.Label(i), l, ok)
		}
		delete(label, key)
		if i > 0 && src.Label(i) >= src.Label(i-1) {
			inOrder++
		}
	}
	if len(label) != 0 || inOrder == src.Len()-1 {
		t.Fatalf("%d images missing; shuffled: %v", len(label), inOrder != src.Len()-1)
	}
	if err := run(tree, dst, "x", 0, 1); err == nil || !strings.Contains(err.Error(), "-per") {
		t.Fatalf("error %v, want one naming -per", err)
	}
}

// A folder holding one name as .jpg and .png (bench/photos.sh's tree) is written whole:
// the keys stay apart, whichever shard each file falls in.
func TestShardsRepeatedStems(t *testing.T) {
	tree, dst := t.TempDir(), t.TempDir()
	files, err := synth.WriteTree(tree, &synth.TreeOptions{Classes: 2, PerClass: 3, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		stem := strings.TrimSuffix(f.Path, filepath.Ext(f.Path))
		for _, ext := range []string{".png", ".webp"} { // bytes of a JPEG: only names matter here
			if err := os.WriteFile(stem+ext, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := run(tree, dst, "train", 100, 1); err != nil {
		t.Fatal(err)
	}
	src, err := source.WebDatasetGlob(filepath.Join(dst, "train-*.tar"), &source.WebDatasetOptions{Classes: []string{"class00", "class01"}})
	if err != nil {
		t.Fatal(err)
	}
	if src.Len() != 18 || src.Bad() != 0 {
		t.Fatalf("%d samples, %d bad; want 18 and 0", src.Len(), src.Bad())
	}
}
