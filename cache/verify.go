package cache

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/conveyor-ml/conveyor/decode"
)

// Problem is one damaged record, or bytes no record could be read from.
type Problem struct {
	Shard  string // shard file
	Offset int64
	Path   string // the record's source path, when its header could be read
	Err    error
}

// VerifyReport sums up Verify.
type VerifyReport struct {
	Shards, Records int
	Bytes           int64 // record bytes checked
	Damaged         int   // records that failed a checksum or did not decode
	// Unreadable counts bytes at shard ends past the last whole record: the torn record
	// of a writer killed mid-write, or records after a damaged header in a shard whose
	// index was lost. TornShards is how many shards have such a tail.
	Unreadable int64
	TornShards int
}

// Verify reads and decodes every indexed record of every shard, checking both checksums,
// and calls problem for each damaged one. Records a live writer is still appending are
// checked up to the last one indexed.
func (c *Cache) Verify(problem func(Problem)) (VerifyReport, error) {
	c.mu.RLock()
	shards := make([]*shard, 0, len(c.shards))
	for _, sh := range c.shards {
		shards = append(shards, sh)
	}
	c.mu.RUnlock()
	slices.SortFunc(shards, func(a, b *shard) int { return strings.Compare(a.name, b.name) })
	if problem == nil {
		problem = func(Problem) {}
	}
	var rep VerifyReport
	d := c.NewCoder()
	defer d.Close()
	var img decode.Image
	for _, sh := range shards {
		rep.Shards++
		c.mu.RLock()
		recs := slices.Clone(sh.recs)
		c.mu.RUnlock()
		for _, r := range recs {
			rep.Records++
			rep.Bytes += int64(r.Bytes)
			if _, err := d.Load(&img, r); err != nil {
				rep.Damaged++
				problem(Problem{Shard: filepath.Join(c.dir, r.Shard()), Offset: r.off, Path: r.Path, Err: err})
			}
		}
		fi, err := sh.f.Stat()
		if err != nil {
			return rep, err
		}
		c.wmu.Lock() // dataEnd moves under wmu as records are added
		end := sh.dataEnd
		c.wmu.Unlock()
		if tail := fi.Size() - end; tail > 0 && !c.liveWriter(sh) {
			rep.Unreadable += tail
			rep.TornShards++
		}
	}
	return rep, nil
}

// liveWriter reports whether some process is still appending to sh.
func (c *Cache) liveWriter(sh *shard) bool {
	f, err := os.Open(filepath.Join(c.dir, sh.name+shardExt))
	if err != nil {
		return false
	}
	defer f.Close()
	ok, _ := tryLock(f)
	return !ok
}
