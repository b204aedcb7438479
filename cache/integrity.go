package cache

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Kind is a kind of damage that VerifyDataset and CheckDataset report.
type Kind string

// Kinds of damage.
const (
	// KindRecord: a record fails a checksum or does not decode.
	KindRecord Kind = "record"
	// KindHeader: a shard's header does not parse, or differs from the one the dataset
	// recorded; none of its records can be read.
	KindHeader Kind = "shard header"
	// KindIndex: a shard's index is missing, an entry fails its checksum, or it differs
	// from the one the dataset recorded. Its records are still found by scanning the
	// shard, as far as the shard's own record headers are intact.
	KindIndex Kind = "index"
	// KindMissing: the dataset (or an index) lists a shard the directory lacks.
	KindMissing Kind = "missing shard"
	// KindTruncated: a shard is shorter than its index or the dataset says; the records
	// past its end cannot be read.
	KindTruncated Kind = "truncated shard"
	// KindChanged: a shard is longer than the dataset recorded, or holds fewer records.
	KindChanged Kind = "changed shard"
)

// shardFiles is what a look at one shard file and its index finds, reading no record.
type shardFiles struct {
	name   string // without extension
	size   int64  // the shard's size; -1 when there is no shard file
	codec  Codec
	spec   string
	hdrLen int64
	hdrCRC uint32
	hdrErr error // the header does not parse
	hdrCut bool  // the shard ends inside its header

	// dangling, when the shard is a symbolic link that does not open, says where it
	// points and why it does not open.
	dangling string

	idxSize int64 // -1 when there is no index
	idxCRC  uint32
	entries []int64 // the record end of every whole entry that passes its checksum
	idxBad  int64   // where the first entry failing its checksum starts; -1 when none
}

// past counts the index entries whose record ends past the shard's end.
func (f *shardFiles) past() int {
	n := 0
	for _, end := range f.entries {
		if end > f.size {
			n++
		}
	}
	return n
}

// checkFiles reads name's shard header and whole index; m, when not nil, is the shard's
// manifest entry, which bounds the index of a shard not in the directory.
func (c *Cache) checkFiles(name string, m *ShardManifest) *shardFiles {
	fc := &shardFiles{name: name, size: -1, idxSize: -1, idxBad: -1}
	f, err := os.Open(filepath.Join(c.dir, name+shardExt))
	if err == nil {
		if fi, err := f.Stat(); err == nil {
			fc.size = fi.Size()
		}
		codec, spec, n, hdr, err := readShardHeader(f)
		switch {
		case err != nil:
			fc.hdrErr = err
		case hdr == nil:
			fc.hdrCut = true
		default:
			fc.codec, fc.spec, fc.hdrLen, fc.hdrCRC = codec, spec, int64(n), checksum(hdr)
		}
		f.Close()
	} else if to, lerr := os.Readlink(filepath.Join(c.dir, name+shardExt)); lerr == nil {
		fc.dangling = fmt.Sprintf("%s (%v)", to, errors.Unwrap(err))
	}
	limit := int64(MaxInfoBytes)
	switch {
	case fc.size >= 0:
		limit = indexLimit(fc.size)
	case m != nil:
		limit = maxIndexBytes(m.Bytes, m.Records)
	}
	data, err := readIndex(filepath.Join(c.dir, name+indexExt), 0, limit)
	if errors.Is(err, errIndexTooLarge) {
		fc.idxSize, fc.idxBad = limit+1, 0 // damaged from its first byte: never read
		return fc
	}
	if err != nil {
		return fc
	}
	fc.idxSize, fc.idxCRC = int64(len(data)), checksum(data)
	for pos := 0; pos < len(data); {
		off, h, n, err := parseIndexEntry(data[pos:])
		if err != nil {
			fc.idxBad = int64(pos)
			break
		}
		if n == 0 {
			break // torn: a writer stopped inside the entry
		}
		fc.entries = append(fc.entries, off+int64(h.recordLen()))
		pos += n
	}
	return fc
}

// regularFile reports whether the entry e of dir is a regular file or a symbolic link to
// one. Datasets kept by git-annex or DVC, or assembled as a farm of links, hold their
// shards as links to files elsewhere, and their users expect them read through the link.
func regularFile(dir string, e fs.DirEntry) bool {
	if e.Type().IsRegular() {
		return true
	}
	if e.Type()&fs.ModeSymlink == 0 {
		return false
	}
	fi, err := os.Stat(filepath.Join(dir, e.Name()))
	return err == nil && fi.Mode().IsRegular()
}

