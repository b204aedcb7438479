package objstore

import (
	"context"
	"fmt"
	"io/fs"
	"os"

	"github.com/conveyor-ml/conveyor/internal/units"
)

// A Shards is a resolved dataset URL ready to read: a file system holding its shards and
// their names. A local dataset is read in place (no copies, no cache); a remote one
// through a [ShardCache]. Safe for concurrent use.
type Shards struct {
	// FS opens the shards by name; a *Cache for remote datasets.
	FS fs.FS
	// Names are the shards the URL selected, in its order (brace order, or sorted).
	Names []string
	// Bucket is the dataset's root.
	Bucket *Bucket
	// Cache is the shard cache; nil for a local dataset.
	Cache *ShardCache
}

// OpenShards resolves spec (see [Resolve]) and opens it for reading. cache configures
// the shard cache of a remote dataset; nil means defaults.
func OpenShards(ctx context.Context, spec string, opts *Options, cache *ShardCacheOptions) (*Shards, error) {
	b, names, err := Resolve(ctx, spec, opts)
	if err != nil {
		return nil, err
	}
	d := &Shards{Bucket: b, Names: names}
	if dir, ok := b.Local(); ok {
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("objstore: %q: %w", spec, err)
		}
		d.FS = os.DirFS(dir)
		return d, nil
	}
	c, err := NewShardCache(b, cache)
	if err != nil {
		b.Close()
		return nil, err
	}
	d.FS, d.Cache = c, c
	return d, nil
}

// URL names a shard for messages.
func (d *Shards) URL(name string) string { return d.Bucket.URL(name) }

// Prefetch starts fetching shards of a remote dataset ahead of need; see [ShardCache.Prefetch].
func (d *Shards) Prefetch(names ...string) {
	if d.Cache != nil {
		d.Cache.Prefetch(names...)
	}
}

// Release frees the disk of shards no longer needed; see [ShardCache.Release].
func (d *Shards) Release(names ...string) {
	if d.Cache != nil {
		d.Cache.Release(names...)
	}
}

// Stats returns the counters of the bucket and the cache.
func (d *Shards) Stats() Stats {
	if d.Cache != nil {
		return d.Cache.Stats()
	}
	return d.Bucket.Stats()
}

// Close closes the cache (removing its cache directory) and the bucket's idle
// connections.
func (d *Shards) Close() error {
	var err error
	if d.Cache != nil {
		err = d.Cache.Close()
	}
	d.Bucket.Close()
	return err
}

// String prints the counters on one line, for logs and conveyor bench.
func (s Stats) String() string {
	return fmt.Sprintf("%d requests, %s fetched, %d retries, %s uploaded; shard cache: %d hits, %d misses, %d fetched, %d evicted, %s (peak %s)",
		s.Requests, units.Bytes(s.BytesFetched), s.Retries, units.Bytes(s.BytesUploaded), s.Hits, s.Misses, s.Fetched, s.Evictions, units.Bytes(s.CachedBytes), units.Bytes(s.PeakBytes))
}
