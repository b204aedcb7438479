package pipeline

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/gpu"
	"github.com/conveyor-ml/conveyor/gpu/gputest"
	"github.com/conveyor-ml/conveyor/internal/treetest"
	"github.com/conveyor-ml/conveyor/mixup"
	"github.com/conveyor-ml/conveyor/pack"
)

// batchRecord is one delivered batch, copied out before Release.
type batchRecord struct {
	data    []byte
	labels  []int32
	indices []int64
	targets []float32
	classes int
	mix     mixup.Params
}

func collectBatches(t testing.TB, ld *Loader, epoch, cursor int) []batchRecord {
	t.Helper()
	var out []batchRecord
	for b, err := range ld.EpochFrom(context.Background(), epoch, cursor) {
		if err != nil {
			t.Fatalf("epoch %d: %v", epoch, err)
		}
		out = append(out, batchRecord{
			data: slices.Clone(b.Data), labels: slices.Clone(b.Labels), indices: slices.Clone(b.Indices),
			targets: slices.Clone(b.Targets), classes: b.NumClasses, mix: b.Mix,
		})
		b.Release()
	}
	return out
}

// wantTargets is timm's mixup_target for a batch's labels: smoothed one-hot rows, row i
// mixed with row n-1-i as p says (mixup.Targets is checked against the transcription of
// timm in package mixup; here the loader must feed it the right rows).
func wantTargets(t *testing.T, labels []int32, classes int, eps float64, p mixup.Params) []float32 {
	off, on := mixup.SmoothValues(eps, classes)
	rows := make([]float32, len(labels)*classes)
	for i, l := range labels {
		for k := range classes {
			rows[i*classes+k] = off
		}
		rows[i*classes+int(l)] = on
	}
	if err := mixup.Targets(rows, len(labels), classes, p); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestMixedBatches checks that a loader with Config.Mix delivers exactly the batches of
// one without it, mixed as Batch.Mix says, in every dtype and layout the packer writes
// and with Device.Cast (mixed on the host in uint8), with timm's targets. The batch size
// is odd, so the middle sample pairs with itself.
func TestMixedBatches(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	mix := mixup.Options{MixUp: 0.8, CutMix: 1, Smoothing: 0.1}
	for _, c := range []struct {
		name       string
		dtype      pack.DType
		layout     pack.Layout
		deviceCast bool
	}{
		{"float32-NCHW", pack.Float32, pack.NCHW, false},
		{"float16-NHWC", pack.Float16, pack.NHWC, false},
		{"bfloat16-NCHW", pack.BFloat16, pack.NCHW, false},
		{"uint8-NCHW", pack.Uint8, pack.NCHW, false},
		{"uint8-NHWC", pack.Uint8, pack.NHWC, false},
		{"device-cast", pack.Float32, pack.NCHW, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig(2)
			cfg.Batch.Size = 7
			cfg.Pack.DType, cfg.Pack.Layout, cfg.Device.Cast = c.dtype, c.layout, c.deviceCast
			cfg.Pack.Normalize = c.dtype != pack.Uint8
			plain := collectBatches(t, newLoader(t, src, cfg), 3, 0)
			cfg.Mix = mix
			ld := newLoader(t, src, cfg)
			mixed := collectBatches(t, ld, 3, 0)
			if len(mixed) != len(plain) {
				t.Fatalf("%d batches mixed, %d plain", len(mixed), len(plain))
			}
			hostLayout, hostDType := c.layout, c.dtype
			if c.deviceCast {
				hostLayout, hostDType = pack.NHWC, pack.Uint8
			}
			kinds := map[bool]int{}
			for k, m := range mixed {
				p := plain[k]
				if !slices.Equal(m.indices, p.indices) || !slices.Equal(m.labels, p.labels) {
					t.Fatalf("batch %d: mixing changed the samples or labels", k)
				}
				if m.mix.Lambda <= 0 || m.mix.Lambda > 1 {
					t.Fatalf("batch %d: λ %g", k, m.mix.Lambda)
				}
				if !m.mix.Unmixed() {
					kinds[m.mix.CutMix]++
				}
				want := slices.Clone(p.data)
				n := len(p.labels)
				if err := mixup.Pixels(want, n, hostLayout, hostDType, 24, 24, m.mix); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(m.data, want) {
					t.Fatalf("batch %d (%+v): pixels are not the plain batch mixed", k, m.mix)
				}
				if !m.mix.Unmixed() && bytes.Equal(m.data, p.data) {
					t.Fatalf("batch %d: λ %g but the pixels are unchanged", k, m.mix.Lambda)
				}
				if m.classes != 3 || !slices.Equal(m.targets, wantTargets(t, p.labels, 3, mix.Smoothing, m.mix)) {
					t.Fatalf("batch %d: targets %v (%d classes), want timm's for labels %v", k, m.targets, m.classes, p.labels)
				}
			}
			if kinds[true] == 0 || kinds[false] == 0 {
				t.Errorf("over %d batches: %d CutMix, %d MixUp; want both", len(mixed), kinds[true], kinds[false])
			}
			if st := ld.Stats(); st.Stages.Mix.Items != int64(len(mixed)) {
				t.Errorf("Stats.Stages.Mix.Items %d, want %d", st.Stages.Mix.Items, len(mixed))
			}
		})
	}
}

