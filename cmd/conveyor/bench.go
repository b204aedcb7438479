package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/internal/synth"
	"github.com/conveyor-ml/conveyor/mixup"
	"github.com/conveyor-ml/conveyor/objstore"
	"github.com/conveyor-ml/conveyor/pack"
	"github.com/conveyor-ml/conveyor/pipeline"
)

// benchResult is what --json prints: one run's report, with the dataset and recipe, plus
// the stage ceilings with --stages, or every run of a sweep.
type benchResult struct {
	Dataset string `json:"dataset"`
	Recipe  string `json:"recipe"`
	// Fidelity is the pixels' fidelity: "exact" or "fast".
	Fidelity string  `json:"fidelity"`
	Samples  int     `json:"samples"`
	Classes  int     `json:"classes"`
	OpenS    float64 `json:"open_s"` // listing the dataset (or opening its index)
	runReport

	Ceilings   []ceiling `json:"ceilings,omitempty"`
	Bottleneck string    `json:"bottleneck,omitempty"`
	H2D        string    `json:"h2d,omitempty"` // why the host-to-device copy was not measured

	Sweep []string     `json:"sweep,omitempty"` // the swept settings, x axis first
	Runs  []*runReport `json:"runs,omitempty"`
	Plot  string       `json:"plot,omitempty"`

	// ObjStore: a remote dataset's object-store and shard-cache counters, indexing
	// included.
	ObjStore *objStats `json:"objstore,omitempty"`
	store    *pipeline.Dataset
}

// objStats is objstore.Stats as bench reports it.
type objStats struct {
	Requests     int64 `json:"requests"`
	BytesFetched int64 `json:"bytes_fetched"`
	Retries      int64 `json:"retries"`
	Hits         int64 `json:"shard_cache_hits"`
	Misses       int64 `json:"shard_cache_misses"`
	Evictions    int64 `json:"shard_cache_evictions"`
	Fetched      int64 `json:"shards_fetched"`
	PeakBytes    int64 `json:"shard_cache_peak_bytes"`
}

// fillStore records the remote dataset's counters, once the runs are over.
func (res *benchResult) fillStore() {
	if res.store == nil {
		return
	}
	s := res.store.Stats()
	res.ObjStore = &objStats{Requests: s.Requests, BytesFetched: s.BytesFetched, Retries: s.Retries,
		Hits: s.Hits, Misses: s.Misses, Evictions: s.Evictions, Fetched: s.Fetched, PeakBytes: s.PeakBytes}
}

func bench(args []string, stdout io.Writer) error { return benchTo(args, stdout, os.Stderr) }

// onErrorPolicies are the values of --on-error.
var onErrorPolicies = map[string]pipeline.Policy{pipeline.Skip.String(): pipeline.Skip, pipeline.Fail.String(): pipeline.Fail}

