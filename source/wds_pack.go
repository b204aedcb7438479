package source

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// wdsPart is one shard's index, made once: at construction, or on first use when
// WebDatasetOptions.ShardSamples makes the source lazy. A lazy shard keeps only a
// permanent failure (not a tar file, malformed headers); after an I/O error the next
// access tries again, so one network blip does not spoil the shard for the whole run.
type wdsPart struct {
	mu      sync.Mutex    // one indexing attempt at a time
	tries   atomic.Uint64 // attempts that failed with an I/O error
	p       atomic.Pointer[wdsPacked]
	lastErr *wdsPacked // the last attempt's transient failure, for those who waited on it; under mu
}

// wdsPacked is one shard's samples, labels numbered.
type wdsPacked struct {
	index            // paths ("shard/key") and first labels
	mod    time.Time // the shard's modification time, for cache keys
	off    []int64   // the image member's data offset in the shard
	size   []int64   // and its size
	imgExt []uint8   // index into wdsImageExts
	bad    map[int32]string
	multi  labelTable // multi-label sources only; empty: one label each
	meta   metaTable
}

// assemble numbers the labels across shards and packs each shard's samples.
func assemble(fsys fs.FS, shards []string, parts []*wdsShard, o *WebDatasetOptions) (*WebDatasetSource, error) {
	s := &WebDatasetSource{fsys: fsys, shards: slices.Clone(shards), o: *o, parts: make([]wdsPart, len(shards)),
		desc: fmt.Sprintf("webdataset(%d shards)", len(shards))}
	names := map[string]bool{}
	hasInt := false
	var nameAt, intAt string
	n := 0
	seenKey := map[string]bool{}
	for k, p := range parts {
		for nm := range p.names {
			names[nm] = true
		}
		if len(p.names) > 0 && nameAt == "" {
			nameAt = shards[k] + ": " + p.where[0]
		}
		if p.hasInt && intAt == "" {
			intAt = shards[k] + ": " + p.where[1]
			hasInt = true
		}
		for j, ls := range p.labels {
			s.labelled = s.labelled || ls != nil
			s.multi = s.multi || (ls != nil && len(ls) != 1)
			for _, m := range p.meta[j] {
				if !seenKey[m.key] {
					seenKey[m.key] = true
					s.keys = append(s.keys, m.key)
				}
			}
		}
		n += len(p.keys)
		s.ends = append(s.ends, n)
	}
	if n == 0 {
		return nil, fmt.Errorf("source: webdataset: no samples in %d shards (%s…)", len(shards), shards[0])
	}
	if n > 1<<31-1 {
		return nil, fmt.Errorf("source: webdataset: %d samples, more than %d", n, 1<<31-1)
	}
	switch {
	case len(o.Classes) > 0:
		s.classes = o.Classes
	case len(names) > 0 && hasInt:
		return nil, fmt.Errorf("source: webdataset: labels mix class names (%s) and integers (%s); use one kind, or give WebDatasetOptions.Classes", nameAt, intAt)
	case len(names) > 0:
		s.classes = slices.Sorted(maps.Keys(names))
	default:
		top := 0
		for _, p := range parts {
			for _, ls := range p.labels {
				for _, l := range ls {
					top = max(top, l.n)
				}
			}
		}
		s.classes = make([]string, top+1)
		for i := range s.classes {
			s.classes[i] = strconv.Itoa(i)
		}
	}
	if o.MetadataKeys != nil {
		s.keys = o.MetadataKeys
	}
	s.numberClasses()
	sizes := make([]int64, len(parts))
	for k, p := range parts {
		packed, err := s.pack(k, p, len(p.keys))
		if err != nil {
			return nil, err
		}
		s.parts[k].p.Store(packed)
		sizes[k] = p.bytes
		parts[k] = nil // let the shard's scratch go
	}
	s.bytes = sizes
	s.planner = newShardPlanner(fsys, s.shards, s.ends, s.o.PrefetchShards)
	if s.planner != nil {
		s.planner.bound(fsys, sizes, s.o.Logf, s.desc) // indexing read every shard's size
	}
	return s, nil
}

func (s *WebDatasetSource) numberClasses() {
	s.classID = make(map[string]int, len(s.classes))
	for i, c := range s.classes {
		s.classID[c] = i
	}
}

// lazy makes a source whose shards are indexed on first use: counts says how many
// samples each holds.
func lazy(fsys fs.FS, shards []string, o *WebDatasetOptions) (*WebDatasetSource, error) {
	if len(o.ShardSamples) != len(shards) {
		return nil, fmt.Errorf("source: WebDatasetOptions.ShardSamples has %d counts for %d shards", len(o.ShardSamples), len(shards))
	}
	if len(o.Classes) == 0 {
		return nil, errors.New("source: WebDatasetOptions.ShardSamples (lazy indexing) needs WebDatasetOptions.Classes: the labels cannot be numbered before every shard is read")
	}
	s := &WebDatasetSource{fsys: fsys, shards: slices.Clone(shards), o: *o, parts: make([]wdsPart, len(shards)),
		classes: o.Classes, labelled: true, keys: o.MetadataKeys, desc: fmt.Sprintf("webdataset(%d shards, lazy)", len(shards))}
	n := 0
	for k, c := range o.ShardSamples {
		if c < 0 {
			return nil, fmt.Errorf("source: WebDatasetOptions.ShardSamples[%d] (%s) is %d", k, shards[k], c)
		}
		n += c
		if n > 1<<31-1 {
			return nil, fmt.Errorf("source: WebDatasetOptions.ShardSamples: more than %d samples", 1<<31-1)
		}
		s.ends = append(s.ends, n)
	}
	if n == 0 {
		return nil, errors.New("source: WebDatasetOptions.ShardSamples counts no samples")
	}
	s.numberClasses()
	s.bytes = o.ShardBytes
	s.planner = newShardPlanner(fsys, s.shards, s.ends, s.o.PrefetchShards)
	if s.planner != nil && s.bytes != nil {
		s.planner.bound(fsys, s.bytes, s.o.Logf, s.desc)
	}
	return s, nil
}

