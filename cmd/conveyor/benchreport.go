package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/conveyor-ml/conveyor/internal/units"
	"github.com/conveyor-ml/conveyor/pipeline"
)

// printEpoch prints one epoch's line, in the key=value form scripts read
// (bench/lib.sh's last).
func printEpoch(w io.Writer, er epochResult, cache bool) {
	fmt.Fprintf(w, "conveyor epoch=%d images=%d seconds=%.2f images_per_s=%.1f", er.Epoch, er.Images, er.Seconds, er.ImagesPerS)
	if cache {
		fmt.Fprintf(w, " cache_hits=%d cache_stored=%d", er.CacheHits, er.CacheStored)
	}
	fmt.Fprintln(w)
}

// printReport prints a run's report as a table. Its last line is the key=value total
// line scripts read.
func printReport(w io.Writer, res *benchResult) {
	r := &res.runReport
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, a...)...) }
	fmt.Fprintln(tw)
	row("dataset", "%s: %s, %s, opened in %.2f s", res.Dataset, plural(res.Samples, "sample"), plural(res.Classes, "class"), res.OpenS)
	if r.WebP != "" {
		row("recipe", "%s (%s pixels), decode backend %s (WebP: %s)", res.Recipe, res.Fidelity, r.Backend, r.WebP)
	} else {
		row("recipe", "%s (%s pixels), decode backend %s", res.Recipe, res.Fidelity, r.Backend)
	}
	printThroughput(row, r)
	if t := r.Settings.Tuned; t != nil {
		row("autotune", "%s", autotuneLine(r.Settings, t))
	}
	row("cpu", "%.0f%% of one core (%.0f%% of %d): user %.2f s, sys %.2f s", r.CPU.Percent, 100*r.CPU.Utilisation, r.CPU.Cores, r.CPU.UserS, r.CPU.SysS)
	m := r.Memory
	locked := "page-locked"
	switch {
	case m.PinnedRegistered:
		locked = "registered with the GPU driver (page-locked by it)"
	case m.PinnedRegisterError != "":
		locked = "not registered: " + m.PinnedRegisterError + "; copies from them are partly synchronous"
	case !m.PinnedLocked:
		locked = "not locked"
	}
	row("memory", "peak RSS %s (%s); loader budget %s, peak held %s", units.Bytes(m.PeakRSS), m.PeakRSSScope, units.Bytes(m.Budget), units.Bytes(m.PeakHeld))
	if m.PeakAnon > 0 {
		row("resident", "peaks sampled: anonymous %s (%.0f%% of the budget), file-backed %s, shared %s; Go heap %s, Go runtime %s; memory returned %s",
			units.Bytes(m.PeakAnon), 100*m.AnonOverBudget, units.Bytes(m.PeakFile), units.Bytes(m.PeakShmem), units.Bytes(m.PeakHeap), units.Bytes(m.PeakGo), plural(int(m.Returns), "time"))
	}
	if len(r.Epochs) > 1 && r.Epochs[0].PeakAnon > 0 {
		var b strings.Builder
		for i, e := range r.Epochs {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%.0f", float64(e.PeakAnon)/1e6)
		}
		first, last := r.Epochs[0].PeakAnon, r.Epochs[len(r.Epochs)-1].PeakAnon
		row("by epoch", "anonymous peak MB: %s (last over first %+.1f%%)", b.String(), 100*(float64(last)/float64(first)-1))
	}
	what := "batch"
	if s := r.Settings; s.MicroBatches > 1 {
		what = fmt.Sprintf("micro-batch (%d samples)", s.Batch/s.MicroBatches)
	}
	row("pinned", "%s: %s of %s, one %s each, %s", units.Bytes(m.Pinned), plural(m.PinnedBuffers, "buffer"), units.Bytes(m.PinnedBufferBytes), what, locked)
	if m.DeviceBuffers > 0 {
		row("device", "%s, %s: %s of %s, one %s each", m.Device, units.Bytes(m.DeviceBytes), plural(m.DeviceBuffers, "buffer"), units.Bytes(m.DeviceBufferBytes), what)
	} else {
		row("device", "%s, %s", m.Device, units.Bytes(m.DeviceBytes))
	}
	row("bad samples", "%d", r.BadSamples)
	if c := r.Consumer; c != nil {
		row("consumer", "step %s: waited for input %.1f%% of the time (%.2f s of %.2f s); %d waits on a device copy (%.3f s)",
			fmtSeconds(c.StepS), 100*c.Waited, c.WaitS, c.WallS, c.CopyWaits, c.CopyWaitS)
	}
	if cs := r.Cache; cs != nil {
		row("cache", "hits %d, stored %d, deferred %d; %s: %s, %s, codec %s, full %t",
			r.CacheHits, r.CacheStored, r.CacheDeferred, cs.Dir, plural(cs.Records, "record"), units.Bytes(cs.Bytes), cs.Codec, cs.Full)
		if cs.Disabled != "" {
			row("", "writing disabled: %s", cs.Disabled)
		}
	}
	if o := res.ObjStore; o != nil {
		row("object store", "%s, %s fetched, %s; shard cache: %s, %s, %s fetched, %d evicted, peak %s",
			plural(int(o.Requests), "request"), units.Bytes(o.BytesFetched), plural(int(o.Retries), "retry"), plural(int(o.Hits), "hit"), plural(int(o.Misses), "miss"),
			plural(int(o.Fetched), "shard"), o.Evictions, units.Bytes(o.PeakBytes))
	}
	tw.Flush()

	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "stage\titems\tbusy s\tshare\tutilisation\tms/item")
	for _, s := range r.StageBusy {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.0f%%\t%.0f%%\t%.3f\n", s.Stage, s.Items, s.BusyS, 100*s.Share, 100*s.Utilisation, s.MsPerItem)
	}
	tw.Flush()
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "queue\tcapacity\tmean length\tfill")
	for _, q := range r.Queues {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.0f%%\n", q.Queue, q.Cap, q.Mean, 100*q.Fill)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nconfig: %s\n", r.Config)
	fmt.Fprintf(w, "conveyor total images=%d seconds=%.2f images_per_s=%.1f mb_per_s=%.1f steady_images_per_s=%.1f create_s=%.3f bad_samples=%d decode=%s\n",
		r.Images, r.Seconds, r.ImagesPerS, r.MBPerS, r.SteadyImagesPerS, r.CreateS, r.BadSamples, r.Backend)
	if cs := r.Cache; cs != nil {
		fmt.Fprintf(w, "conveyor cache hits=%d stored=%d deferred=%d records=%d bytes=%d full=%t dir=%s\n",
			r.CacheHits, r.CacheStored, r.CacheDeferred, cs.Records, cs.Bytes, cs.Full, cs.Dir)
	}
	if o := res.ObjStore; o != nil {
		fmt.Fprintf(w, "conveyor objstore requests=%d bytes_fetched=%d retries=%d hits=%d misses=%d evictions=%d fetched=%d peak_bytes=%d\n",
			o.Requests, o.BytesFetched, o.Retries, o.Hits, o.Misses, o.Evictions, o.Fetched, o.PeakBytes)
	}
}

