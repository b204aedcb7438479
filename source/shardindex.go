package source

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"path"
	"strings"

	"github.com/conveyor-ml/conveyor/objstore"
)

// ShardIndexKind is the "__kind__" of a WebDataset shard index (the wids format).
const ShardIndexKind = "wids-shard-index-v1"

// ShardIndex describes WebDataset shards without reading them: each shard's name,
// sample count and size, in the order of the dataset, and the class names. It is the
// JSON of WebDataset's wids library ("wids-shard-index-v1": "shardlist" of "url",
// "nsamples" and "filesize"), plus "class_names", which wids does not have and lazy
// indexing needs (see WebDatasetOptions.ShardSamples), and each shard's "etag" and
// "crc32c" as indexed, which the shard cache checks every fetch against. Kept beside the shards, it lets
// Open open a remote dataset without fetching every shard first: conveyor
// inspect SHARDS --json writes one, WebDatasetSource.ShardIndex makes one, and
// Open reads one when given its URL (".json").
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
	// ETag and CRC32C (8 hex digits) are the shard's as indexed, where the shards
	// were read through a shard cache; empty: unknown. Open has the shard
	// cache refuse a shard that differs from them by name (objstore.ErrChanged),
	// never reading it with this index's counts.
	ETag   string `json:"etag,omitempty"`
	CRC32C string `json:"crc32c,omitempty"`
}

// identifier is an fs.FS that knows the Identity of the files it has opened: an
// *objstore.ShardCache.
type identifier interface {
	Identity(name string) (objstore.Identity, bool)
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
		if ider, ok := s.fsys.(identifier); ok {
			if id, ok := ider.Identity(s.shards[k]); ok {
				e.ETag, e.CRC32C = id.ETag, id.CRC32C
			}
		} else {
			e.CRC32C = fileCRC32C(s.fsys, s.shards[k])
		}
		x.Shards = append(x.Shards, e)
	}
	return x
}

// Bounds of a ShardIndex's counts, checked before anything is sized by them.
const (
	// minSampleBytes is the least a sample takes in a tar file: one member's header.
	minSampleBytes = 512
	// maxShardSamples bounds one shard's count, 16,777,216: at least 8 GiB of tar.
	maxShardSamples = 1 << 24
	// maxIndexSamples bounds the whole index's: samples are numbered in int32.
	maxIndexSamples = 1<<31 - 1
	// maxShardBytes bounds one shard's size, 1 PiB, so that sums of sizes never wrap.
	maxShardBytes = 1 << 50
)

// ParseShardIndex reads a ShardIndex from JSON and checks it: the kind, at least one
// shard, no shard listed twice, counts and sizes not negative, no shard holding more
// samples than its size can (a sample takes at least a 512-byte tar header) or more than
// 2^24, at most 2^31-1 samples in all, and no shard above 1 PiB.
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
	seen := make(map[string]int, len(x.Shards))
	total := 0
	for k, e := range x.Shards {
		switch {
		case e.URL == "" || e.Samples < 0 || e.Bytes < 0:
			return nil, fmt.Errorf("WebDataset shard index: shardlist[%d] is %+v", k, e)
		case e.Samples > maxShardSamples:
			return nil, fmt.Errorf("WebDataset shard index: shard %s: nsamples %d is more than %d", e.URL, e.Samples, maxShardSamples)
		case e.CRC32C != "" && !isCRC32C(e.CRC32C):
			return nil, fmt.Errorf("WebDataset shard index: shard %s: crc32c %q is not 8 hex digits", e.URL, e.CRC32C)
		case e.Bytes > maxShardBytes:
			return nil, fmt.Errorf("WebDataset shard index: shard %s: filesize %d is more than %d", e.URL, e.Bytes, int64(maxShardBytes))
		case e.Bytes > 0 && int64(e.Samples) > e.Bytes/minSampleBytes:
			return nil, fmt.Errorf("WebDataset shard index: shard %s: %d samples cannot fit in its filesize of %d bytes (each takes at least a %d-byte tar header)",
				e.URL, e.Samples, e.Bytes, minSampleBytes)
		}
		// A shard listed twice would have its samples twice, silently.
		key := shardKey(e.URL)
		if j, dup := seen[key]; dup {
			return nil, fmt.Errorf("WebDataset shard index: shard %s is listed twice (shardlist[%d] and shardlist[%d])", e.URL, j, k)
		}
		seen[key] = k
		if total += e.Samples; total > maxIndexSamples {
			return nil, fmt.Errorf("WebDataset shard index: more than %d samples", maxIndexSamples)
		}
	}
	return &x, nil
}

// fileCRC32C returns the CRC-32C of a local shard as 8 hex digits, or "" when it cannot
// be read. It reads the shard again: about a second per GB from disk, the checksum
// itself running at tens of GB/s, paid once when an index is made.
func fileCRC32C(fsys fs.FS, name string) string {
	f, err := fsys.Open(name)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return fmt.Sprintf("%08x", h.Sum32())
}

func isCRC32C(s string) bool {
	_, err := hex.DecodeString(s)
	return len(s) == 8 && err == nil
}

// shardKey is what tells shards apart in an index: a relative URL cleaned ("./a.tar"
// and "a.tar" are one shard), a full one as it is; names checks again once full URLs are
// resolved against the index's folder.
func shardKey(url string) string {
	if strings.Contains(url, "://") || strings.HasPrefix(url, "/") {
		return url
	}
	return path.Clean(strings.TrimPrefix(url, "./"))
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
	seen := make(map[string]int, len(x.Shards))
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
		if j, dup := seen[n]; dup {
			return nil, fmt.Errorf("shards %s and %s are both %s: a shard is listed twice", x.Shards[j].URL, e.URL, n)
		}
		seen[n] = k
		names[k] = n
	}
	return names, nil
}
