package source

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/conveyor-ml/conveyor/internal/synth"
	"github.com/conveyor-ml/conveyor/pipeline"
)

// member is one tar member of a test shard.
type member struct {
	name string
	data []byte
}

// tarOf writes members as a tar file.
func tarOf(t testing.TB, ms ...member) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, m := range ms {
		if err := tw.WriteHeader(&tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.data)), Typeflag: tar.TypeReg, ModTime: time.Unix(1e9, 0)}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(m.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// shardsOf writes src's samples as WebDataset shards of perShard samples in dir: key the
// path without its extension, the image, its label as .cls and its path as .txt. It
// returns the shard names.
func shardsOf(t testing.TB, dir string, src pipeline.FileSource, perShard int) []string {
	t.Helper()
	var names []string
	var ms []member
	flush := func() {
		name := fmt.Sprintf("train-%06d.tar", len(names))
		if err := os.WriteFile(filepath.Join(dir, name), tarOf(t, ms...), 0o644); err != nil {
			t.Fatal(err)
		}
		names, ms = append(names, name), nil
	}
	for i := range src.Len() {
		f, err := src.Open(i)
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		p := src.Path(i)
		key := strings.TrimSuffix(p, path.Ext(p))
		ms = append(ms, member{key + path.Ext(p), data}, member{key + ".cls", fmt.Appendf(nil, "%d\n", src.Label(i))}, member{key + ".txt", []byte(p)})
		if (i+1)%perShard == 0 {
			flush()
		}
	}
	if len(ms) > 0 {
		flush()
	}
	return names
}

// wdsTree is an ImageFolder tree of JPEGs and PNGs (the formats WebDataset takes).
func wdsTree(t testing.TB, classes, perClass int) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := synth.WriteTree(dir, &synth.TreeOptions{Classes: classes, PerClass: perClass, Seed: 5, MinSide: 40, MaxSide: 100,
		Formats: []synth.Format{synth.JPEG, synth.PNG, synth.JPEGProgressive, synth.PNGRGBA}}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func quiet(string, ...any) {}

// The same images as an ImageFolder and as WebDataset shards, in the same order, give
// the same batches through the train recipe: same pixels, labels and indices.
func TestWebDatasetMatchesImageFolder(t *testing.T) {
	tree := wdsTree(t, 3, 11)
	folder, err := Dir(tree, nil)
	if err != nil {
		t.Fatal(err)
	}
	sd := t.TempDir()
	shards := shardsOf(t, sd, folder, 7)
	wds, err := WebDataset(os.DirFS(sd), shards, &WebDatasetOptions{Classes: folder.Classes(), Concurrency: 2, Logf: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if wds.Len() != folder.Len() || wds.Bad() != 0 {
		t.Fatalf("%d samples (%d bad), want %d", wds.Len(), wds.Bad(), folder.Len())
	}
	if ends := wds.ShardEnds(); len(ends) != len(shards) || ends[0] != 7 || ends[len(ends)-1] != folder.Len() {
		t.Fatalf("ShardEnds %v for %d shards of 7", ends, len(shards))
	}
	for i := range folder.Len() {
		p := folder.Path(i)
		if want := shards[i/7] + "/" + strings.TrimSuffix(p, path.Ext(p)); wds.Path(i) != want || wds.Label(i) != folder.Label(i) {
			t.Fatalf("sample %d: %s label %d, want %s label %d", i, wds.Path(i), wds.Label(i), want, folder.Label(i))
		}
		if m, ok := wds.Metadata(i, "txt"); !ok || string(m) != p {
			t.Fatalf("sample %d: txt metadata %q %v, want %q", i, m, ok, p)
		}
	}
	var s pipeline.ShardedSource = wds
	_ = s
	for _, workers := range []int{1, 3} {
		a := collect(t, newLoader(t, folder, testConfig(workers)), context.Background(), 1, 0)
		b := collect(t, newLoader(t, wds, testConfig(workers)), context.Background(), 1, 0)
		if !bytes.Equal(a.data, b.data) || !slices.Equal(a.labels, b.labels) || !slices.Equal(a.indices, b.indices) {
			t.Fatalf("%d workers: the WebDataset batches differ from the ImageFolder's", workers)
		}
	}
}

// Labels from .cls and from .json (integers, class names, lists), and metadata.
func TestWebDatasetLabels(t *testing.T) {
	img := synthJPEG(t)
	cases := []struct {
		name    string
		members []member
		opts    WebDatasetOptions
		classes []string
		labels  [][]int
		multi   bool
		bad     []int
		err     string
	}{
		{name: "cls", members: []member{{"a.jpg", img}, {"a.cls", []byte("2")}, {"b.jpg", img}, {"b.cls", []byte(" 0\n")}},
			classes: []string{"0", "1", "2"}, labels: [][]int{{2}, {0}}},
		{name: "json integer", members: []member{{"a.jpg", img}, {"a.json", []byte(`{"label": 1, "caption": "x"}`)}},
			classes: []string{"0", "1"}, labels: [][]int{{1}}},
		{name: "json names", members: []member{{"a.png", img}, {"a.json", []byte(`{"label": "dog"}`)}, {"b.JPEG", img}, {"b.json", []byte(`{"label": "cat"}`)}},
			classes: []string{"cat", "dog"}, labels: [][]int{{1}, {0}}},
		{name: "json lists", members: []member{{"a.jpg", img}, {"a.json", []byte(`{"label": ["dog", "cat"]}`)}, {"b.jpg", img}, {"b.json", []byte(`{"label": []}`)}, {"c.jpg", img}, {"c.json", []byte(`{"label": "cat"}`)}},
			classes: []string{"cat", "dog"}, labels: [][]int{{0, 1}, {}, {0}}, multi: true},
		{name: "cls wins over json", members: []member{{"a.jpg", img}, {"a.cls", []byte("1")}, {"a.json", []byte(`{"label": 0}`)}},
			classes: []string{"0", "1"}, labels: [][]int{{1}}},
		{name: "given classes", opts: WebDatasetOptions{Classes: []string{"x", "y", "z"}},
			members: []member{{"a.jpg", img}, {"a.json", []byte(`{"label": "z"}`)}, {"b.jpg", img}, {"b.cls", []byte("1")}, {"c.jpg", img}, {"c.json", []byte(`{"label": "w"}`)}, {"d.jpg", img}, {"d.cls", []byte("3")}},
			classes: []string{"x", "y", "z"}, labels: [][]int{{2}, {1}, {0}, {0}}, bad: []int{2, 3}},
		{name: "unlabelled", members: []member{{"a.jpg", img}, {"a.txt", []byte("hi")}, {"b.jpg", img}},
			classes: []string{"0"}, labels: [][]int{{0}, {0}}},
		{name: "mixed kinds", members: []member{{"a.jpg", img}, {"a.cls", []byte("1")}, {"b.jpg", img}, {"b.json", []byte(`{"label": "cat"}`)}},
			err: "mix class names"},
		{name: "corrupt labels", members: []member{
			{"a.jpg", img}, {"a.cls", []byte("one")},
			{"b.jpg", img}, {"b.json", []byte(`{"label": 1.5}`)},
			{"c.jpg", img}, {"c.json", []byte(`not json`)},
			{"d.jpg", img}, {"d.cls", []byte("1")},
			{"e.jpg", img},
			{"f.jpg", img}, {"f.json", []byte(`{"label": [1, 1]}`)},
			{"g.jpg", img}, {"g.cls", []byte("-3")},
		}, classes: []string{"0", "1"}, labels: [][]int{{0}, {0}, {0}, {1}, {0}, {0}, {0}}, multi: true, bad: []int{0, 1, 2, 4, 5, 6}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fsys := fstest.MapFS{"s.tar": {Data: tarOf(t, c.members...)}}
			o := c.opts
			o.Logf = quiet
			src, err := WebDataset(fsys, []string{"s.tar"}, &o)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "s.tar") {
					t.Fatalf("error %v, want one naming s.tar with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(src.Classes(), c.classes) || src.MultiLabel() != c.multi {
				t.Fatalf("classes %q multi %v, want %q %v", src.Classes(), src.MultiLabel(), c.classes, c.multi)
			}
			var bad []int
			for i := range src.Len() {
				if got := src.Labels(nil, i); !slices.Equal(got, c.labels[i]) && !slices.Contains(c.bad, i) {
					t.Errorf("sample %d (%s): labels %v, want %v", i, src.Path(i), got, c.labels[i])
				}
				f, err := src.Open(i)
				if err != nil {
					if !strings.Contains(err.Error(), "s.tar") {
						t.Errorf("sample %d: error %v does not name the shard", i, err)
					}
					bad = append(bad, i)
					continue
				}
				data, err := io.ReadAll(f)
				f.Close()
				if err != nil || !bytes.Equal(data, img) {
					t.Errorf("sample %d: read %d bytes, %v", i, len(data), err)
				}
			}
			if !slices.Equal(bad, c.bad) {
				t.Errorf("bad samples %v, want %v", bad, c.bad)
			}
		})
	}
}

// Hostile tars: bad samples, never a crash nor a failed index, except for a shard
// that is not a tar at all.
func TestWebDatasetHostile(t *testing.T) {
	img := synthJPEG(t)
	good := tarOf(t, member{"a.jpg", img}, member{"a.cls", []byte("0")}, member{"b.jpg", img}, member{"b.cls", []byte("1")}, member{"c.jpg", img}, member{"c.cls", []byte("1")})
	// Cut inside c.jpg's data: a and b stay, c is bad.
	cut := good[:len(good)-1024-512-512-len(img)/2]
	dup := tarOf(t, member{"a.jpg", img}, member{"a.cls", []byte("0")}, member{"a.jpg", img},
		member{"b.jpg", img}, member{"b.cls", []byte("0")}, member{"a.jpg", img}, member{"a.cls", []byte("1")},
		member{"c.txt", []byte("no image")}, member{"c.cls", []byte("1")},
		member{"noext", []byte("x")}, member{"__meta__", []byte("x")},
		member{"d.png", img}, member{"d.cls", []byte("1")})
	fsys := fstest.MapFS{
		"good.tar": {Data: good}, "cut.tar": {Data: cut}, "dup.tar": {Data: dup},
		"junk.tar": {Data: bytes.Repeat([]byte("junk"), 300)}, "empty.tar": {Data: nil},
	}
	var logs []string
	logf := func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }
	src, err := WebDataset(fsys, []string{"good.tar", "cut.tar", "dup.tar"}, &WebDatasetOptions{Logf: logf})
	if err != nil {
		t.Fatal(err)
	}
	var paths, bad []string
	for i := range src.Len() {
		paths = append(paths, src.Path(i))
		if f, err := src.Open(i); err != nil {
			bad = append(bad, src.Path(i))
		} else {
			f.Close()
		}
	}
	wantPaths := []string{"good.tar/a", "good.tar/b", "good.tar/c", "cut.tar/a", "cut.tar/b", "cut.tar/c", "dup.tar/a", "dup.tar/b", "dup.tar/a", "dup.tar/c", "dup.tar/d"}
	wantBad := []string{"cut.tar/c", "dup.tar/a", "dup.tar/a", "dup.tar/c"}
	if !slices.Equal(paths, wantPaths) || !slices.Equal(bad, wantBad) {
		t.Fatalf("samples %q, bad %q; want %q, bad %q", paths, bad, wantPaths, wantBad)
	}
	if len(logs) != 1 || !strings.Contains(logs[0], "cut.tar") {
		t.Errorf("logs %q, want one naming cut.tar", logs)
	}
	if !slices.Equal(src.ShardEnds(), []int{3, 6, 11}) {
		t.Errorf("ShardEnds %v", src.ShardEnds())
	}
	for _, name := range []string{"junk.tar", "empty.tar", "missing.tar"} {
		_, err := WebDataset(fsys, []string{"good.tar", name}, &WebDatasetOptions{Logf: quiet})
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v, want one naming it", name, err)
		}
	}
	for _, o := range []WebDatasetOptions{{Concurrency: -1}, {MaxMetadataBytes: -1}, {Classes: []string{"a", "a"}}} {
		if _, err := WebDataset(fsys, []string{"good.tar"}, &o); err == nil || !strings.Contains(err.Error(), "WebDatasetOptions.") {
			t.Errorf("%v: error %v, want one naming the field", o, err)
		}
	}
}

// Bad samples are counted by the loader under its policy, and Subset and Concat keep
// the source's capabilities.
func TestWebDatasetLoaderBadSamplesAndViews(t *testing.T) {
	img := synthJPEG(t)
	var ms []member
	for i := range 20 {
		k := fmt.Sprintf("s%02d", i)
		switch i {
		case 3:
			ms = append(ms, member{k + ".jpg", []byte("not a jpeg")}, member{k + ".cls", []byte("0")})
		case 7:
			ms = append(ms, member{k + ".txt", []byte("no image")}, member{k + ".cls", []byte("0")})
		case 11:
			ms = append(ms, member{k + ".jpg", img}, member{k + ".cls", []byte("x")})
		default:
			ms = append(ms, member{k + ".jpg", img}, member{k + ".cls", fmt.Appendf(nil, "%d", i%2)}, member{k + ".txt", []byte(k)})
		}
	}
	fsys := fstest.MapFS{"a.tar": {Data: tarOf(t, ms[:20]...)}, "b.tar": {Data: tarOf(t, ms[20:]...)}}
	src, err := WebDataset(fsys, []string{"a.tar", "b.tar"}, &WebDatasetOptions{Logf: quiet})
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(2)
	cfg.Bad.MaxFraction = 0.5
	ld := newLoader(t, src, cfg)
	d := collect(t, ld, context.Background(), 0, 0)
	if len(d.indices) != 20 {
		t.Fatalf("%d samples delivered, want 20 (bad ones replaced)", len(d.indices))
	}
	for _, i := range d.indices {
		if i == 3 || i == 7 || i == 11 {
			t.Fatalf("bad sample %d delivered", i)
		}
	}
	if st := ld.Stats(); st.Bad.Samples != 3 {
		t.Fatalf("%d bad samples counted, want 3", st.Bad.Samples)
	}
	sub, err := Subset(src, []int{1, 2, 4})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := Concat(sub, src)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := cat.(pipeline.MetadataSource)
	if !ok || !slices.Contains(m.MetadataKeys(), "txt") {
		t.Fatalf("concat lost the metadata keys")
	}
	if v, ok := m.Metadata(2, "txt"); !ok || string(v) != "s04" {
		t.Fatalf("concat sample 2 txt %q %v, want s04", v, ok)
	}
	d = collect(t, newLoader(t, cat, cfg), context.Background(), 0, 0)
	if len(d.indices) != 23 {
		t.Fatalf("%d samples through Concat(Subset), want 23", len(d.indices))
	}
	b := 0
	for bt, err := range newLoader(t, src, cfg).Epoch(context.Background(), 0) {
		if err != nil {
			t.Fatal(err)
		}
		for slot := range bt.Len {
			if v, ok := bt.Metadata(slot, "txt"); !ok || string(v) != fmt.Sprintf("s%02d", bt.Indices[slot]) {
				t.Fatalf("slot %d (sample %d): txt %q", slot, bt.Indices[slot], v)
			}
			b++
		}
		bt.Release()
	}
	if b != 20 {
		t.Fatalf("%d samples", b)
	}
}

// WebDatasetGlob reads a local folder of shards, in sorted order.
func TestWebDatasetGlob(t *testing.T) {
	tree := wdsTree(t, 2, 5)
	folder, err := Dir(tree, nil)
	if err != nil {
		t.Fatal(err)
	}
	sd := t.TempDir()
	shardsOf(t, sd, folder, 4)
	src, err := WebDatasetGlob(filepath.Join(sd, "train-*.tar"), &WebDatasetOptions{Logf: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if src.Len() != 10 || len(src.Shards()) != 3 || src.Shards()[0] != "train-000000.tar" {
		t.Fatalf("%d samples in %q", src.Len(), src.Shards())
	}
	if _, err := WebDatasetGlob(filepath.Join(sd, "none-*.tar"), nil); err == nil || !strings.Contains(err.Error(), "none-*.tar") {
		t.Fatalf("error %v, want one naming the pattern", err)
	}
}

// synthJPEG is a small JPEG.
func synthJPEG(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := synth.Encode(&buf, synth.Generate(1, 0, 0, 48, 40), synth.JPEG); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// FuzzWebDatasetIndex indexes arbitrary bytes as a shard and reads every sample: no
// panic, no read outside the shard, and bad samples only as errors.
func FuzzWebDatasetIndex(f *testing.F) {
	if data, err := os.ReadFile("testdata/wds/tiny-000000.tar"); err == nil {
		f.Add(data)
	}
	f.Add(tarOf(f, member{"a.jpg", []byte("x")}, member{"a.json", []byte(`{"label": ["a"]}`)}, member{"a.jpg", nil}))
	for _, data := range hostileShards(f) {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<20 {
			return
		}
		fsys := fstest.MapFS{"s.tar": {Data: data}}
		src, err := WebDataset(fsys, []string{"s.tar"}, &WebDatasetOptions{Logf: quiet, MaxMetadataBytes: 1 << 10})
		if err != nil {
			return
		}
		if ends := src.ShardEnds(); len(ends) != 1 || ends[0] != src.Len() {
			t.Fatalf("ShardEnds %v for %d samples", ends, src.Len())
		}
		for i := range src.Len() {
			_ = src.Labels(nil, i)
			for _, k := range src.MetadataKeys() {
				src.Metadata(i, k)
			}
			f, err := src.Open(i)
			if err != nil {
				continue
			}
			fi, _ := f.Stat()
			n, err := io.Copy(io.Discard, f)
			f.Close()
			if err != nil || n != fi.Size() || n > int64(len(data)) {
				t.Fatalf("sample %d: read %d of %d bytes: %v", i, n, fi.Size(), err)
			}
		}
	})
}

// WriteWebDataset round-trips a multi-label manifest with metadata, and an ImageFolder.
func TestWriteWebDataset(t *testing.T) {
	img := synthJPEG(t)
	fsys := fstest.MapFS{
		"m.jsonl": {Data: []byte(`{"path":"a.jpg","labels":["dog","cat"],"caption":"two"}` + "\n" +
			`{"path":"d/b.v2.png","labels":[]}` + "\n" + `{"path":"c.jpg","label":"ant","caption":"one"}` + "\n")},
		"a.jpg": {Data: img}, "d/b.v2.png": {Data: img[:100]}, "c.jpg": {Data: img[:200]},
	}
	man, err := Manifest(fsys, "m.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteWebDataset(&buf, man, 0, man.Len()); err != nil {
		t.Fatal(err)
	}
	src, err := WebDataset(fstest.MapFS{"s.tar": {Data: buf.Bytes()}}, []string{"s.tar"}, &WebDatasetOptions{Classes: man.Classes(), Logf: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if src.Len() != 3 || src.Bad() != 0 || !src.MultiLabel() {
		t.Fatalf("%d samples, %d bad, multi-label %v", src.Len(), src.Bad(), src.MultiLabel())
	}
	for i, key := range []string{"a", "d/b_v2", "c"} {
		if src.Path(i) != "s.tar/"+key || !slices.Equal(src.Labels(nil, i), labelsOf(man, nil, i)) {
			t.Errorf("sample %d: %s %v, want s.tar/%s %v", i, src.Path(i), src.Labels(nil, i), key, labelsOf(man, nil, i))
		}
		a, aok := src.Metadata(i, "caption")
		b, bok := man.(pipeline.MetadataSource).Metadata(i, "caption")
		if aok != bok || !bytes.Equal(a, b) {
			t.Errorf("sample %d: caption %q %v, want %q %v", i, a, aok, b, bok)
		}
		f, _ := src.Open(i)
		got, _ := io.ReadAll(f)
		f.Close()
		g, _ := man.Open(i)
		want, _ := io.ReadAll(g)
		g.Close()
		if !bytes.Equal(got, want) {
			t.Errorf("sample %d: image bytes differ", i)
		}
	}
	if err := WriteWebDataset(io.Discard, man, 2, 1); err == nil {
		t.Error("no error for an empty range")
	}
	gif := fstest.MapFS{"m.csv": {Data: []byte("a.gif,0\n")}, "a.gif": {Data: []byte("GIF89a")}}
	gs, err := Manifest(gif, "m.csv")
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteWebDataset(io.Discard, gs, 0, 1); err == nil || !strings.Contains(err.Error(), "a.gif") {
		t.Errorf("error %v, want one naming a.gif", err)
	}
}

// WriteWebDataset keeps keys apart when a folder holds one name as .jpg, .png and
// .webp (bench/photos.sh's tree): the later files' keys name their extensions, and
// every file reads back as its own sample (x_png.jpg, whose key x.png took, too).
func TestWriteWebDatasetRepeatedStem(t *testing.T) {
	img := synthJPEG(t)
	fsys := fstest.MapFS{
		"m.csv":   {Data: []byte("d/x.jpg,0\nd/x.png,1\nd/x.webp,0\nd/x_png.jpg,1\n")},
		"d/x.jpg": {Data: img}, "d/x.png": {Data: img[:100]}, "d/x.webp": {Data: img[:200]}, "d/x_png.jpg": {Data: img[:300]},
	}
	man, err := Manifest(fsys, "m.csv")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	err = WriteWebDataset(&buf, man, 0, man.Len())
	if err != nil {
		t.Fatal(err)
	}
	src, err := WebDataset(fstest.MapFS{"s.tar": {Data: buf.Bytes()}}, []string{"s.tar"}, &WebDatasetOptions{Classes: man.Classes(), Logf: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if src.Len() != 4 || src.Bad() != 0 {
		t.Fatalf("%d samples, %d bad, want 4 and 0", src.Len(), src.Bad())
	}
	for i, key := range []string{"d/x", "d/x_png", "d/x_webp", "d/x_png_jpg"} {
		f, _ := src.Open(i)
		got, _ := io.ReadAll(f)
		f.Close()
		g, _ := man.Open(i)
		want, _ := io.ReadAll(g)
		g.Close()
		if src.Path(i) != "s.tar/"+key || src.Label(i) != man.Label(i) || !bytes.Equal(got, want) {
			t.Errorf("sample %d: %s label %d, %d bytes; want s.tar/%s label %d, %d bytes", i, src.Path(i), src.Label(i), len(got), key, man.Label(i), len(want))
		}
	}
	// One path three times: its third key repeats the second's, an error naming it.
	dup, err := Manifest(fstest.MapFS{"m.csv": {Data: []byte("x.jpg,0\nx.jpg,0\nx.jpg,0\n")}, "x.jpg": {Data: img}}, "m.csv")
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteWebDataset(io.Discard, dup, 0, 3); err == nil || !strings.Contains(err.Error(), "x.jpg: key x_jpg repeats") {
		t.Errorf("error %v, want one naming x.jpg and its key x_jpg", err)
	}
}

// BenchmarkWebDatasetIndex indexes one local shard of 1,000 samples (a 20 KB image, a
// .cls and a .txt each): the cost WebDataset pays per shard before the first batch.
func BenchmarkWebDatasetIndex(b *testing.B) {
	img := bytes.Repeat([]byte{0xff}, 20<<10)
	var ms []member
	for i := range 1000 {
		k := fmt.Sprintf("%06d", i)
		ms = append(ms, member{k + ".jpg", img}, member{k + ".cls", []byte("7")}, member{k + ".txt", []byte("a caption")})
	}
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "s.tar"), tarOf(b, ms...), 0o644); err != nil {
		b.Fatal(err)
	}
	fsys := os.DirFS(dir)
	b.ResetTimer()
	for range b.N {
		if _, err := WebDataset(fsys, []string{"s.tar"}, &WebDatasetOptions{Logf: quiet}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "µs/sample")
}

// countFS counts the opens of each name.
type countFS struct {
	fs.FS
	mu    sync.Mutex
	opens map[string]int
}

func (c *countFS) Open(name string) (fs.File, error) {
	c.mu.Lock()
	c.opens[name]++
	c.mu.Unlock()
	return c.FS.Open(name)
}

func (c *countFS) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opens[name]
}

// With ShardSamples, no shard is read up front, a shard is indexed once when first
// used, and the batches are the eager index's.
func TestWebDatasetLazy(t *testing.T) {
	tree := wdsTree(t, 3, 8)
	folder, err := Dir(tree, nil)
	if err != nil {
		t.Fatal(err)
	}
	sd := t.TempDir()
	shards := shardsOf(t, sd, folder, 5)
	eager, err := WebDataset(os.DirFS(sd), shards, &WebDatasetOptions{Logf: quiet})
	if err != nil {
		t.Fatal(err)
	}
	counts := eager.ShardSamples()
	cfs := &countFS{FS: os.DirFS(sd), opens: map[string]int{}}
	lz, err := WebDataset(cfs, shards, &WebDatasetOptions{ShardSamples: counts, Classes: eager.Classes(), MetadataKeys: []string{"txt"}, Logf: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if lz.Len() != eager.Len() || len(cfs.opens) != 0 || lz.Bad() != 0 {
		t.Fatalf("lazy: %d samples (want %d), %d shards opened at construction", lz.Len(), eager.Len(), len(cfs.opens))
	}
	if lz.Path(7) != eager.Path(7) || len(cfs.opens) != 1 || cfs.count(shards[1]) != 1 {
		t.Fatalf("Path(7) %s (want %s); opens %v", lz.Path(7), eager.Path(7), cfs.opens)
	}
	if m, ok := lz.Metadata(8, "txt"); !ok || string(m) != folder.Path(8) {
		t.Fatalf("Metadata(8) %q %v", m, ok)
	}
	a := collect(t, newLoader(t, eager, testConfig(2)), context.Background(), 0, 0)
	b := collect(t, newLoader(t, lz, testConfig(2)), context.Background(), 0, 0)
	if !bytes.Equal(a.data, b.data) || !slices.Equal(a.labels, b.labels) || !slices.Equal(a.indices, b.indices) {
		t.Fatal("lazy batches differ from the eager index's")
	}
	for _, sh := range shards {
		// Opened once to index, then once per sample read.
		if n := cfs.count(sh); n < 2 || n > 6 {
			t.Errorf("%s opened %d times", sh, n)
		}
	}

	// Counts that disagree with the shards, and a missing shard: bad samples, logged.
	var logs []string
	logf := func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }
	wrong := []int{counts[0] + 2, counts[1] - 1, 3}
	lz, err = WebDataset(os.DirFS(sd), []string{shards[0], shards[1], "missing.tar"}, &WebDatasetOptions{ShardSamples: wrong, Classes: eager.Classes(), Logf: logf})
	if err != nil {
		t.Fatal(err)
	}
	var bad []int
	for i := range lz.Len() {
		if f, err := lz.Open(i); err != nil {
			bad = append(bad, i)
		} else {
			f.Close()
			if lz.Path(i) != eager.Path(i-min(i, wrong[0])+min(i, counts[0])) {
				t.Errorf("sample %d: %s", i, lz.Path(i))
			}
		}
	}
	if want := []int{5, 6, 11, 12, 13}; !slices.Equal(bad, want) || lz.Bad() != 5 {
		t.Errorf("bad %v (Bad %d), want %v", bad, lz.Bad(), want)
	}
	if len(logs) != 3 || !strings.Contains(logs[2], "missing.tar") {
		t.Errorf("logs %q", logs)
	}

	for _, o := range []WebDatasetOptions{{ShardSamples: []int{1}}, {ShardSamples: []int{1, 2}, Classes: []string{"a"}}, {ShardSamples: []int{-1}, Classes: []string{"a"}}} {
		if _, err := WebDataset(os.DirFS(sd), shards[:1], &o); err == nil || !strings.Contains(err.Error(), "ShardSamples") {
			t.Errorf("%v: error %v, want one naming ShardSamples", o, err)
		}
	}
}

// MetadataKeys limits the metadata kept, eager or lazy.
func TestWebDatasetMetadataKeys(t *testing.T) {
	img := synthJPEG(t)
	fsys := fstest.MapFS{"s.tar": {Data: tarOf(t, member{"a.jpg", img}, member{"a.cls", []byte("1")}, member{"a.txt", []byte("cap")}, member{"a.json", []byte(`{"x": 1}`)})}}
	for _, c := range []struct {
		opts WebDatasetOptions
		keys []string
	}{
		{WebDatasetOptions{}, []string{"cls", "txt", "json"}},
		{WebDatasetOptions{MetadataKeys: []string{"txt"}}, []string{"txt"}},
		{WebDatasetOptions{MetadataKeys: []string{}}, []string{}},
		{WebDatasetOptions{ShardSamples: []int{1}, Classes: []string{"a", "b"}}, nil},
		{WebDatasetOptions{ShardSamples: []int{1}, Classes: []string{"a", "b"}, MetadataKeys: []string{"txt", "json"}}, []string{"txt", "json"}},
	} {
		c.opts.Logf = quiet
		src, err := WebDataset(fsys, []string{"s.tar"}, &c.opts)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(src.MetadataKeys(), c.keys) || src.Label(0) != 1 {
			t.Errorf("%v: keys %q label %d, want %q and 1", c.opts, src.MetadataKeys(), src.Label(0), c.keys)
		}
		for _, k := range []string{"cls", "txt", "json"} {
			if _, ok := src.Metadata(0, k); ok != slices.Contains(c.keys, k) {
				t.Errorf("%v: Metadata(0, %s) %v", c.opts, k, ok)
			}
		}
	}
}

// flakyFS fails the first fails opens, or (midRead) the first fails reads past the
// first header, with an I/O error, as a network store does on a blip.
type flakyFS struct {
	fs.FS
	mu      sync.Mutex
	fails   int
	midRead bool
	opens   int
}

var errBlip = errors.New("connection reset by peer")

func (f *flakyFS) Open(name string) (fs.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opens++
	if f.fails > 0 && !f.midRead {
		f.fails--
		return nil, &fs.PathError{Op: "open", Path: name, Err: errBlip}
	}
	file, err := f.FS.Open(name)
	if err != nil || f.fails == 0 {
		return file, err
	}
	f.fails--
	return &blipFile{File: file}, nil
}

// blipFile reads one header block, then fails; it cannot seek, so tar reads through.
type blipFile struct {
	fs.File
	n int
}

func (b *blipFile) Read(p []byte) (int, error) {
	if b.n >= 512 {
		return 0, errBlip
	}
	p = p[:min(len(p), 512-b.n)]
	n, err := b.File.Read(p)
	b.n += n
	return n, err
}

// A lazy shard whose index fails with an I/O error is tried again on the next access;
// only a shard that is not a tar file stays bad.
func TestWebDatasetLazyRetry(t *testing.T) {
	tree := wdsTree(t, 2, 4)
	folder, err := Dir(tree, nil)
	if err != nil {
		t.Fatal(err)
	}
	sd := t.TempDir()
	shards := shardsOf(t, sd, folder, 4)
	eager, err := WebDataset(os.DirFS(sd), shards, &WebDatasetOptions{Logf: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sd, "junk.tar"), bytes.Repeat([]byte("junk"), 300), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, midRead := range []bool{false, true} {
		t.Run(fmt.Sprintf("midRead=%v", midRead), func(t *testing.T) {
			ffs := &flakyFS{FS: os.DirFS(sd), fails: 1, midRead: midRead}
			lz, err := WebDataset(ffs, append(slices.Clone(shards), "junk.tar"), &WebDatasetOptions{ShardSamples: []int{4, 4, 2}, Classes: eager.Classes(), Logf: quiet})
			if err != nil {
				t.Fatal(err)
			}
			if f, err := lz.Open(0); err == nil || !strings.Contains(err.Error(), "connection reset") {
				if f != nil {
					f.Close()
				}
				t.Fatalf("first open: %v, want the blip", err)
			}
			if lz.Bad() != 0 {
				t.Errorf("Bad %d after a blip, want 0", lz.Bad())
			}
			for i := range 4 {
				f, err := lz.Open(i)
				if err != nil {
					t.Fatalf("sample %d after the blip: %v", i, err)
				}
				f.Close()
				if lz.Path(i) != eager.Path(i) {
					t.Errorf("sample %d: %s, want %s", i, lz.Path(i), eager.Path(i))
				}
			}
			opens := ffs.opens
			for i := 8; i < 10; i++ {
				if f, err := lz.Open(i); err == nil {
					f.Close()
					t.Errorf("sample %d of junk.tar opened", i)
				}
			}
			if n := ffs.opens - opens; n != 1 {
				t.Errorf("junk.tar opened %d times, want once: not a tar file is kept", n)
			}
		})
	}
}

// Hostile member headers: a size that overflows the offset, and a PAX sparse file,
// whose data in the shard is not the file's bytes.
func TestWebDatasetHostileMembers(t *testing.T) {
	for name, data := range hostileShards(t) {
		t.Run(name, func(t *testing.T) {
			fsys := fstest.MapFS{"s.tar": {Data: data}}
			src, err := WebDataset(fsys, []string{"s.tar"}, &WebDatasetOptions{Logf: quiet})
			if err != nil {
				return // refused whole: fine
			}
			for i := range src.Len() {
				if !strings.HasPrefix(src.Path(i), "s.tar/bad") {
					continue
				}
				if f, err := src.Open(i); err == nil {
					f.Close()
					t.Errorf("%s opened", src.Path(i))
				}
			}
		})
	}
}

// hostileShards are shards with one good sample "ok" and one hostile sample "bad".
func hostileShards(t testing.TB) map[string][]byte {
	ok := []member{{"ok.jpg", []byte("x")}, {"ok.cls", []byte("0")}}
	huge := tarOf(t, append(ok, member{"bad.cls", []byte("0")}, member{"bad.jpg", []byte("y")})...)
	// bad.jpg is the fourth header: give it a base-256 size near MaxInt64.
	h := huge[3*1024 : 3*1024+512]
	if string(h[:7]) != "bad.jpg" {
		t.Fatalf("header %q", h[:7])
	}
	size := h[124:136]
	clear(size)
	size[0] = 0x80
	for i := 4; i < 12; i++ {
		size[i] = 0xff
	}
	size[4] = 0x7f
	fixChecksum(h)

	// A PAX header carrying GNU sparse 0.1 records, before bad.jpg.
	var rec []byte
	for _, kv := range [][2]string{{"GNU.sparse.major", "0"}, {"GNU.sparse.minor", "1"}, {"GNU.sparse.numblocks", "1"}, {"GNU.sparse.map", "0,1"}, {"GNU.sparse.realsize", "10"}} {
		r := " " + kv[0] + "=" + kv[1] + "\n"
		n := len(r) + 2
		if len(strconv.Itoa(n))+len(r) != n {
			n++
		}
		rec = append(rec, strconv.Itoa(n)+r...)
	}
	sp := tarOf(t, append(ok, member{"bad.cls", []byte("0")}, member{"PaxHeaders/bad.jpg", rec}, member{"bad.jpg", []byte("y")})...)
	h = sp[3*1024 : 3*1024+512]
	h[156] = tar.TypeXHeader
	fixChecksum(h)
	return map[string][]byte{"overflow": huge, "sparse": sp}
}

// fixChecksum recomputes a tar header block's checksum.
func fixChecksum(h []byte) {
	copy(h[148:156], "        ")
	sum := 0
	for _, c := range h[:512] {
		sum += int(c)
	}
	copy(h[148:156], fmt.Sprintf("%06o\x00 ", sum))
}
