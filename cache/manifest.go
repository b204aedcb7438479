package cache

import (
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ShardManifest is what a converted dataset's Info records of one of its shards, so that
// a shard lost, cut short or damaged anywhere is found, not silently left out.
type ShardManifest struct {
	Name       string `json:"name"`    // the shard's file name
	Codec      Codec  `json:"codec"`   // the codec its header names
	Records    int    `json:"records"` // records in it (copies superseded by a later one included)
	Bytes      int64  `json:"bytes"`   // the shard file's size
	HeaderCRC  uint32 `json:"header_crc32c"`
	IndexBytes int64  `json:"index_bytes"` // its index file's size
	IndexCRC   uint32 `json:"index_crc32c"`
	// CRC32C is the CRC-32C of the whole shard file as 8 hex digits, so that a shard
	// fetched from object storage is checked before it is read even where the store
	// gives no checksum of its own (plain HTTP, multipart objects). Empty in datasets
	// converted before it was recorded; those are read unchecked as before.
	CRC32C string `json:"crc32c,omitempty"`
}

// Manifest describes the shards holding records of spec, for a converted dataset's Info
// (Info.Shards): those whose names begin with Options.ShardPrefix, when it is set. Call
// it when nothing more is being written under spec by this Cache (or, without a prefix,
// by anyone).
func (c *Cache) Manifest(spec string) ([]ShardManifest, error) {
	if err := c.Refresh(); err != nil {
		return nil, err
	}
	c.wmu.Lock() // no record of this Cache's is half written
	defer c.wmu.Unlock()
	c.mu.RLock()
	var shards []*shard
	for _, sh := range c.shards {
		if sh.spec == spec && !sh.gone && sh.broken == nil && strings.HasPrefix(sh.name, c.opts.ShardPrefix) {
			shards = append(shards, sh)
		}
	}
	c.mu.RUnlock()
	slices.SortFunc(shards, func(a, b *shard) int { return strings.Compare(a.name, b.name) })
	m := make([]ShardManifest, 0, len(shards))
	for _, sh := range shards {
		fc := c.checkFiles(sh.name, nil)
		switch {
		case fc.size < 0 || fc.hdrErr != nil || fc.hdrCut:
			return nil, fmt.Errorf("cache: %s: shard unreadable while writing the manifest: %v", filepath.Join(c.dir, sh.name+shardExt), fc.hdrErr)
		case fc.idxSize < 0:
			fc.idxSize = 0 // a writer killed before creating it; CheckDataset expects none
		}
		sum, err := fileCRC32C(filepath.Join(c.dir, sh.name+shardExt), fc.size)
		if err != nil {
			return nil, fmt.Errorf("cache: %s: reading the shard for its checksum: %w", filepath.Join(c.dir, sh.name+shardExt), err)
		}
		m = append(m, ShardManifest{
			Name: sh.name + shardExt, Codec: sh.codec, Records: c.readable(sh, fc.size), Bytes: fc.size,
			HeaderCRC: fc.hdrCRC, IndexBytes: fc.idxSize, IndexCRC: fc.idxCRC, CRC32C: sum,
		})
	}
	return m, nil
}

// fileCRC32C returns the CRC-32C of the first size bytes of the file at path, as 8 hex
// digits. The manifest is written once, at the end of a conversion, so the shard is
// read again then, mostly from the page cache; CRC-32C itself runs at tens of GB/s.
func fileCRC32C(path string, size int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := crc32.New(castagnoli)
	n, err := io.Copy(h, io.NewSectionReader(f, 0, size))
	if err == nil && n < size {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%08x", h.Sum32()), nil
}

// readable counts sh's records that end within size bytes.
func (c *Cache) readable(sh *shard, size int64) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := 0
	for _, r := range sh.recs {
		if r.off+int64(r.Bytes) <= size {
			n++
		}
	}
	return n
}
