package main

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conveyor-ml/conveyor/metrics"
	"github.com/conveyor-ml/conveyor/pipeline"
)

// runOptions say how to drive one measured run.
type runOptions struct {
	epochs int
	step   time.Duration // simulated training step per batch; 0: none
	label  string        // progress-bar prefix
	pr     *progress
	// epochLine is called after each epoch, for the per-epoch lines of the text output.
	epochLine func(epochResult)
	// live, if set, is given the loader while it runs (--metrics-addr serves it).
	live *liveLoader
	// started, if set, is called once the loader is created, with the settings it
	// starts with (the tuner's starting values where the configuration left them 0).
	started func(settings)
}

// sampleEvery is how often a run samples its queues and redraws its progress bar;
// memEvery how often it samples the process's memory.
const (
	sampleEvery = 10 * time.Millisecond
	memEvery    = 5 * sampleEvery
)

// measure builds a loader over src with cfg, runs opts.epochs epochs through a consumer
// that holds each batch for opts.step, and reports what it saw.
func measure(ctx context.Context, src pipeline.Source, cfg *pipeline.Config, opts *runOptions) (*runReport, error) {
	scoped := resetPeakRSS()
	runtime.GC() // the previous run's garbage is not this one's
	u0, s0 := cpuTime()
	start := time.Now()
	mem := newMemSampler()
	ld, err := pipeline.New(src, cfg)
	if err != nil {
		return nil, err
	}
	defer ld.Close()
	if opts.live != nil {
		opts.live.set(ld)
		defer opts.live.done() // before Close
	}
	created := time.Since(start)
	eff := ld.Config()
	rep := &runReport{CreateS: created.Seconds(),
		Backend: ld.Stats().Backends.Decode, WebP: ld.Stats().Backends.WebP, Config: eff.String(),
		Settings: settings{Workers: eff.Tuning.Workers, IOWorkers: eff.Tuning.IOWorkers, Prefetch: eff.Tuning.Prefetch, Batch: eff.Batch.Size, MicroBatches: eff.Batch.MicroBatches, StopAfter: eff.StopAfter.String()},
	}

	if opts.started != nil {
		opts.started(rep.Settings)
	}
	smp := startSampling(ld, mem, opts, start)
	wait0 := ld.Stats().Wait
	first, loop, err := runEpochs(ctx, ld, opts, rep, smp, mem, start)
	if err != nil {
		smp.finish()
		return nil, err
	}
	wall := time.Since(start)
	smp.finish()
	u1, s1 := cpuTime()
	st := ld.Stats()

	rep.fillTotals(&st, wall, first, u1-u0, s1-s0)
	rep.fillMemory(&st, mem, scoped)
	if !eff.Tuning.NoAutotune && (cfg.Tuning.Workers == 0 || cfg.Tuning.IOWorkers == 0 || cfg.Tuning.Prefetch == 0) {
		rep.Settings.Tuned = &tuned{Workers: st.Tuning.Workers, IOWorkers: st.Tuning.IOWorkers, Prefetch: st.Tuning.Prefetch, Steps: st.Tuning.Steps, CPULimit: eff.Tuning.CPULimit}
	}
	rep.StageBusy = stageBusyOf(&st, wall, st.Tuning.Workers, st.Tuning.IOWorkers)
	rep.Queues = smp.q.report()
	if opts.step > 0 {
		w := (st.Wait - wait0).Seconds()
		rep.Consumer = &consumerReport{StepS: opts.step.Seconds(), WaitS: w, WallS: loop.Seconds(), Waited: w / loop.Seconds(),
			CopyWaits: st.Device.CopyWaits, CopyWaitS: st.Device.CopyWaitTime.Seconds()}
	}
	rep.Loader = metrics.Snap(st)
	rep.CacheHits, rep.CacheStored, rep.CacheDeferred = st.Cache.Hits, st.Cache.Stored, st.Cache.Deferred
	if c := cfg.SampleCache; c != nil {
		cs := c.Stats()
		rep.Cache = &cacheState{Dir: c.Dir(), Codec: string(c.Options().Codec), Records: cs.Records, Shards: cs.Shards,
			Bytes: cs.Bytes, Full: cs.Full, Disabled: cs.Disabled}
	}
	return rep, nil
}

