package promconveyor

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/conveyor-ml/conveyor/metrics"
	"github.com/conveyor-ml/conveyor/pipeline"
)

// Options configures a Collector.
type Options struct {
	// ConstLabels are added to every metric, for example {"loader": "train"} to tell a
	// job's loaders apart when each has its own Collector. They must not use the names of
	// the variable labels (stage, queue, kind, result). Default none.
	ConstLabels prometheus.Labels
}

// String prints the options, for a training log. A nil o prints the defaults.
func (o *Options) String() string {
	if o == nil {
		o = &Options{}
	}
	var b strings.Builder
	b.WriteString("const labels {")
	for i, k := range slices.Sorted(maps.Keys(o.ConstLabels)) {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%q", k, o.ConstLabels[k])
	}
	b.WriteString("}")
	return b.String()
}

// Collector reports a Source's pipeline.Stats as Prometheus metrics. It is safe for
// concurrent use, as the Prometheus registry requires.
type Collector struct {
	src   metrics.Source
	opts  Options
	descs []*prometheus.Desc // every Desc, for Describe

	epochs, batches, wait                  *prometheus.Desc
	stageItems, stageBusy, stageBytes      *prometheus.Desc
	decodedPixels, mixedBatches            *prometheus.Desc
	queueLen, queueCap                     *prometheus.Desc
	badSamples                             *prometheus.Desc
	cacheHits, cacheStored, cacheDeferred  *prometheus.Desc
	memBudget, memPeakHeld, memReturns     *prometheus.Desc
	workers, tuneSteps                     *prometheus.Desc
	workBudget, workPeak                   *prometheus.Desc
	pinBuffers, pinInUse, pinBufferSize    *prometheus.Desc
	pinMapped, pinInUseBytes, pinPeakBytes *prometheus.Desc
	pinBudget, pinLocked, pinGets          *prometheus.Desc
	pinRegistered                          *prometheus.Desc
	pinWaits                               *prometheus.Desc
	outstanding                            *prometheus.Desc

	cRecords, cShards, cBytes    *prometheus.Desc
	cLookups, cCorrupt, cWritten *prometheus.Desc
	cRejected, cEvicted          *prometheus.Desc
	cFull, cDisabled             *prometheus.Desc
}

