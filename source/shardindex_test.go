package source

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conveyor-ml/conveyor/internal/s3test"
	"github.com/conveyor-ml/conveyor/objstore"
)

// writeIndex writes x as JSON to path.
func writeIndex(t *testing.T, path string, x any) []byte {
	t.Helper()
	data, err := json.Marshal(x)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return data
}

// A shard index beside local shards opens them lazily (counts, sizes and classes from
// the index) and trains to the eager index's batches; one without class names indexes
// every shard first, with the same result.
func TestOpenShardIndexLocal(t *testing.T) {
	folder, err := Dir(wdsTree(t, 3, 10), nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	shardsOf(t, dir, folder, 4)
	ctx := context.Background()
	eager, err := WebDatasetGlob(filepath.Join(dir, "*.tar"), &WebDatasetOptions{Logf: quiet})
	if err != nil {
		t.Fatal(err)
	}
	x := eager.ShardIndex()
	if x.Kind != ShardIndexKind || len(x.Shards) != len(eager.Shards()) || x.Shards[0].Bytes == 0 || !slices.Equal(x.Classes, eager.Classes()) {
		t.Fatalf("ShardIndex: %+v", x)
	}
	want := collect(t, newLoader(t, eager, shardConfig()), ctx, 0, 0)
	writeIndex(t, filepath.Join(dir, "train.json"), x)
	noClasses := *x
	noClasses.Classes = nil
	writeIndex(t, filepath.Join(dir, "plain.json"), noClasses)
	for _, name := range []string{"train.json", "plain.json"} {
		d, err := Open(ctx, filepath.Join(dir, name), &OpenOptions{WebDataset: &WebDatasetOptions{Logf: quiet}})
		if err != nil {
			t.Fatal(err)
		}
		src := d.Source.(*WebDatasetSource)
		if lazy := src.o.ShardSamples != nil; lazy != (name == "train.json") {
			t.Errorf("%s: lazy %v", name, lazy)
		}
		got := collect(t, newLoader(t, src, shardConfig()), ctx, 0, 0)
		if !bytes.Equal(got.data, want.data) || !slices.Equal(got.indices, want.indices) {
			t.Errorf("%s: batches differ from the eager index's", name)
		}
		d.Close()
	}
}

// Bad shard indexes are errors naming the index.
func TestOpenShardIndexErrors(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	cases := map[string]any{
		"kind.json":    map[string]any{"__kind__": "something-else", "shardlist": []any{map[string]any{"url": "a.tar", "nsamples": 1}}},
		"empty.json":   map[string]any{"__kind__": ShardIndexKind, "wids_version": 1, "shardlist": []any{}},
		"escape.json":  map[string]any{"__kind__": ShardIndexKind, "wids_version": 1, "shardlist": []any{map[string]any{"url": "../a.tar", "nsamples": 1}}},
		"outside.json": map[string]any{"__kind__": ShardIndexKind, "wids_version": 1, "shardlist": []any{map[string]any{"url": "s3://other/a.tar", "nsamples": 1}}},
		"count.json":   map[string]any{"__kind__": ShardIndexKind, "wids_version": 1, "shardlist": []any{map[string]any{"url": "a.tar", "nsamples": -1}}},
		"missing.json": map[string]any{"__kind__": ShardIndexKind, "wids_version": 1, "class_names": []string{"a"}, "shardlist": []any{map[string]any{"url": "a.tar", "nsamples": 3}}},
		"twice.json": map[string]any{"__kind__": ShardIndexKind, "wids_version": 1, "class_names": []string{"a"},
			"shardlist": []any{map[string]any{"url": "a.tar", "nsamples": 3}, map[string]any{"url": "./a.tar", "nsamples": 3}}},
	}
	for name, x := range cases {
		writeIndex(t, filepath.Join(dir, name), x)
	}
	os.WriteFile(filepath.Join(dir, "garbage.json"), []byte("{not json"), 0o644)
	cases["garbage.json"] = nil
	cases["absent.json"] = nil
	for name := range cases {
		d, err := Open(ctx, filepath.Join(dir, name), &OpenOptions{WebDataset: &WebDatasetOptions{Logf: quiet}})
		if name == "missing.json" && err == nil {
			// Lazy: the missing shard is found when read, as a bad shard naming it.
			ld := newLoader(t, d.Source, shardConfig())
			for _, err = range ld.Epoch(ctx, 0) {
				if err != nil {
					break
				}
			}
			d.Close()
			if err == nil || !strings.Contains(err.Error(), "a.tar") {
				t.Errorf("%s: epoch error %v, want one naming a.tar", name, err)
			}
			continue
		}
		if err == nil {
			d.Close()
			t.Errorf("%s: no error", name)
			continue
		}
		if !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %q does not name the index", name, err)
		}
		t.Logf("%s: %v", name, err)
	}
}