// TestMixDeterminism checks that mixed batches are the same for any number of workers
// and on resume: the draw depends on (Seed, epoch, batch number) only.
func TestMixDeterminism(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	run := func(workers, cursor int) []batchRecord {
		cfg := testConfig(workers)
		cfg.Tuning.IOWorkers = workers
		cfg.Mix = mixup.Options{MixUp: 0.2, CutMix: 1, Smoothing: 0.1}
		return collectBatches(t, newLoader(t, src, cfg), 2, cursor)
	}
	one, three := run(1, 0), run(3, 0)
	resumed := run(2, 3*8)
	same := func(a, b batchRecord) bool {
		return bytes.Equal(a.data, b.data) && slices.Equal(a.targets, b.targets) && a.mix == b.mix && slices.Equal(a.indices, b.indices)
	}
	lambdas := map[float64]bool{}
	for k := range one {
		if !same(one[k], three[k]) {
			t.Fatalf("batch %d differs between 1 and 3 workers", k)
		}
		if k >= 3 && !same(one[k], resumed[k-3]) {
			t.Fatalf("batch %d differs when the epoch resumes at batch 3", k)
		}
		lambdas[one[k].mix.Lambda] = true
	}
	if len(lambdas) < len(one)-1 {
		t.Errorf("%d batches drew only %d distinct λ", len(one), len(lambdas))
	}
	other := collectBatches(t, newLoader(t, src, func() *Config {
		c := testConfig(2)
		c.Mix = mixup.Options{MixUp: 0.2, CutMix: 1, Smoothing: 0.1}
		return c
	}()), 3, 0)
	if other[0].mix == one[0].mix {
		t.Errorf("epochs 2 and 3 drew the same first mix %+v", one[0].mix)
	}
	// Ranks draw their own λ, as timm's per-rank seeds do.
	var ranks [2]mixup.Params
	for rank := range ranks {
		c := testConfig(2)
		c.Mix = mixup.Options{MixUp: 0.2, CutMix: 1}
		c.Order.Rank, c.Order.World = rank, 2
		ranks[rank] = collectBatches(t, newLoader(t, src, c), 2, 0)[0].mix
	}
	if ranks[0] == ranks[1] {
		t.Errorf("ranks 0 and 1 drew the same mix for batch 0: %+v", ranks[0])
	}
}

// TestSmoothingOnly checks rows of smoothed one-hot targets, without mixing, and the
// Mix options' validation and String in the loader's Config.
func TestSmoothingOnly(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, eps := range []float64{0, 0.1, 0.3} {
		cfg := testConfig(2)
		cfg.Mix.Smoothing = eps
		ld := newLoader(t, src, cfg)
		bs := collectBatches(t, ld, 0, 0)
		if eps == 0 {
			if bs[0].targets != nil {
				t.Fatalf("no mixing, no smoothing and a single-label source, yet targets %v", bs[0].targets)
			}
			continue
		}
		off, on := float32(eps/3), float32(1-eps+eps/3)
		for _, b := range bs {
			if b.mix.Lambda != 1 {
				t.Fatalf("smoothing alone mixed a batch: %+v", b.mix)
			}
			for i, l := range b.labels {
				for k := range 3 {
					want := off
					if k == int(l) {
						want = on
					}
					if got := b.targets[i*3+k]; got != want {
						t.Fatalf("ε=%g: sample %d (label %d) class %d: %g, want %g", eps, i, l, k, got, want)
					}
				}
			}
		}
		if s := ld.Config(); !strings.Contains(s.String(), "smoothing=") {
			t.Errorf("Config.String %q does not print the smoothing", s.String())
		}
	}
	for _, c := range []struct {
		mix  mixup.Options
		want string
	}{
		{mixup.Options{MixUp: -1}, "Mix: mixup: MixUp α -1"},
		{mixup.Options{CutMix: 1, SwitchProb: 2}, "Mix: mixup: SwitchProb 2"},
		{mixup.Options{Smoothing: 1.5}, "Mix: mixup: Smoothing 1.5"},
	} {
		cfg := testConfig(1)
		cfg.Mix = c.mix
		if ld, err := New(src, cfg); err == nil {
			ld.Close()
			t.Errorf("%+v accepted", c.mix)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.mix, err, c.want)
		}
	}
}

