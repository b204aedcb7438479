package source

import (
	"context"
	"testing"

	"github.com/conveyor-ml/conveyor/augment"
	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/internal/leakcheck"
	"github.com/conveyor-ml/conveyor/internal/treetest"
	"github.com/conveyor-ml/conveyor/mixup"
	"github.com/conveyor-ml/conveyor/pack"
	"github.com/conveyor-ml/conveyor/pipeline"
)

// Every goroutine a loader or a source starts must have exited once the tests end, and
// the shared tree is removed.
func TestMain(m *testing.M) { leakcheck.Main(m, treetest.Cleanup) }

// testConfig is the train recipe at 24 px with colour jitter: what the sources' tests
// load with.
func testConfig(workers int) *pipeline.Config {
	cfg := &pipeline.Config{
		BatchSize: 8, Workers: workers, Seed: 42,
		Pack: pack.Options{DType: pack.Float32, Normalize: true},
		Logf: func(string, ...any) {},
	}
	if err := pipeline.ApplyRecipe(cfg, "train", 24); err != nil {
		panic(err)
	}
	cfg.Augment = append(cfg.Augment, &augment.ColorJitter{Brightness: 0.4, Contrast: 0.4, Saturation: 0.4, Hue: 0.1}, &augment.RandomGrayscale{P: 0.2})
	return cfg
}

// newLoader is pipeline.New, closed (and its Close checked) when the test ends.
func newLoader(t testing.TB, src pipeline.Source, cfg *pipeline.Config) *pipeline.Loader {
	t.Helper()
	ld, err := pipeline.New(src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ld.Close(); err != nil {
			t.Error(err)
		}
	})
	return ld
}

// epochData is what an epoch delivered, batch after batch.
type epochData struct {
	data    []byte
	labels  []int32
	indices []int64
	batches int
	lens    []int
}

// collect runs epoch from cursor and keeps what it delivers.
func collect(t testing.TB, ld *pipeline.Loader, ctx context.Context, epoch, cursor int) epochData {
	t.Helper()
	var d epochData
	for b, err := range ld.EpochFrom(ctx, epoch, cursor) {
		if err != nil {
			t.Fatalf("epoch %d: %v", epoch, err)
		}
		d.data = append(d.data, b.Data...)
		d.labels = append(d.labels, b.Labels...)
		d.indices = append(d.indices, b.Indices...)
		d.lens = append(d.lens, b.Len)
		d.batches++
		b.Release()
	}
	return d
}

// openCache opens a converted dataset's directory, closed when the test ends.
func openCache(t *testing.T, dir string, codec cache.Codec) *cache.Cache {
	t.Helper()
	c, err := cache.Open(dir, &cache.Options{Codec: codec, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// batchRecord is one delivered batch's labels, targets and mixing, copied out before
// Release.
type batchRecord struct {
	labels  []int32
	indices []int64
	targets []float32
	mix     mixup.Params
}
