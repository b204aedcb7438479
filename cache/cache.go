package cache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Errors returned by Put. None of them loses data already in the cache.
var (
	// ErrFull: the record would take the cache past MaxBytes and nothing could be evicted.
	ErrFull = errors.New("cache: full")
	// ErrDisabled: an earlier write failed (a full disk, say), so this Cache writes no more.
	ErrDisabled = errors.New("cache: writing disabled")
	// ErrReadOnly: the Cache was opened with ReadOnly.
	ErrReadOnly = errors.New("cache: opened read-only")
	// ErrBusy: another process sharing the directory held its lock for longer than a
	// Put waits (a suspended or stuck process), so this record was not stored.
	ErrBusy = errors.New("cache: directory busy")
)

// Refused reports whether err from Put means the cache would not take the record (full,
// writing disabled, read-only, or its directory busy) rather than that the record itself was at fault.
func Refused(err error) bool {
	return errors.Is(err, ErrFull) || errors.Is(err, ErrDisabled) || errors.Is(err, ErrReadOnly) || errors.Is(err, ErrBusy)
}

// Ref locates one record. It is a small value; copy it freely.
type Ref struct {
	Path          string // the source file, relative to its dataset's root
	Label         int32
	Width, Height uint32 // stored pixels
	Codec         Codec
	Bytes         int   // the record's size on disk
	SourceSize    int64 // the source file's size and modification time when it was stored
	SourceModTime int64

	id  ID
	sh  *shard
	off int64
	i   int32 // its place in sh.recs
}

// ID is the record's key digest.
func (r Ref) ID() ID { return r.id }

// Spec is the decode spec the record was stored under.
func (r Ref) Spec() string { return r.sh.spec }

// Offset is the record's position in its shard file.
func (r Ref) Offset() int64 { return r.off }

// Shard names the shard file holding the record, for messages.
func (r Ref) Shard() string { return r.sh.name + shardExt }

const (
	shardExt = ".shard"
	indexExt = ".idx"
	lockName = "LOCK"
)

type shard struct {
	name    string   // file name without extension
	f       *os.File // read handle; the writer's handle when this process writes it
	codec   Codec
	spec    string
	hdrLen  int64
	idxOff  int64 // index bytes consumed
	dataEnd int64 // end of the last record known
	bytes   int64 // shard and index bytes on disk, as last seen
	recs    []Ref
	gone    bool   // evicted
	m       []byte // read-only mapping of the shard's records, ReadOnly caches only
	oldMaps [][]byte
	// broken, when set, is why none of the shard's records can be read: its header is
	// damaged or the file is gone. Its records come from its index (see CheckDataset).
	broken error
	// remote, when set, says the shard file is in Options.Remote, not the directory;
	// its records come from its index (see CheckDataset).
	remote *remoteShard
	// faulted is set once a read of the mapping faulted: the file shrank under it.
	faulted atomic.Bool
	// checked has a bit per record (by its place in recs) whose payload checksum a read
	// of the mapping found right: see Read. Replaced, larger, when the mapping grows.
	checked atomic.Pointer[[]atomic.Uint64]
}

type loc struct {
	sh *shard
	i  int32
}

type writer struct {
	sh     *shard
	idx    *os.File
	idxOff int64
	ibuf   []byte
}

// Cache is an open cache directory. Its methods are safe for concurrent use, except
// Close, which must be the last call.
type Cache struct {
	dir  string
	opts Options
	lock *os.File

	mu      sync.RWMutex
	shards  map[string]*shard
	retired []*shard // evicted, still open for Refs taken before
	index   map[ID]loc

	wmu      sync.Mutex // serialises writes, rotation and eviction
	writers  map[string]*writer
	ignored  map[string]string // shards that did not open, and why: logged once, under wmu
	bytes    int64             // directory bytes as far as this process knows, under wmu
	full     bool
	closed   bool
	disabled atomic.Pointer[string]
	// gen is the directory's shard generation (lockGen) as last seen, and others the
	// shards other processes are writing, as far as known: a Put catches up with both
	// first, so that a record another process sharing the directory stored is not
	// stored again. Under wmu.
	gen    uint64
	others []*shard

	busyLogged bool // ErrBusy logged; under wmu

	hits, misses, corrupt, written, rejected, evicted, shared atomic.Int64
}

