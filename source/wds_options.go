package source

import (
	"errors"
	"fmt"
	"log"
	"slices"
)

// WebDatasetOptions configures WebDataset. A nil pointer means the defaults.
type WebDatasetOptions struct {
	// Classes names the labels: a .cls integer or a .json integer label is an index into
	// it, a .json string label one of its names. Default nil: the class names found in
	// .json string labels, sorted and numbered from 0; or, when the labels are integers,
	// "0" to the largest.
	Classes []string
	// Concurrency is how many shards are indexed at once. Default 8.
	Concurrency int
	// MaxMetadataBytes is the largest member other than the image that is kept in memory
	// as metadata (and the largest .cls or .json read for a label). A larger member is
	// left out of Metadata (logged once per shard); a larger .cls or .json makes its
	// sample bad. Default 64 KiB.
	MaxMetadataBytes int
	// ShardSamples, when set, makes indexing lazy: ShardSamples[k] is how many samples
	// shard k holds (a count recorded earlier: ShardEnds of a full index, or the
	// "nsamples" of a WebDataset wids index), WebDataset returns without reading a shard,
	// and each shard is indexed when a sample of it is first asked for, so the first batch
	// waits for its own shards only. It needs Classes; the source is then single-label
	// (a .json label list of other than one label is a bad sample) and keeps only the
	// metadata MetadataKeys names. A shard holding fewer samples than its count has the
	// rest as bad samples; extra samples are left out (both logged). Default nil: every
	// shard is indexed before WebDataset returns.
	ShardSamples []int
	// ShardBytes, with ShardSamples, is each shard's size in bytes (a ShardIndex's
	// "filesize"; 0: unknown): the prefetcher keeps its window of shards within the shard
	// cache's room, as it does for shards indexed up front, whose sizes indexing reads.
	// Default nil: sizes unknown until each shard is fetched.
	ShardBytes []int64
	// MetadataKeys are the member extensions kept as metadata, and what MetadataKeys
	// reports: each costs its bytes of memory for every sample that has one (a LAION
	// .json is about 1 KB), so name only those used. Default nil: every member other
	// than the image is kept (.cls and .json included), and MetadataKeys lists the
	// extensions found; a lazy source (ShardSamples) keeps none.
	MetadataKeys []string
	// Logf receives what indexing found: damaged shards and members left out. Default
	// log.Printf.
	Logf func(format string, args ...any)
	// PrefetchShards is how many shards are asked for ahead of need, when the file system
	// prefetches (objstore's shard cache; see EpochPlanner): past the furthest shard
	// opened so far in the epoch's order, the window reaches this many shards beyond
	// the most the order reads at once (with ShardOrder, ShuffleBlock/shard length+1),
	// so the next shuffle block's shards are fetched while the current one is read. The
	// cache's byte limit should hold the window plus the shards being read. Default 4.
	PrefetchShards int
}

// keeps reports whether members with extension ext are kept as metadata.
func (o *WebDatasetOptions) keeps(ext string) bool {
	if o.MetadataKeys == nil {
		return o.ShardSamples == nil
	}
	return slices.Contains(o.MetadataKeys, ext)
}

// clone copies o (nil: the zero options), its slices too.
func (o *WebDatasetOptions) clone() *WebDatasetOptions {
	var c WebDatasetOptions
	if o != nil {
		c = *o
	}
	c.Classes = slices.Clone(c.Classes)
	c.ShardSamples = slices.Clone(c.ShardSamples)
	c.ShardBytes = slices.Clone(c.ShardBytes)
	c.MetadataKeys = slices.Clone(c.MetadataKeys)
	return &c
}

// EnsureDefaults fills o's zero fields with their defaults and returns o; a nil o
// becomes a new WebDatasetOptions holding the defaults.
func (o *WebDatasetOptions) EnsureDefaults() *WebDatasetOptions {
	if o == nil {
		o = &WebDatasetOptions{}
	}
	if o.Concurrency == 0 {
		o.Concurrency = 8
	}
	if o.MaxMetadataBytes == 0 {
		o.MaxMetadataBytes = 64 << 10
	}
	if o.PrefetchShards == 0 {
		o.PrefetchShards = 4
	}
	if o.Logf == nil {
		o.Logf = log.Printf
	}
	return o
}

// Validate reports every invalid field of o, defaults filled (see EnsureDefaults),
// joined into one error; nil when all are valid. What depends on the shards (one
// ShardSamples count per shard) is checked by WebDataset.
func (o *WebDatasetOptions) Validate() error {
	var errs []error
	if o.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("source: WebDatasetOptions.Concurrency %d is negative", o.Concurrency))
	}
	if o.PrefetchShards < 0 {
		errs = append(errs, fmt.Errorf("source: WebDatasetOptions.PrefetchShards %d is negative", o.PrefetchShards))
	}
	if o.MaxMetadataBytes < 0 {
		errs = append(errs, fmt.Errorf("source: WebDatasetOptions.MaxMetadataBytes %d is negative", o.MaxMetadataBytes))
	}
	if o.ShardBytes != nil && len(o.ShardBytes) != len(o.ShardSamples) {
		errs = append(errs, fmt.Errorf("source: WebDatasetOptions.ShardBytes has %d sizes for %d ShardSamples", len(o.ShardBytes), len(o.ShardSamples)))
	}
	for k, b := range o.ShardBytes {
		if b < 0 {
			errs = append(errs, fmt.Errorf("source: WebDatasetOptions.ShardBytes[%d] is %d", k, b))
			break
		}
	}
	seen := map[string]bool{}
	for _, n := range o.Classes {
		if seen[n] {
			errs = append(errs, fmt.Errorf("source: WebDatasetOptions.Classes names %q twice", n))
			break
		}
		seen[n] = true
	}
	return errors.Join(errs...)
}

// String prints the effective options.
func (o WebDatasetOptions) String() string {
	lazy := "no"
	if o.ShardSamples != nil {
		lazy = fmt.Sprintf("%d shards", len(o.ShardSamples))
	}
	return fmt.Sprintf("WebDatasetOptions{Classes: %d, Concurrency: %d, MaxMetadataBytes: %d, lazy: %s, MetadataKeys: %q, PrefetchShards: %d}", len(o.Classes), o.Concurrency, o.MaxMetadataBytes, lazy, o.MetadataKeys, o.PrefetchShards)
}
