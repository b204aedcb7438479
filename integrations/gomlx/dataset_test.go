package gomlx_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"github.com/conveyor-ml/conveyor/examples/toy"
	"github.com/conveyor-ml/conveyor/integrations/gomlx"
	"github.com/conveyor-ml/conveyor/internal/leakcheck"
	"github.com/conveyor-ml/conveyor/mixup"
	"github.com/conveyor-ml/conveyor/pack"
	"github.com/conveyor-ml/conveyor/pipeline"
	"github.com/conveyor-ml/conveyor/source"
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/core/tensors/images"
	"github.com/gomlx/gomlx/pkg/ml/train"
)

func TestMain(m *testing.M) {
	leakcheck.Main(m, func() {
		if dataDir != "" {
			os.RemoveAll(dataDir)
		}
	})
}

const (
	classes  = 3
	perClass = 7 // 21 samples: batches of 4 leave a short last batch of 1
	side     = 12
	batch    = 4
)

var dataDir string

// data writes the toy tree once per test binary.
func data(t testing.TB) string {
	t.Helper()
	if dataDir == "" {
		dir, err := os.MkdirTemp("", "conveyor-gomlx-test")
		if err != nil {
			t.Fatal(err)
		}
		if err := toy.WriteImageFolder(dir, classes, perClass, 1); err != nil {
			t.Fatal(err)
		}
		dataDir = dir
	}
	return dataDir
}

func folderSource(t testing.TB) pipeline.Source {
	t.Helper()
	src, err := source.Dir(data(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func config(mod func(*pipeline.Config)) *pipeline.Config {
	cfg := &pipeline.Config{Batch: pipeline.BatchConfig{Size: batch}, Order: pipeline.OrderConfig{Seed: 7}, Tuning: pipeline.TuningConfig{NoAutotune: true, Workers: 2}, Pack: pack.Options{DType: pack.Float32, Normalize: true}}
	if err := pipeline.ApplyRecipe(cfg, "train", side); err != nil {
		panic(err)
	}
	if mod != nil {
		mod(cfg)
	}
	return cfg
}

func loader(t testing.TB, src pipeline.Source, cfg *pipeline.Config) *pipeline.Loader {
	t.Helper()
	ld, err := gomlx.NewLoader(src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ld.Close() })
	return ld
}

// want is what a batch holds, read from the loader directly.
type want struct {
	shape   [4]int
	data    []byte
	labels  []int32
	targets []float32
	cursor  int
}

// reference reads epoch e of a second loader with the same configuration.
func reference(t *testing.T, src pipeline.Source, cfg *pipeline.Config, e int) []want {
	t.Helper()
	ld := loader(t, src, cfg)
	var out []want
	for b, err := range ld.Epoch(context.Background(), e) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, want{b.Shape, bytes.Clone(hostBytes(b)), append([]int32(nil), b.Labels...),
			append([]float32(nil), b.Targets...), b.Cursor})
		b.Release()
	}
	return out
}

func hostBytes(b *pipeline.Batch) []byte {
	f := b.Float32()
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f))), 4*len(f))
}

func newBackend(t testing.TB) backends.Backend {
	t.Helper()
	// ops_sequential: simplego v0.26's parallel op scheduler reads a use count another
	// worker writes under a lock (exec.go, executeNode), which the race detector reports.
	be, err := simplego.New("ops_sequential")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(be.Finalize)
	return be
}

func tensorBytes(t *testing.T, x *tensors.Tensor) []byte {
	t.Helper()
	var out []byte
	if err := x.ConstBytes(func(b []byte) { out = bytes.Clone(b) }); err != nil {
		t.Fatal(err)
	}
	return out
}