// Open opens the cache in dir, creating the directory unless ReadOnly, and reads every
// shard's index.
func Open(dir string, opts *Options) (*Cache, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if !o.ReadOnly {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("cache: %w", err)
		}
	} else if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		if err == nil {
			err = errors.New("not a directory")
		}
		return nil, fmt.Errorf("cache: %s: %w", dir, err)
	}
	c := &Cache{dir: dir, opts: o, shards: map[string]*shard{}, index: map[ID]loc{}, writers: map[string]*writer{}}
	if !o.ReadOnly {
		f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return nil, fmt.Errorf("cache: %w", err)
		}
		c.lock = f
	}
	if err := c.Refresh(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Dir is the cache's directory.
func (c *Cache) Dir() string { return c.dir }

// Options returns the effective options.
func (c *Cache) Options() Options { return c.opts }

// Records returns the records stored under spec, one per source path (the newest when a
// path was stored more than once), sorted by path.
func (c *Cache) Records(spec string) []Ref {
	c.mu.RLock()
	var refs []Ref
	for _, l := range c.index {
		if l.sh.spec == spec {
			refs = append(refs, l.sh.recs[l.i])
		}
	}
	c.mu.RUnlock()
	slices.SortFunc(refs, func(a, b Ref) int {
		if d := strings.Compare(a.Path, b.Path); d != 0 {
			return d
		}
		if d := strings.Compare(b.sh.name, a.sh.name); d != 0 { // newest shard first
			return d
		}
		return int(b.off - a.off)
	})
	return slices.CompactFunc(refs, func(a, b Ref) bool { return a.Path == b.Path })
}

// ShardSpecs returns the spec of each shard file in the directory, by file name
// (NAME.shard): what a tool deleting the shards of a spec no longer used looks at.
func (c *Cache) ShardSpecs() map[string]string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	m := map[string]string{}
	for _, sh := range c.shards {
		if !sh.gone {
			m[sh.name+shardExt] = sh.spec
		}
	}
	return m
}

// Specs counts the indexed records of each spec.
func (c *Cache) Specs() map[string]int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	m := map[string]int{}
	for _, l := range c.index {
		m[l.sh.spec]++
	}
	return m
}

// Stats is a snapshot of a Cache's state and counters.
type Stats struct {
	Records int   // indexed records, all specs
	Shards  int   // shard files
	Bytes   int64 // directory bytes as far as this process knows
	// Counters since Open.
	Hits, Misses int64 // Lookup results
	Corrupt      int64 // records whose checksum or framing failed
	Written      int64 // records stored
	Rejected     int64 // Puts not stored: full, disabled or the directory busy (ErrBusy)
	Evicted      int64 // shards deleted to stay under MaxBytes
	Shared       int64 // Puts not stored: another process sharing the directory stored the record first
	// Full is set once a record did not fit under MaxBytes; Disabled says why writing
	// stopped, "" while writing.
	Full     bool
	Disabled string
}

// Stats returns a snapshot of c's counters.
func (c *Cache) Stats() Stats {
	c.wmu.Lock()
	s := Stats{Bytes: c.bytes, Full: c.full}
	c.wmu.Unlock()
	c.mu.RLock()
	s.Records, s.Shards = len(c.index), len(c.shards)
	c.mu.RUnlock()
	s.Hits, s.Misses, s.Corrupt = c.hits.Load(), c.misses.Load(), c.corrupt.Load()
	s.Written, s.Rejected, s.Evicted, s.Shared = c.written.Load(), c.rejected.Load(), c.evicted.Load(), c.shared.Load()
	if p := c.disabled.Load(); p != nil {
		s.Disabled = *p
	}
	return s
}

// Close ends this Cache's shards (other processes may then evict them) and closes its
// files. Records written stay readable by later Opens.
func (c *Cache) Close() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.closed = true
	for _, w := range c.writers {
		c.seal(w)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, sh := range c.shards {
		sh.close()
	}
	for _, sh := range c.retired {
		sh.close()
	}
	c.shards, c.retired, c.index = map[string]*shard{}, nil, map[ID]loc{}
	if c.lock != nil {
		c.lock.Close()
		c.lock = nil
	}
	return nil
}

func (sh *shard) close() {
	for _, m := range append(sh.oldMaps, sh.m) {
		if m != nil {
			unmap(m)
		}
	}
	sh.m, sh.oldMaps = nil, nil
	if sh.f != nil {
		sh.f.Close()
	}
	if sh.remote != nil && sh.remote.held != nil {
		sh.remote.held.Close() // the shard cache may evict it now
		sh.remote.held = nil
	}
}
