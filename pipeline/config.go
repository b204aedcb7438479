package pipeline

import (
	"fmt"
	"strings"

	"github.com/conveyor-ml/conveyor/augment"
	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/gpu"
	"github.com/conveyor-ml/conveyor/mixup"
	"github.com/conveyor-ml/conveyor/pack"
)

// Config configures a Loader. The zero value of every field means its default; New works
// on a copy, so a Config may be reused.
type Config struct {
	// Batch is how samples are grouped into batches.
	Batch BatchConfig
	// Tuning is how much runs at once and how much memory it may hold: the autotuner
	// adjusts the counts at run time within it.
	Tuning TuningConfig
	// Order is which samples an epoch reads, in what order, and which of them this rank
	// reads.
	Order OrderConfig
	// Decode configures decoding and the resize-first policy; default decode's defaults.
	Decode decode.Options
	// Fidelity chooses between Fast pixels and Exact ones (torchvision's, bit for bit);
	// Exact sets Decode.Exact, which is refused without it. ApplyRecipe picks Exact for "eval" and Fast for the
	// training recipes. Default Fast.
	Fidelity Fidelity
	// Augment runs on every decoded sample; default none. Its output must have the size
	// given in Pack. Ops on the packed sample (augment.TensorOp: RandomErasing) come
	// last and run on each batch slot right after packing, with the sample's random
	// stream; they cannot be combined with Device.Cast.
	Augment augment.Pipeline
	// Pack says how samples are written into batches. Width and Height are required.
	Pack pack.Options
	// Mix mixes every batch after packing — MixUp, CutMix or timm's random switch between
	// them — and smooths labels, giving each Batch soft Targets (see mixup.Options and
	// Batch.Mix). The mix runs on the worker that finishes the batch, before its copy to
	// the device, in the batch's host dtype and layout; with Device.Cast that is uint8
	// NHWC, where MixUp rounds to the nearest integer (ties to even) as timm's
	// FastCollateMixup does, up to half a step (0.5/255 before normalisation) from
	// mixing floats. The draw depends on (Seed, Rank, epoch, batch number) only; with
	// MicroBatches each micro-batch is mixed on its own, with its own draw. Default: no
	// mixing, no smoothing.
	Mix mixup.Options
	// Device is where batches are delivered: host memory, or a GPU they are copied to.
	Device DeviceConfig
	// FullDecode turns crop-aware decoding off. By default, when Decode.Resize is
	// ResizeNone and Augment begins with an augment.RegionOp (RandomResizedCrop, as in
	// the train recipe), a sample decoded from its file draws its crop from the header's
	// size and decodes only that part (decode.Decoder.DecodeRegion): only the crop is
	// converted to RGB, and with libjpeg-turbo a crop that is large next to its output
	// size decodes at a reduced DCT scale, several times faster on photos. The crop drawn
	// is the same either way; the pixels are the same on the Go decoder (up to ±1 with an
	// EXIF rotation) and within a mean of 2/255 with libjpeg-turbo's DCT scaling. Samples
	// stored into or read from the cache always decode in full. Default false.
	FullDecode bool
	// SampleCache, when set, stores each decoded sample (after the resize-first step, before
	// augmentation) under its file's identity and the decode spec, and later epochs read
	// it from there instead of decoding. Lossless codecs give the same batches as a
	// loader without it and with FullDecode (samples stored or read decode in full). The loader refreshes it at each epoch's start and does not close it.
	// Default nil: no cache.
	SampleCache *cache.Cache
	// SampleCacheFill bounds the share of the workers' busy time that storing samples may take
	// while the loader is the bottleneck; time they spend waiting for the consumer or the
	// disk is free for it. A sample not stored in one epoch is stored in a later one.
	// 1 stores every sample on first sight, whatever it costs; in [0, 1]. Default 0.1.
	SampleCacheFill float64
	// Bad is what happens to samples that cannot be read or decoded.
	Bad BadConfig
	// StopAfter is for measuring stage ceilings (conveyor bench --stages): samples go
	// through the stages up to and including this one and no further, and batches are
	// delivered with their labels and indices but without pixels (Data is left as it
	// was). Default AllStages: every stage runs.
	StopAfter Stage
	// Logf receives one line per bad sample and notices such as a pinned-memory fallback;
	// default log.Printf.
	Logf func(format string, args ...any)
}

