package cache

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// InfoName is the file, in a cache directory, that describes a converted dataset.
const InfoName = "dataset.json"

// InfoVersion is the newest version of dataset.json this package reads and writes.
// Version 2 added the manifest (Shards) and Stopped; version 3 added datasets converted
// in parts (Parts, Part and the part files, see Part). Only a dataset converted in parts
// is written as version 3; one converted in one process is still written as
// WholeInfoVersion, so that a conveyor that predates parts reads it, and refuses one in
// parts saying it was written by a newer conveyor. ReadInfo reads version 1 files (no
// "version" field) too, whose Manifested is false.
const InfoVersion = 3

// WholeInfoVersion is the version of the Info of a dataset converted in one process.
const WholeInfoVersion = 2

// Info describes a dataset converted into a cache directory (conveyor convert): the
// spec its records were stored under, the class names their labels index, whether the
// conversion finished, and what it left in the directory (Shards), so that damage or
// loss is found rather than silently training on less.
type Info struct {
	Version       int       `json:"version"` // 2 or 3 when written (see InfoVersion); 0 in version 1 files
	FormatVersion int       `json:"format_version"`
	Spec          string    `json:"spec"`
	Codec         Codec     `json:"codec"`
	Source        string    `json:"source"`            // the directory it was converted from
	Classes       []string  `json:"classes,omitempty"` // index = label
	Samples       int       `json:"samples"`           // source files listed
	Stored        int       `json:"stored"`            // records stored for them
	Bad           int       `json:"bad"`               // files that failed to decode
	Complete      bool      `json:"complete"`          // every listed file was visited
	Stopped       string    `json:"stopped,omitempty"` // why the last run ended early
	Updated       time.Time `json:"updated"`
	// Shards is the manifest: every shard holding records of Spec when the last run
	// ended, with its size, record count and the checksums of its header and index.
	// It is nil while a conversion runs (and in version 1 files).
	Shards []ShardManifest `json:"shards"`
	// Parts, in the dataset.json of a dataset converted in parts (version 3), is their
	// number; each part records its Stored, Bad, Complete, Stopped and Shards in its own
	// part file, and ReadInfo sums them into the Info it returns. 0 otherwise.
	Parts int `json:"parts,omitempty"`
	// Listing, in the dataset.json of a dataset converted in parts, is ListingHash of
	// the whole source's paths: parts that list the same number of files in the same
	// classes but not the same files (a tree changed between the parts' starts) are
	// refused. "" in datasets written before it, which are not checked.
	Listing string `json:"listing,omitempty"`
	// Part, in a part file, is the part it describes, "i/N"; "" otherwise.
	Part string `json:"part,omitempty"`
	// Unfinished, in an Info ReadInfo assembled from parts, lists the parts that have not
	// completed ("i/N"), in order. It is not stored.
	Unfinished []string `json:"-"`
}

// Manifested reports whether info records the dataset's shards, so that CheckDataset
// and VerifyDataset can tell a lost or damaged shard from one never written.
func (info *Info) Manifested() bool {
	return info != nil && info.Version >= 2 && info.Shards != nil
}

// WriteInfo replaces dir's Info atomically; a conversion in one process sets its Version
// to WholeInfoVersion. A dataset converted in parts writes its dataset.json with
// CreatePartedInfo and each part its part file with WritePartInfo instead.
func WriteInfo(dir string, info *Info) error {
	if info.Parts != 0 || info.Part != "" {
		return fmt.Errorf("cache: %s: WriteInfo writes the Info of a dataset converted in one process; one in parts is written with CreatePartedInfo and WritePartInfo", filepath.Join(dir, InfoName))
	}
	return writeInfoFile(dir, InfoName, info, false)
}

