package source

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/internal/treetest"
	"github.com/conveyor-ml/conveyor/pipeline"
)

func TestSubsetConcatSplit(t *testing.T) {
	src, err := Dir(treetest.Shared(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := Subset(src, []int{5, 0, 5, 59})
	if err != nil {
		t.Fatal(err)
	}
	if sub.Len() != 4 || sub.Path(0) != src.Path(5) || sub.Label(3) != src.Label(59) || !slices.Equal(sub.Classes(), src.Classes()) {
		t.Fatalf("subset: %d samples, %q, label %d, classes %v", sub.Len(), sub.Path(0), sub.Label(3), sub.Classes())
	}
	if _, err := Subset(src, []int{60}); err == nil || !strings.Contains(err.Error(), "index 60") {
		t.Errorf("out-of-range index: %v", err)
	}
	cat, err := Concat(src, sub)
	if err != nil {
		t.Fatal(err)
	}
	if cat.Len() != 64 || cat.Path(60) != src.Path(5) || cat.Path(59) != src.Path(59) || cat.Label(63) != src.Label(59) {
		t.Fatalf("concat: %d samples, %q %q", cat.Len(), cat.Path(60), cat.Path(59))
	}
	other, err := Manifest(fstest.MapFS{"m.csv": {Data: []byte("a.jpg,dog\n")}}, "m.csv")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Concat(src, other); err == nil || !strings.Contains(err.Error(), "classes") {
		t.Errorf("concat of sources with different classes: %v", err)
	}

	train, val, err := Split(src, 0.25, 7)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	perClass := map[int]int{}
	for _, s := range []pipeline.Source{train, val} {
		prev := ""
		for i := range s.Len() {
			p := s.Path(i)
			seen[p]++
			if p < prev {
				t.Fatalf("split keeps index order: %q after %q", p, prev)
			}
			prev = p
			if s == val {
				perClass[s.Label(i)]++
			}
		}
	}
	if len(seen) != src.Len() || train.Len()+val.Len() != src.Len() {
		t.Fatalf("split: %d train + %d val, %d distinct of %d", train.Len(), val.Len(), len(seen), src.Len())
	}
	for c := range 3 {
		if perClass[c] != 5 { // 25% of each class's 20 samples
			t.Errorf("class %d: %d validation samples, want 5", c, perClass[c])
		}
	}
	again, _, _ := Split(src, 0.25, 7)
	reseeded, _, _ := Split(src, 0.25, 8)
	same, differs := true, false
	for i := range train.Len() {
		same = same && again.Path(i) == train.Path(i)
		differs = differs || reseeded.Path(i) != train.Path(i)
	}
	if !same || !differs {
		t.Errorf("split: same seed same split %t, another seed another split %t", same, differs)
	}
	for _, f := range []float64{0, 1, -0.5} {
		if _, _, err := Split(src, f, 1); err == nil {
			t.Errorf("Split(%g) accepted", f)
		}
	}
}

// A converted dataset wrapped in Subset or Concat, mixed with image files, or embedded
// in a user's type is still read as stored pixels: no bad samples. A type that hides the
// capability fails New, saying what is missing.
func TestWrappedConvertedDataset(t *testing.T) {
	src, err := Dir(treetest.Shared(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	c := openCache(t, dst, cache.S2)
	opts := &pipeline.ConvertOptions{Decode: decode.Options{Resize: decode.ResizePolicy{Mode: decode.ResizeShorter, Size: 32}}, Workers: 2, Logf: t.Logf}
	if _, err := pipeline.Convert(context.Background(), src, c, opts); err != nil {
		t.Fatal(err)
	}
	conv, err := OpenConverted(dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conv.Close()
	all := make([]int, conv.Len())
	for i := range all {
		all[i] = i
	}
	sub, err := Subset(conv, all)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := Concat(conv, src)
	if err != nil {
		t.Fatal(err)
	}
	train, _, err := Split(conv, 0.2, 1)
	if err != nil {
		t.Fatal(err)
	}
	type userWrapper struct{ pipeline.PixelSource }
	want := collect(t, newLoader(t, conv, testConfig(2)), context.Background(), 0, 0)
	for name, s := range map[string]pipeline.Source{"subset": sub, "concat with files": cat, "split": train, "user type": userWrapper{conv}} {
		t.Run(name, func(t *testing.T) {
			ld := newLoader(t, s, testConfig(2))
			got := collect(t, ld, context.Background(), 0, 0)
			if st := ld.Stats(); st.Bad.Samples != 0 || got.batches == 0 {
				t.Fatalf("%d bad samples (%v), %d batches", st.Bad.Samples, st.Bad.Recent, got.batches)
			}
			if name == "subset" && string(got.data) != string(want.data) {
				t.Error("a subset of every sample gives other batches than the dataset")
			}
			if !strings.HasPrefix(ld.Stats().Backends.Decode, "cache:") {
				t.Errorf("backend %q", ld.Stats().Backends.Decode)
			}
		})
	}
	type hiding struct{ pipeline.Source }
	if _, err := pipeline.New(hiding{conv}, testConfig(2)); err == nil || !strings.Contains(err.Error(), "PixelSource") {
		t.Errorf("a wrapper hiding the capability: %v", err)
	}
}

func TestManifestClassNames(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		classes    []string
		labels     []int
		err        string
	}{
		{name: "m.csv", text: "path,class\nx/1.jpg,zebra\nx/2.jpg,ant\nx/3.jpg,zebra\nx/4.jpg,2019\n", classes: []string{"2019", "ant", "zebra"}, labels: []int{2, 1, 2, 0}},
		{name: "m.csv", text: "1.jpg,2\n2.jpg,0\n", classes: []string{"0", "1", "2"}, labels: []int{2, 0}},
		{name: "m.jsonl", text: `{"path":"a.jpg","label":"cat"}` + "\n" + `{"path":"b.jpg","label":"7"}` + "\n", classes: []string{"7", "cat"}, labels: []int{1, 0}},
		{name: "m.jsonl", text: `{"path":"a.jpg","label":"cat"}` + "\n" + `{"path":"b.jpg","label":7}` + "\n", err: "line 2: label 7 is an integer"},
		{name: "m.csv", text: "a.jpg,1\nb.jpg,cat\n", classes: []string{"1", "cat"}, labels: []int{0, 1}},
		{name: "m.csv", text: "a.jpg,cat\nb.jpg,1\n", classes: []string{"1", "cat"}, labels: []int{1, 0}},
		{name: "m.jsonl", text: `{"path":"a.jpg","label":[1]}` + "\n", err: "neither an integer nor a class name"},
	} {
		t.Run(tc.text, func(t *testing.T) {
			src, err := Manifest(fstest.MapFS{tc.name: {Data: []byte(tc.text)}}, tc.name)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want an error saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := make([]int, src.Len())
			for i := range got {
				got[i] = src.Label(i)
			}
			if !slices.Equal(src.Classes(), tc.classes) || !slices.Equal(got, tc.labels) {
				t.Errorf("classes %q labels %v; want %q %v", src.Classes(), got, tc.classes, tc.labels)
			}
		})
	}
}

// Errors name the folder as the caller gave it, and a flat folder says what layout was
// expected.
func TestDirErrors(t *testing.T) {
	flat := t.TempDir()
	if err := os.WriteFile(filepath.Join(flat, "a.jpg"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string][]string{
		"/nonexistent/photos": {"/nonexistent/photos", "no such file"},
		flat:                  {flat, "no class folders, only 1 images directly inside", "DIR/CLASS/*.jpg"},
	} {
		_, err := Dir(dir, nil)
		for _, w := range want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("Dir(%q): %v; want it to say %q", dir, err, w)
			}
		}
	}
}

// An empty class folder is an error naming it, unless FolderOptions allow it.
func TestEmptyClassFolder(t *testing.T) {
	dir := treetest.New(t, 2, 3)
	if err := os.MkdirAll(filepath.Join(dir, "class02", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Dir(dir, nil); err == nil || !strings.Contains(err.Error(), `class folder "class02" holds no image files`) {
		t.Fatalf("Dir with an empty class folder: %v", err)
	}
	src, err := Dir(dir, &FolderOptions{AllowEmptyClasses: true})
	if err != nil {
		t.Fatal(err)
	}
	if src.Len() != 6 || len(src.Classes()) != 3 {
		t.Fatalf("%d samples, classes %q", src.Len(), src.Classes())
	}
}

func TestConcatClassPrefixAndNil(t *testing.T) {
	mk := func(text string) pipeline.Source {
		s, err := Manifest(fstest.MapFS{"m.csv": {Data: []byte(text)}}, "m.csv")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	full, part := mk("a.jpg,0\nb.jpg,9\n"), mk("c.jpg,3\n")
	cat, err := Concat(part, full)
	if err != nil || len(cat.Classes()) != 10 || cat.Label(0) != 3 || cat.Label(2) != 9 {
		t.Fatalf("integer manifests with different largest labels: %v", err)
	}
	if _, err := Concat(mk("a.jpg,cat\n"), mk("b.jpg,dog\n")); err == nil {
		t.Error("sources whose classes differ were concatenated")
	}
	if _, err := Concat(full, nil); err == nil || !strings.Contains(err.Error(), "source 1") {
		t.Errorf("Concat with a nil source: %v", err)
	}
}

// Convert refuses a view whose samples include stored pixels: they have no files to
// convert, and skipping them would write a short dataset.
func TestConvertRefusesStoredSamples(t *testing.T) {
	src, err := Dir(treetest.Shared(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	opts := &pipeline.ConvertOptions{Decode: decode.Options{Resize: decode.ResizePolicy{Mode: decode.ResizeShorter, Size: 32}}, Workers: 2, Logf: t.Logf}
	if _, err := pipeline.Convert(context.Background(), src, openCache(t, dst, cache.S2), opts); err != nil {
		t.Fatal(err)
	}
	conv, err := OpenConverted(dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conv.Close()
	mixed, err := Concat(src, conv)
	if err != nil {
		t.Fatal(err)
	}
	_, err = pipeline.Convert(context.Background(), mixed, openCache(t, t.TempDir(), cache.S2), opts)
	if err == nil || !strings.Contains(err.Error(), "is stored pixels, not an image file") {
		t.Fatalf("Convert of files and a converted dataset: %v", err)
	}
}
