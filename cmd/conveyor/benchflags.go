package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/mixup"
	"github.com/conveyor-ml/conveyor/pack"
	"github.com/conveyor-ml/conveyor/pipeline"
)

// benchFlags are bench's flags, and what check makes of them.
type benchFlags struct {
	recipe                   string
	size, epochs, micro      int
	batch, workers, prefetch intList
	ioWorkers                int
	noAutotune               bool
	cpuLimit                 float64
	readLatency              time.Duration
	dtype, layout            string
	normalize                bool
	seed                     uint64
	order                    string
	partitions, shuffleBlock int
	rankFromEnv              bool
	images                   int
	synthDir                 string
	jsonOut, stages          bool
	step                     time.Duration
	plotPath                 string
	cacheDir, cacheCodec     string
	cacheFill                float64
	device                   string
	deviceCast               bool
	fidelity                 string
	fullDecode               bool
	cpuProfile, memProfile   string
	onError                  string
	allowIncomplete          bool
	allowEmpty               bool // --allow-empty-classes
	mixUp, cutMix            float64
	mixSwitch, mixProb       float64
	smoothing, maxBad        float64
	shardCache               string
	shardFetches             int
	shardIndex               string
	shardPrefetch            int
	shardCacheMax, cacheMax  byteSize
	budget                   byteSize
	metricsAddr              string

	// Set by check.
	dir    string // the one DIR or the first shard argument; "" for the synthetic set
	shards bool   // the arguments name WebDataset shards or a dataset URL
	ord    pipeline.Order
	dt     pack.DType
	lay    pack.Layout
	codec  cache.Codec
	fail   bool // --on-error fail
	fid    pipeline.Fidelity
	lists  map[string]intList // the settings a list may sweep
	swept  []string           // those given more than one value
}

