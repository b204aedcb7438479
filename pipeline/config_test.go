package pipeline

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/conveyor-ml/conveyor/internal/treetest"
	"github.com/conveyor-ml/conveyor/mixup"
	"github.com/conveyor-ml/conveyor/pack"
)

// Every field that sizes an allocation, a channel or a goroutine count is bounded, and
// every float field refuses NaN and values out of its range, so that New fails naming
// the field instead of an epoch dying of an out-of-memory error or an overflow.
func TestConfigBounds(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	nan := math.NaN()
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"io-workers", func(c *Config) { c.Tuning.IOWorkers = 1 << 30 }, "IOWorkers 1073741824 not in [1, 4096]"},
		{"workers", func(c *Config) { c.Tuning.Workers = 1 << 24 }, "Workers 16777216 not in [1, 4096]"},
		{"negative-workers", func(c *Config) { c.Tuning.Workers = -1 }, "Workers -1 not in [1, 4096]"},
		{"prefetch", func(c *Config) { c.Tuning.Prefetch = 1 << 30 }, "Prefetch 1073741824 not in [1, 8192]"},
		{"batch", func(c *Config) { c.Batch.Size = 1 << 40 }, "BatchSize 1099511627776 not in [1, 1048576]"},
		{"world", func(c *Config) { c.Order.World = 1 << 62 }, "World 4611686018427387904 not in [1, 16777216]"},
		{"world-partitions", func(c *Config) { c.Order.Mode, c.Order.World, c.Order.Partitions = ShardOrder, 1<<62, 1<<62 }, "World 4611686018427387904 not in"},
		{"shuffle-block", func(c *Config) { c.Order.Mode, c.Order.ShuffleBlock = ShardOrder, 1<<40 }, "ShuffleBlock 1099511627776 not in [0, 2147483647]"},
		{"budget", func(c *Config) { c.Tuning.MemoryBudget = math.MaxInt64 }, "MemoryBudget 9223372036854775807 not in [0, 1125899906842624]"},
		{"cpu-limit", func(c *Config) { c.Tuning.CPULimit = 1e18 }, "CPULimit 1e+18 not in (0, 4096] cores"},
		{"cpu-limit-nan", func(c *Config) { c.Tuning.CPULimit = nan }, "CPULimit NaN not in"},
		{"cpu-limit-inf", func(c *Config) { c.Tuning.CPULimit = math.Inf(1) }, "CPULimit +Inf not in"},
		{"max-bad-nan", func(c *Config) { c.Bad.MaxFraction = nan }, "MaxBadFraction NaN: want a fraction ≤ 1"},
		{"max-bad-inf", func(c *Config) { c.Bad.MaxFraction = math.Inf(1) }, "MaxBadFraction +Inf"},
		{"cache-fill-nan", func(c *Config) { c.SampleCacheFill = nan }, "SampleCacheFill NaN not in [0, 1]"},
		{"cache-fill-inf", func(c *Config) { c.SampleCacheFill = math.Inf(-1) }, "SampleCacheFill -Inf not in [0, 1]"},
		{"pack-overflow", func(c *Config) { c.Pack.Width, c.Pack.Height = 1<<31, 1<<31 }, "Pack: pack: pack size 2147483648x2147483648 is too large"},
		{"pack-mean-nan", func(c *Config) {
			c.Pack.Normalize, c.Pack.Mean, c.Pack.Std = true, [3]float32{float32(nan)}, pack.ImageNetStd
		}, "Pack: pack: normalize mean"},
		{"batch-bytes", func(c *Config) { c.Batch.Size, c.Pack.Width, c.Pack.Height = 1<<20, 1<<10, 1<<10 }, "a batch buffer of 1048576 1024x1024 float32 samples (BatchSize/MicroBatches) takes 13194139533312 bytes, more than 1099511627776"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &Config{Batch: BatchConfig{Size: 8}, Pack: pack.Options{Width: 24, Height: 24}, Logf: quiet}
			tc.edit(cfg)
			ld, err := New(src, cfg)
			if err == nil {
				ld.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "pipeline: config: ") {
				t.Errorf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// The bounds themselves are allowed, and -Inf is a negative MaxBadFraction: no limit.
	cfg := &Config{Batch: BatchConfig{Size: 8}, Pack: pack.Options{Width: 24, Height: 24}, Logf: quiet,
		Tuning: TuningConfig{Workers: maxWorkers, IOWorkers: maxWorkers, CPULimit: maxWorkers}, Bad: BadConfig{MaxFraction: math.Inf(-1)}, SampleCacheFill: 1}
	ld := newLoader(t, src, cfg)
	if got := ld.Config(); got.Tuning.IOWorkers != maxWorkers || got.Bad.MaxFraction != math.Inf(-1) {
		t.Errorf("config %v", &got)
	}
}

// Dense targets are held beside every batch buffer: their size is checked before they
// are allocated, and they count against MemoryBudget as the buffers do.
func TestDenseTargetsBounded(t *testing.T) {
	// One sample labelled 300000 has 300001 classes: a million-sample batch's targets
	// would take 1.2 TB a buffer.
	man := &folder{fsys: fstest.MapFS{}, paths: []string{"a.jpg"}, labels: []int{300000}, classes: make([]string, 300001)}
	cfg := &Config{Batch: BatchConfig{Size: 1 << 20}, Pack: pack.Options{Width: 1, Height: 1, DType: pack.Uint8}, Mix: mixup.Options{Smoothing: 0.1}, Logf: quiet}
	ld, err := New(man, cfg)
	if err == nil {
		ld.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "dense targets of 300001 classes for 1048576 samples") {
		t.Errorf("New: %v, want an error about the dense targets' size", err)
	}

	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	base := func() *Config {
		return &Config{Batch: BatchConfig{Size: 8}, Tuning: TuningConfig{Workers: 1, Prefetch: 2, NoAutotune: true}, Pack: pack.Options{Width: 24, Height: 24}, Logf: quiet}
	}
	// The least budget a loader without targets accepts refuses one with them.
	ld = newLoader(t, src, base())
	least := int64(ld.nbuf)*pageRound(int64(ld.micro)*int64(ld.sampleBytes)) + minWorkingBudget
	cfg = base()
	cfg.Tuning.MemoryBudget = least
	newLoader(t, src, cfg)
	cfg.Mix.Smoothing = 0.1
	want := strconv.Itoa(3*8*4*3) + " bytes of dense targets" // 3 classes, 8 samples, 3 buffers
	if ld, err := New(src, cfg); err == nil || !strings.Contains(err.Error(), want) {
		if err == nil {
			ld.Close()
		}
		t.Errorf("New: %v, want an error containing %q", err, want)
	}
	// By default the budget makes room for them.
	cfg.Tuning.MemoryBudget = 0
	ld = newLoader(t, src, cfg)
	if got := ld.Config().Tuning.MemoryBudget; got != least-minWorkingBudget+3*8*4*3+640*mib {
		t.Errorf("default MemoryBudget %d", got)
	}
}

// Convert's options are bounded as Config's: its loader's memory budget holds five files
// of MaxFileBytes (2^62 wrapped it negative).
func TestConvertOptionsBounds(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		o    ConvertOptions
		want string
	}{
		{ConvertOptions{Workers: 1 << 30}, "pipeline: convert: Workers 1073741824 not in [1, 4096]"},
		{ConvertOptions{MaxFileBytes: 1 << 62}, "pipeline: convert: MaxFileBytes 4611686018427387904 not in [1, 1099511627776]"},
		{ConvertOptions{MaxFileBytes: -1}, "pipeline: convert: MaxFileBytes -1 not in"},
	} {
		tc.o.Logf = quiet
		// The options are checked before the cache is looked at.
		if _, err := Convert(t.Context(), src, nil, &tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Convert(%+v): %v, want an error containing %q", tc.o, err, tc.want)
		}
	}
}

