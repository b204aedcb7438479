package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/conveyor-ml/conveyor/augment"
	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/internal/synth"
	"github.com/conveyor-ml/conveyor/pipeline"
)

// benchResult is what --json prints.
type benchResult struct {
	Dataset    string        `json:"dataset"`
	Recipe     string        `json:"recipe"`
	Images     int64         `json:"images"`
	Seconds    float64       `json:"seconds"`
	ImagesPerS float64       `json:"images_per_s"`
	MBPerS     float64       `json:"mb_per_s"`
	BadSamples int64         `json:"bad_samples"`
	Epochs     []epochResult `json:"epochs"`
	Backend    string        `json:"decode_backend"`
	Config     string        `json:"config"`
	// Cache use, summed over epochs: samples read from the cache (--cache), stored into
	// it, and not stored because filling had used its --cache-fill share.
	CacheHits     int64       `json:"cache_hits"`
	CacheStored   int64       `json:"cache_stored"`
	CacheDeferred int64       `json:"cache_deferred"`
	Cache         *cacheState `json:"cache,omitempty"` // the --cache directory at the end
}

type cacheState struct {
	Dir      string `json:"dir"`
	Codec    string `json:"codec"`
	Records  int    `json:"records"`
	Shards   int    `json:"shards"`
	Bytes    int64  `json:"bytes"`
	Full     bool   `json:"full"`
	Disabled string `json:"disabled,omitempty"`
}

type epochResult struct {
	Epoch       int     `json:"epoch"`
	Images      int64   `json:"images"`
	Seconds     float64 `json:"seconds"`
	ImagesPerS  float64 `json:"images_per_s"`
	CacheHits   int64   `json:"cache_hits"`
	CacheStored int64   `json:"cache_stored"`
}