// liveLoader is the metrics.Source that --metrics-addr serves: the running loader's
// Stats, or, between a sweep's or --stages' runs and after the last, the last loader's
// final Stats.
type liveLoader struct {
	mu   sync.Mutex
	ld   *pipeline.Loader
	last pipeline.Stats
}

func (l *liveLoader) set(ld *pipeline.Loader) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ld = ld
}

// done keeps the running loader's final Stats, before it is closed.
func (l *liveLoader) done() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ld != nil {
		l.last, l.ld = l.ld.Stats(), nil
	}
}

func (l *liveLoader) Stats() pipeline.Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ld != nil {
		return l.ld.Stats()
	}
	return l.last
}

// runSampler samples a run's queues and memory while it runs, and draws its progress.
type runSampler struct {
	done atomic.Int64 // images delivered so far
	q    queueSampler
	opts *runOptions
	stop chan struct{}
	wg   sync.WaitGroup
}

// startSampling starts the goroutine that samples ld every sampleEvery (its memory
// every memEvery) and redraws the progress bar; finish stops it.
func startSampling(ld *pipeline.Loader, mem *memSampler, opts *runOptions, start time.Time) *runSampler {
	smp := &runSampler{opts: opts, stop: make(chan struct{})}
	total := opts.epochs * ld.SamplesPerEpoch()
	smp.wg.Add(1)
	go func() {
		defer smp.wg.Done()
		tick := time.NewTicker(sampleEvery)
		defer tick.Stop()
		var lastDraw, lastMem time.Time
		for {
			select {
			case <-smp.stop:
				return
			case now := <-tick.C:
				st := ld.Stats()
				smp.q.add(&st)
				if now.Sub(lastMem) >= memEvery {
					lastMem = now
					mem.sample()
				}
				if opts.pr != nil && now.Sub(lastDraw) >= 200*time.Millisecond {
					lastDraw = now
					n := smp.done.Load()
					opts.pr.update(progressState{Prefix: opts.label, Done: int(n), Total: total,
						Rate: float64(n) / now.Sub(start).Seconds(), Bad: int(st.Bad.Samples)})
				}
			}
		}
	}()
	return smp
}

// finish stops the sampling goroutine, waits for it and ends the progress bar.
func (smp *runSampler) finish() {
	close(smp.stop)
	smp.wg.Wait()
	if smp.opts.pr != nil {
		smp.opts.pr.finish(false)
	}
}

// runEpochs reads opts.epochs epochs of ld, holding each batch for opts.step, and adds
// each epoch's result to rep; first is the time from start to the first batch, loop
// the consumer loop's wall time over the epochs.
func runEpochs(ctx context.Context, ld *pipeline.Loader, opts *runOptions, rep *runReport, smp *runSampler, mem *memSampler, start time.Time) (first, loop time.Duration, err error) {
	for e := range opts.epochs {
		t0 := time.Now()
		before := ld.Stats()
		var n int64
		for b, err := range ld.Epoch(ctx, e) {
			if err != nil {
				return 0, 0, err
			}
			if first == 0 {
				first = time.Since(start)
				st := ld.Stats() // one sample at least, however short the run
				smp.q.add(&st)
			}
			if opts.step > 0 {
				// A training step reads the batch: it must be on the device first.
				if err := b.Wait(); err != nil {
					b.Release()
					return 0, 0, err
				}
				time.Sleep(opts.step)
			}
			n += int64(b.Len)
			smp.done.Add(int64(b.Len))
			b.Release()
		}
		dt := time.Since(t0)
		loop += dt
		after := ld.Stats()
		er := epochResult{Epoch: e, Images: n, Seconds: dt.Seconds(), ImagesPerS: perSecond64(n, dt.Seconds()),
			ReadBytes: after.Stages.Read.Bytes - before.Stages.Read.Bytes,
			CacheHits: after.Cache.Hits - before.Cache.Hits, CacheStored: after.Cache.Stored - before.Cache.Stored,
			PeakAnon: mem.endEpoch()}
		rep.Epochs = append(rep.Epochs, er)
		rep.Images += n
		if opts.epochLine != nil {
			opts.epochLine(er)
		}
	}
	return first, loop, nil
}

