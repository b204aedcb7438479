package pinned

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrClosed is returned by Get after Close, and by a second Close.
var ErrClosed = errors.New("pinned: pool closed")

// slabBytes caps a slab so that a big budget is a handful of mappings (and of
// cuMemHostRegister calls) rather than one per buffer; a buffer larger than this gets a
// slab of its own. A variable so tests can exercise many slabs cheaply.
var slabBytes = 64 << 20

// poisonByte fills released buffers in conveyordebug builds.
const poisonByte = 0xDE

// Pool hands out fixed-size, page-aligned buffers carved from slabs that New maps (and
// locks) up front, so the budget is committed before the first batch; with
// Options.Initial, New maps only that many and Grow maps more, up to the budget, when
// they are wanted. The buffered channel of free buffers is both the free-list and the
// limit: Get blocks while every buffer is out.
//
// A Pool is safe for concurrent use. Its Register and Unregister hooks run with the
// pool's lock held.
type Pool struct {
	opts    Options // effective
	stride  int     // BufferSize rounded up to the page size
	perSlab int     // buffers per full slab
	max     int     // buffers the budget holds
	free    chan *Buffer
	done    chan struct{} // closed by Close; wakes blocked Gets

	mu     sync.Mutex
	bufs   []*Buffer
	slabs  []*slab
	closed bool
	st     Stats // counters; the byte fields are derived in Stats
}

// slab is one mapping holding one or more buffers.
type slab struct {
	mem    []byte // as returned by mapSlab; nil once unmapped
	out    int    // its buffers held by callers; guarded by Pool.mu
	closed bool   // unregistered and unmapped
	unreg  bool   // Options.Unregister is due at its unmapping: it was registered, or there is no Register
}

// Buffer is one page-aligned buffer of a Pool. It has one owner at a time: the caller
// that got it from Get or TryGet owns it until it calls Release, after which it must not
// touch the Buffer or its bytes.
type Buffer struct {
	b    []byte
	pool *Pool
	slab *slab
	out  bool // guarded by pool.mu
}

// Stats is a snapshot of a Pool's state and counters.
type Stats struct {
	BufferSize     int    // bytes per buffer, as configured
	Buffers        int    // buffers the pool holds (mapped so far)
	MaxBuffers     int    // buffers the budget holds: what Grow may map up to
	InUse          int    // buffers currently out
	PeakInUse      int    // most buffers out at once
	BytesMapped    int64  // bytes of slabs still mapped; 0 after Close once all are back
	BytesInUse     int64  // InUse in page-rounded bytes, the unit of Budget
	PeakBytesInUse int64  // PeakInUse in page-rounded bytes; never above Budget
	Budget         int64  // the effective Options.Budget
	Locked         bool   // slabs are mlocked
	LockError      string // why they are not, when Lock was requested; "" otherwise
	Registered     bool   // Options.Register ran on every slab
	RegisterError  string // why the slabs are not registered, with RegisterOptional; "" otherwise
	Gets           int64  // buffers handed out by Get and TryGet
	Waits          int64  // of those Gets, the ones that had to block for a Release
}

// New maps and, unless o.Lock is false, locks the pool's buffers (all the budget holds,
// or o.Initial), and runs o.Register on each slab. A nil o means defaults. Mapping
// commits the memory: with MAP_POPULATE the kernel zeroes every page up front, about
// 0.4 ms per MiB (0.6 ms with mlock) on a 2-core EPYC VM, so a 4 GiB pool takes a
// couple of seconds to start.
func New(o *Options) (*Pool, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	if opts.Lock != nil {
		lock := *opts.Lock // clone: the caller may reuse its bool
		opts.Lock = &lock
	}
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}

	stride := roundToPage(opts.BufferSize)
	n := int(opts.Budget / int64(stride))
	p := &Pool{
		opts:    opts,
		stride:  stride,
		perSlab: max(1, slabBytes/stride),
		max:     n,
		free:    make(chan *Buffer, n),
		done:    make(chan struct{}),
		st:      Stats{BufferSize: opts.BufferSize, MaxBuffers: n, Budget: opts.Budget},
	}
	first := n
	if opts.Initial > 0 {
		first = min(n, opts.Initial)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.grow(first, true); err != nil {
		return nil, err
	}
	return p, nil
}

