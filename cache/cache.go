package cache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conveyor-ml/conveyor/decode"
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

// putLockWait bounds how long a Put waits for the directory's lock: storing is optional,
// and a process stopped while holding it (SIGSTOP, a suspended job, a hung file system)
// must not stall every other loader sharing the directory.
var putLockWait = 2 * time.Second

// tryLockHook is tryLock, replaced by tests.
var tryLockHook = tryLock

// lockWithin takes f's lock, waiting up to d; false when another holds it that long.
func lockWithin(f *os.File, d time.Duration) (bool, error) {
	deadline := time.Now().Add(d)
	for wait := 50 * time.Microsecond; ; wait = min(2*wait, 5*time.Millisecond) {
		ok, err := tryLockHook(f)
		if ok || err != nil || time.Now().After(deadline) {
			return ok, err
		}
		time.Sleep(wait)
	}
}

// Refused reports whether err from Put means the cache would not take the record (full,
// writing disabled, read-only, or its directory busy) rather than that the record itself was at fault.
func Refused(err error) bool {
	return errors.Is(err, ErrFull) || errors.Is(err, ErrDisabled) || errors.Is(err, ErrReadOnly) || errors.Is(err, ErrBusy)
}

// Options configures Open. A nil *Options means the defaults.
type Options struct {
	// Codec stores new records; records already written keep theirs. Default S2.
	Codec Codec
	// Quality is the JPEG codec's quality, 1 to 100; default 90.
	Quality int
	// MaxBytes bounds the directory's size (shards and their indexes), as far as this
	// process knows it (see Refresh). Admission and eviction: a record is admitted while
	// it fits; when it does not, whole shards written for other specs are deleted, oldest
	// first; when none is left, no more records are admitted and those already stored stay.
	// A training epoch visits every sample once in random order, and for that pattern
	// keeping what is stored (hit rate MaxBytes/dataset size) beats LRU or FIFO
	// replacement, which would evict each record before its next use. Default 0: no bound.
	MaxBytes int64
	// ShardBytes is the size at which a writer starts a new shard; default 1 GiB.
	ShardBytes int64
	// ShardPrefix begins the name of every shard (and index) this Cache creates, and
	// Manifest lists only shards whose names begin with it, so that processes writing
	// disjoint parts of one converted dataset into one directory can each record their
	// own shards (see Part). Letters, digits, '-', '_' and '.' only. Default "": names
	// are a timestamp and a random number, and Manifest lists every shard.
	ShardPrefix string
	// ReadOnly opens an existing cache without creating or writing anything; default false.
	ReadOnly bool
	// Remote, for a ReadOnly cache holding a converted dataset whose shard files are kept
	// elsewhere (object storage, read through objstore's shard cache), opens those shard
	// files by name (NAME.shard); the files it returns must implement io.ReaderAt. Then
	// CheckDataset lists a shard the dataset recorded whose index is in the directory
	// but whose shard file is not from its index, as readable, and each read of one of
	// its records opens the shard file in Remote, reads the record and closes it (so a
	// bounded shard cache may evict it between reads). The first read of a shard checks
	// its header against the dataset's record. Default nil: a recorded shard missing from
	// the directory is a Problem (KindMissing) whose records cannot be read.
	Remote fs.FS
	// RemoteMap, with Remote, maps each shard file there when one of its records is
	// first read and holds it open until Close: its records are then read as a local
	// shard's, from the mapping without a copy, each payload summed by its first read
	// only. The shard cache cannot evict a held file, so set it only when every shard
	// fits the cache at once. Default false: every read opens the file, copies the
	// record and sums it.
	RemoteMap bool
	// Logf receives notices such as writes being disabled; default log.Printf.
	Logf func(format string, args ...any)
}

// EnsureDefaults fills zero fields of o with their defaults and returns o; a nil o is
// replaced by a new Options. Open calls it on its copy of the options, then Validate.
func (o *Options) EnsureDefaults() *Options {
	if o == nil {
		o = &Options{}
	}
	if o.Codec == "" {
		o.Codec = S2
	}
	if o.Quality == 0 {
		o.Quality = 90
	}
	if o.ShardBytes == 0 {
		o.ShardBytes = 1 << 30
	}
	if o.Logf == nil {
		o.Logf = log.Printf
	}
	return o
}