// readShardHeader reads the header at the start of f: hdr is its bytes, nil (with no
// error) when f ends inside it.
func readShardHeader(f *os.File) (codec Codec, spec string, n int, hdr []byte, err error) {
	buf := make([]byte, 64)
	for {
		m, err := f.ReadAt(buf, 0)
		if err != nil && err != io.EOF {
			return "", "", 0, nil, err
		}
		codec, spec, n, need, err := parseShardHeader(buf[:m])
		if err != nil {
			return "", "", 0, nil, err
		}
		if need == 0 {
			return codec, spec, n, buf[:n], nil
		}
		if m < len(buf) || need <= len(buf) {
			return "", "", 0, nil, nil
		}
		buf = make([]byte, need)
	}
}

// fileNames lists the shards in the directory, and the indexes without a shard, by name
// without extension.
func (c *Cache) fileNames() ([]string, error) {
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	var names []string
	for _, e := range ents {
		if !regularFile(c.dir, e) {
			continue
		}
		if name, ok := strings.CutSuffix(e.Name(), shardExt); ok {
			names = append(names, name)
		} else if name, ok := strings.CutSuffix(e.Name(), indexExt); ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// CheckDataset compares the directory with what info, a converted dataset's Info,
// recorded of its shards (Info.Shards), reading their headers and indexes but no record:
// the cheap check that opening a converted dataset makes. It returns every difference as
// a Problem; nil when info has no manifest (see Info.Manifested) or all is as recorded.
//
// A ReadOnly cache also lists the records of a recorded shard whose header is damaged,
// or whose file is gone, from its index, under info's spec: Records includes them and
// reading one fails with ErrCorrupt naming the shard, so that a loader counts them as
// bad samples instead of never seeing them.
func (c *Cache) CheckDataset(info *Info) []Problem {
	if info == nil || !info.Manifested() {
		return nil
	}
	var problems []Problem
	for _, m := range info.Shards {
		name := strings.TrimSuffix(m.Name, shardExt)
		problems = append(problems, c.checkShard(name, info.Spec, &m, c.checkFiles(name, &m))...)
	}
	return problems
}

// checkShard compares the files of one recorded shard with m.
func (c *Cache) checkShard(name, spec string, m *ShardManifest, fc *shardFiles) []Problem {
	path := filepath.Join(c.dir, name+shardExt)
	problem := func(kind Kind, records int, format string, a ...any) Problem {
		return Problem{Kind: kind, Shard: path, Records: records, Err: fmt.Errorf(format, a...)}
	}
	var ps []Problem
	switch {
	case fc.size < 0 && c.opts.Remote != nil:
		return c.checkRemote(name, spec, m, fc)
	case fc.size < 0:
		if fc.dangling != "" {
			// git-annex and DVC leave such a link where they have not fetched the content.
			ps = append(ps, problem(KindMissing, m.Records, "a symbolic link to %s: is its content fetched (git annex get, dvc pull)? The dataset lists it with %d records", fc.dangling, m.Records))
		} else {
			ps = append(ps, problem(KindMissing, m.Records, "the dataset lists it with %d records", m.Records))
		}
		c.adopt(name, spec, m, fc, errors.New("file missing"))
		return ps // its index, when there is one, was read for adopt
	case fc.size < m.Bytes:
		lost := m.Records
		if sh := c.shard(name); sh != nil && sh.broken == nil {
			lost -= c.readable(sh, fc.size)
			c.listPastEnd(sh)
		}
		ps = append(ps, problem(KindTruncated, lost, "%d bytes of the %d the dataset recorded; %d records past its end cannot be read", fc.size, m.Bytes, lost))
	case fc.size > m.Bytes:
		// Bytes that hold no whole record are a torn tail, which readers ignore (Verify
		// counts it); records are a change.
		if sh := c.shard(name); sh != nil && sh.broken == nil && c.dataEnd(sh) > m.Bytes {
			ps = append(ps, problem(KindChanged, 0, "%d bytes, the dataset recorded %d: records were added to it since", fc.size, m.Bytes))
		}
	}
	switch {
	case fc.hdrCut:
		if fc.size >= m.Bytes { // a shard cut inside its header is reported as truncated
			ps = append(ps, problem(KindHeader, m.Records, "the header is cut short"))
		}
		c.adopt(name, spec, m, fc, errors.New("header cut short"))
	case fc.hdrErr != nil:
		ps = append(ps, problem(KindHeader, m.Records, "%v; none of its %d records can be read", fc.hdrErr, m.Records))
		c.adopt(name, spec, m, fc, fc.hdrErr)
	case fc.hdrCRC != m.HeaderCRC || fc.spec != spec || fc.codec != m.Codec:
		ps = append(ps, problem(KindHeader, m.Records, "the header (spec %q, codec %s) is not the one the dataset recorded; none of its %d records can be read", fc.spec, fc.codec, m.Records))
	}
	if p := indexProblem(path, m, fc); p != nil {
		ps = append(ps, *p)
	}
	if len(ps) == 0 || (len(ps) == 1 && ps[0].Kind == KindIndex) {
		// The files look as recorded (or only the index differs, and the shard was
		// scanned): do the records the cache found add up?
		if sh := c.shard(name); sh != nil && sh.broken == nil {
			if n := c.readable(sh, fc.size); n < m.Records {
				ps = append(ps, problem(KindChanged, m.Records-n, "%d records found of the %d the dataset recorded", n, m.Records))
			}
		}
	}
	return ps
}

// indexProblem compares the index of a recorded shard with m; nil when it is as
// recorded.
func indexProblem(path string, m *ShardManifest, fc *shardFiles) *Problem {
	switch {
	case fc.idxSize < 0:
		if m.IndexBytes > 0 {
			return &Problem{Kind: KindIndex, Shard: path, Err: errors.New("missing")}
		}
	case fc.idxBad >= 0:
		return &Problem{Kind: KindIndex, Shard: path, Offset: fc.idxBad, Err: fmt.Errorf("the entry at byte %d fails its checksum", fc.idxBad)}
	case fc.idxSize != m.IndexBytes || fc.idxCRC != m.IndexCRC:
		return &Problem{Kind: KindIndex, Shard: path, Err: fmt.Errorf("%d bytes, checksum %08x; the dataset recorded %d bytes, checksum %08x", fc.idxSize, fc.idxCRC, m.IndexBytes, m.IndexCRC)}
	}
	return nil
}

// checkRemote lists the records of a recorded shard kept in Options.Remote from its
// index, which must be the one the dataset recorded: the shard itself is not read until
// a record is (see readRemote). An index that is missing or differs from the record is a
// Problem, and the records it does not list cannot be read: a remote shard is not
// scanned.
func (c *Cache) checkRemote(name, spec string, m *ShardManifest, fc *shardFiles) []Problem {
	path := filepath.Join(c.dir, name+shardExt)
	var ps []Problem
	if p := indexProblem(path, m, fc); p != nil {
		ps = append(ps, *p)
	}
	if fc.idxSize > 0 {
		c.adopt(name, spec, m, fc, nil)
	}
	n := 0
	if sh := c.shard(name); sh != nil {
		n = c.readable(sh, m.Bytes)
	}
	if n < m.Records {
		ps = append(ps, Problem{Kind: KindChanged, Shard: path, Records: m.Records - n, Err: fmt.Errorf("its index lists %d of the %d records the dataset recorded; the others cannot be read from object storage", n, m.Records)})
	}
	return ps
}

func (c *Cache) dataEnd(sh *shard) int64 {
	c.wmu.Lock() // dataEnd moves under wmu as records are added
	defer c.wmu.Unlock()
	return sh.dataEnd
}

func (c *Cache) shard(name string) *shard {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.shards[name]
}

// adopt lists the records of a recorded shard that cannot be read (why) from its index,
// when the cache is ReadOnly and has not listed the shard itself. With why nil, the
// shard is in Options.Remote and its records are read there.
func (c *Cache) adopt(name, spec string, m *ShardManifest, fc *shardFiles, why error) {
	if !c.opts.ReadOnly || fc.idxSize <= 0 {
		return
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.shard(name) != nil {
		return
	}
	data, err := readIndex(filepath.Join(c.dir, name+indexExt), 0, maxIndexBytes(m.Bytes, m.Records))
	if err != nil {
		return
	}
	hdrLen := int64(len(encodeShardHeader(m.Codec, spec)))
	sh := &shard{name: name, codec: m.Codec, spec: spec, hdrLen: hdrLen, dataEnd: hdrLen}
	if why == nil {
		sh.remote = &remoteShard{hdrCRC: m.HeaderCRC}
	} else {
		f, err := os.Open(filepath.Join(c.dir, name+shardExt))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			why = fmt.Errorf("%v; %v", why, err)
		}
		sh.f, sh.broken = f, fmt.Errorf("shard %s: %w", name+shardExt, why)
	}
	c.mu.Lock()
	c.shards[name] = sh
	c.mu.Unlock()
	for len(data) > 0 {
		off, h, n, err := parseIndexEntry(data)
		if err != nil || n == 0 {
			break
		}
		if off >= hdrLen {
			c.add(sh, off, &h)
		}
		data = data[n:]
	}
}

// listPastEnd lists, in a ReadOnly cache, the records that sh's index places past the
// end of the shard, which was cut short: reading them fails, so that a loader counts
// them as bad samples instead of never seeing them.
func (c *Cache) listPastEnd(sh *shard) {
	if !c.opts.ReadOnly {
		return
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	data, err := readIndex(filepath.Join(c.dir, sh.name+indexExt), sh.idxOff, c.shardIndexLimit(sh))
	if err != nil {
		return
	}
	for len(data) > 0 {
		off, h, n, err := parseIndexEntry(data)
		if err != nil || n == 0 {
			return
		}
		if off >= sh.hdrLen {
			c.add(sh, off, &h)
		}
		data = data[n:]
		sh.idxOff += int64(n)
	}
}

// shardProblems is what the files of a shard the dataset did not record (or of any
// shard, in a loader's cache) show by themselves: a header that does not parse, an
// index that is missing or fails a checksum, a shard shorter than its index says. recs
// is how many records the cache found in it, by index and scan.
func (c *Cache) shardProblems(fc *shardFiles, recs int) []Problem {
	ps := c.fileProblems(fc, recs)
	if len(ps) > 0 && c.liveWriter(&shard{name: fc.name}) {
		// Being written: what is missing may be on its way. (Asked only now: taking the
		// lock even briefly could make a writer creating the shard fail to take it.)
		return nil
	}
	return ps
}

func (c *Cache) fileProblems(fc *shardFiles, recs int) []Problem {
	path := filepath.Join(c.dir, fc.name+shardExt)
	idxPath := filepath.Join(c.dir, fc.name+indexExt)
	var ps []Problem
	switch {
	case fc.size < 0:
		if len(fc.entries) > 0 {
			ps = append(ps, Problem{Kind: KindMissing, Shard: path, Records: len(fc.entries), Err: fmt.Errorf("its index %s lists %d records", idxPath, len(fc.entries))})
		}
		return ps
	case fc.hdrCut:
		if len(fc.entries) > 0 {
			ps = append(ps, Problem{Kind: KindTruncated, Shard: path, Records: len(fc.entries), Err: fmt.Errorf("%d bytes, cut inside its header; its index lists %d records", fc.size, len(fc.entries))})
		}
		return ps // without records, what a writer killed as it created the shard leaves
	case fc.hdrErr != nil:
		return append(ps, Problem{Kind: KindHeader, Shard: path, Records: len(fc.entries), Err: fmt.Errorf("%v; none of the %d records its index lists can be read", fc.hdrErr, len(fc.entries))})
	}
	if n := fc.past(); n > 0 {
		ps = append(ps, Problem{Kind: KindTruncated, Shard: path, Records: n, Err: fmt.Errorf("%d bytes; its index lists %d records past the end, which cannot be read", fc.size, n)})
	}
	switch {
	case fc.idxSize < 0:
		if recs > 0 {
			ps = append(ps, Problem{Kind: KindIndex, Shard: path, Err: fmt.Errorf("missing (the %d records were found by scanning the shard)", recs)})
		}
	case fc.idxBad >= 0:
		ps = append(ps, Problem{Kind: KindIndex, Shard: path, Offset: fc.idxBad, Err: fmt.Errorf("the entry at byte %d fails its checksum", fc.idxBad)})
	case recs-len(fc.entries) > 1:
		// A writer stopped between writing a record and its entry leaves one record
		// unindexed, never more.
		ps = append(ps, Problem{Kind: KindIndex, Shard: path, Err: fmt.Errorf("lists %d of the %d records found by scanning the shard", len(fc.entries), recs)})
	}
	return ps
}
