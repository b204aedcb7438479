package objstore

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"
)

// Stats counts a bucket's requests and a cache's use of its disk.
type Stats struct {
	Requests      int64 // requests sent (each attempt counts)
	BytesFetched  int64 // body bytes received, retried ones included
	Retries       int64 // attempts after a failed one
	BytesUploaded int64 // bytes sent by Put
	Hits          int64 // Opens that found their object local
	Misses        int64 // Opens that had to wait for a fetch
	Evictions     int64 // objects removed from the cache directory
	Fetched       int64 // objects fetched whole into the cache
	CachedBytes   int64 // bytes held in the cache directory now (reserved for fetches in flight included)
	PeakBytes     int64 // the most CachedBytes has been
}

type entryState int

const (
	queued   entryState = iota // waiting for a fetch slot
	fetching                   // a fetch is running
	parked                     // size known, waiting for disk space
	ready                      // local and complete
	failed                     // the fetch failed; err says why
)

type entry struct {
	name   string
	seq    int64 // creation order: parked entries are served in it
	file   string
	state  entryState
	size   int64     // reserved bytes, once known
	mtime  time.Time // the object's ModTime, once fetched
	refs   int       // open files and Opens waiting for it
	demand bool      // an Open wants it (fetched before prefetches)
	hinted bool      // prefetched and not yet opened: only an Open may evict it
	drop   bool      // released while in flight: evict when done
	last   bool      // read to its end for now (Done): the first to evict once unused
	spare  bool      // the one Open that Done allows while keeping last
	done   chan struct{}
	err    error
	lru    *list.Element // in Cache.lru when ready and unreferenced
}

// A ShardCache is an [fs.FS] over a [Bucket] whose files are fetched whole into a local
// directory of bounded size. Open blocks until its object is local; Prefetch starts
// fetching objects before they are opened. Objects nobody holds open are evicted least
// recently used first when space is needed (an object prefetched but not yet opened only
// for an Open), or at once by Release. A ShardCache is safe for concurrent use; Close ends it.
type ShardCache struct {
	b    *Bucket
	opts ShardCacheOptions
	dir  string // this cache's own directory, under opts.Dir; removed by Close

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	entries map[string]*entry
	demandQ []*entry
	hintQ   []*entry
	lru     *list.List // front = most recently used
	used    int64
	peak    int64
	active  int
	closed  bool
	hits    int64
	misses  int64
	evicted int64
	fetched int64
	seq     int64
	unsized int   // fetches started whose size is not known yet
	sizeSum int64 // sizes seen, for the estimate that admits prefetches
	sizeN   int64
	// pins holds each object's Identity as first fetched (or as Expect gave it), kept
	// across evictions: an index of a shard's members (the WebDataset index, a
	// converted dataset's) holds byte offsets into that version, so a later fetch of
	// a different one is refused rather than read at the old offsets.
	pins map[string]Identity
	// refused counts the fetches in a row of each object that checkPin refused; at
	// maxRefusals the object is refused without fetching it again.
	refused map[string]refusal
}

// NewShardCache returns a cache of b's objects.
func NewShardCache(b *Bucket, opts *ShardCacheOptions) (*ShardCache, error) {
	if b == nil {
		return nil, errors.New("objstore: NewCache: nil Bucket")
	}
	o := ShardCacheOptions{}
	if opts != nil {
		o = *opts
	}
	if err := o.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("objstore: CacheOptions.Dir: %w", err)
	}
	dir, err := os.MkdirTemp(o.Dir, "objstore-")
	if err != nil {
		return nil, fmt.Errorf("objstore: CacheOptions.Dir: %w", err)
	}
	c := &ShardCache{b: b, opts: o, dir: dir, entries: map[string]*entry{}, lru: list.New(), pins: map[string]Identity{}, refused: map[string]refusal{}}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// Options returns the effective options.
func (c *ShardCache) Options() ShardCacheOptions { return c.opts }

// Bucket returns the bucket the cache reads.
func (c *ShardCache) Bucket() *Bucket { return c.b }

// ErrClosed is returned by a closed Cache.
var ErrClosed = errors.New("objstore: cache closed")

