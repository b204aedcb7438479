package pipeline

import (
	"context"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/internal/treetest"
)

func TestFidelityConfig(t *testing.T) {
	for _, f := range []Fidelity{Fast, Exact} {
		got, err := ParseFidelity(f.String())
		if err != nil || got != f {
			t.Errorf("ParseFidelity(%q) = %v, %v", f, got, err)
		}
	}
	if _, err := ParseFidelity("precise"); err == nil || !strings.Contains(err.Error(), "precise") {
		t.Errorf("ParseFidelity(precise): %v", err)
	}

	cfg := Config{Fidelity: Exact}
	cfg.Pack.Width, cfg.Pack.Height = 8, 8
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if !cfg.Decode.Exact {
		t.Error("Exact did not set Decode.Exact")
	}
	if s := cfg.String(); !strings.Contains(s, "fidelity=exact") || !strings.Contains(s, "exact=true") {
		t.Errorf("String() = %q", s)
	}
	cfg.Fidelity = 7
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "Fidelity") {
		t.Errorf("Fidelity 7: %v", err)
	}
	cfg.Fidelity = Fast // Decode.Exact still set: exact decoding, fast ops
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "Decode.Exact") {
		t.Errorf("Decode.Exact with Fast: %v", err)
	}
}

// TestRecipeFidelity: eval is Exact (torchvision's pixels for evaluating a pretrained
// model), the training recipes Fast, whatever the Config held before.
func TestRecipeFidelity(t *testing.T) {
	for _, c := range []struct {
		recipe string
		want   Fidelity
	}{{"eval", Exact}, {"train", Fast}, {"randaugment", Fast}} {
		for _, before := range []Fidelity{Fast, Exact} {
			cfg := Config{Fidelity: before, Decode: decode.Options{Exact: before == Exact}}
			if err := ApplyRecipe(&cfg, c.recipe, 224); err != nil {
				t.Fatal(err)
			}
			if cfg.Fidelity != c.want || (cfg.Decode.Exact && c.want == Fast) {
				t.Errorf("%s after %v: Fidelity %v, Decode.Exact %t; want %v", c.recipe, before, cfg.Fidelity, cfg.Decode.Exact, c.want)
			}
		}
	}
}

// TestConvertExact: Convert with exact decode options runs (its loader takes Fidelity
// Exact from them) and records the spec with exact=true, so exact and fast conversions
// never share records.
func TestConvertExact(t *testing.T) {
	src, err := Dir(treetest.New(t, 2, 3))
	if err != nil {
		t.Fatal(err)
	}
	c, err := cache.Open(t.TempDir(), &cache.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	o := &ConvertOptions{Decode: decode.Options{Resize: decode.ResizePolicy{Mode: decode.ResizeShorter, Size: 32}}, Workers: 2, Logf: t.Logf}
	o.Decode.Exact = true
	if _, err := Convert(context.Background(), src, c, o); err != nil {
		t.Fatal(err)
	}
	for spec := range c.Specs() {
		if !strings.Contains(spec, "exact=true") {
			t.Errorf("spec %q does not say exact=true", spec)
		}
	}
}
