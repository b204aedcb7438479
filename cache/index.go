package cache

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

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