// Prefetch starts fetching the named objects, in order, behind any object an Open is
// waiting for. Names already local or on their way are left alone; a name whose last
// fetch failed is tried again. It does not wait.
func (c *ShardCache) Prefetch(names ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	for _, n := range names {
		if !fs.ValidPath(n) || c.refused[n].n >= maxRefusals {
			continue // Open reports it
		}
		e := c.entries[n]
		if e != nil && e.state == failed && e.refs == 0 {
			delete(c.entries, n)
			e = nil
		}
		if e != nil {
			e.drop, e.last, e.spare = false, false, false
			if e.state == ready && e.lru != nil {
				// Local and unused: asked for again, it is needed soon, so it is kept
				// from prefetches as a fetched one would be, and made most recent.
				e.hinted = true
				c.lru.MoveToFront(e.lru)
			}
			continue
		}
		e = c.newEntry(n)
		e.hinted = true
		c.hintQ = append(c.hintQ, e)
	}
	c.kick()
}

func (c *ShardCache) newEntry(name string) *entry {
	sum := sha256.Sum256([]byte(name))
	c.seq++
	e := &entry{name: name, seq: c.seq, done: make(chan struct{}),
		file: filepath.Join(c.dir, hex.EncodeToString(sum[:8])+"-"+path.Base(name))}
	c.entries[name] = e
	return e
}

// Open returns the named object as a local file, fetching it first unless it is in the
// cache. The file is an *os.File underneath (it implements io.ReaderAt and io.Seeker);
// the object stays in the cache until it is closed.
func (c *ShardCache) Open(name string) (fs.File, error) {
	f, err := c.OpenContext(context.Background(), name)
	if err != nil {
		return nil, err // not a nil *File in a non-nil fs.File
	}
	return f, nil
}

// OpenContext is Open with a context: when ctx ends first, it returns ctx's error (the
// fetch goes on for whoever else wants the object, or as a prefetch).
func (c *ShardCache) OpenContext(ctx context.Context, name string) (*File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, &fs.PathError{Op: "open", Path: name, Err: ErrClosed}
	}
	if r := c.refused[name]; r.n >= maxRefusals {
		c.mu.Unlock()
		return nil, r.err
	}
	e := c.entries[name]
	if e != nil && e.state == failed && e.refs == 0 {
		delete(c.entries, name)
		e = nil
	}
	if e == nil {
		e = c.newEntry(name)
		e.demand = true
		c.demandQ = append(c.demandQ, e)
	} else if !e.demand && e.state != ready {
		e.demand = true
		if e.state == queued {
			c.demandQ = append(c.demandQ, e) // first come first served: it may be in both queues
		}
	}
	e.refs++
	e.drop = false
	if e.last {
		// Done allows the Open of the last read under way; another means the object
		// is read again (a later epoch), and it is used as any other.
		e.last, e.spare = e.spare, false
	}
	if e.lru != nil {
		c.lru.Remove(e.lru)
		e.lru = nil
	}
	if e.state == ready {
		c.hits++
	} else {
		c.misses++
		c.kick()
	}
	c.mu.Unlock()

	var ctxErr error
	select {
	case <-e.done:
	case <-c.ctx.Done():
	case <-ctx.Done():
		ctxErr = ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.state != ready {
		err := e.err
		if ctxErr != nil {
			err = fmt.Errorf("objstore: %s: %w", c.b.URL(name), ctxErr)
		} else if err == nil {
			err = ErrClosed
		}
		c.unref(e)
		return nil, err
	}
	e.hinted = false
	f, err := os.Open(e.file)
	if err != nil {
		c.unref(e)
		return nil, fmt.Errorf("objstore: %s: opening the cached copy: %w", c.b.URL(name), err)
	}
	return &File{File: f, c: c, e: e}, nil
}

// unref drops one reference; an unreferenced ready entry becomes evictable. Locked.
func (c *ShardCache) unref(e *entry) {
	e.refs--
	if e.refs > 0 {
		return
	}
	switch e.state {
	case ready:
		switch {
		case e.drop:
			c.evict(e)
		case e.last:
			e.lru = c.lru.PushBack(e) // least recently used: evicted first
		default:
			e.lru = c.lru.PushFront(e)
		}
		c.kick()
	case failed:
		if c.entries[e.name] == e {
			delete(c.entries, e.name)
		}
	}
}