// Grow maps up to n more buffers, as the budget allows, and returns how many it added.
// Their slabs are locked when the pool's are, and registered; when the kernel refuses
// to lock them, or Register fails, nothing is added and the error says why. It
// returns ErrClosed after Close.
func (p *Pool) Grow(n int) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, ErrClosed
	}
	n = min(n, p.max-len(p.bufs))
	if n <= 0 {
		return 0, nil
	}
	if err := p.grow(n, false); err != nil {
		return 0, err
	}
	return n, nil
}

// grow maps n buffers in slabs of at most perSlab, locks (at New: tries to lock) and
// registers them, and frees them into the pool; on an error it undoes its own slabs.
// p.mu must be held.
func (p *Pool) grow(n int, first bool) error {
	var slabs []*slab
	undo := func(registered int) {
		for i, s := range slabs {
			if i < registered && p.opts.Unregister != nil {
				_ = p.opts.Unregister(s.mem)
			}
			_ = unmapSlab(s.mem)
		}
	}
	for left := n; left > 0; left -= p.perSlab {
		mem, err := mapSlab(min(p.perSlab, left) * p.stride)
		if err != nil {
			undo(0)
			return err
		}
		slabs = append(slabs, &slab{mem: mem})
	}
	switch {
	case first && *p.opts.Lock:
		if err := lockSlabs(slabs); err != nil {
			p.st.LockError = err.Error()
		} else {
			p.st.Locked = true
		}
	case p.st.Locked:
		if err := lockSlabs(slabs); err != nil {
			undo(0)
			return err
		}
	}
	if p.opts.Register != nil && (first || p.st.Registered) {
		for i, s := range slabs {
			if err := p.opts.Register(s.mem); err != nil {
				err = fmt.Errorf("pinned: Register slab %d of %d: %w", len(p.slabs)+i+1, len(p.slabs)+len(slabs), err)
				if !first || !p.opts.RegisterOptional {
					undo(i)
					return err
				}
				// Go on unregistered: give back what was registered, keep the slabs.
				for _, r := range slabs[:i] {
					if p.opts.Unregister != nil {
						_ = p.opts.Unregister(r.mem)
					}
					r.unreg = false
				}
				p.st.RegisterError = err.Error()
				break
			}
			s.unreg = true
		}
		p.st.Registered = p.st.RegisterError == ""
	}
	for _, s := range slabs {
		if p.opts.Register == nil {
			s.unreg = true
		}
		p.slabs = append(p.slabs, s)
		p.st.BytesMapped += int64(len(s.mem))
		for off := 0; off < len(s.mem); off += p.stride {
			b := &Buffer{b: s.mem[off : off+p.opts.BufferSize : off+p.opts.BufferSize], pool: p, slab: s}
			p.bufs = append(p.bufs, b)
			p.free <- b // never blocks: the channel holds every buffer the budget does
		}
	}
	p.st.Buffers = len(p.bufs)
	return nil
}

// Get returns a free buffer, blocking while all are out. It returns ctx.Err() if ctx is
// done first (even when a buffer is free, so a cancelled loader takes no more), and
// ErrClosed once the pool is closed. Get does not allocate.
func (p *Pool) Get(ctx context.Context) (*Buffer, error) {
	done := ctx.Done()
	select {
	case <-p.done:
		return nil, ErrClosed
	case <-done:
		return nil, ctx.Err()
	default:
	}
	var b *Buffer
	waited := false
	select {
	case b = <-p.free:
	default:
		waited = true
		select {
		case b = <-p.free:
		case <-done:
			return nil, ctx.Err()
		case <-p.done:
			return nil, ErrClosed
		}
	}
	if !p.checkout(b, waited) {
		return nil, ErrClosed
	}
	return b, nil
}

