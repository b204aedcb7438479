package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"log"
	"strings"
)

// Options configures Open. A nil *Options means the defaults.
type Options struct {
	// Codec stores new records; records already written keep theirs. Default S2.
	Codec Codec
	// Quality is the JPEG codec's quality, 1 to 100; default 90.
	Quality int
	// MaxBytes bounds the directory's size (shards and their indexes), as far as this
	// process knows it (see Refresh). Admission and eviction: a record is admitted while
	// it fits; when it does not, whole shards written for other specs are deleted, oldest
	// first; when none is left, no more records are admitted and those already stored stay.
	// A training epoch visits every sample once in random order, and for that pattern
	// keeping what is stored (hit rate MaxBytes/dataset size) beats LRU or FIFO
	// replacement, which would evict each record before its next use. Default 0: no bound.
	MaxBytes int64
	// ShardBytes is the size at which a writer starts a new shard; default 1 GiB.
	ShardBytes int64
	// ShardPrefix begins the name of every shard (and index) this Cache creates, and
	// Manifest lists only shards whose names begin with it, so that processes writing
	// disjoint parts of one converted dataset into one directory can each record their
	// own shards (see Part). Letters, digits, '-', '_' and '.' only. Default "": names
	// are a timestamp and a random number, and Manifest lists every shard.
	ShardPrefix string
	// ReadOnly opens an existing cache without creating or writing anything; default false.
	ReadOnly bool
	// Remote, for a ReadOnly cache holding a converted dataset whose shard files are kept
	// elsewhere (object storage, read through objstore's shard cache), opens those shard
	// files by name (NAME.shard); the files it returns must implement io.ReaderAt. Then
	// CheckDataset lists a shard the dataset recorded whose index is in the directory
	// but whose shard file is not from its index, as readable, and each read of one of
	// its records opens the shard file in Remote, reads the record and closes it (so a
	// bounded shard cache may evict it between reads). The first read of a shard checks
	// its header against the dataset's record. Default nil: a recorded shard missing from
	// the directory is a Problem (KindMissing) whose records cannot be read.
	Remote fs.FS
	// RemoteMap, with Remote, maps each shard file there when one of its records is
	// first read and holds it open until Close: its records are then read as a local
	// shard's, from the mapping without a copy, each payload summed by its first read
	// only. The shard cache cannot evict a held file, so set it only when every shard
	// fits the cache at once. Default false: every read opens the file, copies the
	// record and sums it.
	RemoteMap bool
	// Logf receives notices such as writes being disabled; default log.Printf.
	Logf func(format string, args ...any)
}

// EnsureDefaults fills zero fields of o with their defaults and returns o; a nil o is
// replaced by a new Options. Open calls it on its copy of the options, then Validate.
func (o *Options) EnsureDefaults() *Options {
	if o == nil {
		o = &Options{}
	}
	if o.Codec == "" {
		o.Codec = S2
	}
	if o.Quality == 0 {
		o.Quality = 90
	}
	if o.ShardBytes == 0 {
		o.ShardBytes = 1 << 30
	}
	if o.Logf == nil {
		o.Logf = log.Printf
	}
	return o
}

// Validate reports every invalid field of o, joined (errors.Join), each naming its
// field; nil means o is usable. Call EnsureDefaults first, so that unset fields are not
// reported.
func (o *Options) Validate() error {
	var errs []error
	if _, err := ParseCodec(string(o.Codec)); err != nil {
		errs = append(errs, err)
	}
	if o.Quality < 1 || o.Quality > 100 {
		errs = append(errs, fmt.Errorf("cache: Quality %d not in [1, 100]", o.Quality))
	}
	if o.Remote != nil && !o.ReadOnly {
		errs = append(errs, errors.New("cache: Remote shards are read-only: set ReadOnly"))
	}
	if o.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("cache: MaxBytes %d must be ≥ 0", o.MaxBytes))
	}
	if o.ShardBytes < 1<<16 {
		errs = append(errs, fmt.Errorf("cache: ShardBytes %d must be ≥ 64 KiB", o.ShardBytes))
	}
	if i := strings.IndexFunc(o.ShardPrefix, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '_' || r == '.')
	}); i >= 0 || len(o.ShardPrefix) > 64 {
		errs = append(errs, fmt.Errorf("cache: ShardPrefix %q: want at most 64 letters, digits, '-', '_' or '.'", o.ShardPrefix))
	}
	return errors.Join(errs...)
}

// String prints the effective options.
func (o *Options) String() string {
	s := fmt.Sprintf("codec=%s quality=%d max_bytes=%d shard_bytes=%d read_only=%t", o.Codec, o.Quality, o.MaxBytes, o.ShardBytes, o.ReadOnly)
	if o.ShardPrefix != "" {
		s += " shard_prefix=" + o.ShardPrefix
	}
	return s
}
