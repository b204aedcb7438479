package source

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conveyor-ml/conveyor/internal/files"
	"github.com/conveyor-ml/conveyor/objstore"
	"github.com/conveyor-ml/conveyor/pipeline"
	"golang.org/x/sync/errgroup"
)

// WebDatasetOptions configures WebDataset. A nil pointer means the defaults.
type WebDatasetOptions struct {
	// Classes names the labels: a .cls integer or a .json integer label is an index into
	// it, a .json string label one of its names. Default nil: the class names found in
	// .json string labels, sorted and numbered from 0; or, when the labels are integers,
	// "0" to the largest.
	Classes []string
	// Concurrency is how many shards are indexed at once. Default 8.
	Concurrency int
	// MaxMetadataBytes is the largest member other than the image that is kept in memory
	// as metadata (and the largest .cls or .json read for a label). A larger member is
	// left out of Metadata (logged once per shard); a larger .cls or .json makes its
	// sample bad. Default 64 KiB.
	MaxMetadataBytes int
	// ShardSamples, when set, makes indexing lazy: ShardSamples[k] is how many samples
	// shard k holds (a count recorded earlier: ShardEnds of a full index, or the
	// "nsamples" of a WebDataset wids index), WebDataset returns without reading a shard,
	// and each shard is indexed when a sample of it is first asked for, so the first batch
	// waits for its own shards only. It needs Classes; the source is then single-label
	// (a .json label list of other than one label is a bad sample) and keeps only the
	// metadata MetadataKeys names. A shard holding fewer samples than its count has the
	// rest as bad samples; extra samples are left out (both logged). Default nil: every
	// shard is indexed before WebDataset returns.
	ShardSamples []int
	// ShardBytes, with ShardSamples, is each shard's size in bytes (a ShardIndex's
	// "filesize"; 0: unknown): the prefetcher keeps its window of shards within the shard
	// cache's room, as it does for shards indexed up front, whose sizes indexing reads.
	// Default nil: sizes unknown until each shard is fetched.
	ShardBytes []int64
	// MetadataKeys are the member extensions kept as metadata, and what MetadataKeys
	// reports: each costs its bytes of memory for every sample that has one (a LAION
	// .json is about 1 KB), so name only those used. Default nil: every member other
	// than the image is kept (.cls and .json included), and MetadataKeys lists the
	// extensions found; a lazy source (ShardSamples) keeps none.
	MetadataKeys []string
	// Logf receives what indexing found: damaged shards and members left out. Default
	// log.Printf.
	Logf func(format string, args ...any)
	// PrefetchShards is how many shards are asked for ahead of need, when the file system
	// prefetches (objstore's shard cache; see EpochPlanner): past the furthest shard
	// opened so far in the epoch's order, the window reaches this many shards beyond
	// the most the order reads at once (with ShardOrder, ShuffleBlock/shard length+1),
	// so the next shuffle block's shards are fetched while the current one is read. The
	// cache's byte limit should hold the window plus the shards being read. Default 4.
	PrefetchShards int
}

// keeps reports whether members with extension ext are kept as metadata.
func (o *WebDatasetOptions) keeps(ext string) bool {
	if o.MetadataKeys == nil {
		return o.ShardSamples == nil
	}
	return slices.Contains(o.MetadataKeys, ext)
}

// clone copies o (nil: the zero options), its slices too.
func (o *WebDatasetOptions) clone() *WebDatasetOptions {
	var c WebDatasetOptions
	if o != nil {
		c = *o
	}
	c.Classes = slices.Clone(c.Classes)
	c.ShardSamples = slices.Clone(c.ShardSamples)
	c.ShardBytes = slices.Clone(c.ShardBytes)
	c.MetadataKeys = slices.Clone(c.MetadataKeys)
	return &c
}

// EnsureDefaults fills o's zero fields with their defaults and returns o; a nil o
// becomes a new WebDatasetOptions holding the defaults.
func (o *WebDatasetOptions) EnsureDefaults() *WebDatasetOptions {
	if o == nil {
		o = &WebDatasetOptions{}
	}
	if o.Concurrency == 0 {
		o.Concurrency = 8
	}
	if o.MaxMetadataBytes == 0 {
		o.MaxMetadataBytes = 64 << 10
	}
	if o.PrefetchShards == 0 {
		o.PrefetchShards = 4
	}
	if o.Logf == nil {
		o.Logf = log.Printf
	}
	return o
}

// Validate reports every invalid field of o, defaults filled (see EnsureDefaults),
// joined into one error; nil when all are valid. What depends on the shards (one
// ShardSamples count per shard) is checked by WebDataset.
func (o *WebDatasetOptions) Validate() error {
	var errs []error
	if o.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("source: WebDatasetOptions.Concurrency %d is negative", o.Concurrency))
	}
	if o.PrefetchShards < 0 {
		errs = append(errs, fmt.Errorf("source: WebDatasetOptions.PrefetchShards %d is negative", o.PrefetchShards))
	}
	if o.MaxMetadataBytes < 0 {
		errs = append(errs, fmt.Errorf("source: WebDatasetOptions.MaxMetadataBytes %d is negative", o.MaxMetadataBytes))
	}
	if o.ShardBytes != nil && len(o.ShardBytes) != len(o.ShardSamples) {
		errs = append(errs, fmt.Errorf("source: WebDatasetOptions.ShardBytes has %d sizes for %d ShardSamples", len(o.ShardBytes), len(o.ShardSamples)))
	}
	for k, b := range o.ShardBytes {
		if b < 0 {
			errs = append(errs, fmt.Errorf("source: WebDatasetOptions.ShardBytes[%d] is %d", k, b))
			break
		}
	}
	seen := map[string]bool{}
	for _, n := range o.Classes {
		if seen[n] {
			errs = append(errs, fmt.Errorf("source: WebDatasetOptions.Classes names %q twice", n))
			break
		}
		seen[n] = true
	}
	return errors.Join(errs...)
}

