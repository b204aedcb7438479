package source

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/internal/treetest"
	"github.com/conveyor-ml/conveyor/mixup"
	"github.com/conveyor-ml/conveyor/pipeline"
)

// allLabels lists every sample's labels, through the MultiLabelSource capability.
func allLabels(src pipeline.Source) [][]int {
	out := make([][]int, src.Len())
	for i := range out {
		out[i] = labelsOf(src, nil, i)
	}
	return out
}

// TestManifestMultiLabel reads label lists from CSV (';'-separated) and JSONL ("labels"),
// as names and as integers, and checks classes, every label, Label and MultiLabel.
func TestManifestMultiLabel(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		classes    []string
		labels     [][]int
		first      []int
		multi      bool
	}{
		{name: "m.csv", text: "path,labels\na.jpg,cat;dog\nb.jpg,dog\nc.jpg, zebra ; cat \n",
			classes: []string{"cat", "dog", "zebra"}, labels: [][]int{{0, 1}, {1}, {0, 2}}, first: []int{0, 1, 0}, multi: true},
		{name: "m.csv", text: "a.jpg,3;1\nb.jpg,0\n",
			classes: []string{"0", "1", "2", "3"}, labels: [][]int{{1, 3}, {0}}, first: []int{1, 0}, multi: true},
		{name: "m.csv", text: "a.jpg,2\nb.jpg,0\n", // one label each: not multi-label
			classes: []string{"0", "1", "2"}, labels: [][]int{{2}, {0}}, first: []int{2, 0}},
		{name: "m.jsonl", text: `{"path":"a.jpg","labels":["dog","cat"]}` + "\n" + `{"path":"b.jpg","labels":[]}` + "\n" + `{"path":"c.jpg","label":"ant"}` + "\n",
			classes: []string{"ant", "cat", "dog"}, labels: [][]int{{1, 2}, {}, {0}}, first: []int{1, -1, 0}, multi: true},
		{name: "m.jsonl", text: `{"path":"a.jpg","labels":[4, 0]}` + "\n" + `{"path":"b.jpg","label":1}` + "\n",
			classes: []string{"0", "1", "2", "3", "4"}, labels: [][]int{{0, 4}, {1}}, first: []int{0, 1}, multi: true},
		{name: "m.jsonl", text: `{"path":"a.jpg","labels":[2]}` + "\n" + `{"path":"b.jpg","label":1}` + "\n",
			classes: []string{"0", "1", "2"}, labels: [][]int{{2}, {1}}, first: []int{2, 1}},
		// The three keys in any case, as encoding/json matches struct fields.
		{name: "m.jsonl", text: `{"Path":"a.jpg","LABEL":2}` + "\n" + `{"PATH":"b.jpg","Labels":[1, 0]}` + "\n",
			classes: []string{"0", "1", "2"}, labels: [][]int{{2}, {0, 1}}, first: []int{2, 0}, multi: true},
	} {
		t.Run(tc.text, func(t *testing.T) {
			src, err := Manifest(fstest.MapFS{tc.name: {Data: []byte(tc.text)}}, tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(src.Classes(), tc.classes) {
				t.Errorf("classes %q, want %q", src.Classes(), tc.classes)
			}
			if got := isMultiLabel(src); got != tc.multi {
				t.Errorf("MultiLabel %t, want %t", got, tc.multi)
			}
			got := allLabels(src)
			for i := range tc.labels {
				if !slices.Equal(got[i], tc.labels[i]) || src.Label(i) != tc.first[i] {
					t.Errorf("sample %d: labels %v Label %d; want %v and %d", i, got[i], src.Label(i), tc.labels[i], tc.first[i])
				}
			}
		})
	}
}

