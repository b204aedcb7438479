package pipeline

import (
	"bytes"
	"context"
	"image"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/augment"
	"github.com/conveyor-ml/conveyor/internal/treetest"
	"github.com/conveyor-ml/conveyor/pack"
)

// RandomErasing runs on the packed slot with the sample's random stream: batches are the
// same for any worker count, and each sample differs from the un-erased run in exactly
// one rectangle, holding the erasing value per channel.
func TestRandomErasingInLoader(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	value := [3]float32{1.5, -2, 0.25}
	for _, layout := range []pack.Layout{pack.NCHW, pack.NHWC} {
		t.Run(layout.String(), func(t *testing.T) {
			plain := testConfig(1)
			plain.Pack.Layout = layout
			ref := collect(t, newLoader(t, src, plain), context.Background(), 1, 0)
			var first epochData
			for i, workers := range []int{1, 2} {
				cfg := testConfig(workers)
				cfg.Pack.Layout = layout
				cfg.Augment = append(cfg.Augment, &augment.RandomErasing{P: 1, Value: value})
				got := collect(t, newLoader(t, src, cfg), context.Background(), 1, 0)
				if i == 0 {
					first = got
					continue
				}
				if !bytes.Equal(got.data, first.data) {
					t.Fatalf("workers=%d: batches differ from workers=1", workers)
				}
			}
			const w, h = 24, 24
			n := len(ref.data) / (w * h * 12)
			erased := 0
			for k := range n {
				a := pack.Sample{Data: ref.data[k*w*h*12 : (k+1)*w*h*12], Width: w, Height: h, Layout: layout}
				b := pack.Sample{Data: first.data[k*w*h*12 : (k+1)*w*h*12], Width: w, Height: h, Layout: layout}
				var r image.Rectangle // the bounding box of the changed values
				for c := range 3 {
					for y := range h {
						for x := range w {
							if a.Value(c, x, y) != b.Value(c, x, y) {
								r = r.Union(image.Rect(x, y, x+1, y+1))
							}
						}
					}
				}
				if r.Empty() {
					continue // no rectangle fitted, or it only rewrote equal values
				}
				erased++
				for c := range 3 {
					for y := r.Min.Y; y < r.Max.Y; y++ {
						for x := r.Min.X; x < r.Max.X; x++ {
							if got := b.Value(c, x, y); got != value[c] {
								t.Fatalf("sample %d: value (%d, %d, %d) in the erased %v is %v, want %v", k, c, x, y, r, got, value[c])
							}
						}
					}
				}
				if r.Dx() >= w || r.Dy() >= h {
					t.Errorf("sample %d: erased %v covers a whole side", k, r)
				}
			}
			if erased < n*9/10 {
				t.Errorf("%d of %d samples erased with P 1", erased, n)
			}
		})
	}
}

// Random noise is deterministic too.
func TestRandomErasingNoiseSameForAnyWorkerCount(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	// Without the erasing, as a baseline: the erasing draws after the image ops, so the
	// samples it leaves are the same bytes.
	cfg := testConfig(1)
	cfg.Pack.DType = pack.BFloat16
	ld := newLoader(t, src, cfg)
	plain := collect(t, ld, context.Background(), 2, 0)
	var ref []byte
	for _, workers := range []int{1, 2} {
		cfg := testConfig(workers)
		cfg.Pack.DType = pack.BFloat16
		cfg.Augment = append(cfg.Augment, &augment.RandomErasing{P: 0.5, Random: true})
		got := collect(t, newLoader(t, src, cfg), context.Background(), 2, 0)
		if ref == nil {
			ref = got.data
		} else if !bytes.Equal(got.data, ref) {
			t.Fatalf("workers=%d: batches differ from workers=1", workers)
		}
	}
	if len(ref) != len(plain.data) {
		t.Fatalf("%d bytes with RandomErasing, %d without", len(ref), len(plain.data))
	}
	n := len(ref) / ld.sampleBytes
	erased := 0
	for i := range n {
		a := ref[i*ld.sampleBytes : (i+1)*ld.sampleBytes]
		if !bytes.Equal(a, plain.data[i*ld.sampleBytes:(i+1)*ld.sampleBytes]) {
			erased++
		}
	}
	// P 0.5 over 60 samples: 30 expected, outside [15, 45] about once in 10^4 seeds.
	if erased < 15 || erased > 45 {
		t.Errorf("%d of %d samples erased with P 0.5", erased, n)
	}
}

func TestRandomErasingConfigChecks(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"device convert", func(c *Config) {
			c.Device.Cast = true
			c.Augment = append(c.Augment, augment.NewRandomErasing(0.25))
		}, "Device.Cast packs uint8 pixels on the host, but Augment ends with ops on the normalised sample"},
		{"image op after", func(c *Config) {
			c.Augment = append(c.Augment, augment.NewRandomErasing(0.25), augment.NewRandomHorizontalFlip(0.5))
		}, "follows op"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(1)
			tc.edit(cfg)
			ld, err := New(src, cfg)
			if err == nil {
				ld.Close()
				t.Fatal("New accepted the configuration")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}