// String prints the effective options.
func (o WebDatasetOptions) String() string {
	lazy := "no"
	if o.ShardSamples != nil {
		lazy = fmt.Sprintf("%d shards", len(o.ShardSamples))
	}
	return fmt.Sprintf("WebDatasetOptions{Classes: %d, Concurrency: %d, MaxMetadataBytes: %d, lazy: %s, MetadataKeys: %q, PrefetchShards: %d}", len(o.Classes), o.Concurrency, o.MaxMetadataBytes, lazy, o.MetadataKeys, o.PrefetchShards)
}

// wdsImageExts are the extensions of a sample's image member, as WebDataset's decoders
// take them; the first member of a sample with one of them is its image.
var wdsImageExts = []string{"jpg", "jpeg", "png", "webp"}

// WebDatasetSource is a dataset of WebDataset tar shards: a FileSource, ShardedSource,
// MultiLabelSource and MetadataSource. Make one with WebDataset.
type WebDatasetSource struct {
	fsys     fs.FS
	shards   []string
	ends     []int // ShardEnds
	parts    []wdsPart
	classes  []string
	classID  map[string]int
	multi    bool // some sample has other than one label
	labelled bool // samples have label members: one without is bad
	keys     []string
	o        WebDatasetOptions
	desc     string
	planned          // when fsys prefetches
	bytes    []int64 // each shard's size when known (indexed up front, or ShardBytes)
}

// wdsPart is one shard's index, made once: at construction, or on first use when
// WebDatasetOptions.ShardSamples makes the source lazy. A lazy shard keeps only a
// permanent failure (not a tar file, malformed headers); after an I/O error the next
// access tries again, so one network blip does not spoil the shard for the whole run.
type wdsPart struct {
	mu      sync.Mutex    // one indexing attempt at a time
	tries   atomic.Uint64 // attempts that failed with an I/O error
	p       atomic.Pointer[wdsPacked]
	lastErr *wdsPacked // the last attempt's transient failure, for those who waited on it; under mu
}

// wdsPacked is one shard's samples, labels numbered.
type wdsPacked struct {
	index            // paths ("shard/key") and first labels
	mod    time.Time // the shard's modification time, for cache keys
	off    []int64   // the image member's data offset in the shard
	size   []int64   // and its size
	imgExt []uint8   // index into wdsImageExts
	bad    map[int32]string
	multi  labelTable // multi-label sources only; empty: one label each
	meta   metaTable
}

// WebDataset indexes the WebDataset tar shards named by shards inside fsys (in that
// order) and returns them as a source. fsys may be os.DirFS, or a file system whose Open
// fetches a remote shard into a local cache; an opened shard is read at the offsets the
// index recorded, with ReadAt or Seek when the file has them.
//
// The layout is WebDataset's: a sample is the consecutive regular members whose names
// share a key, the name up to the first dot of its base name ("a/b.seg.png" has key
// "a/b" and extension "seg.png"; extensions are lower-cased; top-level "__name__"
// members and names without a dot are skipped). The image is the sample's first member
// with extension jpg, jpeg, png or webp. Its label comes from .cls (integer text) or,
// when there is no .cls, from .json's "label" (an integer, a class name, or a list of
// either, which makes the source multi-label; see WebDatasetOptions.Classes). Every
// other member, .cls and .json included, is metadata under its extension (see
// WebDatasetOptions.MetadataKeys). A dataset without a single label member has label 0
// for every sample and one class, "0".
//
// Indexing reads every tar header once, Concurrency shards at a time, and the members
// other than images (to find labels and keep metadata), skipping image data; no image
// is decoded. By default it indexes every shard before it returns (about 12 µs a sample
// of three members from a local disk), so the first batch waits for the whole index and
// a dataset in object storage is fetched whole once. With WebDatasetOptions.ShardSamples
// (counts recorded earlier) it returns at once and indexes each shard when one of its
// samples is first opened, in the loader's reader that opens it; Split, which reads every
// label, indexes them all.
//
// Bad data is a bad sample under the loader's policy, never a crash nor a failed index:
// a sample without an image, a .cls or .json that does not parse, a label out of range,
// a member repeated within a sample, a key repeating an earlier sample of its shard, and
// the sample a damaged or truncated tar cuts short (its earlier samples are kept). Only a
// shard whose first header cannot be read (not a tar file, missing, unreadable) fails
// WebDataset, with an error naming the shard.
func WebDataset(fsys fs.FS, shards []string, opts *WebDatasetOptions) (*WebDatasetSource, error) {
	// An fs.FS takes no context; Open, which fetches remote shards, passes its own.
	return webDataset(context.Background(), fsys, shards, opts)
}

// webDataset is WebDataset, giving up when ctx ends while it waits for a shard to open
// (a remote one fetched by objstore's shard cache).
func webDataset(ctx context.Context, fsys fs.FS, shards []string, opts *WebDatasetOptions) (*WebDatasetSource, error) {
	o := opts.clone().EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if fsys == nil {
		return nil, errors.New("source: webdataset: nil file system")
	}
	if len(shards) == 0 {
		return nil, errors.New("source: webdataset: no shards")
	}
	if o.ShardSamples != nil {
		return lazy(fsys, shards, o)
	}
	parts, err := indexAll(ctx, fsys, shards, o)
	if err != nil {
		return nil, err
	}
	return assemble(fsys, shards, parts, o)
}

