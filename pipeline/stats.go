package pipeline

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/gpu"
	"github.com/conveyor-ml/conveyor/pinned"
)

// Stats is a snapshot of a Loader's counters since New.
type Stats struct {
	Epochs int64 // epochs started

	// Batches delivered to the consumer (micro-batches, with Config.MicroBatches), and the
	// time the consumer spent waiting for them inside Epoch's iterator: the input-bound
	// part of a training loop. Wait divided by the loop's wall time is the fraction of
	// time the training step starved.
	Batches int64
	Wait    time.Duration

	// Per stage: items processed, time spent working (summed over goroutines, so it can
	// exceed wall time) and bytes (read: file bytes; decode: output pixels; pack: bytes
	// written into batches).
	Read, Decode, Augment, Pack StageStats
	// Mix counts batches mixed (Config.Mix; not those its Prob left unmixed), their bytes
	// and the time it took.
	Mix StageStats

	// Workers, IOWorkers and Prefetch are the CPU workers, concurrent reads and batches
	// in flight in use now: the Config's, or what the tuner chose (Config.NoAutotune);
	// TuneSteps counts the tuner's changes since New.
	Workers, IOWorkers, Prefetch int
	TuneSteps                    int64

	// Queue occupancy of the running epoch at the time of the snapshot (zero when idle).
	Tasks, Decoded, Ready QueueStats

	// BadSamples counts bad files, each once per epoch however often it was drawn;
	// BadDraws counts every failed attempt to load a sample, a bad file drawn again as
	// another slot's replacement included. RecentBad holds the last few bad files, newest
	// last.
	BadSamples, BadDraws int64
	RecentBad            []SampleError

	// Cache use: samples read from it, stored into it, and not stored because filling
	// had used its share of the workers' time (see Config.CacheFill). Cache is the
	// cache's own snapshot, nil without one.
	CacheHits, CacheStored, CacheDeferred int64
	Cache                                 *cache.Stats

	// Memory, in bytes. PeakHeld is the most the loader held at once — pinned buffers plus
	// read and decode working memory — and never exceeds Budget. Pinned.BytesMapped is
	// the pinned batch buffers' size: Prefetch+1 buffers of Pinned.BufferSize, each
	// holding one delivered batch (one micro-batch with Config.MicroBatches).
	Budget, PeakHeld, ReadBudget, PeakRead, DecodeBudget, PeakDecode int64
	Pinned                                                           pinned.Stats
	Outstanding                                                      int64 // batches held by the caller
	// MemoryReturns counts the times the loader gave freed memory back to the system
	// (see Config.MemoryBudget): a garbage collection, with the Go heap's free pages and
	// the C allocator's returned.
	MemoryReturns int64

	// DeviceKind is the device batches go to, gpu.Host or gpu.CUDA: what Config.Device
	// "auto" chose, for code that must know (Batch.Float32 works on the host, DevicePtr is
	// GPU memory on CUDA).
	DeviceKind gpu.Kind
	// Device is where batches go ("cpu", "cuda:0 (NVIDIA ...)"); DeviceBytes the device
	// memory the loader holds, fixed from New to Close: its ring of buffers, each sized
	// for one delivered batch (one micro-batch with Config.MicroBatches), plus
	// DeviceConvert's staging buffer; 0 on the cpu device without DeviceConvert, whose
	// batches stay in the pinned buffers. DeviceSlots is the ring's buffers and
	// DeviceSlotBytes one buffer's size (both 0 when DeviceBytes is). Copies counts batches copied; CopyWaits and CopyWaitTime the
	// consumer's Wait calls that found their copy still running and the time they
	// blocked: zero when copies never hold up training. SlotWait is the time finished
	// batches waited for a free device buffer, that is, for the consumer to release one.
	Device                 string
	DeviceBytes, Copies    int64
	DeviceSlots            int
	DeviceSlotBytes        int64
	CopyWaits              int64
	CopyWaitTime, SlotWait time.Duration
}

// StageStats counts one stage's work.
type StageStats struct {
	Items int64
	Busy  time.Duration
	Bytes int64
}

