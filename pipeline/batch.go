package pipeline

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/conveyor-ml/conveyor/gpu"
	"github.com/conveyor-ml/conveyor/mixup"
	"github.com/conveyor-ml/conveyor/pack"
	"github.com/conveyor-ml/conveyor/pinned"
)

// Batch is one batch of packed samples in a pinned host buffer and, when the loader
// delivers to a GPU, in a device buffer. It is valid until Release; after that its memory
// belongs to a later batch.
//
// On a GPU the batch arrives with its copy started, not necessarily finished: before
// reading DevicePtr's memory, call Wait, or better WaitOn the stream of the training step,
// which orders the step after the copy without blocking the CPU.
//
// With Config.Batch.MicroBatches K, a Batch is one micro-batch: the Micro-th of the Micros
// consecutive parts of whole batch Number. Its fields describe the micro-batch (Len,
// Data, Labels, Indices, Shape, DevicePtr), except Number and BatchLen, which are the
// whole batch's. Concatenated in order, a batch's micro-batches are exactly the batch a
// loader without MicroBatches delivers. A step accumulating gradients weights each
// micro-batch's mean loss by Len/BatchLen, which also holds for a short last batch.
type Batch struct {
	Epoch int // the epoch it belongs to
	// Number is the batch's position in the epoch, from 0; a batch's micro-batches share
	// it.
	Number int
	// Micro is this micro-batch's position in its batch, from 0, and Micros how many
	// micro-batches make up the batch: Config.Batch.MicroBatches, fewer for a short last batch
	// (ceil(BatchLen/(BatchSize/MicroBatches))). Without MicroBatches, 0 and 1.
	Micro, Micros int
	// Cursor is the epoch position after this batch (micro-batch):
	// EpochFrom(ctx, Epoch, Cursor) resumes with the next one, within the same batch if
	// this is not its last micro-batch. With Config.Order.Mode SampleOrder it counts this
	// rank's samples; with ShardOrder it is GlobalCursor, the same on every rank, and a
	// loader at another World (dividing Partitions) resumes from it with the global
	// batches an uninterrupted run would have delivered.
	Cursor int
	// GlobalCursor is the position in the epoch's global order (all ranks together)
	// after this batch: World × this rank's position, since every rank takes the same
	// share of each global batch. A mid-batch micro-batch cursor resumed at another World
	// resumes at the same fraction of the batch, whose micro-batches then hold other
	// samples of it.
	GlobalCursor int
	Len          int // samples in this batch (micro-batch); BatchSize/MicroBatches except perhaps in the epoch's last batch
	// BatchLen is the number of samples in the whole batch: BatchSize except perhaps the
	// epoch's last; Len without MicroBatches.
	BatchLen int

	// Data is the batch in host memory: Len samples in Layout and DType, or, with
	// Config.Device.Cast, the uint8 NHWC pixels the device converts from.
	Data []byte
	// Layout, DType and Shape describe the batch as delivered (in device memory with
	// Device.Cast). Shape is [Len, 3, Height, Width] for NCHW or [Len, Height, Width, 3]
	// for NHWC.
	Layout pack.Layout
	DType  pack.DType
	Shape  [4]int

	// Labels are the samples' class labels, Len of them. For a multi-label source each
	// is the sample's first label, or -1 when it has none; Targets holds them all.
	Labels  []int32
	Indices []int64 // Len source indices; a replaced bad sample shows its replacement's index

	// Targets are dense (soft) targets, Len rows of NumClasses float32 values, row i for
	// sample i (Target(i) slices it), set when Config.Mix mixes or smooths or the source
	// is multi-label (MultiLabelSource), and nil otherwise. A row is one-hot, or
	// multi-hot, with label smoothing ε giving ε/NumClasses off and 1-ε+ε/NumClasses on,
	// and mixed with its partner's as Mix says. It is Go memory of the loader's, reused
	// for a later batch after Release (one buffer per batch buffer, BatchSize/MicroBatches ×
	// NumClasses × 4 bytes each, outside Config.Tuning.MemoryBudget): valid until Release. It
	// stays on the host; copy it to the device with the training step's labels.
	Targets    []float32
	NumClasses int // the width of a Targets row: len(Source.Classes()); 0 without Targets

	// Mix is how the batch was mixed (Config.Mix): λ, and CutMix's box. Sample i was
	// mixed with sample Len-1-i, as timm's Mixup does (within the micro-batch, with
	// Config.Batch.MicroBatches: each has its own Mix); pixels and targets are mixed
	// already, so Mix is for logging or a loss on integer labels
	// (λ·loss(Labels[i]) + (1-λ)·loss(Labels[Len-1-i])). Mix.Lambda is 1 for a batch
	// left unmixed.
	Mix mixup.Params

	buf       *pinned.Buffer
	tfree     chan []float32 // where Targets goes back on Release
	meta      MetadataSource // the source's metadata, nil when it has none
	slot      *gpu.Slot      // its device buffer; nil when StopAfter skips packing
	hostU8    bool           // Data is uint8 NHWC for the device to convert
	ld        *Loader
	remaining atomic.Int32 // slots not yet written
	completed atomic.Int64 // when the last slot was written, Unix ns (for tests of overlap)
	done      chan struct{}
	released  atomic.Bool
	badIdx    []int // the samples that failed in its slots, replacements included; under mu

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
	b.mu.Lock()
	b.badIdx = append(b.badIdx, e.Index)
	if b.lowBad == nil || slot < b.badSlot {
		b.lowBad, b.badSlot = e, slot
	}
	b.mu.Unlock()
}

