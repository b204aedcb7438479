package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/internal/treetest"
)

func openCache(t *testing.T, dir string, codec cache.Codec) *cache.Cache {
	t.Helper()
	c, err := cache.Open(dir, &cache.Options{Codec: codec, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// The cache stores pixels before augmentation, so for lossless codecs every epoch's
// batches are byte-identical to a loader without it that decodes in full: while it fills
// and once it serves.
func TestCacheGivesSameBatches(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	full := testConfig(2)
	full.FullDecode = true
	plain := newLoader(t, src, full)
	for _, codec := range []cache.Codec{cache.S2, cache.Raw, cache.Zstd} {
		t.Run(string(codec), func(t *testing.T) {
			cfg := testConfig(3)
			cfg.SampleCache = openCache(t, t.TempDir(), codec)
			cfg.SampleCacheFill = 1
			ld := newLoader(t, src, cfg)
			for e := range 3 {
				want := collect(t, plain, ctx, e, 0)
				got := collect(t, ld, ctx, e, 0)
				if !bytes.Equal(got.data, want.data) || !slices.Equal(got.labels, want.labels) || !slices.Equal(got.indices, want.indices) {
					t.Fatalf("epoch %d: batches differ with the %s cache", e, codec)
				}
			}
			st := ld.Stats()
			good := int64(src.Len()) // the shared tree has no bad files
			if st.Cache.Stored != good || st.Cache.Hits != 2*good || st.Cache.Store.Records != int(good) {
				t.Fatalf("stored %d, hits %d, records %d; want %d, %d, %d", st.Cache.Stored, st.Cache.Hits, st.Cache.Store.Records, good, 2*good, good)
			}
			if st.Stages.Decode.Items != 3*good {
				t.Fatalf("decode stage counted %d items, want %d", st.Stages.Decode.Items, 3*good)
			}
		})
	}
}

// A cache written by one loader serves another that opens the same directory, and a
// loader with a different decode spec never sees those records.
func TestCacheSharedAcrossLoadersAndSpecs(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx := context.Background()
	cfg := testConfig(2)
	cfg.SampleCache = openCache(t, dir, cache.S2)
	cfg.SampleCacheFill = 1
	first := newLoader(t, src, cfg)
	collect(t, first, ctx, 0, 0)

	cfg2 := testConfig(2)
	cfg2.SampleCache = openCache(t, dir, cache.S2)
	second := newLoader(t, src, cfg2)
	collect(t, second, ctx, 0, 0)
	if st := second.Stats(); st.Cache.Hits != int64(src.Len()) || st.Cache.Stored != 0 {
		t.Fatalf("second loader: %d hits, %d stored; want %d, 0", st.Cache.Hits, st.Cache.Stored, src.Len())
	}

	cfg3 := testConfig(2)
	cfg3.Decode.Resize = decode.ResizePolicy{Mode: decode.ResizeShorter, Size: 30}
	cfg3.SampleCache = openCache(t, dir, cache.S2)
	cfg3.SampleCacheFill = 1
	third := newLoader(t, src, cfg3)
	collect(t, third, ctx, 0, 0)
	if st := third.Stats(); st.Cache.Hits != 0 || st.Cache.Stored != int64(src.Len()) {
		t.Fatalf("loader with another spec: %d hits, %d stored; want 0, %d", st.Cache.Hits, st.Cache.Stored, src.Len())
	}
}

// Two loaders sharing one cache directory (each its own Cache, as two processes have),
// reading the same order at the same time, store each sample once between them: a Put
// first catches up with what the other stored. Each stored every sample.
func TestCacheSharedAtOnce(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx := context.Background()
	var caches [2]*cache.Cache
	var loaders [2]*Loader
	for i := range loaders {
		cfg := testConfig(2)
		caches[i] = openCache(t, dir, cache.S2)
		cfg.SampleCache, cfg.SampleCacheFill = caches[i], 1
		loaders[i] = newLoader(t, src, cfg)
	}
	var wg sync.WaitGroup
	var epochs [2]epochData
	for i := range loaders {
		wg.Go(func() {
			for b, err := range loaders[i].Epoch(ctx, 0) {
				if err != nil {
					t.Error(err)
					return
				}
				epochs[i].data = append(epochs[i].data, b.Data...)
				b.Release()
			}
		})
	}
	wg.Wait()
	if !bytes.Equal(epochs[0].data, epochs[1].data) {
		t.Error("the two loaders' epochs differ")
	}
	a, b := caches[0].Stats(), caches[1].Stats()
	if n := int64(src.Len()); a.Written+b.Written != n {
		t.Errorf("%d samples: the loaders wrote %d and %d records (and skipped %d and %d the other had stored); want %d between them", n, a.Written, b.Written, a.Shared, b.Shared, n)
	}
	t.Logf("written %d and %d, skipped as stored by the other %d and %d", a.Written, b.Written, a.Shared, b.Shared)
	// And the next epoch reads them all from the cache.
	hits := loaders[1].Stats().Cache.Hits
	collect(t, loaders[1], ctx, 1, 0)
	if n := loaders[1].Stats().Cache.Hits - hits; n != int64(src.Len()) {
		t.Errorf("epoch 1: %d cache hits, want %d", n, src.Len())
	}
}

// A file changed after it was cached is decoded again, never served stale.
func TestCacheChangedFileIsNotStale(t *testing.T) {
	dir := treetest.New(t, 2, 4)
	src, err := Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cfg := testConfig(2)
	cfg.Order.Sequential = true
	if err := ApplyRecipe(cfg, "eval", 24); err != nil {
		t.Fatal(err)
	}
	cfg.SampleCache = openCache(t, t.TempDir(), cache.S2)
	cfg.SampleCacheFill = 1
	ld := newLoader(t, src, cfg)
	before := collect(t, ld, ctx, 0, 0)

	// Replace sample 0 with sample 1's bytes (another picture, another size), keeping the
	// name and setting an old modification time, as a restore from backup would.
	p0 := filepath.Join(dir, filepath.FromSlash(src.Path(0)))
	p1 := filepath.Join(dir, filepath.FromSlash(src.Path(1)))
	if filepath.Ext(p0) != filepath.Ext(p1) {
		t.Skipf("samples 0 and 1 have different formats: %s, %s", p0, p1)
	}
	data, err := os.ReadFile(p1)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p0, data, 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := os.Chtimes(p0, old, old); err != nil {
		t.Fatal(err)
	}
	after := collect(t, ld, ctx, 1, 0)
	n := ld.sampleBytes
	if !bytes.Equal(after.data[:n], before.data[n:2*n]) {
		t.Fatal("sample 0 still shows its old pixels after the file changed")
	}
	if !bytes.Equal(after.data[n:], before.data[n:]) {
		t.Fatal("unchanged samples changed")
	}
	if st := ld.Stats(); st.Cache.Hits != int64(src.Len()-1) {
		t.Fatalf("%d hits in the second epoch, want %d", st.Cache.Hits, src.Len()-1)
	}
}

// A damaged record is detected, counted, decoded from its source instead (same batch
// bytes) and stored again.
func TestCacheDamagedRecordFallsBackToSource(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx := context.Background()
	cfg := testConfig(2)
	cfg.SampleCache = openCache(t, dir, cache.S2)
	cfg.SampleCacheFill = 1
	ld := newLoader(t, src, cfg)
	collect(t, ld, ctx, 0, 0)
	want := collect(t, ld, ctx, 1, 0)
	ld.Close()
	cfg.SampleCache.Close()

	// Flip one bit in the middle of every tenth record's payload.
	c := openCache(t, dir, cache.S2)
	var damaged int
	for i, r := range c.Records(ld.spec) {
		if i%10 != 0 {
			continue
		}
		treetest.FlipBit(t, filepath.Join(dir, r.Shard()), r.Offset(), int64(r.Bytes))
		damaged++
	}
	var logs logSink
	cfg2 := testConfig(2)
	cfg2.SampleCache, cfg2.SampleCacheFill, cfg2.Logf = c, 1, logs.logf
	ld2 := newLoader(t, src, cfg2)
	got := collect(t, ld2, ctx, 1, 0)
	if !bytes.Equal(got.data, want.data) {
		t.Fatal("batches differ after records were damaged")
	}
	st := ld2.Stats()
	if st.Cache.Store.Corrupt != int64(damaged) || st.Cache.Stored != int64(damaged) || st.Cache.Hits != int64(src.Len()-damaged) {
		t.Fatalf("corrupt %d, re-stored %d, hits %d; want %d, %d, %d", st.Cache.Store.Corrupt, st.Cache.Stored, st.Cache.Hits, damaged, damaged, src.Len()-damaged)
	}
	if !strings.Contains(logs.String(), "decoding the source instead") {
		t.Fatalf("no log line for the damaged records:\n%s", logs.String())
	}
	// The next epoch is served entirely from the cache again.
	collect(t, ld2, ctx, 2, 0)
	if st2 := ld2.Stats(); st2.Cache.Hits-st.Cache.Hits != int64(src.Len()) {
		t.Fatalf("epoch after repair: %d hits, want %d", st2.Cache.Hits-st.Cache.Hits, src.Len())
	}
}

type logSink struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logSink) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(strings.TrimSpace(fmt.Sprintf(format, args...)) + "\n")
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// When the consumer is slower than the loader, the time the loader waits for it pays for
// the fill: with the default SampleCacheFill, the samples prepared after the first prefetch
// window are stored on first sight (give or take the batch during which the first wait
// is still being counted), and the next epochs store the rest.
func TestCacheFillUsesIdleTime(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(2)
	cfg.SampleCache = openCache(t, t.TempDir(), cache.Zstd) // the slowest lossless codec
	ld := newLoader(t, src, cfg)
	slow := func(e int) {
		for b, err := range ld.Epoch(context.Background(), e) {
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond) // a training step
			b.Release()
		}
	}
	slow(0)
	window := int64((ld.nbuf + 2) * ld.cfg.Batch.Size)
	st := ld.Stats()
	if st.Cache.Stored+st.Cache.Deferred != int64(src.Len()) || st.Cache.Deferred > window {
		t.Fatalf("epoch 0: stored %d, deferred %d of %d samples behind a slow consumer; want at most %d deferred",
			st.Cache.Stored, st.Cache.Deferred, src.Len(), window)
	}
	for e := 1; e < 4 && ld.Stats().Cache.Stored < int64(src.Len()); e++ {
		slow(e)
	}
	if st := ld.Stats(); st.Cache.Stored != int64(src.Len()) || st.Cache.Store.Records != src.Len() {
		t.Fatalf("after 4 epochs: stored %d, records %d; want %d", st.Cache.Stored, st.Cache.Store.Records, src.Len())
	}
}
