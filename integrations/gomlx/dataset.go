package gomlx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"reflect"
	"sync"
	"time"
	"unsafe"

	"github.com/conveyor-ml/conveyor/gpu"
	"github.com/conveyor-ml/conveyor/pack"
	"github.com/conveyor-ml/conveyor/pipeline"
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/core/tensors/images"
)

// Labels says which label tensor a Dataset yields.
type Labels int

const (
	// LabelsAuto yields soft targets when the loader's batches carry them (Config.Mix
	// mixes or smooths, or the source is multi-label) and class indices otherwise.
	LabelsAuto Labels = iota
	// LabelsIndices yields class indices, int32 of shape [N, 1]. Refused when the loader
	// mixes or smooths: mixed pixels need mixed targets.
	LabelsIndices
	// LabelsSoft yields float32 targets of shape [N, NumClasses]: the batch's Targets, or
	// one-hot rows of its labels when it has none.
	LabelsSoft
)

func (l Labels) String() string {
	switch l {
	case LabelsAuto:
		return "auto"
	case LabelsIndices:
		return "indices"
	case LabelsSoft:
		return "soft"
	}
	return fmt.Sprintf("Labels(%d)", int(l))
}

// Options configures a Dataset. A nil pointer means the defaults.
type Options struct {
	// Name is the dataset's name in GoMLX's metrics and plots; default "conveyor".
	Name string
	// Backend is the backend the trainer runs on. With it each batch is copied once,
	// straight into a buffer of that backend; without it into a local tensor, which GoMLX
	// copies again into the backend at the step. Default nil.
	Backend backends.Backend
	// Labels is the label tensor yielded; default LabelsAuto.
	Labels Labels
	// NumClasses is the width of the one-hot rows LabelsSoft makes for batches without
	// Targets: required with LabelsSoft unless the loader mixes or smooths (Config.Mix),
	// whose batches all carry Targets; len(src.Classes()) for an ImageFolder source.
	// Default 0.
	NumClasses int
	// Epoch is the loader epoch the first Yield starts (the loader reshuffles and redraws
	// augmentations per epoch); default 0.
	Epoch int
	// Cursor resumes Epoch mid-way: the cursor Position returned when the checkpoint was
	// taken (pipeline.Loader.EpochFrom says which values are valid); default 0.
	Cursor int
}

// Dataset is a train.Dataset over a conveyor Loader. Yield delivers the current epoch's
// batches, then io.EOF; Reset ends the epoch and the next Yield starts the following one.
// Its methods are safe for concurrent use, though GoMLX calls them from one goroutine;
// Close, from another goroutine, ends a Yield that is waiting for the loader.
type Dataset struct {
	ld      *pipeline.Loader
	ctx     context.Context
	o       Options
	soft    bool
	classes int
	dtype   dtypes.DType

	mu     sync.Mutex
	epoch  int // the epoch of the next batch
	cursor int // its position in the epoch
	next   func() (*pipeline.Batch, error, bool)
	stop   func()
	done   error // io.EOF or the error that ended the epoch; returned until Reset
	onehot []float32
	stats  Stats

	cmu     sync.Mutex         // guards the two below; never held while waiting
	cancel  context.CancelFunc // cancels the running epoch's context
	closing bool               // Close was called (until Reset)
}

// Stats counts what a Dataset did.
type Stats struct {
	Batches int64 // batches yielded
	Samples int64 // samples yielded
	// CopiedBytes is the bytes copied from conveyor's batches into GoMLX tensors (images and
	// labels): each byte once.
	CopiedBytes int64
	// Wait is the time Yield spent waiting for the loader's next batch, and Copy the time
	// it spent copying batches into tensors.
	Wait, Copy time.Duration
}

