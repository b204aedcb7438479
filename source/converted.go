package source

import (
	"errors"
	"fmt"
	"io/fs"
	"log"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/objstore"
)

// ErrIncomplete reports a converted dataset that OpenConverted cannot vouch for: its
// conversion did not finish (or is still running), it records no manifest to check it
// against, or it lost samples. ConvertedOptions.AllowIncomplete opens it anyway.
var ErrIncomplete = errors.New("not known to be complete")

// Converted is a dataset that Convert (conveyor convert) stored in a cache directory: a
// PixelSource. Its samples are pixels already resized first, so a Loader over it reads and
// unpacks records instead of decoding files, and its Config.Decode is not used.
type Converted struct {
	cache    *cache.Cache
	info     *cache.Info
	refs     []cache.Ref
	problems []cache.Problem
	classes  []string
	// A dataset in object storage: its shards' prefetches, in the order the loader
	// reads them (the planner knows the shard cache's byte limit). A local dataset
	// plans nothing.
	planned
}

// ConvertedOptions configures OpenConverted. A nil pointer means the defaults.
type ConvertedOptions struct {
	// AllowIncomplete opens a dataset that is not known to be complete, to train on the
	// samples it holds: one whose conversion failed, was interrupted or is still running;
	// one converted by a conveyor that recorded no manifest (dataset.json version 1); one
	// that lost samples with a shard and its index. Default false: OpenConverted refuses
	// such a dataset with an error wrapping ErrIncomplete that says why and what to do.
	AllowIncomplete bool
	// Logf receives what opening found: each damaged or missing shard, and what
	// AllowIncomplete let through. Default log.Printf.
	Logf func(format string, args ...any)
	// PrefetchShards is, for a dataset in object storage (Open), how many shards
	// are fetched ahead of need beyond those the loader's order reads at once (see
	// WebDatasetOptions.PrefetchShards). Default 2: a converted shard is large (up to
	// 1 GiB). Not used by a local dataset.
	PrefetchShards int

	shards *objstore.ShardCache // where the shard files are, when not in the directory
}

func (o *ConvertedOptions) clone() *ConvertedOptions {
	if o == nil {
		return &ConvertedOptions{}
	}
	c := *o
	return &c
}

// EnsureDefaults fills o's zero fields with their defaults and returns o; a nil o
// becomes a new ConvertedOptions holding the defaults.
func (o *ConvertedOptions) EnsureDefaults() *ConvertedOptions {
	if o == nil {
		o = &ConvertedOptions{}
	}
	if o.Logf == nil {
		o.Logf = log.Printf
	}
	if o.PrefetchShards == 0 {
		o.PrefetchShards = 2
	}
	return o
}

// Validate reports every invalid field of o, defaults filled (see EnsureDefaults),
// joined into one error; nil when all are valid.
func (o *ConvertedOptions) Validate() error {
	if o.PrefetchShards < 0 {
		return fmt.Errorf("source: ConvertedOptions.PrefetchShards %d is negative", o.PrefetchShards)
	}
	return nil
}