// newBenchFlags defines bench's flags on fs.
func newBenchFlags(fs *flag.FlagSet) *benchFlags {
	f := &benchFlags{batch: intList{64}, workers: intList{0}, prefetch: intList{0}} // workers, prefetch 0: the loader tunes them
	fs.StringVar(&f.recipe, "recipe", "train", "preprocessing: train (RandomResizedCrop, flip), eval (resize, centre crop) or randaugment (train, RandAugment(2, 9), RandomErasing(0.25))")
	fs.IntVar(&f.size, "size", 224, "output image side")
	fs.Var(&f.batch, "batch", "batch size; a list such as 32,64,128 sweeps it")
	fs.Var(&f.workers, "workers", "CPU workers (decode, augment, pack); a list such as 1,2,4 sweeps it (default: tuned at run time, starting at GOMAXPROCS)")
	fs.Var(&f.prefetch, "prefetch", "batches in flight ahead of the consumer; a list sweeps it (default: tuned at run time, starting at 2)")
	fs.IntVar(&f.ioWorkers, "io-workers", 0, "concurrent reads (default: tuned at run time, starting at max(4, workers))")
	fs.BoolVar(&f.noAutotune, "no-autotune", false, "keep --workers, --io-workers and --prefetch, when not given, at their starting values instead of tuning them at run time")
	fs.Float64Var(&f.cpuLimit, "cpu-limit", 0, "cores the autotuner lets the process use (0: GOMAXPROCS)")
	fs.DurationVar(&f.readLatency, "read-latency", 0, "with an image folder, wait this long before opening each file: a slow disk or network file system, for measuring how the loader hides latency")
	fs.IntVar(&f.micro, "micro-batches", 1, "deliver each batch as this many micro-batches (it must divide --batch): pinned and device buffers hold one micro-batch, --step and --prefetch count micro-batches")
	fs.IntVar(&f.epochs, "epochs", 1, "epochs to run")
	fs.StringVar(&f.dtype, "dtype", "float32", "output dtype: uint8, float32, float16, bfloat16")
	fs.StringVar(&f.layout, "layout", "nchw", "output layout: nchw or nhwc")
	fs.BoolVar(&f.normalize, "normalize", true, "normalise with ImageNet mean/std (float dtypes)")
	fs.Uint64Var(&f.seed, "seed", 0, "seed for order and augmentation")
	fs.StringVar(&f.order, "order", pipeline.SampleOrder.String(), "sample order: samples or shards (shards: the shard-aware elastic order for sharded datasets)")
	fs.IntVar(&f.partitions, "partitions", 0, "with --order shards, canonical partitions: a multiple of the world size (0: the world size)")
	fs.IntVar(&f.shuffleBlock, "shuffle-block", 0, "with --order shards, samples shuffled together within a partition (0: 4 mean shards; at least 262144 on a converted dataset)")
	fs.BoolVar(&f.rankFromEnv, "rank-from-env", false, "take rank and world size from torchrun's RANK/WORLD_SIZE or Slurm's SLURM_PROCID/SLURM_NTASKS and measure this rank's share of each epoch")
	fs.IntVar(&f.images, "images", 1000, "images in the built-in synthetic set (without DIR)")
	fs.StringVar(&f.synthDir, "synthetic-dir", "", "where the built-in set is written (default: the user cache directory)")
	fs.BoolVar(&f.jsonOut, "json", false, "print one JSON object instead of text")
	fs.BoolVar(&f.stages, "stages", false, "measure each stage's ceiling (read; +decode; +augment; full) and name the bottleneck")
	fs.DurationVar(&f.step, "step", 0, "simulated training step per batch, e.g. 30ms; reports the share of time spent waiting for input")
	fs.StringVar(&f.plotPath, "plot", "", "PNG the sweep's plot is written to (default conveyor-bench-SETTING.png)")
	fs.StringVar(&f.cacheDir, "cache", "", "cache directory the loader fills in the first epoch and reads from later (default: none)")
	fs.StringVar(&f.cacheCodec, "cache-codec", string(cache.S2), fmt.Sprintf("how --cache stores pixels: %v", cache.Codecs))
	fs.Float64Var(&f.cacheFill, "cache-fill", 0, "share of worker time storing into --cache may take, 0 to 1; 1 stores every sample at once (0: the loader's default, 0.1)")
	fs.StringVar(&f.device, "device", "cpu", "where batches go: cpu, auto, cuda or cuda:N (GPU N: asynchronous copies into a device ring)")
	fs.BoolVar(&f.deviceCast, "device-cast", false, "copy uint8 pixels and convert to --dtype/--layout/--normalize on the device")
	fs.StringVar(&f.fidelity, "fidelity", "", "pixels: exact (torchvision's with PIL, bit for bit: full decode, Pillow's resampling) or fast (DCT scaling, crop-aware decoding); default: the recipe's (eval exact, train and randaugment fast)")
	fs.BoolVar(&f.fullDecode, "full-decode", false, "decode whole images even where the recipe's random crop allows decoding only the crop")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof FILE)")
	fs.StringVar(&f.memProfile, "memprofile", "", "write a heap profile (allocations and what is live at the end) to this file (go tool pprof -sample_index=alloc_space FILE)")
	fs.StringVar(&f.onError, "on-error", "skip", "bad files (unreadable, undecodable): skip (log, count and replace them) or fail (end the run at the first)")
	fs.BoolVar(&f.allowEmpty, allowEmptyFlag, false, allowEmptyUsage)
	fs.BoolVar(&f.allowIncomplete, "allow-incomplete", false, "train on a converted DIR that is not known to be complete (its conversion stopped or is still running, it lost samples, or it has no manifest) instead of refusing it")
	fs.Float64Var(&f.mixUp, "mixup", 0, "mix every batch with MixUp, λ ~ Beta(A, A), as timm's Mixup (0: off); soft targets")
	fs.Float64Var(&f.cutMix, "cutmix", 0, "mix every batch with CutMix, λ ~ Beta(A, A) (0: off); with --mixup too, each batch picks one (--mix-switch)")
	fs.Float64Var(&f.mixSwitch, "mix-switch", 0.5, "with --mixup and --cutmix, the probability that a batch uses CutMix")
	fs.Float64Var(&f.mixProb, "mix-prob", 1, "the probability that a batch is mixed at all")
	fs.Float64Var(&f.smoothing, "smoothing", 0, "label smoothing ε of the soft targets, in [0, 1)")
	fs.Float64Var(&f.maxBad, "max-bad", 0.01, "with --on-error skip, end the run once more than this fraction of an epoch's samples are bad; 0: at the first (as --on-error fail), negative: no limit")
	fs.StringVar(&f.shardCache, "shard-cache", "", "directory remote shards are fetched into (default: a temporary directory, removed at exit)")
	fs.IntVar(&f.shardFetches, "shard-fetches", 0, "remote shards fetched at once (0: 4)")
	fs.StringVar(&f.shardIndex, "shard-index", "", "JSON of the shards' sample counts and class names (conveyor inspect SHARDS --json): index each shard when first read, so the first batch does not wait for every shard")
	fs.IntVar(&f.shardPrefetch, "shard-prefetch", 0, "shards asked for ahead of need, beyond those the loader's order reads at once (0: 4 WebDataset shards, 2 converted shards)")
	fs.Var(&f.shardCacheMax, "shard-cache-max-bytes", "bound on --shard-cache's disk use, e.g. 20G (0: 16 GiB)")
	fs.Var(&f.cacheMax, "cache-max-bytes", "bound on --cache's size, e.g. 50G (0: none)")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus metrics (the loader's, the Go runtime's, the process's and, for object storage, the shard cache's) at http://ADDR/metrics while the bench runs, e.g. :9100")
	fs.Var(&f.budget, "memory-budget", "every byte the loader may hold, e.g. 2Gi (0: the loader's default); raise it for photos over ~26 megapixels")
	return f
}