// autotuneLine says what the tuner changed between the start of the run and its end,
// and what it kept: "workers 2 → 4 (reads in flight 4, batches in flight 2 kept);
// 3 changes, CPU limit 2 cores".
func autotuneLine(start settings, t *tuned) string {
	var changed, kept []string
	for _, s := range []struct {
		name     string
		from, to int
	}{{"workers", start.Workers, t.Workers}, {"reads in flight", start.IOWorkers, t.IOWorkers}, {"batches in flight", start.Prefetch, t.Prefetch}} {
		if s.from != s.to {
			changed = append(changed, fmt.Sprintf("%s %d → %d", s.name, s.from, s.to))
		} else {
			kept = append(kept, fmt.Sprintf("%s %d", s.name, s.to))
		}
	}
	limit := fmt.Sprintf("CPU limit %g cores", t.CPULimit)
	switch {
	case t.Steps == 0:
		return fmt.Sprintf("no change: kept %s; %s", strings.Join(kept, ", "), limit)
	case len(changed) == 0:
		return fmt.Sprintf("kept %s (%s tried and undone); %s", strings.Join(kept, ", "), plural(int(t.Steps), "change"), limit)
	case len(kept) == 0:
		return fmt.Sprintf("%s; %s, %s", strings.Join(changed, ", "), plural(int(t.Steps), "change"), limit)
	}
	return fmt.Sprintf("%s (%s kept); %s, %s", strings.Join(changed, ", "), strings.Join(kept, ", "), plural(int(t.Steps), "change"), limit)
}