// Validate reports every invalid field of o, joined (errors.Join), each naming its
// field; nil means o is usable. Call EnsureDefaults first, so that unset fields are not
// reported.
func (o *Options) Validate() error {
	var errs []error
	if _, err := ParseCodec(string(o.Codec)); err != nil {
		errs = append(errs, err)
	}
	if o.Quality < 1 || o.Quality > 100 {
		errs = append(errs, fmt.Errorf("cache: Quality %d not in [1, 100]", o.Quality))
	}
	if o.Remote != nil && !o.ReadOnly {
		errs = append(errs, errors.New("cache: Remote shards are read-only: set ReadOnly"))
	}
	if o.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("cache: MaxBytes %d must be ≥ 0", o.MaxBytes))
	}
	if o.ShardBytes < 1<<16 {
		errs = append(errs, fmt.Errorf("cache: ShardBytes %d must be ≥ 64 KiB", o.ShardBytes))
	}
	if i := strings.IndexFunc(o.ShardPrefix, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '_' || r == '.')
	}); i >= 0 || len(o.ShardPrefix) > 64 {
		errs = append(errs, fmt.Errorf("cache: ShardPrefix %q: want at most 64 letters, digits, '-', '_' or '.'", o.ShardPrefix))
	}
	return errors.Join(errs...)
}

// String prints the effective options.
func (o *Options) String() string {
	s := fmt.Sprintf("codec=%s quality=%d max_bytes=%d shard_bytes=%d read_only=%t", o.Codec, o.Quality, o.MaxBytes, o.ShardBytes, o.ReadOnly)
	if o.ShardPrefix != "" {
		s += " shard_prefix=" + o.ShardPrefix
	}
	return s
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

// writeAt is the one place records reach the disk, so tests can inject write failures.
var writeAt = func(f *os.File, b []byte, off int64) (int, error) { return f.WriteAt(b, off) }

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

// Refresh reads what was appended to the directory since Open or the last Refresh:
// shards and records other processes wrote, and records a crashed writer left unindexed.
func (c *Cache) Refresh() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.refresh()
}

// refresh is Refresh with wmu held.
func (c *Cache) refresh() error {
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	var names []string
	for _, e := range ents {
		if name, ok := strings.CutSuffix(e.Name(), shardExt); ok && regularFile(c.dir, e) {
			names = append(names, name)
		}
	}
	slices.Sort(names) // names start with the creation time: older records are added first
	var total int64
	for _, name := range names {
		c.mu.RLock()
		sh := c.shards[name]
		c.mu.RUnlock()
		if sh == nil {
			sh, err = c.openShard(name)
			if err != nil {
				if why := err.Error(); c.ignored[name] != why {
					if c.ignored == nil {
						c.ignored = map[string]string{}
					}
					c.ignored[name] = why
					c.opts.Logf("cache: ignoring %s: %v", filepath.Join(c.dir, name+shardExt), err)
				}
				continue
			}
			if sh == nil {
				continue // its header is still being written
			}
			if !c.opts.ReadOnly {
				// Another process's, still written (it holds its lock), or sealed.
				if ok, _ := tryLock(sh.f); ok {
					unlock(sh.f)
				} else {
					c.others = append(c.others, sh)
				}
			}
		}
		if !c.ownWriter(sh) {
			if err := c.catchUp(sh); err != nil {
				c.opts.Logf("cache: %s: %v", filepath.Join(c.dir, name+shardExt), err)
			}
		}
		total += sh.bytes
	}
	c.bytes = total
	return nil
}

func (c *Cache) ownWriter(sh *shard) bool {
	w := c.writers[sh.spec]
	return w != nil && w.sh == sh
}

// openShard opens a shard and parses its header; nil, nil while the header is incomplete.
func (c *Cache) openShard(name string) (*shard, error) {
	f, err := os.Open(filepath.Join(c.dir, name+shardExt))
	if err != nil {
		return nil, err
	}
	codec, spec, hl, hdr, err := readShardHeader(f)
	if err != nil || hdr == nil {
		f.Close()
		return nil, err
	}
	sh := &shard{name: name, f: f, codec: codec, spec: spec, hdrLen: int64(hl), dataEnd: int64(hl)}
	c.mu.Lock()
	c.shards[name] = sh
	c.mu.Unlock()
	return sh, nil
}