// check compares a yield with the loader's batch.
func check(t *testing.T, i int, inputs, labels []*tensors.Tensor, w want) {
	t.Helper()
	if len(inputs) != 1 || len(labels) != 1 {
		t.Fatalf("batch %d: %d inputs and %d labels, want 1 and 1", i, len(inputs), len(labels))
	}
	x, y := inputs[0], labels[0]
	if got, ws := x.Shape(), shapes.Make(dtypes.Float32, w.shape[:]...); !got.Equal(ws) {
		t.Fatalf("batch %d: images %s, want %s", i, got, ws)
	}
	if w.shape[3] != 3 {
		t.Fatalf("batch %d: shape %v is not NHWC", i, w.shape)
	}
	if !bytes.Equal(tensorBytes(t, x), w.data) {
		t.Fatalf("batch %d: image values differ from the loader's batch", i)
	}
	if w.targets != nil {
		n := len(w.labels)
		if got, ws := y.Shape(), shapes.Make(dtypes.Float32, n, classes); !got.Equal(ws) {
			t.Fatalf("batch %d: targets %s, want %s", i, got, ws)
		}
		if got := tensors.MustCopyFlatData[float32](y); !equalF32(got, w.targets) {
			t.Fatalf("batch %d: targets %v, want %v", i, got, w.targets)
		}
		return
	}
	if got, ws := y.Shape(), shapes.Make(dtypes.Int32, len(w.labels), 1); !got.Equal(ws) {
		t.Fatalf("batch %d: labels %s, want %s", i, got, ws)
	}
	if got := tensors.MustCopyFlatData[int32](y); !equalI32(got, w.labels) {
		t.Fatalf("batch %d: labels %v, want %v", i, got, w.labels)
	}
}

func equalF32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

func equalI32(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestEpochs checks that the yields are the loader's batches, in NHWC float32 with int32
// labels, that io.EOF ends each epoch and sticks until Reset, and that Reset starts the
// next epoch (reshuffled, with new augmentations), on both tensor paths.
func TestEpochs(t *testing.T) {
	src := folderSource(t)
	cfg := config(nil)
	ref := [][]want{reference(t, src, cfg, 0), reference(t, src, cfg, 1)}
	if len(ref[0]) != 6 || bytes.Equal(ref[0][0].data, ref[1][0].data) {
		t.Fatalf("reference: %d batches (want 6), epochs 0 and 1 equal: the test would prove nothing", len(ref[0]))
	}
	for _, tc := range []struct {
		name    string
		backend bool
	}{{"local", false}, {"backend", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ld := loader(t, src, cfg)
			var o gomlx.Options
			if tc.backend {
				o.Backend = newBackend(t)
			}
			ds, err := gomlx.New(context.Background(), ld, &o)
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			ds.Reset() // before the first Yield: no effect, as GoMLX's Eval calls it
			for e := range 2 {
				for i, w := range ref[e] {
					_, in, lab, err := ds.Yield()
					if err != nil {
						t.Fatalf("epoch %d batch %d: %v", e, i, err)
					}
					check(t, i, in, lab, w)
					if got := ld.Stats().Memory.Outstanding; got != 0 {
						t.Fatalf("epoch %d batch %d: the loader has %d batches out after Yield, want 0 (released)", e, i, got)
					}
					if ep, cur := ds.Position(); ep != e || cur != w.cursor {
						t.Fatalf("epoch %d batch %d: Position %d, %d, want %d, %d", e, i, ep, cur, e, w.cursor)
					}
					in[0].MustFinalizeAll()
					lab[0].MustFinalizeAll()
				}
				for range 2 {
					if _, _, _, err := ds.Yield(); err != io.EOF {
						t.Fatalf("epoch %d: after the last batch Yield returned %v, want io.EOF", e, err)
					}
				}
				if ep, cur := ds.Position(); ep != e+1 || cur != 0 {
					t.Fatalf("after epoch %d: Position %d, %d, want %d, 0", e, ep, cur, e+1)
				}
				ds.Reset()
			}
			st := ds.Stats()
			wantBytes := int64(2 * (classes*perClass*side*side*3*4 + classes*perClass*4))
			if st.Batches != 12 || st.Samples != 2*classes*perClass || st.CopiedBytes != wantBytes {
				t.Fatalf("Stats %+v: want 12 batches, %d samples, %d bytes copied (each byte once)", st, 2*classes*perClass, wantBytes)
			}
		})
	}
}

