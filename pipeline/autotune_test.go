package pipeline

import (
	"bytes"
	"context"
	"io/fs"
	"slices"
	"testing"
	"time"

	"github.com/conveyor-ml/conveyor/internal/treetest"
)

func TestTunerDecide(t *testing.T) {
	const wall = 250 * time.Millisecond
	// frac is a share of the window summed over n goroutines.
	frac := func(f float64, n int) time.Duration { return time.Duration(f * float64(wall) * float64(n)) }
	// auto is a new tuner, since the tuner keeps state from one window to the next.
	auto := func() *tuner {
		return &tuner{autoWorkers: true, autoIO: true, autoPrefetch: true, maxWorkers: 4, maxIO: 64, maxPrefetch: 8, cpuLimit: 2}
	}
	// win is a window of 2 workers, 4 readers and 2 batches in flight, as edit makes it.
	win := func(edit func(w *window)) window {
		w := window{wall: wall, workers: 2, io: 4, prefetch: 2}
		edit(&w)
		return w
	}
	// probing is a tuner that added a worker when the samples a second were base.
	probing := func(base float64) *tuner {
		t := auto()
		t.probing, t.probeBase = true, base
		return t
	}
	// waiting is a tuner that waits n windows before adding a worker.
	waiting := func(n int) *tuner {
		t := auto()
		t.holdoff, t.backoff = n, n
		return t
	}
	tests := []struct {
		name                  string
		tu                    *tuner
		w                     window
		workers, io, prefetch int
	}{
		{"reads short: double them", auto(),
			win(func(w *window) { w.cpu, w.starved, w.consumerWait = frac(0.6, 1), frac(0.5, 2), frac(0.5, 1) }), 2, 8, 2},
		{"reads short: jump to what the latency needs", auto(),
			win(func(w *window) {
				// 20 ms reads, 1 ms of work a sample: 2 workers need 1.25 × 2 × 20 = 50 reads.
				w.cpu, w.starved, w.readItems, w.readBusy, w.workItems, w.workBusy = frac(0.6, 1), frac(0.5, 2), 100, 100*20*time.Millisecond, 100, 100*time.Millisecond
			}), 2, 50, 2},
		{"reads short: the jump is bounded", auto(),
			win(func(w *window) {
				w.cpu, w.starved, w.readItems, w.readBusy, w.workItems, w.workBusy = frac(0.6, 1), frac(0.5, 2), 100, 100*time.Second, 100, 100*time.Millisecond
			}), 2, 64, 2},
		{"reads short, at the bound", auto(),
			win(func(w *window) { w.cpu, w.starved, w.io = frac(0.6, 1), frac(0.5, 2), 48 }), 2, 64, 2},
		{"workers starve, readers idle, buffers free: nothing to add", auto(),
			win(func(w *window) { w.cpu, w.starved, w.readIdle = frac(0.6, 1), frac(0.5, 2), frac(0.5, 4) }), 2, 4, 2},
		{"every buffer holds a batch being read: deeper prefetch", auto(),
			win(func(w *window) {
				w.cpu, w.starved, w.readIdle, w.poolWait, w.consumerWait = frac(0.6, 1), frac(0.5, 2), frac(0.5, 4), frac(0.5, 1), frac(0.5, 1)
			}), 2, 4, 4},
		{"deeper prefetch: jump to enough batches for the reads", &tuner{autoWorkers: true, autoIO: true, autoPrefetch: true, maxWorkers: 4, maxIO: 64, maxPrefetch: 16, cpuLimit: 2, micro: 8},
			win(func(w *window) {
				w.starved, w.readIdle, w.poolWait, w.consumerWait, w.io = frac(0.5, 2), frac(0.5, 4), frac(0.5, 1), frac(0.5, 1), 64
			}), 2, 64, 8},
		{"deeper prefetch, at the bound", auto(),
			win(func(w *window) {
				w.starved, w.readIdle, w.poolWait, w.consumerWait, w.prefetch = frac(0.5, 2), frac(0.5, 4), frac(0.5, 1), frac(0.5, 1), 6
			}), 2, 4, 8},
		{"the consumer holds the buffers: keep", auto(),
			win(func(w *window) {
				w.cpu, w.starved, w.readIdle, w.poolWait = frac(0.5, 1), frac(0.5, 2), frac(0.5, 4), frac(0.3, 1)
			}), 2, 4, 2},
		{"workers busy, cores idle: add a worker", auto(),
			win(func(w *window) { w.cpu, w.starved, w.readIdle = frac(1.5, 1), frac(0.02, 2), frac(0.5, 4) }), 3, 4, 2},
		{"a worker added brought no gain: parked again", probing(1000),
			win(func(w *window) { w.cpu, w.workItems = frac(1.5, 1), 255 }), 1, 4, 2},
		{"a worker added brought a gain: kept, and another tried", probing(1000),
			win(func(w *window) { w.cpu, w.workItems = frac(1.5, 1), 270 }), 3, 4, 2},
		{"a worker added brought a gain, cores now busy: kept", probing(1000),
			win(func(w *window) { w.cpu, w.workItems = frac(1.98, 1), 270 }), 2, 4, 2},
		{"a worker added brought a gain and a memory return: parked again", probing(1000),
			win(func(w *window) { w.cpu, w.workItems, w.returns = frac(1.5, 1), 300, 1 }), 1, 4, 2},
		{"near the memory limit: no worker added", auto(),
			win(func(w *window) { w.cpu, w.returns = frac(1.5, 1), 2 }), 2, 4, 2},
		{"waiting before trying another worker", waiting(2),
			win(func(w *window) { w.cpu, w.readIdle = frac(1.5, 1), frac(0.5, 4) }), 2, 4, 2},
		{"workers busy, cores busy: keep", auto(),
			win(func(w *window) { w.cpu, w.starved = frac(1.95, 1), frac(0.02, 2) }), 2, 4, 2},
		{"workers at their bound", auto(),
			win(func(w *window) { w.cpu, w.workers = frac(1.2, 1), 4 }), 4, 4, 2},
		{"over the CPU limit: park a worker",
			&tuner{autoWorkers: true, autoIO: true, maxWorkers: 4, maxIO: 64, cpuLimit: 1},
			win(func(w *window) { w.cpu = frac(1.9, 1) }), 1, 4, 2},
		{"CPU time unknown: no worker added", auto(), win(func(*window) {}), 2, 4, 2},
		{"workers set: only reads move", &tuner{autoIO: true, maxWorkers: 2, maxIO: 64, cpuLimit: 2},
			win(func(w *window) { w.cpu, w.starved = frac(0.3, 1), frac(0.5, 2) }), 2, 8, 2},
		{"workers set: never added", &tuner{autoIO: true, maxWorkers: 2, maxIO: 64, cpuLimit: 2},
			win(func(w *window) { w.cpu = frac(1.0, 1) }), 2, 4, 2},
		{"reads set: never doubled", &tuner{autoWorkers: true, maxWorkers: 4, maxIO: 4, cpuLimit: 2},
			win(func(w *window) { w.cpu, w.starved = frac(0.3, 1), frac(0.5, 2) }), 2, 4, 2},
		{"prefetch set: never deepened", &tuner{autoWorkers: true, autoIO: true, maxWorkers: 4, maxIO: 64, maxPrefetch: 2, cpuLimit: 2},
			win(func(w *window) {
				w.starved, w.readIdle, w.poolWait, w.consumerWait = frac(0.5, 2), frac(0.5, 4), frac(0.5, 1), frac(0.5, 1)
			}), 2, 4, 2},
		{"empty window", auto(), window{workers: 2, io: 4, prefetch: 2}, 2, 4, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, io, p := tt.tu.decide(tt.w)
			if w != tt.workers || io != tt.io || p != tt.prefetch {
				t.Errorf("decide = %d workers, %d reads, %d batches; want %d, %d, %d", w, io, p, tt.workers, tt.io, tt.prefetch)
			}
		})
	}

	// A probe that failed twice waits 2, then 4 windows; one that succeeds resets it.
	tu := auto()
	busy := win(func(w *window) { w.cpu, w.workItems = frac(1.5, 1), 250 })
	for round, wait := range []int{2, 4} {
		if w, _, _ := tu.decide(busy); w != 3 {
			t.Fatalf("round %d: %d workers, want one added", round, w)
		}
		flat := busy
		flat.workers = 3
		if w, _, _ := tu.decide(flat); w != 2 {
			t.Fatalf("round %d: no gain kept %d workers", round, w)
		}
		for i := range wait {
			if w, _, _ := tu.decide(busy); w != 2 {
				t.Fatalf("round %d: window %d of %d to wait added a worker", round, i+1, wait)
			}
		}
	}
	if w, _, _ := tu.decide(busy); w != 3 {
		t.Fatal("no worker tried after the wait")
	}
	gain := busy
	gain.workers, gain.workItems = 3, 300
	if w, _, _ := tu.decide(gain); w != 4 || tu.backoff != 0 || !tu.probing {
		t.Fatalf("a gain: %d workers, backoff %d; want 3 kept, the backoff reset and a fourth tried", w, tu.backoff)
	}
}