// BatchConfig is Config.Batch; see there.
type BatchConfig struct {
	// BatchSize is the number of samples per batch, at most 2^20 (and a batch buffer,
	// BatchSize/MicroBatches packed samples, at most 1 TiB); default 64.
	Size int
	// DropLast drops the epoch's last batch when it would be short; default false (the last
	// batch holds the remainder, Batch.Len says how many).
	DropLast bool
	// MicroBatches delivers each batch as this many micro-batches of
	// BatchSize/MicroBatches samples, one after another, for gradient accumulation: the
	// same samples in the same order as the whole batch, so a training step that cannot
	// fit BatchSize samples in GPU memory accumulates gradients over the micro-batches
	// and steps the optimiser after the last (Batch.Micro == Batch.Micros-1). It must
	// divide BatchSize. The pinned host buffers and the device ring hold one micro-batch
	// each, so their memory shrinks by this factor; Prefetch, the consumer's limit on
	// batches held at once, Stats.Batches and Stats.Device.Copies count micro-batches, while
	// BatchSize, DropLast, Loader.Len, Batch.Number, sharding and bad-sample replacement
	// keep their meaning for whole batches. A short last batch of n samples is delivered
	// as ceil(n/(BatchSize/MicroBatches)) micro-batches, the last of them short
	// (Batch.Micros and Batch.BatchLen say so). An error ends the epoch at the micro-batch holding it, after
	// the batch's earlier micro-batches were delivered: the step they began is not
	// taken. Batch-level ops that mix samples, such as MixUp and CutMix, apply to each
	// delivered micro-batch. Default 1: whole batches.
	MicroBatches int
}

// OrderConfig is Config.Order; see there.
type OrderConfig struct {
	// Seed decides the order and every random augmentation; default 0.
	Seed uint64
	// Sequential visits samples in index order (evaluation); default false: every epoch
	// is reshuffled from (Seed, epoch).
	Sequential bool
	// Rank and World shard the dataset for distributed training, as DistributedSampler
	// does: each of World ranks sees an equal number of samples. World is at most 2^24;
	// default 0 and 1.
	Rank, World int
	// DropUneven drops the tail of the global order to make it divisible by World instead
	// of repeating its head (with ShardOrder: each partition's last sample when the
	// partitions differ in length); default false.
	DropUneven bool
	// RankFromEnv makes New take Rank and World from the launcher's environment, as
	// RankFromEnv reads it (torchrun's RANK and WORLD_SIZE, else Slurm's SLURM_PROCID and
	// SLURM_NTASKS); a malformed or inconsistent value is New's error, naming the
	// variable. Without a launcher's variables New keeps Rank 0 of World 1 and logs so.
	// Rank and World must be left unset with it. Default false.
	RanksFromEnv bool
	// Order is how samples are ordered and split among ranks: SampleOrder, a permutation
	// of all samples dealt to ranks round-robin, or ShardOrder, the shard-aware elastic
	// order for sharded datasets in object storage (see ShardOrder). Default SampleOrder.
	Mode Order
	// Partitions is ShardOrder's number of canonical partitions P: the global order
	// depends on it (and on Seed and the epoch) but not on World, which must divide it,
	// and BatchSize×World must be a multiple of it. Set it to a common multiple of every
	// World the job may run or resume at (8 serves 1, 2, 4 and 8); each rank reads
	// P/World partitions at a time. Default World, which ties the order to the world
	// size. Only with ShardOrder.
	Partitions int
	// ShuffleBlock is ShardOrder's shuffle window: a partition's samples are shuffled in
	// consecutive blocks of about this many (each block's size drawn from ±25% of it, so
	// partitions need new shards at different batches), and a rank reads about
	// ShuffleBlock/shard length+1 shards of each of its partitions at a time; larger mixes
	// better and needs more shards at hand; at most 2^31-1. Default 4 × the mean shard length (4 for a source without shards,
	// whose shard shuffle is already a full permutation), and at least 262,144 over
	// Converted.ByShard, whose shards are sorted by class. Only with ShardOrder.
	ShuffleBlock int
}