// NewLoader is pipeline.New with Pack.Layout set to NHWC, channels last: the layout
// GoMLX's layers.Convolution and graph.MaxPool (and its image helpers) expect unless told
// images.ChannelsFirst. cfg is not modified.
func NewLoader(src pipeline.Source, cfg *pipeline.Config) (*pipeline.Loader, error) {
	var c pipeline.Config
	if cfg != nil {
		c = *cfg
	}
	c.Pack.Layout = pack.NHWC
	return pipeline.New(src, &c)
}

// New returns a Dataset over ld, whose epochs run under ctx (cancelling it ends the epoch
// with the loader's error). The caller keeps ld and closes it after the Dataset; Close
// stops an epoch the Dataset has begun.
func New(ctx context.Context, ld *pipeline.Loader, opts *Options) (*Dataset, error) {
	if ld == nil {
		return nil, errors.New("gomlx: nil Loader")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Name == "" {
		o.Name = "conveyor"
	}
	cfg := ld.Config()
	switch {
	case o.Labels < LabelsAuto || o.Labels > LabelsSoft:
		return nil, fmt.Errorf("gomlx: Options.Labels: invalid %v", o.Labels)
	case o.Epoch < 0:
		return nil, fmt.Errorf("gomlx: Options.Epoch %d < 0", o.Epoch)
	case o.Cursor < 0:
		return nil, fmt.Errorf("gomlx: Options.Cursor %d < 0", o.Cursor)
	case o.NumClasses < 0:
		return nil, fmt.Errorf("gomlx: Options.NumClasses %d < 0", o.NumClasses)
	case o.Labels == LabelsSoft && !cfg.Mix.Dense() && o.NumClasses == 0:
		return nil, errors.New("gomlx: Options.Labels soft needs Options.NumClasses, the width of the one-hot rows, for a loader that does not mix or smooth")
	case o.Labels == LabelsIndices && cfg.Mix.Dense():
		return nil, fmt.Errorf("gomlx: Options.Labels indices with a loader that mixes or smooths (%v): mixed images need soft targets; use LabelsSoft or LabelsAuto", cfg.Mix)
	case cfg.Device.Cast && ld.Stats().Device.Kind == gpu.CUDA:
		return nil, errors.New("gomlx: the loader converts batches on the GPU (Device.Cast), where GoMLX cannot take them: GoMLX v0.26 makes tensors from host memory only; use Device.Cast false or the cpu device")
	}
	dt, err := dtypeOf(cfg.Pack.DType)
	if err != nil {
		return nil, err
	}
	d := &Dataset{ld: ld, ctx: ctx, o: o, dtype: dt, epoch: o.Epoch, cursor: o.Cursor}
	// A multi-label source's batches carry Targets whatever Mix says; a batch tells.
	d.soft = o.Labels == LabelsSoft || (o.Labels == LabelsAuto && cfg.Mix.Dense())
	return d, nil
}

func dtypeOf(d pack.DType) (dtypes.DType, error) {
	switch d {
	case pack.Float32:
		return dtypes.Float32, nil
	case pack.Float16:
		return dtypes.Float16, nil
	case pack.BFloat16:
		return dtypes.BFloat16, nil
	case pack.Uint8:
		return dtypes.Uint8, nil
	}
	return dtypes.InvalidDType, fmt.Errorf("gomlx: pack dtype %v has no GoMLX dtype", d)
}

// Name implements train.Dataset.
func (d *Dataset) Name() string { return d.o.Name }

// IsOwnershipTransferred implements train.DatasetCustomOwnership: the trainer owns the
// yielded tensors and finalizes them after the step, returning their buffers to the
// backend. They share no memory with the loader.
func (d *Dataset) IsOwnershipTransferred() bool { return true }

// ChannelsAxis is the images' layout as GoMLX's layers are told it.
func (d *Dataset) ChannelsAxis() images.ChannelsAxisConfig {
	if d.ld.Config().Pack.Layout == pack.NCHW {
		return images.ChannelsFirst
	}
	return images.ChannelsLast
}

// Position is where the next Yield continues: the loader epoch and the cursor in it
// (samples of the epoch already yielded, as pipeline.Batch.Cursor counts them). Saved with
// a checkpoint and given back as Options.Epoch and Options.Cursor, it resumes with exactly
// the batches an uninterrupted run would have yielded.
func (d *Dataset) Position() (epoch, cursor int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.epoch, d.cursor
}

// Stats returns the Dataset's counters.
func (d *Dataset) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// Reset implements train.Dataset: it ends the current epoch, if a Yield has begun it, and
// the next Yield starts the following epoch from its first batch. A Reset before the
// epoch's first Yield does nothing, so GoMLX's Reset before an evaluation does not skip an
// epoch.
func (d *Dataset) Reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cmu.Lock()
	d.closing = false
	d.cmu.Unlock()
	if d.next == nil && d.done == nil {
		return
	}
	d.stopEpoch()
	if d.done != io.EOF { // io.EOF already moved to the next epoch
		d.epoch, d.cursor = d.epoch+1, 0
	}
	d.done = nil
}