// fillTotals records the run's throughput, bad samples, time to the first batch and CPU
// time (user and system) over its wall time.
func (rep *runReport) fillTotals(st *pipeline.Stats, wall, first, user, sys time.Duration) {
	rep.Seconds = wall.Seconds()
	rep.ImagesPerS = perSecond64(rep.Images, rep.Seconds)
	rep.SteadyImagesPerS, rep.SteadyMBPerS = steadyRate(rep.Epochs)
	rep.ReadBytes = st.Stages.Read.Bytes
	rep.MBPerS = float64(st.Stages.Read.Bytes) / 1e6 / rep.Seconds
	rep.BadSamples = st.Bad.Samples
	rep.FirstBatchS = first.Seconds()
	cores := runtime.GOMAXPROCS(0)
	rep.CPU = cpuReport{UserS: user.Seconds(), SysS: sys.Seconds(), Cores: cores}
	rep.CPU.Percent = 100 * (rep.CPU.UserS + rep.CPU.SysS) / rep.Seconds
	rep.CPU.Utilisation = rep.CPU.Percent / 100 / float64(cores)
}

// fillMemory records the run's memory: peak RSS (over the run when scoped, else over
// the process), the loader's budget and buffers, and the sampled peaks.
func (rep *runReport) fillMemory(st *pipeline.Stats, mem *memSampler, scoped bool) {
	rep.Memory = memoryReport{
		PeakRSS: peakRSS(), PeakRSSScope: "run", Budget: st.Memory.Budget, PeakHeld: st.Memory.PeakHeld,
		Pinned: st.Memory.Pinned.BytesMapped, PinnedLocked: st.Memory.Pinned.Locked,
		PinnedRegistered: st.Memory.Pinned.Registered, PinnedRegisterError: st.Memory.Pinned.RegisterError, Device: st.Device.Name, DeviceBytes: st.Device.Bytes,
		PinnedBuffers: st.Memory.Pinned.Buffers, PinnedBufferBytes: int64(st.Memory.Pinned.BufferSize), DeviceBuffers: st.Device.Slots, DeviceBufferBytes: st.Device.SlotBytes,
	}
	if !scoped {
		rep.Memory.PeakRSSScope = "process"
	}
	peak, split := mem.peaks()
	m := &rep.Memory
	m.PeakHeap, m.PeakGo, m.Returns = peak.Heap, peak.Go, st.Memory.Returns
	if split {
		m.PeakAnon, m.PeakFile, m.PeakShmem = peak.Anon, peak.File, peak.Shmem
		if m.Budget > 0 {
			m.AnonOverBudget = float64(peak.Anon) / float64(m.Budget)
		}
	}
}

// steadyRate is the throughput of the epochs after the first (their images over their
// time, and likewise bytes read): the loader's workers started and its tuner settled.
// With one epoch it is that epoch's, loader creation left out but warm-up included.
func steadyRate(epochs []epochResult) (imagesPerS, mbPerS float64) {
	if len(epochs) > 1 {
		epochs = epochs[1:]
	}
	var n, b int64
	var secs float64
	for _, e := range epochs {
		n, b, secs = n+e.Images, b+e.ReadBytes, secs+e.Seconds
	}
	return perSecond64(n, secs), perSecond64(b, secs) / 1e6
}