// catchUp adds the records appended to sh since it was last read: first from its index,
// then by scanning the shard past the last indexed record.
func (c *Cache) catchUp(sh *shard) error {
	if sh.broken != nil {
		return nil // its records were listed from its index when it was found broken
	}
	fi, err := sh.f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	var idxSize int64
	if data, err := readIndex(filepath.Join(c.dir, sh.name+indexExt), sh.idxOff, indexLimit(size)); err == nil {
		idxSize = sh.idxOff + int64(len(data))
		for len(data) > 0 {
			off, h, n, err := parseIndexEntry(data)
			if err != nil || n == 0 {
				break // torn or damaged: the shard scan below recovers what follows
			}
			if off < sh.hdrLen || off+int64(h.recordLen()) > size {
				// Past the size read above (a live writer appended since; or a shard cut
				// short, which CheckDataset finds): stop, so that the next call reads this
				// entry again. Consuming it would let the next entry move dataEnd past a
				// record never added.
				break
			}
			c.add(sh, off, &h)
			data = data[n:]
			sh.idxOff += int64(n)
		}
	}
	buf := make([]byte, recordFixed+256)
	for sh.dataEnd < size {
		n, err := sh.f.ReadAt(buf[:min(int64(len(buf)), size-sh.dataEnd)], sh.dataEnd)
		if err != nil && err != io.EOF {
			return err
		}
		h, need, err := parseHeader(buf[:n])
		if need > 0 {
			if int64(need) > size-sh.dataEnd || need <= n {
				break // a header still being written, or a torn one
			}
			buf = make([]byte, need)
			continue
		}
		if err != nil || sh.dataEnd+int64(h.recordLen()) > size {
			break // a record still being written, or a writer's torn last record
		}
		c.add(sh, sh.dataEnd, &h)
	}
	sh.bytes = size + idxSize
	if c.opts.ReadOnly && size > int64(len(sh.m)) && size <= maxMap {
		// Reads of a read-only cache come straight from the page cache, without a copy.
		// Earlier mappings stay until Close: Refs read before may still use them.
		if m, err := mapShard(sh, size); err == nil {
			c.mu.Lock() // Read takes sh.m under mu.RLock
			if sh.m != nil {
				sh.oldMaps = append(sh.oldMaps, sh.m)
			}
			sh.m = m
			growChecked(sh, len(sh.recs))
			c.mu.Unlock()
		}
	}
	return nil
}

// maxMap bounds a shard mapping; larger shards are read with pread.
const maxMap = 1 << 40

// errIndexTooLarge reports an index larger than its shard's could be.
var errIndexTooLarge = errors.New("cache: index larger than its shard's can be")

// readIndex reads the index file path from off, refusing one holding more than limit
// bytes in all (errIndexTooLarge, naming it): a damaged or foreign file is not read into
// memory whole. An index entry copies its record's header, not its payload, so a
// shard's index is at most about its size (indexLimit).
func readIndex(path string, off, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > limit {
		return nil, fmt.Errorf("%w: %s: %d bytes, more than the %d an index of its shard can hold", errIndexTooLarge, path, fi.Size(), limit)
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, max(limit-off, 0)+1))
	if err == nil && off+int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: %s: more than the %d bytes an index of its shard can hold", errIndexTooLarge, path, limit)
	}
	return data, err
}

// indexLimit bounds the index of a shard of size bytes (as ShardManifest.check bounds a
// recorded one, for as many records as the size can hold), with room for the entries a
// live writer appends between the shard's size being read and its index.
func indexLimit(size int64) int64 {
	return maxIndexBytes(size, int(size/recordFixed)) + 1<<20
}

// shardIndexLimit bounds sh's index: by its file's size, else (a shard in object
// storage) by what a shard of the largest size could hold.
func (c *Cache) shardIndexLimit(sh *shard) int64 {
	if sh.f != nil {
		if fi, err := sh.f.Stat(); err == nil {
			return indexLimit(fi.Size())
		}
	}
	return indexLimit(maxShardBytes)
}