// check parses the flags' values and refuses any out of range, naming the flag; the
// first problem is the one reported.
func (f *benchFlags) check(pos []string) error {
	f.shards = shardArgs(pos)
	if len(pos) > 1 && !f.shards {
		return usagef("one DIR at most, got %d arguments: %q", len(pos), pos)
	}
	if len(pos) >= 1 {
		f.dir = pos[0]
	}
	var err error
	if err = f.ord.Set(f.order); err != nil {
		return usagef("--order: %v", err)
	}
	if f.dt, err = pack.ParseDType(f.dtype); err != nil {
		return usagef("--dtype: %v", err)
	}
	if f.lay, err = pack.ParseLayout(f.layout); err != nil {
		return usagef("--layout: %v", err)
	}
	if f.codec, err = cache.ParseCodec(f.cacheCodec); err != nil {
		return usagef("--cache-codec: %v", err)
	}
	fail, ok := onErrorPolicies[f.onError]
	if f.fidelity != "" {
		if err = f.fid.Set(f.fidelity); err != nil {
			return usagef("--fidelity: %v", err)
		}
	}
	if err := f.checkRanges(len(pos), ok); err != nil {
		return err
	}
	f.fail = fail
	if f.maxBad == 0 {
		// No bad sample allowed: pipeline.Config reads Bad.MaxFraction 0 as its default
		// (0.01), and Bad.Fail ends the epoch at the first bad sample, naming it.
		f.fail = true
	}
	f.lists = map[string]intList{"workers": f.workers, "prefetch": f.prefetch, "batch": f.batch}
	f.swept = sweptSettings(f.lists)
	if f.stages && len(f.swept) > 0 {
		return usagef("--stages measures one configuration; sweep %s without it", strings.Join(f.swept, ", "))
	}
	if f.plotPath != "" && len(f.swept) == 0 {
		return usagef("--plot draws a sweep: give --workers, --prefetch or --batch a list such as 1,2,4")
	}
	return nil
}

