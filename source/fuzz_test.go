package source

import (
	"encoding/json"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/conveyor-ml/conveyor/pipeline"
)

// FuzzManifest reads arbitrary bytes as a CSV and as a JSONL manifest: no panic, every
// error names the file, and what is accepted is consistent: valid relative paths within
// PATH_MAX, labels inside Classes and ascending, metadata readable under every key.
func FuzzManifest(f *testing.F) {
	for _, seed := range []string{
		"path,label\nimg/a.jpg,3\n img/b.png , 1\n",
		"a.jpg,0\nb.jpg,x\n",
		"\uFEFFa.jpg,cat\nb.jpg,dog;cat\n",
		"path,label,note\na.jpg,0,\"two\nlines\"\nb.jpg,1,x\n",
		"path,label,x\na.jpg,0,1\nb.jpg,1\n",
		"a.jpg,4194303\n../b.jpg,0\n",
		`{"path":"a.jpg","label":2}` + "\n\n" + `{"path":"s/b.jpg","label":0}` + "\n",
		"\uFEFF" + `{"path":"a.jpg","labels":["dog","cat"],"caption":"two"}` + "\n" + `{"path":"d/b.v2.png","labels":[]}` + "\n",
		`{"path":"a.jpg","labels":[0,2],"caption":"first","n":{"x":1}}` + "\n" + `{"Path":"b.jpg","LABEL":1,"id":null}` + "\n",
		`{"path":"a.jpg","label":1,"labels":[1]}` + "\n",
	} {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, jsonl bool) {
		if len(data) > 1<<20 {
			return
		}
		name := "d/m.csv"
		if jsonl {
			name = "d/m.jsonl"
		}
		src, err := Manifest(fstest.MapFS{name: {Data: data}}, name)
		if err != nil {
			if !strings.Contains(err.Error(), "manifest "+name) {
				t.Fatalf("error %q does not name the manifest", err)
			}
			return
		}
		n, classes := src.Len(), len(src.Classes())
		if n < 1 || classes < 1 {
			t.Fatalf("%d samples, %d classes", n, classes)
		}
		ml := src.(pipeline.MultiLabelSource)
		md := src.(pipeline.MetadataSource)
		keys := md.MetadataKeys()
		if len(slices.Compact(slices.Sorted(slices.Values(keys)))) != len(keys) {
			t.Fatalf("metadata keys repeat: %q", keys)
		}
		for i := range n {
			if p := src.Path(i); !fs.ValidPath(p) || len(p) > maxPathBytes {
				t.Fatalf("sample %d: path %.80q", i, p)
			}
			labels := ml.Labels(nil, i)
			if !slices.IsSorted(labels) || len(slices.Compact(slices.Clone(labels))) != len(labels) {
				t.Fatalf("sample %d: labels %v", i, labels)
			}
			for _, l := range labels {
				if l < 0 || l >= classes {
					t.Fatalf("sample %d: label %d of %d classes", i, l, classes)
				}
			}
			switch l := src.Label(i); {
			case len(labels) == 0 && l != -1, len(labels) > 0 && l != labels[0]:
				t.Fatalf("sample %d: Label %d, Labels %v", i, l, labels)
			case !ml.MultiLabel() && len(labels) != 1:
				t.Fatalf("sample %d: %d labels in a single-label manifest", i, len(labels))
			}
			for _, k := range keys {
				md.Metadata(i, k)
			}
		}
	})
}

// FuzzParseShardIndex parses arbitrary bytes as a WebDataset shard index: no panic, and
// an index accepted holds no shard twice and no count beyond the bounds, resolves to
// distinct valid names or fails, and parses again from its own JSON.
func FuzzParseShardIndex(f *testing.F) {
	if data, err := os.ReadFile("testdata/wds/tiny-000000.tar"); err == nil {
		if src, err := WebDataset(fstest.MapFS{"tiny-000000.tar": {Data: data}}, []string{"tiny-000000.tar"}, &WebDatasetOptions{Logf: quiet}); err == nil {
			if js, err := json.Marshal(src.ShardIndex()); err == nil {
				f.Add(js)
			}
		}
	}
	kind := `{"__kind__":"` + ShardIndexKind + `","wids_version":1,`
	for _, seed := range []string{
		kind + `"shardlist":[{"url":"a.tar","nsamples":3,"filesize":10240},{"url":"./b/c.tar","nsamples":0}],"class_names":["x","y"]}`,
		kind + `"shardlist":[{"url":"a.tar","nsamples":1},{"url":"./a.tar","nsamples":1}]}`,
		kind + `"shardlist":[{"url":"s3://b/d/a.tar","nsamples":1},{"url":"a.tar","nsamples":1}]}`,
		kind + `"shardlist":[{"url":"../a.tar","nsamples":16777216,"filesize":-1}]}`,
		kind + `"shardlist":[]}`,
		`{"__kind__":"other"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		x, err := ParseShardIndex(data)
		if err != nil {
			return
		}
		if x.Kind != ShardIndexKind || len(x.Shards) == 0 {
			t.Fatalf("accepted %+v", x)
		}
		seen := map[string]bool{}
		total := 0
		for _, e := range x.Shards {
			if seen[shardKey(e.URL)] {
				t.Fatalf("shard %q twice", e.URL)
			}
			seen[shardKey(e.URL)] = true
			if e.Samples < 0 || e.Samples > maxShardSamples || e.Bytes < 0 || e.Bytes > maxShardBytes || (e.Bytes > 0 && int64(e.Samples)*minSampleBytes > e.Bytes) {
				t.Fatalf("shard %+v", e)
			}
			total += e.Samples
		}
		if total > maxIndexSamples {
			t.Fatalf("%d samples", total)
		}
		if samples, sizes := x.Counts(); len(samples) != len(x.Shards) || len(sizes) != len(x.Shards) {
			t.Fatalf("%d counts and %d sizes for %d shards", len(samples), len(sizes), len(x.Shards))
		}
		if names, err := x.names("s3://b/d/"); err == nil {
			for _, n := range names {
				if !fs.ValidPath(n) {
					t.Fatalf("name %q", n)
				}
			}
			if len(slices.Compact(slices.Sorted(slices.Values(names)))) != len(names) {
				t.Fatalf("names repeat: %q", names)
			}
		}
		js, err := json.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseShardIndex(js); err != nil {
			t.Fatalf("its own JSON: %v", err)
		}
	})
}
