package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/pack"
)

// maxConvertFileBytes bounds ConvertOptions.MaxFileBytes.
const maxConvertFileBytes = 1 << 40

// ConvertOptions configures Convert. A nil *ConvertOptions means the defaults.
type ConvertOptions struct {
	// Decode is the spec samples are stored under, usually a resize-first policy such as
	// shorter side 256; default decode's defaults (full size).
	Decode decode.Options
	// Workers is the number of files decoded at once, at most 4096; default GOMAXPROCS.
	Workers int
	// MaxFileBytes bounds a source file's size; larger files are bad. At most 1 TiB;
	// default 1 GiB.
	MaxFileBytes int64
	// Source names the converted directory in the dataset's Info; default "".
	Source string
	// Part, when set, converts only that part of src: the samples cache.Part.Range
	// gives, one contiguous range of the listing, so that Part.Count processes, each
	// given its own Part.Index, convert src into one directory together, with no lock
	// shared between them and no merge step (see cache.Part). The cache must be opened
	// with Options.ShardPrefix set to Part.ShardPrefix(). The dataset opens once every
	// part has completed, and holds the samples a conversion in one process would, in
	// the same order. Default the zero Part: all of src.
	Part cache.Part
	// Progress, when set, is called about ten times a second and once at the end, from
	// one goroutine at a time.
	Progress func(ConvertReport)
	// Logf receives one line per bad file; default log.Printf.
	Logf func(format string, args ...any)
}

// ConvertReport counts a conversion's files: so far while it runs (ConvertOptions.Progress),
// all of them when Convert returns.
type ConvertReport struct {
	Total    int           // files listed
	Done     int           // files visited: stored, skipped or bad
	Stored   int           // decoded and stored now
	Skipped  int           // already stored by an earlier run, unchanged since and intact
	Repaired int           // stored before but damaged, so decoded and stored again
	Bad      int           // files that could not be read or decoded
	Bytes    int64         // source bytes read
	Elapsed  time.Duration // since Convert started
	Spec     string        // the spec records are stored under
	BadFiles []SampleError // every bad file, in index order (in the last report)
}

// EnsureDefaults fills o's zero fields with their defaults and returns o; a nil o
// becomes a new ConvertOptions holding the defaults. Convert calls it on its copy of the
// options, then Validate.
func (o *ConvertOptions) EnsureDefaults() *ConvertOptions {
	if o == nil {
		o = &ConvertOptions{}
	}
	o.Decode.EnsureDefaults()
	if o.Workers == 0 {
		o.Workers = min(runtime.GOMAXPROCS(0), maxWorkers)
	}
	if o.MaxFileBytes == 0 {
		o.MaxFileBytes = 1 << 30
	}
	if o.Logf == nil {
		o.Logf = log.Printf
	}
	return o
}

// Validate reports every invalid field of o, defaults filled (see EnsureDefaults),
// joined into one error (errors.Join), each naming its field; nil when o is usable.
func (o *ConvertOptions) Validate() error {
	var errs []error
	if err := o.Decode.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.Workers < 1 || o.Workers > maxWorkers {
		errs = append(errs, fmt.Errorf("Workers %d not in [1, %d]", o.Workers, maxWorkers))
	}
	// The loader's memory budget holds five files of MaxFileBytes: 1 TiB each at most
	// keeps it within Config's bound.
	if o.MaxFileBytes < 1 || o.MaxFileBytes > maxConvertFileBytes {
		errs = append(errs, fmt.Errorf("MaxFileBytes %d not in [1, %d] (1 TiB)", o.MaxFileBytes, int64(maxConvertFileBytes)))
	}
	if err := o.Part.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("Part: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pipeline: convert: %w", err)
	}
	return nil
}

// Spec is the spec Convert stores records under with these options' Decode (the decoder
// it resolves included): what a converted dataset's record says it holds, for a caller
// to check a stored conversion against before converting.
func (opts *ConvertOptions) Spec() (string, error) {
	var o decode.Options
	if opts != nil {
		o = opts.Decode
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return "", fmt.Errorf("pipeline: %w", err)
	}
	dec, err := decode.NewDecoder(&o)
	if err != nil {
		return "", fmt.Errorf("pipeline: %w", err)
	}
	defer dec.Close()
	return specOf(o, dec.Backend()), nil
}

