package metrics

import (
	"expvar"
	"fmt"
	"sync"

	"github.com/conveyor-ml/conveyor/pipeline"
)

// Source is what the exporters read: a *pipeline.Loader, or a fake in tests.
type Source interface {
	Stats() pipeline.Stats
}

// MaxRecentBad is the most recent bad samples a Snapshot lists. The loader remembers
// more; a short list keeps /debug/vars readable while still naming the files to look at.
const MaxRecentBad = 8

// Snapshot is a loader's counters in a form fit for JSON: snake_case keys that stay put
// from release to release, durations as float seconds and sizes in bytes. Counters count
// since the loader was created.
type Snapshot struct {
	Epochs      int64   `json:"epochs"`       // epochs started
	Batches     int64   `json:"batches"`      // batches delivered to the consumer (micro-batches with Config.MicroBatches)
	WaitSeconds float64 `json:"wait_seconds"` // time the consumer waited for them
	Stages      Stages  `json:"stages"`
	Queues      Queues  `json:"queues"` // occupancy of the running epoch; zero when idle
	// Workers and IOWorkers in use now, as set or as the autotuner chose them, and the
	// tuner's changes since the loader was made (pipeline.Stats).
	Workers   int   `json:"workers"`
	IOWorkers int   `json:"io_workers"`
	TuneSteps int64 `json:"tune_steps"`

	BadSamples int64       `json:"bad_samples"`
	RecentBad  []BadSample `json:"recent_bad"` // at most MaxRecentBad, newest last; never null

	CacheHits     int64  `json:"cache_hits"`
	CacheStored   int64  `json:"cache_stored"`
	CacheDeferred int64  `json:"cache_deferred"`
	Cache         *Cache `json:"cache"` // null when the loader has no cache

	Memory      Memory `json:"memory"`
	Pinned      Pinned `json:"pinned"`
	Outstanding int64  `json:"outstanding"` // batches held by the consumer, not yet released
	Device      Device `json:"device"`
}

// Device is where the loader delivers batches and how the copies went (see
// pipeline.Stats): its device memory, fixed from New to Close; batches copied; the
// consumer's waits on copies still running; and the time finished batches waited for a
// free device buffer.
type Device struct {
	Kind            string  `json:"kind"` // "host" or "cuda" (gpu.Kind)
	Name            string  `json:"name"`
	Bytes           int64   `json:"bytes"`
	Copies          int64   `json:"copies"`
	CopyWaits       int64   `json:"copy_waits"`
	CopyWaitSeconds float64 `json:"copy_wait_seconds"`
	SlotWaitSeconds float64 `json:"slot_wait_seconds"`
}

// Stages holds the per-stage counters, in pipeline order.
type Stages struct {
	Read    Stage `json:"read"`
	Decode  Stage `json:"decode"`
	Augment Stage `json:"augment"`
	Pack    Stage `json:"pack"`
	Mix     Stage `json:"mix,omitzero"` // batches mixed (pipeline.Config.Mix), bytes mixed; absent without mixing
}

// Stage is one stage's work. BusySeconds sums over goroutines, so it can exceed wall
// time. Bytes means what pipeline.StageStats says it means for that stage (file bytes
// read, pixels decoded, bytes packed).
type Stage struct {
	Items       int64   `json:"items"`
	BusySeconds float64 `json:"busy_seconds"`
	Bytes       int64   `json:"bytes"`
}

// Queues holds the running epoch's queues, in pipeline order.
type Queues struct {
	Tasks   Queue `json:"tasks"`
	Decoded Queue `json:"decoded"`
	Ready   Queue `json:"ready"`
}

// Queue is a queue's length and capacity.
type Queue struct {
	Len int `json:"len"`
	Cap int `json:"cap"`
}

// BadSample is one sample that failed.
type BadSample struct {
	Path  string `json:"path"`
	Index int    `json:"index"`
	Epoch int    `json:"epoch"`
	Error string `json:"error"` // the cause (SampleError.Err's message)
}

// Cache is the loader's cache's own snapshot (see cache.Stats). Its counters cover every
// user of the cache in this process, not only this loader.
type Cache struct {
	Records  int    `json:"records"`
	Shards   int    `json:"shards"`
	Bytes    int64  `json:"bytes"`
	Hits     int64  `json:"hits"`
	Misses   int64  `json:"misses"`
	Corrupt  int64  `json:"corrupt"`
	Written  int64  `json:"written"`
	Rejected int64  `json:"rejected"`
	Evicted  int64  `json:"evicted"`
	Full     bool   `json:"full"`
	Disabled string `json:"disabled"` // why writing stopped; "" while writing
}

// Memory is the loader's memory budget and high-water marks, all in bytes. PeakHeld
// covers pinned buffers plus read and decode working memory, and never exceeds Budget.
type Memory struct {
	Budget       int64 `json:"budget"`
	PeakHeld     int64 `json:"peak_held"`
	ReadBudget   int64 `json:"read_budget"`
	PeakRead     int64 `json:"peak_read"`
	DecodeBudget int64 `json:"decode_budget"`
	PeakDecode   int64 `json:"peak_decode"`
	// Returns counts the loader's returns of freed memory to the system (see
	// pipeline.Stats.Memory.Returns).
	Returns int64 `json:"returns"`
}

