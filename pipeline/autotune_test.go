package pipeline

import (
	"bytes"
	"context"
	"io/fs"
	"slices"
	"testing"
	"time"
)

func TestTunerDecide(t *testing.T) {
	const wall = 250 * time.Millisecond
	// frac is a share of the window summed over n goroutines.
	frac := func(f float64, n int) time.Duration { return time.Duration(f * float64(wall) * float64(n)) }
	auto := &tuner{autoWorkers: true, autoIO: true, maxWorkers: 4, maxIO: 64, cpuLimit: 2}
	tests := []struct {
		name        string
		tu          *tuner
		w           window
		workers, io int
	}{
		{"reads short: double them", auto,
			window{wall: wall, cpu: frac(0.6, 1), starved: frac(0.5, 2), readIdle: 0, workers: 2, io: 4}, 2, 8},
		{"reads short, at the bound", auto,
			window{wall: wall, cpu: frac(0.6, 1), starved: frac(0.5, 2), workers: 2, io: 48}, 2, 64},
		{"reads short but the readers idle: not the reads", auto,
			window{wall: wall, cpu: frac(0.6, 1), starved: frac(0.5, 2), readIdle: frac(0.5, 4), workers: 2, io: 4}, 2, 4},
		{"workers busy, cores idle: add a worker", auto,
			window{wall: wall, cpu: frac(1.5, 1), starved: frac(0.02, 2), readIdle: frac(0.5, 4), workers: 2, io: 4}, 3, 4},
		{"workers busy, cores busy: keep", auto,
			window{wall: wall, cpu: frac(1.95, 1), starved: frac(0.02, 2), workers: 2, io: 4}, 2, 4},
		{"workers at their bound", auto,
			window{wall: wall, cpu: frac(1.2, 1), workers: 4, io: 4}, 4, 4},
		{"the consumer is slower: keep", auto,
			window{wall: wall, cpu: frac(0.5, 1), starved: frac(0.5, 2), poolWait: frac(0.3, 1), workers: 2, io: 4}, 2, 4},
		{"over the CPU limit: park a worker", &tuner{autoWorkers: true, autoIO: true, maxWorkers: 4, maxIO: 64, cpuLimit: 1},
			window{wall: wall, cpu: frac(1.9, 1), workers: 2, io: 4}, 1, 4},
		{"CPU time unknown: no worker added", auto,
			window{wall: wall, starved: 0, workers: 2, io: 4}, 2, 4},
		{"workers set: only reads move", &tuner{autoIO: true, maxWorkers: 2, maxIO: 64, cpuLimit: 2},
			window{wall: wall, cpu: frac(0.3, 1), starved: frac(0.5, 2), workers: 2, io: 4}, 2, 8},
		{"workers set: never added", &tuner{autoIO: true, maxWorkers: 2, maxIO: 64, cpuLimit: 2},
			window{wall: wall, cpu: frac(1.0, 1), workers: 2, io: 4}, 2, 4},
		{"reads set: never doubled", &tuner{autoWorkers: true, maxWorkers: 4, maxIO: 4, cpuLimit: 2},
			window{wall: wall, cpu: frac(0.3, 1), starved: frac(0.5, 2), workers: 2, io: 4}, 2, 4},
		{"empty window", auto, window{workers: 2, io: 4}, 2, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, io := tt.tu.decide(tt.w)
			if w != tt.workers || io != tt.io {
				t.Errorf("decide = %d workers, %d reads; want %d, %d", w, io, tt.workers, tt.io)
			}
		})
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
	dir, err := Dir(sharedTree(t))
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
	if st.IOWorkers <= eff.IOWorkers || st.TuneSteps == 0 {
		t.Errorf("autotune with slow reads: %d reads in flight after %d steps, want more than %d", st.IOWorkers, st.TuneSteps, eff.IOWorkers)
	}

	set := testConfig(2)
	set.IOWorkers = 3
	_, st, _ = run(set)
	if st.IOWorkers != 3 || st.Workers != 2 || st.TuneSteps != 0 {
		t.Errorf("explicit Workers 2, IOWorkers 3: the loader ran %d and %d after %d steps", st.Workers, st.IOWorkers, st.TuneSteps)
	}
}

// TestTunerParksAndWakes moves the counts while an epoch runs, down to one worker and one
// reader and back up, and checks the epoch completes with the same batches.
func TestTunerParksAndWakes(t *testing.T) {
	dir, err := Dir(sharedTree(t))
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
			ld.tune.set(1, 1)
		case 3:
			ld.tune.set(3, 2)
		case 5:
			ld.tune.set(2, 3)
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