// Close stops the epoch in progress, waiting for the loader's goroutines; the Dataset
// yields io.EOF until Reset. A Yield waiting for the loader in another goroutine returns
// io.EOF. It does not close the loader.
func (d *Dataset) Close() error {
	d.cmu.Lock()
	d.closing = true
	if d.cancel != nil {
		d.cancel()
	}
	d.cmu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.next != nil {
		d.stopEpoch()
		d.done = io.EOF
		d.epoch, d.cursor = d.epoch+1, 0
	}
	return nil
}

func (d *Dataset) stopEpoch() {
	if d.stop != nil {
		d.stop() // breaks out of the loader's iterator: its goroutines exit
	}
	d.next, d.stop = nil, nil
	d.cmu.Lock()
	if d.cancel != nil {
		d.cancel()
		d.cancel = nil
	}
	d.cmu.Unlock()
}

// Yield implements train.Dataset: the epoch's next batch as inputs [images] and labels
// [class indices or soft targets], io.EOF after the epoch's last batch, or the loader's
// error, unwrapped. After io.EOF or an error it returns the same until Reset.
func (d *Dataset) Yield() (spec any, inputs, labels []*tensors.Tensor, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.done != nil {
		return nil, nil, nil, d.done
	}
	if d.next == nil {
		d.cmu.Lock()
		if d.closing {
			d.cmu.Unlock()
			d.done = io.EOF
			return nil, nil, nil, d.done
		}
		ctx, cancel := context.WithCancel(d.ctx)
		d.cancel = cancel
		d.cmu.Unlock()
		d.next, d.stop = iter.Pull2(d.ld.EpochFrom(ctx, d.epoch, d.cursor))
	}
	t0 := time.Now()
	b, err, ok := d.next()
	t1 := time.Now()
	d.stats.Wait += t1.Sub(t0)
	if !ok || err != nil {
		d.stopEpoch()
		d.cmu.Lock()
		closing := d.closing
		d.cmu.Unlock()
		if !ok || closing {
			d.done = io.EOF
			d.epoch, d.cursor = d.epoch+1, 0
		} else {
			d.done = err
		}
		return nil, nil, nil, d.done
	}
	x, y, n, err := d.convert(b)
	cursor, samples := b.Cursor, b.Len
	b.Release() // the tensors hold copies: the pinned buffer can take the next batch now
	d.stats.Copy += time.Since(t1)
	if err != nil {
		d.stopEpoch()
		d.done = err
		return nil, nil, nil, err
	}
	d.cursor = cursor
	d.stats.Batches++
	d.stats.Samples += int64(samples)
	d.stats.CopiedBytes += n
	return nil, []*tensors.Tensor{x}, []*tensors.Tensor{y}, nil
}

