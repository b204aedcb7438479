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
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/conveyor-ml/conveyor/internal/units"
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

// CacheOptions configures a [Cache]. A nil *CacheOptions means defaults.
type CacheOptions struct {
	// Dir is where the cache keeps its files: each Cache makes its own new
	// subdirectory of Dir (objstore-*) and removes it on Close, so several caches (the
	// ranks on one node) may share a Dir without touching one another's files. The
	// subdirectories of caches that died without Close are left for the user to clean
	// up. Default: the system's temporary directory.
	Dir string
	// MaxBytes bounds the bytes of the objects in Dir, fetches in flight included.
	// An object larger than it fails with ErrTooLarge. Default 16 GiB.
	MaxBytes int64
	// Concurrency is how many objects are fetched at once. Default 4.
	Concurrency int
}

// EnsureDefaults fills o's zero fields with their defaults and returns o; a nil o
// becomes a new CacheOptions holding the defaults.
func (o *CacheOptions) EnsureDefaults() *CacheOptions {
	if o == nil {
		o = &CacheOptions{}
	}
	if o.Dir == "" {
		o.Dir = os.TempDir()
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = 16 << 30
	}
	if o.Concurrency == 0 {
		o.Concurrency = 4
	}
	return o
}

// Validate reports every invalid field of o, defaults filled (see EnsureDefaults),
// joined into one error; nil when all are valid.
func (o *CacheOptions) Validate() error {
	var errs []error
	if o.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("objstore: CacheOptions.MaxBytes %d is negative", o.MaxBytes))
	}
	if o.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("objstore: CacheOptions.Concurrency %d is negative", o.Concurrency))
	}
	return errors.Join(errs...)
}