// stageBusyOf shares the stages' busy time out, in pipeline order.
func stageBusyOf(st *pipeline.Stats, wall time.Duration, workers, ioWorkers int) []stageBusy {
	stages := []struct {
		name string
		s    pipeline.StageStats
		n    int
	}{
		{"read", st.Stages.Read, ioWorkers}, {"decode", st.Stages.Decode, workers}, {"augment", st.Stages.Augment, workers}, {"pack", st.Stages.Pack, workers},
	}
	if st.Stages.Mix.Items > 0 {
		stages = append(stages, struct {
			name string
			s    pipeline.StageStats
			n    int
		}{"mix", st.Stages.Mix, workers})
	}
	var sum time.Duration
	for _, s := range stages {
		sum += s.s.Busy
	}
	out := make([]stageBusy, len(stages))
	for i, s := range stages {
		b := stageBusy{Stage: s.name, Items: s.s.Items, BusyS: s.s.Busy.Seconds()}
		if sum > 0 {
			b.Share = float64(s.s.Busy) / float64(sum)
		}
		if wall > 0 {
			b.Utilisation = float64(s.s.Busy) / float64(wall) / float64(s.n)
		}
		if s.s.Items > 0 {
			b.MsPerItem = b.BusyS * 1e3 / float64(s.s.Items)
		}
		out[i] = b
	}
	return out
}

// queueSampler averages the loader's queue lengths over the samples it is given. Only
// samples taken while an epoch runs count (an idle loader reports zero capacities).
type queueSampler struct {
	mu        sync.Mutex
	n         int
	sum, caps [3]float64
}

var queueNames = [3]string{"tasks", "decoded", "ready"}

func (q *queueSampler) add(st *pipeline.Stats) {
	qs := [3]struct{ Len, Cap int }{st.Queues.Tasks, st.Queues.Decoded, st.Queues.Ready}
	if qs[0].Cap == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.n++
	for i, s := range qs {
		q.sum[i] += float64(s.Len)
		q.caps[i] = float64(s.Cap)
	}
}

func (q *queueSampler) report() []queueReport {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]queueReport, len(queueNames))
	for i, name := range queueNames {
		out[i] = queueReport{Queue: name, Cap: int(q.caps[i])}
		if q.n > 0 {
			out[i].Mean = q.sum[i] / float64(q.n)
			if q.caps[i] > 0 {
				out[i].Fill = out[i].Mean / q.caps[i]
			}
		}
	}
	return out
}

func perSecond64(n int64, secs float64) float64 {
	if secs <= 0 {
		return 0
	}
	return float64(n) / secs
}

// ceiling is one row of the --stages table.
type ceiling struct {
	Stage      string  `json:"stage"` // the last stage run: read, decode, augment, all
	ImagesPerS float64 `json:"images_per_s"`
	// MsPerImage is the wall time per image at this ceiling, and AddsMs what this stage
	// adds to the previous ceiling's (never negative: noise can make it so).
	MsPerImage float64 `json:"ms_per_image"`
	AddsMs     float64 `json:"adds_ms"`
}

// bottleneck names the stage that adds the most wall time per image, from ceilings in
// pipeline order (read first).
func bottleneck(cs []ceiling) (name string, adds float64) {
	prev := 0.0
	for i := range cs {
		c := &cs[i]
		if c.ImagesPerS > 0 {
			c.MsPerImage = 1e3 / c.ImagesPerS
		}
		c.AddsMs = max(0, c.MsPerImage-prev)
		prev = max(prev, c.MsPerImage)
		if c.AddsMs > adds || name == "" {
			name, adds = stageName(c.Stage), c.AddsMs
		}
	}
	return name, adds
}

// stageName is how the --stages table names what a ceiling row adds: the full pipeline
// adds the pack stage.
func stageName(stopAfter string) string {
	if stopAfter == pipeline.AllStages.String() {
		return "pack"
	}
	return stopAfter
}