func TestAutoPrefetchBound(t *testing.T) {
	const buf = 10 << 20
	for _, tt := range []struct {
		start, micro int
		budget       int64
		want         int
	}{
		{2, 64, 0, 4},                // 256 samples
		{2, 16, 0, 16},               // 256 samples
		{2, 8, 0, 16},                // at most 16 batches
		{2, 256, 0, 2},               // never below the start
		{5, 64, 0, 5},                // a micro-batch start above the bound
		{2, 16, 200 << 20, 6},        // 4 more buffers of 10 MiB in a quarter of the 170 MiB left
		{2, 16, 40 << 20, 2},         // none beyond the start: 10 MiB left
		{2, 64, int64(20) * buf, 4},  // 2 more in a quarter of 17
		{2, 64, int64(7) * buf, 3},   // 1 more in a quarter of 4
		{3, 64, int64(4) * buf, 3},   // the start whatever the budget
		{2, 16, 3*buf + 17<<20, 2},   // a quarter of the 17 MiB left holds no buffer
		{2, 16, int64(1) << 40, 16},  // a huge budget changes nothing
		{2, 1, int64(1) << 40, 16},   // nor a tiny batch
		{2, 300, int64(1) << 40, 2},  // nor a huge one
		{4, 16, int64(1) << 40, 16},  // start 4 grows to 16
		{16, 16, int64(1) << 40, 16}, // start at the bound
	} {
		if got := autoPrefetchBound(tt.start, tt.micro, buf, tt.budget); got != tt.want {
			t.Errorf("autoPrefetchBound(%d, %d, 10 MiB, %d) = %d, want %d", tt.start, tt.micro, tt.budget, got, tt.want)
		}
	}
}

