package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conveyor-ml/conveyor/augment"
	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/internal/leakcheck"
	"github.com/conveyor-ml/conveyor/internal/synth"
	"github.com/conveyor-ml/conveyor/internal/treetest"
	"github.com/conveyor-ml/conveyor/pack"
)

// Every goroutine a loader starts must have exited once the tests end, and the shared
// tree is removed.
func TestMain(m *testing.M) {
	leakcheck.Main(m, treetest.Cleanup)
}

func testConfig(workers int) *Config {
	cfg := &Config{
		BatchSize: 8, Workers: workers, Seed: 42,
		Pack: pack.Options{DType: pack.Float32, Normalize: true},
		Logf: func(string, ...any) {},
	}
	if err := ApplyRecipe(cfg, "train", 24); err != nil {
		panic(err)
	}
	cfg.Augment = append(cfg.Augment, &augment.ColorJitter{Brightness: 0.4, Contrast: 0.4, Saturation: 0.4, Hue: 0.1}, &augment.RandomGrayscale{P: 0.2})
	return cfg
}

func newLoader(t testing.TB, src Source, cfg *Config) *Loader {
	t.Helper()
	ld, err := New(src, cfg)
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

type epochData struct {
	data    []byte
	labels  []int32
	indices []int64
	batches int
	lens    []int
}

func collect(t testing.TB, ld *Loader, ctx context.Context, epoch, cursor int) epochData {
	t.Helper()
	var d epochData
	for b, err := range ld.EpochFrom(ctx, epoch, cursor) {
		if err != nil {
			t.Fatalf("epoch %d: %v", epoch, err)
		}
		if want := len(b.Data); want != b.Len*ld.sampleBytes {
			t.Fatalf("batch %d: %d bytes for %d samples", b.Number, want, b.Len)
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

func TestSameBatchesForAnyWorkerCount(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	var ref epochData
	for i, w := range []int{1, 8, 3} {
		cfg := testConfig(w)
		cfg.IOWorkers = w
		ld := newLoader(t, src, cfg)
		got := collect(t, ld, context.Background(), 1, 0)
		if len(got.indices) != src.Len() {
			t.Fatalf("workers=%d: %d samples, want %d", w, len(got.indices), src.Len())
		}
		if i == 0 {
			ref = got
			continue
		}
		if !bytes.Equal(got.data, ref.data) || !slices.Equal(got.indices, ref.indices) || !slices.Equal(got.labels, ref.labels) {
			t.Fatalf("workers=%d: batches differ from workers=1", w)
		}
	}
	for i, idx := range ref.indices {
		if int(ref.labels[i]) != src.Label(int(idx)) {
			t.Fatalf("sample %d: label %d, source says %d", idx, ref.labels[i], src.Label(int(idx)))
		}
	}
	sorted := slices.Clone(ref.indices)
	slices.Sort(sorted)
	for i, v := range sorted {
		if int(v) != i {
			t.Fatalf("epoch is not a permutation of the dataset: %v", sorted)
		}
	}
}

// TestLargeSamplesSameForAnyWorkerCount: samples too large for a worker's retained share
// make it give the share back after the crop is drawn; what the sample draws afterwards
// (flips, colour jitter) must not depend on whether it held one, so batches are the same
// for any worker count.
func TestLargeSamplesSameForAnyWorkerCount(t *testing.T) {
	src := largeTree(t)
	var ref epochData
	for i, w := range []int{1, 4, 2} {
		cfg := tightConfig(w)
		cfg.NoAutotune = true
		cfg.FullDecode = true // whole images: the larger ones need more than a share
		got := collect(t, newLoader(t, src, cfg), context.Background(), 1, 0)
		if i == 0 {
			ref = got
			continue
		}
		if !bytes.Equal(got.data, ref.data) || !slices.Equal(got.indices, ref.indices) {
			t.Fatalf("workers=%d: batches differ from workers=1", w)
		}
	}
}

func TestEpochsReshuffle(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	ld := newLoader(t, src, testConfig(2))
	e0 := collect(t, ld, context.Background(), 0, 0)
	e1 := collect(t, ld, context.Background(), 1, 0)
	e0again := collect(t, ld, context.Background(), 0, 0)
	if slices.Equal(e0.indices, e1.indices) {
		t.Error("epochs 0 and 1 have the same order")
	}
	if !slices.Equal(e0.indices, e0again.indices) || !bytes.Equal(e0.data, e0again.data) {
		t.Error("epoch 0 twice differs")
	}
	cfg := testConfig(2)
	cfg.Sequential = true
	seq := collect(t, newLoader(t, src, cfg), context.Background(), 5, 0)
	for i, v := range seq.indices {
		if int(v) != i {
			t.Fatalf("sequential order position %d holds %d", i, v)
		}
	}
}

func TestResumeReproducesRestOfEpoch(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	ld := newLoader(t, src, testConfig(2))
	full := collect(t, ld, context.Background(), 3, 0)
	// Stop after two batches, as a checkpointing job would, and resume from the cursor.
	var cursor int
	n := 0
	for b, err := range ld.Epoch(context.Background(), 3) {
		if err != nil {
			t.Fatal(err)
		}
		cursor = b.Cursor
		b.Release()
		if n++; n == 2 {
			break
		}
	}
	rest := collect(t, ld, context.Background(), 3, cursor)
	off := cursor * ld.sampleBytes
	if !bytes.Equal(rest.data, full.data[off:]) || !slices.Equal(rest.indices, full.indices[cursor:]) {
		t.Fatalf("resuming at %d does not reproduce the rest of the epoch", cursor)
	}
	for _, bad := range []int{-1, 3, len(full.indices) + 8} {
		for _, err := range ld.EpochFrom(context.Background(), 3, bad) {
			if err == nil {
				t.Errorf("cursor %d accepted", bad)
			}
		}
	}
}

func TestShardsDisjointAndEqual(t *testing.T) {
	for _, tc := range []struct {
		n, world   int
		dropUneven bool
		wantLen    int
	}{
		{10, 3, false, 4}, {10, 3, true, 3}, {12, 4, false, 3}, {5, 8, false, 1}, {7, 2, true, 3},
	} {
		t.Run(fmt.Sprintf("n=%d,world=%d,drop=%t", tc.n, tc.world, tc.dropUneven), func(t *testing.T) {
			seen := map[int32]int{}
			for rank := range tc.world {
				s := sampler{n: tc.n, seed: 9, shuffle: true, rank: rank, world: tc.world, dropUneven: tc.dropUneven}
				o := s.order(4, nil)
				if len(o) != tc.wantLen {
					t.Fatalf("rank %d: %d samples, want %d", rank, len(o), tc.wantLen)
				}
				for _, v := range o {
					seen[v]++
				}
			}
			total := tc.wantLen * tc.world
			if tc.dropUneven || total == tc.n {
				if len(seen) != total {
					t.Fatalf("shards overlap: %d distinct of %d", len(seen), total)
				}
			} else if len(seen) != tc.n {
				t.Fatalf("padded shards cover %d of %d samples", len(seen), tc.n)
			}
		})
	}
}

func TestBatchingAndDropLast(t *testing.T) {
	src, err := Dir(treetest.Shared(t)) // 60 samples
	if err != nil {
		t.Fatal(err)
	}
	for _, drop := range []bool{false, true} {
		cfg := testConfig(2)
		cfg.BatchSize = 16
		cfg.DropLast = drop
		ld := newLoader(t, src, cfg)
		d := collect(t, ld, context.Background(), 0, 0)
		want := []int{16, 16, 16, 12}
		if drop {
			want = want[:3]
		}
		if !slices.Equal(d.lens, want) || ld.Len() != len(want) {
			t.Errorf("drop_last=%t: batch sizes %v (Len %d), want %v", drop, d.lens, ld.Len(), want)
		}
	}
}

// denyFS makes chosen files unreadable, as a permission error would.
type denyFS struct {
	fs.FS
	deny map[string]bool
}

func (d denyFS) Open(name string) (fs.File, error) {
	if d.deny[name] {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
	}
	return d.FS.Open(name)
}

func TestBadInputSkipped(t *testing.T) {
	dir := treetest.New(t, 3, 10)
	bad := treetest.Corrupt(t, dir)
	unreadable := bad["unreadable"]
	if os.Geteuid() != 0 {
		// A real permission error where the test is not root; root reads anything, so the
		// wrapped file system below covers the same path there.
		if err := os.Chmod(filepath.Join(dir, unreadable), 0); err != nil {
			t.Fatal(err)
		}
	}
	src, err := ImageFolder(denyFS{os.DirFS(dir), map[string]bool{unreadable: true}}, ".")
	if err != nil {
		t.Fatal(err)
	}
	// Vanished mid-epoch: listed, then deleted before it is read.
	files := treetest.Files(t, dir)
	gone := files[3]
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	var logged []string
	var mu sync.Mutex
	cfg := testConfig(2)
	cfg.MaxBadFraction = 0.5
	cfg.Logf = func(f string, a ...any) { mu.Lock(); logged = append(logged, fmt.Sprintf(f, a...)); mu.Unlock() }
	ld := newLoader(t, src, cfg)
	d := collect(t, ld, context.Background(), 0, 0)
	if len(d.indices) != src.Len() {
		t.Fatalf("%d samples delivered, want %d (batches stay full)", len(d.indices), src.Len())
	}
	st := ld.Stats()
	wantBad := []string{bad["corrupt"], bad["truncated"], bad["zero-byte"], bad["not-image"], bad["huge"], bad["truncpng"], unreadable, treetest.Rel(t, dir, gone)}
	// Every failure counts, including a bad file drawn again as a replacement.
	if st.BadSamples < int64(len(wantBad)) || int(st.BadSamples) != len(logged) {
		t.Errorf("BadSamples = %d, %d lines logged, want ≥ %d: %v", st.BadSamples, len(logged), len(wantBad), st.RecentBad)
	}
	badPaths := map[string]error{}
	for _, e := range st.RecentBad {
		badPaths[e.Path] = e.Err
	}
	if len(badPaths) != len(wantBad) {
		t.Errorf("%d distinct bad files reported, want %d: %v", len(badPaths), len(wantBad), badPaths)
	}
	for _, p := range wantBad {
		if badPaths[p] == nil {
			t.Errorf("%s not reported bad", p)
		}
	}
	if _, ok := badPaths[bad["misnamed"]]; ok {
		t.Errorf("a JPEG named .png was rejected: %v", badPaths[bad["misnamed"]])
	}
	if !errors.Is(badPaths[bad["huge"]], decode.ErrTooLarge) {
		t.Errorf("huge header: %v, want ErrTooLarge", badPaths[bad["huge"]])
	}
	if !errors.Is(badPaths[unreadable], fs.ErrPermission) {
		t.Errorf("unreadable: %v, want a permission error", badPaths[unreadable])
	}
	if !errors.Is(badPaths[treetest.Rel(t, dir, gone)], fs.ErrNotExist) {
		t.Errorf("vanished: %v", badPaths[treetest.Rel(t, dir, gone)])
	}
	// No replacement may be a bad sample, and every logged line names its file.
	for _, idx := range d.indices {
		if _, isBad := badPaths[src.Path(int(idx))]; isBad {
			t.Errorf("bad sample %s delivered", src.Path(int(idx)))
		}
	}
	for _, line := range logged {
		found := false
		for _, p := range wantBad {
			found = found || bytes.Contains([]byte(line), []byte(p))
		}
		if !found {
			t.Errorf("log line names no bad file: %s", line)
		}
	}
	// The same bad files give the same replacements whatever the worker count.
	cfg8 := *cfg
	cfg8.Workers = 8
	d8 := collect(t, newLoader(t, src, &cfg8), context.Background(), 0, 0)
	if !bytes.Equal(d.data, d8.data) || !slices.Equal(d.indices, d8.indices) {
		t.Error("replacements differ between 2 and 8 workers")
	}
}

func TestBadInputFailPolicyAndThreshold(t *testing.T) {
	dir := treetest.New(t, 2, 10)
	bad := treetest.Corrupt(t, dir)
	src, err := Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(2)
	cfg.OnError = Fail
	var got error
	for b, err := range newLoader(t, src, cfg).Epoch(context.Background(), 0) {
		if err != nil {
			got = err
		}
		b.Release()
	}
	var se *SampleError
	if !errors.As(got, &se) {
		t.Fatalf("Fail policy: got %v, want a *SampleError", got)
	}
	found := false
	for _, p := range bad {
		found = found || se.Path == p
	}
	if !found || !bytes.Contains([]byte(got.Error()), []byte(se.Path)) {
		t.Errorf("error %q does not name a damaged file", got)
	}

	cfg = testConfig(2)
	cfg.MaxBadFraction = 0.1 // 7 of 28 samples are bad
	got = nil
	for b, err := range newLoader(t, src, cfg).Epoch(context.Background(), 0) {
		if err != nil {
			got = err
		}
		b.Release()
	}
	if got == nil || !bytes.Contains([]byte(got.Error()), []byte("MaxBadFraction")) {
		t.Errorf("threshold: got %v", got)
	}
}

// largeTree is a tree of images up to 900 pixels a side: under tightConfig's budget the
// larger ones need more decode memory than a worker keeps and borrow from the shared pool.
func largeTree(t *testing.T) Source {
	t.Helper()
	dir := t.TempDir()
	if _, err := synth.WriteTree(dir, &synth.TreeOptions{Classes: 2, PerClass: 8, Seed: 5, MinSide: 200, MaxSide: 900}); err != nil {
		t.Fatal(err)
	}
	src, err := Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// tightConfig is testConfig(workers) with the tightest budget New accepts for its
// 3 batch buffers.
func tightConfig(workers int) *Config {
	cfg := testConfig(workers)
	sample := 3 * 24 * 24 * 4
	cfg.MemoryBudget = int64(3*pageRound(int64(8*sample))) + minWorkingBudget
	return cfg
}

func TestMemoryBudgetHolds(t *testing.T) {
	src := largeTree(t)
	cfg := tightConfig(4)
	ld := newLoader(t, src, cfg)
	for e := range 3 {
		collect(t, ld, context.Background(), e, 0)
	}
	st := ld.Stats()
	if st.PeakHeld > st.Budget || st.PeakHeld <= st.Pinned.BytesMapped {
		t.Errorf("peak held %d bytes, budget %d, pinned %d", st.PeakHeld, st.Budget, st.Pinned.BytesMapped)
	}
	if st.PeakRead > st.ReadBudget || st.PeakDecode > st.DecodeBudget || st.Pinned.PeakBytesInUse > st.Pinned.Budget {
		t.Errorf("a pool exceeded its share: %+v", st)
	}
	if ld.dec.peak.Load() == 0 {
		t.Error("no sample borrowed from the shared decode pool; the test no longer covers it")
	}
	if _, err := New(src, &Config{MemoryBudget: 1 << 20, Pack: cfg.Pack, Augment: cfg.Augment}); err == nil {
		t.Error("a budget smaller than the batch buffers was accepted")
	}
}

// TestEarlyStopsReturnEverything breaks, cancels and fails epochs repeatedly and checks
// that every byte and buffer comes back, so later epochs cannot starve.
func TestEarlyStopsReturnEverything(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	ld := newLoader(t, src, testConfig(2))
	for i := range 10 {
		ctx, cancel := context.WithCancel(context.Background())
		n := 0
		for b, err := range ld.Epoch(ctx, i) {
			if err != nil {
				break
			}
			b.Release()
			if n++; n == 1+i%3 {
				if i%2 == 0 {
					break
				}
				cancel()
			}
		}
		cancel()
	}
	var want int64 // what the workers keep reserved for their scratch between samples
	for _, w := range ld.workers {
		want += w.held
	}
	if got := ld.held.cur.Load(); got != want {
		t.Errorf("after early stops the loader holds %d bytes of working memory, want %d", got, want)
	}
	if st := ld.Stats(); st.Pinned.InUse != 0 || st.Outstanding != 0 {
		t.Errorf("buffers still out: %+v", st.Pinned)
	}
	collect(t, ld, context.Background(), 0, 0)
}

// TestCloseInsideLoop closes the loader from the loop body, after an error and after a
// batch: neither may deadlock.
func TestCloseInsideLoop(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, afterError := range []bool{false, true} {
		cfg := testConfig(2)
		ld, err := New(src, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		if afterError {
			cancel()
		}
		var closeErr error
		for b, err := range ld.Epoch(ctx, 0) {
			if err == nil {
				b.Release()
			}
			closeErr = ld.Close()
			break
		}
		cancel()
		if closeErr != nil {
			t.Errorf("afterError=%t: Close: %v", afterError, closeErr)
		}
	}
}

func TestNoGrowthOverEpochs(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	ld := newLoader(t, src, testConfig(2))
	var ms runtime.MemStats
	var heap [20]uint64
	var gor [20]int
	for e := range 20 {
		collect(t, ld, context.Background(), e, 0)
		runtime.GC()
		runtime.ReadMemStats(&ms)
		heap[e], gor[e] = ms.HeapAlloc, runtime.NumGoroutine()
	}
	if gor[19] > gor[4] {
		t.Errorf("goroutines grew from %d to %d", gor[4], gor[19])
	}
	// Allow noise, not growth: the last epochs may hold at most 1 MiB more than epoch 5.
	if heap[19] > heap[4]+1<<20 {
		t.Errorf("heap grew from %d to %d bytes over 15 epochs", heap[4], heap[19])
	}
}

func TestCancelIsPromptAndCloseJoins(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	ld := newLoader(t, src, testConfig(2))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got error
	n := 0
	start := time.Now()
	var took time.Duration
	for b, err := range ld.Epoch(ctx, 0) {
		if err != nil {
			got = err
			break
		}
		b.Release()
		if n++; n == 1 {
			start = time.Now()
			cancel()
		}
	}
	took = time.Since(start)
	if !errors.Is(got, context.Canceled) {
		t.Errorf("after cancel: %v, want context.Canceled", got)
	}
	if took > time.Second {
		t.Errorf("cancel took %v", took)
	}
	// Close while an epoch is being consumed by another goroutine.
	ld2, err := New(src, testConfig(2))
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		var last error
		first := true
		for b, err := range ld2.Epoch(context.Background(), 0) {
			if err != nil {
				last = err
				break
			}
			b.Release()
			if first {
				close(started)
				first = false
			}
			time.Sleep(5 * time.Millisecond)
		}
		done <- last
	}()
	<-started
	if err := ld2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("epoch after Close: %v, want ErrClosed", err)
	}
}

func TestHoldingEveryBufferIsAnError(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	ld := newLoader(t, src, testConfig(2))
	var held []*Batch
	var got error
	for b, err := range ld.Epoch(context.Background(), 0) {
		if err != nil {
			got = err
			break
		}
		held = append(held, b)
	}
	if !errors.Is(got, ErrHeld) || len(held) != 3 {
		t.Errorf("holding every buffer: got %v after %d batches", got, len(held))
	}
	for _, b := range held {
		b.Release()
	}
	defer func() {
		if recover() == nil {
			t.Error("second Release did not panic")
		}
	}()
	held[0].Release()
}

func TestStats(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	ld := newLoader(t, src, testConfig(2))
	collect(t, ld, context.Background(), 0, 0)
	st := ld.Stats()
	n := int64(src.Len())
	if st.Read.Items != n || st.Decode.Items != n || st.Augment.Items != n || st.Pack.Items != n {
		t.Errorf("stage items %d/%d/%d/%d, want %d", st.Read.Items, st.Decode.Items, st.Augment.Items, st.Pack.Items, n)
	}
	if st.Read.Bytes == 0 || st.Decode.Busy == 0 || st.Pack.Bytes != n*int64(ld.sampleBytes) || st.Epochs != 1 {
		t.Errorf("stats: %+v", st)
	}
	if st.Tasks.Cap != 0 {
		t.Error("queues reported while idle")
	}
}

func TestStopAfter(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	full := collect(t, newLoader(t, src, testConfig(2)), context.Background(), 0, 0)
	n := int64(src.Len())
	for _, stop := range []Stage{ReadStage, DecodeStage, AugmentStage} {
		t.Run(stop.String(), func(t *testing.T) {
			cfg := testConfig(2)
			cfg.StopAfter = stop
			ld := newLoader(t, src, cfg)
			got := collect(t, ld, context.Background(), 0, 0)
			// Same order and labels; no pixels.
			if !slices.Equal(got.indices, full.indices) || !slices.Equal(got.labels, full.labels) {
				t.Error("indices or labels differ from the full pipeline's")
			}
			st := ld.Stats()
			want := [4]int64{n, 0, 0, 0}
			for s := ReadStage + 1; s <= stop; s++ {
				want[s-ReadStage] = n
			}
			if have := [4]int64{st.Read.Items, st.Decode.Items, st.Augment.Items, st.Pack.Items}; have != want {
				t.Errorf("stage items %v, want %v", have, want)
			}
			if eff := ld.Config(); !strings.Contains(eff.String(), "stop_after="+stop.String()) {
				t.Errorf("config string %q does not say where it stops", eff.String())
			}
		})
	}
	for _, name := range Stages {
		if s, err := ParseStage(name); err != nil || s.String() != name {
			t.Errorf("ParseStage(%q) = %v, %v", name, s, err)
		}
	}
	if _, err := ParseStage("pack"); err == nil {
		t.Error("ParseStage(pack) accepted")
	}
	cfg := testConfig(1)
	cfg.StopAfter = AugmentStage + 1
	if _, err := New(src, cfg); err == nil || !strings.Contains(err.Error(), "StopAfter") {
		t.Errorf("New with a bad StopAfter: %v", err)
	}
}

// TestWaitCountsStarvation: behind a slow consumer the loader is ahead and the consumer
// hardly waits; a consumer that takes no time waits for nearly the whole epoch.
func TestWaitCountsStarvation(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	run := func(step time.Duration) (wait, wall time.Duration, batches int64) {
		ld := newLoader(t, src, testConfig(1))
		t0 := time.Now()
		for b, err := range ld.Epoch(context.Background(), 0) {
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(step)
			b.Release()
		}
		st := ld.Stats()
		return st.Wait, time.Since(t0), st.Batches
	}
	wait, wall, batches := run(0)
	if batches != int64((src.Len()+7)/8) {
		t.Errorf("%d batches delivered, want %d", batches, (src.Len()+7)/8)
	}
	if wait <= 0 || wait > wall || float64(wait) < 0.5*float64(wall) {
		t.Errorf("fast consumer waited %v of %v", wait, wall)
	}
	// The loader's prefetch fills while the consumer sleeps: once the first batch is in,
	// later waits are short. Compare with a generous margin: the machine may be loaded.
	slowWait, slowWall, _ := run(50 * time.Millisecond)
	if float64(slowWait)/float64(slowWall) >= float64(wait)/float64(wall) {
		t.Errorf("slow consumer waited %v of %v, fast one %v of %v", slowWait, slowWall, wait, wall)
	}
}

// TestCloseAfterLastBatchAssembled: a Loader closed while the consumer is between batches,
// after the epoch's last batch was assembled (so the transfer stage ended cleanly and Close
// takes back the batches it had passed on), ends the epoch with ErrClosed, never with the
// quiet end of a complete epoch.
func TestCloseAfterLastBatchAssembled(t *testing.T) {
	dir, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		cfg := testConfig(2)
		cfg.NoAutotune = true
		cfg.Prefetch = 16 // the whole epoch fits in the batches in flight
		ld := newLoader(t, dir, cfg)
		var n int
		var last error
		for b, err := range ld.Epoch(context.Background(), 0) {
			if err != nil {
				last = err
				break
			}
			b.Release()
			n++
			if n == 1 {
				time.Sleep(300 * time.Millisecond) // every batch assembled and passed on
				if err := ld.Close(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if !errors.Is(last, ErrClosed) {
			t.Fatalf("after Close, the epoch ended with %v after %d batches, want ErrClosed", last, n)
		}
	}
}