// benchUsage is bench's help, before the flags; %s is the converted dataset's info file.
const benchUsage = `usage: conveyor bench [DIR | SHARD.tar ... | URL] [flags]

Measures loader throughput on the ImageFolder tree DIR (DIR/CLASS/*.jpg, one folder
per class), on the converted dataset DIR (one holding %s, made by conveyor
convert), or on WebDataset tar shards (SHARD.tar ..., or a quoted pattern such as
'DIR/train-*.tar' or 'DIR/train-{000..099}.tar'), local or in object storage
(s3://bucket/train-{000000..001023}.tar, s3://bucket/prefix/,
https://host/train-{0..9}.tar), or named by a shard index beside them
(s3://bucket/train.json, written by conveyor inspect SHARDS --json); without DIR, on a built-in synthetic set of ~500x375
JPEGs. Prints one line per epoch and a report: images/s, MB/s read, CPU, memory, time to
first batch, where the stages' time went and how full the queues were.

Remote shards are indexed at start (or, with --shard-index or a shard index with class
names as the URL, each when first read), then
the shard cache is emptied, so that the epochs measure streaming from the store
(prefetched in the loader's order into --shard-cache, within --shard-cache-max-bytes).
A converted dataset in object storage (s3://bucket/prefix/ holding dataset.json) has
its indexes fetched at start and its shards streamed the same way; with --order shards
it is read shard by shard (Converted.ByShard). The report adds requests, bytes fetched, retries and
shard-cache hits, misses and evictions. S3 credentials, region and endpoint come from
the standard AWS configuration (AWS_PROFILE, AWS_ENDPOINT_URL, ...).

  --stages           also run read only, read+decode and read+decode+augment, and name
                     the stage that limits throughput
  --step 30ms        hold each batch for a simulated training step and report the share
                     of time the consumer waited for input
  --workers 1,2,4    (likewise --prefetch, --batch) sweep the setting: a table and a PNG
                     plot of images/s against it (--plot)
  --micro-batches 4  deliver each batch as 4 micro-batches, for gradient accumulation;
                     the report's pinned and device bytes are those of one micro-batch
                     per buffer
  --mixup 0.8 --cutmix 1.0
                     mix every batch after packing (timm's Mixup: each batch picks
                     MixUp or CutMix), with soft targets; --smoothing 0.1 smooths them
  --on-error fail    end the run at the first file that cannot be read or decoded,
                     instead of replacing it; --max-bad bounds the share replaced
  --order shards --partitions 8 --rank-from-env
                     the shard-aware elastic order, as one rank of a torchrun or srun
                     launch measures its share of each epoch

A converted DIR is checked against the manifest its conversion recorded: samples in a
damaged or truncated shard are bad samples (--max-bad applies), and a dataset whose
conversion did not complete, or is still running, is refused unless --allow-incomplete.

flags:
`