// String prints the effective options.
func (o CacheOptions) String() string {
	return fmt.Sprintf("objstore.CacheOptions{Dir: %q, MaxBytes: %d, Concurrency: %d}", o.Dir, o.MaxBytes, o.Concurrency)
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

// A Cache is an [fs.FS] over a [Bucket] whose files are fetched whole into a local
// directory of bounded size. Open blocks until its object is local; Prefetch starts
// fetching objects before they are opened. Objects nobody holds open are evicted least
// recently used first when space is needed (an object prefetched but not yet opened only
// for an Open), or at once by Release. A Cache is safe for concurrent use; Close ends it.
type Cache struct {
	b    *Bucket
	opts CacheOptions
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

type refusal struct {
	n   int
	err error
}

// maxRefusals is how many fetches of an object in a row must differ from its pin before
// the cache stops fetching it: a byte flipped on the way (from a store that sends no
// checksum) is fetched again once, while a shard replaced in the store is not fetched
// whole again for every sample read from it.
const maxRefusals = 2

// An Identity is what tells one version of an object from another: its size, ETag and
// the CRC-32C of its bytes. A shard index records it when it is made, and a [Cache]
// checks every fetch against it. Empty fields are unknown and not checked.
type Identity struct {
	Size   int64  // bytes; 0: unknown
	ETag   string // as the store sends it, quotes removed; "": unknown
	CRC32C string // CRC-32C (Castagnoli) of the bytes, 8 hex digits; "": unknown
}

// NewCache returns a cache of b's objects.
func NewCache(b *Bucket, opts *CacheOptions) (*Cache, error) {
	if b == nil {
		return nil, errors.New("objstore: NewCache: nil Bucket")
	}
	o := CacheOptions{}
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
	c := &Cache{b: b, opts: o, dir: dir, entries: map[string]*entry{}, lru: list.New(), pins: map[string]Identity{}, refused: map[string]refusal{}}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// Options returns the effective options.
func (c *Cache) Options() CacheOptions { return c.opts }

// Bucket returns the bucket the cache reads.
func (c *Cache) Bucket() *Bucket { return c.b }

// ErrClosed is returned by a closed Cache.
var ErrClosed = errors.New("objstore: cache closed")

// Prefetch starts fetching the named objects, in order, behind any object an Open is
// waiting for. Names already local or on their way are left alone; a name whose last
// fetch failed is tried again. It does not wait.
func (c *Cache) Prefetch(names ...string) {
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

func (c *Cache) newEntry(name string) *entry {
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
func (c *Cache) Open(name string) (fs.File, error) {
	f, err := c.OpenContext(context.Background(), name)
	if err != nil {
		return nil, err // not a nil *File in a non-nil fs.File
	}
	return f, nil
}

// OpenContext is Open with a context: when ctx ends first, it returns ctx's error (the
// fetch goes on for whoever else wants the object, or as a prefetch).
func (c *Cache) OpenContext(ctx context.Context, name string) (*File, error) {
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
func (c *Cache) unref(e *entry) {
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
func (c *Cache) Stat(name string) (fs.FileInfo, error) {
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
func (c *Cache) Release(names ...string) {
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
func (c *Cache) Done(names ...string) {
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
func (c *Cache) evict(e *entry) {
	if e.lru != nil {
		c.lru.Remove(e.lru)
		e.lru = nil
	}
	os.Remove(e.file)
	c.used -= e.size
	c.evicted++
	delete(c.entries, e.name)
}

// reserve makes room for size bytes, evicting unreferenced objects: those already
// opened first, least recently used first; then, for an Open only (demand), objects
// prefetched and not yet opened, the one asked for last first, since it is needed
// furthest ahead. Locked.
func (c *Cache) reserve(size int64, demand bool) bool {
	if c.used+size <= c.opts.MaxBytes {
		c.used += size
		c.peak = max(c.peak, c.used)
		return true
	}
	var victims, hinted []*entry
	free := c.opts.MaxBytes - c.used
	for el := c.lru.Back(); el != nil; el = el.Prev() {
		if e := el.Value.(*entry); e.hinted {
			hinted = append(hinted, e)
		} else if free < size {
			victims = append(victims, e)
			free += e.size
		}
	}
	if free < size && demand {
		sort.Slice(hinted, func(i, j int) bool { return hinted[i].seq > hinted[j].seq })
		for _, e := range hinted {
			if free >= size {
				break
			}
			victims = append(victims, e)
			free += e.size
		}
	}
	if free < size {
		return false
	}
	for _, e := range victims {
		c.evict(e)
	}
	c.used += size
	c.peak = max(c.peak, c.used)
	return true
}

// kick starts fetches while slots are free: parked objects that now fit, Opens before
// prefetches, each queue in order. Locked.
func (c *Cache) kick() {
	if c.closed {
		return
	}
	for c.active < c.opts.Concurrency {
		e := c.next()
		if e == nil {
			return
		}
		if e.err != errPark {
			c.unsized++
		}
		e.state = fetching
		c.active++
		c.wg.Add(1)
		go c.fetch(e)
	}
}

// next picks the next entry to fetch, reserving space for a parked one. Locked.
//
// Parked entries know their size and go first, Opens before prefetches, each in the
// order they were asked for; a parked entry that does not fit yet holds back those
// behind it, so prefetches are fetched in order and never overtake one another. Then
// queued Opens; then queued prefetches, only while no prefetch is parked (one would
// only park again behind it, wasting a request). While an Open is parked no prefetch
// starts, parked or queued: it would take the space the Open waits for, and the Open
// would then evict it.
func (c *Cache) next() *entry {
	holdBack := false
	for _, demand := range []bool{true, false} {
		if !demand && holdBack {
			break
		}
		var first *entry
		for _, e := range c.entries {
			if e.state == parked && e.demand == demand && (first == nil || e.seq < first.seq) {
				first = e
			}
		}
		if first == nil {
			continue
		}
		if c.reserve(first.size, demand) {
			return first
		}
		holdBack = true // an Open waiting holds back prefetches too
	}
	for len(c.demandQ) > 0 {
		e := c.demandQ[0]
		c.demandQ = c.demandQ[1:]
		if c.entries[e.name] == e && e.state == queued {
			return e
		}
	}
	if holdBack {
		return nil
	}
	for len(c.hintQ) > 0 {
		e := c.hintQ[0]
		if c.entries[e.name] != e || e.state != queued {
			c.hintQ = c.hintQ[1:]
			continue
		}
		// Admit a prefetch only if it and the fetches whose sizes are not known yet
		// would fit, guessing each at the mean size seen: sizes are learnt from the
		// responses, and a fetch that then finds no room parks and costs a request.
		var est int64
		if c.sizeN > 0 {
			est = c.sizeSum / c.sizeN
		}
		if c.used+int64(c.unsized+1)*est > c.opts.MaxBytes+c.evictableBytes() {
			return nil // wait for an Open, a Close or a Release
		}
		c.hintQ = c.hintQ[1:]
		return e
	}
	return nil
}

// evictableBytes is what a prefetch could evict. Locked.
func (c *Cache) evictableBytes() int64 {
	var n int64
	for el := c.lru.Back(); el != nil; el = el.Prev() {
		if e := el.Value.(*entry); !e.hinted {
			n += e.size
		}
	}
	return n
}

var errPark = errors.New("objstore: no room yet")

// fetch downloads one entry into its file. A fetch that learns the object's size and
// finds no room parks the entry, giving its slot back, until eviction makes room.
func (c *Cache) fetch(e *entry) {
	defer c.wg.Done()
	c.mu.Lock()
	wasParked := e.err == errPark // next reserved its space
	c.mu.Unlock()
	r := &reservation{c: c, e: e, sized: wasParked, held: wasParked}
	err := c.download(e, r)
	c.settle(e, r.sized, err)
}

// reservation is the cache space one fetch holds, reserved as it learns its object's
// size (or, for a response of unknown size, as the bytes arrive).
type reservation struct {
	c     *Cache
	e     *entry
	sized bool // the size is known, and no longer counted in c.unsized
	held  bool // e.size bytes are reserved in c.used
}

// onSize reserves room for an object of size bytes (-1: unknown), or says there is none
// yet (errPark) or never will be (ErrTooLarge).
func (r *reservation) onSize(size int64) error {
	c, e := r.c, r.e
	c.mu.Lock()
	defer c.mu.Unlock()
	if !r.sized {
		r.sized = true
		c.unsized--
		if size >= 0 {
			c.sizeSum += size
			c.sizeN++
		}
	}
	if r.held {
		if size == e.size {
			return nil
		}
		c.used -= e.size // the object changed size; reserve again
		r.held = false
	}
	if size < 0 {
		// Unknown size (a chunked response): reserve as the bytes arrive.
		e.size = 0
		r.held = true
		return nil
	}
	e.size = size
	if size > c.opts.MaxBytes {
		return fmt.Errorf("objstore: %s: %w (%s, more than the cache's %s)", c.b.URL(e.name), ErrTooLarge, units.Bytes(size), units.Bytes(c.opts.MaxBytes))
	}
	if !c.reserve(size, e.demand) {
		return errPark
	}
	r.held = true
	return nil
}

// onGrow reserves room for a response of unknown size that has brought n bytes.
func (r *reservation) onGrow(n int64) error {
	c, e := r.c, r.e
	c.mu.Lock()
	defer c.mu.Unlock()
	if n <= e.size {
		return nil // a restart: the bytes are already reserved
	}
	if n > c.opts.MaxBytes {
		return fmt.Errorf("objstore: %s: %w (a response of unknown size passed the cache's %s)", c.b.URL(e.name), ErrTooLarge, units.Bytes(c.opts.MaxBytes))
	}
	if !c.reserve(n-e.size, e.demand) {
		return fmt.Errorf("objstore: %s: a response of unknown size passed %s and the cache has no more room (%s of %s in use; give the size, or a larger MaxBytes)",
			c.b.URL(e.name), units.Bytes(e.size), units.Bytes(c.used), units.Bytes(c.opts.MaxBytes))
	}
	e.size = n
	return nil
}

// download fetches e's object into its file (written as .part and renamed when whole
// and checked against its pin), reserving space through r; on failure nothing is left
// and nothing stays reserved, except for errPark, which keeps the entry's size.
func (c *Cache) download(e *entry, r *reservation) error {
	f, err := os.OpenFile(e.file+".part", os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("objstore: %s: creating the cache file: %w", c.b.URL(e.name), err)
	}
	obj, crc, err := c.b.download(c.ctx, e.name, f, r.onSize, r.onGrow)
	if err == nil {
		c.mu.Lock()
		if r.held && obj.Size < e.size { // reserved as it arrived, at the high-water mark
			c.used -= e.size - obj.Size
			e.size = obj.Size
		}
		e.mtime = obj.ModTime
		err = c.checkPin(e.name, Identity{Size: obj.Size, ETag: obj.ETag, CRC32C: fmt.Sprintf("%08x", crc)})
		c.mu.Unlock()
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("objstore: %s: writing the cache file: %w", c.b.URL(e.name), cerr)
	}
	if err == nil {
		if rerr := os.Rename(e.file+".part", e.file); rerr != nil {
			err = fmt.Errorf("objstore: %s: %w", c.b.URL(e.name), rerr)
		}
	}
	if err != nil {
		os.Remove(e.file + ".part")
		if r.held && err != errPark {
			c.mu.Lock()
			c.used -= e.size
			c.mu.Unlock()
		}
	}
	return err
}

// settle records how e's fetch ended (parked, failed or ready), gives back its slot and
// starts what can start now; sized says whether the fetch learnt the object's size.
func (c *Cache) settle(e *entry, sized bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.active--
	if !sized {
		c.unsized--
	}
	switch {
	case err == errPark && !c.closed:
		e.state = parked
		e.err = errPark
	case err != nil:
		e.state = failed
		if c.closed {
			err = ErrClosed
		}
		e.err = err
		close(e.done)
		if e.refs == 0 && c.entries[e.name] == e {
			delete(c.entries, e.name)
		}
	default:
		e.state = ready
		e.err = nil
		c.fetched++
		close(e.done)
		if e.refs == 0 {
			if e.drop {
				c.evict(e)
			} else {
				e.lru = c.lru.PushFront(e)
			}
		}
	}
	c.kick()
}

// checkPin pins an object's Identity on its first fetch and refuses a fetch whose
// known fields differ from the pin's; fields the pin lacks (one Expect left empty) are
// filled from the first fetch that has them. Locked.
func (c *Cache) checkPin(name string, got Identity) error {
	p, ok := c.pins[name]
	if !ok {
		c.pins[name] = got
		return nil
	}
	if (p.Size == 0 || p.Size == got.Size) && (p.ETag == "" || got.ETag == "" || p.ETag == got.ETag) &&
		(p.CRC32C == "" || got.CRC32C == "" || strings.EqualFold(p.CRC32C, got.CRC32C)) {
		if p.Size == 0 {
			p.Size = got.Size
		}
		if p.ETag == "" {
			p.ETag = got.ETag
		}
		if p.CRC32C == "" {
			p.CRC32C = got.CRC32C
		}
		c.pins[name] = p
		delete(c.refused, name)
		return nil
	}
	err := fmt.Errorf("objstore: %s: %w: indexed as %s; fetched as %s (an index of it holds the old offsets: index it again)",
		c.b.URL(name), ErrChanged, p, got)
	r := c.refused[name]
	r.n++
	r.err = err
	c.refused[name] = r
	return err
}

// String prints an Identity's known fields.
func (id Identity) String() string {
	s := fmt.Sprintf("%d bytes", id.Size)
	if id.ETag != "" {
		s += fmt.Sprintf(", ETag %q", id.ETag)
	}
	if id.CRC32C != "" {
		s += ", CRC-32C " + id.CRC32C
	}
	return s
}

// Expect tells the cache what an object should be, from an index made before (a shard
// index's size, ETag and checksum): its first fetch is checked against it as a later
// fetch is against the first, and refused by name with [ErrChanged] when they differ.
// An object already fetched keeps its pin.
func (c *Cache) Expect(name string, id Identity) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pins[name]; !ok {
		c.pins[name] = id
	}
}

// Identity returns an object's Identity as first fetched (or expected), and whether it
// has one: an index made from the cache's files records it.
func (c *Cache) Identity(name string) (Identity, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.pins[name]
	return id, ok
}

// Stats returns the bucket's counters and the cache's.
func (c *Cache) Stats() Stats {
	s := c.b.Stats()
	c.mu.Lock()
	defer c.mu.Unlock()
	s.Hits, s.Misses, s.Evictions, s.Fetched = c.hits, c.misses, c.evicted, c.fetched
	s.CachedBytes, s.PeakBytes = c.used, c.peak
	return s
}

// Close stops the fetches, waits for them, fails Opens still waiting with ErrClosed and
// removes the cache's own directory. Files still open stay readable.
func (c *Cache) Close() error {
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

var _ fs.StatFS = (*Cache)(nil)

// A File is an object open in a [Cache]: an *os.File whose Close lets the cache evict
// the object again.
type File struct {
	*os.File
	c    *Cache
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