func bench(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: conveyor bench [DIR] [flags]

Measures loader throughput on the ImageFolder tree DIR (class = first-level folder), or
on the converted dataset DIR (one holding %s, made by conveyor convert); without DIR,
on a built-in synthetic set of ~500x375 JPEGs.

flags:
`, cache.InfoName)
		fs.PrintDefaults()
	}
	recipe := fs.String("recipe", "train", "preprocessing: train (RandomResizedCrop, flip) or eval (resize, centre crop)")
	size := fs.Int("size", 224, "output image side")
	batch := fs.Int("batch", 64, "batch size")
	workers := fs.Int("workers", runtime.GOMAXPROCS(0), "CPU workers (decode, augment, pack)")
	ioWorkers := fs.Int("io-workers", 0, "concurrent reads (default max(4, workers))")
	prefetch := fs.Int("prefetch", 2, "batches in flight ahead of the consumer")
	epochs := fs.Int("epochs", 1, "epochs to run")
	dtype := fs.String("dtype", "float32", "output dtype: uint8, float32, float16, bfloat16")
	layout := fs.String("layout", "nchw", "output layout: nchw or nhwc")
	normalize := fs.Bool("normalize", true, "normalise with ImageNet mean/std (float dtypes)")
	seed := fs.Uint64("seed", 0, "seed for order and augmentation")
	images := fs.Int("images", 1000, "images in the built-in synthetic set (without DIR)")
	synthDir := fs.String("synthetic-dir", "", "where the built-in set is written (default: the user cache directory)")
	jsonOut := fs.Bool("json", false, "print one JSON object instead of text")
	cacheDir := fs.String("cache", "", "cache directory the loader fills in the first epoch and reads from later (default: none)")
	cacheCodec := fs.String("cache-codec", string(cache.S2), fmt.Sprintf("how --cache stores pixels: %v", cache.Codecs))
	cacheFill := fs.Float64("cache-fill", 0, "share of worker time storing into --cache may take, 0 to 1; 1 stores every sample at once (0: the loader's default, 0.1)")
	var cacheMax byteSize
	fs.Var(&cacheMax, "cache-max-bytes", "bound on --cache's size, e.g. 50G (0: none)")
	var dir string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		dir, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 1 || (fs.NArg() == 1 && dir != "") {
		return fmt.Errorf("bench: one DIR at most, got %q", append([]string{dir}, fs.Args()...))
	}
	if fs.NArg() == 1 {
		dir = fs.Arg(0)
	}
	logf := func(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }

	dt, err := augment.ParseDType(*dtype)
	if err != nil {
		return err
	}
	lay, err := augment.ParseLayout(*layout)
	if err != nil {
		return err
	}
	if !slices.Contains(pipeline.Recipes, *recipe) {
		return fmt.Errorf("bench: unknown recipe %q (have %v)", *recipe, pipeline.Recipes)
	}

	name := dir
	if dir == "" {
		if dir, err = syntheticSet(*synthDir, *images, logf); err != nil {
			return err
		}
		name = fmt.Sprintf("synthetic(%d)", *images)
	}
	var src pipeline.Source
	if _, err := os.Stat(filepath.Join(dir, cache.InfoName)); err == nil {
		if *cacheDir != "" {
			return fmt.Errorf("bench: %s is a converted dataset, a cache already; leave out --cache", dir)
		}
		conv, err := pipeline.OpenConverted(dir)
		if err != nil {
			return err
		}
		defer conv.Close() // after the loader's Close, deferred below
		src = conv
	} else if src, err = pipeline.Dir(dir); err != nil {
		return err
	}
	cfg := pipeline.Config{
		BatchSize: *batch, Workers: *workers, IOWorkers: *ioWorkers, Prefetch: *prefetch, Seed: *seed,
		Sequential: *recipe == "eval",
		Pack:       augment.PackOptions{Width: *size, Height: *size, DType: dt, Layout: lay, Normalize: *normalize && dt != augment.Uint8},
		CacheFill:  *cacheFill,
		Logf:       logf,
	}
	if *cacheDir != "" {
		codec, err := cache.ParseCodec(*cacheCodec)
		if err != nil {
			return err
		}
		c, err := cache.Open(*cacheDir, &cache.Options{Codec: codec, MaxBytes: int64(cacheMax), Logf: logf})
		if err != nil {
			return err
		}
		defer c.Close() // after the loader's Close, deferred below
		cfg.Cache = c
	}
	if err := pipeline.ApplyRecipe(&cfg, *recipe, *size); err != nil {
		return err
	}
	ld, err := pipeline.New(src, &cfg)
	if err != nil {
		return err
	}
	defer ld.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res := benchResult{Dataset: name, Recipe: *recipe, Backend: ld.DecodeBackend()}
	eff := ld.Config()
	res.Config = eff.String()
	start := time.Now()
	for e := range *epochs {
		t0 := time.Now()
		before := ld.Stats()
		var n int64
		for b, err := range ld.Epoch(ctx, e) {
			if err != nil {
				return err
			}
			n += int64(b.Len)
			b.Release()
		}
		dt := time.Since(t0).Seconds()
		after := ld.Stats()
		er := epochResult{Epoch: e, Images: n, Seconds: dt, ImagesPerS: float64(n) / dt,
			CacheHits: after.CacheHits - before.CacheHits, CacheStored: after.CacheStored - before.CacheStored}
		res.Epochs = append(res.Epochs, er)
		res.Images += n
		if !*jsonOut {
			fmt.Fprintf(stdout, "conveyor epoch=%d images=%d seconds=%.2f images_per_s=%.1f", e, n, dt, er.ImagesPerS)
			if cfg.Cache != nil {
				fmt.Fprintf(stdout, " cache_hits=%d cache_stored=%d", er.CacheHits, er.CacheStored)
			}
			fmt.Fprintln(stdout)
		}
	}
	res.Seconds = time.Since(start).Seconds()
	st := ld.Stats()
	res.ImagesPerS = float64(res.Images) / res.Seconds
	res.MBPerS = float64(st.Read.Bytes) / 1e6 / res.Seconds
	res.BadSamples = st.BadSamples
	res.CacheHits, res.CacheStored, res.CacheDeferred = st.CacheHits, st.CacheStored, st.CacheDeferred
	if c := cfg.Cache; c != nil {
		cs := c.Stats()
		res.Cache = &cacheState{Dir: c.Dir(), Codec: string(c.Options().Codec), Records: cs.Records, Shards: cs.Shards,
			Bytes: cs.Bytes, Full: cs.Full, Disabled: cs.Disabled}
	}
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		return enc.Encode(res)
	}
	fmt.Fprintf(stdout, "conveyor total images=%d seconds=%.2f images_per_s=%.1f mb_per_s=%.1f bad_samples=%d decode=%s\n",
		res.Images, res.Seconds, res.ImagesPerS, res.MBPerS, res.BadSamples, res.Backend)
	if cs := res.Cache; cs != nil {
		fmt.Fprintf(stdout, "conveyor cache hits=%d stored=%d deferred=%d records=%d bytes=%d full=%t dir=%s\n",
			res.CacheHits, res.CacheStored, res.CacheDeferred, cs.Records, cs.Bytes, cs.Full, cs.Dir)
		if cs.Disabled != "" {
			fmt.Fprintf(stdout, "conveyor cache writing disabled: %s\n", cs.Disabled)
		}
	}
	return nil
}

// syntheticSet returns the directory of the built-in benchmark set, generating it once
// into dir, or by default into the user's cache directory.
func syntheticSet(dir string, n int, logf func(string, ...any)) (string, error) {
	if n < 10 {
		return "", fmt.Errorf("bench: --images %d: need at least 10", n)
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
		return "", fmt.Errorf("bench: synthetic set: %w", err)
	}
	return dir, os.WriteFile(done, nil, 0o644)
}