// add records that sh holds h at off. A later record with the same key replaces an
// earlier one.
func (c *Cache) add(sh *shard, off int64, h *header) {
	if end := off + int64(h.recordLen()); end > sh.dataEnd {
		sh.dataEnd = end
	} else if i := slices.IndexFunc(sh.recs, func(r Ref) bool { return r.off == off }); i >= 0 {
		return // known already (from the index, then the scan, or the other way round)
	}
	r := Ref{
		Path: h.path, Label: h.label, Width: h.width, Height: h.height, Codec: sh.codec,
		Bytes: h.recordLen(), SourceSize: h.srcSize, SourceModTime: h.srcMtime,
		id: h.id, sh: sh, off: off,
	}
	c.mu.Lock()
	r.i = int32(len(sh.recs))
	sh.recs = append(sh.recs, r)
	c.index[h.id] = loc{sh, int32(len(sh.recs) - 1)}
	c.mu.Unlock()
}

// Lookup finds the record stored under k.
func (c *Cache) Lookup(k Key) (Ref, bool) {
	id := k.ID()
	c.mu.RLock()
	l, ok := c.index[id]
	var r Ref
	if ok {
		r = l.sh.recs[l.i]
	}
	c.mu.RUnlock()
	if ok {
		c.hits.Add(1)
	} else {
		c.misses.Add(1)
	}
	return r, ok
}

// Read reads r's record into buf (grown when too small) and returns its payload after
// checking both checksums. A mismatch returns an error wrapping ErrCorrupt, counts it and
// forgets the record, so the caller can decode the source again and Put a good copy.
//
// A ReadOnly cache maps its shards, and then the payload is read-only memory of the
// mapping rather than buf: it must not be written to. A mapped record's payload is
// summed by the first Read of it only (once per Open): shards are append-only and the
// mapping read-only, so later reads see the bytes checked; the header is checked
// against the index every time. VerifyDataset always sums.
func (c *Cache) Read(r Ref, buf []byte) ([]byte, error) { return c.read(r, buf, false) }

// read is Read; always sums the payload even when a read of this Cache found its
// checksum right before (VerifyDataset).
func (c *Cache) read(r Ref, buf []byte, always bool) (_ []byte, err error) {
	if r.sh.broken != nil {
		return nil, c.damaged(r, fmt.Errorf("%w: %v", ErrCorrupt, r.sh.broken))
	}
	if r.sh.remote != nil && int64(len(c.mapRemote(r))) < r.off+int64(r.Bytes) {
		// Not mapped, or the mapping ends before the record (a file cut short): read it.
		if cap(buf) < r.Bytes {
			buf = make([]byte, r.Bytes)
		}
		buf = buf[:r.Bytes]
		if err := c.readRemote(r, buf); err != nil {
			return nil, err
		}
		return c.checkRecord(r, buf, true)
	}
	mapped := false
	switch m, end := c.mapping(r.sh), r.off+int64(r.Bytes); {
	case end <= int64(len(m)):
		buf, mapped = m[r.off:end:end], true
	case cap(buf) < r.Bytes:
		buf = make([]byte, r.Bytes)
	default:
		buf = buf[:r.Bytes]
	}
	if mapped {
		// Nothing to read: the page cache is the buffer. A shard cut short under the
		// mapping faults instead of reading: that becomes an error (fault.go).
		defer c.guardFault(r, &err, debug.SetPanicOnFault(true))
		// A record in the mapping whose checksum a read of this Cache found right is
		// not summed again: shards only grow, a record's bytes never change once
		// written, and the mapping is read-only, so they are the bytes checked (a
		// disk that changes them under the page cache is for conveyor verify, which
		// always sums). The header is still checked against the index.
		bits := r.sh.checked.Load()
		if !always && bits != nil && int(r.i/64) < len(*bits) && (*bits)[r.i/64].Load()&(1<<(r.i%64)) != 0 {
			return c.checkRecord(r, buf, false)
		}
		payload, err := c.checkRecord(r, buf, true)
		if err == nil && bits != nil && int(r.i/64) < len(*bits) {
			(*bits)[r.i/64].Or(1 << (r.i % 64))
		}
		return payload, err
	} else if _, err := r.sh.f.ReadAt(buf, r.off); err != nil {
		if err == io.EOF {
			return nil, c.damaged(r, fmt.Errorf("%w: record cut short: the shard ends before it", ErrCorrupt))
		}
		return nil, fmt.Errorf("cache: %s: %w", r.Shard(), err)
	}
	return c.checkRecord(r, buf, true)
}

