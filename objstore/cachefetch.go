package objstore

import (
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/conveyor-ml/conveyor/internal/units"
)

// reserve makes room for size bytes, evicting unreferenced objects: those already
// opened first, least recently used first; then, for an Open only (demand), objects
// prefetched and not yet opened, the one asked for last first, since it is needed
// furthest ahead. Locked.
func (c *ShardCache) reserve(size int64, demand bool) bool {
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
func (c *ShardCache) kick() {
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
func (c *ShardCache) next() *entry {
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
func (c *ShardCache) evictableBytes() int64 {
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
func (c *ShardCache) fetch(e *entry) {
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
	c     *ShardCache
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
func (c *ShardCache) download(e *entry, r *reservation) error {
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
func (c *ShardCache) settle(e *entry, sized bool, err error) {
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