// A shard index in S3 opens the shards beside it without fetching any: the first batch
// waits for its own shards, the prefetcher knows every shard's size, and the epoch is
// the same as the local eager index's.
func TestOpenShardIndexS3(t *testing.T) { s3test.Each(t, testOpenShardIndexS3) }

func testOpenShardIndexS3(t *testing.T, srv *s3test.Server) {
	dir, names, _ := remoteShards(t, srv, "wds/", 3, 16, 4) // 12 shards
	ctx := context.Background()
	eager, err := WebDatasetGlob(filepath.Join(dir, "*.tar"), &WebDatasetOptions{Logf: quiet})
	if err != nil {
		t.Fatal(err)
	}
	want := collect(t, newLoader(t, eager, shardConfig()), ctx, 0, 0)
	x := eager.ShardIndex()
	x.Shards[3].URL = srv.URL("wds/" + x.Shards[3].URL) // a full URL under the index's folder, as wids allows
	srv.Put(t, "wds/train.json", writeIndex(t, filepath.Join(t.TempDir(), "train.json"), x))
	p := s3test.NewProxy(t, srv.Endpoint, s3test.Faults{Latency: 30 * time.Millisecond})
	srv.Env(t, p.URL)
	d, err := Open(ctx, srv.URL("wds/train.json"), &OpenOptions{Store: fastStore, Cache: &objstore.ShardCacheOptions{Concurrency: 1},
		WebDataset: &WebDatasetOptions{Logf: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if st := d.Stats(); st.Fetched != 1 || st.Requests > 2 {
		t.Fatalf("opening fetched %d objects in %d requests, want the index alone (a HEAD and a GET)", st.Fetched, st.Requests)
	}
	src := d.Source.(*WebDatasetSource)
	if src.planner == nil || len(src.planner.sizes) != len(names) || src.planner.sizes[0] == 0 {
		t.Errorf("the prefetcher has no shard sizes: %v", src.planner)
	}
	got, first := epochFetched(t, newLoader(t, src, shardConfig()), d)
	if first > int64(len(names))/2 {
		t.Errorf("%d of %d shards fetched before the first batch", first, len(names))
	}
	if !bytes.Equal(got.data, want.data) || !slices.Equal(got.indices, want.indices) {
		t.Error("batches through the S3 shard index differ from the local eager index's")
	}
}

// A shard index on a plain web server: its shards, named relatively and by full URL, are
// read beside it.
func TestOpenShardIndexHTTP(t *testing.T) {
	folder, err := Dir(wdsTree(t, 2, 8), nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sub := filepath.Join(dir, "wds")
	os.Mkdir(sub, 0o755)
	shardsOf(t, sub, folder, 5) // 4 shards
	local, err := WebDatasetGlob(filepath.Join(sub, "*.tar"), &WebDatasetOptions{Logf: quiet})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer hs.Close()
	x := local.ShardIndex()
	x.Shards[1].URL = hs.URL + "/wds/" + x.Shards[1].URL
	writeIndex(t, filepath.Join(sub, "train.json"), x)
	ctx := context.Background()
	d, err := Open(ctx, hs.URL+"/wds/train.json", &OpenOptions{Store: fastStore, WebDataset: &WebDatasetOptions{Logf: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	a := collect(t, newLoader(t, d.Source, shardConfig()), ctx, 0, 0)
	b := collect(t, newLoader(t, local, shardConfig()), ctx, 0, 0)
	if !bytes.Equal(a.data, b.data) || !slices.Equal(a.indices, b.indices) {
		t.Error("batches through the HTTP shard index differ from the local shards'")
	}
}

// A shard index is checked before anything is sized by it: no shard twice (its samples
// would be read twice, silently), no count its shard's size cannot hold, and bounded
// counts and sizes.
func TestParseShardIndexBounds(t *testing.T) {
	index := func(shards ...string) []byte {
		return []byte(`{"__kind__":"` + ShardIndexKind + `","wids_version":1,"shardlist":[` + strings.Join(shards, ",") + `]}`)
	}
	many := make([]string, 128) // 2^31 samples in all
	for k := range many {
		many[k] = fmt.Sprintf(`{"url":"s%d.tar","nsamples":%d}`, k, 1<<24)
	}
	for _, tc := range []struct {
		name string
		data []byte
		err  string // "" when valid
	}{
		{"twice", index(`{"url":"a.tar","nsamples":1}`, `{"url":"b.tar","nsamples":1}`, `{"url":"./a.tar","nsamples":2}`),
			"shard ./a.tar is listed twice (shardlist[0] and shardlist[2])"},
		{"twice-url", index(`{"url":"s3://b/d/a.tar","nsamples":1}`, `{"url":"s3://b/d/a.tar","nsamples":1}`), "shard s3://b/d/a.tar is listed twice"},
		{"over-size", index(`{"url":"a.tar","nsamples":3,"filesize":1024}`), "shard a.tar: 3 samples cannot fit in its filesize of 1024 bytes"},
		{"over-shard-max", index(`{"url":"a.tar","nsamples":16777217}`), "shard a.tar: nsamples 16777217 is more than 16777216"},
		{"over-total", index(many...), "more than 2147483647 samples"},
		{"huge-file", index(`{"url":"a.tar","nsamples":1,"filesize":4611686018427387904}`), "shard a.tar: filesize 4611686018427387904 is more than 1125899906842624"},
		{"negative", index(`{"url":"a.tar","nsamples":-1}`), "shardlist[0]"},
		{"fits", index(`{"url":"a.tar","nsamples":2,"filesize":1024}`, `{"url":"b.tar","nsamples":16777216}`, `{"url":"c.tar","nsamples":0}`), ""},
	} {
		x, err := ParseShardIndex(tc.data)
		if tc.err == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			} else if s, _ := x.Counts(); len(s) != len(x.Shards) {
				t.Errorf("%s: %d counts for %d shards", tc.name, len(s), len(x.Shards))
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.err)
		}
	}
	// A full URL and a relative one are the same shard once resolved.
	x, err := ParseShardIndex(index(`{"url":"d/a.tar","nsamples":1}`, `{"url":"s3://b/x/d/a.tar","nsamples":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.names("s3://b/x/"); err == nil || !strings.Contains(err.Error(), "shards d/a.tar and s3://b/x/d/a.tar are both d/a.tar") {
		t.Errorf("names: %v, want an error naming both", err)
	}
}

// A shard index records each shard's CRC-32C; a shard whose bytes changed since (a byte
// flipped at rest or on a store that sends no checksum, or a shard replaced with one of
// the same size) is refused by name when it is fetched, not read with the index's
// counts. An index written before the field existed still opens its shards.
func TestShardIndexChecksum(t *testing.T) {
	folder, err := Dir(wdsTree(t, 2, 8), nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	shards := shardsOf(t, dir, folder, 5)
	local, err := WebDatasetGlob(filepath.Join(dir, "*.tar"), &WebDatasetOptions{Logf: quiet})
	if err != nil {
		t.Fatal(err)
	}
	x := local.ShardIndex()
	for _, e := range x.Shards {
		if !isCRC32C(e.CRC32C) {
			t.Fatalf("shard %s: crc32c %q", e.URL, e.CRC32C)
		}
	}
	writeIndex(t, filepath.Join(dir, "train.json"), x)
	old := *x
	old.Shards = slices.Clone(x.Shards)
	for k := range old.Shards {
		old.Shards[k].CRC32C = ""
	}
	writeIndex(t, filepath.Join(dir, "old.json"), &old)
	flipped := filepath.Join(dir, shards[1])
	data, err := os.ReadFile(flipped)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 1
	if err := os.WriteFile(flipped, data, 0o644); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer hs.Close()
	ctx := context.Background()
	for _, index := range []string{"train.json", "old.json"} {
		d, err := Open(ctx, hs.URL+"/"+index, &OpenOptions{Store: fastStore, WebDataset: &WebDatasetOptions{Logf: quiet}})
		if err != nil {
			t.Fatal(err)
		}
		src := d.Source.(*WebDatasetSource)
		name := shards[1]
		f, err := src.fsys.Open(name)
		if err == nil {
			f.Close()
		}
		switch index {
		case "train.json":
			if !errors.Is(err, objstore.ErrChanged) || !strings.Contains(err.Error(), hs.URL+"/"+name) {
				t.Errorf("a shard changed since indexing: %v; want objstore.ErrChanged naming it", err)
			}
		default:
			if err != nil {
				t.Errorf("an index without checksums: %v", err)
			}
		}
		d.Close()
	}
}

// An index made from shards in S3 records each one's ETag and the CRC-32C its local copy
// has; a shard replaced in the store since (same size, new bytes) is refused by name
// when read through that index, not read at the index's counts.
func TestShardIndexS3Identity(t *testing.T) { s3test.Each(t, testShardIndexS3Identity) }

func testShardIndexS3Identity(t *testing.T, srv *s3test.Server) {
	dir, names, _ := remoteShards(t, srv, "wds/", 2, 8, 4) // 4 shards
	srv.Env(t, srv.Endpoint)
	ctx := context.Background()
	local, err := WebDatasetGlob(filepath.Join(dir, "*.tar"), &WebDatasetOptions{Logf: quiet})
	if err != nil {
		t.Fatal(err)
	}
	d, err := Open(ctx, srv.URL("wds/train-{000000..000003}.tar"), &OpenOptions{Store: fastStore, WebDataset: &WebDatasetOptions{Logf: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	x := d.Source.(*WebDatasetSource).ShardIndex()
	d.Close()
	want := local.ShardIndex()
	for k, e := range x.Shards {
		if e.ETag == "" || e.CRC32C != want.Shards[k].CRC32C {
			t.Fatalf("shard %s: ETag %q, crc32c %q; want an ETag and crc32c %q", e.URL, e.ETag, e.CRC32C, want.Shards[k].CRC32C)
		}
	}
	srv.Put(t, "wds/train.json", writeIndex(t, filepath.Join(t.TempDir(), "train.json"), x))
	data, err := os.ReadFile(filepath.Join(dir, names[2]))
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 1
	srv.Put(t, "wds/"+names[2], data)
	d, err = Open(ctx, srv.URL("wds/train.json"), &OpenOptions{Store: fastStore, WebDataset: &WebDatasetOptions{Logf: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	f, err := d.Store.Cache.Open(names[2])
	if err == nil {
		f.Close()
	}
	if !errors.Is(err, objstore.ErrChanged) || !strings.Contains(err.Error(), srv.URL("wds/"+names[2])) {
		t.Fatalf("a shard replaced since indexing: %v; want objstore.ErrChanged naming it", err)
	}
	if f, err := d.Store.Cache.Open(names[1]); err != nil {
		t.Fatalf("an unchanged shard: %v", err)
	} else {
		f.Close()
	}
}

// A shard replaced in the store between epochs, evicted from a shard cache too small
// to keep every shard, is refused by name when the next epoch fetches it again, instead of
// being read at the offsets its first version was indexed with.
func TestShardReplacedBetweenEpochs(t *testing.T) { s3test.Each(t, testShardReplacedBetweenEpochs) }

func testShardReplacedBetweenEpochs(t *testing.T, srv *s3test.Server) {
	dir, names, largest := remoteShards(t, srv, "wds/", 2, 8, 4) // 4 shards
	srv.Env(t, srv.Endpoint)
	ctx := context.Background()
	d, err := Open(ctx, srv.URL("wds/train-{000000..000003}.tar"), &OpenOptions{Store: fastStore,
		Cache: &objstore.ShardCacheOptions{MaxBytes: 3 * largest, Concurrency: 1}, WebDataset: &WebDatasetOptions{Logf: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ld := newLoader(t, d.Source, shardConfig())
	collect(t, ld, ctx, 0, 0)
	other, err := os.ReadFile(filepath.Join(dir, names[0]))
	if err != nil {
		t.Fatal(err)
	}
	srv.Put(t, "wds/"+names[2], other) // another valid shard, under the old name
	d.Store.Cache.Release(names[2])    // evicted, if the last epoch's end left it cached
	var changed error
	for b, err := range ld.Epoch(ctx, 1) {
		if err != nil {
			changed = err
			break
		}
		b.Release()
	}
	if !errors.Is(changed, objstore.ErrChanged) || !strings.Contains(changed.Error(), srv.URL("wds/"+names[2])) {
		t.Fatalf("epoch 1 after a shard was replaced: %v; want objstore.ErrChanged naming it", changed)
	}
}
