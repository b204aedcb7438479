package cache

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Part names one of Count disjoint parts of a conversion, so that Count processes (a
// Kubernetes Indexed Job, a Slurm array) convert one dataset into one directory together
// without coordinating. Part Index holds the source's samples [Index·n/Count,
// (Index+1)·n/Count) of n listed: a function of the listing and Count only, so every
// process computes the same split. Contiguous ranges rather than every Count-th sample
// keep each part's files together in the source (one class folder, read by one process)
// and each shard's records consecutive in the dataset's order, which readers that fetch
// whole shards rely on.
//
// In the directory, part Index writes only files named after it: shards and indexes
// beginning with ShardPrefix, its part file (PartInfoName: its own Info, with the manifest
// of its shards) and its conversion lock. dataset.json, which names the number of parts,
// is created by whichever part starts first and never rewritten (CreatePartedInfo), so no
// file is written by two processes and there is nothing to merge: ReadInfo sums the part
// files, and the dataset is complete when all of them are. The names are a flat layout of
// plain files written once each, so that an object store can hold the same layout.
//
// The zero Part is the whole dataset, converted in one process.
type Part struct {
	Index int // 0 ≤ Index < Count
	Count int // number of parts; 0: not converted in parts
}

// ParsePart parses "i/N", 0 ≤ i < N.
func ParsePart(s string) (Part, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil {
		return Part{}, fmt.Errorf("cache: part %q: want INDEX/COUNT, such as 0/8", s)
	}
	p := Part{Index: i, Count: n}
	if n < 1 {
		p.Count = -1 // not the zero Part, which Validate accepts
	}
	if err := p.Validate(); err != nil {
		return Part{}, err
	}
	return p, nil
}

// maxParts bounds Count: more parts than this is a mistake, not a cluster.
const maxParts = 1 << 20

// Validate reports a part outside its count.
func (p Part) Validate() error {
	if p == (Part{}) {
		return nil
	}
	if p.Count < 1 || p.Count > maxParts || p.Index < 0 || p.Index >= p.Count {
		return fmt.Errorf("cache: part %d/%d: want 0 ≤ index < count ≤ %d", p.Index, max(p.Count, 0), maxParts)
	}
	return nil
}

// Whole reports whether p is the zero Part: the whole dataset.
func (p Part) Whole() bool { return p.Count == 0 }

// String is "i/N", or "whole" for the zero Part.
func (p Part) String() string {
	if p.Whole() {
		return "whole"
	}
	return fmt.Sprintf("%d/%d", p.Index, p.Count)
}

// Range is the samples [lo, hi) of n that part p holds; all of them for the zero Part.
func (p Part) Range(n int) (lo, hi int) {
	if p.Whole() {
		return 0, n
	}
	return int(int64(p.Index) * int64(n) / int64(p.Count)), int(int64(p.Index+1) * int64(n) / int64(p.Count))
}

// name is how p's files are named: "part-i-of-N", i padded with zeros to N's width, so
// that names sort in part order (part-02-of-16 before part-10-of-16), and shard by
// shard readers (source.Converted.ByShard) list the parts' shards in sample order.
func (p Part) name() string {
	return fmt.Sprintf("part-%0*d-of-%d", len(strconv.Itoa(p.Count)), p.Index, p.Count)
}

// ShardPrefix is the Options.ShardPrefix of the Cache that converts part p: its shards
// are named "part-i-of-N-…". "" for the zero Part.
func (p Part) ShardPrefix() string {
	if p.Whole() {
		return ""
	}
	return p.name() + "-"
}

// PartInfoName is the file, in a dataset's directory, where part p records its Info.
func (p Part) PartInfoName() string { return "dataset." + p.name() + ".json" }

// lockName is the file part p's conversion holds locked.
func (p Part) lockName() string {
	if p.Whole() {
		return convertLockName
	}
	return "convert." + p.name() + ".lock"
}

// ShardPart reports which part wrote the shard or index file name (a path or a base
// name), from its prefix; false for a shard not written by a part.
func ShardPart(name string) (Part, bool) {
	var p Part
	base := filepath.Base(name)
	if _, err := fmt.Sscanf(base, "part-%d-of-%d-", &p.Index, &p.Count); err != nil || p.Count == 0 || p.Validate() != nil || !strings.HasPrefix(base, p.ShardPrefix()) {
		return Part{}, false
	}
	return p, true
}

// CreatePartedInfo creates dir's dataset.json for a dataset converted in info.Parts
// parts, as the first part to start does; every part calls it with the same info (the
// whole source's Samples and Classes, the spec and codec). When dataset.json exists, it
// checks that it describes the same conversion and returns an error naming the field
// that differs otherwise: another number of parts, spec, codec, samples, classes or
// listing (Listing, when both have one), or a dataset converted in one process. It never rewrites the file.
func CreatePartedInfo(dir string, info *Info) error {
	if info.Parts < 1 || info.Parts > maxParts || info.Part != "" {
		return fmt.Errorf("cache: CreatePartedInfo: Parts %d, Part %q: want 1 to %d parts and no Part", info.Parts, info.Part, maxParts)
	}
	in := *info
	in.Version, in.Complete, in.Stopped, in.Stored, in.Bad, in.Shards = InfoVersion, false, "", 0, 0, nil
	err := writeInfoFile(dir, InfoName, &in, true)
	if !errors.Is(err, fs.ErrExist) {
		return err
	}
	old, err := readInfoFile(dir, InfoName)
	if err != nil {
		return err
	}
	return SamePartedInfo(filepath.Join(dir, InfoName), old, &in)
}

// SamePartedInfo checks that stored, the dataset.json found at name (a path or a URL,
// which errors name), describes the conversion in parts that mine describes, as
// CreatePartedInfo does when dataset.json exists; the error names the field that differs.
// A part that lost the race to create dataset.json in an object store calls it with
// what the winner stored.
func SamePartedInfo(name string, stored, mine *Info) error {
	old, in := stored, mine
	switch {
	case old.Parts == 0:
		return fmt.Errorf("cache: %s holds a dataset converted in one process; convert in parts into an empty directory, or without parts to resume it", name)
	case old.Parts != in.Parts:
		return fmt.Errorf("cache: %s: a dataset converted in %d parts, not %d; every part must name the same count", name, old.Parts, in.Parts)
	case old.Spec != in.Spec || old.Codec != in.Codec:
		return fmt.Errorf("cache: %s: spec %q, codec %s, but this part converts as %q, codec %s; every part must use the same size and codec", name, old.Spec, old.Codec, in.Spec, in.Codec)
	case old.Samples != in.Samples || !slices.Equal(old.Classes, in.Classes):
		return fmt.Errorf("cache: %s: %d samples in %d classes were listed, but this part lists %d in %d; every part must convert the same source", name, old.Samples, len(old.Classes), in.Samples, len(in.Classes))
	case old.Listing != "" && in.Listing != "" && old.Listing != in.Listing:
		return fmt.Errorf("cache: %s: the source listed other files (listing %s) than this part lists (listing %s), though as many in the same classes; every part must convert the same source, unchanged while the parts run", name, old.Listing, in.Listing)
	}
	return nil
}

// ListingHash is Info.Listing for a source of n files whose i-th is path(i): a SHA-256,
// in hex, of the paths in order, one a line. Hashing an ImageNet listing (1.28 million
// paths) takes about 0.1 s.
func ListingHash(n int, path func(i int) string) string {
	h := sha256.New()
	for i := range n {
		io.WriteString(h, path(i))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// WritePartInfo replaces the part file of part p in dir with info, which describes that
// part alone: its Samples, what it stored, whether it completed, and the manifest of its
// shards.
func WritePartInfo(dir string, p Part, info *Info) error {
	if p.Whole() {
		return errors.New("cache: WritePartInfo: the zero Part; use WriteInfo")
	}
	if err := p.Validate(); err != nil {
		return err
	}
	in := *info
	in.Version, in.Part, in.Parts = InfoVersion, p.String(), 0
	return writeInfoFile(dir, p.PartInfoName(), &in, false)
}

// assembleParts sums the part files of the dataset converted in parts whose dataset.json
// is info into info.
func assembleParts(dir string, info *Info) error {
	info.Shards = []ShardManifest{}
	info.Stored, info.Bad, info.Complete, info.Stopped, info.Unfinished = 0, 0, true, "", nil
	// One look at the directory finds the part records there: a dataset of many parts,
	// most not yet run, costs no failed open for each of the others.
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	present := map[string]bool{}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "dataset.part-") {
			present[e.Name()] = true
		}
	}
	var why []string
	for i := range info.Parts {
		p := Part{Index: i, Count: info.Parts}
		err := error(fs.ErrNotExist)
		var pi *Info
		if name := p.PartInfoName(); present[name] {
			pi, err = readInfoFile(dir, name)
		}
		if errors.Is(err, fs.ErrNotExist) {
			if len(why) < maxReasons {
				what := "has not run, or was killed before it recorded anything (no " + p.PartInfoName() + ")"
				if holder, running := converting(dir, p.lockName()); running {
					what = "is still running (" + holder + ")"
				}
				why = append(why, fmt.Sprintf("part %s %s", p, what))
			}
			info.Unfinished = append(info.Unfinished, p.String())
			continue
		}
		if err != nil {
			return err
		}
		if pi.Part != p.String() || pi.Spec != info.Spec || pi.Codec != info.Codec {
			return fmt.Errorf("cache: %s: part %q, spec %q, codec %s, but %s says part %s, spec %q, codec %s",
				filepath.Join(dir, p.PartInfoName()), pi.Part, pi.Spec, pi.Codec, InfoName, p, info.Spec, info.Codec)
		}
		info.Stored += pi.Stored
		info.Bad += pi.Bad
		info.Shards = append(info.Shards, pi.Shards...)
		if pi.Updated.After(info.Updated) {
			info.Updated = pi.Updated
		}
		if !pi.Complete {
			if len(why) < maxReasons {
				what := "did not finish (it was killed, or could not record why)"
				switch holder, running := converting(dir, p.lockName()); {
				case running:
					what = "is still running (" + holder + ")"
				case pi.Stopped != "":
					what = pi.Stopped
				}
				why = append(why, fmt.Sprintf("part %s %s", p, what))
			}
			info.Unfinished = append(info.Unfinished, p.String())
		}
	}
	if len(info.Unfinished) > 0 {
		info.Complete = false
		info.Stopped = fmt.Sprintf("in %d parts has %d unfinished: %s", info.Parts, len(info.Unfinished), strings.Join(why, "; "))
		if n := len(info.Unfinished) - len(why); n > 0 {
			info.Stopped += fmt.Sprintf("; and %d more", n)
		}
	}
	return nil
}

// maxReasons bounds how many unfinished parts an assembled Info's Stopped explains one
// by one: a dataset of many parts, most not yet run, would otherwise carry a message
// as long as its parts are many.
const maxReasons = 8

// LockPart takes part p's conversion lock, as LockConversion takes the whole
// directory's: parts lock separately, so that they run at once, and a part started twice
// fails at once with an error wrapping ErrLocked that names the holder.
func (c *Cache) LockPart(p Part) (release func(), err error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return c.lockConversion(p.lockName())
}

// partLocks lists the part conversion locks in dir.
func partLocks(dir string) []string {
	names, _ := filepath.Glob(filepath.Join(dir, "convert.part-*.lock"))
	for i, n := range names {
		names[i] = filepath.Base(n)
	}
	return names
}