// checkRecord checks the record r read into buf against the index, and its payload
// against its checksum when sum is set, and returns its payload.
func (c *Cache) checkRecord(r Ref, buf []byte, sum bool) ([]byte, error) {
	h, hs, need, err := parseHeaderNoPath(buf)
	switch {
	case err != nil:
		return nil, c.damaged(r, err)
	case need > 0 || h.id != r.id || hs+int(h.payloadLen) != r.Bytes:
		return nil, c.damaged(r, fmt.Errorf("%w: header does not match the index", ErrCorrupt))
	}
	payload := buf[hs:]
	if sum && checksum(payload) != h.payloadCRC {
		return nil, c.damaged(r, fmt.Errorf("%w: payload checksum mismatch", ErrCorrupt))
	}
	return payload, nil
}

// growChecked makes sh's checked bitmap hold n records, keeping the bits set. Under
// c.mu; a bit set in the old bitmap meanwhile may be lost, and is set again by the next
// read that sums the record.
func growChecked(sh *shard, n int) {
	old := sh.checked.Load()
	if old != nil && len(*old)*64 >= n {
		return
	}
	bits := make([]atomic.Uint64, (n+63)/64)
	if old != nil {
		for i := range *old {
			bits[i].Store((*old)[i].Load())
		}
	}
	sh.checked.Store(&bits)
}

// mapping returns sh's current mapping, which Refresh may replace; nil once a read of
// it faulted.
func (c *Cache) mapping(sh *shard) []byte {
	if sh.faulted.Load() {
		return nil
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return sh.m
}

func (c *Cache) damaged(r Ref, err error) error {
	c.corrupt.Add(1)
	c.mu.Lock()
	if l, ok := c.index[r.id]; ok && l.sh == r.sh && l.sh.recs[l.i].off == r.off {
		delete(c.index, r.id)
	}
	c.mu.Unlock()
	return fmt.Errorf("cache: %s at %s+%d: %w", r.Path, r.Shard(), r.off, err)
}

// Copies reports whether Read copies r's record into its buffer: no mapping holds it
// (a shard in Options.Remote, a writable cache, a shard that faulted). Otherwise Read
// returns the mapped record and does not touch the buffer.
func (c *Cache) Copies(r Ref) bool {
	return int64(len(c.mapping(r.sh))) < r.off+int64(r.Bytes)
}

// Load reads and decodes r into dst, returning the image (see Coder.Decode).
func (d *Coder) Load(dst *decode.Image, r Ref) (*decode.Image, error) {
	if cap(d.rd) < r.Bytes && d.c.Copies(r) {
		d.rd = make([]byte, r.Bytes)
	}
	payload, err := d.c.read(r, d.rd, d.sum) // never keep payload: it may be a read-only mapping
	if err != nil {
		return nil, err
	}
	return d.Decode(dst, r, payload)
}

// Put stores img (packed or not; it is compacted in place) under k with label. It
// returns ErrFull, ErrDisabled or ErrReadOnly without writing when the record cannot be
// admitted; a write error disables writing for good, logs why and is returned.
func (d *Coder) Put(k Key, label int, img *decode.Image) error {
	c := d.c
	if c.opts.ReadOnly {
		return ErrReadOnly
	}
	if c.disabled.Load() != nil {
		c.rejected.Add(1)
		return ErrDisabled
	}
	if len(k.Path) > maxPath {
		return fmt.Errorf("cache: path of %d bytes is too long: %.64s...", len(k.Path), k.Path)
	}
	if len(k.Spec) > maxSpec {
		return fmt.Errorf("cache: spec of %d bytes is too long: %.64s...", len(k.Spec), k.Spec)
	}
	h := header{id: k.ID(), label: int32(label), width: uint32(img.Width), height: uint32(img.Height),
		srcSize: k.Size, srcMtime: k.ModTime, path: k.Path}
	hs := h.size()
	rec := grow(d.rec[:0], hs)[:hs]
	rec, err := d.encode(rec, c.opts.Codec, img)
	if err != nil {
		return err
	}
	d.rec = rec
	payload := rec[hs:]
	if len(payload) > 1<<32-1 {
		return fmt.Errorf("cache: %s: record of %d bytes is too large", k.Path, len(payload))
	}
	h.payloadLen, h.payloadCRC = uint32(len(payload)), checksum(payload)
	h.put(rec)
	return c.append(k.Spec, rec, &h)
}

func (c *Cache) append(spec string, rec []byte, h *header) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed {
		return errors.New("cache: Put after Close")
	}
	if c.disabled.Load() != nil {
		c.rejected.Add(1)
		return ErrDisabled
	}
	locked, err := false, error(nil)
	if c.lock != nil {
		locked, err = lockWithin(c.lock, putLockWait)
		if err != nil {
			// A directory whose lock cannot be taken (a file system without locks): other
			// processes could be evicting or appending, so nothing is written unguarded.
			return c.disable(fmt.Errorf("locking the directory: %w", err))
		}
		if !locked {
			c.rejected.Add(1)
			if !c.busyLogged {
				c.busyLogged = true
				c.opts.Logf("cache: %s: another process held the directory's lock for over %v: records it would have stored are left out meanwhile", c.dir, putLockWait)
			}
			return fmt.Errorf("%w: %s: another process held its lock for over %v", ErrBusy, c.dir, putLockWait)
		}
	}
	if locked {
		// Writers sharing the directory append one at a time, each first catching up
		// with what the others stored: a sample two loaders decoded at once (same
		// order, same moment) is stored once, by the first.
		defer unlock(c.lock)
		c.catchUpOthers()
		c.mu.RLock()
		_, stored := c.index[h.id]
		c.mu.RUnlock()
		if stored {
			c.shared.Add(1)
			return nil
		}
	}
	need := int64(len(rec) + idxFixed + h.size())
	w := c.writers[spec]
	if w != nil && w.sh.dataEnd > w.sh.hdrLen && w.sh.dataEnd+int64(len(rec)) > c.opts.ShardBytes {
		c.seal(w)
		w = nil
	}
	if w == nil {
		need += int64(len(encodeShardHeader(c.opts.Codec, spec)))
	}
	if c.opts.MaxBytes > 0 && c.bytes+need > c.opts.MaxBytes {
		c.evict(need, spec)
		if c.bytes+need > c.opts.MaxBytes {
			c.rejected.Add(1)
			if !c.full {
				c.full = true
				c.opts.Logf("cache: %s holds %d bytes of MaxBytes %d: admitting no more records", c.dir, c.bytes, c.opts.MaxBytes)
			}
			return ErrFull
		}
	}
	if w == nil {
		var err error
		if w, err = c.newWriter(spec); err != nil {
			return c.disable(err)
		}
	}
	sh := w.sh
	off := sh.dataEnd
	if _, err := writeAt(sh.f, rec, off); err != nil {
		sh.f.Truncate(off) // best effort: a torn tail is ignored by readers anyway
		return c.disable(err)
	}
	w.ibuf = appendIndexEntry(w.ibuf[:0], off, rec[:h.size()])
	if _, err := writeAt(w.idx, w.ibuf, w.idxOff); err != nil {
		// The record is whole; readers find it by scanning the shard.
		c.add(sh, off, h)
		return c.disable(err)
	}
	w.idxOff += int64(len(w.ibuf))
	sh.idxOff = w.idxOff
	c.add(sh, off, h)
	sh.bytes = sh.dataEnd + w.idxOff
	c.bytes += int64(len(rec) + len(w.ibuf))
	c.written.Add(1)
	return nil
}