// NewCollector returns a Collector for s, usually a *pipeline.Loader. A nil o means
// defaults. It reports an invalid label name in o as an error here rather than at
// registration.
func NewCollector(s metrics.Source, o *Options) (*Collector, error) {
	var opts Options
	if o != nil {
		opts.ConstLabels = maps.Clone(o.ConstLabels) // the caller may reuse its map
	}
	c := &Collector{src: s, opts: opts}
	desc := func(d **prometheus.Desc, subsystem, name, help string, labels ...string) {
		*d = prometheus.NewDesc(prometheus.BuildFQName("conveyor", subsystem, name), help, labels, opts.ConstLabels)
		c.descs = append(c.descs, *d)
	}
	const l, ca = "loader", "cache"

	desc(&c.epochs, l, "epochs_total", "Epochs started.")
	desc(&c.batches, l, "batches_total", "Batches delivered to the consumer.")
	desc(&c.wait, l, "wait_seconds_total", "Time the consumer waited for batches; its rate is the fraction of time training starved for input.")
	desc(&c.stageItems, l, "stage_items_total", "Samples each stage processed.", "stage")
	desc(&c.stageBusy, l, "stage_busy_seconds_total", "Time each stage spent working, summed over goroutines; its rate is the stage's busy goroutines.", "stage")
	desc(&c.stageBytes, l, "stage_bytes_total", "Bytes through a stage: file bytes read, bytes packed into batches.", "stage")
	desc(&c.decodedPixels, l, "decoded_pixels_total", "Pixels the decode stage produced.")
	desc(&c.mixedBatches, l, "mixed_batches_total", "Batches mixed by MixUp or CutMix (Config.Mix); the mix stage's busy time is stage_busy_seconds_total{stage=\"mix\"}.")
	desc(&c.queueLen, l, "queue_length", "Items in the running epoch's queues; 0 when idle.", "queue")
	desc(&c.queueCap, l, "queue_capacity", "Capacity of the running epoch's queues; 0 when idle.", "queue")
	desc(&c.badSamples, l, "bad_samples_total", "Samples that failed to read or decode.")
	desc(&c.cacheHits, l, "cache_hits_total", "Samples read from the cache instead of decoded.")
	desc(&c.cacheStored, l, "cache_stored_total", "Samples stored into the cache.")
	desc(&c.cacheDeferred, l, "cache_deferred_total", "Samples not stored into the cache because filling it had used its share of the workers' time.")
	desc(&c.memBudget, l, "memory_budget_bytes", "Memory the loader may hold: pinned buffers plus read and decode working memory.")
	desc(&c.memPeakHeld, l, "memory_peak_held_bytes", "Most memory the loader has held at once; never above the budget.")
	desc(&c.memReturns, l, "memory_returns_total", "Times the loader gave freed memory back to the system as the process neared its budget.")
	desc(&c.workers, l, "workers", "Goroutines in use, by kind: cpu (decode, augment, pack) and io (concurrent reads); as set, or as the autotuner chose.", "kind")
	desc(&c.tuneSteps, l, "autotune_steps_total", "Changes the autotuner made to the worker counts.")
	desc(&c.workBudget, l, "working_memory_budget_bytes", "Working memory budget, by kind.", "kind")
	desc(&c.workPeak, l, "working_memory_peak_bytes", "Most working memory held at once, by kind.", "kind")
	desc(&c.pinBuffers, l, "pinned_buffers", "Pinned batch buffers in the pool.")
	desc(&c.pinInUse, l, "pinned_buffers_in_use", "Pinned batch buffers currently out.")
	desc(&c.pinBufferSize, l, "pinned_buffer_size_bytes", "Size of one pinned batch buffer.")
	desc(&c.pinMapped, l, "pinned_mapped_bytes", "Pinned memory mapped.")
	desc(&c.pinInUseBytes, l, "pinned_in_use_bytes", "Pinned memory in buffers currently out, page-rounded.")
	desc(&c.pinPeakBytes, l, "pinned_peak_in_use_bytes", "Most pinned memory out at once, page-rounded.")
	desc(&c.pinBudget, l, "pinned_budget_bytes", "Pinned pool budget.")
	desc(&c.pinLocked, l, "pinned_locked", "1 if the pinned buffers are locked in memory (mlock), else 0.")
	desc(&c.pinRegistered, l, "pinned_registered", "1 if the pinned buffers are registered with the GPU driver (cuMemHostRegister), else 0: copies from them are then partly synchronous.")
	desc(&c.pinGets, l, "pinned_gets_total", "Pinned buffers handed out.")
	desc(&c.pinWaits, l, "pinned_waits_total", "Pinned buffer requests that had to wait for a release; a rising rate means the consumer holds batches too long.")
	desc(&c.outstanding, l, "outstanding_batches", "Batches held by the consumer and not yet released.")

	desc(&c.cRecords, ca, "records", "Records indexed in the loader's cache.")
	desc(&c.cShards, ca, "shards", "Shard files in the loader's cache.")
	desc(&c.cBytes, ca, "size_bytes", "Size of the loader's cache directory as far as this process knows.")
	desc(&c.cLookups, ca, "lookups_total", "Cache lookups, by result (hit or miss), from every user of the cache in this process.", "result")
	desc(&c.cCorrupt, ca, "corrupt_records_total", "Cache records whose checksum or framing failed.")
	desc(&c.cWritten, ca, "written_records_total", "Records written to the cache.")
	desc(&c.cRejected, ca, "rejected_records_total", "Records not written because the cache was full or disabled.")
	desc(&c.cEvicted, ca, "evicted_shards_total", "Cache shards deleted to stay under the size limit.")
	desc(&c.cFull, ca, "full", "1 once a record did not fit under the cache's size limit, else 0.")
	desc(&c.cDisabled, ca, "disabled", "1 once writing to the cache has stopped (see the log for why), else 0.")

	// A fresh registry reports what is wrong with any Desc: a bad label name or value, or a
	// constant label that repeats a variable one.
	if err := prometheus.NewRegistry().Register(c); err != nil {
		return nil, fmt.Errorf("promconveyor: %w", err)
	}
	return c, nil
}

// String prints the collector's effective options.
func (c *Collector) String() string { return "promconveyor: " + c.opts.String() }