// slowFiles takes delay to open each file: a slow disk or network file system.
type slowFiles struct {
	FileSource
	delay time.Duration
}

func (s slowFiles) Open(i int) (fs.File, error) {
	time.Sleep(s.delay)
	return s.FileSource.Open(i)
}

// TestAutotuneSlowReads: with reads that wait, the tuner raises the reads in flight
// (and only what was left to it), and the batches are those of a loader that tunes
// nothing: counts that change mid-epoch, workers and readers parked and woken, do not
// change what is delivered.
func TestAutotuneSlowReads(t *testing.T) {
	dir, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	src := slowFiles{dir, 20 * time.Millisecond}
	run := func(cfg *Config) (epochData, Stats, Config) {
		ld := newLoader(t, src, cfg)
		var d epochData
		for e := range 3 {
			got := collect(t, ld, context.Background(), e, 0)
			d.data = append(d.data, got.data...)
			d.indices = append(d.indices, got.indices...)
		}
		return d, ld.Stats(), ld.Config()
	}
	// Two workers, so reads start at 4 in flight whatever the machine.
	fixed := testConfig(2)
	fixed.NoAutotune = true
	want, st, eff := run(fixed)
	if st.TuneSteps != 0 || st.Workers != eff.Workers || st.IOWorkers != eff.IOWorkers {
		t.Fatalf("NoAutotune: %d workers and %d reads after %d steps; want the starting %d and %d", st.Workers, st.IOWorkers, st.TuneSteps, eff.Workers, eff.IOWorkers)
	}

	got, st, eff := run(testConfig(2))
	if !bytes.Equal(got.data, want.data) || !slices.Equal(got.indices, want.indices) {
		t.Fatal("autotuned batches differ from fixed ones")
	}
	// 60 files at 20 ms each take 300 ms with 4 reads in flight (an epoch on 2 cores),
	// so windows see the workers starve while every reader waits on a file.
	t.Logf("tuned: %d workers, %d reads, %d batches in flight after %d steps", st.Workers, st.IOWorkers, st.Prefetch, st.TuneSteps)
	if st.IOWorkers <= eff.IOWorkers || st.TuneSteps == 0 {
		t.Errorf("autotune with slow reads: %d reads in flight after %d steps, want more than %d", st.IOWorkers, st.TuneSteps, eff.IOWorkers)
	}

	// Every count explicit, so the tuner has nothing to move. (With Prefetch left to it,
	// a loaded machine makes it deepen the prefetch, a step of its own.)
	set := testConfig(2)
	set.IOWorkers = 3
	set.Prefetch = 2
	_, st, _ = run(set)
	if st.IOWorkers != 3 || st.Workers != 2 || st.Prefetch != 2 || st.TuneSteps != 0 {
		t.Errorf("explicit Workers 2, IOWorkers 3, Prefetch 2: the loader ran %d, %d and %d after %d steps", st.Workers, st.IOWorkers, st.Prefetch, st.TuneSteps)
	}
}

