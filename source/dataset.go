package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/objstore"
	"github.com/conveyor-ml/conveyor/pipeline"
)

// OpenOptions configures Open. A nil pointer means the defaults.
type OpenOptions struct {
	// Store configures the object store of a remote dataset: retries, endpoint, region,
	// HTTP client. Default nil: objstore's defaults, with credentials, region and
	// endpoint from the standard AWS configuration chain.
	Store *objstore.Options
	// Cache configures the local shard cache of a remote dataset: its directory, byte
	// limit and concurrent fetches. Default nil: a temporary directory removed by Close,
	// 16 GiB, 4 fetches at a time (objstore.ShardCacheOptions' defaults).
	Cache *objstore.ShardCacheOptions
	// WebDataset configures WebDataset shards; set ShardSamples and Classes in it to
	// index lazily, so that the first batch waits for its own shards only. Default nil:
	// every shard is indexed (and, when remote, fetched once) before Open returns.
	WebDataset *WebDatasetOptions
	// Converted configures a converted dataset, local or in object storage. Default nil:
	// ConvertedOptions' defaults.
	Converted *ConvertedOptions
	// Folder configures listing a local ImageFolder tree. Default nil: FolderOptions'
	// defaults (an empty class folder is an error).
	Folder *FolderOptions
}

// clone copies o (nil: the zero options) and the source's own options in it; Store and
// Cache are objstore's, which copies them itself.
func (o *OpenOptions) clone() *OpenOptions {
	var c OpenOptions
	if o != nil {
		c = *o
	}
	if c.WebDataset != nil {
		c.WebDataset = c.WebDataset.clone()
	}
	c.Converted = c.Converted.clone()
	c.Folder = c.Folder.clone()
	return &c
}

// EnsureDefaults fills o's zero fields with their defaults and returns o; a nil o
// becomes a new OpenOptions holding the defaults. WebDataset stays nil when nil (every
// shard is indexed), and Store and Cache are left to objstore, which fills their
// defaults when it opens the store.
func (o *OpenOptions) EnsureDefaults() *OpenOptions {
	if o == nil {
		o = &OpenOptions{}
	}
	if o.WebDataset != nil {
		o.WebDataset.EnsureDefaults()
	}
	o.Converted = o.Converted.EnsureDefaults()
	o.Folder = o.Folder.EnsureDefaults()
	return o
}

// Validate reports every invalid field of o and of its WebDataset and Converted options,
// defaults filled (see EnsureDefaults), joined into one error; nil when all are valid.
// Store and Cache are validated when the store is opened.
func (o *OpenOptions) Validate() error {
	var errs []error
	if o.WebDataset != nil {
		errs = append(errs, o.WebDataset.Validate())
	}
	if o.Converted != nil {
		errs = append(errs, o.Converted.Validate())
	}
	return errors.Join(errs...)
}

// String prints the effective options.
func (o OpenOptions) String() string {
	c := objstore.ShardCacheOptions{}
	if o.Cache != nil {
		c = *o.Cache
	}
	w := WebDatasetOptions{}
	if o.WebDataset != nil {
		w = *o.WebDataset
	}
	v := ConvertedOptions{}
	if o.Converted != nil {
		v = *o.Converted
	}
	f := FolderOptions{}
	if o.Folder != nil {
		f = *o.Folder
	}
	return fmt.Sprintf("source.OpenOptions{Cache: %v, WebDataset: %v, Converted: {AllowIncomplete: %v, PrefetchShards: %d}, Folder: {AllowEmptyClasses: %v}}", c, w, v.AllowIncomplete, v.PrefetchShards, f.AllowEmptyClasses)
}

// A Dataset is a dataset URL opened for training: its Source, and for WebDataset shards
// the shard store behind it. Close it after the loaders reading it.
type Dataset struct {
	// Source is what a Loader reads: a folder source (Dir), a *Converted or a
	// *WebDatasetSource.
	Source pipeline.Source
	// Store holds the shards of a WebDataset dataset or of a converted dataset in object
	// storage, read in place when local and through the shard cache when remote; nil for
	// folders and local converted datasets.
	Store *objstore.Shards

	closer func() error
	desc   string // when the source's own name is a local copy's
}

