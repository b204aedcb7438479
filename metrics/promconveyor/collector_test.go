package promconveyor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/conveyor-ml/conveyor/source"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/internal/leakcheck"
	"github.com/conveyor-ml/conveyor/internal/synth"
	"github.com/conveyor-ml/conveyor/metrics/promconveyor"
	"github.com/conveyor-ml/conveyor/pack"
	"github.com/conveyor-ml/conveyor/pinned"
	"github.com/conveyor-ml/conveyor/pipeline"
)

// Every goroutine a loader starts must have exited once the tests end.
func TestMain(m *testing.M) { leakcheck.Main(m) }

// fake is a Source that returns whatever the test put in it, and counts calls.
type fake struct {
	st    pipeline.Stats
	calls int
}

func (f *fake) Stats() pipeline.Stats { f.calls++; return f.st }

// fakeStats has a distinct value in every field, so a field reported under the wrong
// name shows up.
func fakeStats() pipeline.Stats {
	st := pipeline.Stats{Epochs: 2, Batches: 30, Wait: 1500 * time.Millisecond}
	st.Stages.Read = pipeline.StageStats{Items: 240, Busy: 2 * time.Second, Bytes: 1000000}
	st.Stages.Decode = pipeline.StageStats{Items: 239, Busy: 4250 * time.Millisecond, Bytes: 3000000}
	st.Stages.Augment = pipeline.StageStats{Items: 238, Busy: 500 * time.Millisecond, Bytes: 238}
	st.Stages.Pack = pipeline.StageStats{Items: 237, Busy: 250 * time.Millisecond, Bytes: 5000000}
	st.Stages.Mix = pipeline.StageStats{Items: 29, Busy: 125 * time.Millisecond, Bytes: 4900000}
	q := &st.Queues
	q.Tasks.Len, q.Tasks.Cap, q.Decoded.Len, q.Decoded.Cap, q.Ready.Len, q.Ready.Cap = 3, 64, 5, 16, 1, 4
	st.Tuning.Workers, st.Tuning.IOWorkers, st.Tuning.Steps = 3, 32, 4
	st.Bad.Samples = 12
	st.Bad.Recent = []pipeline.SampleError{{Path: "a.jpg", Err: errors.New("decode: truncated")}}
	st.Cache.Hits, st.Cache.Stored, st.Cache.Deferred = 100, 40, 7
	st.Cache.Store = &cache.Stats{
		Records: 140, Shards: 3, Bytes: 9000000, Hits: 101, Misses: 41, Corrupt: 1,
		Written: 42, Rejected: 2, Evicted: 4, Full: true, Disabled: "disk full",
	}
	m := &st.Memory
	m.Budget, m.PeakHeld, m.ReadBudget, m.PeakRead = 1000000000, 300000000, 64000000, 10000000
	m.DecodeBudget, m.PeakDecode, m.Returns = 128000000, 20000000, 3
	m.Pinned = pinned.Stats{
		BufferSize: 1048576, Buffers: 6, InUse: 2, PeakInUse: 5, BytesMapped: 6291456,
		BytesInUse: 2097152, PeakBytesInUse: 5242880, Budget: 8388608, Locked: false,
		LockError: "mlock: operation not permitted", Gets: 60, Waits: 9,
	}
	m.Outstanding = 2
	return st
}