// convert copies the batch's images and labels into tensors and returns the bytes copied.
func (d *Dataset) convert(b *pipeline.Batch) (x, y *tensors.Tensor, n int64, err error) {
	src := hostBytes(b)
	x, err = d.tensor(shapes.Make(d.dtype, b.Shape[:]...), src)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("gomlx: %s of epoch %d: images: %w", batchName(b), b.Epoch, err)
	}
	var lab []byte
	var ls shapes.Shape
	switch {
	case d.soft || b.Targets != nil && d.o.Labels == LabelsAuto:
		t := b.Targets
		c := b.NumClasses
		if t == nil {
			c = d.o.NumClasses
			t = d.oneHot(b.Labels, c)
		}
		lab, ls = asBytes(t), shapes.Make(dtypes.Float32, b.Len, c)
	default:
		lab, ls = asBytes(b.Labels), shapes.Make(dtypes.Int32, b.Len, 1)
	}
	y, err = d.tensor(ls, lab)
	if err != nil {
		x.MustFinalizeAll()
		return nil, nil, 0, fmt.Errorf("gomlx: %s of epoch %d: labels: %w", batchName(b), b.Epoch, err)
	}
	return x, y, int64(len(src) + len(lab)), nil
}

func batchName(b *pipeline.Batch) string {
	if b.Micros > 1 {
		return fmt.Sprintf("batch %d (micro-batch %d of %d)", b.Number, b.Micro, b.Micros)
	}
	return fmt.Sprintf("batch %d", b.Number)
}

// tensor makes a tensor of shape s holding a copy of data.
func (d *Dataset) tensor(s shapes.Shape, data []byte) (*tensors.Tensor, error) {
	if int(s.Memory()) != len(data) {
		return nil, fmt.Errorf("%d bytes for a %s tensor of %d", len(data), s, s.Memory())
	}
	be := d.o.Backend
	if be == nil {
		t := tensors.FromShape(s)
		err := t.MutableBytes(func(dst []byte) { copy(dst, data) })
		return t, err
	}
	var buf backends.Buffer
	if be.HasSharedBuffers() {
		// The backend's own memory (pooled by shape on simplego): one copy into it.
		b, flat, err := be.NewSharedBuffer(0, s)
		if err != nil {
			return nil, err
		}
		copy(flatBytes(flat, int(s.Memory())), data)
		buf = b
	} else {
		// An accelerator: the transfer is the copy.
		var err error
		buf, err = be.BufferFromFlatData(0, flatOf(s.DType, data), s)
		if err != nil {
			return nil, err
		}
	}
	t, err := tensors.FromBuffer(be, buf)
	if err != nil {
		_ = be.BufferFinalize(buf)
		return nil, err
	}
	return t, nil
}

// oneHot returns one-hot rows of labels, in a buffer reused by the next batch.
func (d *Dataset) oneHot(labels []int32, c int) []float32 {
	n := len(labels) * c
	if cap(d.onehot) < n {
		d.onehot = make([]float32, n)
	}
	t := d.onehot[:n]
	clear(t)
	for i, l := range labels {
		if l >= 0 && int(l) < c {
			t[i*c+int(l)] = 1
		}
	}
	return t
}

// hostBytes is the batch's packed images in host memory.
func hostBytes(b *pipeline.Batch) []byte {
	switch b.DType {
	case pack.Float32:
		return asBytes(b.Float32())
	case pack.Float16, pack.BFloat16:
		return asBytes(b.Uint16())
	}
	return b.Data
}

// flatBytes views a backend's flat slice (a []T of the tensor's dtype) as its n bytes.
func flatBytes(flat any, n int) []byte {
	return unsafe.Slice((*byte)(reflect.ValueOf(flat).UnsafePointer()), n)
}

// flatOf views data as a slice of dt's Go type, as Backend.BufferFromFlatData takes it.
func flatOf(dt dtypes.DType, data []byte) any {
	t := dt.GoType()
	return reflect.SliceAt(t, unsafe.Pointer(unsafe.SliceData(data)), len(data)/int(t.Size())).Interface()
}

func asBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(s[0])))
}