// Remote reports whether the dataset is read from an object store or web server.
func (d *Dataset) Remote() bool { return d.Store != nil && d.Store.Cache != nil }

// Stats returns the object-store counters: requests, bytes fetched, retries and the
// shard cache's hits, misses and evictions. They are zero for a local dataset. A Dataset
// is a promconveyor.ShardSource, so promconveyor.NewShardCollector(d, nil) exports them.
func (d *Dataset) Stats() objstore.Stats {
	if d.Store == nil {
		return objstore.Stats{}
	}
	return d.Store.Stats()
}

// String names the dataset's source (by its URL when it was fetched).
func (d *Dataset) String() string {
	if d.desc != "" {
		return d.desc
	}
	return fmt.Sprint(d.Source)
}

// Close releases what Open opened: a converted dataset's files, the shard cache
// (removing a temporary cache directory) and idle connections.
func (d *Dataset) Close() error {
	if d.closer == nil {
		return nil
	}
	err := d.closer()
	d.closer = nil
	return err
}

// Open opens the dataset a URL names (objstore's syntax) for training:
//
//   - a local folder of class folders (DIR/CLASS/*.jpg): Dir, with OpenOptions.Folder;
//   - a local converted dataset (a folder holding dataset.json): OpenConverted;
//   - a local manifest, a file ending in .csv, .jsonl or .ndjson: Manifest, its paths
//     relative to the manifest's folder;
//   - a local folder holding WebDataset .tar shards and no subfolders: its shards, as
//     "DIR/*.tar" opens them;
//   - WebDataset tar shards: one .tar file, a brace list or a glob, local
//     ("/data/train-{000..099}.tar", "/data/*.tar") or remote
//     ("s3://bucket/train-{000000..001023}.tar", "https://host/x-{0..3}.tar"), or an
//     s3:// or http(s):// prefix whose objects are .tar shards. Remote shards are read
//     through a local shard cache (OpenOptions.Cache) and prefetched in the order
//     the loader will read them (EpochPlanner).
//   - a WebDataset shard index (a URL ending in .json, local or remote; see ShardIndex):
//     the shards it lists, beside it. With its class names the source is indexed lazily
//     (each shard when first read; the index's counts and sizes go to
//     WebDatasetOptions.ShardSamples and ShardBytes unless those are set), so the first
//     batch waits for its own shards only; without them every shard is indexed first.
//   - a converted dataset in object storage: an s3:// or http(s):// prefix holding
//     dataset.json. Its dataset.json, part records and shard indexes are fetched into a
//     directory under OpenOptions.Cache.Dir and checked as OpenConverted checks a
//     local one; its shards stay in the store and are streamed through the shard cache,
//     prefetched in the order the loader reads them (Converted.PlanEpoch), each of them
//     at most Cache.MaxBytes. Read it with Config.Order.Mode ShardOrder over
//     Converted.ByShard() when it is larger than the cache: the sample order reads
//     every shard at once, and fetches shards again and again (it says so, once).
//
// opts nil means the defaults. Errors name the URL as given.
func Open(ctx context.Context, url string, opts *OpenOptions) (*Dataset, error) {
	o := opts.clone().EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	loc, err := objstore.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	if isJSON(loc.Path) && !isPattern(loc.Path) {
		return openShardIndex(ctx, url, o)
	}
	if !loc.Remote() && !isPattern(loc.Path) && !isTar(loc.Path) {
		if isManifest(loc.Path) {
			return openManifest(url, loc.Path)
		}
		if shardFolder(loc.Path) {
			return Open(ctx, filepath.Join(loc.Path, "*.tar"), o)
		}
		return openLocal(url, loc.Path, o)
	}
	if (loc.Scheme == "http" || loc.Scheme == "https") && !isPattern(loc.Path) && !isTar(loc.Path) {
		if d, err := openHTTPConverted(ctx, url, o); d != nil || err != nil {
			return d, err
		}
	}
	store, err := objstore.OpenShards(ctx, url, o.Store, o.Cache)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	if slices.Contains(store.Names, cache.InfoName) {
		return openRemoteConverted(ctx, url, store, o)
	}
	shards := slices.DeleteFunc(slices.Clone(store.Names), func(n string) bool { return !isTar(n) })
	if len(shards) == 0 {
		store.Close()
		if len(store.Names) == 0 {
			return nil, fmt.Errorf("source: %s: no objects", url)
		}
		if why := incompleteConversion(store.Names); why != "" {
			return nil, fmt.Errorf("source: %s: %w: it looks like a converted dataset whose upload did not finish, holding %s; run the conveyor convert SRC %s that wrote it again to resume (with the same --staging, or with --delete-orphans from a new staging directory)", url, ErrIncomplete, why, url)
		}
		return nil, fmt.Errorf("source: %s: no WebDataset shards (.tar) among its %d objects, e.g. %s", url, len(store.Names), store.Names[0])
	}
	return openShards(ctx, url, store, shards, o.WebDataset)
}