// loaderText is fakeStats in the text exposition format, with a loader="train" label.
const loaderText = `
# HELP conveyor_loader_epochs_total Epochs started.
# TYPE conveyor_loader_epochs_total counter
conveyor_loader_epochs_total{loader="train"} 2
# HELP conveyor_loader_batches_total Batches delivered to the consumer.
# TYPE conveyor_loader_batches_total counter
conveyor_loader_batches_total{loader="train"} 30
# HELP conveyor_loader_wait_seconds_total Time the consumer waited for batches; its rate is the fraction of time training starved for input.
# TYPE conveyor_loader_wait_seconds_total counter
conveyor_loader_wait_seconds_total{loader="train"} 1.5
# HELP conveyor_loader_stage_items_total Samples each stage processed.
# TYPE conveyor_loader_stage_items_total counter
conveyor_loader_stage_items_total{loader="train",stage="read"} 240
conveyor_loader_stage_items_total{loader="train",stage="decode"} 239
conveyor_loader_stage_items_total{loader="train",stage="augment"} 238
conveyor_loader_stage_items_total{loader="train",stage="pack"} 237
# HELP conveyor_loader_stage_busy_seconds_total Time each stage spent working, summed over goroutines; its rate is the stage's busy goroutines.
# TYPE conveyor_loader_stage_busy_seconds_total counter
conveyor_loader_stage_busy_seconds_total{loader="train",stage="read"} 2
conveyor_loader_stage_busy_seconds_total{loader="train",stage="decode"} 4.25
conveyor_loader_stage_busy_seconds_total{loader="train",stage="augment"} 0.5
conveyor_loader_stage_busy_seconds_total{loader="train",stage="pack"} 0.25
conveyor_loader_stage_busy_seconds_total{loader="train",stage="mix"} 0.125
# HELP conveyor_loader_stage_bytes_total Bytes through a stage: file bytes read, bytes packed into batches.
# TYPE conveyor_loader_stage_bytes_total counter
conveyor_loader_stage_bytes_total{loader="train",stage="read"} 1e+06
conveyor_loader_stage_bytes_total{loader="train",stage="pack"} 5e+06
# HELP conveyor_loader_decoded_pixels_total Pixels the decode stage produced.
# TYPE conveyor_loader_decoded_pixels_total counter
conveyor_loader_decoded_pixels_total{loader="train"} 3e+06
# HELP conveyor_loader_mixed_batches_total Batches mixed by MixUp or CutMix (Config.Mix); the mix stage's busy time is stage_busy_seconds_total{stage="mix"}.
# TYPE conveyor_loader_mixed_batches_total counter
conveyor_loader_mixed_batches_total{loader="train"} 29
# HELP conveyor_loader_queue_length Items in the running epoch's queues; 0 when idle.
# TYPE conveyor_loader_queue_length gauge
conveyor_loader_queue_length{loader="train",queue="tasks"} 3
conveyor_loader_queue_length{loader="train",queue="decoded"} 5
conveyor_loader_queue_length{loader="train",queue="ready"} 1
# HELP conveyor_loader_queue_capacity Capacity of the running epoch's queues; 0 when idle.
# TYPE conveyor_loader_queue_capacity gauge
conveyor_loader_queue_capacity{loader="train",queue="tasks"} 64
conveyor_loader_queue_capacity{loader="train",queue="decoded"} 16
conveyor_loader_queue_capacity{loader="train",queue="ready"} 4
# HELP conveyor_loader_bad_samples_total Samples that failed to read or decode.
# TYPE conveyor_loader_bad_samples_total counter
conveyor_loader_bad_samples_total{loader="train"} 12
# HELP conveyor_loader_cache_hits_total Samples read from the cache instead of decoded.
# TYPE conveyor_loader_cache_hits_total counter
conveyor_loader_cache_hits_total{loader="train"} 100
# HELP conveyor_loader_cache_stored_total Samples stored into the cache.
# TYPE conveyor_loader_cache_stored_total counter
conveyor_loader_cache_stored_total{loader="train"} 40
# HELP conveyor_loader_cache_deferred_total Samples not stored into the cache because filling it had used its share of the workers' time.
# TYPE conveyor_loader_cache_deferred_total counter
conveyor_loader_cache_deferred_total{loader="train"} 7
# HELP conveyor_loader_memory_budget_bytes Memory the loader may hold: pinned buffers plus read and decode working memory.
# TYPE conveyor_loader_memory_budget_bytes gauge
conveyor_loader_memory_budget_bytes{loader="train"} 1e+09
# HELP conveyor_loader_memory_peak_held_bytes Most memory the loader has held at once; never above the budget.
# TYPE conveyor_loader_memory_peak_held_bytes gauge
conveyor_loader_memory_peak_held_bytes{loader="train"} 3e+08
# HELP conveyor_loader_memory_returns_total Times the loader gave freed memory back to the system as the process neared its budget.
# TYPE conveyor_loader_memory_returns_total counter
conveyor_loader_memory_returns_total{loader="train"} 3
# HELP conveyor_loader_workers Goroutines in use, by kind: cpu (decode, augment, pack) and io (concurrent reads); as set, or as the autotuner chose.
# TYPE conveyor_loader_workers gauge
conveyor_loader_workers{kind="cpu",loader="train"} 3
conveyor_loader_workers{kind="io",loader="train"} 32
# HELP conveyor_loader_autotune_steps_total Changes the autotuner made to the worker counts.
# TYPE conveyor_loader_autotune_steps_total counter
conveyor_loader_autotune_steps_total{loader="train"} 4
# HELP conveyor_loader_working_memory_budget_bytes Working memory budget, by kind.
# TYPE conveyor_loader_working_memory_budget_bytes gauge
conveyor_loader_working_memory_budget_bytes{kind="read",loader="train"} 6.4e+07
conveyor_loader_working_memory_budget_bytes{kind="decode",loader="train"} 1.28e+08
# HELP conveyor_loader_working_memory_peak_bytes Most working memory held at once, by kind.
# TYPE conveyor_loader_working_memory_peak_bytes gauge
conveyor_loader_working_memory_peak_bytes{kind="read",loader="train"} 1e+07
conveyor_loader_working_memory_peak_bytes{kind="decode",loader="train"} 2e+07
# HELP conveyor_loader_pinned_buffers Pinned batch buffers in the pool.
# TYPE conveyor_loader_pinned_buffers gauge
conveyor_loader_pinned_buffers{loader="train"} 6
# HELP conveyor_loader_pinned_buffers_in_use Pinned batch buffers currently out.
# TYPE conveyor_loader_pinned_buffers_in_use gauge
conveyor_loader_pinned_buffers_in_use{loader="train"} 2
# HELP conveyor_loader_pinned_buffer_size_bytes Size of one pinned batch buffer.
# TYPE conveyor_loader_pinned_buffer_size_bytes gauge
conveyor_loader_pinned_buffer_size_bytes{loader="train"} 1.048576e+06
# HELP conveyor_loader_pinned_mapped_bytes Pinned memory mapped.
# TYPE conveyor_loader_pinned_mapped_bytes gauge
conveyor_loader_pinned_mapped_bytes{loader="train"} 6.291456e+06
# HELP conveyor_loader_pinned_in_use_bytes Pinned memory in buffers currently out, page-rounded.
# TYPE conveyor_loader_pinned_in_use_bytes gauge
conveyor_loader_pinned_in_use_bytes{loader="train"} 2.097152e+06
# HELP conveyor_loader_pinned_peak_in_use_bytes Most pinned memory out at once, page-rounded.
# TYPE conveyor_loader_pinned_peak_in_use_bytes gauge
conveyor_loader_pinned_peak_in_use_bytes{loader="train"} 5.24288e+06
# HELP conveyor_loader_pinned_budget_bytes Pinned pool budget.
# TYPE conveyor_loader_pinned_budget_bytes gauge
conveyor_loader_pinned_budget_bytes{loader="train"} 8.388608e+06
# HELP conveyor_loader_pinned_locked 1 if the pinned buffers are locked in memory (mlock), else 0.
# TYPE conveyor_loader_pinned_locked gauge
conveyor_loader_pinned_locked{loader="train"} 0
# HELP conveyor_loader_pinned_registered 1 if the pinned buffers are registered with the GPU driver (cuMemHostRegister), else 0: copies from them are then partly synchronous.
# TYPE conveyor_loader_pinned_registered gauge
conveyor_loader_pinned_registered{loader="train"} 0
# HELP conveyor_loader_pinned_gets_total Pinned buffers handed out.
# TYPE conveyor_loader_pinned_gets_total counter
conveyor_loader_pinned_gets_total{loader="train"} 60
# HELP conveyor_loader_pinned_waits_total Pinned buffer requests that had to wait for a release; a rising rate means the consumer holds batches too long.
# TYPE conveyor_loader_pinned_waits_total counter
conveyor_loader_pinned_waits_total{loader="train"} 9
# HELP conveyor_loader_outstanding_batches Batches held by the consumer and not yet released.
# TYPE conveyor_loader_outstanding_batches gauge
conveyor_loader_outstanding_batches{loader="train"} 2
`