// Describe sends every metric's Desc, including the cache's when the loader has none.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect takes one snapshot of the Source and sends its metrics. The conveyor_cache_*
// metrics are sent only when the loader has a cache. With one cache shared by several
// loaders, each loader's Collector reports the same cache values under its own labels.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.Stats()
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}

	counter(c.epochs, float64(st.Epochs))
	counter(c.batches, float64(st.Batches))
	counter(c.wait, st.Wait.Seconds())
	for _, s := range []struct {
		name string
		st   pipeline.StageStats
	}{{"read", st.Stages.Read}, {"decode", st.Stages.Decode}, {"augment", st.Stages.Augment}, {"pack", st.Stages.Pack}} {
		counter(c.stageItems, float64(s.st.Items), s.name)
		counter(c.stageBusy, s.st.Busy.Seconds(), s.name)
	}
	// The mix stage works on batches, not samples: its busy time joins the stages', its
	// count is a metric of its own.
	counter(c.stageBusy, st.Stages.Mix.Busy.Seconds(), "mix")
	counter(c.mixedBatches, float64(st.Stages.Mix.Items))
	// Only read and pack count bytes; decode counts pixels and augment items, which
	// would make a sum over the stage label meaningless.
	counter(c.stageBytes, float64(st.Stages.Read.Bytes), "read")
	counter(c.stageBytes, float64(st.Stages.Pack.Bytes), "pack")
	counter(c.decodedPixels, float64(st.Stages.Decode.Bytes))
	for _, q := range []struct {
		name string
		q    struct{ Len, Cap int }
	}{{"tasks", st.Queues.Tasks}, {"decoded", st.Queues.Decoded}, {"ready", st.Queues.Ready}} {
		gauge(c.queueLen, float64(q.q.Len), q.name)
		gauge(c.queueCap, float64(q.q.Cap), q.name)
	}
	counter(c.badSamples, float64(st.Bad.Samples))
	counter(c.cacheHits, float64(st.Cache.Hits))
	counter(c.cacheStored, float64(st.Cache.Stored))
	counter(c.cacheDeferred, float64(st.Cache.Deferred))

	gauge(c.memBudget, float64(st.Memory.Budget))
	gauge(c.memPeakHeld, float64(st.Memory.PeakHeld))
	counter(c.memReturns, float64(st.Memory.Returns))
	gauge(c.workers, float64(st.Tuning.Workers), "cpu")
	gauge(c.workers, float64(st.Tuning.IOWorkers), "io")
	counter(c.tuneSteps, float64(st.Tuning.Steps))
	gauge(c.workBudget, float64(st.Memory.ReadBudget), "read")
	gauge(c.workBudget, float64(st.Memory.DecodeBudget), "decode")
	gauge(c.workPeak, float64(st.Memory.PeakRead), "read")
	gauge(c.workPeak, float64(st.Memory.PeakDecode), "decode")

	p := st.Memory.Pinned
	gauge(c.pinBuffers, float64(p.Buffers))
	gauge(c.pinInUse, float64(p.InUse))
	gauge(c.pinBufferSize, float64(p.BufferSize))
	gauge(c.pinMapped, float64(p.BytesMapped))
	gauge(c.pinInUseBytes, float64(p.BytesInUse))
	gauge(c.pinPeakBytes, float64(p.PeakBytesInUse))
	gauge(c.pinBudget, float64(p.Budget))
	gauge(c.pinLocked, bit(p.Locked))
	gauge(c.pinRegistered, bit(p.Registered))
	counter(c.pinGets, float64(p.Gets))
	counter(c.pinWaits, float64(p.Waits))
	gauge(c.outstanding, float64(st.Memory.Outstanding))

	if cs := st.Cache.Store; cs != nil {
		gauge(c.cRecords, float64(cs.Records))
		gauge(c.cShards, float64(cs.Shards))
		gauge(c.cBytes, float64(cs.Bytes))
		counter(c.cLookups, float64(cs.Hits), "hit")
		counter(c.cLookups, float64(cs.Misses), "miss")
		counter(c.cCorrupt, float64(cs.Corrupt))
		counter(c.cWritten, float64(cs.Written))
		counter(c.cRejected, float64(cs.Rejected))
		counter(c.cEvicted, float64(cs.Evicted))
		gauge(c.cFull, bit(cs.Full))
		gauge(c.cDisabled, bit(cs.Disabled != ""))
	}
}

func bit(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