// plural writes n and the noun, plural unless n is 1: "1 class", "2 classes", "3 retries".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	switch {
	case strings.HasSuffix(noun, "s"):
		return fmt.Sprintf("%d %ses", n, noun)
	case strings.HasSuffix(noun, "y"):
		return fmt.Sprintf("%d %sies", n, noun[:len(noun)-1])
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// printThroughput prints the headline, the steady state, and apart from it the first
// epoch, loader creation and the run as a whole, each saying what it includes.
func printThroughput(row func(k, format string, a ...any), r *runReport) {
	if len(r.Epochs) > 1 {
		which := "epoch 1"
		if len(r.Epochs) > 2 {
			which = fmt.Sprintf("epochs 1-%d", len(r.Epochs)-1)
		}
		row("throughput", "%.1f images/s, %.1f MB/s read: steady state, %s (the first epoch and loader creation left out, below)",
			r.SteadyImagesPerS, r.SteadyMBPerS, which)
	} else {
		row("throughput", "%.1f images/s, %.1f MB/s read: one epoch, warm-up included (--epochs 2 or more measures the steady state)",
			r.SteadyImagesPerS, r.SteadyMBPerS)
	}
	if len(r.Epochs) > 0 {
		e := r.Epochs[0]
		row("first epoch", "%.1f images/s: %d images in %.2f s; first batch %.3f s after the run started", e.ImagesPerS, e.Images, e.Seconds, r.FirstBatchS)
	}
	row("loader", "created in %.3f s", r.CreateS)
	row("overall", "%.1f images/s, %.1f MB/s read: %d images in %.2f s, loader creation and every epoch included", r.ImagesPerS, r.MBPerS, r.Images, r.Seconds)
}

// printCeilings prints the --stages table and its verdict.
func printCeilings(w io.Writer, res *benchResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "stages run\timages/s\tms/image\tadds ms")
	for i, c := range res.Ceilings {
		fmt.Fprintf(tw, "%s\t%.1f\t%.3f\t%.3f\n", ceilingRun(res.Ceilings, i), c.ImagesPerS, c.MsPerImage, c.AddsMs)
	}
	tw.Flush()
	for _, n := range res.Noise {
		fmt.Fprintf(w, "noise: %s\n", n)
	}
	fmt.Fprintf(w, "host-to-device copy: %s\n", res.H2D)
	fmt.Fprintf(w, "bottleneck: %s (adds the most time per image; each ceiling is the steady-state rate)\n", res.Bottleneck)
	if c := res.Consumer; c != nil {
		stepRate := float64(res.Settings.Batch) / c.StepS
		fmt.Fprintf(w, "consumer: a %s step takes at most %.0f images/s; the loader's ceiling is %.0f\n", fmtSeconds(c.StepS), stepRate, res.Ceilings[len(res.Ceilings)-1].ImagesPerS)
	}
}

// ceilingRun names the stages the i'th ceiling ran: "read", "read+decode", ...,
// "full pipeline".
func ceilingRun(cs []ceiling, i int) string {
	if cs[i].Stage == pipeline.AllStages.String() {
		return "full pipeline"
	}
	run := "read"
	for _, c := range cs[1 : i+1] {
		run += "+" + stageName(c.Stage)
	}
	return run
}

// ceilingNoise says where a ceiling is above one before it, though it runs more
// stages: a difference the measurement's noise (or the tuner settling elsewhere) made,
// which the table's "adds ms" of 0 hides.
func ceilingNoise(cs []ceiling) []string {
	var out []string
	for i := 1; i < len(cs); i++ {
		j := 0 // the slowest ceiling before i
		for k := range i {
			if cs[k].ImagesPerS < cs[j].ImagesPerS {
				j = k
			}
		}
		if lo := cs[j].ImagesPerS; lo > 0 && cs[i].ImagesPerS > lo {
			out = append(out, fmt.Sprintf("%s's ceiling (%.1f images/s) is %.0f%% above %s's (%.1f), though it does more work: "+
				"differences this size are noise (or the tuner settling elsewhere); more --epochs or --images steady them",
				ceilingRun(cs, i), cs[i].ImagesPerS, 100*(cs[i].ImagesPerS/lo-1), ceilingRun(cs, j), lo))
		}
	}
	return out
}

// printSweep prints one row per run of a sweep.
func printSweep(w io.Writer, res *benchResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w)
	head := []string{"workers", "prefetch", "batch", "images/s", "overall", "MB/s", "cpu %", "peak RSS MB", "first batch s"}
	if res.Runs[0].Consumer != nil {
		head = append(head, "waited %")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, r := range res.Runs {
		s := r.Settings
		fmt.Fprintf(tw, "%d\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.0f\t%.0f\t%.3f\t", s.Workers, s.Prefetch, s.Batch, r.SteadyImagesPerS, r.ImagesPerS,
			r.SteadyMBPerS, r.CPU.Percent, float64(r.Memory.PeakRSS)/1e6, r.FirstBatchS)
		if c := r.Consumer; c != nil {
			fmt.Fprintf(tw, "%.1f\t", 100*c.Waited)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Fprintln(w, "images/s and MB/s: steady state (the epochs after the first; with one epoch, that epoch); overall: loader creation and every epoch included")
	fmt.Fprintf(w, "plot: %s\n", res.Plot)
}

func fmtSeconds(s float64) string {
	if s < 1 {
		return fmt.Sprintf("%gms", s*1e3)
	}
	return fmt.Sprintf("%gs", s)
}