// Stat reports an object's size without fetching it: from the cache when it is local,
// else with one HEAD request.
func (c *ShardCache) Stat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	c.mu.Lock()
	if e := c.entries[name]; e != nil && e.state == ready {
		size, mtime := e.size, e.mtime
		c.mu.Unlock()
		return objectInfo{name: path.Base(name), size: size, mtime: mtime}, nil
	}
	c.mu.Unlock()
	o, err := c.b.Stat(c.ctx, name)
	if err != nil {
		return nil, err
	}
	return objectInfo{name: path.Base(name), size: o.Size, mtime: o.ModTime}, nil
}

type objectInfo struct {
	name  string
	size  int64
	mtime time.Time
}

func (o objectInfo) Name() string       { return o.name }
func (o objectInfo) Size() int64        { return o.size }
func (o objectInfo) Mode() fs.FileMode  { return 0o444 }
func (o objectInfo) ModTime() time.Time { return o.mtime }
func (o objectInfo) IsDir() bool        { return false }
func (o objectInfo) Sys() any           { return nil }

// Release says the named object is not needed again soon: it is removed from the cache
// once nobody holds it open, or dropped from the prefetch queue if not yet fetched.
func (c *ShardCache) Release(names ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range names {
		e := c.entries[n]
		if e == nil || e.refs > 0 {
			if e != nil {
				e.drop = true
			}
			continue
		}
		switch e.state {
		case ready:
			c.evict(e)
		case queued, parked, failed:
			delete(c.entries, n) // the queues skip entries no longer in the map
		case fetching:
			e.drop = true
		}
	}
	c.kick()
}

// Done says the named objects will not be read again soon, though they may be read once
// more now (an Open under way, or about to be): unlike Release it removes nothing, but
// once unused each is the first to be evicted when room is needed, before objects read
// less recently that are still being read. A reader of shards calls it as it opens a
// shard's last sample for now, so that a cache holding the shards in flight fetches
// each once. A later Prefetch of the name undoes it, as does the second Open after it
// (the object is read again).
func (c *ShardCache) Done(names ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range names {
		if e := c.entries[n]; e != nil {
			e.last, e.spare = true, true
			if e.lru != nil {
				c.lru.MoveToBack(e.lru)
			}
		}
	}
}

// evict removes a ready, unreferenced entry's file. Locked.
func (c *ShardCache) evict(e *entry) {
	if e.lru != nil {
		c.lru.Remove(e.lru)
		e.lru = nil
	}
	os.Remove(e.file)
	c.used -= e.size
	c.evicted++
	delete(c.entries, e.name)
}

// Stats returns the bucket's counters and the cache's.
func (c *ShardCache) Stats() Stats {
	s := c.b.Stats()
	c.mu.Lock()
	defer c.mu.Unlock()
	s.Hits, s.Misses, s.Evictions, s.Fetched = c.hits, c.misses, c.evicted, c.fetched
	s.CachedBytes, s.PeakBytes = c.used, c.peak
	return s
}

// Close stops the fetches, waits for them, fails Opens still waiting with ErrClosed and
// removes the cache's own directory. Files still open stay readable.
func (c *ShardCache) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	c.mu.Lock()
	for _, e := range c.entries {
		if e.state == queued || e.state == parked {
			e.state = failed
			e.err = ErrClosed
			close(e.done)
		}
	}
	c.mu.Unlock()
	return os.RemoveAll(c.dir)
}

var _ fs.StatFS = (*ShardCache)(nil)

// A File is an object open in a [Cache]: an *os.File whose Close lets the cache evict
// the object again.
type File struct {
	*os.File
	c    *ShardCache
	e    *entry
	once sync.Once
}

// Close closes the file and gives the object back to the cache.
func (f *File) Close() error {
	err := f.File.Close()
	f.once.Do(func() {
		f.c.mu.Lock()
		f.c.unref(f.e)
		f.c.mu.Unlock()
	})
	return err
}

// Stat reports the object's name (its base) and modification time ([Object.ModTime]:
// its Last-Modified, or a time derived from its ETag), not the cache file's, so that
// keys built from them are the same in every run.
func (f *File) Stat() (fs.FileInfo, error) {
	fi, err := f.File.Stat()
	if err != nil {
		return nil, err
	}
	return fileInfo{FileInfo: fi, name: path.Base(f.e.name), mtime: f.e.mtime}, nil
}

type fileInfo struct {
	fs.FileInfo
	name  string
	mtime time.Time
}

func (fi fileInfo) Name() string       { return fi.name }
func (fi fileInfo) ModTime() time.Time { return fi.mtime }