// TestManifestMetadata reads extra CSV columns and JSONL fields as metadata.
func TestManifestMetadata(t *testing.T) {
	type kv = map[string]string // "" key absent is written as missing from the map
	for _, tc := range []struct {
		name, text string
		keys       []string
		want       []kv
	}{
		{name: "m.csv", text: "path,label,caption,split\na.jpg,cat,\"a cat, sitting\",train\nb.jpg,dog,,val\n",
			keys: []string{"caption", "split"}, want: []kv{{"caption": "a cat, sitting", "split": "train"}, {"caption": "", "split": "val"}}},
		{name: "m.csv", text: "a.jpg,0,x1,y1\nb.jpg,1,x2,y2\n",
			keys: []string{"2", "3"}, want: []kv{{"2": "x1", "3": "y1"}, {"2": "x2", "3": "y2"}}},
		{name: "m.csv", text: "a.jpg,0\n", keys: nil, want: []kv{{}}},
		{name: "m.jsonl", text: `{"path":"a.jpg","label":0}` + "\n" +
			`{"path":"b.jpg","label":1,"caption":"two dogs","id":17,"box":{"x":1},"note":null}` + "\n" +
			`{"path":"c.jpg","label":1,"caption":"ünïcode"}` + "\n",
			keys: []string{"box", "caption", "id"}, want: []kv{{}, {"caption": "two dogs", "id": "17", "box": `{"x":1}`}, {"caption": "ünïcode"}}},
	} {
		t.Run(tc.text, func(t *testing.T) {
			src, err := Manifest(fstest.MapFS{tc.name: {Data: []byte(tc.text)}}, tc.name)
			if err != nil {
				t.Fatal(err)
			}
			m := src.(pipeline.MetadataSource)
			if !slices.Equal(m.MetadataKeys(), tc.keys) {
				t.Errorf("keys %q, want %q", m.MetadataKeys(), tc.keys)
			}
			for i, want := range tc.want {
				for _, k := range append(slices.Clone(tc.keys), "absent") {
					v, ok := m.Metadata(i, k)
					w, wok := want[k]
					if ok != wok || string(v) != w {
						t.Errorf("sample %d key %q: %q %t, want %q %t", i, k, v, ok, w, wok)
					}
				}
			}
		})
	}
}

// TestManifestBadRows checks that a bad row's error names the file and the line.
func TestManifestBadRows(t *testing.T) {
	for _, tc := range []struct {
		name, text, err string
	}{
		{"m.csv", "a.jpg,cat;\n", "manifest m.csv line 1: empty label in the list \"cat;\""},
		{"m.csv", "a.jpg,0\nb.jpg,cat;;dog\n", "manifest m.csv line 2: empty label in the list"},
		{"m.csv", "a.jpg,cat\nb.jpg,cat;dog;cat\n", "manifest m.csv line 2: label \"cat\" appears twice"},
		{"m.csv", "a.jpg,0\nb.jpg,\n", "manifest m.csv line 2: empty label"},
		{"m.csv", "path,label,x\na.jpg,0,1\nb.jpg,1\n", "m.csv: record on line 3: wrong number of fields"},
		{"m.csv", "path,label,\na.jpg,0,1\n", "manifest m.csv line 1: column 3 has no name"},
		{"m.csv", "path,label,x,x\na.jpg,0,1,2\n", "manifest m.csv line 1: column \"x\" appears twice"},
		{"m.csv", "a.jpg\n", "manifest m.csv line 1: want \"path,label\""},
		{"d/m.jsonl", `{"path":"a.jpg","label":1,"labels":[1]}` + "\n", "manifest d/m.jsonl line 1: want"},
		{"m.jsonl", `{"path":"a.jpg","label":1}` + "\n" + `{"path":"b.jpg","labels":3}` + "\n", "manifest m.jsonl line 2: labels 3 is not a list"},
		{"m.jsonl", `{"path":"a.jpg","labels":[1,"cat"]}` + "\n", "manifest m.jsonl line 1: label \"cat\" is a class name but line 1's is an integer"},
		{"m.jsonl", `{"path":"a.jpg","labels":[1,1]}` + "\n", "manifest m.jsonl line 1: label \"1\" appears twice"},
		{"m.jsonl", `{"path":"a.jpg","labels":[[1]]}` + "\n", "manifest m.jsonl line 1: label [1] is neither"},
		{"m.jsonl", `{"path":"a.jpg","labels":[-2]}` + "\n", "manifest m.jsonl line 1: negative label -2"},
		{"m.jsonl", `{"path":"a.jpg","labels":["cat",""]}` + "\n", "manifest m.jsonl line 1: empty label"},
		{"m.jsonl", `{"path":"a.jpg","Path":"b.jpg","label":1}` + "\n", "manifest m.jsonl line 1: both \"path\" and \"Path\""},
		{"m.jsonl", `{"path":"a.jpg","labels":[1],"x":1}` + "\n" + `{"path":"b.jpg","label":"2"}` + "\n", "manifest m.jsonl line 2: label \"2\" is a class name but line 1's is an integer"},
	} {
		t.Run(tc.text, func(t *testing.T) {
			_, err := Manifest(fstest.MapFS{tc.name: {Data: []byte(tc.text)}}, tc.name)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("got %v, want an error saying %q", err, tc.err)
			}
		})
	}
}

