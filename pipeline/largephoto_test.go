package pipeline

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/internal/synth"
	"github.com/conveyor-ml/conveyor/pack"
)

// TestLargePhotos puts a 48-megapixel JPEG and a 35-megapixel PNG, the sizes phone
// cameras take, among ordinary photos: with the default configuration (2 workers, the
// default MemoryBudget) both recipes load every one of them, each large image waiting for
// the decode memory the others' workers give back, and the loader never holds more than
// its budget.
func TestLargePhotos(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes 83 megapixels per epoch")
	}
	dir := t.TempDir()
	if _, err := synth.WriteTree(dir, &synth.TreeOptions{Classes: 2, PerClass: 6, Seed: 5, MinSide: 60, MaxSide: 160}); err != nil {
		t.Fatal(err)
	}
	writeLarge(t, filepath.Join(dir, "class00", "large.jpg"), 8000, 6000, func(w *bytes.Buffer, m image.Image) error {
		return jpeg.Encode(w, m, &jpeg.Options{Quality: 85})
	})
	writeLarge(t, filepath.Join(dir, "class01", "large.png"), 5000, 7000, func(w *bytes.Buffer, m image.Image) error {
		return (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(w, m)
	})
	src, err := Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, recipe := range []string{"train", "eval"} {
		t.Run(recipe, func(t *testing.T) {
			cfg := &Config{Batch: BatchConfig{Size: 4}, Tuning: TuningConfig{Workers: 2}, Pack: pack.Options{Normalize: true}, Logf: t.Logf}
			if err := ApplyRecipe(cfg, recipe, 224); err != nil {
				t.Fatal(err)
			}
			ld := newLoader(t, src, cfg)
			d := collect(t, ld, context.Background(), 0, 0)
			st := ld.Stats()
			if st.Bad.Samples != 0 || len(d.indices) != src.Len() {
				t.Fatalf("%d bad samples, %d of %d loaded: %v", st.Bad.Samples, len(d.indices), src.Len(), st.Bad.Recent)
			}
			if st.Memory.PeakHeld > st.Memory.Budget {
				t.Errorf("peak held %d bytes, over the budget of %d", st.Memory.PeakHeld, st.Memory.Budget)
			}
			t.Logf("budget %d MiB, peak held %d MiB, decode memory %d MiB, peak %d MiB",
				st.Memory.Budget>>20, st.Memory.PeakHeld>>20, st.Memory.DecodeBudget>>20, st.Memory.PeakDecode>>20)
		})
	}
}