// indexAll indexes shards, o.Concurrency at a time, until ctx ends. Every shard's error
// is returned, in shard order; when ctx ends, one shard's error says so.
func indexAll(ctx context.Context, fsys fs.FS, shards []string, o *WebDatasetOptions) ([]*wdsShard, error) {
	parts := make([]*wdsShard, len(shards))
	errs := make([]error, len(shards))
	var g errgroup.Group
	g.SetLimit(o.Concurrency) // at least 1: EnsureDefaults and Validate
	for k := range shards {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			parts[k], errs[k] = indexShard(ctx, fsys, shards[k], o)
			return nil // reported below, every shard's, in order
		})
	}
	g.Wait()
	if err := ctx.Err(); err != nil {
		// One shard's error says it (naming the shard); every other one says the same.
		for _, e := range errs {
			if errors.Is(e, err) {
				return nil, e
			}
		}
		return nil, fmt.Errorf("source: webdataset: indexing %d shards: %w", len(shards), err)
	}
	return parts, errors.Join(errs...)
}

// WebDatasetGlob is WebDatasetFiles over the local shards that pattern (filepath.Match
// syntax, e.g. "/data/train-*.tar") names, in sorted order.
func WebDatasetGlob(pattern string, opts *WebDatasetOptions) (*WebDatasetSource, error) {
	names, err := filepath.Glob(pattern)
	if err != nil {
		return nil, fmt.Errorf("source: webdataset: pattern %q: %w", pattern, err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("source: webdataset: no shards match %q", pattern)
	}
	slices.Sort(names)
	s, err := WebDatasetFiles(names, opts)
	if err != nil {
		return nil, err
	}
	s.desc = "webdataset:" + pattern
	return s, nil
}

// WebDatasetFiles is WebDataset over shards in the local file system, named by their
// paths, in the order given. Shard names (in Path and errors) are the base names when
// every shard is in one folder, else absolute paths.
func WebDatasetFiles(paths []string, opts *WebDatasetOptions) (*WebDatasetSource, error) {
	if len(paths) == 0 {
		return nil, errors.New("source: webdataset: no shards")
	}
	dir := filepath.Dir(paths[0])
	rel := make([]string, len(paths))
	for k, p := range paths {
		if filepath.Dir(p) != dir {
			dir = ""
			break
		}
		rel[k] = filepath.ToSlash(filepath.Base(p))
	}
	if dir == "" {
		dir = "/"
		for k, p := range paths {
			a, err := filepath.Abs(p)
			if err != nil {
				return nil, fmt.Errorf("source: webdataset: %s: %w", p, err)
			}
			rel[k] = strings.TrimPrefix(filepath.ToSlash(a), "/")
		}
	}
	s, err := WebDataset(os.DirFS(dir), rel, opts)
	if err != nil {
		return nil, err
	}
	s.desc = fmt.Sprintf("webdataset:%s (%d shards)", paths[0], len(paths))
	return s, nil
}

// wdsShard is one shard's samples as indexing found them, before labels are numbered.
type wdsShard struct {
	mod     time.Time
	bytes   int64 // the shard file's size
	keys    []string
	off     []int64
	size    []int64
	imgExt  []uint8
	bad     map[int]string
	labels  [][]wdsLabel // nil entry: no label member
	meta    [][]wdsMeta
	names   map[string]bool // class names used
	hasInt  bool            // some label is an integer
	where   [2]string       // a member with a name label and one with an integer label, for errors
	dropped int             // metadata members over MaxMetadataBytes
}

type wdsLabel struct {
	name string // a class name; "" for an integer
	n    int
}

type wdsMeta struct {
	key  string
	data []byte
}

// wdsSample is the sample indexShard is collecting.
type wdsSample struct {
	key    string
	exts   []string
	img    int // index into wdsImageExts, -1: none yet
	off    int64
	size   int64
	bad    string
	cls    []wdsLabel
	hasCls bool
	json   []wdsLabel
	multi  bool
	meta   []wdsMeta
}

// posReader counts the position in the shard, which tar.Reader does not expose: after
// Next returns a header, it is the member's data offset (tar reads headers in whole
// blocks and buffers nothing ahead).
type posReader struct {
	r   io.Reader
	pos int64
	err error // the last read error other than io.EOF: the file failed, not the format
}

func (p *posReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.pos += int64(n)
	if err != nil && err != io.EOF {
		p.err = err
	}
	return n, err
}

// seekPosReader lets tar skip image data with Seek when the shard file can.
type seekPosReader struct {
	posReader
	s io.Seeker
}

func (p *seekPosReader) Seek(off int64, whence int) (int64, error) {
	n, err := p.s.Seek(off, whence)
	if err == nil {
		p.pos = n
	}
	return n, err
}

// contextOpener is a file system whose Open may wait and can be given up: objstore's
// shard cache, which fetches a remote shard before it opens.
type contextOpener interface {
	OpenContext(ctx context.Context, name string) (*objstore.File, error)
}

// openContext opens name in fsys, giving up when ctx ends if fsys can wait.
func openContext(ctx context.Context, fsys fs.FS, name string) (fs.File, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if co, ok := fsys.(contextOpener); ok {
		f, err := co.OpenContext(ctx, name)
		if err != nil {
			return nil, err // not a nil *objstore.File in a non-nil fs.File
		}
		return f, nil
	}
	return fsys.Open(name)
}

// indexShard reads shard name's headers and small members.
func indexShard(ctx context.Context, fsys fs.FS, name string, o *WebDatasetOptions) (*wdsShard, error) {
	f, err := openContext(ctx, fsys, name)
	if err != nil {
		return nil, ioFailure(name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, ioFailure(name, err)
	}
	if err := files.Regular(fi); err != nil {
		return nil, fmt.Errorf("source: webdataset shard %s: %w", name, err)
	}
	total := fi.Size()
	if total == 0 {
		return nil, fmt.Errorf("source: webdataset shard %s: empty file, not a tar file", name)
	}
	pr := &posReader{r: f}
	var r io.Reader = pr
	if s, ok := f.(io.Seeker); ok {
		sr := &seekPosReader{posReader: posReader{r: f}, s: s}
		pr, r = &sr.posReader, sr
	}
	tr := tar.NewReader(r)
	sh := &wdsShard{mod: fi.ModTime(), bytes: total, bad: map[int]string{}, names: map[string]bool{}}
	seen := map[string]bool{}
	var cur *wdsSample
	flush := func() {
		if cur == nil {
			return
		}
		sh.add(cur, o)
		cur = nil
	}
	members, last := 0, ""
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if pr.err != nil && errors.Is(err, pr.err) {
				// The file failed to read, not the tar format: keeping the samples
				// before it would drop the rest of the shard for good.
				return nil, ioFailure(name, err)
			}
			if members == 0 {
				return nil, fmt.Errorf("source: webdataset shard %s: not a readable tar file: %w", name, err)
			}
			why := fmt.Sprintf("shard damaged after member %s: %v", last, err)
			o.Logf("source: webdataset shard %s: damaged after member %s (%v); keeping the %d samples before it", name, last, err, len(sh.keys))
			if cur != nil {
				cur.bad = why
			}
			break
		}
		members++
		last = h.Name
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if !strings.Contains(h.Name, "/") && strings.HasPrefix(h.Name, "__") && strings.HasSuffix(h.Name, "__") {
			continue
		}
		key, ext, ok := basePlusExt(h.Name)
		if !ok {
			continue
		}
		ext = strings.ToLower(ext)
		if cur == nil || key != cur.key {
			flush()
			cur = &wdsSample{key: key, img: -1}
			if seen[key] {
				cur.bad = "its key repeats an earlier sample of the shard"
			}
			seen[key] = true
		}
		off, size := pr.pos, h.Size
		if size < 0 || size > total-off { // not off+size > total: a hostile size overflows it
			cur.bad = fmt.Sprintf("member %s runs past the end of the shard (%d bytes)", h.Name, total)
			continue
		}
		if sparse(h) {
			// Its data in the shard is a sparse map and fragments, not the file: the
			// offset and size would read the wrong bytes.
			cur.setBad("member %s is a sparse file, which webdataset shards do not use", h.Name)
			continue
		}
		if slices.Contains(cur.exts, ext) {
			cur.setBad("member %s repeats extension %q in the sample", h.Name, ext)
			continue
		}
		cur.exts = append(cur.exts, ext)
		if i := slices.Index(wdsImageExts, ext); i >= 0 && cur.img < 0 {
			cur.img, cur.off, cur.size = i, off, size
			continue
		}
		label := ext == "cls" || ext == "json"
		if !label && !o.keeps(ext) {
			continue
		}
		if size > int64(o.MaxMetadataBytes) {
			if label {
				cur.setBad("label member %s has %d bytes, more than MaxMetadataBytes %d", h.Name, size, o.MaxMetadataBytes)
			} else {
				sh.dropped++
			}
			continue
		}
		data := make([]byte, size)
		if _, err := io.ReadFull(tr, data); err != nil {
			cur.setBad("member %s: %v", h.Name, err)
			continue
		}
		if o.keeps(ext) {
			cur.meta = append(cur.meta, wdsMeta{ext, data})
		}
		switch ext {
		case "cls":
			cur.hasCls = true
			n, err := strconv.Atoi(string(bytes.TrimSpace(data)))
			if err != nil || n < 0 || n > maxLabel {
				cur.setBad("member %s: label %q is not an integer in [0, %d]", h.Name, abbrevBytes(data), maxLabel)
				continue
			}
			cur.cls = []wdsLabel{{n: n}}
		case "json":
			ls, multi, err := jsonLabel(data)
			if err != nil {
				cur.setBad("member %s: %v", h.Name, err)
				continue
			}
			cur.json, cur.multi = ls, multi
		}
		for _, l := range cur.labels() {
			if l.name != "" {
				sh.names[l.name] = true
				sh.where[0] = h.Name
			} else {
				sh.hasInt = true
				sh.where[1] = h.Name
			}
		}
	}
	flush()
	if pr.err != nil {
		// A member's data failed to read (its sample is marked bad): the file, not
		// the shard, is at fault.
		return nil, ioFailure(name, pr.err)
	}
	if sh.dropped > 0 {
		o.Logf("source: webdataset shard %s: %d members over MaxMetadataBytes %d left out of the metadata", name, sh.dropped, o.MaxMetadataBytes)
	}
	return sh, nil
}

