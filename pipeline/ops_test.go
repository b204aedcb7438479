package pipeline

import (
	"context"
	"errors"
	"fmt"
	"image"
	"io/fs"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/conveyor-ml/conveyor/augment"
	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/internal/treetest"
	"github.com/conveyor-ml/conveyor/pack"
)

// A configuration mistake fails New, naming the op and the field, instead of turning
// every sample into a "bad sample".
func TestOpsValidatedInNew(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want []string
	}{
		{"hue", func(c *Config) { c.Augment[2] = &augment.ColorJitter{Hue: 0.9} }, []string{"ColorJitter", "Hue 0.9"}},
		{"center crop smaller than the pack", func(c *Config) {
			c.Augment = augment.Pipeline{&augment.Resize{Size: 256}, &augment.CenterCrop{Width: 100, Height: 100}}
		}, []string{"CenterCrop(100x100)", "24x24"}},
		{"grayscale probability", func(c *Config) { c.Augment[3] = &augment.RandomGrayscale{P: 1.5} }, []string{"RandomGrayscale", "P 1.5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(2)
			tc.edit(cfg)
			ld, err := New(src, cfg)
			if err == nil {
				ld.Close()
				t.Fatal("New accepted the configuration")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// panicOp panics on every sample.
type panicOp struct{}

func (o *panicOp) Apply(c *augment.Context, src *decode.Image) (*decode.Image, error) {
	panic("user op bug")
}
func (o *panicOp) String() string { return "panicOp" }

// panicTensorOp panics on every packed sample, where the packing step runs it.
type panicTensorOp struct{}

func (panicTensorOp) Apply(_ *augment.Context, src *decode.Image) (*decode.Image, error) {
	return src, nil
}
func (panicTensorOp) ApplyTensor(*augment.Context, pack.Sample) error { panic("tensor op bug") }
func (panicTensorOp) String() string                                  { return "panicTensorOp" }

// failOp returns an error on every sample: after New, a bug in the op.
type failOp struct{}

func (failOp) Apply(*augment.Context, *decode.Image) (*decode.Image, error) {
	return nil, errors.New("op broke")
}
func (failOp) String() string { return "failOp" }

// A panicking or failing op ends the epoch with an error naming the sample (with the
// stack, for a panic); the process survives, no sample is counted bad, and the loader can
// run the next epoch and Close (TestMain checks that every goroutine exited).
func TestOpPanicsAndErrorsEndTheEpoch(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		op   augment.Op
		want string
	}{
		{"panic", &panicOp{}, "user op bug"},
		{"panic-tensor", &panicTensorOp{}, "tensor op bug"},
		{"error", failOp{}, "op broke"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(2)
			cfg.Order.Sequential = true
			cfg.Augment = append(cfg.Augment, tc.op)
			ld := newLoader(t, src, cfg)
			got := epochErr(ld)
			var se *SampleError
			if !errors.As(got, &se) || !strings.Contains(got.Error(), tc.want) || se.Path != src.Path(se.Index) {
				t.Fatalf("epoch ended with %v; want a *SampleError naming the sample and saying %q", got, tc.want)
			}
			// Sequential: the first batch's first slot is reported, whichever worker
			// failed first.
			if se.Index != 0 {
				t.Errorf("error names sample %d, want 0", se.Index)
			}
			var pe *PanicError
			if strings.HasPrefix(tc.name, "panic") && (!errors.As(got, &pe) || !strings.Contains(string(pe.Stack), strings.TrimPrefix(fmt.Sprintf("%T", tc.op), "*pipeline."))) {
				t.Fatalf("want a *PanicError with the op in its stack, got %v", got)
			}
			if st := ld.Stats(); st.Bad.Samples != 0 {
				t.Errorf("%d bad samples: an op's failure is not the file's", st.Bad.Samples)
			}
		})
	}
}

// panicSource panics when sample 3 is opened.
type panicSource struct{ FileSource }

func (s panicSource) Open(i int) (fs.File, error) {
	if i == 3 {
		panic("source bug")
	}
	return s.FileSource.Open(i)
}

// A panic in a source's Open is a bad sample carrying the stack: replaced under Skip.
func TestSourcePanicIsABadSample(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(2)
	cfg.Bad.MaxFraction = -1
	ld := newLoader(t, panicSource{src}, cfg)
	d := collect(t, ld, context.Background(), 0, 0)
	st := ld.Stats()
	var pe *PanicError
	if st.Bad.Samples != 1 || len(d.indices) != src.Len() || !errors.As(st.Bad.Recent[0].Err, &pe) || st.Bad.Recent[0].Index != 3 {
		t.Fatalf("%d bad samples (%v), %d delivered; want sample 3 bad with a *PanicError and %d delivered", st.Bad.Samples, st.Bad.Recent, len(d.indices), src.Len())
	}
}

// A bad file is counted and logged once per epoch, however often replacements draw it;
// the draws are counted apart. One bad file among 93 does not end the epoch under the
// default MaxBadFraction, although it is more than 1%.
func TestBadFilesCountedOncePerEpoch(t *testing.T) {
	dir := treetest.New(t, 1, 4)
	files := treetest.Files(t, dir)
	for _, f := range files[:2] {
		if err := os.WriteFile(f, []byte("not an image"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src, err := Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var logged atomic.Int64
	cfg := testConfig(2)
	cfg.Batch.Size, cfg.Bad.MaxFraction = 4, -1
	cfg.Logf = func(string, ...any) { logged.Add(1) }
	ld := newLoader(t, src, cfg)
	for e := range 3 {
		collect(t, ld, context.Background(), e, 0)
	}
	st := ld.Stats()
	if st.Bad.Samples != 6 || logged.Load() != 6 || st.Bad.Draws <= st.Bad.Samples {
		t.Errorf("3 epochs with 2 bad files of 4: %d bad samples, %d log lines, %d draws; want 6, 6 and more draws (replacements draw them again)", st.Bad.Samples, logged.Load(), st.Bad.Draws)
	}

	big := treetest.New(t, 3, 31)
	f := treetest.Files(t, big)[40]
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, data[:len(data)/3], 0o644); err != nil {
		t.Fatal(err)
	}
	if src, err = Dir(big); err != nil {
		t.Fatal(err)
	}
	cfg = testConfig(2)
	cfg.Bad.MaxFraction = 0
	ld = newLoader(t, src, cfg)
	d := collect(t, ld, context.Background(), 0, 0)
	if st := ld.Stats(); st.Bad.Samples != 1 || len(d.indices) != 93 {
		t.Errorf("one truncated file among 93: %d bad samples, %d delivered", st.Bad.Samples, len(d.indices))
	}
}

// regionPanic is a RandomResizedCrop whose Region panics: op code, like Apply.
type regionPanic struct{ *augment.RandomResizedCrop }

func (regionPanic) Region(*augment.Context, int, int) (image.Rectangle, int, int, error) {
	panic("region bug")
}

// A panic in an op's Region, which runs before decoding, ends the epoch like a panic in
// Apply; it is not a bad file.
func TestRegionPanicEndsTheEpoch(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(2)
	cfg.Augment[0] = regionPanic{augment.NewRandomResizedCrop(24, 24)}
	ld := newLoader(t, src, cfg)
	got := epochErr(ld)
	var pe *PanicError
	if !errors.As(got, &pe) || ld.Stats().Bad.Samples != 0 {
		t.Fatalf("epoch ended with %v, %d bad samples; want a *PanicError and none", got, ld.Stats().Bad.Samples)
	}
}

// epochErr runs epoch 0, releasing every batch, and returns the error that ended it.
func epochErr(ld *Loader) error {
	for b, err := range ld.Epoch(context.Background(), 0) {
		if err != nil {
			return err
		}
		b.Release()
	}
	return nil
}
