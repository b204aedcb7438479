package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/metrics/promconveyor"
	"github.com/conveyor-ml/conveyor/pipeline"
)

func bench(args []string, stdout io.Writer) error { return benchTo(args, stdout, os.Stderr) }

// onErrorPolicies are the values of --on-error: whether the first bad sample ends the
// run (pipeline.BadConfig.Fail).
var onErrorPolicies = map[string]bool{"skip": false, "fail": true}

// benchUsage is bench's help, before the flags; %s is the converted dataset's info file.
const benchUsage = `usage: conveyor bench [DIR | SHARD.tar ... | URL] [flags]

Measures loader throughput on the ImageFolder tree DIR (DIR/CLASS/*.jpg, one folder
per class), on the converted dataset DIR (one holding %s, made by conveyor
convert), on a manifest (a .csv of path,label lines or a .jsonl), or on WebDataset tar
shards (a folder of them, SHARD.tar ..., or a quoted pattern such as
'DIR/train-*.tar' or 'DIR/train-{000..099}.tar'), local or in object storage
(s3://bucket/train-{000000..001023}.tar, s3://bucket/prefix/,
https://host/train-{0..9}.tar), or named by a shard index beside them
(s3://bucket/train.json, written by conveyor inspect SHARDS --json); without DIR, on a built-in synthetic set of ~500x375
JPEGs. Prints one line per epoch and a report: images/s and MB/s read in the steady
state (the epochs after the first: run --epochs 2 or more), the first epoch, loader
creation and the whole run apart, CPU, memory, where the stages' time went and how full
the queues were. Progress goes to stderr: a bar on a terminal, else a line every 5 s.

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
  --metrics-addr :9100
                     serve Prometheus metrics at http://:9100/metrics while it runs
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
	pr.every = progressLineEvery
	res := benchResult{Recipe: f.recipe}
	src, closeSource, err := f.openSource(ctx, pos, pr.logf, &res)
	if err != nil {
		return err
	}
	defer closeSource() // after the loaders' Close
	base, closeCache, err := f.config(failQuiet(f.fail, pr.logf))
	if err != nil {
		return err
	}
	defer closeCache() // after the loaders' Close
	res.Fidelity = base.Fidelity.String()
	var live *liveLoader
	if f.metricsAddr != "" {
		live = &liveLoader{}
		stopServing, err := serveMetrics(f.metricsAddr, live, &res, pr.logf)
		if err != nil {
			return err
		}
		defer stopServing()
	}
	return f.run(ctx, stdout, &res, src, base, pr, live)
}

// serveMetrics serves --metrics-addr: the loaders' metrics through live, and the remote
// dataset's object-store counters, if any.
func serveMetrics(addr string, live *liveLoader, res *benchResult, logf func(string, ...any)) (stop func(), err error) {
	srv, err := promconveyor.Serve(addr, live, nil)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	if res.store != nil {
		sc, err := promconveyor.NewShardCollector(res.store, nil)
		if err == nil {
			err = srv.Register(sc)
		}
		if err != nil {
			srv.Close()
			return nil, fmt.Errorf("--metrics-addr: %w", err)
		}
	}
	logf("conveyor: serving Prometheus metrics at http://%s/metrics while the bench runs", srv.Addr())
	return func() { srv.Close() }, nil
}

// failQuiet is logf, less the loader's line for a bad sample when the run ends at the
// first (--on-error fail): that sample's error ends the run and is printed once, as
// the command's error. (With several workers, another bad sample met at the same time
// goes unlogged: the run is over.)
func failQuiet(fail bool, logf func(string, ...any)) func(string, ...any) {
	if !fail {
		return logf
	}
	return func(format string, args ...any) {
		if len(args) == 1 {
			if _, ok := args[0].(*pipeline.SampleError); ok {
				return
			}
		}
		logf(format, args...)
	}
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

// run measures what the flags ask for (a sweep, the stages, or one configuration) and
// prints the report.
func (f *benchFlags) run(ctx context.Context, stdout io.Writer, res *benchResult, src pipeline.Source, base pipeline.Config, pr *progress, live *liveLoader) error {
	opts := runOptions{epochs: f.epochs, pr: pr, live: live}
	if !f.jsonOut {
		opts.epochLine = func(er epochResult) {
			var b strings.Builder
			printEpoch(&b, er, base.SampleCache != nil)
			pr.printTo(stdout, b.String())
		}
	}
	run := func(cfg pipeline.Config, label string, step time.Duration, started func(settings)) (*runReport, error) {
		o := opts
		o.label, o.step, o.started = label, step, started
		rep, err := measure(ctx, src, &cfg, &o)
		if err != nil && ctx.Err() != nil {
			err = fmt.Errorf("stopped reading %s: %w", res.Dataset, err)
		}
		return rep, err
	}
	one := base
	one.Tuning.Workers, one.Tuning.Prefetch, one.Batch.Size = f.workers[0], f.prefetch[0], f.batch[0]

	switch {
	case len(f.swept) > 0:
		return benchSweep(stdout, res, base, f.swept, f.lists, f.plotPath, f.step, f.jsonOut, run)
	case f.stages:
		return benchStages(stdout, res, one, f.step, f.jsonOut, run)
	}
	rep, err := run(one, "", f.step, nil)
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

// runFunc measures one configuration, holding each batch for step; started, if set, is
// called with the settings the loader starts with.
type runFunc func(cfg pipeline.Config, label string, step time.Duration, started func(settings)) (*runReport, error)

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
		rep, err := run(c, "stages="+s.String(), 0, nil)
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
		rep, err := run(cfg, fmt.Sprintf("step=%v", step), step, nil)
		if err != nil {
			return err
		}
		res.runReport = *rep
	}
	res.Bottleneck, _ = bottleneck(res.Ceilings)
	res.Noise = ceilingNoise(res.Ceilings)
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

// sweepLabel names a sweep's run by its settings as configured, "tuned" where the
// loader chooses: "workers=1 prefetch=tuned batch=64".
func sweepLabel(cfg pipeline.Config) string {
	v := func(n int) string {
		if n == 0 {
			return "tuned"
		}
		return strconv.Itoa(n)
	}
	return fmt.Sprintf("workers=%s prefetch=%s batch=%d", v(cfg.Tuning.Workers), v(cfg.Tuning.Prefetch), cfg.Batch.Size)
}

// sweepHeader is the line printed before a sweep's run, once its loader is created: the
// settings it starts with (those the sweep's table gives), and which of them the tuner
// may change: "conveyor workers=1 prefetch=2 batch=64 (prefetch tuned during the run, from these)".
func sweepHeader(cfg pipeline.Config, s settings) string {
	line := fmt.Sprintf("conveyor workers=%d prefetch=%d batch=%d", s.Workers, s.Prefetch, s.Batch)
	var tuned []string
	if !cfg.Tuning.NoAutotune {
		if cfg.Tuning.Workers == 0 {
			tuned = append(tuned, "workers")
		}
		if cfg.Tuning.Prefetch == 0 {
			tuned = append(tuned, "prefetch")
		}
	}
	if len(tuned) > 0 {
		line += fmt.Sprintf(" (%s tuned during the run, from these)", strings.Join(tuned, " and "))
	}
	return line
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
				cfg.Tuning.Workers, cfg.Tuning.Prefetch, cfg.Batch.Size = w, p, b
				label := sweepLabel(cfg)
				var started func(settings)
				if !jsonOut {
					started = func(s settings) { fmt.Fprintln(stdout, sweepHeader(cfg, s)) }
				}
				rep, err := run(cfg, label, step, started)
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