// QueueStats is a queue's length and capacity.
type QueueStats struct {
	Len, Cap int
}

const recentBad = 32

type stage struct {
	items, busy, bytes atomic.Int64
}

// add counts one item that started at t0 and returns the time it ended, so the next stage
// can start its clock without another call to time.Now.
func (s *stage) add(t0 time.Time, bytes int64) time.Time {
	t1 := time.Now()
	s.items.Add(1)
	s.busy.Add(int64(t1.Sub(t0)))
	s.bytes.Add(bytes)
	return t1
}

func (s *stage) snapshot() StageStats {
	return StageStats{Items: s.items.Load(), Busy: time.Duration(s.busy.Load()), Bytes: s.bytes.Load()}
}

type counters struct {
	epochs, batches, wait                 atomic.Int64
	slotWait                              atomic.Int64 // transfer waiting for a free device buffer
	read, decode, augment, pack, mix      stage
	cacheHits, cacheStored, cacheDeferred atomic.Int64
	badDraws                              atomic.Int64

	mu     sync.Mutex
	bad    int64
	recent []SampleError
}

func (c *counters) addBad(e *SampleError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bad++
	if len(c.recent) == recentBad {
		copy(c.recent, c.recent[1:])
		c.recent = c.recent[:recentBad-1]
	}
	c.recent = append(c.recent, *e)
}

// Stats returns a snapshot of the loader's counters.
func (l *Loader) Stats() Stats {
	s := Stats{
		Epochs: l.stats.epochs.Load(), Batches: l.stats.batches.Load(), Wait: time.Duration(l.stats.wait.Load()),
		Read: l.stats.read.snapshot(), Decode: l.stats.decode.snapshot(),
		Augment: l.stats.augment.snapshot(), Pack: l.stats.pack.snapshot(), Mix: l.stats.mix.snapshot(),
		Budget:     l.cfg.MemoryBudget,
		ReadBudget: l.read.size, PeakRead: l.read.peak.Load(),
		DecodeBudget: l.dec.size, PeakDecode: l.dec.peak.Load(),
		Pinned:        l.pool.Stats(),
		Outstanding:   l.outstanding.Load(),
		MemoryReturns: l.returns.runs.Load(),
		Workers:       int(l.tune.workers.Load()), IOWorkers: int(l.tune.io.Load()), Prefetch: int(l.tune.prefetch.Load()),
		TuneSteps: l.tune.steps.Load(),
	}
	s.PeakHeld = s.Pinned.BytesMapped + l.held.peak.Load()
	rs := l.ring.Stats()
	s.DeviceKind, s.Device, s.DeviceBytes, s.Copies = l.dev.Kind(), l.dev.String(), rs.DeviceBytes, rs.Uploads
	if rs.DeviceBytes > 0 {
		s.DeviceSlots, s.DeviceSlotBytes = rs.Slots, rs.SlotBytes
	}
	s.CopyWaits, s.CopyWaitTime, s.SlotWait = rs.Blocked, rs.BlockedTime, time.Duration(l.stats.slotWait.Load())
	s.CacheHits, s.CacheStored, s.CacheDeferred = l.stats.cacheHits.Load(), l.stats.cacheStored.Load(), l.stats.cacheDeferred.Load()
	switch {
	case l.cfg.Cache != nil:
		cs := l.cfg.Cache.Stats()
		s.Cache = &cs
	case l.stored != nil:
		cs := l.stored.Stats()
		s.Cache = &cs
	}
	l.stats.mu.Lock()
	s.BadSamples, s.BadDraws = l.stats.bad, l.stats.badDraws.Load()
	s.RecentBad = append([]SampleError(nil), l.stats.recent...)
	l.stats.mu.Unlock()
	l.mu.Lock()
	if r := l.run; r != nil {
		s.Tasks = QueueStats{len(r.tasks), cap(r.tasks)}
		s.Decoded = QueueStats{len(r.decodeQ), cap(r.decodeQ)}
		s.Ready = QueueStats{len(r.ready), cap(r.ready)}
	}
	l.mu.Unlock()
	return s
}