// checkRanges refuses the first numeric flag out of its range; npos is the count of
// arguments and policyOK whether --on-error named a policy.
func (f *benchFlags) checkRanges(npos int, policyOK bool) error {
	switch {
	case !slices.Contains(pipeline.Recipes, f.recipe):
		return usagef("--recipe %q: want one of %s", f.recipe, strings.Join(pipeline.Recipes, ", "))
	case f.size < 1:
		return usagef("--size %d < 1", f.size)
	case f.epochs < 1:
		return usagef("--epochs %d < 1", f.epochs)
	case f.micro < 1:
		return usagef("--micro-batches %d < 1", f.micro)
	case f.ioWorkers < 0:
		return usagef("--io-workers %d < 0", f.ioWorkers)
	case f.cpuLimit < 0:
		return usagef("--cpu-limit %g < 0", f.cpuLimit)
	case f.readLatency < 0:
		return usagef("--read-latency %v < 0", f.readLatency)
	case f.shardPrefetch < 0:
		return usagef("--shard-prefetch %d < 0", f.shardPrefetch)
	case f.shardFetches < 0:
		return usagef("--shard-fetches %d < 0", f.shardFetches)
	case f.shardCacheMax < 0:
		return usagef("--shard-cache-max-bytes %d < 0", f.shardCacheMax)
	case f.step < 0:
		return usagef("--step %v < 0", f.step)
	case f.cacheFill < 0 || f.cacheFill > 1:
		return usagef("--cache-fill %g not in [0, 1]", f.cacheFill)
	case !policyOK:
		return usagef("--on-error %q: want skip or fail", f.onError)
	case f.maxBad > 1:
		return usagef("--max-bad %g > 1 (a fraction of an epoch's samples; negative: no limit)", f.maxBad)
	case npos == 0 && f.images < 10:
		return usagef("--images %d: need at least 10", f.images)
	case !(f.mixUp >= 0) || !(f.cutMix >= 0):
		return usagef("--mixup %g and --cutmix %g must be ≥ 0 (0: off)", f.mixUp, f.cutMix)
	case !(f.mixSwitch > 0 && f.mixSwitch <= 1):
		return usagef("--mix-switch %g not in (0, 1]; for MixUp alone leave out --cutmix", f.mixSwitch)
	case !(f.mixProb > 0 && f.mixProb <= 1):
		return usagef("--mix-prob %g not in (0, 1]; for no mixing leave out --mixup and --cutmix", f.mixProb)
	case !(f.smoothing >= 0 && f.smoothing < 1):
		return usagef("--smoothing %g not in [0, 1)", f.smoothing)
	}
	return nil
}

// config builds the loader configuration the flags describe, the recipe applied, and
// opens --cache; closeCache closes it once the loaders are closed.
func (f *benchFlags) config(logf func(string, ...any)) (base pipeline.Config, closeCache func(), err error) {
	base = pipeline.Config{
		Batch:           pipeline.BatchConfig{MicroBatches: f.micro},
		Order:           pipeline.OrderConfig{Seed: f.seed, Mode: f.ord, Partitions: f.partitions, ShuffleBlock: f.shuffleBlock, RanksFromEnv: f.rankFromEnv},
		Tuning:          pipeline.TuningConfig{IOWorkers: f.ioWorkers, NoAutotune: f.noAutotune, CPULimit: f.cpuLimit, MemoryBudget: int64(f.budget)},
		Pack:            pack.Options{Width: f.size, Height: f.size, DType: f.dt, Layout: f.lay, Normalize: f.normalize && f.dt != pack.Uint8},
		Mix:             mixup.Options{MixUp: f.mixUp, CutMix: f.cutMix, SwitchProb: f.mixSwitch, Prob: f.mixProb, Smoothing: f.smoothing},
		Device:          pipeline.DeviceConfig{Name: f.device, Cast: f.deviceCast},
		Bad:             pipeline.BadConfig{Fail: f.fail, MaxFraction: f.maxBad},
		SampleCacheFill: f.cacheFill, FullDecode: f.fullDecode, Logf: logf,
	}
	closeCache = func() {}
	if f.cacheDir != "" {
		if _, err := os.Stat(filepath.Join(f.cacheDir, cache.InfoName)); err == nil {
			return base, nil, fmt.Errorf("--cache %s is a converted dataset (it holds %s): give the loader's cache a directory of its own", f.cacheDir, cache.InfoName)
		}
		c, err := cache.Open(f.cacheDir, &cache.Options{Codec: f.codec, MaxBytes: int64(f.cacheMax), Logf: logf})
		if err != nil {
			return base, nil, err
		}
		closeCache = func() { c.Close() }
		base.SampleCache = c
	}
	if err := pipeline.ApplyRecipe(&base, f.recipe, f.size); err != nil {
		closeCache()
		return base, nil, err
	}
	if f.fidelity != "" {
		base.Fidelity, base.Decode.Exact = f.fid, f.fid == pipeline.Exact
	}
	return base, closeCache, nil
}