// badFiles returns the samples that failed in the batch's slots.
func (b *Batch) badFiles() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.badIdx
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
//
// On a GPU the CPU does not wait for the training step: the device buffer is written again
// only after the work enqueued until now on the streams passed to WaitOn, so a step
// launched on such a stream may still be reading it. Work on the batch on other streams
// must be complete before Release, or named with ReleaseOn.
func (b *Batch) Release() { b.ReleaseOn() }

// ReleaseOn is Release for a step whose work on the batch's device memory runs on streams
// (CUstreams of the loader's context; 0 for the legacy default stream) it did not pass to
// WaitOn, such as one that waited with Wait and then launched kernels: the device buffer
// is written again only after the work enqueued on them until now.
func (b *Batch) ReleaseOn(streams ...uintptr) {
	if b == nil {
		return
	}
	if b.released.Swap(true) {
		panic(fmt.Sprintf("pipeline: %s released twice", b.name()))
	}
	if b.ld != nil {
		b.ld.outstanding.Add(-1)
	}
	s := b.slot
	if s != nil {
		// The device buffer's next copy waits for the step's work enqueued until now.
		s.Done(streams...)
	}
	if b.Targets != nil {
		select {
		case b.tfree <- b.Targets[:cap(b.Targets)]:
		default:
		}
	}
	b.Data, b.Labels, b.Indices, b.Targets, b.slot, b.meta = nil, nil, nil, nil, nil, nil
	if s != nil && b.ld != nil && b.ld.releaseLater(b.buf, s) {
		return
	}
	giveBack(b.buf, s)
}

// giveBack returns a released batch's host buffer and device slot once its copy is
// complete: the copy reads the host buffer until then, so only then may a worker write
// the next batch into it. (Normally it completed long ago.) The host buffer goes first:
// after a Close its slab is unregistered now, while the device the slot keeps alive is
// still there.
func giveBack(buf *pinned.Buffer, s *gpu.Slot) {
	if s != nil {
		s.Wait()
	}
	buf.Release()
	if s != nil {
		s.Release()
	}
}

// DevicePtr returns the address of the batch in device memory (on the cpu device, the
// host address of the delivered bytes), or 0 when the loader did not pack it (StopAfter).
// The memory holds DeviceBytes bytes in Layout, DType and Shape.
func (b *Batch) DevicePtr() gpu.DevicePtr {
	if b.slot == nil {
		return 0
	}
	return b.slot.Ptr()
}

// DeviceBytes returns the size of the batch at DevicePtr.
func (b *Batch) DeviceBytes() int {
	if b.slot == nil {
		return 0
	}
	return b.slot.Len()
}

// Ready reports, without waiting, whether the batch's copy to the device is complete.
// An error means the copy failed; it names the batch.
func (b *Batch) Ready() (bool, error) {
	if b.slot == nil {
		return true, nil
	}
	ok, err := b.slot.Ready()
	if err != nil {
		return false, b.deviceErr(err)
	}
	return ok, nil
}

// Wait blocks until the batch is in device memory (the calling thread sleeps; it does not
// spin) and returns the copy's error, naming the batch.
func (b *Batch) Wait() error {
	if b.slot == nil {
		return nil
	}
	if err := b.slot.Wait(); err != nil {
		return b.deviceErr(err)
	}
	return nil
}

// WaitOn makes the CUDA stream (a CUstream in the loader's context, which is the
// device's primary context unless Config.Device.GPU says otherwise; 0 for the legacy default
// stream) wait for the batch's copy before running work enqueued on it afterwards. The
// CPU does not wait. Release then keeps the device buffer from the next batch until the
// work enqueued on stream before it is done.
func (b *Batch) WaitOn(stream uintptr) error {
	if b.slot == nil {
		return nil
	}
	if err := b.slot.WaitOn(stream); err != nil {
		return b.deviceErr(err)
	}
	return nil
}

// deviceErr names the batch in a device error.
func (b *Batch) deviceErr(err error) error {
	return fmt.Errorf("pipeline: %s: copy to the device: %w", b.name(), err)
}

// name names the batch in messages: "batch 3 of epoch 1", or with micro-batches
// "batch 3 (micro-batch 2 of 4) of epoch 1".
func (b *Batch) name() string {
	if b.Micros > 1 {
		return fmt.Sprintf("batch %d (micro-batch %d of %d) of epoch %d", b.Number, b.Micro, b.Micros, b.Epoch)
	}
	return fmt.Sprintf("batch %d of epoch %d", b.Number, b.Epoch)
}

// Float32 views the batch in host memory as float32 values: Data, or with Device.Cast on
// the cpu device (Config.Device.Name "auto" without a usable GPU, say) the converted batch, which
// is in host memory too. It panics unless DType is Float32, and for a batch converted on a
// GPU, which is only in device memory (Stats.Device.Kind tells which).
func (b *Batch) Float32() []float32 {
	data := b.hostView()
	if b.DType != pack.Float32 {
		panic("pipeline: Float32 view of a " + b.DType.String() + " batch")
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(data))), len(data)/4)
}

// Uint16 views the batch in host memory as 16-bit values (float16 or bfloat16 bits), as
// Float32 does. It panics unless DType is Float16 or BFloat16.
func (b *Batch) Uint16() []uint16 {
	data := b.hostView()
	if b.DType != pack.Float16 && b.DType != pack.BFloat16 {
		panic("pipeline: Uint16 view of a " + b.DType.String() + " batch")
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(data))), len(data)/2)
}

// hostView returns the delivered batch's bytes in host memory.
func (b *Batch) hostView() []byte {
	if !b.hostU8 {
		return b.Data
	}
	if b.slot != nil {
		if data := b.slot.HostBytes(); data != nil { // the host backend converted it on the CPU
			return data
		}
	}
	panic("pipeline: with Device.Cast on a GPU, Data holds uint8 NHWC pixels; the " + b.DType.String() + " batch is on the device (Stats.DeviceKind)")
}
