package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/conveyor-ml/conveyor/augment"
	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/internal/synth"
	"github.com/conveyor-ml/conveyor/internal/treetest"
	"github.com/conveyor-ml/conveyor/pipeline"
)

// convertOpts stores samples resized to shorter side 32.
func convertOpts(t *testing.T) *pipeline.ConvertOptions {
	return &pipeline.ConvertOptions{Decode: decode.Options{Resize: decode.ResizePolicy{Mode: decode.ResizeShorter, Size: 32}}, Workers: 2, Logf: t.Logf}
}

// convertTree converts a fresh tree of classes×perClass images into a new directory, in
// shards of 64 KiB (several, for a hundred images), and returns the directory.
func convertTree(t *testing.T, classes, perClass int) string {
	t.Helper()
	src, err := Dir(treetest.New(t, classes, perClass), nil)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	c, err := cache.Open(dst, &cache.Options{ShardBytes: 64 << 10, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := pipeline.Convert(context.Background(), src, c, convertOpts(t)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// lines collects log lines, safe for concurrent use.
type lines struct {
	mu sync.Mutex
	l  []string
}

func (l *lines) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.l = append(l.l, fmt.Sprintf(format, args...))
}

func (l *lines) with(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, x := range l.l {
		if strings.Contains(x, s) {
			out = append(out, x)
		}
	}
	return out
}

// biggestShard returns the shard file of dir holding the most of conv's samples, and
// how many.
func biggestShard(conv *Converted) (string, int) {
	count := map[string]int{}
	for i := range conv.Len() {
		count[conv.Ref(i).Shard()]++
	}
	best := ""
	for name, n := range count {
		if best == "" || n > count[best] || n == count[best] && name < best {
			best = name
		}
	}
	return best, count[best]
}

// A flipped bit in a shard's header: opening logs the shard, keeps its samples, and a
// loader counts them as bad samples naming the shard, so MaxBadFraction ends the epoch.
func TestConvertedDamagedShardHeader(t *testing.T) {
	dst := convertTree(t, 5, 20)
	conv, err := OpenConverted(dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := conv.Len()
	victim, inVictim := biggestShard(conv)
	conv.Close()
	if inVictim == n {
		t.Fatalf("all %d samples in one shard", n)
	}
	f, err := os.OpenFile(filepath.Join(dst, victim), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0x40}, 20) // the header's version, whose checksum now fails
	f.Close()

	var log lines
	conv, err = OpenConverted(dst, &ConvertedOptions{Logf: log.logf})
	if err != nil {
		t.Fatalf("open with a damaged shard header: %v", err)
	}
	defer conv.Close()
	if conv.Len() != n {
		t.Errorf("%d samples, want all %d listed", conv.Len(), n)
	}
	if got := log.with(victim); len(got) == 0 || len(conv.Problems()) != 1 || conv.Problems()[0].Kind != cache.KindHeader {
		t.Errorf("opening logged %q, problems %+v; want the damaged header of %s", log.l, conv.Problems(), victim)
	}

	// The default MaxBadFraction (1%) ends the epoch.
	cfg := testConfig(2)
	cfg.Logf = log.logf
	ld := newLoader(t, conv, cfg)
	var epochErr error
	for b, err := range ld.Epoch(context.Background(), 0) {
		if err != nil {
			epochErr = err
			break
		}
		b.Release()
	}
	if epochErr == nil || !strings.Contains(epochErr.Error(), "MaxBadFraction") || !strings.Contains(epochErr.Error(), victim) {
		t.Errorf("epoch error %v; want MaxBadFraction crossed, naming %s", epochErr, victim)
	}

	// Without a limit, every sample of the shard is bad, once, and the rest train.
	cfg = testConfig(2)
	cfg.Bad.MaxFraction = -1
	var bad lines
	cfg.Logf = bad.logf
	ld = newLoader(t, conv, cfg)
	got := collect(t, ld, context.Background(), 0, 0)
	if st := ld.Stats(); st.Bad.Samples != int64(inVictim) || len(got.indices) != n {
		t.Errorf("%d bad samples, %d delivered; want %d bad, %d delivered", st.Bad.Samples, len(got.indices), inVictim, n)
	}
	if named := bad.with(victim); len(named) != inVictim {
		t.Errorf("%d of %d bad-sample lines name %s: %q", len(named), inVictim, victim, bad.l)
	}
}

// A shard deleted with its index loses samples that nothing can list any more: opening
// refuses, saying how many, unless AllowIncomplete.
func TestConvertedLostShard(t *testing.T) {
	dst := convertTree(t, 5, 20)
	conv, err := OpenConverted(dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := conv.Len()
	victim, inVictim := biggestShard(conv)
	conv.Close()
	for _, f := range []string{victim, strings.TrimSuffix(victim, ".shard") + ".idx"} {
		if err := os.Remove(filepath.Join(dst, f)); err != nil {
			t.Fatal(err)
		}
	}
	_, err = OpenConverted(dst, &ConvertedOptions{Logf: t.Logf})
	if !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), fmt.Sprintf("%d of its %d samples are lost", inVictim, n)) ||
		!strings.Contains(err.Error(), "missing shard "+victim) {
		t.Fatalf("open with a lost shard: %v", err)
	}
	conv, err = OpenConverted(dst, &ConvertedOptions{AllowIncomplete: true, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer conv.Close()
	if conv.Len() != n-inVictim {
		t.Errorf("AllowIncomplete: %d samples, want %d", conv.Len(), n-inVictim)
	}
}

// An incomplete conversion, stopped or still running, is refused by default, saying
// which; AllowIncomplete trains on what it holds.
func TestConvertedIncomplete(t *testing.T) {
	src, err := Dir(treetest.New(t, 2, 40), nil) // over one of Convert's batches of 64
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	c := openCache(t, dst, cache.S2)

	// While Convert runs, its progress callback tries to open the dataset.
	var during error
	opts := convertOpts(t)
	opts.Workers = 1
	opts.Progress = func(p pipeline.ConvertReport) {
		if during == nil && p.Done < p.Total {
			_, during = OpenConverted(dst, &ConvertedOptions{Logf: t.Logf})
			if during == nil {
				during = errors.New("opened while converting")
			}
		}
	}
	if _, err := pipeline.Convert(context.Background(), src, c, opts); err != nil {
		t.Fatal(err)
	}
	t.Logf("while converting: %v", during)
	if !errors.Is(during, ErrIncomplete) || !strings.Contains(during.Error(), "still running (pid ") {
		t.Errorf("open while converting: %v", during)
	}

	// A conversion that stopped: the cache refused more records (as on a full disk).
	dst2 := t.TempDir()
	c2, err := cache.Open(dst2, &cache.Options{MaxBytes: 40 << 10, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := pipeline.Convert(context.Background(), src, c2, convertOpts(t)); !errors.Is(err, cache.ErrFull) {
		t.Fatalf("Convert into a small cache: %v, want ErrFull", err)
	}
	_, err = OpenConverted(dst2, &ConvertedOptions{Logf: t.Logf})
	t.Logf("after a stopped conversion: %v", err)
	if !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), "its conversion stopped with ") || !strings.Contains(err.Error(), "full") {
		t.Errorf("open after a stopped conversion: %v", err)
	}
	var log lines
	conv, err := OpenConverted(dst2, &ConvertedOptions{AllowIncomplete: true, Logf: log.logf})
	if err != nil {
		t.Fatal(err)
	}
	defer conv.Close()
	if conv.Len() == 0 || conv.Len() >= src.Len() || len(log.with("training on the")) != 1 || len(conv.Problems()) != 0 {
		t.Errorf("AllowIncomplete: %d samples of %d, log %q, problems %+v", conv.Len(), src.Len(), log.l, conv.Problems())
	}

	// A conversion killed (or whose disk filled before it could say why).
	info, err := cache.ReadInfo(dst)
	if err != nil {
		t.Fatal(err)
	}
	info.Complete, info.Shards = false, nil
	if err := cache.WriteInfo(dst, info); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenConverted(dst, &ConvertedOptions{Logf: t.Logf}); !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), "did not finish") {
		t.Errorf("open after a killed conversion: %v", err)
	}
}

// A dataset.json written before manifests is refused until a rerun of Convert, which
// decodes nothing, records one.
func TestConvertedWithoutManifest(t *testing.T) {
	src, err := Dir(treetest.New(t, 2, 6), nil)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	c := openCache(t, dst, cache.S2)
	if _, err := pipeline.Convert(context.Background(), src, c, convertOpts(t)); err != nil {
		t.Fatal(err)
	}
	info, err := cache.ReadInfo(dst)
	if err != nil {
		t.Fatal(err)
	}
	info.Version, info.Shards = 0, nil
	if err := cache.WriteInfo(dst, info); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenConverted(dst, &ConvertedOptions{Logf: t.Logf}); !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), "older conveyor") {
		t.Fatalf("open of a version 1 dataset: %v", err)
	}
	rep, err := pipeline.Convert(context.Background(), src, c, convertOpts(t))
	if err != nil || rep.Stored != 0 || rep.Skipped != src.Len()-rep.Bad {
		t.Fatalf("rerun: %+v, %v; want everything skipped", rep, err)
	}
	conv, err := OpenConverted(dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	conv.Close()
}

// Two Converts into one directory at once: one runs, the other fails at once naming
// it, and every file is stored once.
func TestConcurrentConverts(t *testing.T) {
	src, err := Dir(treetest.New(t, 3, 10), nil)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, 2)
	reps := make([]*pipeline.ConvertReport, 2)
	for i := range 2 {
		c := openCache(t, dst, cache.S2)
		wg.Go(func() {
			<-start
			reps[i], errs[i] = pipeline.Convert(context.Background(), src, c, convertOpts(t))
		})
	}
	close(start)
	wg.Wait()
	// Both start at once, so one finds the other running (were the machine so slow that
	// the first finished before the second began, the second would find every file
	// stored, and store nothing either).
	stored, good := 0, 0
	for i, err := range errs {
		switch {
		case err == nil:
			stored += reps[i].Stored
			good = src.Len() - reps[i].Bad
		case !errors.Is(err, cache.ErrLocked) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) || reps[i] != nil:
			t.Errorf("Convert %d: %v; want cache.ErrLocked naming this process", i, err)
		default:
			t.Logf("Convert %d: %v", i, err)
		}
	}
	if errs[0] != nil && errs[1] != nil {
		t.Fatal("both Converts failed")
	}
	ro, err := cache.Open(dst, &cache.Options{ReadOnly: true, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if st := ro.Stats(); stored != good || st.Records != good {
		t.Errorf("%d stored, %d records in the directory; want each of %d files once", stored, st.Records, good)
	}
	// Once the first is done, another conversion runs, and finds everything stored.
	rep, err := pipeline.Convert(context.Background(), src, openCache(t, dst, cache.S2), convertOpts(t))
	if err != nil || rep.Stored != 0 || rep.Skipped != good {
		t.Errorf("a later Convert: %+v, %v", rep, err)
	}
}

// A shard truncated while a loader reads it, mapped: the process survives, and the
// samples the loader could not read are bad samples naming the shard.
func TestConvertedTruncatedMidEpoch(t *testing.T) {
	dst := convertTree(t, 5, 20)
	var log lines
	conv, err := OpenConverted(dst, &ConvertedOptions{Logf: log.logf})
	if err != nil {
		t.Fatal(err)
	}
	defer conv.Close()
	victim, _ := biggestShard(conv)
	cfg := testConfig(2)
	cfg.Bad.MaxFraction = -1
	cfg.Logf = log.logf
	ld := newLoader(t, conv, cfg)
	delivered := 0
	for b, err := range ld.Epoch(context.Background(), 0) {
		if err != nil {
			t.Fatalf("epoch: %v", err)
		}
		if b.Number == 0 {
			if err := os.Truncate(filepath.Join(dst, victim), 0); err != nil {
				t.Fatal(err)
			}
		}
		delivered += b.Len
		b.Release()
	}
	st := ld.Stats()
	named := log.with(victim)
	t.Logf("%d bad samples; %d log lines name the shard, e.g. %q", st.Bad.Samples, len(named), named[:min(1, len(named))])
	if delivered != conv.Len() || st.Bad.Samples == 0 || int(st.Bad.Samples) != len(named) {
		t.Errorf("%d delivered of %d, %d bad samples, %d lines naming %s; want every bad sample logged with it",
			delivered, conv.Len(), st.Bad.Samples, len(named), victim)
	}
	if len(log.with("truncated or replaced while open")) == 0 {
		t.Error("no read faulted: the shard was not read through its mapping after the cut")
	}
}

// TestConvertedCropReadsBands trains from a converted dataset of images several bands of
// rows tall, where each crop decompresses only its rows (the default), and with
// FullDecode, which decodes every record whole before cropping: the batches are the same
// to the bit, in s2 (bands compressed and stored as is) and raw.
func TestConvertedCropReadsBands(t *testing.T) {
	dir := t.TempDir()
	if _, err := synth.WriteTree(dir, &synth.TreeOptions{Classes: 2, PerClass: 8, Seed: 5, MinSide: 200, MaxSide: 420, Formats: synth.AllFormats()}); err != nil {
		t.Fatal(err)
	}
	src, err := Dir(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, codec := range []cache.Codec{cache.S2, cache.Raw} {
		t.Run(string(codec), func(t *testing.T) {
			dst := t.TempDir()
			c, err := cache.Open(dst, &cache.Options{Codec: codec, Logf: t.Logf})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pipeline.Convert(context.Background(), src, c, &pipeline.ConvertOptions{Workers: 2, Logf: t.Logf}); err != nil {
				t.Fatal(err)
			}
			c.Close()
			conv, err := OpenConverted(dst, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer conv.Close()
			cfg := func(full bool) *pipeline.Config {
				c := testConfig(2)
				c.FullDecode = full
				return c
			}
			if c := cfg(false); c.Decode.Resize.Mode != decode.ResizeNone {
				t.Fatal("the train recipe resizes before cropping")
			} else if _, ok := c.Augment[0].(augment.RegionOp); !ok {
				t.Fatal("the train recipe does not crop before decoding")
			}
			bands := newLoader(t, conv, cfg(false))
			ctx := context.Background()
			for epoch := range 2 {
				got, want := collect(t, bands, ctx, epoch, 0), collect(t, newLoader(t, conv, cfg(true)), ctx, epoch, 0)
				if !slices.Equal(got.labels, want.labels) || !slices.Equal(got.indices, want.indices) || !slices.Equal(got.data, want.data) {
					t.Fatalf("epoch %d: batches differ from decoding whole records", epoch)
				}
			}
		})
	}
}

// A converted dataset whose files are symbolic links (git-annex, DVC, a farm of links)
// opens and trains as the dataset itself; it was refused as "2000 of its 2000 samples
// are lost ()".
func TestConvertedSymlinks(t *testing.T) {
	dst := convertTree(t, 2, 10)
	farm := t.TempDir()
	ents, err := os.ReadDir(dst)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if n := e.Name(); n == cache.InfoName || strings.HasSuffix(n, ".shard") || strings.HasSuffix(n, ".idx") {
			if err := os.Symlink(filepath.Join(dst, n), filepath.Join(farm, n)); err != nil {
				t.Fatal(err)
			}
		}
	}
	conv, err := OpenConverted(farm, &ConvertedOptions{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer conv.Close()
	if conv.Len() != 20 || len(conv.Problems()) != 0 {
		t.Fatalf("%d samples, problems %+v", conv.Len(), conv.Problems())
	}
	local, err := OpenConverted(dst, &ConvertedOptions{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	ctx := context.Background()
	got, want := collect(t, newLoader(t, conv, testConfig(2)), ctx, 0, 0), collect(t, newLoader(t, local, testConfig(2)), ctx, 0, 0)
	if !bytes.Equal(got.data, want.data) {
		t.Error("batches differ from the dataset's own")
	}
}

// A dataset.json counting more records than its intact shards hold says so, rather than
// naming no damage at all ("lost ()").
func TestConvertedLostWithoutDamage(t *testing.T) {
	dst := convertTree(t, 2, 10)
	info, err := cache.ReadInfo(dst)
	if err != nil {
		t.Fatal(err)
	}
	info.Stored += 5
	if err := cache.WriteInfo(dst, info); err != nil {
		t.Fatal(err)
	}
	_, err = OpenConverted(dst, &ConvertedOptions{Logf: t.Logf})
	if !errors.Is(err, ErrIncomplete) || strings.Contains(err.Error(), "()") || !strings.Contains(err.Error(), "counts 25 stored and its shards hold 20") {
		t.Errorf("open: %v", err)
	}
}
