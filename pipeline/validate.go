package pipeline

import (
	"errors"
	"fmt"
	"log"
	"math"
	"runtime"

	"github.com/conveyor-ml/conveyor/pack"
)

const (
	mib = 1 << 20
	// minWorkingBudget is the least memory New accepts beyond the pinned buffers.
	minWorkingBudget = 16 * mib
)

// Bounds of the fields that size allocations, channels and goroutines. They are far
// beyond any machine's needs, and they keep every size computed from them within an
// int64: a batch buffer is at most maxBatchBytes, and Prefetch+1 of them at most 2^54
// bytes.
const (
	maxBatchSize    = 1 << 20
	maxWorkers      = 4096           // Workers, IOWorkers, and CPULimit in cores
	maxPrefetch     = 2 * maxWorkers // the largest default: ⌈2·Workers/1⌉ micro-batches of one sample
	maxWorld        = 1 << 24
	maxShuffleBlock = math.MaxInt32 // positions in an epoch's order are int32
	maxBatchBytes   = 1 << 40       // one batch buffer (a micro-batch with MicroBatches)
	maxMemoryBudget = 1 << 50
)

// EnsureDefaults fills c's zero fields with their defaults and returns c; a nil c
// becomes a new Config holding the defaults. New calls it on its copy of the Config,
// then Validate.
func (c *Config) EnsureDefaults() *Config {
	if c == nil {
		c = &Config{}
	}
	if c.Batch.Size == 0 {
		c.Batch.Size = 64
	}
	if c.Batch.MicroBatches == 0 {
		c.Batch.MicroBatches = 1
	}
	if c.Tuning.Workers == 0 {
		c.Tuning.Workers = min(runtime.GOMAXPROCS(0), maxWorkers)
	}
	if c.Tuning.IOWorkers == 0 {
		c.Tuning.IOWorkers = max(4, c.Tuning.Workers)
	}
	if c.Tuning.CPULimit == 0 {
		c.Tuning.CPULimit = float64(min(runtime.GOMAXPROCS(0), maxWorkers))
	}
	if c.Tuning.Prefetch == 0 {
		c.Tuning.Prefetch = 2
		if micro := c.Batch.Size / max(c.Batch.MicroBatches, 1); c.Batch.MicroBatches > 1 && micro > 0 {
			c.Tuning.Prefetch = max(2, (2*c.Tuning.Workers+micro-1)/micro)
		}
	}
	if c.Device.Name == "" {
		c.Device.Name = "cpu"
	}
	if c.Order.World == 0 {
		c.Order.World = 1
	}
	if c.Order.Mode == ShardOrder && c.Order.Partitions == 0 {
		c.Order.Partitions = c.Order.World
	}
	if c.Bad.MaxFraction == 0 {
		c.Bad.MaxFraction = 0.01
	}
	if c.SampleCacheFill == 0 {
		c.SampleCacheFill = 0.1
	}
	if c.Logf == nil {
		c.Logf = log.Printf
	}
	if c.Fidelity == Exact {
		c.Decode.Exact = true
	}
	c.Decode.EnsureDefaults()
	c.Mix.EnsureDefaults()
	return c
}

// Validate reports every invalid field of c, defaults filled (see EnsureDefaults): out
// of its range (each field's comment or the bounds above), or inconsistent with another.
// The problems are joined into one error (errors.Join), each naming its field; nil when
// c is usable.
func (c *Config) Validate() error {
	var p problems
	batchOK := c.checkBatch(&p)
	prefetchOK := c.checkTuning(&p)
	c.checkOrder(&p, batchOK)
	c.checkOutput(&p)
	if c.Tuning.MemoryBudget < 0 || c.Tuning.MemoryBudget > maxMemoryBudget {
		p.add(fmt.Errorf("MemoryBudget %d not in [0, %d] (1 PiB)", c.Tuning.MemoryBudget, int64(maxMemoryBudget)))
	}
	c.checkParts(&p, batchOK && prefetchOK)
	if err := errors.Join(p...); err != nil {
		return fmt.Errorf("pipeline: config: %w", err)
	}
	return nil
}

// problems collects what Validate finds, in the order it checks.
type problems []error

func (p *problems) add(err error) { *p = append(*p, err) }

// inRange reports whether lo ≤ v ≤ hi, and adds a problem naming the field when not.
func (p *problems) inRange(name string, v, lo, hi int) bool {
	if v < lo || v > hi {
		p.add(fmt.Errorf("%s %d not in [%d, %d]", name, v, lo, hi))
		return false
	}
	return true
}

// checkBatch checks Batch, and reports whether its sizes can be used in products.
func (c *Config) checkBatch(p *problems) (ok bool) {
	ok = p.inRange("BatchSize", c.Batch.Size, 1, maxBatchSize)
	switch {
	case c.Batch.MicroBatches < 1:
		p.add(fmt.Errorf("MicroBatches %d < 1", c.Batch.MicroBatches))
		ok = false
	case ok && c.Batch.Size%c.Batch.MicroBatches != 0:
		p.add(fmt.Errorf("MicroBatches %d does not divide BatchSize %d", c.Batch.MicroBatches, c.Batch.Size))
		ok = false
	}
	return ok
}

// checkTuning checks Tuning's counts, and reports whether Prefetch is in range.
func (c *Config) checkTuning(p *problems) (prefetchOK bool) {
	p.inRange("Workers", c.Tuning.Workers, 1, maxWorkers)
	p.inRange("IOWorkers", c.Tuning.IOWorkers, 1, maxWorkers)
	prefetchOK = p.inRange("Prefetch", c.Tuning.Prefetch, 1, maxPrefetch)
	if !(c.Tuning.CPULimit > 0 && c.Tuning.CPULimit <= maxWorkers) {
		p.add(fmt.Errorf("CPULimit %g not in (0, %d] cores", c.Tuning.CPULimit, maxWorkers))
	}
	return prefetchOK
}

