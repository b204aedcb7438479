package cache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/conveyor-ml/conveyor/decode"
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

// writeAt is the one place records reach the disk, so tests can inject write failures.
var writeAt = func(f *os.File, b []byte, off int64) (int, error) { return f.WriteAt(b, off) }

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

// maxRecordBytes bounds a record's decoded pixels: decode's default pixel limit, in RGB.
func (c *Cache) maxRecordBytes() int64 { return 3 * decode.DefaultMaxPixels }