// TestTunerParksAndWakes moves the counts while an epoch runs, down to one worker and one
// reader and back up, and checks the epoch completes with the same batches.
func TestTunerParksAndWakes(t *testing.T) {
	dir, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	src := slowFiles{dir, 5 * time.Millisecond} // so the epoch is still running as counts move
	cfg := testConfig(3)
	cfg.IOWorkers = 3
	cfg.NoAutotune = true
	want := collect(t, newLoader(t, src, cfg), context.Background(), 0, 0)

	ld := newLoader(t, src, cfg)
	var d epochData
	n := 0
	for b, err := range ld.Epoch(context.Background(), 0) {
		if err != nil {
			t.Fatal(err)
		}
		switch n++; n {
		case 1:
			ld.tune.set(1, 1, 2)
		case 3:
			ld.tune.set(3, 2, 2)
		case 5:
			ld.tune.set(2, 3, 2)
		}
		d.data = append(d.data, b.Data...)
		d.indices = append(d.indices, b.Indices...)
		b.Release()
	}
	if !bytes.Equal(d.data, want.data) || !slices.Equal(d.indices, want.indices) {
		t.Fatal("batches differ after the counts moved mid-epoch")
	}
	if st := ld.Stats(); st.Workers != 2 || st.IOWorkers != 3 || st.TuneSteps != 3 {
		t.Errorf("Stats: %d workers, %d reads, %d steps; want 2, 3, 3", st.Workers, st.IOWorkers, st.TuneSteps)
	}
}

// TestAutotuneDeepensPrefetch: with small batches and slow reads, the batches in flight
// hold too few samples to cover the latency however many reads are allowed; the tuner
// maps more batch buffers.
func TestAutotuneDeepensPrefetch(t *testing.T) {
	dir, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(2)
	cfg.BatchSize = 4 // 12 samples in 3 buffers
	ld := newLoader(t, slowFiles{dir, 20 * time.Millisecond}, cfg)
	start := ld.Config().Prefetch
	limit := ld.returns.limit.Load()
	deadline := time.Now().Add(20 * time.Second)
	var st Stats
	for e := 0; time.Now().Before(deadline); e++ {
		collect(t, ld, context.Background(), e, 0)
		if st = ld.Stats(); st.Prefetch > start {
			break
		}
	}
	t.Logf("tuned: %d workers, %d reads, %d batches in flight after %d steps", st.Workers, st.IOWorkers, st.Prefetch, st.TuneSteps)
	if st.Prefetch <= start {
		t.Fatalf("batches in flight stayed at %d with 12 samples in flight and 20 ms reads", st.Prefetch)
	}
	if st.Pinned.Buffers != st.Prefetch+1 || st.Pinned.MaxBuffers != ld.nbuf {
		t.Errorf("pinned pool: %d buffers of %d, want Prefetch+1 = %d of %d", st.Pinned.Buffers, st.Pinned.MaxBuffers, st.Prefetch+1, ld.nbuf)
	}
	// The memory returner's limit rose by the buffers mapped: the budget held them back.
	if grown := int64(st.Prefetch-start) * pageRound(int64(st.Pinned.BufferSize)); limit != 0 && ld.returns.limit.Load()-limit != grown {
		t.Errorf("returner's limit rose by %d, want the %d bytes of buffers mapped", ld.returns.limit.Load()-limit, grown)
	}
}