// TuningConfig is Config.Tuning; see there.
type TuningConfig struct {
	// Workers is the number of CPU workers (decode, augment, pack), at most 4096. Default:
	// tuned at run time (see NoAutotune), starting at GOMAXPROCS.
	Workers int
	// IOWorkers is the number of concurrent file reads, separate from Workers so a slow
	// disk does not idle the decoders; at most 4096. Default: tuned at run time, starting
	// at max(4, Workers).
	IOWorkers int
	// Prefetch is how many batches (micro-batches with MicroBatches) may be in flight
	// (being assembled or ready) ahead of the consumer; the pinned pool holds Prefetch+1
	// batch buffers; at most 8192. Default: tuned at run time, starting at 2, or with MicroBatches at
	// enough micro-batches that at least 2×Workers samples are in flight (small
	// micro-batches would otherwise idle the workers): max(2, ⌈2·Workers/(BatchSize/MicroBatches)⌉).
	// The tuner deepens it, mapping more pinned buffers, up to enough for 256 samples (at
	// most 16 batches; with an explicit MemoryBudget, while the buffers take at most a
	// quarter of it); MemoryBudget's default counts those buffers.
	Prefetch int
	// NoAutotune keeps Workers, IOWorkers and Prefetch, when left zero, at their
	// starting values. By default the loader tunes them while epochs run, from its own
	// measurements, as tf.data's AUTOTUNE does: it doubles the reads in flight while the
	// workers wait for reads and the readers are all busy (a slow disk or network file
	// system), doubles the batches in flight while the workers and the consumer both
	// wait with every batch buffer holding a batch still being read, and adds a worker
	// while the workers are busy but the process uses less than 95% of CPULimit cores,
	// up to twice CPULimit; it adds nothing while the consumer is the slower side, and
	// parks a worker when the process uses more than CPULimit. A field set explicitly is
	// never changed. Stats.Tuning.Workers, Stats.Tuning.IOWorkers and Stats.Tuning.Prefetch report the
	// choice; docs/DESIGN.md, "Autotune", has the rules. Default false.
	NoAutotune bool
	// CPULimit is the cores the tuner lets the process use, as getrusage measures it
	// (the consumer's own CPU included); fractional values are allowed, up to 4096.
	// Default GOMAXPROCS.
	CPULimit float64
	// MemoryBudget bounds every byte the loader holds: the pinned batch buffers (with
	// dense targets, their rows of floats too), encoded files in flight and decode
	// working memory; at most 2^50 (1 PiB). Of what the pinned buffers and targets leave,
	// a fifth rations reads; of the rest, half is kept by the workers between samples and
	// half is a pool that large images borrow from one at a time. Default: the pinned
	// buffers and targets plus max(640 MiB, 64 MiB + 64 MiB per worker), which admits
	// photos of up to about 26 megapixels with 2 workers (the loader reserves 10 bytes
	// per source pixel for decoding); larger ones are bad samples (decode.ErrTooLarge)
	// unless it is raised.
	// What the loader lets go of is given back to the system when the process's
	// anonymous memory nears what it was at New plus MemoryBudget, less the batch
	// buffers the tuner may map but has not (Stats.Memory.Returns).
	MemoryBudget int64
}

// DeviceConfig is Config.Device; see there.
type DeviceConfig struct {
	// Device is where batches are delivered: "cpu" (the host backend: batches stay in the
	// pinned host buffers), "cuda" or "cuda:N" (GPU N: each finished batch is copied
	// asynchronously into a ring of Prefetch device buffers, allocated by New, while the
	// consumer uses the previous one), or "auto" (cuda:0 when a usable CUDA driver and GPU
	// are there, else cpu, with one log line saying why). cuda:N without a usable driver or
	// GPU is an error from New saying what is missing. Default "cpu".
	Name string
	// GPU, when set, is a device the caller opened (gpu.Open, or gpu/cuinterop for a
	// gorgonia.org/cu context); it overrides Device, and the loader does not close it.
	GPU *gpu.Device
	// Device.Cast packs uint8 NHWC pixels on the host, copies those (a quarter of the
	// bytes of float32) and converts them on the device into Pack's dtype, layout and
	// normalisation with a small kernel, bit for bit what the host would have written.
	// Pack.DType must be a float type. On the cpu device the conversion runs on the CPU
	// after batching, into a separate buffer. Augment ops on the packed sample
	// (RandomErasing) are refused with it: uint8 pixels cannot hold normalised values.
	// Default false.
	Cast bool
}