// disable stops all further writes, logging why once.
func (c *Cache) disable(err error) error {
	reason := err.Error()
	if isNoSpace(err) {
		reason = "the disk is full: " + reason
	}
	if c.disabled.CompareAndSwap(nil, &reason) {
		c.opts.Logf("cache: %s: writing disabled, reading on from the sources: %s", c.dir, reason)
	}
	c.rejected.Add(1)
	return fmt.Errorf("%w: %w", ErrDisabled, err)
}

// newWriter creates a shard (and its index) that only this Cache appends to.
func (c *Cache) newWriter(spec string) (*writer, error) {
	hdr := encodeShardHeader(c.opts.Codec, spec)
	var f *os.File
	var name string
	for {
		name = fmt.Sprintf("%s%016x-%08x", c.opts.ShardPrefix, time.Now().UnixNano(), rand.Uint32())
		var err error
		f, err = os.OpenFile(filepath.Join(c.dir, name+shardExt), os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, err
		}
	}
	fail := func(err error) (*writer, error) {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	if ok, err := tryLock(f); !ok {
		return fail(fmt.Errorf("locking new shard: %v", err))
	}
	if _, err := writeAt(f, hdr, 0); err != nil {
		return fail(err)
	}
	idx, err := os.OpenFile(filepath.Join(c.dir, name+indexExt), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fail(err)
	}
	sh := &shard{name: name, f: f, codec: c.opts.Codec, spec: spec, hdrLen: int64(len(hdr)), dataEnd: int64(len(hdr)), bytes: int64(len(hdr))}
	c.mu.Lock()
	c.shards[name] = sh
	c.mu.Unlock()
	w := &writer{sh: sh, idx: idx}
	c.writers[spec] = w
	c.bytes += sh.bytes
	c.gen = readGen(c.lock) + 1 // others look for the new shard at their next Put
	writeGen(c.lock, c.gen)
	return w, nil
}

// catchUpOthers adds what other processes appended since this one last looked: shards
// they created (the directory's generation moved), and records in the shards they are
// writing. Called with wmu and the directory lock held, so no writer is mid-record.
func (c *Cache) catchUpOthers() {
	if gen := readGen(c.lock); gen != c.gen {
		c.gen = gen
		if err := c.refresh(); err != nil {
			c.opts.Logf("cache: %v", err)
		}
		return
	}
	live := c.others[:0]
	for _, sh := range c.others {
		if sh.gone {
			continue
		}
		fi, err := sh.f.Stat()
		if err != nil {
			continue
		}
		if fi.Size() > sh.dataEnd {
			if err := c.catchUp(sh); err != nil {
				c.opts.Logf("cache: %s: %v", filepath.Join(c.dir, sh.name+shardExt), err)
			}
		} else if ok, _ := tryLock(sh.f); ok {
			unlock(sh.f) // sealed: nothing more will be added
			continue
		}
		live = append(live, sh)
	}
	c.others = live
}

// readGen reads the directory's shard generation from its lock file: a counter each
// process bumps as it creates a shard, so that the others know to look for it.
func readGen(f *os.File) uint64 {
	var b [8]byte
	if n, _ := f.ReadAt(b[:], 0); n < len(b) {
		return 0
	}
	return binary.LittleEndian.Uint64(b[:])
}

func writeGen(f *os.File, gen uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], gen)
	f.WriteAt(b[:], 0) // best effort: others then find the shard at their next Refresh
}