// OpenConverted opens the converted dataset in dir, read-only. Its samples are the
// records stored under the dataset's spec, one per source path, in path order. opts nil
// means the defaults.
//
// It checks the directory against the manifest the conversion recorded (cache.Info,
// cache.Cache.CheckDataset), reading shard headers and indexes but no record, and logs
// every difference naming the shard. A shard whose header is damaged, whose file is gone
// or that was cut short keeps its samples, listed from its index: reading them fails, so
// a Loader counts them as bad samples (Config.Bad.MaxFraction applies) and logs each with
// its shard. A dataset whose samples cannot all be listed, like one whose conversion did
// not complete, is refused unless opts.AllowIncomplete. conveyor verify reads every record.
func OpenConverted(dir string, opts *ConvertedOptions) (*Converted, error) {
	o := opts.clone().EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	info, err := cache.ReadInfo(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("source: %s is not a converted dataset (no %s): %w", dir, cache.InfoName, err)
		}
		return nil, fmt.Errorf("source: %w", err)
	}
	co := &cache.Options{ReadOnly: true, Codec: info.Codec, Logf: o.Logf}
	if o.shards != nil {
		co.Remote = o.shards
		// When every shard fits the shard cache at once, the shards read are held there
		// and mapped, and read at local speed; otherwise each read copies its record, so
		// that the cache can evict shards the order is done with.
		var total int64
		for _, m := range info.Shards {
			total += m.Bytes
		}
		co.RemoteMap = info.Manifested() && total <= o.shards.Options().MaxBytes
	}
	c, err := cache.Open(dir, co)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	problems := c.CheckDataset(info)
	for _, p := range problems {
		o.Logf("source: %s: %s %s: %v", dir, p.Kind, filepath.Base(p.File()), p.Err)
	}
	refs := c.Records(info.Spec)
	if why := incomplete(dir, info, len(refs), problems); why != "" {
		if !o.AllowIncomplete {
			c.Close()
			return nil, fmt.Errorf("source: %s: %w: %s", dir, ErrIncomplete, why)
		}
		o.Logf("source: %s is incomplete: %s; training on the %d samples it holds, as AllowIncomplete asks", dir, firstClause(why), len(refs))
	}
	if len(refs) == 0 {
		c.Close()
		return nil, fmt.Errorf("source: %s holds no samples for its spec %q", dir, info.Spec)
	}
	if n := len(info.Classes); n > 0 {
		for _, r := range refs {
			if int(r.Label) >= n || r.Label < 0 {
				c.Close()
				return nil, fmt.Errorf("source: %s: label %d of %s outside its %d classes", dir, r.Label, r.Path, n)
			}
		}
	}
	classes := info.Classes
	if len(classes) == 0 {
		// Recorded without class names (a source that had none): the labels' indices,
		// as a manifest of integer labels names them.
		top := 0
		for _, r := range refs {
			if r.Label < 0 || r.Label > maxLabel {
				c.Close()
				return nil, fmt.Errorf("source: %s: label %d of %s is not an integer in [0, %d], which a dataset without class names (%s records none) numbers its classes by; the record is damaged, or the dataset not conveyor's: convert it again", dir, r.Label, r.Path, maxLabel, cache.InfoName)
			}
			top = max(top, int(r.Label))
		}
		classes = make([]string, top+1)
		for i := range classes {
			classes[i] = strconv.Itoa(i)
		}
	}
	conv := &Converted{cache: c, info: info, refs: refs, problems: problems, classes: classes}
	if o.shards != nil {
		conv.plan(o.shards, o.PrefetchShards, o.Logf)
	}
	return conv, nil
}

// plan sets up the prefetches of a dataset whose shards are in object storage.
func (s *Converted) plan(shards *objstore.ShardCache, ahead int, logf func(string, ...any)) {
	at := map[string]int32{}
	var names []string
	var sizes []int64
	for _, m := range s.info.Shards {
		at[m.Name] = int32(len(names))
		names, sizes = append(names, m.Name), append(sizes, m.Bytes)
	}
	of := make([]int32, len(s.refs))
	for i, r := range s.refs {
		k, ok := at[r.Shard()]
		if !ok { // listed from a shard the manifest lacks: cannot be in object storage
			k = int32(len(names))
			at[r.Shard()] = k
			names, sizes = append(names, r.Shard()), append(sizes, 0)
		}
		of[i] = k
	}
	s.planner = newScatteredPlanner(shards, names, of, ahead)
	s.planner.bound(shards, sizes, logf, s.cache.Dir())
}

