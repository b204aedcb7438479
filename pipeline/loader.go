package pipeline

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/conveyor-ml/conveyor/augment"
	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/gpu"
	"github.com/conveyor-ml/conveyor/mixup"
	"github.com/conveyor-ml/conveyor/pack"
	"github.com/conveyor-ml/conveyor/pinned"
)

// Loader streams batches of a Source. Create it with New, iterate with Epoch, and Close it
// when done. Its methods are safe for concurrent use, but only one epoch runs at a time.
type Loader struct {
	cfg         Config
	src         Source
	packer      *pack.Packer
	pool        *pinned.Pool
	held        heldTotal
	read        *budget
	dec         *decodeMemory
	returns     *returner
	sampleBytes int
	micro       int // samples per delivered batch: BatchSize/MicroBatches
	nbuf        int // pinned batch buffers, each holding one delivered (micro-)batch

	workers []*worker // per-worker reusable state, kept across epochs: as many as the tuner may run
	tune    *tuner
	stats   counters

	// Dense targets (Batch.Targets): the row width, 0 without them; a row's off and on
	// values; the free-list of target buffers, one per batch buffer.
	classes int
	off, on float32
	tfree   chan []float32
	meta    MetadataSource // src's metadata, nil when it has none

	region augment.RegionOp // the first augment op, decoded with the crop; nil: decode in full
	// augment is Config.Augment without mirror, the last op on the image when it is an
	// augment.MirrorOp: its draw is made after the others and the packer writes the
	// sample mirrored (pack.Packer.PackMirrored), instead of flipping the image.
	augment augment.Pipeline
	mirror  augment.MirrorOp
	// tensorOps: Config.Augment ends with ops on the packed sample (RandomErasing), run
	// on each slot after packing.
	tensorOps bool

	dev    *gpu.Device // where batches are delivered
	ownDev bool        // the loader opened dev and closes it
	ring   *gpu.Ring   // device buffers, one per batch delivered and not yet released
	slots  int         // the ring's slots: how many batches the consumer may hold

	files   FileSource   // src's files, when it has any
	planner EpochPlanner // src, when it plans its reads (EpochPlanner.PlansReads)
	pixels  PixelSource  // src's stored pixels, when it has any
	stored  *cache.Cache // the cache holding src's first sample, when it is stored pixels
	spec    string       // the decode spec, with the backend in use: part of every cache key
	fill    filler       // when to store into Config.SampleCache
	conv    *converting  // set when the loader runs Convert

	// backends: the JPEG and WebP decoders in use (Stats.Backends), named once in New:
	// a worker replaces its decoder while it runs, so Stats must not ask the workers'.
	backends struct{ decode, webp string }

	mu      sync.Mutex
	run     *run // the epoch being iterated, or nil
	closed  bool
	sampler sampler
	order   []int32

	// Planning the next epoch ahead (EpochPlanner sources): the dispatcher's own sampler
	// and order buffer.
	ahead     *sampler
	nextOrder []int32

	outstanding atomic.Int64 // batches handed out and not yet released

	// On a GPU, released batches whose copy is still running wait in later for the
	// releaser goroutine (releaseLater); nil on the host backend.
	later       chan heldCopy
	laterDone   chan struct{}
	laterMu     sync.RWMutex // guards the send on later against its close
	laterClosed bool
}

// New validates cfg and builds a Loader over src: it maps and locks the pinned batch
// buffers up front, so an impossible memory budget fails here, before training starts.
func New(src Source, cfg *Config) (*Loader, error) { return build(src, cfg, nil) }

