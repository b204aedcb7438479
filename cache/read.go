package cache

import (
	"fmt"
	"io"
	"runtime/debug"
	"sync/atomic"

	"github.com/conveyor-ml/conveyor/decode"
)

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