// Convert decodes every sample of src under opts.Decode and stores it in c, which must
// be writable: the offline form of a Loader's cache, read back with OpenConverted. It
// runs the loader's own stages — files read in index order by the read stage, decoded by
// opts.Workers workers, each sample stored where a training loader would augment and
// pack it — so conversion and training share one worker pool, one memory budget and one
// bad-sample path. Files c already holds unchanged and intact are skipped (a rerun
// resumes, and repairs records whose checksum fails), and every bad file is recorded in
// the report instead of stopping. It stops with an error when ctx is done or c stops
// accepting records (full, or a write failed); what was stored stays, and the dataset's
// Info says whether it is complete and, if not, why.
//
// The dataset's Info (dataset.json) is written incomplete when the run starts and, when
// it ends, with the manifest of the shards holding its records (cache.Info.Shards), which
// OpenConverted and conveyor verify check the directory against. OpenConverted refuses a
// dataset whose conversion did not complete, or is still running, unless asked not to.
//
// One conversion writes a directory at a time: Convert holds its conversion lock for the
// whole run (cache.Cache.LockConversion), and a second one into the same directory, from
// this process or another, fails at once with an error wrapping cache.ErrLocked that
// names the holder, rather than waiting or storing every sample a second time. With
// opts.Part set, Convert converts that part alone, under the part's own lock, and
// records it in the part's own file (cache.WritePartInfo) after creating or checking
// the dataset.json the parts share (cache.CreatePartedInfo); see cache.Part.
func Convert(ctx context.Context, src Source, c *cache.Cache, opts *ConvertOptions) (*ConvertReport, error) {
	var o ConvertOptions
	if opts != nil {
		o = *opts
	}
	if err := o.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	if err := convertible(src, c, &o); err != nil {
		return nil, err
	}
	whole := src
	src, lo, err := partOfSource(src, o.Part)
	if err != nil {
		return nil, err
	}
	release, err := lockConversion(c, o.Part)
	if err != nil {
		return nil, err
	}
	defer release()
	start := time.Now()
	cv := &converting{maxFileBytes: o.MaxFileBytes, bad: map[int]SampleError{}}
	ld, err := convertLoader(src, c, &o, cv)
	if err != nil {
		return nil, err
	}
	defer ld.Close()
	info, writeInfo, err := startInfo(c, whole, src, &o, ld.spec)
	if err != nil {
		return nil, err
	}

	progress := func(done int) ConvertReport {
		st := ld.Stats()
		return ConvertReport{
			Spec:  ld.spec,
			Total: src.Len(), Done: done, Stored: int(st.Cache.Stored), Skipped: int(cv.skipped.Load()),
			Repaired: int(cv.repaired.Load()), Bad: int(st.Bad.Samples), Bytes: cv.fileBytes.Load(), Elapsed: time.Since(start),
		}
	}
	done, stopErr := runConversion(ctx, ld, o.Progress, progress)
	if why := c.Stats().Disabled; why != "" && stopErr != nil && strings.HasSuffix(stopErr.Error(), cache.ErrDisabled.Error()) {
		stopErr = fmt.Errorf("%w (%s)", stopErr, why) // say why writing stopped: a full disk, say
	}
	rep := progress(done)
	for _, i := range slices.Sorted(maps.Keys(cv.bad)) {
		e := cv.bad[i]
		e.Index += lo // the index in src, not in the part
		rep.BadFiles = append(rep.BadFiles, e)
	}
	stopErr = finishInfo(c, ld.spec, src, o.Part, info, writeInfo, rep.Bad, stopErr)
	if o.Progress != nil {
		o.Progress(rep)
	}
	if stopErr != nil {
		return &rep, fmt.Errorf("pipeline: convert stopped after %d of %d files: %w", rep.Done, rep.Total, stopErr)
	}
	return &rep, nil
}

