package pipeline

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// tuner chooses, while epochs run, how many CPU workers decode and how many reads are in
// flight, from the loader's own measurements, as tf.data's AUTOTUNE does for its
// parallel stages. A knob set in the Config stays as set; without Config.NoAutotune the
// others start at the static defaults and move only when a window of measurements says
// the loader is the bottleneck and which side of it is short:
//
//   - every tuneEvery the controller takes the window's wall time, the process's CPU
//     time, the time active workers waited for a read to finish (starved), the time
//     active readers waited for a sample to read (readIdle) and the time the dispatcher
//     waited for a free batch buffer (ahead: the consumer, not the loader, is the slower
//     side);
//   - when the dispatcher waited for more than a tenth of the window, nothing is added:
//     more parallelism would only wait for the consumer too;
//   - when the workers starved for more than a tenth of their time while the readers
//     were nearly always busy, reads are short: the reads in flight double (a slow disk
//     or a network file system needs as many in flight as its latency times the
//     throughput, so additive steps would take minutes);
//   - when the workers were busy and the process used less than 90% of CPULimit cores,
//     a worker is added: the workers block on something (page faults on mapped shards,
//     a decoder's system calls) and one more keeps the cores busy;
//   - when the process used more than CPULimit cores (a limit below the machine's), a
//     worker is parked.
//
// Nothing is taken away otherwise: an idle reader or worker costs a parked goroutine,
// and memory stays bounded by MemoryBudget whatever the counts (the read budget bounds
// bytes in flight; decode memory is shared out among the most workers the tuner may
// run). The counts persist across epochs. Workers and readers beyond the active count
// park between samples, giving back their retained decode memory.
type tuner struct {
	autoWorkers, autoIO bool
	maxWorkers, maxIO   int
	cpuLimit            float64 // cores the process may use, as the tuner measures it

	workers, io atomic.Int32 // active counts

	mu   sync.Mutex
	wake chan struct{} // closed when an active count rises

	// Waits measured by the goroutines, in nanoseconds, summed.
	starved, readIdle, poolWait atomic.Int64
	steps                       atomic.Int64 // changes made
}

// tuneEvery is the controller's window.
const tuneEvery = 250 * time.Millisecond

func newTuner(c *Config, autoWorkers, autoIO bool) *tuner {
	t := &tuner{autoWorkers: autoWorkers, autoIO: autoIO, maxWorkers: c.Workers, maxIO: c.IOWorkers, cpuLimit: c.CPULimit, wake: make(chan struct{})}
	if autoWorkers {
		t.maxWorkers = max(c.Workers, 2*int(math.Ceil(c.CPULimit)))
	}
	if autoIO {
		t.maxIO = max(c.IOWorkers, maxAutoIO)
	}
	t.workers.Store(int32(c.Workers))
	t.io.Store(int32(c.IOWorkers))
	return t
}

// maxAutoIO bounds the reads in flight the tuner chooses: enough for 20 ms of latency at
// over 10,000 samples a second.
const maxAutoIO = 256

// on reports whether the tuner adjusts anything.
func (t *tuner) on() bool { return t.autoWorkers || t.autoIO }

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

// set changes the active counts and wakes parked goroutines.
func (t *tuner) set(workers, io int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if workers == int(t.workers.Load()) && io == int(t.io.Load()) {
		return
	}
	t.workers.Store(int32(workers))
	t.io.Store(int32(io))
	t.steps.Add(1)
	close(t.wake)
	t.wake = make(chan struct{})
}

// window is one controller window's measurements.
type window struct {
	wall, cpu                   time.Duration // cpu: 0 when the process's CPU time is not known
	starved, readIdle, poolWait time.Duration
	workers, io                 int
}

// decide returns the active counts for the next window.
func (t *tuner) decide(w window) (workers, io int) {
	workers, io = w.workers, w.io
	if w.wall <= 0 {
		return
	}
	wall := float64(w.wall)
	cores := float64(w.cpu) / wall
	if t.autoWorkers && w.cpu > 0 && cores > 1.1*t.cpuLimit && workers > 1 {
		return workers - 1, io
	}
	if float64(w.poolWait) > 0.1*wall {
		return // the consumer is the slower side
	}
	starved := float64(w.starved) / (wall * float64(w.workers))
	readIdle := float64(w.readIdle) / (wall * float64(w.io))
	switch {
	case starved > 0.1 && readIdle < 0.1:
		if t.autoIO && io < t.maxIO {
			io = min(t.maxIO, 2*io)
		}
	case starved <= 0.1 && t.autoWorkers && workers < t.maxWorkers && w.cpu > 0 && cores < 0.9*t.cpuLimit:
		workers++
	}
	return
}

// control runs r's tuning until the epoch ends.
func (r *run) control() {
	defer r.wg.Done()
	t := r.l.tune
	tick := time.NewTicker(tuneEvery)
	defer tick.Stop()
	prev := t.sample()
	for {
		select {
		case <-tick.C:
		case <-r.quit:
			return
		case <-r.ctx.Done():
			return
		}
		cur := t.sample()
		w := cur.since(prev)
		prev = cur
		t.set(t.decide(w))
	}
}

// tunerSample is the counters at one moment.
type tunerSample struct {
	at                          time.Time
	cpu                         time.Duration
	starved, readIdle, poolWait int64
	workers, io                 int
}

func (t *tuner) sample() tunerSample {
	cpu, _ := processCPU()
	return tunerSample{at: time.Now(), cpu: cpu, starved: t.starved.Load(), readIdle: t.readIdle.Load(), poolWait: t.poolWait.Load(),
		workers: int(t.workers.Load()), io: int(t.io.Load())}
}

func (s tunerSample) since(p tunerSample) window {
	w := window{wall: s.at.Sub(p.at), starved: time.Duration(s.starved - p.starved), readIdle: time.Duration(s.readIdle - p.readIdle),
		poolWait: time.Duration(s.poolWait - p.poolWait), workers: s.workers, io: s.io}
	if s.cpu > 0 && p.cpu > 0 {
		w.cpu = s.cpu - p.cpu
	}
	return w
}
