package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
)

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
