package pipeline

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// tuner chooses, while epochs run, how many CPU workers decode, how many reads are in
// flight and how many batches, from the loader's own measurements, as tf.data's AUTOTUNE
// does for its parallel stages and prefetch buffers. A knob set in the Config stays as set; without Config.Tuning.NoAutotune the
// others start at the static defaults and move only when a window of measurements says
// the loader is the bottleneck and which side of it is short:
//
//   - every tuneEvery the controller takes the window's wall time, the process's CPU
//     time, the time active workers waited for a read to finish (starved), the time
//     active readers waited for a sample to read (readIdle), the time the dispatcher
//     waited for a free batch buffer (poolWait) and the time the consumer waited for a
//     batch;
//   - when the dispatcher waited for more than a tenth of the window and the consumer
//     did not, the buffers were the consumer's: nothing is added, since more
//     parallelism would only wait for the consumer too;
//   - when the workers starved for more than a tenth of their time while the readers
//     were nearly always busy, reads are short: the reads in flight double (a slow disk
//     or a network file system needs as many in flight as its latency times the
//     throughput, so additive steps would take minutes);
//   - when the workers starved while the dispatcher and the consumer both waited, every
//     batch buffer held a batch still being read: the batches in flight double (more
//     pinned buffers are mapped), so more samples can be read at once;
//   - when the workers were busy (not waiting for reads or decode memory), the process
//     was not near its memory limit (no memory returns: see returner) and it used less
//     than 95% of CPULimit cores, a worker is added: the workers block on something
//     (page faults on mapped shards, a decoder's system calls) and one more keeps the
//     cores busy. The next window checks it: unless the samples a second rose by 3%
//     without a memory return, the worker is parked again and the tuner waits 2, 4, ...
//     up to 64 windows before trying again (idle cores may be another tenant's, and a
//     worker beyond what the cores run costs cache and memory);
//   - when the process used more than CPULimit cores (a limit below the machine's), a
//     worker is parked.
//
// A window is tuneEvery of epoch time holding at least minWindowSamples samples (or
// four times tuneEvery), so a rate means something with photos too. Nothing is taken
// away otherwise: an idle reader or worker costs a parked goroutine,
// and memory stays bounded by MemoryBudget whatever the counts (the read budget bounds
// bytes in flight; the half of decode memory the workers keep between samples is shared
// out among the active ones, and a worker whose share changed gives it back before its
// next sample; the budget counts the most batch buffers the tuner may map). The counts persist
// across epochs. Workers and readers beyond the active count park between samples,
// giving back their retained decode memory.
type tuner struct {
	autoWorkers, autoIO, autoPrefetch bool
	maxWorkers, maxIO, maxPrefetch    int
	cpuLimit                          float64 // cores the process may use, as the tuner measures it

	workers, io atomic.Int32 // active counts
	prefetch    atomic.Int32 // batch buffers mapped, less one
	micro       int          // samples per batch buffer
	// ld is the loader tuned: its counters are measured, its pinned pool grown and its
	// decode memory shared out; nil in tests of decide alone.
	ld   *Loader
	born time.Time // what sample's wall time counts from

	mu   sync.Mutex
	wake chan struct{} // closed when an active count rises

	// pending is the window being measured, carried from one epoch to the next; only
	// the running epoch's control goroutine touches it, as it does the probe's state:
	// probing after adding a worker, with probeBase the samples a second before; the
	// windows to wait before adding another (holdoff), doubling after each worker that
	// brought no gain (backoff).
	pending          window
	probing          bool
	probeBase        float64
	holdoff, backoff int

	// Waits measured by the goroutines, in nanoseconds, summed; memWait is the
	// workers' waits for decode memory.
	starved, readIdle, poolWait, memWait atomic.Int64
	steps                                atomic.Int64 // changes made
}

// tuneEvery is the controller's window, which also holds at least minWindowSamples.
const (
	tuneEvery        = 250 * time.Millisecond
	minWindowSamples = 32
)

func newTuner(c *Config, autoWorkers, autoIO bool, maxPrefetch int) *tuner {
	t := &tuner{autoWorkers: autoWorkers, autoIO: autoIO, autoPrefetch: maxPrefetch > c.Tuning.Prefetch,
		maxWorkers: c.Tuning.Workers, maxIO: c.Tuning.IOWorkers, maxPrefetch: maxPrefetch, cpuLimit: c.Tuning.CPULimit,
		micro: c.Batch.Size / c.Batch.MicroBatches, wake: make(chan struct{}), born: time.Now()}
	t.prefetch.Store(int32(c.Tuning.Prefetch))
	if autoWorkers {
		t.maxWorkers = max(c.Tuning.Workers, 2*int(math.Ceil(c.Tuning.CPULimit)))
	}
	if autoIO {
		t.maxIO = max(c.Tuning.IOWorkers, maxAutoIO)
	}
	t.workers.Store(int32(c.Tuning.Workers))
	t.io.Store(int32(c.Tuning.IOWorkers))
	return t
}