// build is New; conv is set when the loader runs Convert. It sets the loader up in
// steps: the effective Config, the packer, the tuner, what the source offers, the
// order, the memory budget's shares, the device and the workers.
func build(src Source, cfg *Config, conv *converting) (*Loader, error) {
	if err := checkKind(src); err != nil {
		return nil, err
	}
	if src.Len() == 0 {
		return nil, errors.New("pipeline: empty source")
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if err := c.applyRankFromEnv(); err != nil {
		return nil, err
	}
	autoWorkers, autoIO, autoPrefetch := !c.Tuning.NoAutotune && c.Tuning.Workers == 0, !c.Tuning.NoAutotune && c.Tuning.IOWorkers == 0, !c.Tuning.NoAutotune && c.Tuning.Prefetch == 0
	if err := c.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	hostPack := c.hostPack()
	var devConv *gpu.Caster
	if c.Device.Cast {
		var err error
		if devConv, err = gpu.NewCaster(&c.Pack); err != nil {
			return nil, fmt.Errorf("pipeline: %w", err)
		}
	}
	packer, err := pack.NewPacker(&hostPack)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	l := &Loader{cfg: c, src: src, conv: conv, packer: packer, sampleBytes: packer.SampleBytes(), micro: c.Batch.Size / c.Batch.MicroBatches}
	// A buffer, host or device, holds what is delivered at once: one micro-batch.
	batchBytes := int64(l.micro) * int64(l.sampleBytes)
	maxPrefetch := c.Tuning.Prefetch
	if autoPrefetch {
		maxPrefetch = autoPrefetchBound(c.Tuning.Prefetch, l.micro, pageRound(batchBytes), c.Tuning.MemoryBudget)
	}
	l.tune = newTuner(&c, autoWorkers, autoIO, maxPrefetch)
	// Everything sized by the batch buffers is sized for the most the tuner may map.
	l.nbuf = maxPrefetch + 1
	l.tensorOps = c.Augment.HasTensorOps()
	l.augment, l.mirror = foldMirror(c.Augment)
	l.fill = cache.NewFillPolicy(c.SampleCacheFill)
	if err := l.useSource(src, &c, conv); err != nil {
		return nil, err
	}
	if err := l.setOrder(src, &c); err != nil {
		return nil, err
	}
	pinnedBytes, err := l.shareMemory(&c, batchBytes)
	if err != nil {
		return nil, err
	}
	if err := l.openDevice(devConv, batchBytes, pinnedBytes); err != nil {
		return nil, err
	}
	l.tune.ld = l
	l.workers = make([]*worker, l.tune.maxWorkers)
	for i := range l.workers {
		l.workers[i] = &worker{}
		l.workers[i].reset(l)
	}
	l.spec = specOf(c.Decode, l.workers[0].dec.Backend())
	l.backends.decode, l.backends.webp = l.decodeBackend(), l.webpBackend()
	return l, nil
}

// useSource records what src offers beyond Source, as the capabilities it implements:
// its classes for dense targets, metadata, files, planned reads and stored pixels; and
// whether the first op's crop is decoded with the sample.
func (l *Loader) useSource(src Source, c *Config, conv *converting) error {
	var err error
	if l.classes, err = denseClasses(src, c, conv); err != nil {
		return err
	}
	if l.classes > 0 {
		l.off, l.on = mixup.SmoothValues(c.Mix.Smoothing, l.classes)
	}
	if m, ok := src.(MetadataSource); ok && len(m.MetadataKeys()) > 0 {
		l.meta = m
	}
	l.files, _ = src.(FileSource)
	if p, ok := src.(EpochPlanner); ok && p.PlansReads() {
		l.planner = p
	}
	if l.pixels, _ = src.(PixelSource); l.pixels != nil && conv == nil {
		l.stored, _, _ = l.pixels.Stored(0)
	} else {
		l.pixels = nil // converting reads files only; Convert refuses stored samples
	}
	if !c.FullDecode && c.Decode.Resize.Mode == decode.ResizeNone && len(c.Augment) > 0 {
		l.region, _ = c.Augment[0].(augment.RegionOp)
	}
	return nil
}

// setOrder sets up the sampler for c.Order: the epoch's order and this rank's share of
// it, with ShardOrder the source's shards, partitions and shuffle window.
func (l *Loader) setOrder(src Source, c *Config) error {
	l.sampler = sampler{n: src.Len(), seed: c.Order.Seed, shuffle: !c.Order.Sequential, rank: c.Order.Rank, world: c.Order.World, dropUneven: c.Order.DropUneven}
	if c.Order.Mode == ShardOrder {
		ends, err := shardEnds(src)
		if err != nil {
			return err
		}
		shards := src.Len()
		if ends != nil {
			shards = len(ends)
		} else {
			c.Logf("pipeline: Order %v over %v, which is not a ShardedSource: each sample is its own shard (a Converted's ByShard declares its shards)", ShardOrder, src)
		}
		if c.Order.ShuffleBlock == 0 {
			l.cfg.Order.ShuffleBlock = 4 * ((src.Len() + shards - 1) / shards)
			if ss, ok := src.(ShardedSource); ok {
				l.cfg.Order.ShuffleBlock = max(l.cfg.Order.ShuffleBlock, ss.ShuffleBlock())
			}
		}
		l.sampler.parts, l.sampler.ends, l.sampler.block, l.sampler.batch = c.Order.Partitions, ends, l.cfg.Order.ShuffleBlock, c.Batch.Size
		if src.Len() < c.Order.Partitions {
			return fmt.Errorf("pipeline: %d samples cannot fill %d partitions (Partitions)", src.Len(), c.Order.Partitions)
		}
	}
	if l.sampler.shardLen() == 0 {
		return fmt.Errorf("pipeline: %d samples cannot be split among %d ranks", src.Len(), c.Order.World)
	}
	if c.Batch.DropLast && l.sampler.shardLen() < c.Batch.Size {
		return fmt.Errorf("pipeline: DropLast with %d samples per epoch and BatchSize %d leaves no batch", l.sampler.shardLen(), c.Batch.Size)
	}
	return nil
}

// shareMemory sizes the memory budget (its default too) and shares it out: the pinned
// batch buffers and dense targets first, then a fifth of the rest for reads and the
// remainder for decoding. It returns the pinned buffers' bytes.
func (l *Loader) shareMemory(c *Config, batchBytes int64) (pinnedBytes int64, err error) {
	// Validate bounds a buffer to maxBatchBytes and nbuf to maxPrefetch+1 or 17: no
	// product here wraps.
	pinnedBytes = int64(l.nbuf) * pageRound(batchBytes)
	// Dense targets, a row of floats per sample beside each batch buffer, are held from
	// here on, so they count as the pinned buffers do.
	targetBytes := int64(0)
	if l.classes > 0 {
		row := int64(l.micro) * 4
		if int64(l.classes) > maxBatchBytes/row {
			return 0, fmt.Errorf("pipeline: dense targets of %d classes for %d samples take more than %d bytes a batch buffer", l.classes, l.micro, int64(maxBatchBytes))
		}
		targetBytes = int64(l.nbuf) * row * int64(l.classes)
	}
	if c.Tuning.MemoryBudget == 0 {
		l.cfg.Tuning.MemoryBudget = pinnedBytes + targetBytes + max(640*mib, 64*mib+int64(c.Tuning.Workers)*64*mib)
	}
	working := l.cfg.Tuning.MemoryBudget - pinnedBytes - targetBytes
	if working < minWorkingBudget {
		held := ""
		if targetBytes > 0 {
			held = fmt.Sprintf(" and %d bytes of dense targets", targetBytes)
		}
		return 0, fmt.Errorf("pipeline: MemoryBudget %d bytes leaves %d after %d batch buffers of %d bytes%s; need at least %d more",
			l.cfg.Tuning.MemoryBudget, working, l.nbuf, batchBytes, held, minWorkingBudget-working)
	}
	if l.classes > 0 {
		l.tfree = make(chan []float32, l.nbuf)
		for range l.nbuf {
			l.tfree <- make([]float32, l.micro*l.classes)
		}
	}
	l.read = newBudget(working/5, &l.held)
	// Decode memory is shared out among the active workers (tuner.set changes it).
	l.dec = newDecodeMemory(working-working/5, c.Tuning.Workers, &l.held)
	// Buffers the tuner has not mapped are not the process's yet: the returner's limit
	// rises as they are (tuner.set).
	l.returns = newReturner(l.cfg.Tuning.MemoryBudget - int64(l.nbuf-c.Tuning.Prefetch-1)*pageRound(batchBytes))
	return pinnedBytes, nil
}

// growBuffers maps up to n more batch buffers for the tuner and raises the memory
// returner's limit by what it mapped.
func (l *Loader) growBuffers(n int) (int, error) {
	n, err := l.pool.Grow(n)
	l.returns.raise(int64(n) * pageRound(int64(l.micro)*int64(l.sampleBytes)))
	return n, err
}

// Config returns the effective configuration.
func (l *Loader) Config() Config { return l.cfg }

// Len is the number of batches per epoch; with Config.Batch.MicroBatches each is delivered as
// that many micro-batches (fewer for a short last batch).
func (l *Loader) Len() int {
	n := l.sampler.shardLen()
	if l.cfg.Batch.DropLast {
		return n / l.cfg.Batch.Size
	}
	return (n + l.cfg.Batch.Size - 1) / l.cfg.Batch.Size
}

// SamplesPerEpoch is the number of samples this rank sees per epoch, before DropLast;
// World times it is the length of the epoch's global order.
func (l *Loader) SamplesPerEpoch() int { return l.sampler.shardLen() }

// Close stops a running epoch, waits for its goroutines and unmaps the batch buffers. It
// reports batches still held by the caller; their memory stays valid until released.
func (l *Loader) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	r := l.run
	l.mu.Unlock()
	if r != nil {
		r.cancel(ErrClosed)
		r.wg.Wait()
		r.reclaim()
	}
	for _, w := range l.workers {
		w.close()
	}
	l.returns.wait()
	err := l.closeDevice()
	if n := l.outstanding.Load(); n > 0 {
		return fmt.Errorf("pipeline: close: %d batches not released; their host and device memory stays allocated until they are", n)
	}
	if err != nil {
		return fmt.Errorf("pipeline: close: %w", err)
	}
	return nil
}

func (l *Loader) shape(n int) [4]int {
	w, h := l.cfg.Pack.Width, l.cfg.Pack.Height
	if l.cfg.Pack.Layout == pack.NHWC {
		return [4]int{n, h, w, 3}
	}
	return [4]int{n, 3, h, w}
}

// foldMirror returns ops without their last op on the image when that is an
// augment.MirrorOp, and that op; otherwise ops and nil. The ops after it, if any, act on
// the packed sample, so drawing its decision last among the image ops keeps every
// sample's random stream as it was.
func foldMirror(ops augment.Pipeline) (augment.Pipeline, augment.MirrorOp) {
	for i := len(ops) - 1; i >= 0; i-- {
		if _, ok := ops[i].(augment.TensorOp); ok {
			continue
		}
		m, ok := ops[i].(augment.MirrorOp)
		if !ok {
			return ops, nil
		}
		return append(ops[:i:i], ops[i+1:]...), m
	}
	return ops, nil
}