// incompleteConversion says what of a converted dataset the object names hold when they
// hold its shards or part records but no dataset.json (uploaded last, or by a part
// before its record): "" when they hold none.
func incompleteConversion(names []string) string {
	var shards, indexes, records int
	var parts []string
	for _, n := range names {
		switch {
		case strings.HasSuffix(n, ".shard"):
			shards++
		case strings.HasSuffix(n, ".idx"):
			indexes++
		case strings.HasPrefix(n, "dataset.part-") && strings.HasSuffix(n, ".json"):
			records++
			if len(parts) < 3 {
				parts = append(parts, n)
			}
		}
	}
	if shards+records == 0 || slices.Contains(names, cache.InfoName) {
		return ""
	}
	why := fmt.Sprintf("%d shards (.shard) and %d indexes (.idx)", shards, indexes)
	if records > 0 {
		why += fmt.Sprintf(" and %d part records (%s)", records, strings.Join(parts, ", "))
	}
	return why + " but no " + cache.InfoName + ", which names the dataset's shards and spec"
}

// openShards makes the WebDataset source of shards in store, named by url; indexing
// gives up when ctx ends.
func openShards(ctx context.Context, url string, store *objstore.Shards, shards []string, wo *WebDatasetOptions) (*Dataset, error) {
	src, err := webDataset(ctx, store.FS, shards, wo)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("source: %s: %w", url, err)
	}
	src.desc = fmt.Sprintf("webdataset:%s (%d shards)", url, len(shards))
	if src.planner != nil {
		src.planner.desc = "webdataset:" + url // names it in the window's notices
	}
	return &Dataset{Source: src, Store: store, closer: store.Close}, nil
}

// maxShardIndexBytes bounds the shard index Open reads: 1 GiB holds about ten
// million shards' entries.
const maxShardIndexBytes = 1 << 30

// openShardIndex opens the WebDataset shards that the ShardIndex at url lists.
func openShardIndex(ctx context.Context, url string, o *OpenOptions) (*Dataset, error) {
	store, err := objstore.OpenShards(ctx, url, o.Store, o.Cache)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	fail := func(err error) (*Dataset, error) {
		store.Close()
		return nil, fmt.Errorf("source: %s: %w", url, err)
	}
	if len(store.Names) != 1 {
		return fail(fmt.Errorf("%d objects, want one shard index", len(store.Names)))
	}
	f, err := openContext(ctx, store.FS, store.Names[0])
	if err != nil {
		return fail(err)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxShardIndexBytes+1))
	f.Close()
	if err == nil && len(data) > maxShardIndexBytes {
		err = fmt.Errorf("larger than %d bytes", maxShardIndexBytes)
	}
	if err != nil {
		return fail(err)
	}
	x, err := ParseShardIndex(data)
	if err != nil {
		return fail(err)
	}
	base := store.URL("")
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	names, err := x.names(base)
	if err != nil {
		return fail(err)
	}
	store.Release(store.Names[0]) // the cache needs no room for it any more
	store.Names = names
	if store.Cache != nil {
		for k, e := range x.Shards {
			store.Cache.Expect(names[k], objstore.Identity{Size: e.Bytes, ETag: e.ETag, CRC32C: e.CRC32C})
		}
	}
	var wo WebDatasetOptions
	if o.WebDataset != nil {
		wo = *o.WebDataset
	}
	if wo.Classes == nil {
		wo.Classes = x.Classes
	}
	if wo.ShardSamples == nil && len(wo.Classes) > 0 {
		wo.ShardSamples, wo.ShardBytes = x.Counts()
		if slices.Contains(wo.ShardBytes, 0) {
			wo.ShardBytes = nil
		}
	}
	return openShards(ctx, url, store, names, &wo)
}