// convertible checks that src can be converted into c with o: its samples are image
// files with one label each, and c was opened for o.Part.
func convertible(src Source, c *cache.Cache, o *ConvertOptions) error {
	if want := o.Part.ShardPrefix(); c.Options().ShardPrefix != want {
		return fmt.Errorf("pipeline: convert: Part %v needs a cache opened with ShardPrefix %q, not %q (cache.Part.ShardPrefix)", o.Part, want, c.Options().ShardPrefix)
	}
	if err := checkKind(src); err != nil {
		return fmt.Errorf("pipeline: convert: %w", err)
	}
	if _, ok := src.(FileSource); !ok {
		return fmt.Errorf("pipeline: convert: %v holds stored pixels, not image files", src)
	}
	if isMultiLabel(src) {
		// A record holds one label: converting would keep each sample's smallest one.
		return fmt.Errorf("pipeline: convert: %v is multi-label, and a converted dataset stores one label per sample; train from the manifest", src)
	}
	if ps, ok := src.(PixelSource); ok {
		// A view over a converted dataset is a FileSource too; its stored samples have no
		// files to convert.
		for i := range src.Len() {
			if _, _, stored := ps.Stored(i); stored {
				return fmt.Errorf("pipeline: convert: sample %d (%q) of %v is stored pixels, not an image file; convert the image files it came from", i, src.Path(i), src)
			}
		}
	}
	if src.Len() == 0 {
		return errors.New("pipeline: convert: empty source")
	}
	return nil
}

// partOfSource is the samples of whole that part converts (whole itself for the whole
// Part), and the index in whole of the first of them.
func partOfSource(whole Source, part cache.Part) (Source, int, error) {
	lo, hi := part.Range(whole.Len())
	if part.Whole() {
		return whole, lo, nil
	}
	if part.Count > whole.Len() {
		return nil, 0, fmt.Errorf("pipeline: convert: part %v: %v holds %d samples, fewer than %d parts; convert in at most %d parts", part, whole, whole.Len(), part.Count, whole.Len())
	}
	return partOf{FileSource: whole.(FileSource), lo: lo, n: hi - lo}, lo, nil
}

// lockConversion takes c's conversion lock, or with a Part that part's own, and returns
// its release.
func lockConversion(c *cache.Cache, part cache.Part) (func(), error) {
	lock := c.LockConversion
	if !part.Whole() {
		lock = func() (func(), error) { return c.LockPart(part) }
	}
	release, err := lock()
	if err != nil {
		return nil, fmt.Errorf("pipeline: convert: %w; wait for that conversion to end, or stop it (a later run resumes where it stopped)", err)
	}
	return release, nil
}

// convertLoader is the loader that runs a conversion of src into c: sequential, decoding
// in full and storing every sample, replacing none.
func convertLoader(src Source, c *cache.Cache, o *ConvertOptions, cv *converting) (*Loader, error) {
	// Samples are stored, never packed: the batches only pace the stages and carry no
	// pixels, so they are one byte a sample. Reads are budgeted for MaxFileBytes files.
	cfg := &Config{
		Batch:  BatchConfig{Size: 64},
		Order:  OrderConfig{Sequential: true},
		Tuning: TuningConfig{Workers: o.Workers, MemoryBudget: 5*(o.MaxFileBytes+1) + max(640*mib, 64*mib+int64(o.Workers)*64*mib)},
		Decode: o.Decode, FullDecode: true,
		Pack:        pack.Options{Width: 1, Height: 1, DType: pack.Uint8},
		SampleCache: c, SampleCacheFill: 1, Bad: BadConfig{MaxFraction: -1}, StopAfter: DecodeStage, Logf: o.Logf,
	}
	if o.Decode.Exact {
		cfg.Fidelity = Exact // stores Pillow's pixels
	}
	ld, err := build(src, cfg, cv)
	if err != nil {
		return nil, fmt.Errorf("pipeline: convert: %w", err)
	}
	return ld, nil
}

// startInfo writes the dataset's Info as the run starts, incomplete: dataset.json, or
// with a Part, the dataset.json the parts share (created or checked) and the part's own
// file. It returns the Info, of src (the part converted), and what writes it again.
func startInfo(c *cache.Cache, whole, src Source, o *ConvertOptions, spec string) (*cache.Info, func() error, error) {
	info := &cache.Info{Version: cache.WholeInfoVersion, FormatVersion: cache.FormatVersion, Spec: spec, Codec: c.Options().Codec, Source: o.Source, Samples: src.Len(), Classes: src.Classes()}
	writeInfo := func() error { return cache.WriteInfo(c.Dir(), info) }
	if o.Part.Whole() {
		if old, err := cache.ReadInfo(c.Dir()); err == nil && old.Parts > 0 {
			return nil, nil, fmt.Errorf("pipeline: convert: %s holds a dataset converted in %d parts; convert with Part set (conveyor convert --part i/%d) to resume it, or into an empty directory", c.Dir(), old.Parts, old.Parts)
		} else if err == nil && (old.Spec != info.Spec || old.Codec != info.Codec) {
			o.Logf("pipeline: convert: %s held a dataset of spec %q, codec %s; converting again as %q, codec %s",
				c.Dir(), old.Spec, old.Codec, info.Spec, info.Codec)
		}
	} else {
		// dataset.json names the parts and the whole listing; each part's own file
		// records what it stored.
		all := *info
		all.Samples, all.Parts, all.Updated = whole.Len(), o.Part.Count, time.Now().UTC()
		all.Listing = cache.ListingHash(whole.Len(), whole.Path)
		if err := cache.CreatePartedInfo(c.Dir(), &all); err != nil {
			return nil, nil, fmt.Errorf("pipeline: convert: part %v: %w", o.Part, err)
		}
		writeInfo = func() error { return cache.WritePartInfo(c.Dir(), o.Part, info) }
	}
	info.Updated = time.Now().UTC()
	if err := writeInfo(); err != nil {
		return nil, nil, err
	}
	return info, writeInfo, nil
}