// TestViewsPassTargetsAndMetadata checks that Subset, Concat and Split pass multi-label
// and metadata through, and that Concat with a single-label source without metadata
// answers for both kinds of sample.
func TestViewsPassTargetsAndMetadata(t *testing.T) {
	ml, err := Manifest(fstest.MapFS{"m.jsonl": {Data: []byte(
		`{"path":"a.jpg","labels":[0,2],"caption":"first"}` + "\n" +
			`{"path":"b.jpg","labels":[1],"caption":"second","id":"b"}` + "\n" +
			`{"path":"c.jpg","labels":[],"id":"c"}` + "\n" +
			`{"path":"d.jpg","labels":[2]}` + "\n")}}, "m.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := Manifest(fstest.MapFS{"p.csv": {Data: []byte("path,label,split\nx.jpg,1,val\ny.jpg,2,train\n")}}, "p.csv")
	if err != nil {
		t.Fatal(err)
	}
	single, err := Manifest(fstest.MapFS{"s.csv": {Data: []byte("x.jpg,1\ny.jpg,0\n")}}, "s.csv")
	if err != nil {
		t.Fatal(err)
	}
	sub, err := Subset(ml, []int{3, 0, 2})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := Concat(sub, plain)
	if err != nil {
		t.Fatal(err)
	}
	plainOnly, err := Concat(single, single)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		src    pipeline.Source
		multi  bool
		labels [][]int
		keys   []string
		meta   []map[string]string
	}{
		{"subset", sub, true, [][]int{{2}, {0, 2}, {}}, []string{"caption", "id"},
			[]map[string]string{{}, {"caption": "first"}, {"id": "c"}}},
		{"concat", cat, true, [][]int{{2}, {0, 2}, {}, {1}, {2}}, []string{"caption", "id", "split"},
			[]map[string]string{{}, {"caption": "first"}, {"id": "c"}, {"split": "val"}, {"split": "train"}}},
		{"single-label concat", plainOnly, false, [][]int{{1}, {0}, {1}, {0}}, nil, []map[string]string{{}, {}, {}, {}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := isMultiLabel(c.src); got != c.multi {
				t.Errorf("MultiLabel %t, want %t", got, c.multi)
			}
			if got := allLabels(c.src); !slices.EqualFunc(got, c.labels, slices.Equal) {
				t.Errorf("labels %v, want %v", got, c.labels)
			}
			m := c.src.(pipeline.MetadataSource)
			if !slices.Equal(m.MetadataKeys(), c.keys) {
				t.Errorf("keys %q, want %q", m.MetadataKeys(), c.keys)
			}
			for i, want := range c.meta {
				for _, k := range []string{"caption", "id", "split"} {
					v, ok := m.Metadata(i, k)
					w, wok := want[k]
					if ok != wok || string(v) != w {
						t.Errorf("sample %d key %q: %q %t, want %q %t", i, k, v, ok, w, wok)
					}
				}
			}
		})
	}
	twice, err := Concat(ml, ml) // two samples of each first label: one each side
	if err != nil {
		t.Fatal(err)
	}
	train, val, err := Split(twice, 0.5, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !isMultiLabel(train) || !isMultiLabel(val) {
		t.Error("Split lost MultiLabel")
	}
	total := 0
	for _, s := range []pipeline.Source{train, val} {
		for i := range s.Len() {
			want := labelsOf(twice, nil, int(s.(*view).idx[i]))
			if got := labelsOf(s, nil, i); !slices.Equal(got, want) {
				t.Errorf("split sample %d: %v, want %v", i, got, want)
			}
			total++
		}
	}
	if total != twice.Len() || train.Len() != 4 {
		t.Errorf("split holds %d samples, %d for training; want %d, 4", total, train.Len(), twice.Len())
	}
}

// multiLabelTree writes a manifest with label lists and metadata over a fresh tree's
// images and returns it.
func multiLabelTree(t *testing.T) (pipeline.Source, [][]int) {
	dir := treetest.New(t, 2, 9)
	var b strings.Builder
	b.WriteString("path,labels,name\n")
	var want [][]int
	for k, f := range treetest.Files(t, dir) {
		rel, _ := filepath.Rel(dir, f)
		lists := []string{"a;c", "b", "a;b;c;d", "d", "c;a"}
		ids := [][]int{{0, 2}, {1}, {0, 1, 2, 3}, {3}, {0, 2}}
		b.WriteString(filepath.ToSlash(rel) + "," + lists[k%5] + "," + filepath.Base(f) + "\n")
		want = append(want, ids[k%5])
	}
	if err := os.WriteFile(filepath.Join(dir, "m.csv"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := Manifest(os.DirFS(dir), "m.csv")
	if err != nil {
		t.Fatal(err)
	}
	return src, want
}

// TestMultiHotBatches checks a multi-label source's batches: multi-hot target rows
// (smoothed when asked), mixed like single-label ones, the same for any worker count, and
// metadata by slot.
func TestMultiHotBatches(t *testing.T) {
	src, want := multiLabelTree(t)
	for _, c := range []struct {
		name string
		mix  mixup.Options
	}{
		{"plain", mixup.Options{}},
		{"smoothed", mixup.Options{Smoothing: 0.2}},
		{"mixed", mixup.Options{MixUp: 0.4, CutMix: 1, Smoothing: 0.1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig(2)
			cfg.Batch.Size = 5
			cfg.Mix = c.mix
			ld := newLoader(t, src, cfg)
			var got []batchRecord
			for b, err := range ld.Epoch(context.Background(), 1) {
				if err != nil {
					t.Fatal(err)
				}
				if b.NumClasses != 4 || len(b.Targets) != b.Len*4 {
					t.Fatalf("%d targets of width %d for %d samples", len(b.Targets), b.NumClasses, b.Len)
				}
				if !slices.Equal(b.MetadataKeys(), []string{"name"}) {
					t.Fatalf("metadata keys %q", b.MetadataKeys())
				}
				for s := range b.Len {
					name, ok := b.Metadata(s, "name")
					if !ok || string(name) != filepath.Base(src.Path(int(b.Indices[s]))) {
						t.Fatalf("slot %d: metadata name %q, sample is %s", s, name, src.Path(int(b.Indices[s])))
					}
				}
				got = append(got, batchRecord{labels: slices.Clone(b.Labels), indices: slices.Clone(b.Indices), targets: slices.Clone(b.Targets), mix: b.Mix})
				b.Release()
			}
			off, on := mixup.SmoothValues(c.mix.Smoothing, 4)
			for k, b := range got {
				rows := make([]float32, len(b.indices)*4)
				for s, idx := range b.indices {
					for j := range 4 {
						rows[s*4+j] = off
					}
					for _, l := range want[idx] {
						rows[s*4+l] = on
					}
					if b.labels[s] != int32(want[idx][0]) {
						t.Fatalf("batch %d slot %d: label %d, want the smallest of %v", k, s, b.labels[s], want[idx])
					}
				}
				if err := mixup.Targets(rows, len(b.indices), 4, b.mix); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(b.targets, rows) {
					t.Fatalf("batch %d (%+v): targets %v, want %v", k, b.mix, b.targets, rows)
				}
			}
		})
	}
}

// TestClassesOnEverySource checks that every built-in source names its classes.
func TestClassesOnEverySource(t *testing.T) {
	dir := treetest.New(t, 3, 2)
	folder, err := Dir(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	fsFolder, err := ImageFolder(os.DirFS(dir), ".", nil)
	if err != nil {
		t.Fatal(err)
	}
	treeClasses := folder.Classes()
	if len(treeClasses) != 3 {
		t.Fatalf("Dir: classes %q", treeClasses)
	}
	csvSrc, err := Manifest(fstest.MapFS{"m.csv": {Data: []byte("a.jpg,b\nb.jpg,a\n")}}, "m.csv")
	if err != nil {
		t.Fatal(err)
	}
	intSrc, err := Manifest(fstest.MapFS{"m.csv": {Data: []byte("a.jpg,2\n")}}, "m.csv")
	if err != nil {
		t.Fatal(err)
	}
	jsonSrc, err := Manifest(fstest.MapFS{"m.jsonl": {Data: []byte(`{"path":"a.jpg","labels":["y","x"]}` + "\n")}}, "m.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	conv, err := OpenConverted(convertTree(t, 2, 3), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conv.Close()
	sub, _ := Subset(folder, []int{0})
	cat, _ := Concat(conv, conv)
	train, val, err := Split(folder, 0.5, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		src  pipeline.Source
		want []string
	}{
		{"Dir", folder, treeClasses},
		{"ImageFolder", fsFolder, treeClasses},
		{"Manifest CSV names", csvSrc, []string{"a", "b"}},
		{"Manifest CSV integers", intSrc, []string{"0", "1", "2"}},
		{"Manifest JSONL label lists", jsonSrc, []string{"x", "y"}},
		{"OpenConverted", conv, conv.Info().Classes},
		{"Subset", sub, treeClasses},
		{"Concat", cat, conv.Info().Classes},
		{"Split train", train, treeClasses},
		{"Split val", val, treeClasses},
	} {
		if len(c.want) == 0 || !slices.Equal(c.src.Classes(), c.want) {
			t.Errorf("%s: classes %q, want %q", c.name, c.src.Classes(), c.want)
		}
	}
	if got := conv.Classes(); len(got) != 2 {
		t.Errorf("converted 2-class tree names %q", got)
	}
}

// TestConvertRefusesMultiLabel: a converted record keeps one label, so converting a
// multi-label source would drop labels silently.
func TestConvertRefusesMultiLabel(t *testing.T) {
	src, _ := multiLabelTree(t)
	c := openCache(t, t.TempDir(), cache.Raw)
	_, err := pipeline.Convert(context.Background(), src, c, convertOpts(t))
	if err == nil || !strings.Contains(err.Error(), "multi-label") {
		t.Fatalf("got %v, want a refusal naming multi-label", err)
	}
}

// badLabels is a source whose labels lie outside its classes: a bug in a custom source.
type badLabels struct{ pipeline.FileSource }

func (s badLabels) Label(i int) int { return 7 }

// TestLabelOutsideClasses checks that a label without a class ends the epoch naming the
// sample when the batch needs target rows, instead of writing outside the row.
func TestLabelOutsideClasses(t *testing.T) {
	src, err := Dir(treetest.Shared(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(2)
	cfg.Mix.Smoothing = 0.1
	ld := newLoader(t, badLabels{src}, cfg)
	var last error
	for b, err := range ld.Epoch(context.Background(), 0) {
		b.Release()
		last = err
	}
	if last == nil || !strings.Contains(last.Error(), "label 7 outside the source's 3 classes") {
		t.Fatalf("got %v, want an error about label 7", last)
	}
}

// Manifests from the outside world: a byte order mark is skipped, a path longer than
// PATH_MAX and a JSONL line over 1 MiB are refused with their line (and without copying
// the path into the error), and lines are the file's, whatever quoted fields span.
func TestManifestHostile(t *testing.T) {
	const bom = "\uFEFF"
	for _, tc := range []struct{ name, text string }{
		{"m.jsonl", bom + `{"path":"a.jpg","label":"cat"}` + "\n" + `{"path":"b.jpg","label":"dog"}` + "\n"},
		{"m.csv", bom + "a.jpg,cat\nb.jpg,dog\n"},
		{"m.csv", bom + "path,label\na.jpg,cat\nb.jpg,dog\n"},
	} {
		src, err := Manifest(fstest.MapFS{tc.name: {Data: []byte(tc.text)}}, tc.name)
		if err != nil {
			t.Errorf("%q: %v", tc.text, err)
			continue
		}
		if src.Len() != 2 || src.Path(0) != "a.jpg" || !slices.Equal(src.Classes(), []string{"cat", "dog"}) {
			t.Errorf("%q: %d samples, first %q, classes %q", tc.text, src.Len(), src.Path(0), src.Classes())
		}
	}

	long := strings.Repeat("d/", 1<<19) + "x.jpg" // 1 MiB
	var wide strings.Builder                      // 200,000 fields, 2.7 MB
	wide.WriteString(`{"path":"c.jpg","label":0`)
	for k := range 200_000 {
		fmt.Fprintf(&wide, `,"f%d":0`, k)
	}
	wide.WriteString("}\n")
	for _, tc := range []struct{ name, text, err string }{
		{"m.csv", "a.jpg,0\n" + long + ",1\n", "manifest m.csv line 2: path \"d/d/d/"},
		{"m.csv", "a.jpg,0\n" + strings.Repeat("x", 4097) + ",1\n", "has 4097 bytes, more than 4096"},
		{"m.jsonl", `{"path":"a.jpg","label":0}` + "\n" + `{"path":"` + long[:1<<16] + `x.jpg","label":1}` + "\n", "manifest m.jsonl line 2: path"},
		{"m.jsonl", `{"path":"a.jpg","label":0}` + "\n\n" + wide.String(), "manifest m.jsonl line 3: longer than 1048576 bytes"},
		// The second record starts on line 3 and the third on line 5.
		{"m.csv", "path,label,note\na.jpg,0,\"two\nlines\"\nb.jpg,1,\"and\ntwo\"\nc.jpg,cat;;dog,x\n", "manifest m.csv line 6: empty label"},
		{"m.csv", "a.jpg,0,\"x\ny\"\nb.jpg,1,x\"y\n", "manifest m.csv: parse error on line 3, column 10: bare \""},
	} {
		_, err := Manifest(fstest.MapFS{tc.name: {Data: []byte(tc.text)}}, tc.name)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%.40q: %v, want an error containing %q", tc.text, err, tc.err)
		} else if len(err.Error()) > 200 {
			t.Errorf("%.40q: an error of %d bytes", tc.text, len(err.Error()))
		}
	}
}
