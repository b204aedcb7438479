package source

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
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
	"github.com/conveyor-ml/conveyor/pipeline"
)

// fastStore retries quickly, so that injected faults cost the tests little time.
var fastStore = &objstore.Options{Retry: objstore.RetryPolicy{BaseDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond, AttemptTimeout: 10 * time.Second}}

// remoteShards writes WebDataset shards of a small tree of images, perShard samples each,
// uploads them to srv under prefix, and returns the local shard folder, the shard names
// and the largest shard's size.
func remoteShards(t *testing.T, srv *s3test.Server, prefix string, classes, perClass, perShard int) (dir string, names []string, largest int64) {
	t.Helper()
	folder, err := Dir(wdsTree(t, classes, perClass), nil)
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	names = shardsOf(t, dir, folder, perShard)
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		largest = max(largest, int64(len(data)))
		srv.Put(t, prefix+n, data)
	}
	return dir, names, largest
}

func shardConfig() *pipeline.Config {
	cfg := testConfig(2)
	cfg.Order.Mode, cfg.Order.ShuffleBlock = pipeline.ShardOrder, 8
	return cfg
}

// WebDataset shards in a real S3 server train to the same batches as the same shards on
// local disk: read directly, listed from a prefix, and through a proxy injecting
// latency, 503 SlowDown, connection resets and truncated bodies, each fault retried.
// The shard cache stays within its byte limit.
func TestOpenDatasetS3(t *testing.T) { s3test.Each(t, testOpenDatasetS3) }

