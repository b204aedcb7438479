package pipeline

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/conveyor-ml/conveyor/augment"
	"github.com/conveyor-ml/conveyor/pinned"
)

// Batch is one batch of packed samples in a pinned host buffer. It is valid until Release;
// after that its memory belongs to a later batch.
type Batch struct {
	Epoch  int // the epoch it belongs to
	Number int // its position in the epoch, from 0
	// Cursor is the epoch position after this batch: EpochFrom(ctx, Epoch, Cursor)
	// resumes with the next batch.
	Cursor int
	Len    int // samples in this batch; BatchSize except perhaps the epoch's last

	// Data holds Len samples, SampleBytes each, in Layout and DType.
	Data   []byte
	Layout augment.Layout
	DType  augment.DType
	// Shape is [Len, 3, Height, Width] for NCHW or [Len, Height, Width, 3] for NHWC.
	Shape [4]int

	Labels  []int32 // Len labels
	Indices []int64 // Len source indices; a replaced bad sample shows its replacement's index

	buf       *pinned.Buffer
	ld        *Loader
	remaining atomic.Int32 // slots not yet written
	done      chan struct{}
	released  atomic.Bool
	bad       atomic.Int32 // failed samples, replacements included

	mu      sync.Mutex
	err     error // the lowest slot's error ends the epoch when this batch's turn comes
	errSlot int
	lowBad  *SampleError // the lowest slot's bad sample, for messages
	badSlot int
}

// setErr records err for slot unless a lower slot already has one, so the error reported
// does not depend on timing. Slot -1 is the batch itself.
func (b *Batch) setErr(slot int, err error) {
	b.mu.Lock()
	if b.err == nil || slot < b.errSlot {
		b.err, b.errSlot = err, slot
	}
	b.mu.Unlock()
}

func (b *Batch) failure() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

func (b *Batch) noteBad(slot int, e *SampleError) {
	b.bad.Add(1)
	b.mu.Lock()
	if b.lowBad == nil || slot < b.badSlot {
		b.lowBad, b.badSlot = e, slot
	}
	b.mu.Unlock()
}

func (b *Batch) lastBad() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lowBad == nil {
		return errors.New("none in this batch")
	}
	return b.lowBad
}

// Release returns the batch's buffer to the loader. It is safe to call on a nil Batch;
// releasing twice panics.
func (b *Batch) Release() {
	if b == nil {
		return
	}
	if b.released.Swap(true) {
		panic(fmt.Sprintf("pipeline: batch %d of epoch %d released twice", b.Number, b.Epoch))
	}
	if b.ld != nil {
		b.ld.outstanding.Add(-1)
	}
	b.Data, b.Labels, b.Indices = nil, nil, nil
	b.buf.Release()
}

// Float32 views Data as float32 values. It panics unless DType is Float32.
func (b *Batch) Float32() []float32 {
	if b.DType != augment.Float32 {
		panic("pipeline: Float32 view of a " + b.DType.String() + " batch")
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b.Data))), len(b.Data)/4)
}

// Uint16 views Data as 16-bit values (float16 or bfloat16 bits). It panics unless DType is
// Float16 or BFloat16.
func (b *Batch) Uint16() []uint16 {
	if b.DType != augment.Float16 && b.DType != augment.BFloat16 {
		panic("pipeline: Uint16 view of a " + b.DType.String() + " batch")
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(b.Data))), len(b.Data)/2)
}
