package main

import (
	"github.com/conveyor-ml/conveyor/metrics"
	"github.com/conveyor-ml/conveyor/source"
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
	// Noise says where a ceiling is above an earlier one that runs fewer stages.
	Noise []string `json:"noise,omitempty"`
	H2D   string   `json:"h2d,omitempty"` // why the host-to-device copy was not measured

	Sweep []string     `json:"sweep,omitempty"` // the swept settings, x axis first
	Runs  []*runReport `json:"runs,omitempty"`
	Plot  string       `json:"plot,omitempty"`

	// ObjStore: a remote dataset's object-store and shard-cache counters, indexing
	// included.
	ObjStore *objStats `json:"objstore,omitempty"`
	store    *source.Dataset
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

// runReport is one measured run of the loader: what --json prints for a plain bench,
// and one entry of a sweep or a stage-ceiling table.
type runReport struct {
	// Images over Seconds, the run's wall time: loader creation, the first epoch's
	// warm-up and the gaps between epochs included.
	Images     int64   `json:"images"`
	Seconds    float64 `json:"seconds"`
	ImagesPerS float64 `json:"images_per_s"`
	// SteadyImagesPerS and SteadyMBPerS are the rates of the epochs after the first:
	// loader creation, the first batch's latency and the first epoch's warm-up left out.
	// With one epoch they are that epoch's (warm-up included). The headline.
	SteadyImagesPerS float64 `json:"steady_images_per_s"`
	SteadyMBPerS     float64 `json:"steady_mb_per_s"`
	// CreateS is the time pipeline.New took (listing excluded: see OpenS).
	CreateS    float64 `json:"create_s"`
	ReadBytes  int64   `json:"read_bytes"`
	MBPerS     float64 `json:"mb_per_s"` // bytes read (files, or records of a cache) per second over Seconds, 10^6
	BadSamples int64   `json:"bad_samples"`
	// FirstBatchS is the time from creating the loader to the first batch in hand.
	FirstBatchS float64 `json:"first_batch_s"`

	CPU    cpuReport    `json:"cpu"`
	Memory memoryReport `json:"memory"`
	// Stage busy time: where the workers' time went.
	StageBusy []stageBusy `json:"stage_busy"`
	// Queues' mean occupancy over the run, sampled.
	Queues   []queueReport   `json:"queues"`
	Consumer *consumerReport `json:"consumer,omitempty"`

	Epochs   []epochResult `json:"epochs"`
	Backend  string        `json:"decode_backend"`
	WebP     string        `json:"webp_backend,omitempty"`
	Config   string        `json:"config"`
	Settings settings      `json:"settings"`

	// Cache use, summed over epochs: samples read from the cache (--cache or a converted
	// dataset), stored into it, and not stored because filling had used its --cache-fill
	// share.
	CacheHits     int64       `json:"cache_hits"`
	CacheStored   int64       `json:"cache_stored"`
	CacheDeferred int64       `json:"cache_deferred"`
	Cache         *cacheState `json:"cache,omitempty"` // the --cache directory at the end

	// Loader is the loader's own counters at the end, as metrics.Publish exports them.
	Loader metrics.Snapshot `json:"loader"`
}

// settings are the swept and most-read parts of the effective configuration.
type settings struct {
	Workers   int `json:"workers"`
	IOWorkers int `json:"io_workers"`
	Prefetch  int `json:"prefetch"`
	Batch     int `json:"batch"`
	// MicroBatches is how many micro-batches each batch is delivered as; 1: whole batches.
	MicroBatches int    `json:"micro_batches"`
	StopAfter    string `json:"stop_after"`
	// Tuned is what the loader's autotuner chose, nil when it tuned nothing (--no-autotune,
	// or --workers, --io-workers and --prefetch all given). Workers, IOWorkers and
	// Prefetch above are the starting values.
	Tuned *tuned `json:"tuned,omitempty"`
}

// tuned is the autotuner's choice at the end of a run.
type tuned struct {
	Workers   int     `json:"workers"`
	IOWorkers int     `json:"io_workers"`
	Prefetch  int     `json:"prefetch"`
	Steps     int64   `json:"steps"`
	CPULimit  float64 `json:"cpu_limit"`
}

type cpuReport struct {
	UserS float64 `json:"user_s"`
	SysS  float64 `json:"sys_s"`
	// Percent is CPU time over wall time: 200 means two cores busy throughout.
	Percent float64 `json:"percent"`
	// Utilisation is Percent shared over the cores Go may use (GOMAXPROCS), 0 to 1.
	Utilisation float64 `json:"utilisation"`
	Cores       int     `json:"cores"`
}

type memoryReport struct {
	PeakRSS      int64  `json:"peak_rss_bytes"`
	PeakRSSScope string `json:"peak_rss_scope"` // "run", or "process" where it could not be reset
	// The resident memory's peaks by kind, sampled every memEvery and at each epoch's
	// end (so lower bounds; 0 where the system does not report them): anonymous
	// (the Go heap, the pinned buffers, C libraries' allocations), file-backed (mapped
	// shards and the program's own pages), shared. PeakHeap is the Go heap's spans in
	// use, PeakGo all the Go runtime holds (heap, stacks, its own structures).
	// AnonOverBudget is PeakAnon over Budget.
	PeakAnon       int64   `json:"peak_anon_bytes"`
	PeakFile       int64   `json:"peak_file_bytes"`
	PeakShmem      int64   `json:"peak_shmem_bytes"`
	PeakHeap       int64   `json:"peak_heap_bytes"`
	PeakGo         int64   `json:"peak_go_bytes"`
	AnonOverBudget float64 `json:"anon_over_budget"`
	// Returns counts the loader's returns of freed memory (pipeline.Stats.Memory.Returns).
	Returns      int64 `json:"memory_returns"`
	Budget       int64 `json:"budget_bytes"`
	PeakHeld     int64 `json:"peak_held_bytes"`
	Pinned       int64 `json:"pinned_bytes"`
	PinnedLocked bool  `json:"pinned_locked"`
	// PinnedRegistered: registered with the GPU driver (page-locked by it); on a GPU only.
	PinnedRegistered    bool   `json:"pinned_registered,omitempty"`
	PinnedRegisterError string `json:"pinned_register_error,omitempty"`
	// PinnedBuffers buffers of PinnedBufferBytes each hold one delivered batch (one
	// micro-batch with --micro-batches); likewise DeviceBuffers of DeviceBufferBytes,
	// which with the conversion's staging buffer make up DeviceBytes (all 0 when batches
	// stay in the pinned buffers).
	PinnedBuffers     int    `json:"pinned_buffers"`
	PinnedBufferBytes int64  `json:"pinned_buffer_bytes"`
	Device            string `json:"device"`
	DeviceBytes       int64  `json:"device_bytes"`
	DeviceBuffers     int    `json:"device_buffers"`
	DeviceBufferBytes int64  `json:"device_buffer_bytes"`
}

type stageBusy struct {
	Stage string  `json:"stage"`
	Items int64   `json:"items"`
	BusyS float64 `json:"busy_s"`
	// Share is this stage's part of all stages' busy time.
	Share float64 `json:"share"`
	// Utilisation is busy time over wall time times the goroutines that run the stage
	// (IOWorkers for read, Workers for the rest).
	Utilisation float64 `json:"utilisation"`
	MsPerItem   float64 `json:"ms_per_item"`
}

type queueReport struct {
	Queue string  `json:"queue"`
	Cap   int     `json:"cap"`
	Mean  float64 `json:"mean"` // mean length
	Fill  float64 `json:"fill"` // mean length over capacity
}

type consumerReport struct {
	StepS  float64 `json:"step_s"`
	WaitS  float64 `json:"wait_s"`
	WallS  float64 `json:"wall_s"`
	Waited float64 `json:"wait_fraction"` // of the consumer loop's wall time
	// Batches whose copy to the device was still running when the step wanted them, and
	// the time the step waited for those copies.
	CopyWaits int64   `json:"copy_waits"`
	CopyWaitS float64 `json:"copy_wait_s"`
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
	ReadBytes   int64   `json:"read_bytes"`
	CacheHits   int64   `json:"cache_hits"`
	CacheStored int64   `json:"cache_stored"`
	// PeakAnon is the most anonymous resident memory sampled during the epoch.
	PeakAnon int64 `json:"peak_anon_bytes"`
}