// TryGet returns a free buffer and true, or nil and false if all are out or the pool is
// closed. It never blocks.
func (p *Pool) TryGet() (*Buffer, bool) {
	select {
	case b := <-p.free:
		if p.checkout(b, false) {
			return b, true
		}
	default:
	}
	return nil, false
}

// checkout hands b, just taken from the free list, to the caller. It fails if Close ran
// in between; Close then did not count b as out and may have unmapped its slab, so b
// must not be touched.
func (p *Pool) checkout(b *Buffer, waited bool) bool {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return false
	}
	b.out = true
	b.slab.out++
	st := &p.st
	st.InUse++
	st.PeakInUse = max(st.PeakInUse, st.InUse)
	st.Gets++
	if waited {
		st.Waits++
	}
	p.mu.Unlock()
	return true
}

// Bytes returns the buffer's memory: exactly Options.BufferSize bytes, page-aligned,
// with no spare capacity. It is valid until Release.
func (b *Buffer) Bytes() []byte { return b.b }

// Release gives the buffer back to its pool. It is nil-safe, does not allocate, and
// panics if the buffer was already released. After Close, releasing the last leaked
// buffer of a slab unregisters and unmaps that slab.
func (b *Buffer) Release() {
	if b == nil {
		return
	}
	p := b.pool
	if p == nil {
		panic("pinned: Release of a Buffer that did not come from a Pool")
	}
	p.mu.Lock()
	if !b.out {
		p.mu.Unlock()
		panic("pinned: Buffer released twice")
	}
	b.out = false
	b.slab.out--
	p.st.InUse--
	if p.closed {
		if b.slab.out == 0 {
			_ = p.closeSlab(b.slab) // nobody to report to; see Options.Unregister
		}
		p.mu.Unlock()
		return
	}
	if poisonReleased {
		poison(b.b)
	}
	p.free <- b // never blocks: the channel holds every buffer
	p.mu.Unlock()
}

func poison(b []byte) {
	if len(b) == 0 {
		return
	}
	b[0] = poisonByte
	for n := 1; n < len(b); n *= 2 {
		copy(b[n:], b[:n])
	}
}

// Close closes the pool: blocked and later Gets return ErrClosed, and every slab whose
// buffers are all back is unregistered and unmapped. Close waits for nothing. Buffers
// still out are leaked: Close reports how many in its error, and their slabs stay mapped
// (memory a caller may still be writing is never unmapped) until the last of each slab's
// buffers is released. A second Close returns ErrClosed.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	p.closed = true
	close(p.done)
	for drained := false; !drained; {
		select {
		case <-p.free:
		default:
			drained = true
		}
	}
	var errs []error
	leaked := 0
	for _, s := range p.slabs {
		if s.out > 0 {
			leaked += s.out
			continue
		}
		if err := p.closeSlab(s); err != nil {
			errs = append(errs, err)
		}
	}
	if leaked > 0 {
		errs = append(errs, fmt.Errorf("pinned: Close with %d of %d buffers still out (leaked); their slabs stay mapped until they are released",
			leaked, len(p.bufs)))
	}
	return errors.Join(errs...)
}

// closeSlab unregisters and unmaps s. p.mu must be held.
func (p *Pool) closeSlab(s *slab) error {
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	if p.opts.Unregister != nil && s.unreg {
		if err := p.opts.Unregister(s.mem); err != nil {
			errs = append(errs, fmt.Errorf("pinned: Unregister: %w", err))
		}
	}
	if err := unmapSlab(s.mem); err != nil {
		errs = append(errs, err)
	}
	p.st.BytesMapped -= int64(len(s.mem))
	s.mem = nil
	return errors.Join(errs...)
}

// Stats returns a snapshot of the pool's state and counters.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	st := p.st
	p.mu.Unlock()
	st.BytesInUse = int64(st.InUse) * int64(p.stride)
	st.PeakBytesInUse = int64(st.PeakInUse) * int64(p.stride)
	return st
}