// maxAutoIO bounds the reads in flight the tuner chooses: enough for 20 ms of latency at
// over 10,000 samples a second.
const maxAutoIO = 256

// on reports whether the tuner adjusts anything.
func (t *tuner) on() bool { return t.autoWorkers || t.autoIO || t.autoPrefetch }

// autoInFlight is how many samples the tuner's largest prefetch depth holds in batch
// buffers: enough to hide 20 ms of latency at over 10,000 samples a second.
const autoInFlight = 256

// autoPrefetchBound is the most batches the tuner may keep in flight when Prefetch is
// left to it: enough for autoInFlight samples, at most 16, never below start. With an
// explicit budget the buffers beyond the start's take at most a quarter of the working
// memory the start's leave, and leave at least minWorkingBudget.
func autoPrefetchBound(start, micro int, bufBytes, budget int64) int {
	p := max(start, min(16, (autoInFlight+micro-1)/micro))
	fits := func(p int) bool {
		working := budget - int64(start+1)*bufBytes
		extra := int64(p-start) * bufBytes
		return extra <= working/4 && working-extra >= minWorkingBudget
	}
	for budget > 0 && p > start && !fits(p) {
		p--
	}
	return p
}

// parked returns, when goroutine i of an active count n must wait, the channel that is
// closed when counts rise; nil when it may run.
func (t *tuner) parked(i int, n *atomic.Int32) <-chan struct{} {
	if i < int(n.Load()) {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if i < int(n.Load()) {
		return nil
	}
	return t.wake
}

// waitWake waits, for a parked goroutine of r, until wake is closed (true) or the run
// ends (false).
func (r *run) waitWake(wake <-chan struct{}) bool {
	select {
	case <-wake:
		return true
	case <-r.quit:
	case <-r.ctx.Done():
	}
	return false
}

// set changes the active counts and wakes parked goroutines, and maps batch buffers
// for a deeper prefetch. A pool that cannot grow (the kernel refuses to lock more
// memory) keeps the depth it has, and the tuner stops trying.
func (t *tuner) set(workers, io, prefetch int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := int(t.prefetch.Load()); prefetch > p && t.ld != nil {
		n, err := t.ld.growBuffers(prefetch - p)
		if err != nil {
			t.ld.cfg.Logf("pipeline: autotune: keeping %d batches in flight: %v", p, err)
			t.maxPrefetch = p
		}
		prefetch = p + n
	}
	if workers == int(t.workers.Load()) && io == int(t.io.Load()) && prefetch == int(t.prefetch.Load()) {
		return
	}
	if workers != int(t.workers.Load()) && t.ld != nil {
		t.ld.dec.setWorkers(workers)
	}
	t.workers.Store(int32(workers))
	t.io.Store(int32(io))
	t.prefetch.Store(int32(prefetch))
	t.steps.Add(1)
	close(t.wake)
	t.wake = make(chan struct{})
}

// window is one controller window's measurements.
type window struct {
	wall, cpu                   time.Duration // cpu: 0 when the process's CPU time is not known
	starved, readIdle, poolWait time.Duration
	memWait                     time.Duration // workers waiting for decode memory
	returns                     int64         // times the loader gave memory back (returner)
	consumerWait                time.Duration // the consumer waiting for a batch
	// The stages' work: reads (items and time, summed over readers) and the workers'
	// decode, augment and pack (samples packed, time summed over workers).
	readItems, workItems  int64
	readBusy, workBusy    time.Duration
	workers, io, prefetch int
}

// readsNeeded is how many reads in flight would keep w's workers busy by Little's law
// (the workers' rate times a read's time, with a quarter to spare), or 0 when the
// window has no reads or no finished samples to tell.
func (w window) readsNeeded() int {
	if w.readItems == 0 || w.workItems == 0 || w.workBusy <= 0 {
		return 0
	}
	perRead := float64(w.readBusy) / float64(w.readItems)
	perSample := float64(w.workBusy) / float64(w.workItems)
	return int(math.Ceil(1.25 * float64(w.workers) * perRead / perSample))
}

// decide returns the counts for the next window.
func (t *tuner) decide(w window) (workers, io, prefetch int) {
	workers, io, prefetch = w.workers, w.io, w.prefetch
	if w.wall <= 0 {
		return
	}
	wall := float64(w.wall)
	cores := float64(w.cpu) / wall
	if t.autoWorkers && w.cpu > 0 && cores > 1.1*t.cpuLimit && workers > 1 {
		t.probing = false
		return workers - 1, io, prefetch
	}
	rate := float64(w.workItems) / w.wall.Seconds() // samples a second
	if t.probing {
		// The window after a worker was added: keep it only for a clear gain. Idle
		// cores may be the machine's (another tenant, a hypervisor's steal), and a
		// worker more than the cores can run costs cache and memory.
		t.probing = false
		if rate < 1.03*t.probeBase || w.returns > 0 {
			t.backoff = min(2*max(t.backoff, 1), maxProbeBackoff)
			t.holdoff = t.backoff
			return workers - 1, io, prefetch
		}
		t.backoff = 0
	}
	full := float64(w.poolWait) > 0.1*wall // every batch buffer was taken
	if full && float64(w.consumerWait) < 0.1*wall {
		return // the buffers were the consumer's: it is the slower side
	}
	starved := float64(w.starved) / (wall * float64(w.workers))
	readIdle := float64(w.readIdle) / (wall * float64(w.io))
	switch {
	case starved > 0.1 && readIdle < 0.1 && t.autoIO && io < t.maxIO:
		// Double, or jump to what the reads' latency needs when that is more.
		io = min(t.maxIO, max(2*io, w.readsNeeded()))
	case starved > 0.1 && full && t.autoPrefetch && prefetch < t.maxPrefetch:
		// The consumer and the workers both waited while every buffer held a batch
		// still being read: the batches in flight hold too few samples to cover the
		// reads' latency. Double, or jump to enough for the reads needed.
		need := 0
		if t.micro > 0 {
			need = (max(io, w.readsNeeded()) + t.micro - 1) / t.micro
		}
		prefetch = min(t.maxPrefetch, max(2*prefetch, need))
	case starved <= 0.1 && float64(w.memWait) <= 0.05*wall*float64(w.workers) && w.returns == 0 &&
		t.autoWorkers && workers < t.maxWorkers && w.cpu > 0 && cores < 0.95*t.cpuLimit:
		// Not while workers wait for decode memory, nor while the process is so near its
		// memory limit that the loader gives memory back: another worker would add to
		// the pressure.
		if t.holdoff > 0 {
			t.holdoff--
			break
		}
		workers++
		t.probing, t.probeBase = true, rate
	}
	return
}

// maxProbeBackoff bounds the windows the tuner waits, after a worker it added brought no
// gain, before it tries again.
const maxProbeBackoff = 64

// control runs r's tuning until the epoch ends. It adds up the measurements every
// tuneEvery/5 and decides once they span tuneEvery of epoch time: a window may span
// several short epochs, and the time between epochs (the consumer evaluating, say) is
// not in it.
func (r *run) control() {
	defer r.wg.Done()
	t := r.l.tune
	tick := time.NewTicker(tuneEvery / 5)
	defer tick.Stop()
	prev := t.sample()
	for {
		stop := false
		select {
		case <-tick.C:
		case <-r.quit:
			stop = true
		case <-r.ctx.Done():
			stop = true
		}
		cur := t.sample()
		t.pending.add(cur, 1)
		t.pending.add(prev, -1)
		t.pending.workers, t.pending.io, t.pending.prefetch = cur.workers, cur.io, cur.prefetch
		prev = cur
		if stop {
			return
		}
		// A window holds tuneEvery of epoch time and enough samples for a rate to mean
		// something (photos decode a few dozen a second), or four times tuneEvery.
		if w := t.pending; w.wall >= tuneEvery && w.workItems >= minWindowSamples || w.wall >= 4*tuneEvery {
			t.set(t.decide(t.pending))
			t.pending = window{}
		}
	}
}

// add adds sign times v's measurements to w; the counts stay w's.
func (w *window) add(v window, sign int64) {
	d := time.Duration(sign)
	w.wall += d * v.wall
	w.cpu += d * v.cpu
	w.starved += d * v.starved
	w.readIdle += d * v.readIdle
	w.poolWait += d * v.poolWait
	w.consumerWait += d * v.consumerWait
	w.memWait += d * v.memWait
	w.returns += sign * v.returns
	w.readItems += sign * v.readItems
	w.readBusy += d * v.readBusy
	w.workItems += sign * v.workItems
	w.workBusy += d * v.workBusy
}

// sample returns the counters now: totals since the tuner was made, wall time included
// (a window between two samples is the later less the earlier), and the counts in use.
func (t *tuner) sample() window {
	cpu, _ := processCPU() // 0 when not known: windows then have no CPU time either
	w := window{wall: time.Since(t.born), cpu: cpu, starved: time.Duration(t.starved.Load()), readIdle: time.Duration(t.readIdle.Load()),
		poolWait: time.Duration(t.poolWait.Load()), memWait: time.Duration(t.memWait.Load()),
		workers: int(t.workers.Load()), io: int(t.io.Load()), prefetch: int(t.prefetch.Load())}
	if l := t.ld; l != nil {
		c := &l.stats
		w.returns = l.returns.runs.Load()
		w.consumerWait = time.Duration(c.wait.Load())
		w.readItems, w.readBusy = c.read.items.Load(), time.Duration(c.read.busy.Load())
		w.workItems = c.pack.items.Load()
		w.workBusy = time.Duration(c.decode.busy.Load() + c.augment.busy.Load() + c.pack.busy.Load())
	}
	return w
}