// openLocal opens a local folder: a converted dataset or a tree of class folders.
func openLocal(url, dir string, o *OpenOptions) (*Dataset, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("source: %s: %w", url, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("source: %s: not a folder, a .tar shard or a manifest (.csv, .jsonl, .ndjson)", url)
	}
	if _, err := os.Stat(filepath.Join(dir, cache.InfoName)); err == nil {
		c, err := OpenConverted(dir, o.Converted)
		if err != nil {
			return nil, err
		}
		return &Dataset{Source: c, closer: c.Close}, nil
	}
	src, err := Dir(dir, o.Folder)
	if err != nil {
		if n := countTars(dir); n > 0 {
			err = fmt.Errorf("%w; it holds %d WebDataset shards (.tar) beside its folders: name them, '%s'", err, n, filepath.Join(dir, "*.tar"))
		}
		return nil, err
	}
	if n := countTars(dir); n > 0 {
		logf := log.Printf
		if o.WebDataset != nil && o.WebDataset.Logf != nil {
			logf = o.WebDataset.Logf
		}
		logf("source: %s: read as an image folder; the .tar files beside its class folders (%d) are not read (name them as '%s' to read them as WebDataset shards)", url, n, filepath.Join(dir, "*.tar"))
	}
	return &Dataset{Source: src}, nil
}

// openManifest opens the local manifest file at name (Manifest), its paths relative to
// its folder.
func openManifest(url, name string) (*Dataset, error) {
	if fi, err := os.Stat(name); err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("source: %s: %w", url, err)
	} else if fi.IsDir() {
		return nil, fmt.Errorf("source: %s: a folder, not a manifest file", url)
	}
	src, err := Manifest(os.DirFS(filepath.Dir(name)), filepath.Base(name))
	if err != nil {
		return nil, err
	}
	return &Dataset{Source: src, desc: "manifest:" + url}, nil
}

// isManifest reports whether name is a manifest by its extension: .csv, .jsonl or
// .ndjson.
func isManifest(name string) bool {
	switch strings.ToLower(path.Ext(name)) {
	case ".csv", ".jsonl", ".ndjson":
		return true
	}
	return false
}

// shardFolder reports whether dir is a folder of WebDataset shards: it holds .tar files,
// no dataset.json and no folders (but hidden ones). Its other files (a shard index, a
// README) are left alone.
func shardFolder(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	tars := 0
	for _, e := range ents {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, "."):
		case name == cache.InfoName:
			return false
		case e.IsDir():
			return false
		case e.Type()&fs.ModeSymlink != 0:
			if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.IsDir() {
				return false // a class folder linked in
			}
			if isTar(name) {
				tars++
			}
		case isTar(name):
			tars++
		}
	}
	return tars > 0
}

// countTars counts the .tar files directly in dir.
func countTars(dir string) int {
	ents, _ := os.ReadDir(dir)
	n := 0
	for _, e := range ents {
		if !e.IsDir() && isTar(e.Name()) {
			n++
		}
	}
	return n
}

func isTar(name string) bool { return strings.EqualFold(path.Ext(name), ".tar") }

func isJSON(name string) bool { return strings.EqualFold(path.Ext(name), ".json") }

func isPattern(p string) bool { return strings.ContainsAny(p, "*?[{") }