// seal ends w's shard: other processes may now evict it.
func (c *Cache) seal(w *writer) {
	unlock(w.sh.f)
	w.idx.Close()
	delete(c.writers, w.sh.spec)
}

// evict deletes whole shards written for other specs than keep, oldest first, until need
// more bytes fit under MaxBytes. Shards a live writer still holds are skipped.
func (c *Cache) evict(need int64, keep string) {
	if c.lock == nil {
		return
	}
	c.mu.RLock()
	var cands []*shard
	for _, sh := range c.shards {
		if sh.spec != keep && !sh.gone {
			cands = append(cands, sh)
		}
	}
	c.mu.RUnlock()
	slices.SortFunc(cands, func(a, b *shard) int { return strings.Compare(a.name, b.name) })
	for _, sh := range cands {
		if c.bytes+need <= c.opts.MaxBytes {
			return
		}
		if c.ownWriter(sh) {
			continue
		}
		f, err := os.Open(filepath.Join(c.dir, sh.name+shardExt))
		if err != nil {
			continue
		}
		ok, _ := tryLock(f)
		if ok {
			os.Remove(filepath.Join(c.dir, sh.name+shardExt))
			os.Remove(filepath.Join(c.dir, sh.name+indexExt))
		}
		f.Close()
		if !ok {
			continue
		}
		c.mu.Lock()
		for _, r := range sh.recs {
			if l, ok := c.index[r.id]; ok && l.sh == sh {
				delete(c.index, r.id)
			}
		}
		sh.gone = true
		delete(c.shards, sh.name)
		c.retired = append(c.retired, sh)
		c.mu.Unlock()
		// Our read handle stays open: a Ref taken before eviction still reads.
		c.bytes -= sh.bytes
		c.evicted.Add(1)
		c.opts.Logf("cache: evicted shard %s (%d records of spec %q, %d bytes) to stay under MaxBytes %d", sh.name, len(sh.recs), sh.spec, sh.bytes, c.opts.MaxBytes)
	}
}

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

// maxRecordBytes bounds a record's decoded pixels: decode's default pixel limit, in RGB.
func (c *Cache) maxRecordBytes() int64 { return 3 * decode.DefaultMaxPixels }

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