func benchTo(args []string, stdout, stderr io.Writer) (err error) {
	ctx, stop := commandContext()
	defer stop()
	defer func() { err = interrupted(ctx, err) }()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), benchUsage, cache.InfoName)
		fs.PrintDefaults()
	}
	f := newBenchFlags(fs)
	pos, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	if err := f.check(pos); err != nil {
		return err
	}
	stopProfiles, err := startProfiles(f.cpuProfile, f.memProfile, stderr)
	if err != nil {
		return err
	}
	defer stopProfiles()

	pr := newProgress(stderr)
	res := benchResult{Recipe: f.recipe}
	src, closeSource, err := f.openSource(ctx, pos, pr.logf, &res)
	if err != nil {
		return err
	}
	defer closeSource() // after the loaders' Close
	base, closeCache, err := f.config(pr.logf)
	if err != nil {
		return err
	}
	defer closeCache() // after the loaders' Close
	res.Fidelity = base.Fidelity.String()
	return f.run(ctx, stdout, &res, src, base, pr)
}

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
	deviceConvert            bool
	fidelity                 string
	fullDecode               bool
	cpuProfile, memProfile   string
	onError                  string
	allowIncomplete          bool
	mixUp, cutMix            float64
	mixSwitch, mixProb       float64
	smoothing, maxBad        float64
	shardCache               string
	shardFetches             int
	shardIndex               string
	shardPrefetch            int
	shardCacheMax, cacheMax  byteSize
	budget                   byteSize

	// Set by check.
	dir    string // the one DIR or the first shard argument; "" for the synthetic set
	shards bool   // the arguments name WebDataset shards or a dataset URL
	ord    pipeline.Order
	dt     pack.DType
	lay    pack.Layout
	codec  cache.Codec
	policy pipeline.Policy
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
	fs.StringVar(&f.order, "order", pipeline.SampleOrder.String(), fmt.Sprintf("sample order: %v (shards: the shard-aware elastic order for sharded datasets)", pipeline.Orders))
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
	fs.BoolVar(&f.deviceConvert, "device-convert", false, "copy uint8 pixels and convert to --dtype/--layout/--normalize on the device")
	fs.StringVar(&f.fidelity, "fidelity", "", "pixels: exact (torchvision's with PIL, bit for bit: full decode, Pillow's resampling) or fast (DCT scaling, crop-aware decoding); default: the recipe's (eval exact, train and randaugment fast)")
	fs.BoolVar(&f.fullDecode, "full-decode", false, "decode whole images even where the recipe's random crop allows decoding only the crop")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof FILE)")
	fs.StringVar(&f.memProfile, "memprofile", "", "write a heap profile (allocations and what is live at the end) to this file (go tool pprof -sample_index=alloc_space FILE)")
	fs.StringVar(&f.onError, "on-error", pipeline.Skip.String(), "bad files (unreadable, undecodable): skip (log, count and replace them) or fail (end the run at the first)")
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
	if f.ord, err = pipeline.ParseOrder(f.order); err != nil {
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
	policy, ok := onErrorPolicies[f.onError]
	if f.fidelity != "" {
		if f.fid, err = pipeline.ParseFidelity(f.fidelity); err != nil {
			return usagef("--fidelity: %v", err)
		}
	}
	if err := f.checkRanges(len(pos), ok); err != nil {
		return err
	}
	f.policy = policy
	if f.maxBad == 0 {
		// No bad sample allowed: pipeline.Config reads MaxBadFraction 0 as its default
		// (0.01), and Fail ends the epoch at the first bad sample, naming it.
		f.policy = pipeline.Fail
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

// startProfiles starts the CPU profile and arranges the heap profile the flags ask for;
// stop ends the one and writes the other.
func startProfiles(cpuPath, memPath string, stderr io.Writer) (stop func(), err error) {
	var cpu, mem *os.File
	stop = func() {
		if mem != nil {
			if err := pprof.Lookup("allocs").WriteTo(mem, 0); err != nil {
				fmt.Fprintf(stderr, "conveyor: --memprofile: %v\n", err)
			}
			mem.Close()
		}
		if cpu != nil {
			pprof.StopCPUProfile()
			cpu.Close()
		}
	}
	if cpuPath != "" {
		f, err := os.Create(cpuPath)
		if err != nil {
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
		cpu = f
	}
	if memPath != "" {
		f, err := os.Create(memPath)
		if err != nil {
			stop()
			return nil, fmt.Errorf("--memprofile: %w", err)
		}
		mem = f
	}
	return stop, nil
}

// openSource opens what bench reads: the synthetic set, WebDataset shards or a dataset
// URL, a converted DIR or an image folder; it fills res's dataset fields. close releases
// the dataset once the loaders are closed.
func (f *benchFlags) openSource(ctx context.Context, pos []string, logf func(string, ...any), res *benchResult) (src pipeline.Source, closeAll func(), err error) {
	var closers []func() error
	release := func() {
		for _, c := range slices.Backward(closers) {
			c()
		}
	}
	defer func() {
		if err != nil {
			release()
		}
	}()
	dir := f.dir
	res.Dataset = dir
	if dir == "" {
		if dir, err = syntheticSet(f.synthDir, f.images, logf); err != nil {
			return nil, nil, err
		}
		res.Dataset = fmt.Sprintf("synthetic(%d) %s", f.images, dir)
	}
	t0 := time.Now()
	switch {
	case f.shards:
		src, err = f.openShardSource(ctx, pos, logf, res, &closers)
	default:
		src, err = f.openDirSource(dir, logf, &closers)
	}
	if err != nil {
		return nil, nil, err
	}
	if f.readLatency > 0 {
		if _, ok := src.(slowFiles); !ok {
			return nil, nil, usagef("--read-latency applies to an image folder")
		}
	}
	res.OpenS = time.Since(t0).Seconds()
	res.Samples = src.Len()
	res.Classes = len(src.Classes())
	return src, release, nil
}

// openShardSource opens WebDataset shards, or the dataset a URL names (shards, a shard
// index or a converted dataset, local or remote), adding what must be closed to closers.
func (f *benchFlags) openShardSource(ctx context.Context, pos []string, logf func(string, ...any), res *benchResult, closers *[]func() error) (pipeline.Source, error) {
	if f.allowIncomplete && !datasetURL(pos) {
		return nil, usagef("--allow-incomplete applies to a converted dataset (a DIR or URL holding %s)", cache.InfoName)
	}
	if !datasetURL(pos) {
		if f.shardIndex != "" {
			return nil, usagef("--shard-index applies to one shard list or URL ('DIR/train-{000..099}.tar', s3://...)")
		}
		src, err := openShards(pos, logf)
		if err != nil {
			return nil, err
		}
		res.Dataset = fmt.Sprint(src)
		return src, nil
	}
	wo := &pipeline.WebDatasetOptions{Logf: logf, PrefetchShards: f.shardPrefetch}
	if f.shardIndex != "" {
		var err error
		if wo.ShardSamples, wo.Classes, err = readShardIndex(f.shardIndex); err != nil {
			return nil, err
		}
	}
	ds, err := pipeline.OpenDataset(ctx, pos[0], &pipeline.DatasetOptions{
		Cache:      &objstore.CacheOptions{Dir: f.shardCache, MaxBytes: int64(f.shardCacheMax), Concurrency: f.shardFetches},
		WebDataset: wo,
		Converted:  pipeline.ConvertedOptions{AllowIncomplete: f.allowIncomplete, Logf: logf, PrefetchShards: f.shardPrefetch},
	})
	if err != nil {
		return nil, err
	}
	*closers = append(*closers, ds.Close)
	conv, converted := ds.Source.(*pipeline.Converted)
	if f.allowIncomplete && !converted {
		return nil, usagef("--allow-incomplete applies to a converted dataset (a DIR or URL holding %s), not %v", cache.InfoName, ds)
	}
	if ds.Remote() {
		if f.shardIndex == "" {
			// Indexing fetched every shard; start the epochs from an empty cache,
			// as a dataset larger than the cache would.
			ds.Store.Release(ds.Store.Names...)
		}
		res.store = ds
	}
	src, name := ds.Source, ds.String()
	if converted && f.ord == pipeline.ShardOrder {
		src = conv.ByShard() // see openDirSource
	}
	res.Dataset = fmt.Sprint(src)
	if name != "" {
		res.Dataset = name // a fetched converted dataset by its URL
	}
	return src, nil
}

// openDirSource opens a local DIR: a converted dataset, or an image folder (slowed by
// --read-latency), adding what must be closed to closers.
func (f *benchFlags) openDirSource(dir string, logf func(string, ...any), closers *[]func() error) (pipeline.Source, error) {
	if err := checkDir(dir); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, cache.InfoName)); err != nil {
		if f.allowIncomplete {
			return nil, usagef("--allow-incomplete applies to a converted dataset (a DIR holding %s)", cache.InfoName)
		}
		src, err := openImageFolder(dir)
		if err != nil {
			return nil, err
		}
		if f.readLatency > 0 {
			src = slowFiles{src.(pipeline.FileSource), f.readLatency}
		}
		return src, nil
	}
	if f.cacheDir != "" {
		return nil, fmt.Errorf("%s is a converted dataset, a cache already; leave out --cache", dir)
	}
	conv, err := pipeline.OpenConverted(dir, pipeline.ConvertedOptions{AllowIncomplete: f.allowIncomplete, Logf: logf})
	if err != nil {
		return nil, err
	}
	*closers = append(*closers, conv.Close)
	if f.ord == pipeline.ShardOrder {
		// The Converted declares no shards (it lists samples in path order):
		// the shard order over it would read one-sample shards.
		return conv.ByShard(), nil
	}
	return conv, nil
}

// config builds the loader configuration the flags describe, the recipe applied, and
// opens --cache; closeCache closes it once the loaders are closed.
func (f *benchFlags) config(logf func(string, ...any)) (base pipeline.Config, closeCache func(), err error) {
	base = pipeline.Config{
		IOWorkers: f.ioWorkers, NoAutotune: f.noAutotune, CPULimit: f.cpuLimit, MicroBatches: f.micro, Seed: f.seed, MemoryBudget: int64(f.budget),
		Order: f.ord, Partitions: f.partitions, ShuffleBlock: f.shuffleBlock, RankFromEnv: f.rankFromEnv,
		Pack:      pack.Options{Width: f.size, Height: f.size, DType: f.dt, Layout: f.lay, Normalize: f.normalize && f.dt != pack.Uint8},
		CacheFill: f.cacheFill, FullDecode: f.fullDecode, Device: f.device, DeviceConvert: f.deviceConvert,
		OnError: f.policy, MaxBadFraction: f.maxBad, Logf: logf,
		Mix: mixup.Options{MixUp: f.mixUp, CutMix: f.cutMix, SwitchProb: f.mixSwitch, Prob: f.mixProb, Smoothing: f.smoothing},
	}
	closeCache = func() {}
	if f.cacheDir != "" {
		c, err := cache.Open(f.cacheDir, &cache.Options{Codec: f.codec, MaxBytes: int64(f.cacheMax), Logf: logf})
		if err != nil {
			return base, nil, err
		}
		closeCache = func() { c.Close() }
		base.Cache = c
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

// run measures what the flags ask for (a sweep, the stages, or one configuration) and
// prints the report.
func (f *benchFlags) run(ctx context.Context, stdout io.Writer, res *benchResult, src pipeline.Source, base pipeline.Config, pr *progress) error {
	opts := runOptions{epochs: f.epochs, pr: pr}
	if !f.jsonOut {
		opts.epochLine = func(er epochResult) { printEpoch(stdout, er, base.Cache != nil) }
	}
	run := func(cfg pipeline.Config, label string, step time.Duration) (*runReport, error) {
		o := opts
		o.label, o.step = label, step
		rep, err := measure(ctx, src, &cfg, &o)
		if err != nil && ctx.Err() != nil {
			err = fmt.Errorf("stopped reading %s: %w", res.Dataset, err)
		}
		return rep, err
	}
	one := base
	one.Workers, one.Prefetch, one.BatchSize = f.workers[0], f.prefetch[0], f.batch[0]

	switch {
	case len(f.swept) > 0:
		return benchSweep(stdout, res, base, f.swept, f.lists, f.plotPath, f.step, f.jsonOut, run)
	case f.stages:
		return benchStages(stdout, res, one, f.step, f.jsonOut, run)
	}
	rep, err := run(one, "", f.step)
	if err != nil {
		return err
	}
	res.runReport = *rep
	res.fillStore()
	if f.jsonOut {
		return json.NewEncoder(stdout).Encode(res)
	}
	printReport(stdout, res)
	return nil
}

// runFunc measures one configuration, holding each batch for step.
type runFunc func(cfg pipeline.Config, label string, step time.Duration) (*runReport, error)

// benchStages runs the pipeline stopped after each stage in turn, then whole, and names
// the stage that adds the most time per image. The ceilings are the loader's own, with a
// consumer that takes no time; with a step, one more full run measures the consumer's
// waits and is the report.
func benchStages(stdout io.Writer, res *benchResult, cfg pipeline.Config, step time.Duration, jsonOut bool, run runFunc) error {
	for _, s := range []pipeline.Stage{pipeline.ReadStage, pipeline.DecodeStage, pipeline.AugmentStage, pipeline.AllStages} {
		c := cfg
		c.StopAfter = s
		if !jsonOut {
			fmt.Fprintf(stdout, "conveyor stages=%v\n", s)
		}
		rep, err := run(c, "stages="+s.String(), 0)
		if err != nil {
			return err
		}
		res.Ceilings = append(res.Ceilings, ceiling{Stage: s.String(), ImagesPerS: rep.SteadyImagesPerS})
		res.runReport = *rep
	}
	if step > 0 {
		if !jsonOut {
			fmt.Fprintf(stdout, "conveyor stages=all step=%v\n", step)
		}
		rep, err := run(cfg, fmt.Sprintf("step=%v", step), step)
		if err != nil {
			return err
		}
		res.runReport = *rep
	}
	res.Bottleneck, _ = bottleneck(res.Ceilings)
	// The copy to the device overlaps the next batch's assembly, so it has no ceiling of
	// its own: it is inside the full pipeline's.
	if dev := res.Memory.Device; dev == "" || strings.HasPrefix(dev, "cpu") {
		res.H2D = "none: batches stay in host memory (--device cpu)"
	} else {
		res.H2D = "part of the full pipeline's ceiling (" + dev + ")"
	}
	res.fillStore()
	if jsonOut {
		return json.NewEncoder(stdout).Encode(res)
	}
	printReport(stdout, res)
	printCeilings(stdout, res)
	return nil
}

// sweptSettings lists the settings given more than one value, in a fixed order: the
// first is the plot's x axis.
func sweptSettings(vals map[string]intList) []string {
	var out []string
	for _, name := range []string{"workers", "prefetch", "batch"} {
		if len(vals[name]) > 1 {
			out = append(out, name)
		}
	}
	return out
}

// benchSweep runs every combination of the swept settings, prints a table and writes the
// plot of images/s against the first swept setting, one line per combination of the others.
func benchSweep(stdout io.Writer, res *benchResult, base pipeline.Config, swept []string, vals map[string]intList, plotPath string, step time.Duration, jsonOut bool,
	run runFunc) error {
	res.Sweep = swept
	for _, w := range vals["workers"] {
		for _, p := range vals["prefetch"] {
			for _, b := range vals["batch"] {
				cfg := base
				cfg.Workers, cfg.Prefetch, cfg.BatchSize = w, p, b
				label := fmt.Sprintf("workers=%d prefetch=%d batch=%d", w, p, b)
				if !jsonOut {
					fmt.Fprintf(stdout, "conveyor %s\n", label)
				}
				rep, err := run(cfg, label, step)
				if err != nil {
					return fmt.Errorf("%s: %w", label, err)
				}
				res.Runs = append(res.Runs, rep)
			}
		}
	}
	if plotPath == "" {
		plotPath = "conveyor-bench-" + swept[0] + ".png"
	}
	if err := plotSweep(plotPath, res); err != nil {
		return err
	}
	res.Plot = plotPath
	res.fillStore()
	if jsonOut {
		return json.NewEncoder(stdout).Encode(res)
	}
	printSweep(stdout, res)
	return nil
}

// syntheticSet returns the directory of the built-in benchmark set, generating it once
// into dir, or by default into the user's cache directory.
func syntheticSet(dir string, n int, logf func(string, ...any)) (string, error) {
	if n < 10 {
		return "", usagef("--images %d: need at least 10", n)
	}
	const classes = 10
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		dir = filepath.Join(base, "conveyor", fmt.Sprintf("synth-imagenet-v1-%d", n))
	}
	done := filepath.Join(dir, ".complete")
	if _, err := os.Stat(done); err == nil {
		return dir, nil
	}
	logf("conveyor: generating %d synthetic images in %s (once)", n, dir)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if _, err := synth.ImageNetLike(dir, classes, n/classes, 1); err != nil {
		return "", fmt.Errorf("synthetic set: %w", err)
	}
	return dir, os.WriteFile(done, nil, 0o644)
}

// readShardIndex reads the shard sample counts and class names of a shard index (what
// conveyor inspect SHARDS --json prints, or a wids index with class_names added).
func readShardIndex(path string) ([]int, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("--shard-index: %w", err)
	}
	var counts []int
	var classes []string
	var kind struct {
		Kind string `json:"__kind__"`
	}
	if x, err := pipeline.ParseShardIndex(data); err == nil {
		counts, _ = x.Counts()
		classes = x.Classes
	} else if json.Unmarshal(data, &kind) == nil && kind.Kind == pipeline.ShardIndexKind {
		return nil, nil, fmt.Errorf("--shard-index %s: %w", path, err) // a shard index, but a bad one
	} else {
		var idx shardsResult // written before the index's keys were added
		if err := json.Unmarshal(data, &idx); err != nil {
			return nil, nil, fmt.Errorf("--shard-index %s: %w", path, err)
		}
		counts, classes = idx.ShardSamples, idx.ShardIndex.Classes
	}
	if len(counts) == 0 || len(classes) == 0 {
		return nil, nil, fmt.Errorf("--shard-index %s: no shard counts or class_names (write it with conveyor inspect SHARDS --json)", path)
	}
	return counts, classes, nil
}

// slowFiles is a folder whose files each take latency to open: a slow disk or a network
// file system, for --read-latency.
type slowFiles struct {
	pipeline.FileSource
	latency time.Duration
}

func (s slowFiles) Open(i int) (fs.File, error) {
	time.Sleep(s.latency)
	return s.FileSource.Open(i)
}

func (s slowFiles) String() string {
	return fmt.Sprintf("%v with %v per open", s.FileSource, s.latency)
}