// TestMixBeforeDeviceCopy checks where the mix happens with a device: on the host,
// before the copy. Without Device.Cast the device holds the host loader's mixed batch;
// with it, the conversion of the mixed uint8 pixels.
func TestMixBeforeDeviceCopy(t *testing.T) {
	gputest.Use(t)
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	mix := mixup.Options{MixUp: 0.5, CutMix: 1}
	for _, convert := range []bool{false, true} {
		host := testConfig(2)
		host.Mix, host.Device.Cast = mix, convert
		var want []byte
		conv, err := gpu.NewCaster(&host.Pack)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range collectBatches(t, newLoader(t, src, host), 1, 0) {
			if !convert {
				want = append(want, b.data...)
				continue
			}
			n := len(b.labels)
			out := make([]byte, conv.OutBytes(n))
			if err := conv.Host(out, b.data); err != nil {
				t.Fatal(err)
			}
			want = append(want, out...)
		}
		cfg := testConfig(2)
		cfg.Mix, cfg.Device.Cast, cfg.Device.Name = mix, convert, "cuda:0"
		if got := deviceEpoch(t, newLoader(t, src, cfg), 1); !bytes.Equal(got, want) {
			t.Errorf("Device.Cast %t: the device batches are not the host's mixed batches", convert)
		}
	}
}

// TestTargetsNoAllocations guards the hot path dense targets add: filling a sample's
// multi-hot row and mixing a finished batch allocate nothing once warm.
func TestTargetsNoAllocations(t *testing.T) {
	src, _ := multiLabelTree(t)
	cfg := testConfig(1)
	cfg.Batch.Size = 6
	cfg.Mix = mixup.Options{MixUp: 0.8, CutMix: 1, Smoothing: 0.1}
	cfg.Pack.DType = pack.Float16 // mixed through tables the worker keeps
	ld := newLoader(t, src, cfg)
	r := &run{l: ld, epoch: 1}
	n := cfg.Batch.Size
	b := &Batch{Epoch: 1, Len: n, Data: make([]byte, n*ld.sampleBytes), Targets: ld.takeTargets(n), NumClasses: ld.classes}
	w := ld.workers[0]
	allocs := testing.AllocsPerRun(50, func() {
		for s := range n {
			if err := w.fillTarget(r, b, s, s); err != nil {
				t.Fatal(err)
			}
		}
		b.Number++
		w.mixBatch(r, b)
	})
	if allocs != 0 {
		t.Errorf("%g allocations per batch of %d", allocs, n)
	}
	if b.Mix.Lambda == 0 {
		t.Error("the batch was not mixed")
	}
}

// TestMixMicroBatches checks mixing with Config.Batch.MicroBatches: each micro-batch is mixed on
// its own (its partners within it, its own λ), the same for any worker count, and the
// micro-batches unmixed are the whole batch's samples.
func TestMixMicroBatches(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	run := func(workers, micro int, mix bool) []batchRecord {
		cfg := testConfig(workers)
		cfg.Batch.MicroBatches = micro
		if mix {
			cfg.Mix = mixup.Options{MixUp: 0.2, CutMix: 1, Smoothing: 0.1}
		}
		return collectBatches(t, newLoader(t, src, cfg), 1, 0)
	}
	mixed, again, plain := run(1, 2, true), run(2, 2, true), run(2, 2, false)
	if len(mixed) != len(plain) || len(mixed) != len(again) {
		t.Fatalf("%d, %d and %d micro-batches", len(mixed), len(again), len(plain))
	}
	lambdas := map[mixup.Params]bool{}
	for k := range mixed {
		m, p := mixed[k], plain[k]
		if !bytes.Equal(m.data, again[k].data) || !slices.Equal(m.targets, again[k].targets) || m.mix != again[k].mix {
			t.Fatalf("micro-batch %d differs between 1 and 2 workers", k)
		}
		if !slices.Equal(m.indices, p.indices) {
			t.Fatalf("micro-batch %d holds samples %v mixed, %v unmixed", k, m.indices, p.indices)
		}
		if want := wantTargets(t, p.labels, m.classes, 0.1, m.mix); !slices.Equal(m.targets, want) {
			t.Fatalf("micro-batch %d: targets %v, want %v (pairs within the micro-batch)", k, m.targets, want)
		}
		lambdas[m.mix] = true
	}
	if len(lambdas) < len(mixed)-1 {
		t.Errorf("%d micro-batches drew only %d distinct mixes: the micro-batches of a batch share a draw", len(mixed), len(lambdas))
	}
}