// TestResetMidEpoch checks that Reset during an epoch abandons it and starts the next.
func TestResetMidEpoch(t *testing.T) {
	src := folderSource(t)
	cfg := config(nil)
	ref1 := reference(t, src, cfg, 1)
	ds, err := gomlx.New(context.Background(), loader(t, src, cfg), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if _, _, _, err := ds.Yield(); err != nil {
		t.Fatal(err)
	}
	ds.Reset()
	_, in, lab, err := ds.Yield()
	if err != nil {
		t.Fatal(err)
	}
	check(t, 0, in, lab, ref1[0])
}

// TestResume checks that a Dataset started at a Position continues with the batches the
// uninterrupted run yielded.
func TestResume(t *testing.T) {
	src := folderSource(t)
	cfg := config(nil)
	ref := reference(t, src, cfg, 2)
	ds, err := gomlx.New(context.Background(), loader(t, src, cfg), &gomlx.Options{Epoch: 2})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, _, _, err := ds.Yield(); err != nil {
			t.Fatal(err)
		}
	}
	ep, cur := ds.Position()
	ds.Close()
	if ep != 2 || cur != 2*batch {
		t.Fatalf("Position after 2 batches: %d, %d, want 2, %d", ep, cur, 2*batch)
	}
	resumed, err := gomlx.New(context.Background(), loader(t, src, cfg), &gomlx.Options{Epoch: ep, Cursor: cur, Backend: newBackend(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close()
	for i, w := range ref[2:] {
		_, in, lab, err := resumed.Yield()
		if err != nil {
			t.Fatalf("resumed batch %d: %v", i, err)
		}
		check(t, i+2, in, lab, w)
	}
	if _, _, _, err := resumed.Yield(); err != io.EOF {
		t.Fatalf("resumed epoch: got %v after its last batch, want io.EOF", err)
	}
}

// TestSoftTargets checks that a mixing loader yields its soft targets, [N, classes]
// float32, and that class indices are refused with it.
func TestSoftTargets(t *testing.T) {
	src := folderSource(t)
	cfg := config(func(c *pipeline.Config) { c.Mix = mixup.Options{MixUp: 0.8, Smoothing: 0.1} })
	ref := reference(t, src, cfg, 0)
	if ref[0].targets == nil {
		t.Fatal("the mixing loader's batches carry no Targets")
	}
	ds, err := gomlx.New(context.Background(), loader(t, src, cfg), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	for i, w := range ref {
		_, in, lab, err := ds.Yield()
		if err != nil {
			t.Fatal(err)
		}
		check(t, i, in, lab, w)
	}
	if _, err := gomlx.New(context.Background(), loader(t, src, cfg), &gomlx.Options{Labels: gomlx.LabelsIndices}); err == nil {
		t.Fatal("New accepted class indices for a mixing loader")
	}
}

// TestOneHot checks LabelsSoft without mixing: one-hot rows of the labels.
func TestOneHot(t *testing.T) {
	src := folderSource(t)
	cfg := config(nil)
	if _, err := gomlx.New(context.Background(), loader(t, src, cfg), &gomlx.Options{Labels: gomlx.LabelsSoft}); err == nil {
		t.Fatal("New accepted LabelsSoft without NumClasses for a loader that does not mix")
	}
	ref := reference(t, src, cfg, 0)
	ds, err := gomlx.New(context.Background(), loader(t, src, cfg), &gomlx.Options{Labels: gomlx.LabelsSoft, NumClasses: classes})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	for i, w := range ref {
		w.targets = make([]float32, len(w.labels)*classes)
		for j, l := range w.labels {
			w.targets[j*classes+int(l)] = 1
		}
		_, in, lab, err := ds.Yield()
		if err != nil {
			t.Fatal(err)
		}
		check(t, i, in, lab, w)
	}
}

// TestErrors checks that the loader's errors and bad-sample policy pass through: under
// Fail the epoch ends with the *pipeline.SampleError naming the file, returned until
// Reset; under Skip the batches stay full; a closed loader's ErrClosed.
func TestErrors(t *testing.T) {
	dir := t.TempDir()
	if err := toy.WriteImageFolder(dir, 2, 4, 3); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "class1", "bad.jpg")
	if err := os.WriteFile(bad, []byte("not a JPEG"), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := source.Dir(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("fail", func(t *testing.T) {
		cfg := config(func(c *pipeline.Config) { c.Bad.Fail = true; c.Batch.Size = 9 })
		ds, err := gomlx.New(context.Background(), loader(t, src, cfg), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ds.Close()
		for range 2 {
			_, _, _, err = ds.Yield()
			var se *pipeline.SampleError
			if !errors.As(err, &se) || se.Path != filepath.Join("class1", "bad.jpg") && se.Path != bad {
				t.Fatalf("Yield: %v, want the *pipeline.SampleError of %s", err, bad)
			}
		}
	})
	t.Run("skip", func(t *testing.T) {
		cfg := config(func(c *pipeline.Config) { c.Batch.Size = 9; c.Bad.MaxFraction = -1 })
		ld := loader(t, src, cfg)
		ds, err := gomlx.New(context.Background(), ld, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ds.Close()
		_, in, _, err := ds.Yield()
		if err != nil {
			t.Fatal(err)
		}
		if n := in[0].Shape().Dimensions[0]; n != 9 {
			t.Fatalf("batch of %d, want 9 (the bad sample replaced)", n)
		}
		if ld.Stats().Bad.Samples != 1 {
			t.Fatalf("BadSamples %d, want 1", ld.Stats().Bad.Samples)
		}
	})
	t.Run("closed", func(t *testing.T) {
		ld := loader(t, src, config(nil))
		ds, err := gomlx.New(context.Background(), ld, nil)
		if err != nil {
			t.Fatal(err)
		}
		ld.Close()
		if _, _, _, err := ds.Yield(); !errors.Is(err, pipeline.ErrClosed) {
			t.Fatalf("Yield on a closed loader: %v, want pipeline.ErrClosed", err)
		}
	})
	t.Run("closed mid-epoch", func(t *testing.T) {
		// The Dataset holds the loader's epoch suspended between Yields: Close must not wait
		// for it, and the next Yield says the loader is closed.
		ld := loader(t, src, config(nil))
		ds, err := gomlx.New(context.Background(), ld, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ds.Close()
		if _, _, _, err := ds.Yield(); err != nil {
			t.Fatal(err)
		}
		closed := make(chan error, 1)
		go func() { closed <- ld.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Loader.Close did not return while the Dataset was between Yields")
		}
		if _, _, _, err := ds.Yield(); !errors.Is(err, pipeline.ErrClosed) {
			t.Fatalf("Yield after the loader closed: %v, want pipeline.ErrClosed", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		ds, err := gomlx.New(ctx, loader(t, src, config(nil)), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ds.Close()
		if _, _, _, err := ds.Yield(); err != nil {
			t.Fatal(err)
		}
		cancel()
		if _, _, _, err := ds.Yield(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Yield after cancel: %v, want context.Canceled", err)
		}
	})
}

// TestOptions checks New's validation.
func TestOptions(t *testing.T) {
	ld := loader(t, folderSource(t), config(nil))
	for _, o := range []gomlx.Options{{Labels: 7}, {Epoch: -1}, {Cursor: -1}, {NumClasses: -1}} {
		if _, err := gomlx.New(context.Background(), ld, &o); err == nil {
			t.Errorf("New accepted %+v", o)
		}
	}
	if _, err := gomlx.New(context.Background(), nil, nil); err == nil {
		t.Error("New accepted a nil Loader")
	}
}

// TestTrainer runs GoMLX's training loop on the Dataset for two epochs: the trainer takes
// the tensors, finalizes them, and calls Reset between epochs.
func TestTrainer(t *testing.T) {
	be := newBackend(t)
	ld := loader(t, folderSource(t), config(func(c *pipeline.Config) { c.Batch.DropLast = true }))
	ds, err := gomlx.New(context.Background(), ld, &gomlx.Options{Backend: be})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	loss := trainLinear(t, be, ds, 2)
	if math.IsNaN(loss) {
		t.Fatal("loss is NaN")
	}
	if st := ds.Stats(); st.Batches != 10 {
		t.Fatalf("%d batches trained on, want 10 (2 epochs of 5)", st.Batches)
	}
	if ep, _ := ds.Position(); ep != 2 {
		t.Fatalf("after RunEpochs(2) the Dataset is at epoch %d, want 2", ep)
	}
	var _ train.Dataset = ds
	var _ train.DatasetCustomOwnership = ds
}

// TestLayoutsAndDTypes checks each packed dtype's GoMLX dtype and bytes, and that an NCHW
// loader (made with pipeline.New) gives [N, 3, H, W] and says ChannelsFirst.
func TestLayoutsAndDTypes(t *testing.T) {
	src := folderSource(t)
	for _, tc := range []struct {
		dt     pack.DType
		layout pack.Layout
		want   dtypes.DType
	}{
		{pack.Uint8, pack.NHWC, dtypes.Uint8},
		{pack.Float16, pack.NHWC, dtypes.Float16},
		{pack.BFloat16, pack.NHWC, dtypes.BFloat16},
		{pack.Float32, pack.NCHW, dtypes.Float32},
	} {
		t.Run(tc.dt.String()+"-"+tc.layout.String(), func(t *testing.T) {
			cfg := config(func(c *pipeline.Config) {
				c.Pack = pack.Options{DType: tc.dt, Layout: tc.layout, Normalize: tc.dt != pack.Uint8}
				c.Pack.Width, c.Pack.Height = side, side
			})
			ld, err := pipeline.New(src, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer ld.Close()
			var ref []byte
			var shape [4]int
			for b, err := range ld.Epoch(context.Background(), 0) {
				if err != nil {
					t.Fatal(err)
				}
				ref, shape = bytes.Clone(b.Data), b.Shape
				b.Release()
				break
			}
			ds, err := gomlx.New(context.Background(), ld, &gomlx.Options{Backend: newBackend(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			_, in, _, err := ds.Yield()
			if err != nil {
				t.Fatal(err)
			}
			if got, ws := in[0].Shape(), shapes.Make(tc.want, shape[:]...); !got.Equal(ws) {
				t.Fatalf("images %s, want %s", got, ws)
			}
			if !bytes.Equal(tensorBytes(t, in[0]), ref) {
				t.Fatal("image bytes differ from the loader's batch")
			}
			wantAxis := images.ChannelsLast
			if tc.layout == pack.NCHW {
				wantAxis = images.ChannelsFirst
				if shape[1] != 3 {
					t.Fatalf("NCHW shape %v", shape)
				}
			}
			if ds.ChannelsAxis() != wantAxis {
				t.Fatalf("ChannelsAxis %v, want %v", ds.ChannelsAxis(), wantAxis)
			}
		})
	}
}

// TestMicroBatches checks that each micro-batch is a Yield and that Position resumes
// inside a batch.
func TestMicroBatches(t *testing.T) {
	src := folderSource(t)
	cfg := config(func(c *pipeline.Config) { c.Batch.MicroBatches = 2 })
	ref := reference(t, src, cfg, 0)
	ds, err := gomlx.New(context.Background(), loader(t, src, cfg), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, in, lab, err := ds.Yield()
	if err != nil {
		t.Fatal(err)
	}
	check(t, 0, in, lab, ref[0])
	ep, cur := ds.Position()
	ds.Close()
	if in[0].Shape().Dimensions[0] != batch/2 || cur != batch/2 {
		t.Fatalf("first micro-batch of %d samples, cursor %d; want %d and %d", in[0].Shape().Dimensions[0], cur, batch/2, batch/2)
	}
	resumed, err := gomlx.New(context.Background(), loader(t, src, cfg), &gomlx.Options{Epoch: ep, Cursor: cur})
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close()
	for i, w := range ref[1:] {
		_, in, lab, err := resumed.Yield()
		if err != nil {
			t.Fatal(err)
		}
		check(t, i+1, in, lab, w)
	}
}

// stuckFiles is a FileSource whose Opens wait until release is closed.
type stuckFiles struct {
	pipeline.FileSource
	release chan struct{}
}

func (s stuckFiles) Open(i int) (fs.File, error) {
	<-s.release
	return s.FileSource.Open(i)
}

// TestCloseEndsWaitingYield: Close from another goroutine ends a Yield waiting for the
// loader (its files stuck), with io.EOF, and the Dataset yields io.EOF until Reset.
func TestCloseEndsWaitingYield(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	src := stuckFiles{folderSource(t).(pipeline.FileSource), release}
	ld := loader(t, src, config(nil))
	d, err := gomlx.New(context.Background(), ld, &gomlx.Options{Backend: newBackend(t)})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, _, _, err := d.Yield()
		got <- err
	}()
	time.Sleep(100 * time.Millisecond) // Yield is waiting on the stuck reads
	closed := make(chan struct{})
	go func() {
		d.Close()
		close(closed)
	}()
	select {
	case err := <-got:
		if err != io.EOF {
			t.Fatalf("Yield ended by Close: %v, want io.EOF", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end a waiting Yield within 5 s")
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return within 5 s")
	}
	if _, _, _, err := d.Yield(); err != io.EOF {
		t.Fatalf("Yield after Close: %v, want io.EOF", err)
	}
}
