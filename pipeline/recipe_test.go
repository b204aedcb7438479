package pipeline

import (
	"bytes"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/internal/treetest"
	"github.com/conveyor-ml/conveyor/pack"
)

// TestRecipes runs every recipe for an epoch: each builds a loader whose batches have the
// recipe's size, the randaugment recipe's batches are the same for 1 and 2 workers and
// differ from the train recipe's (its ops change the pixels), and its RandomErasing is
// refused with Device.Cast.
func TestRecipes(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	run := func(recipe string, workers int) []batchRecord {
		cfg := &Config{Batch: BatchConfig{Size: 8}, Tuning: TuningConfig{Workers: workers}, Order: OrderConfig{Seed: 3}, Logf: t.Logf,
			Pack: pack.Options{DType: pack.Float32, Normalize: true}}
		if err := ApplyRecipe(cfg, recipe, 32); err != nil {
			t.Fatal(err)
		}
		ld := newLoader(t, src, cfg)
		bs := collectBatches(t, ld, 1, 0)
		if st := ld.Stats(); st.Bad.Samples != 0 {
			t.Fatalf("%s: %d bad samples", recipe, st.Bad.Samples)
		}
		return bs
	}
	got := map[string][]batchRecord{}
	for _, name := range Recipes {
		bs := run(name, 2)
		n := 0
		for _, b := range bs {
			if len(b.data) != len(b.indices)*3*32*32*4 {
				t.Fatalf("%s: batch of %d samples has %d bytes", name, len(b.indices), len(b.data))
			}
			n += len(b.indices)
		}
		if n != src.Len() {
			t.Fatalf("%s: %d samples in the epoch, want %d", name, n, src.Len())
		}
		got[name] = bs
	}
	one := run("randaugment", 1)
	same := 0
	for k, b := range got["randaugment"] {
		if !bytes.Equal(b.data, one[k].data) {
			t.Fatalf("randaugment: batch %d differs between 1 and 2 workers", k)
		}
		if bytes.Equal(b.data, got["train"][k].data) {
			same++
		}
	}
	if same == len(one) {
		t.Error("randaugment gives the train recipe's batches: its ops did nothing")
	}

	cfg := &Config{Batch: BatchConfig{Size: 8}, Device: DeviceConfig{Cast: true}, Pack: pack.Options{DType: pack.Float32, Normalize: true}}
	if err := ApplyRecipe(cfg, "randaugment", 32); err != nil {
		t.Fatal(err)
	}
	if _, err := New(src, cfg); err == nil || !strings.Contains(err.Error(), "Device.Cast") {
		t.Errorf("randaugment with Device.Cast: New = %v, want an error naming Device.Cast", err)
	}
	if err := ApplyRecipe(&Config{}, "autoaugment", 32); err == nil || !strings.Contains(err.Error(), "randaugment") {
		t.Errorf("unknown recipe: %v, want an error listing the recipes", err)
	}
}
