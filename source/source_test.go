package source

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/conveyor-ml/conveyor/internal/treetest"
)

func TestImageFolder(t *testing.T) {
	fsys := fstest.MapFS{
		"b/x.JPG":           {Data: []byte("1")},
		"a/z.png":           {Data: []byte("2")},
		"a/sub/y.jpeg":      {Data: []byte("3")},
		"a/notes.txt":       {Data: []byte("skip")},
		"c/.hidden/q.png":   {Data: []byte("skip")},
		"c/w.webp":          {Data: []byte("4")},
		"toplevel.jpg":      {Data: []byte("skip")},
		".git/config":       {Data: []byte("skip")},
		"b/nested/deep.Tif": {Data: []byte("5")},
	}
	src, err := ImageFolder(fsys, ".", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		path  string
		label int
	}{{"a/sub/y.jpeg", 0}, {"a/z.png", 0}, {"b/nested/deep.Tif", 1}, {"b/x.JPG", 1}, {"c/w.webp", 2}}
	if src.Len() != len(want) {
		t.Fatalf("%d samples, want %d", src.Len(), len(want))
	}
	for i, w := range want {
		if src.Path(i) != w.path || src.Label(i) != w.label {
			t.Errorf("sample %d = %s/%d, want %s/%d", i, src.Path(i), src.Label(i), w.path, w.label)
		}
	}
	if got := src.Classes(); strings.Join(got, ",") != "a,b,c" {
		t.Errorf("classes %v", got)
	}
	f, err := src.Open(3)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if string(b) != "1" {
		t.Errorf("Open(3) read %q", b)
	}
	for _, bad := range []fstest.MapFS{{"x.jpg": {}}, {"a/readme.md": {}}} {
		if _, err := ImageFolder(bad, ".", nil); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestManifest(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []string
		labels     []int
		err        string
	}{
		{name: "data/list.csv", text: "path,label\nimg/a.jpg,3\n img/b.png , 1\n", want: []string{"img/a.jpg", "img/b.png"}, labels: []int{3, 1}},
		{name: "list.csv", text: "a.jpg,0\nb.jpg,x\n", want: []string{"a.jpg", "b.jpg"}, labels: []int{0, 1}}, // names: "0", "x"
		{name: "list.csv", text: "a.jpg,4194304\n", err: "above the largest class index"},
		{name: "list.csv", text: "../a.jpg,0\n", err: "relative"},
		{name: "list.csv", text: "a.jpg,-1\n", err: "negative"},
		{name: "d/list.jsonl", text: "{\"path\":\"a.jpg\",\"label\":2}\n\n{\"path\":\"s/b.jpg\",\"label\":0}\n", want: []string{"a.jpg", "s/b.jpg"}, labels: []int{2, 0}},
		{name: "list.jsonl", text: "{\"path\":\"a.jpg\"}\n", err: "want"},
	} {
		t.Run(tc.name+"/"+tc.err, func(t *testing.T) {
			fsys := fstest.MapFS{tc.name: {Data: []byte(tc.text)}}
			src, err := Manifest(fsys, tc.name)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.want {
				if src.Path(i) != tc.want[i] || src.Label(i) != tc.labels[i] {
					t.Errorf("sample %d: %s/%d", i, src.Path(i), src.Label(i))
				}
			}
		})
	}
}

// TestZipAndManifestSources runs the loader over a zip archive and over a manifest: any
// fs.FS works.
func TestZipAndManifestSources(t *testing.T) {
	dir := treetest.Shared(t)
	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	var manifest strings.Builder
	for _, p := range treetest.Files(t, dir) {
		rel := treetest.Rel(t, dir, p)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		w, _ := zw.Create("train/" + rel)
		w.Write(data)
		fmt.Fprintf(&manifest, "%s,%d\n", rel, int(rel[len("class0")]-'0'))
	}
	zw.Close()
	zr, err := zip.NewReader(bytes.NewReader(zbuf.Bytes()), int64(zbuf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	zsrc, err := ImageFolder(zr, "train", nil)
	if err != nil {
		t.Fatal(err)
	}
	dsrc, err := Dir(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ref := collect(t, newLoader(t, dsrc, testConfig(2)), context.Background(), 0, 0)
	got := collect(t, newLoader(t, zsrc, testConfig(2)), context.Background(), 0, 0)
	if !bytes.Equal(ref.data, got.data) {
		t.Error("zip archive and directory give different batches")
	}
	mdir, err := Manifest(os.DirFS(dir), "manifest.csv")
	if err == nil {
		t.Fatalf("missing manifest opened: %v", mdir)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.csv"), []byte(manifest.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(filepath.Join(dir, "manifest.csv"))
	mdir, err = Manifest(os.DirFS(dir), "manifest.csv")
	if err != nil {
		t.Fatal(err)
	}
	got = collect(t, newLoader(t, mdir, testConfig(2)), context.Background(), 0, 0)
	if !bytes.Equal(ref.data, got.data) {
		t.Error("manifest and directory give different batches")
	}
}

// TestIndexBytesPerSample measures the index cost of a 1,000,000-entry manifest with
// ImageNet-style paths ("n01440764/n01440764_10026.JPEG", 30 bytes).
func TestIndexBytesPerSample(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	const n = 1_000_000
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "n%08d/n%08d_%05d.JPEG,%d\n", i%1000, i%1000, i%100000, i%1000)
	}
	fsys := fstest.MapFS{"train.csv": {Data: []byte(b.String())}}
	b.Reset()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	src, err := Manifest(fsys, "train.csv")
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	idx := src.(*manifestSource).index.bytes()
	perSample := float64(idx) / n
	heap := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
	t.Logf("1,000,000-entry manifest: index %.1f bytes/sample (30-byte paths + 8), heap growth %.1f bytes/sample", perSample, heap)
	if perSample > 30+8+1 || heap > 64 {
		t.Errorf("index costs %.1f bytes/sample (heap %.1f), want ≤ path + 9", perSample, heap)
	}
	runtime.KeepAlive(src)
	var _ fs.FS = fsys
}
