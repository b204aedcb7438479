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

	// Batches delivered to the consumer (micro-batches, with Config.Batch.MicroBatches),
	// and the time the consumer spent waiting for them inside Epoch's iterator: the
	// input-bound part of a training loop. Wait divided by the loop's wall time is the
	// fraction of time the training step starved.
	Batches int64
	Wait    time.Duration

	// Stages: per stage, items processed, time spent working (summed over goroutines,
	// so it can exceed wall time) and bytes (read: file bytes; decode: output pixels;
	// pack: bytes written into batches). Mix counts batches mixed (Config.Mix; not those
	// its Prob left unmixed), their bytes and the time it took.
	Stages struct {
		Read, Decode, Augment, Pack, Mix StageStats
	}

	// Tuning: the CPU workers, concurrent reads and batches in flight in use now (the
	// Config's, or what the tuner chose; Config.Tuning.NoAutotune), and Steps, the
	// tuner's changes since New.
	Tuning struct {
		Workers, IOWorkers, Prefetch int
		Steps                        int64
	}

	// Queues: occupancy (length and capacity) of the running epoch's queues at the time
	// of the snapshot, zero when idle: read tasks, decoded files waiting for a worker,
	// and finished batches waiting for the consumer.
	Queues struct {
		Tasks, Decoded, Ready struct{ Len, Cap int }
	}

	// Bad: Samples counts bad files, each once per epoch however often it was drawn;
	// Draws counts every failed attempt to load a sample, a bad file drawn again as
	// another slot's replacement included. Recent holds the last few bad files, newest
	// last.
	Bad struct {
		Samples, Draws int64
		Recent         []SampleError
	}

	// Cache: samples read from the decoded-sample cache (Config.SampleCache) or a converted
	// dataset, stored into the cache, and not stored because filling had used its share
	// of the workers' time (Config.SampleCacheFill). Store is the store's own snapshot, nil
	// without one.
	Cache struct {
		Hits, Stored, Deferred int64
		Store                  *cache.Stats
	}

	// Memory, in bytes. PeakHeld is the most the loader held at once — pinned buffers
	// plus read and decode working memory — and never exceeds Budget. Pinned.BytesMapped
	// is the pinned batch buffers' size: Prefetch+1 buffers of Pinned.BufferSize, each
	// holding one delivered batch (one micro-batch with Config.Batch.MicroBatches).
	// Outstanding is the batches the caller holds. Returns counts the times the loader
	// gave freed memory back to the system (see Config.Tuning.MemoryBudget): a garbage
	// collection, with the Go heap's free pages and the C allocator's returned.
	Memory struct {
		Budget, PeakHeld, ReadBudget, PeakRead, DecodeBudget, PeakDecode int64
		Pinned                                                           pinned.Stats
		Outstanding, Returns                                             int64
	}

	// Device: Kind is the device batches go to, gpu.Host or gpu.CUDA (what
	// Config.Device.Name "auto" chose, for code that must know: Batch.Float32 works on
	// the host, DevicePtr is GPU memory on CUDA). Name says where ("cpu", "cuda:0
	// (NVIDIA ...)"); Bytes is the device memory the loader holds, fixed from New to
	// Close: its ring of buffers, each sized for one delivered batch (one micro-batch),
	// plus Config.Device.Cast's staging buffer; 0 on the cpu device without Convert,
	// whose batches stay in the pinned buffers. Slots is the ring's buffers and SlotBytes
	// one buffer's size (both 0 when Bytes is). Copies counts batches copied; CopyWaits
	// and CopyWaitTime the consumer's Wait calls that found their copy still running and
	// the time they blocked: zero when copies never hold up training. SlotWait is the
	// time finished batches waited for a free device buffer, that is, for the consumer
	// to release one.
	Device struct {
		Kind                   gpu.Kind
		Name                   string
		Bytes, Copies          int64
		Slots                  int
		SlotBytes              int64
		CopyWaits              int64
		CopyWaitTime, SlotWait time.Duration
	}

	// Backends names the decoders in use: Decode is the JPEG path ("turbo",
	// "go", or "cache:CODEC" when samples come stored), WebP "libwebp" or "go".
	Backends struct {
		Decode, WebP string
	}
}

// StageStats counts one stage's work.
type StageStats struct {
	Items int64
	Busy  time.Duration
	Bytes int64
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
	s := Stats{Epochs: l.stats.epochs.Load(), Batches: l.stats.batches.Load(), Wait: time.Duration(l.stats.wait.Load())}
	st := &s.Stages
	st.Read, st.Decode, st.Augment, st.Pack, st.Mix = l.stats.read.snapshot(), l.stats.decode.snapshot(), l.stats.augment.snapshot(), l.stats.pack.snapshot(), l.stats.mix.snapshot()
	m := &s.Memory
	m.Budget, m.ReadBudget, m.PeakRead, m.DecodeBudget, m.PeakDecode = l.cfg.Tuning.MemoryBudget, l.read.size, l.read.peak.Load(), l.dec.size, l.dec.peak.Load()
	m.Pinned, m.Outstanding, m.Returns = l.pool.Stats(), l.outstanding.Load(), l.returns.runs.Load()
	tu := &s.Tuning
	tu.Workers, tu.IOWorkers, tu.Prefetch, tu.Steps = int(l.tune.workers.Load()), int(l.tune.io.Load()), int(l.tune.prefetch.Load()), l.tune.steps.Load()
	s.Backends.Decode, s.Backends.WebP = l.backends.decode, l.backends.webp
	s.Memory.PeakHeld = s.Memory.Pinned.BytesMapped + l.held.peak.Load()
	rs := l.ring.Stats()
	s.Device.Kind, s.Device.Name, s.Device.Bytes, s.Device.Copies = l.dev.Kind(), l.dev.String(), rs.DeviceBytes, rs.Uploads
	if rs.DeviceBytes > 0 {
		s.Device.Slots, s.Device.SlotBytes = rs.Slots, rs.SlotBytes
	}
	s.Device.CopyWaits, s.Device.CopyWaitTime, s.Device.SlotWait = rs.Blocked, rs.BlockedTime, time.Duration(l.stats.slotWait.Load())
	s.Cache.Hits, s.Cache.Stored, s.Cache.Deferred = l.stats.cacheHits.Load(), l.stats.cacheStored.Load(), l.stats.cacheDeferred.Load()
	switch {
	case l.cfg.SampleCache != nil:
		cs := l.cfg.SampleCache.Stats()
		s.Cache.Store = &cs
	case l.stored != nil:
		cs := l.stored.Stats()
		s.Cache.Store = &cs
	}
	l.stats.mu.Lock()
	s.Bad.Samples, s.Bad.Draws = l.stats.bad, l.stats.badDraws.Load()
	s.Bad.Recent = append([]SampleError(nil), l.stats.recent...)
	l.stats.mu.Unlock()
	l.mu.Lock()
	if r := l.run; r != nil {
		q := &s.Queues
		q.Tasks.Len, q.Tasks.Cap = len(r.tasks), cap(r.tasks)
		q.Decoded.Len, q.Decoded.Cap = len(r.decodeQ), cap(r.decodeQ)
		q.Ready.Len, q.Ready.Cap = len(r.ready), cap(r.ready)
	}
	l.mu.Unlock()
	return s
}