// sparse says whether h is a GNU sparse file in PAX form (a 'S' header is not
// TypeReg and is skipped).
func sparse(h *tar.Header) bool {
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

func (c *wdsSample) setBad(format string, args ...any) {
	if c.bad == "" {
		c.bad = fmt.Sprintf(format, args...)
	}
}

// labels are the sample's labels: .cls's, else .json's; nil when it has neither.
func (c *wdsSample) labels() []wdsLabel {
	if c.hasCls {
		return c.cls
	}
	return c.json
}

// add appends the finished sample c.
func (sh *wdsShard) add(c *wdsSample, o *WebDatasetOptions) {
	i := len(sh.keys)
	if c.img < 0 && c.bad == "" {
		have := slices.Sorted(slices.Values(c.exts))
		c.bad = fmt.Sprintf("no image member (.jpg, .jpeg, .png or .webp) among its members (.%s)", strings.Join(have, " ."))
	}
	if c.bad != "" {
		sh.bad[i] = c.bad
	}
	sh.keys = append(sh.keys, c.key)
	sh.off = append(sh.off, c.off)
	sh.size = append(sh.size, c.size)
	sh.imgExt = append(sh.imgExt, uint8(max(c.img, 0)))
	var ls []wdsLabel
	if c.hasCls || c.json != nil || c.multi {
		ls = c.labels()
		if ls == nil {
			ls = []wdsLabel{} // an empty list: labelled, with no label
		}
	}
	sh.labels = append(sh.labels, ls)
	sh.meta = append(sh.meta, c.meta)
}

// jsonLabel reads "label" of a .json member: an integer, a class name or a list of
// either (multi is then true). No "label", or null, is no label.
func jsonLabel(data []byte) (ls []wdsLabel, multi bool, err error) {
	var doc struct {
		Label json.RawMessage `json:"label"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, false, fmt.Errorf("not a JSON object: %v", err)
	}
	raw := bytes.TrimSpace(doc.Label)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, false, nil
	}
	one := func(r json.RawMessage) (wdsLabel, error) {
		var s string
		if json.Unmarshal(r, &s) == nil {
			if s == "" {
				return wdsLabel{}, errors.New(`empty class name in "label"`)
			}
			return wdsLabel{name: s}, nil
		}
		var n int
		if err := json.Unmarshal(r, &n); err != nil || n < 0 || n > maxLabel {
			return wdsLabel{}, fmt.Errorf(`"label" %s is neither an integer in [0, %d] nor a class name`, abbrevBytes(r), maxLabel)
		}
		return wdsLabel{n: n}, nil
	}
	if raw[0] == '[' {
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, false, fmt.Errorf(`"label": %v`, err)
		}
		ls = []wdsLabel{}
		for _, r := range list {
			l, err := one(r)
			if err != nil {
				return nil, false, err
			}
			ls = append(ls, l)
		}
		return ls, true, nil
	}
	l, err := one(raw)
	if err != nil {
		return nil, false, err
	}
	return []wdsLabel{l}, false, nil
}

// abbrevBytes quotes at most 40 bytes of b.
func abbrevBytes(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}

// basePlusExt splits a member name as WebDataset's base_plus_ext: the key is the name up
// to the first dot of its base name, the extension what follows; ok is false without one.
func basePlusExt(name string) (key, ext string, ok bool) {
	dir, base := "", name
	if k := strings.LastIndexByte(name, '/'); k >= 0 {
		dir, base = name[:k+1], name[k+1:]
	}
	k := strings.IndexByte(base, '.')
	if k <= 0 {
		return "", "", false
	}
	return dir + base[:k], base[k+1:], true
}

// assemble numbers the labels across shards and packs each shard's samples.
func assemble(fsys fs.FS, shards []string, parts []*wdsShard, o *WebDatasetOptions) (*WebDatasetSource, error) {
	s := &WebDatasetSource{fsys: fsys, shards: slices.Clone(shards), o: *o, parts: make([]wdsPart, len(shards)),
		desc: fmt.Sprintf("webdataset(%d shards)", len(shards))}
	names := map[string]bool{}
	hasInt := false
	var nameAt, intAt string
	n := 0
	seenKey := map[string]bool{}
	for k, p := range parts {
		for nm := range p.names {
			names[nm] = true
		}
		if len(p.names) > 0 && nameAt == "" {
			nameAt = shards[k] + ": " + p.where[0]
		}
		if p.hasInt && intAt == "" {
			intAt = shards[k] + ": " + p.where[1]
			hasInt = true
		}
		for j, ls := range p.labels {
			s.labelled = s.labelled || ls != nil
			s.multi = s.multi || (ls != nil && len(ls) != 1)
			for _, m := range p.meta[j] {
				if !seenKey[m.key] {
					seenKey[m.key] = true
					s.keys = append(s.keys, m.key)
				}
			}
		}
		n += len(p.keys)
		s.ends = append(s.ends, n)
	}
	if n == 0 {
		return nil, fmt.Errorf("source: webdataset: no samples in %d shards (%s…)", len(shards), shards[0])
	}
	if n > 1<<31-1 {
		return nil, fmt.Errorf("source: webdataset: %d samples, more than %d", n, 1<<31-1)
	}
	switch {
	case len(o.Classes) > 0:
		s.classes = o.Classes
	case len(names) > 0 && hasInt:
		return nil, fmt.Errorf("source: webdataset: labels mix class names (%s) and integers (%s); use one kind, or give WebDatasetOptions.Classes", nameAt, intAt)
	case len(names) > 0:
		s.classes = slices.Sorted(maps.Keys(names))
	default:
		top := 0
		for _, p := range parts {
			for _, ls := range p.labels {
				for _, l := range ls {
					top = max(top, l.n)
				}
			}
		}
		s.classes = make([]string, top+1)
		for i := range s.classes {
			s.classes[i] = strconv.Itoa(i)
		}
	}
	if o.MetadataKeys != nil {
		s.keys = o.MetadataKeys
	}
	s.numberClasses()
	sizes := make([]int64, len(parts))
	for k, p := range parts {
		packed, err := s.pack(k, p, len(p.keys))
		if err != nil {
			return nil, err
		}
		s.parts[k].p.Store(packed)
		sizes[k] = p.bytes
		parts[k] = nil // let the shard's scratch go
	}
	s.bytes = sizes
	s.planner = newShardPlanner(fsys, s.shards, s.ends, s.o.PrefetchShards)
	if s.planner != nil {
		s.planner.bound(fsys, sizes, s.o.Logf, s.desc) // indexing read every shard's size
	}
	return s, nil
}

func (s *WebDatasetSource) numberClasses() {
	s.classID = make(map[string]int, len(s.classes))
	for i, c := range s.classes {
		s.classID[c] = i
	}
}

// lazy makes a source whose shards are indexed on first use: counts says how many
// samples each holds.
func lazy(fsys fs.FS, shards []string, o *WebDatasetOptions) (*WebDatasetSource, error) {
	if len(o.ShardSamples) != len(shards) {
		return nil, fmt.Errorf("source: WebDatasetOptions.ShardSamples has %d counts for %d shards", len(o.ShardSamples), len(shards))
	}
	if len(o.Classes) == 0 {
		return nil, errors.New("source: WebDatasetOptions.ShardSamples (lazy indexing) needs WebDatasetOptions.Classes: the labels cannot be numbered before every shard is read")
	}
	s := &WebDatasetSource{fsys: fsys, shards: slices.Clone(shards), o: *o, parts: make([]wdsPart, len(shards)),
		classes: o.Classes, labelled: true, keys: o.MetadataKeys, desc: fmt.Sprintf("webdataset(%d shards, lazy)", len(shards))}
	n := 0
	for k, c := range o.ShardSamples {
		if c < 0 {
			return nil, fmt.Errorf("source: WebDatasetOptions.ShardSamples[%d] (%s) is %d", k, shards[k], c)
		}
		n += c
		if n > 1<<31-1 {
			return nil, fmt.Errorf("source: WebDatasetOptions.ShardSamples: more than %d samples", 1<<31-1)
		}
		s.ends = append(s.ends, n)
	}
	if n == 0 {
		return nil, errors.New("source: WebDatasetOptions.ShardSamples counts no samples")
	}
	s.numberClasses()
	s.bytes = o.ShardBytes
	s.planner = newShardPlanner(fsys, s.shards, s.ends, s.o.PrefetchShards)
	if s.planner != nil && s.bytes != nil {
		s.planner.bound(fsys, s.bytes, s.o.Logf, s.desc)
	}
	return s, nil
}

// part is shard k's index, made now if the source is lazy and it is not made yet. A
// shard that cannot be indexed has no samples: its samples are bad, saying why. Callers
// that wait while an attempt fails with an I/O error share its failure; later callers
// try again.
func (s *WebDatasetSource) part(k int) *wdsPacked {
	pt := &s.parts[k]
	if p := pt.p.Load(); p != nil {
		return p
	}
	tries := pt.tries.Load()
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if p := pt.p.Load(); p != nil {
		return p
	}
	if pt.tries.Load() != tries && pt.lastErr != nil {
		return pt.lastErr // an attempt failed while we waited
	}
	want := s.o.ShardSamples[k]
	// Source.Open takes no context. A reader waiting here for a remote shard is bounded
	// by the fetch's own limits (Retry.AttemptTimeout, Retry.MinProgressBytes) and freed
	// at once by the shard cache's Close (Dataset.Close).
	raw, err := indexShard(context.Background(), s.fsys, s.shards[k], &s.o)
	var p *wdsPacked
	if err == nil {
		if len(raw.keys) != want {
			s.o.Logf("source: webdataset shard %s holds %d samples, WebDatasetOptions.ShardSamples says %d", s.shards[k], len(raw.keys), want)
		}
		p, err = s.pack(k, raw, want)
	}
	if err != nil {
		p = &wdsPacked{bad: map[int32]string{-1: err.Error()}}
		var te *transientError
		if errors.As(err, &te) {
			s.o.Logf("%v; its %d samples fail until it can be read", err, want)
			// Counted when it ends, so that callers that came during it share it.
			pt.lastErr = p
			pt.tries.Add(1)
			return p
		}
		s.o.Logf("%v; its %d samples are bad", err, want)
	}
	pt.lastErr = nil
	pt.p.Store(p)
	return p
}

// transientError is an I/O error reading a shard (as opposed to what the shard
// holds), worth trying again.
type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// ioFailure wraps err, met opening or reading shard name, as transient unless it says
// the shard is missing or unreadable for good.
func ioFailure(name string, err error) error {
	err = fmt.Errorf("source: webdataset shard %s: %w", name, err)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return err
	}
	return &transientError{err}
}

// pack numbers shard k's labels and packs its first n samples.
func (s *WebDatasetSource) pack(k int, raw *wdsShard, n int) (*wdsPacked, error) {
	sh := s.shards[k]
	p := &wdsPacked{mod: raw.mod, bad: map[int32]string{}}
	n = min(n, len(raw.keys))
	for j, key := range raw.keys[:n] {
		why := raw.bad[j]
		ids, err := labelIDs(raw.labels[j], s.classID, len(s.classes))
		if why == "" && err != nil {
			why = err.Error()
		}
		if why == "" && s.labelled && raw.labels[j] == nil {
			why = "no label member (.cls, or .json with \"label\")"
		}
		if why == "" && !s.multi && len(ids) != 1 && raw.labels[j] != nil {
			why = fmt.Sprintf("%d labels in a single-label source (lazily indexed: WebDatasetOptions.ShardSamples)", len(ids))
		}
		first := 0
		if len(ids) > 0 {
			first = ids[0]
		} else if s.multi {
			first = -1
		}
		if err := p.add(sh+"/"+key, first); err != nil {
			return nil, fmt.Errorf("source: webdataset shard %s: %w", sh, err)
		}
		if why != "" {
			p.bad[int32(j)] = fmt.Sprintf("webdataset shard %s, sample %s: %s", sh, key, why)
		}
		p.off = append(p.off, raw.off[j])
		p.size = append(p.size, raw.size[j])
		p.imgExt = append(p.imgExt, raw.imgExt[j])
		if s.multi {
			for _, id := range ids {
				p.multi.push(int32(id))
			}
			if err := p.multi.end(); err != nil {
				return nil, fmt.Errorf("source: webdataset shard %s: %w", sh, err)
			}
		}
		for _, m := range raw.meta[j] {
			addField(&p.meta, p.meta.key(m.key), m.data)
		}
		if err := p.meta.endSample(j); err != nil {
			return nil, fmt.Errorf("source: webdataset shard %s: %w", sh, err)
		}
	}
	p.trim()
	p.multi.clip()
	p.meta.clip()
	return p, nil
}

// labelIDs numbers a sample's labels, ascending.
func labelIDs(ls []wdsLabel, classID map[string]int, nclasses int) ([]int, error) {
	ids := make([]int, 0, len(ls))
	for _, l := range ls {
		id := l.n
		if l.name != "" {
			var ok bool
			if id, ok = classID[l.name]; !ok {
				return nil, fmt.Errorf("label %q is not among WebDatasetOptions.Classes", l.name)
			}
		} else if id >= nclasses {
			return nil, fmt.Errorf("label %d outside the %d classes of WebDatasetOptions.Classes", id, nclasses)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for k := 1; k < len(ids); k++ {
		if ids[k] == ids[k-1] {
			return nil, fmt.Errorf("label %d repeats", ids[k])
		}
	}
	return ids, nil
}

// Classes returns the class names, index = label.
func (s *WebDatasetSource) Classes() []string { return s.classes }

// String names the source.
func (s *WebDatasetSource) String() string { return s.desc }

// Shards are the shard names, as given.
func (s *WebDatasetSource) Shards() []string { return s.shards }

// ShardEnds says which samples each shard holds: shard k holds [ends[k-1], ends[k]).
func (s *WebDatasetSource) ShardEnds() []int { return s.ends }

// ShuffleBlock is 0: four mean shards make the default block, as for any ShardedSource
// (WebDataset shards are usually written in shuffled order).
func (s *WebDatasetSource) ShuffleBlock() int { return 0 }

// ShardSamples is each shard's sample count, as WebDatasetOptions.ShardSamples takes them
// to index the shards lazily.
func (s *WebDatasetSource) ShardSamples() []int {
	counts := make([]int, len(s.ends))
	prev := 0
	for k, e := range s.ends {
		counts[k], prev = e-prev, e
	}
	return counts
}

// Len is the number of samples.
func (s *WebDatasetSource) Len() int { return s.ends[len(s.ends)-1] }

// Bad is how many samples indexing found bad, in the shards indexed so far (all of them
// unless lazy); the loader counts them when drawn.
func (s *WebDatasetSource) Bad() int {
	n := 0
	for k := range s.parts {
		if p := s.indexed(k); p != nil {
			n += len(p.bad)
			if _, failed := p.bad[-1]; failed {
				n--
			}
			if s.o.ShardSamples != nil {
				n += max(s.o.ShardSamples[k]-p.Len(), 0) // samples the shard lacks
			}
		}
	}
	return n
}

// indexed is shard k's index if it is made, without making it.
func (s *WebDatasetSource) indexed(k int) *wdsPacked { return s.parts[k].p.Load() }

// at maps sample i to its shard's index and its position there; j is -1 when the shard
// holds fewer samples than WebDatasetOptions.ShardSamples said.
func (s *WebDatasetSource) at(i int) (k int, p *wdsPacked, j int) {
	k = sort.SearchInts(s.ends, i+1)
	j = i
	if k > 0 {
		j -= s.ends[k-1]
	}
	p = s.part(k)
	if j >= p.Len() {
		j = -1
	}
	return k, p, j
}

// Label is sample i's first label (-1 when a multi-label sample has none).
func (s *WebDatasetSource) Label(i int) int {
	_, p, j := s.at(i)
	if j < 0 {
		return 0
	}
	return p.Label(j)
}

// Path is "SHARD/KEY".
func (s *WebDatasetSource) Path(i int) string {
	k, p, j := s.at(i)
	if j < 0 {
		return fmt.Sprintf("%s/#%d", s.shards[k], i-s.start(k))
	}
	return p.Path(j)
}

func (s *WebDatasetSource) start(k int) int {
	if k == 0 {
		return 0
	}
	return s.ends[k-1]
}

// MultiLabel reports whether some .json label is a list.
func (s *WebDatasetSource) MultiLabel() bool { return s.multi }

// Labels appends sample i's labels, ascending, to dst.
func (s *WebDatasetSource) Labels(dst []int, i int) []int {
	_, p, j := s.at(i)
	switch {
	case j < 0 && s.multi:
		return dst
	case j < 0:
		return append(dst, 0)
	case p.multi.ends == nil:
		return append(dst, p.Label(j))
	}
	return p.multi.appendTo(dst, j)
}

// MetadataKeys lists the extensions of the members other than images, in order of first
// appearance, or WebDatasetOptions.MetadataKeys when set.
func (s *WebDatasetSource) MetadataKeys() []string { return s.keys }

// Metadata returns the bytes of sample i's member with extension key.
func (s *WebDatasetSource) Metadata(i int, key string) ([]byte, bool) {
	_, p, j := s.at(i)
	if j < 0 {
		return nil, false
	}
	return p.meta.get(j, key)
}

// Open opens sample i's image member: its bytes, read from the shard at the offset the
// index recorded. Its Stat has the member's size and the shard's modification time. A
// sample indexing found bad fails here, saying why.
func (s *WebDatasetSource) Open(i int) (fs.File, error) {
	s.opening(i)
	k, p, j := s.at(i)
	if why := p.bad[-1]; why != "" {
		return nil, errors.New(why)
	}
	if j < 0 {
		return nil, fmt.Errorf("webdataset shard %s holds %d samples, fewer than WebDatasetOptions.ShardSamples[%d] = %d", s.shards[k], p.Len(), k, s.o.ShardSamples[k])
	}
	if why, bad := p.bad[int32(j)]; bad {
		return nil, errors.New(why)
	}
	f, err := s.fsys.Open(s.shards[k])
	if err != nil {
		return nil, fmt.Errorf("webdataset shard %s: %w", s.shards[k], err)
	}
	m := &wdsMember{f: f, name: path.Base(p.Path(j)) + "." + wdsImageExts[p.imgExt[j]], size: p.size[j], mod: p.mod}
	off := p.off[j]
	switch x := f.(type) {
	case io.ReaderAt:
		m.r = io.NewSectionReader(x, off, m.size)
	case io.Seeker:
		if _, err := x.Seek(off, io.SeekStart); err != nil {
			f.Close()
			return nil, fmt.Errorf("webdataset shard %s: %w", s.shards[k], err)
		}
		m.r = io.LimitReader(f, m.size)
	default:
		if _, err := io.CopyN(io.Discard, f, off); err != nil {
			f.Close()
			return nil, fmt.Errorf("webdataset shard %s: reading to offset %d: %w", s.shards[k], off, err)
		}
		m.r = io.LimitReader(f, m.size)
	}
	return m, nil
}

// wdsMember is an image member of an open shard, as a file.
type wdsMember struct {
	f    fs.File
	r    io.Reader
	name string
	size int64
	mod  time.Time
}

func (m *wdsMember) Read(b []byte) (int, error) { return m.r.Read(b) }
func (m *wdsMember) Close() error               { return m.f.Close() }
func (m *wdsMember) Stat() (fs.FileInfo, error) { return m, nil }

// fs.FileInfo of the member.
func (m *wdsMember) Name() string       { return m.name }
func (m *wdsMember) Size() int64        { return m.size }
func (m *wdsMember) Mode() fs.FileMode  { return 0o444 }
func (m *wdsMember) ModTime() time.Time { return m.mod }
func (m *wdsMember) IsDir() bool        { return false }
func (m *wdsMember) Sys() any           { return nil }

// WriteWebDataset writes samples [from, to) of src to w as one WebDataset tar shard, in
// index order: per sample, its image under the key (its path without the extension,
// dots in the base name replaced by '_', as a WebDataset key ends at the first dot), its
// labels (.cls with one label; .json {"label": [...]} for a multi-label source), and its
// metadata, each key an extension. An image that is not a JPEG, PNG or WebP by name, a
// sample that cannot be read and keys that repeat are errors naming the sample. It is
// how tests and benchmarks make shards from an ImageFolder; split a dataset into shards
// by calling it once per range.
func WriteWebDataset(w io.Writer, src pipeline.FileSource, from, to int) error {
	if from < 0 || to > src.Len() || from >= to {
		return fmt.Errorf("source: webdataset: samples [%d, %d) outside the source's %d", from, to, src.Len())
	}
	tw := tar.NewWriter(w)
	put := func(name string, data []byte) error {
		return tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0), Format: tar.FormatPAX})
	}
	meta, _ := src.(pipeline.MetadataSource)
	seen := map[string]bool{}
	var labels []int
	for i := from; i < to; i++ {
		p := src.Path(i)
		ext := strings.ToLower(strings.TrimPrefix(path.Ext(p), "."))
		if !slices.Contains(wdsImageExts, ext) {
			return fmt.Errorf("source: webdataset: %s: not a .jpg, .jpeg, .png or .webp image, which WebDataset readers take", p)
		}
		dir, base := path.Split(strings.TrimSuffix(p, path.Ext(p)))
		key := dir + strings.ReplaceAll(base, ".", "_")
		if seen[key] {
			return fmt.Errorf("source: webdataset: %s: key %s repeats an earlier sample's", p, key)
		}
		seen[key] = true
		f, err := src.Open(i)
		if err != nil {
			return fmt.Errorf("source: webdataset: %s: %w", p, err)
		}
		data, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("source: webdataset: %s: %w", p, err)
		}
		members := []wdsMeta{{ext, data}}
		if isMultiLabel(src) {
			labels = labelsOf(src, labels[:0], i)
			js, _ := json.Marshal(map[string][]int{"label": labels})
			members = append(members, wdsMeta{"json", js})
		} else {
			members = append(members, wdsMeta{"cls", strconv.AppendInt(nil, int64(src.Label(i)), 10)})
		}
		if meta != nil {
			for _, k := range meta.MetadataKeys() {
				if v, ok := meta.Metadata(i, k); ok && k != "" && !strings.Contains(k, "/") && k != ext && k != members[1].key {
					members = append(members, wdsMeta{strings.ToLower(k), v})
				}
			}
		}
		for _, m := range members {
			if err := put(key+"."+m.key, m.data); err != nil {
				return fmt.Errorf("source: webdataset: %s: %w", p, err)
			}
			if _, err := tw.Write(m.data); err != nil {
				return fmt.Errorf("source: webdataset: %s: %w", p, err)
			}
		}
	}
	return tw.Close()
}