// checkOrder checks Order: the ranks, and the fields of its Mode; batchOK says whether
// Batch.Size may be used.
func (c *Config) checkOrder(p *problems, batchOK bool) {
	worldOK := p.inRange("World", c.Order.World, 1, maxWorld)
	if worldOK && (c.Order.Rank < 0 || c.Order.Rank >= c.Order.World) {
		p.add(fmt.Errorf("Rank %d not in [0, World=%d)", c.Order.Rank, c.Order.World))
	}
	switch c.Order.Mode {
	case SampleOrder:
		if c.Order.Partitions != 0 || c.Order.ShuffleBlock != 0 {
			p.add(fmt.Errorf("Partitions %d and ShuffleBlock %d apply to Order %v only, not %v", c.Order.Partitions, c.Order.ShuffleBlock, ShardOrder, c.Order.Mode))
		}
	case ShardOrder:
		switch {
		case c.Order.Partitions < 1:
			p.add(fmt.Errorf("Partitions %d < 1", c.Order.Partitions))
		case worldOK && c.Order.Partitions%c.Order.World != 0:
			p.add(fmt.Errorf("Partitions %d is not a multiple of World %d: each rank reads a whole number of partitions", c.Order.Partitions, c.Order.World))
		case batchOK && worldOK && c.Batch.Size*c.Order.World%c.Order.Partitions != 0: // at most 2^44
			p.add(fmt.Errorf("the global batch BatchSize×World = %d×%d is not a multiple of Partitions %d: every global batch takes as many samples from each partition",
				c.Batch.Size, c.Order.World, c.Order.Partitions))
		}
		if c.Order.ShuffleBlock < 0 {
			p.add(fmt.Errorf("ShuffleBlock %d < 0", c.Order.ShuffleBlock))
		} else {
			p.inRange("ShuffleBlock", c.Order.ShuffleBlock, 0, maxShuffleBlock)
		}
	default:
		p.add(fmt.Errorf("Order %v", c.Order.Mode))
	}
}

// checkOutput checks the fields that change what a sample becomes, or whether it counts:
// Fidelity, Bad, SampleCacheFill, StopAfter and Device.Cast.
func (c *Config) checkOutput(p *problems) {
	if c.Fidelity != Fast && c.Fidelity != Exact {
		p.add(fmt.Errorf("Fidelity %v", c.Fidelity))
	} else if c.Decode.Exact && c.Fidelity != Exact {
		// Exact decoding with Fast resampling in the ops would be neither.
		p.add(fmt.Errorf("Decode.Exact with Fidelity %v: set Fidelity to %v, which sets Decode.Exact", c.Fidelity, Exact))
	}
	if !(c.Bad.MaxFraction <= 1) { // NaN included
		p.add(fmt.Errorf("MaxBadFraction %g: want a fraction ≤ 1 (negative: no limit)", c.Bad.MaxFraction))
	}
	if !(c.SampleCacheFill >= 0 && c.SampleCacheFill <= 1) {
		p.add(fmt.Errorf("SampleCacheFill %g not in [0, 1]", c.SampleCacheFill))
	}
	if c.StopAfter < AllStages || c.StopAfter > AugmentStage {
		p.add(fmt.Errorf("StopAfter %v", c.StopAfter))
	}
	if c.Device.Cast && c.Pack.DType == pack.Uint8 {
		p.add(errors.New("Device.Cast needs a float Pack.DType; uint8 batches need no conversion"))
	}
	if c.Device.Cast && c.Augment.HasTensorOps() {
		// With Device.Cast the host holds uint8 pixels, which cannot store normalised
		// values such as normal noise or a value between two pixel levels.
		p.add(errors.New("Device.Cast packs uint8 pixels on the host, but Augment ends with ops on the normalised sample (RandomErasing); drop Device.Cast, or erase on the device after the conversion"))
	}
}

// checkParts checks the options of the packages the loader runs: Pack (and the size of
// a batch buffer, when sized says Batch and Prefetch may be used), Mix, Decode and
// Augment.
func (c *Config) checkParts(p *problems, sized bool) {
	if err := c.Pack.Validate(); err != nil {
		p.add(fmt.Errorf("Pack: %w", err))
	} else if sized {
		// Bounded above: a sample is below 2^31 bytes and a micro-batch at most 2^20
		// samples, so the product cannot wrap.
		host := c.hostPack()
		sample := int64(host.Width) * int64(host.Height) * 3 * int64(host.DType.Size())
		if n := int64(c.Batch.Size / c.Batch.MicroBatches); n*sample > maxBatchBytes {
			p.add(fmt.Errorf("a batch buffer of %d %dx%d %v samples (BatchSize/MicroBatches) takes %d bytes, more than %d (1 TiB)",
				n, host.Width, host.Height, host.DType, n*sample, int64(maxBatchBytes)))
		}
	}
	if err := c.Mix.Validate(); err != nil {
		p.add(fmt.Errorf("Mix: %w", err))
	}
	if err := c.Decode.Validate(); err != nil {
		p.add(err)
	}
	// Every op's parameters, and the size the ops end at when it does not depend on the
	// image, are checked here rather than per sample: a mistake is the configuration's,
	// not a file's.
	if err := c.Augment.Validate(c.Pack.Width, c.Pack.Height); err != nil {
		p.add(err)
	}
}