// BadConfig is Config.Bad; see there.
type BadConfig struct {
	// Fail ends the epoch with an error naming the file at the first sample that cannot
	// be read or decoded. Default false: the loader skips it — counts and logs it, with
	// its path and reason, and fills its slot with a deterministic replacement so batches
	// stay full.
	Fail bool
	// MaxFraction ends the epoch with an error once more than this fraction of the
	// epoch's samples, and more than one, are bad files (when skipping; each file counted
	// once however often it is drawn): one bad file is never a reason to stop, whatever
	// the dataset's size. At most 1; negative means no limit. Default 0.01.
	MaxFraction float64
}

// hostPack is how samples are packed on the host: Pack, or with Device.Cast uint8 NHWC
// pixels of Pack's size.
func (c *Config) hostPack() pack.Options {
	if c.Device.Cast {
		return pack.Options{Width: c.Pack.Width, Height: c.Pack.Height, Layout: pack.NHWC, DType: pack.Uint8}
	}
	return c.Pack
}

// String prints the effective configuration, for training logs.
func (c *Config) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "batch=%d drop_last=%t workers=%d io_workers=%d prefetch=%d seed=%d sequential=%t",
		c.Batch.Size, c.Batch.DropLast, c.Tuning.Workers, c.Tuning.IOWorkers, c.Tuning.Prefetch, c.Order.Seed, c.Order.Sequential)
	if c.Tuning.NoAutotune {
		b.WriteString(" autotune=false")
	} else {
		fmt.Fprintf(&b, " cpu_limit=%g", c.Tuning.CPULimit)
	}
	fmt.Fprintf(&b, " rank=%d/%d drop_uneven=%t on_error=%v max_bad=%g budget=%d decode={%s} augment=%v pack={%s}",
		c.Order.Rank, c.Order.World, c.Order.DropUneven, map[bool]string{false: "skip", true: "fail"}[c.Bad.Fail], c.Bad.MaxFraction, c.Tuning.MemoryBudget, c.Decode.String(), c.Augment, c.Pack.String())
	if c.Device.GPU != nil {
		fmt.Fprintf(&b, " device=%s", c.Device.GPU.Name())
	} else {
		fmt.Fprintf(&b, " device=%s", c.Device.Name)
	}
	if c.Order.Mode != SampleOrder {
		fmt.Fprintf(&b, " order=%v partitions=%d shuffle_block=%d", c.Order.Mode, c.Order.Partitions, c.Order.ShuffleBlock)
	}
	if c.Order.RanksFromEnv {
		b.WriteString(" ranks_from_env=true")
	}
	if c.Batch.MicroBatches > 1 {
		fmt.Fprintf(&b, " micro_batches=%d", c.Batch.MicroBatches)
	}
	if c.Device.Cast {
		b.WriteString(" device_cast=true")
	}
	if c.Mix.Dense() {
		fmt.Fprintf(&b, " mix={%v}", c.Mix)
	}
	if c.FullDecode {
		b.WriteString(" full_decode=true")
	}
	if c.Fidelity != Fast {
		fmt.Fprintf(&b, " fidelity=%v", c.Fidelity)
	}
	if c.StopAfter != AllStages {
		fmt.Fprintf(&b, " stop_after=%v", c.StopAfter)
	}
	if c.SampleCache != nil {
		o := c.SampleCache.Options()
		fmt.Fprintf(&b, " cache={dir=%s %s fill=%g}", c.SampleCache.Dir(), o.String(), c.SampleCacheFill)
	}
	return b.String()
}