// writeInfoFile writes info as dir/name atomically: replacing it, or, with exclusive,
// only if there is none (the error then wraps fs.ErrExist).
func writeInfoFile(dir, name string, info *Info, exclusive bool) error {
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, name+".tmp*")
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	_, err = tmp.Write(append(b, '\n'))
	if err == nil {
		err = tmp.Chmod(0o644) // CreateTemp makes it private; a dataset is shared
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	switch {
	case err == nil && exclusive:
		// A hard link fails when the name exists, so of processes racing to create it,
		// one wins and the others read what it wrote. A file system without hard links
		// (some FUSE mounts) gets a rename when the name is free: a race is then lost
		// silently, but the contents differ only if the racers disagree.
		final := filepath.Join(dir, name)
		if err = os.Link(tmp.Name(), final); err != nil && !errors.Is(err, fs.ErrExist) {
			if _, serr := os.Stat(final); serr == nil {
				err = fmt.Errorf("%w: %s", fs.ErrExist, final)
			} else {
				err = os.Rename(tmp.Name(), final)
			}
		}
		os.Remove(tmp.Name())
	case err == nil:
		err = os.Rename(tmp.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("cache: writing %s: %w", filepath.Join(dir, name), err)
	}
	return nil
}

// ReadInfo reads dir's Info; the error wraps fs.ErrNotExist when dir holds none. For a
// dataset converted in parts it reads every part file too and returns their sum: the
// records stored and bad, the manifest of every finished part's shards, complete only
// when every part is, and otherwise Stopped saying which parts are unfinished and why
// (listed in Unfinished).
func ReadInfo(dir string) (*Info, error) {
	info, err := readInfoFile(dir, InfoName)
	if err != nil {
		return nil, err
	}
	if info.Parts > 0 {
		if err := assembleParts(dir, info); err != nil {
			return nil, err
		}
	}
	return info, nil
}

// MaxInfoBytes is the most bytes a dataset.json or a part record may hold; a larger
// one is refused, unread, as damaged or not written by conveyor. The bulk of the file is
// the manifest, about 250 bytes of JSON a shard: 64 MiB holds a quarter of a million
// shards (a quarter of a petabyte in shards of the default 1 GiB), and tens of thousands
// of class names besides. A dataset that large is converted in parts, each recording its
// own shards in its own file. The limit bounds what opening a dataset reads, from disk or
// from object storage, before it can check anything.
const MaxInfoBytes = 64 << 20

// ReadInfoFile reads and checks one dataset.json or part record, path, without reading
// the part records a dataset.json names (ReadInfo does): for a caller that fetches those
// first. The error wraps fs.ErrNotExist when there is no file.
func ReadInfoFile(path string) (*Info, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	defer f.Close()
	// Read one byte past the limit, so that a file growing as it is read is refused too.
	b, err := io.ReadAll(io.LimitReader(f, MaxInfoBytes+1))
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	if len(b) > MaxInfoBytes {
		return nil, fmt.Errorf("cache: %s: more than %d bytes (cache.MaxInfoBytes), which no conversion writes: the file is damaged or not conveyor's; convert the dataset again (a very large one in parts, --part i/N)", path, MaxInfoBytes)
	}
	return parseInfo(path, b)
}

// readInfoFile reads and checks the Info in dir/name.
func readInfoFile(dir, name string) (*Info, error) {
	return ReadInfoFile(filepath.Join(dir, name))
}

// parseInfo parses and checks the Info in b, read from path (which errors name). Every
// count and size is checked against what the format can hold before anything acts on it:
// the number of parts against what a conversion can be split into, each shard's records
// and index against its size, each shard's name against the directory's flat layout.
func parseInfo(path string, b []byte) (*Info, error) {
	var info Info
	if err := json.Unmarshal(b, &info); err != nil {
		return nil, fmt.Errorf("cache: %s: %w", path, err)
	}
	if info.Version > InfoVersion {
		return nil, fmt.Errorf("cache: %s: version %d, written by a newer conveyor (this one reads up to %d)", path, info.Version, InfoVersion)
	}
	if info.FormatVersion != FormatVersion {
		return nil, fmt.Errorf("cache: %s: %w", path, versionError("dataset", info.FormatVersion))
	}
	if info.Spec == "" {
		return nil, errors.New("cache: " + path + ": no spec")
	}
	damaged := "the file is damaged or not conveyor's; convert the dataset again"
	switch {
	case info.Parts < 0 || info.Parts > 0 && info.Version < 3:
		return nil, fmt.Errorf("cache: %s: version %d with %d parts", path, info.Version, info.Parts)
	case info.Parts > maxParts:
		return nil, fmt.Errorf("cache: %s: %d parts, more than the %d a conversion can be split into (conveyor convert --part i/N, N ≤ %d): %s", path, info.Parts, maxParts, maxParts, damaged)
	case info.Samples < 0 || info.Stored < 0 || info.Bad < 0:
		return nil, fmt.Errorf("cache: %s: %d samples, %d stored, %d bad: counts cannot be negative; %s", path, info.Samples, info.Stored, info.Bad, damaged)
	}
	for i := range info.Shards {
		if err := info.Shards[i].check(); err != nil {
			return nil, fmt.Errorf("cache: %s: shard %d of the manifest: %w; %s", path, i, err, damaged)
		}
	}
	return &info, nil
}

// maxShardBytes bounds a recorded shard's size: a conversion starts a new shard at
// Options.ShardBytes (1 GiB by default), so a shard of a tebibyte is a damaged record,
// and the bound keeps sums of shard sizes far from overflowing.
const maxShardBytes = 1 << 40

// check reports a manifest entry that no shard could have: a name that is not a shard
// file in the dataset's directory, or more records, or a larger index, than its size
// can hold. A record takes at least its fixed header; an index entry is a record's
// header and idxFixed bytes, so an index holds at most the shard's bytes plus idxFixed
// a record, and a torn entry a writer was killed in.
func (m *ShardManifest) check() error {
	base, ok := strings.CutSuffix(m.Name, shardExt)
	switch {
	case !ok || base == "" || strings.ContainsAny(m.Name, "/\\\x00") || strings.HasPrefix(m.Name, "."):
		return fmt.Errorf("name %q is not a shard file (NAME.shard) of the dataset's directory", m.Name)
	case m.Bytes < 0 || m.Bytes > maxShardBytes:
		return fmt.Errorf("%s: %d bytes, outside 0 to %d", m.Name, m.Bytes, int64(maxShardBytes))
	case m.Records < 0 || int64(m.Records) > m.Bytes/recordFixed:
		return fmt.Errorf("%s: %d records, more than its %d bytes can hold (each takes at least %d)", m.Name, m.Records, m.Bytes, recordFixed)
	case m.IndexBytes < 0 || m.IndexBytes > maxIndexBytes(m.Bytes, m.Records):
		return fmt.Errorf("%s: an index of %d bytes, more than the %d an index of %d records in %d bytes can hold", m.Name, m.IndexBytes, maxIndexBytes(m.Bytes, m.Records), m.Records, m.Bytes)
	case m.CRC32C != "" && !isHex8(m.CRC32C):
		return fmt.Errorf("%s: crc32c %q is not 8 hex digits", m.Name, m.CRC32C)
	}
	return nil
}

func isHex8(s string) bool {
	_, err := hex.DecodeString(s)
	return len(s) == 8 && err == nil
}

// maxIndexBytes is the largest index a shard of size bytes holding records records can
// have (see ShardManifest.check).
func maxIndexBytes(size int64, records int) int64 {
	return size + int64(records+1)*idxFixed + recordFixed + maxPath
}