func testOpenDatasetS3(t *testing.T, srv *s3test.Server) {
	dir, names, largest := remoteShards(t, srv, "wds/", 3, 12, 4) // 9 shards
	ctx := context.Background()
	local, err := Open(ctx, filepath.Join(dir, "train-*.tar"), &OpenOptions{WebDataset: &WebDatasetOptions{Logf: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	want := [2]epochData{}
	ld := newLoader(t, local.Source, shardConfig())
	for e := range want {
		want[e] = collect(t, ld, ctx, e, 0)
	}

	check := func(name, url string) objstore.Stats {
		t.Helper()
		limit := 4 * largest
		d, err := Open(ctx, url, &OpenOptions{Store: fastStore, Cache: &objstore.ShardCacheOptions{MaxBytes: limit, Concurrency: 3}, WebDataset: &WebDatasetOptions{Logf: quiet}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defer d.Close()
		if !d.Remote() || !slices.Equal(d.Source.(*WebDatasetSource).Shards(), names) {
			t.Fatalf("%s: %v, remote %v", name, d, d.Remote())
		}
		// Indexing gave the planner every shard's size and the cache's limit, which
		// bound its window.
		if p := d.Source.(*WebDatasetSource).planner; p == nil || p.limit != limit || len(p.sizes) != len(names) ||
			slices.Min(p.sizes) <= 0 || slices.Max(p.sizes) != largest || !strings.Contains(p.desc, url) {
			t.Errorf("%s: planner %+v; want the %d shards' sizes (largest %d), limit %d, named by the URL", name, p, len(names), largest, limit)
		}
		ld := newLoader(t, d.Source, shardConfig())
		for e := range want {
			got := collect(t, ld, ctx, e, 0)
			if !bytes.Equal(got.data, want[e].data) || !slices.Equal(got.labels, want[e].labels) || !slices.Equal(got.indices, want[e].indices) {
				t.Fatalf("%s: epoch %d: batches differ from the local shards'", name, e)
			}
		}
		st := d.Stats()
		t.Logf("%s: %v", name, st)
		if st.PeakBytes > limit || st.Fetched < int64(len(names)) || st.BytesFetched == 0 {
			t.Errorf("%s: %v; cache limit %d", name, st, limit)
		}
		return st
	}
	srv.Env(t, "")
	check("brace list", srv.URL("wds/train-{000000..000008}.tar"))
	check("prefix", srv.URL("wds/"))

	p := s3test.NewProxy(t, srv.Endpoint, s3test.Faults{Latency: time.Millisecond, SlowDown: 5, Reset: 3, Truncate: 4, Short: 7})
	srv.Env(t, p.URL)
	st := check("faults", srv.URL("wds/train-{000000..000008}.tar"))
	counts := p.Counts()
	faults := int64(counts["slowdown"] + counts["reset"] + counts["truncate"] + counts["short"])
	// Each fault is retried once; the next epoch's look-ahead fetches (3 at a time) may
	// still be in flight when the counters are read, their faults not yet retried.
	if counts["slowdown"] == 0 || counts["reset"] == 0 || counts["truncate"] == 0 || st.Retries > faults || st.Retries < faults-3 {
		t.Errorf("%d retries for faults %v", st.Retries, counts)
	}
}

// A missing shard, refused credentials and a broken converted dataset at an s3://
// prefix are errors naming the URL.
func TestOpenDatasetS3Errors(t *testing.T) { s3test.Each(t, testOpenDatasetS3Errors) }

func testOpenDatasetS3Errors(t *testing.T, srv *s3test.Server) {
	remoteShards(t, srv, "wds/", 2, 4, 4) // 2 shards
	srv.Put(t, "conv/dataset.json", []byte("{}"))
	srv.Put(t, "conv/shard-000.bin", []byte("x"))
	srv.Put(t, "txt/a.txt", []byte("x"))
	srv.Env(t, "")
	ctx := context.Background()
	o := &OpenOptions{Store: fastStore, WebDataset: &WebDatasetOptions{Logf: quiet}}
	_, err := Open(ctx, srv.URL("wds/train-{000000..000002}.tar"), o)
	if missing := srv.URL("wds/train-000002.tar"); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing shard: %v, want fs.ErrNotExist naming %s", err, missing)
	}
	if _, err := Open(ctx, srv.URL("conv/"), o); err == nil || !strings.Contains(err.Error(), srv.URL("conv/")) {
		t.Errorf("broken converted dataset in S3: %v", err)
	}
	if _, err := Open(ctx, srv.URL("txt/"), o); err == nil || !strings.Contains(err.Error(), "no WebDataset shards") {
		t.Errorf("no shards: %v", err)
	}
	if !srv.Auth {
		return // gofakes3 checks no signature: wrong credentials are let in
	}
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret")
	url := srv.URL("wds/train-{000000..000001}.tar")
	if _, err := Open(ctx, url, o); !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), srv.URL("wds/train-00000")) {
		t.Errorf("bad credentials: %v, want fs.ErrPermission naming the shard's URL", err)
	}
}

// With a lazy index, the first batch waits for its own shards, not the dataset's: behind
// 60 ms a request and one fetch at a time, it comes before most shards are fetched, and
// the epoch is the same as the eager index's.
func TestOpenDatasetS3FirstBatch(t *testing.T) { s3test.Each(t, testOpenDatasetS3FirstBatch) }

func testOpenDatasetS3FirstBatch(t *testing.T, srv *s3test.Server) {
	dir, names, _ := remoteShards(t, srv, "wds/", 3, 16, 4) // 12 shards
	ctx := context.Background()
	eager, err := WebDatasetGlob(filepath.Join(dir, "*.tar"), &WebDatasetOptions{Logf: quiet})
	if err != nil {
		t.Fatal(err)
	}
	counts := eager.ShardSamples()
	want := collect(t, newLoader(t, eager, shardConfig()), ctx, 0, 0)

	p := s3test.NewProxy(t, srv.Endpoint, s3test.Faults{Latency: 60 * time.Millisecond})
	srv.Env(t, p.URL)
	d, err := Open(ctx, srv.URL("wds/train-{000000..000011}.tar"), &OpenOptions{Store: fastStore, Cache: &objstore.ShardCacheOptions{Concurrency: 1},
		WebDataset: &WebDatasetOptions{ShardSamples: counts, Classes: eager.Classes(), Logf: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if st := d.Stats(); st.Fetched != 0 {
		t.Fatalf("lazy open fetched %d shards", st.Fetched)
	}
	got, first := epochFetched(t, newLoader(t, d.Source, shardConfig()), d)
	t.Logf("%d of %d shards fetched at the first batch; %v", first, len(names), d.Stats())
	if first >= int64(len(names))/2 {
		t.Errorf("%d of %d shards fetched before the first batch", first, len(names))
	}
	if !bytes.Equal(got.data, want.data) || !slices.Equal(got.indices, want.indices) {
		t.Error("lazy remote batches differ from the local eager index's")
	}
}

// epochFetched runs epoch 0 of ld over d, and returns its batches and how many shards
// d had fetched when the first batch came.
func epochFetched(t *testing.T, ld *pipeline.Loader, d *Dataset) (got epochData, first int64) {
	t.Helper()
	first = -1
	for b, err := range ld.Epoch(context.Background(), 0) {
		if err != nil {
			t.Fatal(err)
		}
		if first < 0 {
			first = d.Stats().Fetched
		}
		got.data = append(got.data, b.Data...)
		got.indices = append(got.indices, b.Indices...)
		b.Release()
	}
	return got, first
}

// Shards on a plain web server (read-only HTTP, as https:// URLs are) train to the
// same shards' batches read locally; a missing shard is an error naming its URL.
func TestOpenDatasetHTTP(t *testing.T) {
	tree := wdsTree(t, 2, 8)
	folder, err := Dir(tree, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	shards := shardsOf(t, dir, folder, 5) // 4 shards
	hs := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer hs.Close()
	ctx := context.Background()
	o := &OpenOptions{Store: fastStore, Cache: &objstore.ShardCacheOptions{MaxBytes: 1 << 20}, WebDataset: &WebDatasetOptions{Classes: folder.Classes(), Logf: quiet}}
	d, err := Open(ctx, hs.URL+"/train-{000000..000003}.tar", o)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !d.Remote() || !slices.Equal(d.Source.(*WebDatasetSource).Shards(), shards) {
		t.Fatalf("%v", d)
	}
	a := collect(t, newLoader(t, d.Source, shardConfig()), ctx, 0, 0)
	local, err := WebDataset(os.DirFS(dir), shards, o.WebDataset)
	if err != nil {
		t.Fatal(err)
	}
	b := collect(t, newLoader(t, local, shardConfig()), ctx, 0, 0)
	if !bytes.Equal(a.data, b.data) || !slices.Equal(a.indices, b.indices) {
		t.Error("batches differ from the local shards'")
	}
	if st := d.Stats(); st.Fetched < int64(len(shards)) || st.BytesFetched == 0 {
		t.Errorf("%v", st)
	}
	missing := hs.URL + "/train-000004.tar"
	if _, err := Open(ctx, hs.URL+"/train-{000000..000004}.tar", o); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing shard: %v, want fs.ErrNotExist naming %s", err, missing)
	}
}