// incomplete says why the dataset in dir is not known to be complete, and what to do;
// "" when it is.
func incomplete(dir string, info *cache.Info, listed int, problems []cache.Problem) string {
	convert := "conveyor convert SRC " + dir
	if info.Source != "" {
		convert = "conveyor convert " + info.Source + " " + dir
	}
	allow := fmt.Sprintf("or set ConvertedOptions.AllowIncomplete (conveyor bench --allow-incomplete) to train on the %d samples stored", listed)
	switch {
	case !info.Complete && info.Parts > 0:
		var runs []string
		for _, p := range info.Unfinished[:min(len(info.Unfinished), maxRuns)] {
			runs = append(runs, fmt.Sprintf("--part %s", p))
		}
		if n := len(info.Unfinished) - maxRuns; n > 0 {
			runs = append(runs, fmt.Sprintf("and the %d other unfinished parts", n))
		}
		return fmt.Sprintf("its conversion %s; run %s with %s to finish them (each resumes where it stopped, and the dataset opens once every part has finished), %s",
			info.Stopped, convert, strings.Join(runs, ", "), allow)
	case !info.Complete:
		if holder, running := cache.Converting(dir); running {
			return fmt.Sprintf("its conversion is still running (%s); wait for it to finish, %s so far", holder, allow)
		}
		what := "its conversion did not finish (it was killed, or could not record why: a full disk?)"
		if info.Stopped != "" {
			what = "its conversion " + info.Stopped
		}
		return fmt.Sprintf("%s; run %s again to finish it (it resumes where it stopped), %s", what, convert, allow)
	case !info.Manifested():
		return fmt.Sprintf("its %s was written by an older conveyor (version 1) and records no manifest to check its shards against; run %s again, which keeps every stored record and records one, %s",
			cache.InfoName, convert, allow)
	case listed < info.Stored:
		var shards []string
		for _, p := range problems {
			if p.Kind != cache.KindRecord && p.Kind != cache.KindIndex {
				shards = append(shards, fmt.Sprintf("%s %s", p.Kind, filepath.Base(p.Shard)))
			}
		}
		what := strings.Join(shards, ", ")
		if len(shards) == 0 {
			// Every recorded shard looks as recorded, yet holds fewer records than
			// dataset.json counts: the count is what is wrong, or the records are.
			what = fmt.Sprintf("no shard is missing or damaged, but %s counts %d stored and its shards hold %d", cache.InfoName, info.Stored, listed)
		}
		return fmt.Sprintf("%d of its %d samples are lost (%s); conveyor verify %s lists the damage and %s again stores them again, %s",
			info.Stored-listed, info.Stored, what, dir, convert, allow)
	}
	return ""
}

// maxRuns bounds the unfinished parts incomplete names one by one.
const maxRuns = 8

// firstClause is why up to its first semicolon: the reason without the advice.
func firstClause(why string) string {
	before, _, _ := strings.Cut(why, ";")
	return before
}

// Len is the number of samples.
func (s *Converted) Len() int { return len(s.refs) }

// Label is sample i's class label.
func (s *Converted) Label(i int) int { return int(s.refs[i].Label) }

// Path is sample i's source path, relative to the directory it was converted from.
func (s *Converted) Path(i int) string { return s.refs[i].Path }

// Stored returns the record holding sample i's pixels.
func (s *Converted) Stored(i int) (*cache.Cache, cache.Ref, bool) {
	s.opening(i)
	return s.cache, s.refs[i], true
}

// Classes returns the class names, index = label: those the conversion recorded, or the
// labels' indices as text ("0" to the largest) when it recorded none.
func (s *Converted) Classes() []string { return s.classes }

// Info describes the dataset.
func (s *Converted) Info() cache.Info { return *s.info }

// Ref is sample i's record.
func (s *Converted) Ref(i int) cache.Ref { return s.refs[i] }

// Problems lists the differences between the directory and its manifest found when it
// was opened: damaged, missing or truncated shards and damaged indexes (see
// cache.Cache.CheckDataset). Records are not read; conveyor verify reads them.
func (s *Converted) Problems() []cache.Problem { return s.problems }

// Cache is the underlying cache, opened read-only.
func (s *Converted) Cache() *cache.Cache { return s.cache }

// Close closes the dataset's files. Close the Loaders using it first.
func (s *Converted) Close() error { return s.cache.Close() }

// String names the dataset: "converted:DIR (N samples)".
func (s *Converted) String() string {
	return fmt.Sprintf("converted:%s (%d samples)", s.cache.Dir(), len(s.refs))
}