// Pinned is the batch buffer pool's snapshot (see pinned.Stats).
type Pinned struct {
	BufferSize     int    `json:"buffer_size"`
	Buffers        int    `json:"buffers"`
	InUse          int    `json:"in_use"`
	PeakInUse      int    `json:"peak_in_use"`
	BytesMapped    int64  `json:"bytes_mapped"`
	BytesInUse     int64  `json:"bytes_in_use"`
	PeakBytesInUse int64  `json:"peak_bytes_in_use"`
	Budget         int64  `json:"budget"`
	Locked         bool   `json:"locked"`
	LockError      string `json:"lock_error"` // why not locked when locking was asked for; "" otherwise
	// Registered says the buffers are registered with the GPU driver (cuMemHostRegister), so
	// copies from them are asynchronous; RegisterError why not, when the driver refused.
	Registered    bool   `json:"registered"`
	RegisterError string `json:"register_error,omitempty"`
	Gets          int64  `json:"gets"`
	Waits         int64  `json:"waits"`
}

// Snap converts st. It does not keep st's slices.
func Snap(st pipeline.Stats) Snapshot {
	p := st.Memory.Pinned
	s := Snapshot{
		Epochs: st.Epochs, Batches: st.Batches, WaitSeconds: st.Wait.Seconds(),
		Stages: Stages{Read: stage(st.Stages.Read), Decode: stage(st.Stages.Decode), Augment: stage(st.Stages.Augment), Pack: stage(st.Stages.Pack), Mix: stage(st.Stages.Mix)},
		Queues: Queues{Tasks: queue(st.Queues.Tasks), Decoded: queue(st.Queues.Decoded), Ready: queue(st.Queues.Ready)},

		Workers: st.Tuning.Workers, IOWorkers: st.Tuning.IOWorkers, TuneSteps: st.Tuning.Steps,

		BadSamples: st.Bad.Samples,
		RecentBad:  make([]BadSample, 0, min(len(st.Bad.Recent), MaxRecentBad)),

		CacheHits: st.Cache.Hits, CacheStored: st.Cache.Stored, CacheDeferred: st.Cache.Deferred,

		Memory: Memory{
			Budget: st.Memory.Budget, PeakHeld: st.Memory.PeakHeld,
			ReadBudget: st.Memory.ReadBudget, PeakRead: st.Memory.PeakRead,
			DecodeBudget: st.Memory.DecodeBudget, PeakDecode: st.Memory.PeakDecode,
			Returns: st.Memory.Returns,
		},
		Pinned: Pinned{
			BufferSize: p.BufferSize, Buffers: p.Buffers, InUse: p.InUse, PeakInUse: p.PeakInUse,
			BytesMapped: p.BytesMapped, BytesInUse: p.BytesInUse, PeakBytesInUse: p.PeakBytesInUse,
			Budget: p.Budget, Locked: p.Locked, LockError: p.LockError, Gets: p.Gets, Waits: p.Waits,
			Registered: p.Registered, RegisterError: p.RegisterError,
		},
		Outstanding: st.Memory.Outstanding,
		Device: Device{
			Kind: st.Device.Kind.String(), Name: st.Device.Name, Bytes: st.Device.Bytes, Copies: st.Device.Copies, CopyWaits: st.Device.CopyWaits,
			CopyWaitSeconds: st.Device.CopyWaitTime.Seconds(), SlotWaitSeconds: st.Device.SlotWait.Seconds(),
		},
	}
	for _, e := range st.Bad.Recent[max(0, len(st.Bad.Recent)-MaxRecentBad):] {
		b := BadSample{Path: e.Path, Index: e.Index, Epoch: e.Epoch}
		if e.Err != nil {
			b.Error = e.Err.Error()
		}
		s.RecentBad = append(s.RecentBad, b)
	}
	if c := st.Cache.Store; c != nil {
		s.Cache = &Cache{
			Records: c.Records, Shards: c.Shards, Bytes: c.Bytes,
			Hits: c.Hits, Misses: c.Misses, Corrupt: c.Corrupt,
			Written: c.Written, Rejected: c.Rejected, Evicted: c.Evicted,
			Full: c.Full, Disabled: c.Disabled,
		}
	}
	return s
}

func stage(s pipeline.StageStats) Stage {
	return Stage{Items: s.Items, BusySeconds: s.Busy.Seconds(), Bytes: s.Bytes}
}

func queue(q struct{ Len, Cap int }) Queue { return Queue{Len: q.Len, Cap: q.Cap} }

// Expvar returns an expvar.Var whose value is Snap(s.Stats()), taken each time the
// variable is read, so publishing it costs nothing until someone looks.
func Expvar(s Source) expvar.Func {
	return func() any { return Snap(s.Stats()) }
}

// publishMu makes Publish's check and expvar.Publish one step, so that two Publish calls
// racing on a name get an error rather than a panic. Names published directly through
// expvar can still race with it.
var publishMu sync.Mutex

// Publish publishes Expvar(s) under name in the expvar package, which serves every
// published variable at /debug/vars on http.DefaultServeMux once the program imports
// expvar. expvar has no way to unpublish, so publish each loader once per process, under
// its own name. Unlike expvar.Publish, Publish returns an error rather than panicking
// when the name is taken.
func Publish(name string, s Source) error {
	publishMu.Lock()
	defer publishMu.Unlock()
	if expvar.Get(name) != nil {
		return fmt.Errorf("metrics: expvar %q is already published", name)
	}
	expvar.Publish(name, Expvar(s))
	return nil
}