// writeLarge encodes a w×h gradient (cheap to make and to compress) into file.
func writeLarge(t *testing.T, file string, w, h int, encode func(*bytes.Buffer, image.Image) error) {
	t.Helper()
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.SetRGBA(x, y, color.RGBA{uint8(x * 255 / w), uint8(y * 255 / h), uint8((x + y) & 0xff), 255})
		}
	}
	var b bytes.Buffer
	if err := encode(&b, m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The eval recipe's Resize enlarges small images, as torchvision's does; for a 1×5000 or
// a 1×100000 image that would be a 256×1280000 or 256×25600000 image, gigabytes outside
// any budget. The loader works the size out before the ops run and refuses such a sample
// as a bad one saying why; nothing close to that size is allocated.
func TestOpsOutputReservedFromBudget(t *testing.T) {
	dir := t.TempDir()
	if _, err := synth.WriteTree(dir, &synth.TreeOptions{Classes: 2, PerClass: 4, Seed: 9, MinSide: 40, MaxSide: 90}); err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]int{"class00/thin.png": 5000, "class01/thinner.png": 100000} {
		writeLarge(t, filepath.Join(dir, name), 1, h, func(w *bytes.Buffer, m image.Image) error { return png.Encode(w, m) })
	}
	src, err := Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &Config{Batch: BatchConfig{Size: 4}, Tuning: TuningConfig{Workers: 2}, Pack: pack.Options{Normalize: true}, Bad: BadConfig{MaxFraction: -1}, Logf: t.Logf}
	if err := ApplyRecipe(cfg, "eval", 224); err != nil {
		t.Fatal(err)
	}
	ld := newLoader(t, src, cfg)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	d := collect(t, ld, context.Background(), 0, 0)
	runtime.ReadMemStats(&after)
	st := ld.Stats()
	if st.Bad.Samples != 2 || len(d.indices) != src.Len() {
		t.Fatalf("%d bad samples, %d delivered: %v", st.Bad.Samples, len(d.indices), st.Bad.Recent)
	}
	for _, e := range st.Bad.Recent {
		if !errors.Is(&e, decode.ErrTooLarge) || !strings.Contains(e.Error(), "augment ops would make a 256x") {
			t.Errorf("%v: want ErrTooLarge naming the ops' image", e)
		}
	}
	if st.Memory.PeakHeld > st.Memory.Budget {
		t.Errorf("peak held %d bytes, over the budget of %d", st.Memory.PeakHeld, st.Memory.Budget)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<20 {
		t.Errorf("the epoch allocated %d MiB", alloc>>20)
	}
}

// An image that needs more decode memory than the workers' retained shares leave waits
// until they give them back, then decodes alone: with a budget that leaves it a bit more
// than half the decode memory, the large PNG still loads.
func TestLargeImageDrainsWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes 35 megapixels")
	}
	dir := t.TempDir()
	if _, err := synth.WriteTree(dir, &synth.TreeOptions{Classes: 2, PerClass: 6, Seed: 5, MinSide: 60, MaxSide: 160}); err != nil {
		t.Fatal(err)
	}
	large := filepath.Join(dir, "class01", "large.png")
	writeLarge(t, large, 5000, 7000, func(w *bytes.Buffer, m image.Image) error {
		return (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(w, m)
	})
	src, err := Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &Config{Batch: BatchConfig{Size: 4}, Tuning: TuningConfig{Workers: 2}, Pack: pack.Options{Normalize: true}, Logf: t.Logf}
	if err := ApplyRecipe(cfg, "eval", 224); err != nil {
		t.Fatal(err)
	}
	probe := newLoader(t, src, cfg)
	data, err := os.ReadFile(large)
	if err != nil {
		t.Fatal(err)
	}
	c, err := probe.workers[0].dec.Config(data)
	if err != nil {
		t.Fatal(err)
	}
	need, w, h, err := probe.decodeNeed(probe.workers[0].dec, readItem{data: data}, c, decodePlan{})
	if err != nil {
		t.Fatal(err)
	}
	ops, _, _ := probe.opsNeed(cfg.Augment, w, h)
	need += ops
	// Decode memory of 1.5 times the need: more than the half the workers' shares leave.
	cfg.Tuning.MemoryBudget = probe.Stats().Memory.Pinned.BytesMapped + (need*3/2)*5/4 + 8
	ld := newLoader(t, src, cfg)
	st := ld.Stats()
	if free := st.Memory.DecodeBudget - 2*ld.dec.retain.Load(); need <= free || need > st.Memory.DecodeBudget {
		t.Fatalf("need %d, decode memory %d, %d beside the workers' shares: the test does not make the image wait", need, st.Memory.DecodeBudget, free)
	}
	d := collect(t, ld, context.Background(), 0, 0)
	st = ld.Stats()
	if st.Bad.Samples != 0 || len(d.indices) != src.Len() {
		t.Fatalf("%d bad samples, %d of %d loaded: %v", st.Bad.Samples, len(d.indices), src.Len(), st.Bad.Recent)
	}
	if st.Memory.PeakDecode < need || st.Memory.PeakHeld > st.Memory.Budget {
		t.Errorf("peak decode %d (need %d), peak held %d of %d", st.Memory.PeakDecode, need, st.Memory.PeakHeld, st.Memory.Budget)
	}
}
