package cache

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/conveyor-ml/conveyor/decode"
)

// Problem is one piece of damage: a damaged record, or bytes no record could be read
// from; with VerifyDataset and CheckDataset also a shard or an index that is not as it
// should be.
type Problem struct {
	Kind   Kind   // KindRecord for a record: all that Verify reports
	Shard  string // shard file
	Offset int64  // the record's position in the shard; for KindIndex, the entry's in the index
	Path   string // the record's source path, when its header could be read
	// Records is, for a shard's problem, how many of its records it leaves unreadable,
	// where that is known: all of them for a damaged header or a missing shard, those
	// past the end of a truncated one, none for a damaged index.
	Records int
	// Superseded marks a damaged record that is an older copy of a sample stored again
	// later (a conversion rerun repaired it): the dataset does not use it.
	Superseded bool
	Err        error
}

// File is the file the problem is in: the shard's index for KindIndex, else the shard.
func (p Problem) File() string {
	if p.Kind == KindIndex {
		return strings.TrimSuffix(p.Shard, shardExt) + indexExt
	}
	return p.Shard
}

// VerifyReport sums up Verify and VerifyDataset.
type VerifyReport struct {
	Shards, Records int
	Bytes           int64 // record bytes checked
	Damaged         int   // records that failed a checksum or did not decode
	Superseded      int   // of the damaged records, those the dataset no longer uses
	// DamagedShards counts the shards with a problem of their own (VerifyDataset):
	// header, index, missing, truncated or changed. Lost is how many records those
	// problems leave unreadable, as far as known.
	DamagedShards, Lost int
	// Unreadable counts bytes at shard ends past the last whole record: the torn record
	// of a writer killed mid-write, or records after a damaged header in a shard whose
	// index was lost. TornShards is how many shards have such a tail.
	Unreadable int64
	TornShards int
}

// OK reports whether the check found no damage that matters: every damaged record is a
// superseded copy, and no shard has a problem. Torn tails are not damage.
func (r *VerifyReport) OK() bool {
	return r.Damaged == r.Superseded && r.DamagedShards == 0
}

// Verify reads and decodes every indexed record of every shard, checking both checksums,
// and calls problem for each damaged one. Records a live writer is still appending are
// checked up to the last one indexed. It does not check the shard files themselves: see
// VerifyDataset.
func (c *Cache) Verify(problem func(Problem)) (VerifyReport, error) {
	var rep VerifyReport
	err := c.verifyRecords(&rep, true, nil, problem)
	return rep, err
}

// VerifyDataset is Verify and more: it also checks every shard's header and index, and
// reports a shard cut short of what its index lists, a missing or damaged index and a
// shard whose header does not parse, each once (the records such a shard leaves
// unreadable are counted in Lost, not read one by one). With info, the Info of a converted
// dataset in the directory, it checks the shards info recorded against that record:
// present, of the recorded size, header and index checksums and record count; a damaged
// record of info's spec that a later copy replaced is marked Superseded. info may be nil
// (a loader's cache) or have no manifest (an older conversion, or one still running).
//
// Opened ReadOnly, the cache lists the records of a recorded shard that cannot be read
// (see CheckDataset).
func (c *Cache) VerifyDataset(info *Info, problem func(Problem)) (VerifyReport, error) {
	if problem == nil {
		problem = func(Problem) {}
	}
	names, err := c.fileNames()
	if err != nil {
		return VerifyReport{}, err
	}
	manifest := map[string]*ShardManifest{}
	if info.Manifested() {
		for i := range info.Shards {
			name := strings.TrimSuffix(info.Shards[i].Name, shardExt)
			manifest[name] = &info.Shards[i]
			names = append(names, name)
		}
		slices.Sort(names)
		names = slices.Compact(names)
	}
	var used map[string]recAt // the record the dataset reads for each source path
	if info != nil {
		used = map[string]recAt{}
		for _, r := range c.Records(info.Spec) {
			used[r.Path] = recAt{r.sh, r.off}
		}
	}
	var rep VerifyReport
	for _, name := range names {
		fc := c.checkFiles(name, manifest[name])
		var ps []Problem
		if m := manifest[name]; m != nil {
			ps = c.checkShard(name, info.Spec, m, fc)
		} else {
			recs := 0
			if sh := c.shard(name); sh != nil && sh.broken == nil {
				c.mu.RLock()
				recs = len(sh.recs)
				c.mu.RUnlock()
			}
			ps = c.shardProblems(fc, recs)
			if info.Manifested() {
				// Left over, from an earlier conversion whose samples were stored again
				// (or of another spec): damage, but none to the dataset.
				for i := range ps {
					ps[i].Records = 0
					ps[i].Err = fmt.Errorf("%w; the dataset does not use it (%s does not list it): delete it", ps[i].Err, InfoName)
				}
			}
		}
		if len(ps) > 0 {
			rep.DamagedShards++
		}
		for _, p := range ps {
			rep.Lost += p.Records
			problem(p)
		}
	}
	return rep, c.verifyRecords(&rep, false, used, problem)
}

// verifyRecords reads every record of every shard c lists but those that cannot be read
// (reported whole by CheckDataset). With pastEnd false (VerifyDataset), records past a
// shard's end are left to its truncated-shard problem; with used, a damaged record of a
// path that used maps to another record is superseded.
func (c *Cache) verifyRecords(rep *VerifyReport, pastEnd bool, used map[string]recAt, problem func(Problem)) error {
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
	d := c.NewCoder()
	defer d.Close()
	d.sum = true // every record, whatever this Cache's reads found before
	var img decode.Image
	for _, sh := range shards {
		rep.Shards++
		if sh.broken != nil {
			continue // reported as a whole (CheckDataset); every read would fail alike
		}
		c.mu.RLock()
		recs := slices.Clone(sh.recs)
		c.mu.RUnlock()
		size, err := c.shardSize(sh)
		switch {
		case err != nil && sh.remote != nil:
			// Kept in object storage, and it cannot be fetched: missing, or the store
			// fails; the error names its URL.
			rep.DamagedShards++
			rep.Lost += len(recs)
			problem(Problem{Kind: KindMissing, Shard: filepath.Join(c.dir, sh.name+shardExt), Records: len(recs), Err: err})
			continue
		case err != nil:
			return err
		}
		for _, r := range recs {
			if !pastEnd && r.off+int64(r.Bytes) > size && sh.remote == nil {
				// Past the end: the shard's truncated problem counts it. (A remote
				// shard's size is known only now: its records are read, and fail.)
				continue
			}
			rep.Records++
			rep.Bytes += int64(r.Bytes)
			if _, err := d.Load(&img, r); err != nil {
				rep.Damaged++
				p := Problem{Kind: KindRecord, Shard: filepath.Join(c.dir, r.Shard()), Offset: r.off, Path: r.Path, Records: 1, Err: err}
				if u, ok := used[r.Path]; ok && u != (recAt{r.sh, r.off}) && u.sh.spec == sh.spec {
					p.Superseded = true
					rep.Superseded++
				}
				problem(p)
			}
		}
		c.wmu.Lock() // dataEnd moves under wmu as records are added
		end := sh.dataEnd
		c.wmu.Unlock()
		if tail := size - end; tail > 0 && !c.liveWriter(sh) {
			rep.Unreadable += tail
			rep.TornShards++
		}
	}
	return nil
}

// recAt is where a record is.
type recAt struct {
	sh  *shard
	off int64
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
