package pipeline

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/conveyor-ml/conveyor/augment"
	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/internal/treetest"
	"github.com/conveyor-ml/conveyor/pack"
)

// plainFlip is RandomHorizontalFlip without Mirrors: the loader cannot fold it into
// packing, so it flips the image as an op.
type plainFlip struct{ p float64 }

func (o plainFlip) Apply(c *augment.Context, src *decode.Image) (*decode.Image, error) {
	if c.Rand.Float64() < o.p {
		augment.FlipHorizontal(src)
	}
	return src, nil
}

func (o plainFlip) String() string { return fmt.Sprintf("plainFlip(%g)", o.p) }

// TestMirrorFoldedIntoPack runs the train recipe, whose last op, RandomHorizontalFlip, the
// loader folds into packing (each sample packed mirrored or not), against the same recipe
// with a flip it cannot fold: the same batches to the bit, in float32 NCHW (the mirrored
// kernel), uint8 NHWC and float16 (the image mirrored before packing), and with
// RandomErasing after the flip (its draws still come after the flip's).
func TestMirrorFoldedIntoPack(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		packing pack.Options
		erasing bool
	}{
		{"float32-nchw", pack.Options{DType: pack.Float32, Normalize: true}, false},
		{"uint8-nhwc", pack.Options{DType: pack.Uint8, Layout: pack.NHWC}, false},
		{"float16", pack.Options{DType: pack.Float16, Normalize: true}, false},
		{"float32-erasing", pack.Options{DType: pack.Float32, Normalize: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := func(fold bool) *Config {
				c := &Config{BatchSize: 8, Workers: 2, Seed: 7, Pack: tc.packing, Logf: t.Logf}
				if err := ApplyRecipe(c, "train", 24); err != nil {
					t.Fatal(err)
				}
				if !fold {
					c.Augment = append(c.Augment[:len(c.Augment)-1:len(c.Augment)-1], plainFlip{0.5})
				}
				if tc.erasing {
					c.Augment = append(c.Augment, &augment.RandomErasing{P: 0.5, Random: true})
				}
				return c
			}
			folded, plain := newLoader(t, src, cfg(true)), newLoader(t, src, cfg(false))
			if folded.mirror == nil || plain.mirror != nil {
				t.Fatalf("folded: %v, plain: %v", folded.mirror, plain.mirror)
			}
			ctx := context.Background()
			for epoch := range 2 {
				got, want := collect(t, folded, ctx, epoch, 0), collect(t, plain, ctx, epoch, 0)
				if !slices.Equal(got.labels, want.labels) || !slices.Equal(got.indices, want.indices) || !slices.Equal(got.data, want.data) {
					t.Fatalf("epoch %d: batches differ from flipping the image", epoch)
				}
			}
		})
	}
}

// TestFoldMirror: only a MirrorOp that is the last op on the image is folded.
func TestFoldMirror(t *testing.T) {
	crop, flip, erase := augment.NewRandomResizedCrop(8, 8), augment.NewRandomHorizontalFlip(0.5), &augment.RandomErasing{P: 0.5}
	jitter := &augment.ColorJitter{Brightness: 0.4}
	for _, tc := range []struct {
		in, want augment.Pipeline
		mirror   bool
	}{
		{augment.Pipeline{crop, flip}, augment.Pipeline{crop}, true},
		{augment.Pipeline{crop, flip, erase}, augment.Pipeline{crop, erase}, true},
		{augment.Pipeline{crop, flip, jitter}, augment.Pipeline{crop, flip, jitter}, false},
		{augment.Pipeline{flip}, augment.Pipeline{}, true},
		{augment.Pipeline{erase}, augment.Pipeline{erase}, false},
		{nil, nil, false},
	} {
		in := append(augment.Pipeline(nil), tc.in...)
		got, m := foldMirror(in)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) || (m != nil) != tc.mirror || fmt.Sprint(in) != fmt.Sprint(tc.in) {
			t.Errorf("foldMirror(%v) = %v, %v; want %v, mirror %v (and the input unchanged)", tc.in, got, m, tc.want, tc.mirror)
		}
	}
}