// cacheText is fakeStats's cache, in the text exposition format.
const cacheText = `
# HELP conveyor_cache_records Records indexed in the loader's cache.
# TYPE conveyor_cache_records gauge
conveyor_cache_records{loader="train"} 140
# HELP conveyor_cache_shards Shard files in the loader's cache.
# TYPE conveyor_cache_shards gauge
conveyor_cache_shards{loader="train"} 3
# HELP conveyor_cache_size_bytes Size of the loader's cache directory as far as this process knows.
# TYPE conveyor_cache_size_bytes gauge
conveyor_cache_size_bytes{loader="train"} 9e+06
# HELP conveyor_cache_lookups_total Cache lookups, by result (hit or miss), from every user of the cache in this process.
# TYPE conveyor_cache_lookups_total counter
conveyor_cache_lookups_total{loader="train",result="hit"} 101
conveyor_cache_lookups_total{loader="train",result="miss"} 41
# HELP conveyor_cache_corrupt_records_total Cache records whose checksum or framing failed.
# TYPE conveyor_cache_corrupt_records_total counter
conveyor_cache_corrupt_records_total{loader="train"} 1
# HELP conveyor_cache_written_records_total Records written to the cache.
# TYPE conveyor_cache_written_records_total counter
conveyor_cache_written_records_total{loader="train"} 42
# HELP conveyor_cache_rejected_records_total Records not written because the cache was full or disabled.
# TYPE conveyor_cache_rejected_records_total counter
conveyor_cache_rejected_records_total{loader="train"} 2
# HELP conveyor_cache_evicted_shards_total Cache shards deleted to stay under the size limit.
# TYPE conveyor_cache_evicted_shards_total counter
conveyor_cache_evicted_shards_total{loader="train"} 4
# HELP conveyor_cache_full 1 once a record did not fit under the cache's size limit, else 0.
# TYPE conveyor_cache_full gauge
conveyor_cache_full{loader="train"} 1
# HELP conveyor_cache_disabled 1 once writing to the cache has stopped (see the log for why), else 0.
# TYPE conveyor_cache_disabled gauge
conveyor_cache_disabled{loader="train"} 1
`