// The options convention: EnsureDefaults fills a nil or zero value and returns it, and
// Validate reports every invalid field at once, not the first.
func TestOptionsConvention(t *testing.T) {
	c := (*Config)(nil).EnsureDefaults()
	if c == nil || c.Batch.Size != 64 || c.Order.World != 1 || c.Device.Name != "cpu" || c.Logf == nil {
		t.Fatalf("nil Config's defaults: %+v", c)
	}
	if d := &(Config{}); d.EnsureDefaults() != d {
		t.Error("EnsureDefaults does not return its receiver")
	}
	c.Pack.Width, c.Pack.Height = 8, 8
	c.Tuning.Workers, c.Order.World, c.SampleCacheFill = -1, 0, 2
	err := c.Validate()
	for _, want := range []string{"Workers -1 not in", "World 0 not in", "SampleCacheFill 2 not in"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want every problem, %q among them", err, want)
		}
	}

	o := (*ConvertOptions)(nil).EnsureDefaults()
	if o == nil || o.Workers < 1 || o.MaxFileBytes != 1<<30 || o.Logf == nil || o.Decode.Backend == "" {
		t.Fatalf("nil ConvertOptions' defaults: %+v", o)
	}
	if err := o.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	o.Workers, o.MaxFileBytes, o.Decode.MaxPixels = -1, -1, -1
	err = o.Validate()
	for _, want := range []string{"Workers -1 not in", "MaxFileBytes -1 not in", "MaxPixels -1 not in"} {
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "pipeline: convert: ") {
			t.Errorf("Validate: %v, want every problem, %q among them", err, want)
		}
	}
}

// oldSharded and oldPlanner are sources written for the capabilities' earlier forms.
type oldSharded struct {
	FileSource
	ends []int
}

func (s oldSharded) ShardEnds() []int { return s.ends }

type oldPlanner struct{ FileSource }

func (oldPlanner) PlanEpoch(int, []int32) {}
func (oldPlanner) PlanNext(int, []int32)  {}

// A source that has a capability's method in an earlier form is refused, naming what it
// lacks, rather than losing the capability without a word.
func TestOldCapabilitiesRefused(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		src  Source
		want string
	}{
		{oldSharded{src, []int{src.Len()}}, "ShuffleBlock"},
		{oldPlanner{src}, "PlanEpoch without an error result"},
	} {
		ld, err := New(c.src, testConfig(1))
		if err == nil {
			ld.Close()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%T: New = %v, want an error naming %s", c.src, err, c.want)
		}
	}
}
