package cache

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
)

// A converted dataset in object storage is read without fetching it whole: its
// dataset.json, part records and shard indexes are fetched into the directory, which a
// ReadOnly Cache opens with Options.Remote, and CheckDataset lists the records of every
// recorded shard from its index. Its shard files stay in Remote (objstore's shard cache,
// which fetches a shard whole when it is opened, or ahead of need when the loader plans
// its epochs, and evicts it when space is needed and nobody holds it open). A read opens
// the shard there, checks its header once, reads the record with pread and closes it.

// remoteShard is what a Cache knows of a shard file kept in Options.Remote.
type remoteShard struct {
	hdrCRC  uint32      // the header checksum the dataset recorded
	checked atomic.Bool // a read found the header the dataset recorded

	// With Options.RemoteMap: the shard file, held open while the shard is mapped (its
	// mapping is the shard's m); mapMu serialises the first reads' attempts, and
	// noMap is set when mapping it failed, so reads copy.
	mapMu sync.Mutex
	held  io.Closer
	noMap bool
}

// readRemote reads r's record, of a shard in Options.Remote, into buf (r.Bytes long).
func (c *Cache) readRemote(r Ref, buf []byte) error {
	f, err := c.opts.Remote.Open(r.Shard())
	if err != nil {
		return fmt.Errorf("cache: %s: %w", r.Shard(), err)
	}
	defer f.Close()
	ra, ok := f.(io.ReaderAt)
	if !ok {
		return fmt.Errorf("cache: %s: Options.Remote opened a %T, which is not an io.ReaderAt", r.Shard(), f)
	}
	if err := c.checkRemoteHeader(r, ra); err != nil {
		return c.damaged(r, err)
	}
	if _, err := ra.ReadAt(buf, r.off); err != nil {
		if err == io.EOF {
			return c.damaged(r, fmt.Errorf("%w: record cut short: the shard ends before it", ErrCorrupt))
		}
		return fmt.Errorf("cache: %s: %w", r.Shard(), err)
	}
	return nil
}

// checkRemoteHeader checks, once per shard, that the header of r's shard file, read
// through ra, is the one the dataset recorded; the error is for c.damaged.
func (c *Cache) checkRemoteHeader(r Ref, ra io.ReaderAt) error {
	if r.sh.remote.checked.Load() {
		return nil
	}
	hdr := make([]byte, r.sh.hdrLen)
	if _, err := ra.ReadAt(hdr, 0); err != nil {
		return fmt.Errorf("%w: reading the shard header: %v", ErrCorrupt, err)
	}
	codec, spec, _, _, err := parseShardHeader(hdr)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	case checksum(hdr) != r.sh.remote.hdrCRC || codec != r.sh.codec || spec != r.sh.spec:
		return fmt.Errorf("%w: the shard header (spec %q, codec %s) is not the one the dataset recorded", ErrCorrupt, spec, codec)
	}
	r.sh.remote.checked.Store(true)
	return nil
}

// mapRemote returns the mapping of r's shard, kept in Options.Remote, mapping it on the
// first read when Options.RemoteMap asks: the shard file is opened there and held open
// (so the shard cache keeps it) until Close, its header checked, and the file mapped
// read-only as a local shard is, so that its records are read as a local shard's:
// without a copy, each payload summed by its first read only. Nil when RemoteMap is off
// or mapping failed (then reads copy, as without it); a failure to open the file or a
// bad header is left to the copying read to report.
func (c *Cache) mapRemote(r Ref) []byte {
	sh := r.sh
	if !c.opts.RemoteMap {
		return nil
	}
	if m := c.mapping(sh); m != nil {
		return m
	}
	rs := sh.remote
	rs.mapMu.Lock()
	defer rs.mapMu.Unlock()
	if m := c.mapping(sh); m != nil || rs.noMap || sh.faulted.Load() {
		return m
	}
	f, err := c.opts.Remote.Open(sh.name + shardExt)
	if err != nil {
		return nil
	}
	file, ok := f.(interface {
		io.ReaderAt
		Fd() uintptr
	})
	fi, serr := f.Stat()
	if !ok || serr != nil || c.checkRemoteHeader(r, file) != nil {
		f.Close()
		rs.noMap = true
		return nil
	}
	m, err := mapFile(file.Fd(), fi.Size())
	if err != nil {
		f.Close()
		rs.noMap = true
		return nil
	}
	c.mu.Lock()
	sh.m, rs.held = m, f
	growChecked(sh, len(sh.recs))
	c.mu.Unlock()
	return m
}

// shardSize is the size of sh's file, opening it in Options.Remote (so fetching it)
// when it is kept there.
func (c *Cache) shardSize(sh *shard) (int64, error) {
	if sh.remote == nil {
		fi, err := sh.f.Stat()
		if err != nil {
			return 0, err
		}
		return fi.Size(), nil
	}
	f, err := c.opts.Remote.Open(sh.name + shardExt)
	if err != nil {
		return 0, fmt.Errorf("cache: %s: %w", sh.name+shardExt, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("cache: %s: %w", sh.name+shardExt, err)
	}
	return fi.Size(), nil
}