// Metric counts: 32 loader families, 47 series; 10 cache families, 11 series.
const loaderSeries, cacheSeries = 48, 11

func newCollector(t *testing.T, src *fake) *promconveyor.Collector {
	t.Helper()
	c, err := promconveyor.NewCollector(src, &promconveyor.Options{ConstLabels: prometheus.Labels{"loader": "train"}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCollectAndCompare(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*pipeline.Stats)
		want  string
		count int
	}{
		{"with cache", func(*pipeline.Stats) {}, loaderText + cacheText, loaderSeries + cacheSeries},
		{"without cache", func(st *pipeline.Stats) { st.Cache.Store = nil }, loaderText, loaderSeries},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := fakeStats()
			tt.edit(&st)
			src := &fake{st: st}
			c := newCollector(t, src)
			if err := testutil.CollectAndCompare(c, strings.NewReader(tt.want)); err != nil {
				t.Error(err)
			}
			if n := testutil.CollectAndCount(c); n != tt.count {
				t.Errorf("CollectAndCount = %d, want %d", n, tt.count)
			}
			if src.calls != 2 {
				t.Errorf("two collections took %d snapshots, want one each", src.calls)
			}
		})
	}
}

func TestCollectReadsFreshSnapshot(t *testing.T) {
	src := &fake{st: fakeStats()}
	c := newCollector(t, src)
	const head = `
# HELP conveyor_loader_batches_total Batches delivered to the consumer.
# TYPE conveyor_loader_batches_total counter
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(head+`conveyor_loader_batches_total{loader="train"} 30
`), "conveyor_loader_batches_total"); err != nil {
		t.Fatal(err)
	}
	src.st.Batches = 31
	if err := testutil.CollectAndCompare(c, strings.NewReader(head+`conveyor_loader_batches_total{loader="train"} 31
`), "conveyor_loader_batches_total"); err != nil {
		t.Errorf("after the source moved on: %v", err)
	}
}

func mustRegistry(t *testing.T, cs ...prometheus.Collector) *prometheus.Registry {
	t.Helper()
	// A pedantic registry checks at Gather that every collected metric matches a Desc the
	// collector described, and that descriptors are consistent across collectors.
	reg := prometheus.NewPedanticRegistry()
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

func TestRegisterAndGather(t *testing.T) {
	train := newCollector(t, &fake{st: fakeStats()})
	evalSt := fakeStats()
	evalSt.Cache.Store = nil
	eval, err := promconveyor.NewCollector(&fake{st: evalSt}, &promconveyor.Options{ConstLabels: prometheus.Labels{"loader": "eval"}})
	if err != nil {
		t.Fatal(err)
	}
	reg := mustRegistry(t, train, eval)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	for _, mf := range mfs {
		series += len(mf.GetMetric())
	}
	if want := 2*loaderSeries + cacheSeries; series != want {
		t.Errorf("gathered %d series from two loaders, want %d", series, want)
	}
	// The same loader registered twice is refused, as a duplicate exposition would be.
	if err := reg.Register(newCollector(t, &fake{})); err == nil {
		t.Error("a second collector with the same labels registered")
	}
	// Without labels, one collector registers alone.
	plain, err := promconveyor.NewCollector(&fake{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustRegistry(t, plain)
}

func TestLint(t *testing.T) {
	problems, err := testutil.CollectAndLint(newCollector(t, &fake{st: fakeStats()}))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

func TestNewCollectorRejectsLabels(t *testing.T) {
	for _, labels := range []prometheus.Labels{
		{"stage": "x"},      // clashes with a variable label
		{"__reserved": "x"}, // reserved for Prometheus's own use
		{"": "x"},
		{"loader": "\xff"}, // not UTF-8
	} {
		if _, err := promconveyor.NewCollector(&fake{}, &promconveyor.Options{ConstLabels: labels}); err == nil {
			t.Errorf("labels %v accepted", labels)
		} else if !strings.HasPrefix(err.Error(), "promconveyor: ") {
			t.Errorf("labels %v: error %q lacks the package prefix", labels, err)
		}
	}
}

func TestOptionsCloned(t *testing.T) {
	labels := prometheus.Labels{"loader": "train"}
	o := &promconveyor.Options{ConstLabels: labels}
	c, err := promconveyor.NewCollector(&fake{st: fakeStats()}, o)
	if err != nil {
		t.Fatal(err)
	}
	labels["loader"] = "changed"
	if got, want := c.String(), `promconveyor: const labels {loader="train"}`; got != want {
		t.Errorf("String() = %s, want %s", got, want)
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(loaderText+cacheText)); err != nil {
		t.Errorf("the caller's map changed the collector: %v", err)
	}
}

// TestLoader scrapes a real loader after one epoch.
func TestLoader(t *testing.T) {
	dir := t.TempDir()
	const n = 21 // 3 classes x 7: batches of 8, 8 and 5
	if _, err := synth.WriteTree(dir, &synth.TreeOptions{Classes: 3, PerClass: 7, Seed: 5, MinSide: 40, MaxSide: 100}); err != nil {
		t.Fatal(err)
	}
	src, err := source.Dir(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &pipeline.Config{
		Batch: pipeline.BatchConfig{Size: 8}, Tuning: pipeline.TuningConfig{Workers: 2}, Order: pipeline.OrderConfig{Seed: 1},
		Pack: pack.Options{DType: pack.Uint8},
		Logf: func(string, ...any) {},
	}
	if err := pipeline.ApplyRecipe(cfg, "train", 16); err != nil {
		t.Fatal(err)
	}
	ld, err := pipeline.New(src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := ld.Close(); err != nil {
			t.Error(err)
		}
	}()
	c, err := promconveyor.NewCollector(ld, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := mustRegistry(t, c)
	for b, err := range ld.Epoch(context.Background(), 0) {
		if err != nil {
			t.Fatal(err)
		}
		b.Release()
	}

	want := fmt.Sprintf(`
# HELP conveyor_loader_epochs_total Epochs started.
# TYPE conveyor_loader_epochs_total counter
conveyor_loader_epochs_total 1
# HELP conveyor_loader_batches_total Batches delivered to the consumer.
# TYPE conveyor_loader_batches_total counter
conveyor_loader_batches_total 3
# HELP conveyor_loader_stage_items_total Samples each stage processed.
# TYPE conveyor_loader_stage_items_total counter
conveyor_loader_stage_items_total{stage="read"} %[1]d
conveyor_loader_stage_items_total{stage="decode"} %[1]d
conveyor_loader_stage_items_total{stage="augment"} %[1]d
conveyor_loader_stage_items_total{stage="pack"} %[1]d
# HELP conveyor_loader_stage_bytes_total Bytes through a stage: file bytes read, bytes packed into batches.
# TYPE conveyor_loader_stage_bytes_total counter
conveyor_loader_stage_bytes_total{stage="read"} %[2]d
conveyor_loader_stage_bytes_total{stage="pack"} %[3]d
# HELP conveyor_loader_bad_samples_total Samples that failed to read or decode.
# TYPE conveyor_loader_bad_samples_total counter
conveyor_loader_bad_samples_total 0
# HELP conveyor_loader_outstanding_batches Batches held by the consumer and not yet released.
# TYPE conveyor_loader_outstanding_batches gauge
conveyor_loader_outstanding_batches 0
`, n, ld.Stats().Stages.Read.Bytes, n*3*16*16)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"conveyor_loader_epochs_total", "conveyor_loader_batches_total", "conveyor_loader_stage_items_total",
		"conveyor_loader_stage_bytes_total", "conveyor_loader_bad_samples_total", "conveyor_loader_outstanding_batches"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg, "conveyor_cache_records"); err != nil || n != 0 {
		t.Errorf("cache metrics from a loader without a cache: %d, %v", n, err)
	}
}
