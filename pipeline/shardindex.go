package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// ShardIndexKind is the "__kind__" of a WebDataset shard index (the wids format).
const ShardIndexKind = "wids-shard-index-v1"

// ShardIndex describes WebDataset shards without reading them: each shard's name,
// sample count and size, in the order of the dataset, and the class names. It is the
// JSON of WebDataset's wids library ("wids-shard-index-v1": "shardlist" of "url",
// "nsamples" and "filesize"), plus "class_names", which wids does not have and lazy
// indexing needs (see WebDatasetOptions.ShardSamples). Kept beside the shards, it lets
// OpenDataset open a remote dataset without fetching every shard first: conveyor
// inspect SHARDS --json writes one, WebDatasetSource.ShardIndex makes one, and
// OpenDataset reads one when given its URL (".json").
type ShardIndex struct {
	Kind    string       `json:"__kind__"`
	Version int          `json:"wids_version"`
	Name    string       `json:"name,omitempty"`
	Shards  []ShardEntry `json:"shardlist"`
	Classes []string     `json:"class_names,omitempty"`
}

// ShardEntry is one shard of a ShardIndex. URL is the shard's name relative to the
// index's own location (or, as wids allows, a full URL under it).
type ShardEntry struct {
	URL     string `json:"url"`
	Samples int    `json:"nsamples"`
	Bytes   int64  `json:"filesize,omitempty"` // 0: unknown
}

// ShardIndex returns s's index: its shards (named as given to WebDataset), their sample
// counts and, where indexing read them, their sizes, and the class names.
func (s *WebDatasetSource) ShardIndex() *ShardIndex {
	x := &ShardIndex{Kind: ShardIndexKind, Version: 1, Classes: s.classes}
	for k, n := range s.ShardSamples() {
		e := ShardEntry{URL: s.shards[k], Samples: n}
		if s.bytes != nil {
			e.Bytes = s.bytes[k]
		}
		x.Shards = append(x.Shards, e)
	}
	return x
}

// ParseShardIndex reads a ShardIndex from JSON and checks it: the kind, at least one
// shard, counts and sizes not negative.
func ParseShardIndex(data []byte) (*ShardIndex, error) {
	var x ShardIndex
	if err := json.Unmarshal(data, &x); err != nil {
		return nil, fmt.Errorf("not a WebDataset shard index: %w", err)
	}
	switch {
	case x.Kind != ShardIndexKind:
		return nil, fmt.Errorf("not a WebDataset shard index: __kind__ %q, want %q", x.Kind, ShardIndexKind)
	case len(x.Shards) == 0:
		return nil, errors.New("WebDataset shard index lists no shards")
	}
	for k, e := range x.Shards {
		if e.URL == "" || e.Samples < 0 || e.Bytes < 0 {
			return nil, fmt.Errorf("WebDataset shard index: shardlist[%d] is %+v", k, e)
		}
	}
	return &x, nil
}

// Counts returns the sample count and size of each shard, in order.
func (x *ShardIndex) Counts() (samples []int, bytes []int64) {
	for _, e := range x.Shards {
		samples, bytes = append(samples, e.Samples), append(bytes, e.Bytes)
	}
	return samples, bytes
}

// names resolves the shards' URLs against base, the URL of the index's folder ending in
// "/": a relative URL is a name under it, and a full URL must lie under it (conveyor
// reads the shards of one index through one bucket).
func (x *ShardIndex) names(base string) ([]string, error) {
	names := make([]string, len(x.Shards))
	for k, e := range x.Shards {
		n := e.URL
		if strings.Contains(n, "://") || strings.HasPrefix(n, "/") {
			rest, ok := strings.CutPrefix(n, base)
			if !ok {
				return nil, fmt.Errorf("shard %s is not under the index's folder %s: keep the index beside its shards", n, base)
			}
			n = rest
		}
		n = path.Clean(strings.TrimPrefix(n, "./"))
		if !fs.ValidPath(n) {
			return nil, fmt.Errorf("shard %q is not a name under the index's folder %s", e.URL, base)
		}
		names[k] = n
	}
	return names, nil
}
