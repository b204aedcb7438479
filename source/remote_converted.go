package source

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/internal/units"
	"github.com/conveyor-ml/conveyor/objstore"
	"golang.org/x/sync/errgroup"
)

// datasetFile reports whether the object name belongs to a converted dataset's files to
// fetch or upload: the flat files of its directory but the conversion's lock files.
func datasetFile(name string) bool {
	return name != "" && !strings.ContainsAny(name, `/\`) && !strings.HasPrefix(name, ".") &&
		name != "LOCK" && !strings.HasSuffix(name, ".lock") && !strings.HasSuffix(name, leaseExt)
}

// FetchConvertedIndex fetches what describes the converted dataset stored under b (an
// s3:// or http(s):// prefix holding dataset.json) into the directory dir, but not its
// shards: dataset.json, the part records it names and the indexes of the shards their
// manifests record, concurrency objects at a time, and nothing else under the prefix. A
// ReadOnly cache.Open of dir with Options.Remote set to a shard cache of b
// (objstore.NewShardCache) then lists every record and reads each from its shard, fetched
// whole when first read. Open reads a dataset URL this way; so do conveyor
// inspect (indexes only) and verify.
//
// What is fetched is bounded before it is fetched: dataset.json and each part record at
// cache.MaxInfoBytes, each index at the size its manifest recorded, and the counts and
// sizes the records hold are checked (cache.ReadInfo) before the files they name are
// asked for. A part record or an index that is not stored is left for opening to
// report, as for a local dataset; so a dataset whose conversion recorded no manifest
// cannot be read from object storage. Errors name the URL.
func FetchConvertedIndex(ctx context.Context, b *objstore.Bucket, dir string, concurrency int) error {
	_, err := fetchConverted(ctx, b, dir, concurrency, nil)
	return err
}

// fetchConverted is FetchConvertedIndex; check, when not nil, sees the dataset's Info
// before its indexes are fetched, and an error from it is returned as is.
func fetchConverted(ctx context.Context, b *objstore.Bucket, dir string, concurrency int, check func(*cache.Info) error) (*cache.Info, error) {
	url := strings.TrimSuffix(b.URL(""), "/")
	named := func(err error) error { // the URL, where cache named the local copy
		return fmt.Errorf("source: %w", &renamedError{msg: strings.ReplaceAll(err.Error(), dir, url), err: err})
	}
	err := objstore.Mirror(ctx, b, []objstore.Object{{Name: cache.InfoName, Size: cache.MaxInfoBytes}}, dir, 1)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("source: %s is not a converted dataset (no %s): %w", url, b.URL(cache.InfoName), err)
	}
	if err != nil {
		return nil, fetchError(err)
	}
	head, err := cache.ReadInfoFile(filepath.Join(dir, cache.InfoName))
	if err != nil {
		return nil, named(err)
	}
	if head.Parts > 0 {
		records, err := partRecords(ctx, b, head.Parts)
		if err != nil {
			return nil, err
		}
		if err := fetchRecords(ctx, b, records, dir, concurrency); err != nil {
			return nil, err
		}
	}
	info, err := cache.ReadInfo(dir)
	if err != nil {
		return nil, named(err)
	}
	if check != nil {
		if err := check(info); err != nil {
			return nil, err
		}
	}
	var indexes []objstore.Object
	seen := map[string]bool{}
	for _, m := range info.Shards {
		name := strings.TrimSuffix(m.Name, ".shard") + ".idx"
		if m.IndexBytes > 0 && !seen[name] { // an index of 0 bytes is recorded as absent
			seen[name] = true
			indexes = append(indexes, objstore.Object{Name: name, Size: m.IndexBytes})
		}
	}
	return info, fetchEach(ctx, b, indexes, dir, concurrency)
}

// partRecords names the part records of a dataset converted in parts parts, each at
// most cache.MaxInfoBytes: from a store that lists, those it holds (a dataset whose
// parts have not all run asks for no record that is not there); from a web server, all.
func partRecords(ctx context.Context, b *objstore.Bucket, parts int) ([]objstore.Object, error) {
	var stored map[string]bool
	if !strings.HasPrefix(b.String(), "http") {
		objs, err := b.List(ctx, "dataset.part-")
		if err != nil {
			return nil, fmt.Errorf("source: %w", err)
		}
		stored = map[string]bool{}
		for _, o := range objs {
			stored[o.Name] = true
		}
	}
	var records []objstore.Object
	for i := range parts {
		name := cache.Part{Index: i, Count: parts}.PartInfoName()
		if stored == nil || stored[name] {
			records = append(records, objstore.Object{Name: name, Size: cache.MaxInfoBytes})
		}
	}
	return records, nil
}

// fetchEach mirrors objs into dir, concurrency at a time (at least one), leaving out
// those not stored.
func fetchEach(ctx context.Context, b *objstore.Bucket, objs []objstore.Object, dir string, concurrency int) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(max(concurrency, 1))
	for _, o := range objs {
		if ctx.Err() != nil {
			break // an earlier fetch failed
		}
		g.Go(func() error {
			err := objstore.Mirror(ctx, b, []objstore.Object{o}, dir, 1)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fetchError(err)
			}
			return nil
		})
	}
	return g.Wait()
}

// maxAbsentRecords bounds the part records asked of a web server, which cannot be
// listed, that turn out absent: past it the dataset is refused as unfinished rather than
// asked for every part its dataset.json names (up to 1,048,576 GETs).
const maxAbsentRecords = 256

// fetchRecords is fetchEach for part records: from a web server, which cannot say which
// it holds, it gives up once more than maxAbsentRecords are absent.
func fetchRecords(ctx context.Context, b *objstore.Bucket, objs []objstore.Object, dir string, concurrency int) error {
	if !strings.HasPrefix(b.String(), "http") {
		return fetchEach(ctx, b, objs, dir, concurrency)
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(max(concurrency, 1))
	var absent atomic.Int64
	errAbsent := fmt.Errorf("source: %s: more than %d of the %d part records %s names are absent: the conversion is unfinished (each part records itself when it finishes); finish its parts, or serve the dataset from an object store that lists, where only those present are asked for: %w",
		strings.TrimSuffix(b.URL(""), "/"), maxAbsentRecords, len(objs), b.URL(cache.InfoName), ErrIncomplete)
	for _, o := range objs {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			err := objstore.Mirror(ctx, b, []objstore.Object{o}, dir, 1)
			if errors.Is(err, fs.ErrNotExist) {
				if absent.Add(1) > maxAbsentRecords {
					return errAbsent
				}
				return nil
			}
			if err != nil {
				return fetchError(err)
			}
			return nil
		})
	}
	return g.Wait()
}

// fetchError is err, from fetching a file of a converted dataset, with what to do when
// the file was larger than a conversion writes it (dataset.json and part records of at
// most cache.MaxInfoBytes, indexes of the size their manifest records).
func fetchError(err error) error {
	if errors.Is(err, objstore.ErrTooLarge) {
		return fmt.Errorf("source: %w, which no conversion writes: the store holds something else under that name, or a damaged dataset; convert it again", err)
	}
	return fmt.Errorf("source: %w", err)
}

// openRemoteConverted opens the converted dataset in store's bucket without fetching its
// shards: dataset.json, the part records and the shards' indexes are fetched into a new
// directory under the shard cache's Dir, and OpenConverted reads them with the shard
// files left in the store's shard cache, which fetches each whole when it is first read
// (or ahead of need, as the loader plans its epochs; see Converted.PlanEpoch) and evicts
// it, least recently used, when space is needed. Close removes the directory and the
// cache. A shard larger than the cache's limit is refused here.
func openRemoteConverted(ctx context.Context, url string, store *objstore.Shards, o *OpenOptions) (*Dataset, error) {
	name := strings.TrimSuffix(url, "/")
	fail := func(err error) (*Dataset, error) {
		store.Close()
		return nil, err
	}
	var co objstore.ShardCacheOptions
	if o.Cache != nil {
		co = *o.Cache
	}
	if co.Dir != "" {
		if err := os.MkdirAll(co.Dir, 0o755); err != nil {
			return fail(fmt.Errorf("source: %s: cache directory: %w", name, err))
		}
	}
	dir, err := os.MkdirTemp(co.Dir, "conveyor-converted-*")
	if err != nil {
		return fail(fmt.Errorf("source: %s: cache directory: %w", name, err))
	}
	remove := func() error { return os.RemoveAll(dir) }
	b := store.Bucket
	limit := store.Cache.Options().MaxBytes
	fits := func(info *cache.Info) error {
		for _, m := range info.Shards {
			if m.Bytes > limit {
				return fmt.Errorf("source: %s: shard %s holds %s, more than the shard cache's limit of %s (OpenOptions.Cache.MaxBytes, --shard-cache-max-bytes); raise the limit", name, b.URL(m.Name), units.Bytes(m.Bytes), units.Bytes(limit))
			}
		}
		// The shard cache refuses a shard that is not the one the manifest recorded
		// (objstore.ErrChanged) before it is mapped and read at the index's offsets.
		for _, m := range info.Shards {
			store.Cache.Expect(m.Name, objstore.Identity{Size: m.Bytes, CRC32C: m.CRC32C})
		}
		return nil
	}
	if _, err := fetchConverted(ctx, b, dir, store.Cache.Options().Concurrency, fits); err != nil {
		remove()
		return fail(err)
	}
	cfg := *o.Converted
	cfg.shards = store.Cache
	c, err := OpenConverted(dir, &cfg)
	if err != nil {
		remove()
		// Name the URL where OpenConverted named the local copy; errors.Is still
		// sees what it wrapped (ErrIncomplete).
		return fail(&renamedError{msg: strings.ReplaceAll(err.Error(), dir, name), err: err})
	}
	c.planner.desc = "converted:" + name
	closer := func() error {
		err := c.Close()
		if rerr := remove(); err == nil {
			err = rerr
		}
		if serr := store.Close(); err == nil {
			err = serr
		}
		return err
	}
	desc := fmt.Sprintf("converted:%s (%d samples in %d shards, read through a shard cache of %s)", name, c.Len(), len(c.info.Shards), units.Bytes(limit))
	return &Dataset{Source: c, Store: store, closer: closer, desc: desc}, nil
}

// openHTTPConverted opens the converted dataset under the web-server prefix url when it
// has a dataset.json; nil, nil when it has none.
func openHTTPConverted(ctx context.Context, url string, o *OpenOptions) (*Dataset, error) {
	b, err := objstore.OpenBucket(ctx, strings.TrimSuffix(url, "/")+"/", o.Store)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	if _, err := b.Stat(ctx, cache.InfoName); err != nil {
		b.Close()
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("source: %w", err)
	}
	c, err := objstore.NewShardCache(b, o.Cache)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("source: %w", err)
	}
	return openRemoteConverted(ctx, url, &objstore.Shards{Bucket: b, FS: c, Cache: c}, o)
}

// renamedError is an error with its message rewritten (a local path replaced by the URL
// it was fetched from), unwrapping to the original.
type renamedError struct {
	msg string
	err error
}

func (e *renamedError) Error() string { return e.msg }
func (e *renamedError) Unwrap() error { return e.err }
