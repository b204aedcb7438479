package pipeline

import (
	"context"
	"slices"
	"testing"

	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/internal/treetest"
	"github.com/conveyor-ml/conveyor/pack"
)

// TestRegionDecode runs the train recipe with crop-aware decoding (the default) and with
// FullDecode, on both JPEG backends: the same samples, labels and crops; on the Go
// decoder nearly the same pixels (a region decode resamples its YCbCr planes and converts
// at the output size, interpolating chroma that the whole-image path replicates: the two
// differ only along sharp chroma edges); with libjpeg-turbo's DCT scaling within a mean
// of 2/255.
func TestRegionDecode(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, backend := range []string{decode.BackendGo, decode.BackendTurbo} {
		t.Run(backend, func(t *testing.T) {
			t.Setenv(decode.EnvBackend, backend)
			if backend == decode.BackendTurbo {
				if d, err := decode.NewDecoder(nil); err != nil {
					t.Skipf("libjpeg-turbo not available, so its region decode cannot be tested: %v", err)
				} else {
					d.Close()
				}
			}
			cfg := func(full bool) *Config {
				c := testConfig(2)
				c.Pack.DType, c.Pack.Normalize = pack.Uint8, false
				c.FullDecode = full
				return c
			}
			region := newLoader(t, src, cfg(false))
			if region.region == nil {
				t.Fatal("the train recipe does not use crop-aware decoding")
			}
			fullLd := newLoader(t, src, cfg(true))
			ctx := context.Background()
			got, want := collect(t, region, ctx, 1, 0), collect(t, fullLd, ctx, 1, 0)
			if !slices.Equal(got.labels, want.labels) || !slices.Equal(got.indices, want.indices) || len(got.data) != len(want.data) {
				t.Fatal("different samples")
			}
			var sum, worst, same int
			for i := range got.data {
				d := int(got.data[i]) - int(want.data[i])
				sum += max(d, -d)
				worst = max(worst, d, -d)
				if d == 0 {
					same++
				}
			}
			mean := float64(sum) / float64(len(got.data))
			t.Logf("%s: mean abs difference %.3f, worst %d, %.1f%% of bytes identical", backend, mean, worst, 100*float64(same)/float64(len(got.data)))
			if mean > 2 {
				t.Errorf("mean abs difference %.2f > 2", mean)
			}
			if backend == decode.BackendGo && (mean > 0.5 || float64(same) < 0.85*float64(len(got.data))) {
				t.Errorf("Go decoder: mean difference %.2f, %d of %d bytes identical", mean, same, len(got.data))
			}
			// Region decoding produced only the crops: 24×24 pixels per decoded sample.
			st := region.Stats()
			if st.Decode.Bytes != st.Decode.Items*24*24 {
				t.Errorf("decode stage counted %d pixels for %d samples, want 24x24 each", st.Decode.Bytes, st.Decode.Items)
			}
		})
	}
}
