package promconveyor

import (
	"fmt"
	"maps"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/conveyor-ml/conveyor/objstore"
)

// ShardSource is what a ShardCollector reads: an *objstore.ShardCache or *objstore.Bucket.
type ShardSource interface {
	Stats() objstore.Stats
}

// ShardCollector reports the object-storage counters of a shard cache or bucket
// (objstore.Stats) as conveyor_objstore_* metrics. It is safe for concurrent use.
type ShardCollector struct {
	src   ShardSource
	opts  Options
	descs []*prometheus.Desc

	requests, bytes, retries, uploaded *prometheus.Desc
	lookups, evictions, fetched        *prometheus.Desc
	cached, peak                       *prometheus.Desc
}

// NewShardCollector returns a ShardCollector for s. A nil o means defaults; an invalid
// label name in o is an error here.
func NewShardCollector(s ShardSource, o *Options) (*ShardCollector, error) {
	if s == nil {
		return nil, fmt.Errorf("promconveyor: NewShardCollector: nil source")
	}
	var opts Options
	if o != nil {
		opts.ConstLabels = maps.Clone(o.ConstLabels)
	}
	c := &ShardCollector{src: s, opts: opts}
	desc := func(d **prometheus.Desc, name, help string, labels ...string) {
		*d = prometheus.NewDesc(prometheus.BuildFQName("conveyor", "objstore", name), help, labels, opts.ConstLabels)
		c.descs = append(c.descs, *d)
	}
	desc(&c.requests, "requests_total", "Requests sent to the object store, each retry included.")
	desc(&c.bytes, "fetched_bytes_total", "Body bytes received from the object store, retried ones included.")
	desc(&c.retries, "retries_total", "Requests retried after throttling, a server error, a timeout, a reset or a truncated body.")
	desc(&c.uploaded, "uploaded_bytes_total", "Bytes sent to the object store by uploads.")
	desc(&c.lookups, "shard_cache_lookups_total", "Shard opens, by result: hit (already local) or miss (waited for a fetch).", "result")
	desc(&c.evictions, "shard_cache_evictions_total", "Shards removed from the local shard cache.")
	desc(&c.fetched, "shard_cache_fetched_total", "Shards fetched whole into the local shard cache.")
	desc(&c.cached, "shard_cache_bytes", "Bytes in the local shard cache, fetches in flight included.")
	desc(&c.peak, "shard_cache_peak_bytes", "Most bytes the local shard cache has held; never above its limit.")
	if err := prometheus.NewRegistry().Register(c); err != nil {
		return nil, fmt.Errorf("promconveyor: %w", err)
	}
	return c, nil
}

// String prints the collector's effective options.
func (c *ShardCollector) String() string { return "promconveyor shards: " + c.opts.String() }

// Describe sends every metric's Desc.
func (c *ShardCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect takes one snapshot of the source's Stats.
func (c *ShardCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.Stats()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(c.requests, st.Requests)
	counter(c.bytes, st.BytesFetched)
	counter(c.retries, st.Retries)
	counter(c.uploaded, st.BytesUploaded)
	counter(c.lookups, st.Hits, "hit")
	counter(c.lookups, st.Misses, "miss")
	counter(c.evictions, st.Evictions)
	counter(c.fetched, st.Fetched)
	ch <- prometheus.MustNewConstMetric(c.cached, prometheus.GaugeValue, float64(st.CachedBytes))
	ch <- prometheus.MustNewConstMetric(c.peak, prometheus.GaugeValue, float64(st.PeakBytes))
}