// part is shard k's index, made now if the source is lazy and it is not made yet. A
// shard that cannot be indexed has no samples: its samples are bad, saying why. Callers
// that wait while an attempt fails with an I/O error share its failure; later callers
// try again.
func (s *WebDatasetSource) part(k int) *wdsPacked {
	pt := &s.parts[k]
	if p := pt.p.Load(); p != nil {
		return p
	}
	tries := pt.tries.Load()
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if p := pt.p.Load(); p != nil {
		return p
	}
	if pt.tries.Load() != tries && pt.lastErr != nil {
		return pt.lastErr // an attempt failed while we waited
	}
	want := s.o.ShardSamples[k]
	// Source.Open takes no context. A reader waiting here for a remote shard is bounded
	// by the fetch's own limits (Retry.AttemptTimeout, Retry.MinProgressBytes) and freed
	// at once by the shard cache's Close (Dataset.Close).
	raw, err := indexShard(context.Background(), s.fsys, s.shards[k], &s.o)
	var p *wdsPacked
	if err == nil {
		if len(raw.keys) != want {
			s.o.Logf("source: webdataset shard %s holds %d samples, WebDatasetOptions.ShardSamples says %d", s.shards[k], len(raw.keys), want)
		}
		p, err = s.pack(k, raw, want)
	}
	if err != nil {
		p = &wdsPacked{bad: map[int32]string{-1: err.Error()}}
		var te *transientError
		if errors.As(err, &te) {
			s.o.Logf("%v; its %d samples fail until it can be read", err, want)
			// Counted when it ends, so that callers that came during it share it.
			pt.lastErr = p
			pt.tries.Add(1)
			return p
		}
		s.o.Logf("%v; its %d samples are bad", err, want)
	}
	pt.lastErr = nil
	pt.p.Store(p)
	return p
}

// pack numbers shard k's labels and packs its first n samples.
func (s *WebDatasetSource) pack(k int, raw *wdsShard, n int) (*wdsPacked, error) {
	sh := s.shards[k]
	p := &wdsPacked{mod: raw.mod, bad: map[int32]string{}}
	n = min(n, len(raw.keys))
	for j, key := range raw.keys[:n] {
		why := raw.bad[j]
		ids, err := labelIDs(raw.labels[j], s.classID, len(s.classes))
		if why == "" && err != nil {
			why = err.Error()
		}
		if why == "" && s.labelled && raw.labels[j] == nil {
			why = "no label member (.cls, or .json with \"label\")"
		}
		if why == "" && !s.multi && len(ids) != 1 && raw.labels[j] != nil {
			why = fmt.Sprintf("%d labels in a single-label source (lazily indexed: WebDatasetOptions.ShardSamples)", len(ids))
		}
		first := 0
		if len(ids) > 0 {
			first = ids[0]
		} else if s.multi {
			first = -1
		}
		if err := p.add(sh+"/"+key, first); err != nil {
			return nil, fmt.Errorf("source: webdataset shard %s: %w", sh, err)
		}
		if why != "" {
			p.bad[int32(j)] = fmt.Sprintf("webdataset shard %s, sample %s: %s", sh, key, why)
		}
		p.off = append(p.off, raw.off[j])
		p.size = append(p.size, raw.size[j])
		p.imgExt = append(p.imgExt, raw.imgExt[j])
		if s.multi {
			for _, id := range ids {
				p.multi.push(int32(id))
			}
			if err := p.multi.end(); err != nil {
				return nil, fmt.Errorf("source: webdataset shard %s: %w", sh, err)
			}
		}
		for _, m := range raw.meta[j] {
			addField(&p.meta, p.meta.key(m.key), m.data)
		}
		if err := p.meta.endSample(j); err != nil {
			return nil, fmt.Errorf("source: webdataset shard %s: %w", sh, err)
		}
	}
	p.trim()
	p.multi.clip()
	p.meta.clip()
	return p, nil
}

// labelIDs numbers a sample's labels, ascending.
func labelIDs(ls []wdsLabel, classID map[string]int, nclasses int) ([]int, error) {
	ids := make([]int, 0, len(ls))
	for _, l := range ls {
		id := l.n
		if l.name != "" {
			var ok bool
			if id, ok = classID[l.name]; !ok {
				return nil, fmt.Errorf("label %q is not among WebDatasetOptions.Classes", l.name)
			}
		} else if id >= nclasses {
			return nil, fmt.Errorf("label %d outside the %d classes of WebDatasetOptions.Classes", id, nclasses)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for k := 1; k < len(ids); k++ {
		if ids[k] == ids[k-1] {
			return nil, fmt.Errorf("label %d repeats", ids[k])
		}
	}
	return ids, nil
}