// runConversion iterates ld's epoch, the conversion, reporting progress about ten times
// a second, and returns the cursor it reached and the error that stopped it.
func runConversion(ctx context.Context, ld *Loader, report func(ConvertReport), progress func(done int) ConvertReport) (done int, stopErr error) {
	var last time.Time
	for b, err := range ld.Epoch(ctx, 0) {
		if err != nil {
			stopErr = err
			break
		}
		done = b.Cursor
		b.Release()
		if report != nil && time.Since(last) >= 100*time.Millisecond {
			last = time.Now()
			report(progress(done))
		}
	}
	return done, stopErr
}

// finishInfo writes the dataset's Info as the run ends: the manifest of the shards
// holding its records, how many of src's samples are stored, how many were bad, and
// whether it completed or why it stopped. It returns the error that stopped the run, or
// the first that finishing met.
func finishInfo(c *cache.Cache, spec string, src Source, part cache.Part, info *cache.Info, writeInfo func() error, bad int, stopErr error) error {
	// The manifest records what this run leaves, complete or not, so that a dataset opened
	// with AllowIncomplete is checked too.
	if m, err := c.Manifest(spec); err != nil {
		stopErr = cmp.Or(stopErr, err)
	} else {
		info.Shards = m
	}
	info.Complete = stopErr == nil
	if info.Stored = len(c.Records(spec)); !part.Whole() {
		info.Stored = storedIn(c.Records(spec), src) // the other parts' records are theirs
	}
	if stopErr != nil {
		info.Stopped = fmt.Sprintf("stopped with %d of %d files stored: %v", info.Stored, info.Samples, stopErr)
	}
	info.Bad = bad
	info.Updated = time.Now().UTC()
	if err := writeInfo(); err != nil && stopErr == nil {
		stopErr = err
	}
	return stopErr
}

// partOf is samples [lo, lo+n) of a FileSource: the part of it one conversion stores.
type partOf struct {
	FileSource
	lo, n int
}

func (p partOf) Len() int                    { return p.n }
func (p partOf) Label(i int) int             { return p.FileSource.Label(p.lo + i) }
func (p partOf) Path(i int) string           { return p.FileSource.Path(p.lo + i) }
func (p partOf) Open(i int) (fs.File, error) { return p.FileSource.Open(p.lo + i) }
func (p partOf) String() string              { return fmt.Sprintf("%v[%d:%d]", p.FileSource, p.lo, p.lo+p.n) }

// storedIn counts the records of refs, sorted by path, whose paths are samples of src:
// a part's, where refs also hold the other parts' records.
func storedIn(refs []cache.Ref, src Source) int {
	n := 0
	for i := range src.Len() {
		if _, ok := slices.BinarySearchFunc(refs, src.Path(i), func(r cache.Ref, p string) int { return strings.Compare(r.Path, p) }); ok {
			n++
		}
	}
	return n
}

// converting is a Loader's state when it runs Convert: every decoded sample is stored
// (and a refusal to store ends the run), a sample the cache holds intact is counted as
// skipped instead of decoded, and a bad file is recorded instead of replaced.
type converting struct {
	maxFileBytes                 int64
	skipped, repaired, fileBytes atomic.Int64

	mu  sync.Mutex
	bad map[int]SampleError // by index
}

func (cv *converting) addBad(e *SampleError) {
	cv.mu.Lock()
	cv.bad[e.Index] = *e
	cv.mu.Unlock()
}
