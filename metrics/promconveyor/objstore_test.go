package promconveyor

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/conveyor-ml/conveyor/objstore"
)

type fakeShards struct{ st objstore.Stats }

func (f *fakeShards) Stats() objstore.Stats { return f.st }

func TestShardCollector(t *testing.T) {
	src := &fakeShards{st: objstore.Stats{Requests: 12, BytesFetched: 4096, Retries: 2, BytesUploaded: 7,
		Hits: 5, Misses: 3, Evictions: 4, Fetched: 8, CachedBytes: 1000, PeakBytes: 1500}}
	c, err := NewShardCollector(src, &Options{ConstLabels: prometheus.Labels{"loader": "train"}})
	if err != nil {
		t.Fatal(err)
	}
	want := `
# HELP conveyor_objstore_fetched_bytes_total Body bytes received from the object store, retried ones included.
# TYPE conveyor_objstore_fetched_bytes_total counter
conveyor_objstore_fetched_bytes_total{loader="train"} 4096
# HELP conveyor_objstore_requests_total Requests sent to the object store, each retry included.
# TYPE conveyor_objstore_requests_total counter
conveyor_objstore_requests_total{loader="train"} 12
# HELP conveyor_objstore_retries_total Requests retried after throttling, a server error, a timeout, a reset or a truncated body.
# TYPE conveyor_objstore_retries_total counter
conveyor_objstore_retries_total{loader="train"} 2
# HELP conveyor_objstore_shard_cache_bytes Bytes in the local shard cache, fetches in flight included.
# TYPE conveyor_objstore_shard_cache_bytes gauge
conveyor_objstore_shard_cache_bytes{loader="train"} 1000
# HELP conveyor_objstore_shard_cache_lookups_total Shard opens, by result: hit (already local) or miss (waited for a fetch).
# TYPE conveyor_objstore_shard_cache_lookups_total counter
conveyor_objstore_shard_cache_lookups_total{loader="train",result="hit"} 5
conveyor_objstore_shard_cache_lookups_total{loader="train",result="miss"} 3
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"conveyor_objstore_fetched_bytes_total", "conveyor_objstore_requests_total", "conveyor_objstore_retries_total",
		"conveyor_objstore_shard_cache_bytes", "conveyor_objstore_shard_cache_lookups_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c); n != 10 {
		t.Errorf("%d metrics, want 10", n)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) != 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	if _, err := NewShardCollector(src, &Options{ConstLabels: prometheus.Labels{"result": "x"}}); err == nil {
		t.Error("a constant label repeating a variable one was accepted")
	}
}
