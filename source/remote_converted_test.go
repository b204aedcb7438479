package source

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/internal/s3test"
	"github.com/conveyor-ml/conveyor/internal/treetest"
	"github.com/conveyor-ml/conveyor/objstore"
	"github.com/conveyor-ml/conveyor/pipeline"
)

// planRecorder is a source that records the plans it is given.
type planRecorder struct {
	pipeline.FileSource
	epochs, nexts [][]int32
}

func (p *planRecorder) PlansReads() bool { return true }

func (p *planRecorder) PlanEpoch(epoch int, order []int32) error {
	p.epochs = append(p.epochs, slices.Clone(order))
	return nil
}

func (p *planRecorder) PlanNext(epoch int, order []int32) {
	p.nexts = append(p.nexts, slices.Clone(order))
}

// Views give each part that plans its reads the plan of its own samples, as its
// indices; a view of parts that do not plan is no planner.
func TestViewPlans(t *testing.T) {
	dir, err := Dir(treetest.New(t, 2, 3), nil) // 6 samples
	if err != nil {
		t.Fatal(err)
	}
	a, b := &planRecorder{FileSource: dir}, &planRecorder{FileSource: dir}
	cat, err := Concat(a, dir, b) // a: 0-5, dir: 6-11, b: 12-17
	if err != nil {
		t.Fatal(err)
	}
	sub, err := Subset(cat, []int{17, 1, 7, 12, 0})
	if err != nil {
		t.Fatal(err)
	}
	if !plansReads(sub) || plansReads(dir) {
		t.Fatalf("plansReads: subset %v, folder %v", plansReads(sub), plansReads(dir))
	}
	sub.(pipeline.EpochPlanner).PlanEpoch(3, []int32{4, 0, 2, 1, 3, -1})
	sub.(pipeline.EpochPlanner).PlanNext(4, []int32{2, 3})
	if want := [][]int32{{0, 1}}; !slices.EqualFunc(a.epochs, want, slices.Equal) {
		t.Errorf("first part's plan %v, want %v", a.epochs, want)
	}
	if want := [][]int32{{5, 0}}; !slices.EqualFunc(b.epochs, want, slices.Equal) {
		t.Errorf("third part's plan %v, want %v", b.epochs, want)
	}
	if !slices.EqualFunc(a.nexts, [][]int32{{}}, slices.Equal) || !slices.EqualFunc(b.nexts, [][]int32{{0}}, slices.Equal) {
		t.Errorf("next plans %v, %v", a.nexts, b.nexts)
	}
	plain, err := Subset(dir, []int{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if plansReads(plain) {
		t.Error("a view of a folder plans its reads")
	}
}

// uploadConverted uploads the converted dataset in dir to srv under prefix and returns
// its shards' sizes by name.
func uploadConverted(t *testing.T, srv *s3test.Server, dir, prefix string) map[string]int64 {
	t.Helper()
	sizes := map[string]int64{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !datasetFile(e.Name()) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		srv.Put(t, prefix+e.Name(), data)
		if strings.HasSuffix(e.Name(), ".shard") {
			sizes[e.Name()] = int64(len(data))
		}
	}
	return sizes
}

// A converted dataset in a real S3 server is streamed through a shard cache smaller
// than the dataset: opening it fetches no shard, the first batch comes before most
// shards are fetched (behind 30 ms a request, one fetch at a time), the cache stays
// within its limit, and the epochs are the local dataset's, in the shard order over
// ByShard and (fetching shards again, with a warning) in the sample order. A shard
// larger than the cache is refused at open, naming its URL.
func TestConvertedS3Streaming(t *testing.T) { s3test.Each(t, testConvertedS3Streaming) }

func testConvertedS3Streaming(t *testing.T, srv *s3test.Server) {
	dir := convertTree(t, 4, 40)
	sizes := uploadConverted(t, srv, dir, "conv/")
	var total, largest int64
	for _, n := range sizes {
		total, largest = total+n, max(largest, n)
	}
	if len(sizes) < 6 {
		t.Fatalf("%d shards, want 6 or more", len(sizes))
	}
	ctx := context.Background()
	local, err := OpenConverted(dir, &ConvertedOptions{Logf: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	cfg := func() *pipeline.Config {
		c := testConfig(2)
		c.Order.Mode, c.Order.ShuffleBlock = pipeline.ShardOrder, 30
		return c
	}
	want := [2]epochData{}
	ld := newLoader(t, local.ByShard(), cfg())
	for e := range want {
		want[e] = collect(t, ld, ctx, e, 0)
	}
	wantSamples := collect(t, newLoader(t, local, testConfig(2)), ctx, 0, 0)

	p := s3test.NewProxy(t, srv.Endpoint, s3test.Faults{Latency: 30 * time.Millisecond})
	srv.Env(t, p.URL)
	limit := 4 * largest
	var logs lines
	cacheDir := t.TempDir()
	d, err := Open(ctx, srv.URL("conv/"), &OpenOptions{Store: fastStore, Cache: &objstore.ShardCacheOptions{Dir: cacheDir, MaxBytes: limit, Concurrency: 1},
		Converted: &ConvertedOptions{Logf: logs.logf}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	conv := d.Source.(*Converted)
	if st := d.Stats(); st.Fetched != 0 || !d.Remote() || !strings.Contains(d.String(), "shard cache") {
		t.Fatalf("open: %v; %s", st, d)
	}
	ld = newLoader(t, conv.ByShard(), cfg())
	for e := range want {
		var got epochData
		first := int64(-1)
		for b, err := range ld.Epoch(ctx, e) {
			if err != nil {
				t.Fatal(err)
			}
			if first < 0 {
				first = d.Stats().Fetched
			}
			got.data = append(got.data, b.Data...)
			got.labels = append(got.labels, b.Labels...)
			got.indices = append(got.indices, b.Indices...)
			b.Release()
		}
		if !bytes.Equal(got.data, want[e].data) || !slices.Equal(got.labels, want[e].labels) || !slices.Equal(got.indices, want[e].indices) {
			t.Fatalf("epoch %d: batches differ from the local dataset's", e)
		}
		if e == 0 && first >= int64(len(sizes))/2 {
			t.Errorf("%d of %d shards fetched before the first batch", first, len(sizes))
		}
	}
	st := d.Stats()
	t.Logf("%d shards, %d bytes, cache limit %d: %v", len(sizes), total, limit, st)
	if st.PeakBytes > limit || st.Fetched < int64(len(sizes)) || st.Evictions == 0 {
		t.Errorf("%v; cache limit %d", st, limit)
	}
	// The cache holds the shards read at once: each shard is fetched about once an epoch
	// (none fetched ahead into room there is not, evicting one still being read; and
	// a shard read to its end is evicted before one still being read).
	if st.Fetched > refetchBound(len(want), len(sizes)) {
		t.Errorf("%d shards fetched in %d epochs of %d shards: more than about once an epoch (%v)", st.Fetched, len(want), len(sizes), st)
	}
	if w := logs.with("more than the shard cache's limit"); len(w) != 0 {
		t.Errorf("shard order warned: %q", w)
	}

	// The sample order reads every shard at once: refused up front, saying what to
	// change (it fetched every shard again and again).
	fetched := d.Stats().Fetched
	for _, err := range newLoader(t, conv, testConfig(2)).Epoch(ctx, 0) {
		if err == nil || !strings.Contains(err.Error(), "more than the shard cache's limit") || !strings.Contains(err.Error(), srv.URL("conv")) || !strings.Contains(err.Error(), "ShardOrder") {
			t.Errorf("sample order over a dataset larger than the cache: %v", err)
		}
		break
	}
	if st := d.Stats(); st.Fetched != fetched {
		t.Errorf("the refused epoch fetched %d shards", st.Fetched-fetched)
	}
	if st := d.Stats(); st.PeakBytes > limit {
		t.Errorf("sample order: %v; cache limit %d", st, limit)
	}
	// Through a cache that holds the whole dataset, the sample order reads it, each
	// shard fetched once.
	whole, err := Open(ctx, srv.URL("conv/"), &OpenOptions{Store: fastStore, Cache: &objstore.ShardCacheOptions{Dir: t.TempDir(), MaxBytes: total}, Converted: &ConvertedOptions{Logf: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	got := collect(t, newLoader(t, whole.Source, testConfig(2)), ctx, 0, 0)
	if !bytes.Equal(got.data, wantSamples.data) || !slices.Equal(got.labels, wantSamples.labels) {
		t.Error("sample order: batches differ from the local dataset's")
	}
	if st := whole.Stats(); st.Fetched != int64(len(sizes)) {
		t.Errorf("sample order through a cache holding the dataset: %v, want each of %d shards fetched once", st, len(sizes))
	}

	srv.Env(t, "")
	_, err = Open(ctx, srv.URL("conv/"), &OpenOptions{Store: fastStore, Cache: &objstore.ShardCacheOptions{MaxBytes: largest - 1}, Converted: &ConvertedOptions{Logf: quiet}})
	if err == nil || !strings.Contains(err.Error(), "more than the shard cache's limit") || !strings.Contains(err.Error(), srv.URL("conv/")) {
		t.Errorf("a shard larger than the cache: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(cacheDir); len(left) != 0 {
		t.Errorf("Close left %v in the cache directory", left)
	}
}

// With shard sizes and the cache's limit, a plan's window stays within the room the
// shards read at once leave, and each shortfall is logged once: the room, and reading
// more at once than the cache holds.
func TestPlanWindowBytes(t *testing.T) {
	// 8 shards of 10 samples (shard k holds samples 10k..10k+9), 100 bytes each.
	of := make([]int32, 80)
	for i := range of {
		of[i] = int32(i / 10)
	}
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	pf := &planFS{}
	p := newScatteredPlanner(pf, names, of, 2)
	var logs lines
	p.sizes, p.limit, p.logf, p.desc = []int64{100, 100, 100, 100, 100, 100, 100, 100}, 0, logs.logf, "test"
	// Shards two at a time: 0 and 1 interleaved, then 2 and 3, ...
	var order []int32
	for k := 0; k < 8; k += 2 {
		for i := range 10 {
			order = append(order, int32(10*k+i), int32(10*(k+1)+i))
		}
	}
	window := func(limit int64) int32 {
		p.limit = limit
		return p.build(0, order).window
	}
	if w := window(0); w != 4 { // no limit: ahead 2 + 2 at once
		t.Errorf("window %d without a limit, want 4", w)
	}
	if w := window(1000); w != 4 || len(logs.l) != 0 {
		t.Errorf("window %d with room for 10 shards, want 4; %q", w, logs.l)
	}
	if w := window(500); w != 3 || len(logs.with("leaves room for 3 shards")) != 1 {
		t.Errorf("window %d with room for 5 shards (2 read at once), want 3; %q", w, logs.l)
	}
	window(450) // logged once
	// Room for the two read at once and none ahead: none is fetched ahead (one was,
	// evicting a shard still being read, to be fetched again).
	if w := window(250); w != 0 || len(logs.l) != 1 {
		t.Errorf("window %d with room for the 2 shards read at once only, want 0; %q", w, logs.l)
	}
	// Less than the two read at once: refused, saying what to change.
	p.limit = 150
	if pl := p.build(0, order); pl.err == nil || !strings.Contains(pl.err.Error(), "more than the shard cache's limit of 150 bytes") || !strings.Contains(pl.err.Error(), "at least 200 bytes") || !strings.Contains(pl.err.Error(), "--shard-cache-max-bytes") {
		t.Errorf("a plan reading 200 bytes at once through a cache of 150: %v", pl.err)
	}
}

// A converted dataset's manifest records each shard's CRC-32C: a shard whose bytes
// changed in the store (a flipped byte on a web server that sends no checksum) is
// refused by name when it is fetched, before it is mapped and read. A dataset converted
// before the checksum was recorded still opens the same shard.
func TestConvertedShardChecksum(t *testing.T) {
	dir := convertTree(t, 2, 20)
	info, err := cache.ReadInfo(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Shards) == 0 || len(info.Shards[0].CRC32C) != 8 {
		t.Fatalf("manifest: %+v", info.Shards)
	}
	name := info.Shards[0].Name
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-10] ^= 1 // inside the last record, past the header
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(t.TempDir(), "old")
	if err := os.CopyFS(old, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	for k := range info.Shards {
		info.Shards[k].CRC32C = ""
	}
	if err := cache.WriteInfo(old, info); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, d := range []string{dir, old} {
		hs := httptest.NewServer(http.FileServer(http.Dir(d)))
		ds, err := Open(ctx, hs.URL+"/", &OpenOptions{Store: fastStore, Converted: &ConvertedOptions{Logf: quiet}})
		if err != nil {
			hs.Close()
			t.Fatal(err)
		}
		f, err := ds.Store.Cache.Open(name)
		if err == nil {
			f.Close()
		}
		if d == dir && (!errors.Is(err, objstore.ErrChanged) || !strings.Contains(err.Error(), hs.URL+"/"+name)) {
			t.Errorf("a shard changed since conversion: %v; want objstore.ErrChanged naming it", err)
		}
		if d == old && err != nil {
			t.Errorf("a dataset without shard checksums: %v", err)
		}
		ds.Close()
		hs.Close()
	}
}

// Through a shard cache that holds the shards an epoch reads at once (and, for some
// limits, none to spare), in the shard order, each shard is fetched at most once an
// epoch: none is fetched ahead into room there is not, and a shard read to its end is
// evicted before one still being read, which sat idle between its records' reads and
// was evicted as least recently used, to be fetched again. A cache too small for the
// shards read at once refuses the epoch, saying what to change.
func TestConvertedS3FetchOnce(t *testing.T) { s3test.Each(t, testConvertedS3FetchOnce) }

// refetchBound is the most shard fetches epochs of n shards may take through a cache that
// holds the shards read at once: each once an epoch, plus two an epoch. On an idle machine
// it is each once; on a loaded one the readers run ahead of the window now and then and
// an Open evicts a shard fetched ahead before it is read (34–36 fetches for 33 seen under
// -race beside other tests).
func refetchBound(epochs, n int) int64 { return int64(epochs * (n + 2)) }

func testConvertedS3FetchOnce(t *testing.T, srv *s3test.Server) {
	srv.Env(t, "")
	sizes := uploadConverted(t, srv, convertTree(t, 4, 40), "once/")
	var largest int64
	for _, n := range sizes {
		largest = max(largest, n)
	}
	ctx := context.Background()
	const epochs = 3
	ran := 0
	for mult := int64(2); mult <= 6; mult++ {
		d, err := Open(ctx, srv.URL("once/"), &OpenOptions{Store: fastStore, Cache: &objstore.ShardCacheOptions{Dir: t.TempDir(), MaxBytes: mult * largest}, Converted: &ConvertedOptions{Logf: quiet}})
		if err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(2)
		cfg.Order.Mode, cfg.Order.ShuffleBlock = pipeline.ShardOrder, 30
		ld := newLoader(t, d.Source.(*Converted).ByShard(), cfg)
		var refused error
		for e := range epochs {
			for b, err := range ld.Epoch(ctx, e) {
				if err != nil {
					refused = err
					break
				}
				b.Release()
			}
			if refused != nil {
				break
			}
		}
		st := d.Stats()
		ld.Close()
		d.Close()
		if refused != nil {
			if !strings.Contains(refused.Error(), "more than the shard cache's limit") || !strings.Contains(refused.Error(), "--shard-cache-max-bytes") || !strings.Contains(refused.Error(), srv.URL("once")) {
				t.Errorf("limit %d shards: %v", mult, refused)
			}
			continue
		}
		ran++
		if st.Fetched > refetchBound(epochs, len(sizes)) || st.PeakBytes > mult*largest {
			t.Errorf("limit %d of the largest shard: %d fetches in %d epochs of %d shards, want each about once an epoch (%v)", mult, st.Fetched, epochs, len(sizes), st)
		}
	}
	if ran < 2 {
		t.Errorf("only %d limits read the dataset", ran)
	}
}
