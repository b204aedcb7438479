package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/internal/synth"
	"github.com/conveyor-ml/conveyor/objstore"
	"github.com/conveyor-ml/conveyor/pipeline"
	"github.com/conveyor-ml/conveyor/source"
)

// openSource opens what bench reads: the synthetic set, WebDataset shards or a dataset
// URL, a converted DIR, an image folder, a manifest or a folder of shards; it fills res's dataset fields. close releases
// the dataset once the loaders are closed.
func (f *benchFlags) openSource(ctx context.Context, pos []string, logf func(string, ...any), res *benchResult) (src pipeline.Source, closeAll func(), err error) {
	var closers []func() error
	release := func() {
		for _, c := range slices.Backward(closers) {
			c()
		}
	}
	defer func() {
		if err != nil {
			release()
		}
	}()
	dir := f.dir
	res.Dataset = dir
	if dir == "" {
		if dir, err = syntheticSet(f.synthDir, f.images, logf); err != nil {
			return nil, nil, err
		}
		res.Dataset = fmt.Sprintf("synthetic(%d) %s", f.images, dir)
	}
	t0 := time.Now()
	switch {
	case f.shards:
		src, err = f.openShardSource(ctx, pos, logf, res, &closers)
	default:
		src, err = f.openDirSource(ctx, dir, logf, &closers)
	}
	if err != nil {
		return nil, nil, err
	}
	if f.readLatency > 0 {
		if _, ok := src.(slowFiles); !ok {
			return nil, nil, usagef("--read-latency applies to an image folder or a manifest")
		}
	}
	res.OpenS = time.Since(t0).Seconds()
	res.Samples = src.Len()
	res.Classes = len(src.Classes())
	return src, release, nil
}

// openShardSource opens WebDataset shards, or the dataset a URL names (shards, a shard
// index or a converted dataset, local or remote), adding what must be closed to closers.
func (f *benchFlags) openShardSource(ctx context.Context, pos []string, logf func(string, ...any), res *benchResult, closers *[]func() error) (pipeline.Source, error) {
	if f.allowIncomplete && !datasetURL(pos) {
		return nil, usagef("--allow-incomplete applies to a converted dataset (a DIR or URL holding %s)", cache.InfoName)
	}
	if !datasetURL(pos) {
		if f.shardIndex != "" {
			return nil, usagef("--shard-index applies to one shard list or URL ('DIR/train-{000..099}.tar', s3://...)")
		}
		src, err := openShards(pos, logf)
		if err != nil {
			return nil, err
		}
		res.Dataset = fmt.Sprint(src)
		return src, nil
	}
	wo := &source.WebDatasetOptions{Logf: logf, PrefetchShards: f.shardPrefetch}
	if f.shardIndex != "" {
		var err error
		if wo.ShardSamples, wo.Classes, err = readShardIndex(f.shardIndex); err != nil {
			return nil, err
		}
	}
	ds, err := source.Open(ctx, pos[0], &source.OpenOptions{
		Cache:      &objstore.ShardCacheOptions{Dir: f.shardCache, MaxBytes: int64(f.shardCacheMax), Concurrency: f.shardFetches},
		WebDataset: wo,
		Converted:  &source.ConvertedOptions{AllowIncomplete: f.allowIncomplete, Logf: logf, PrefetchShards: f.shardPrefetch},
	})
	if err != nil {
		return nil, err
	}
	*closers = append(*closers, ds.Close)
	conv, converted := ds.Source.(*source.Converted)
	if f.allowIncomplete && !converted {
		return nil, usagef("--allow-incomplete applies to a converted dataset (a DIR or URL holding %s), not %v", cache.InfoName, ds)
	}
	if ds.Remote() {
		if f.shardIndex == "" {
			// Indexing fetched every shard; start the epochs from an empty cache,
			// as a dataset larger than the cache would.
			ds.Store.Release(ds.Store.Names...)
		}
		res.store = ds
	}
	src, name := ds.Source, ds.String()
	if converted && f.ord == pipeline.ShardOrder {
		src = conv.ByShard() // see openDirSource
	}
	res.Dataset = fmt.Sprint(src)
	if name != "" {
		res.Dataset = name // a fetched converted dataset by its URL
	}
	return src, nil
}

// openDirSource opens a local DATASET as source.Open does: a converted dataset, an
// image folder (slowed by --read-latency), a manifest or a folder of shards, adding what
// must be closed to closers.
func (f *benchFlags) openDirSource(ctx context.Context, dir string, logf func(string, ...any), closers *[]func() error) (pipeline.Source, error) {
	if err := checkLocal(dir); err != nil {
		return nil, err
	}
	_, statErr := os.Stat(filepath.Join(dir, cache.InfoName))
	converted := statErr == nil
	if f.allowIncomplete && !converted {
		return nil, usagef("--allow-incomplete applies to a converted dataset (a DIR holding %s)", cache.InfoName)
	}
	if converted && f.cacheDir != "" {
		return nil, fmt.Errorf("%s is a converted dataset, a cache already; leave out --cache", dir)
	}
	wo := &source.WebDatasetOptions{Logf: logf, PrefetchShards: f.shardPrefetch}
	if f.shardIndex != "" {
		var err error
		if wo.ShardSamples, wo.Classes, err = readShardIndex(f.shardIndex); err != nil {
			return nil, err
		}
	}
	ds, err := openDataset(ctx, dir, &source.OpenOptions{
		WebDataset: wo,
		Converted:  &source.ConvertedOptions{AllowIncomplete: f.allowIncomplete, Logf: logf},
		Folder:     &source.FolderOptions{AllowEmptyClasses: f.allowEmpty},
	})
	if err != nil {
		return nil, err
	}
	*closers = append(*closers, ds.Close)
	src := ds.Source
	if _, shards := src.(*source.WebDatasetSource); f.shardIndex != "" && !shards {
		return nil, usagef("--shard-index applies to WebDataset shards (a folder of them, a shard list or a URL), not %v", ds)
	}
	if conv, ok := src.(*source.Converted); ok && f.ord == pipeline.ShardOrder {
		// The Converted declares no shards (it lists samples in path order):
		// the shard order over it would read one-sample shards.
		return conv.ByShard(), nil
	}
	if fs, ok := src.(pipeline.FileSource); ok && f.readLatency > 0 {
		if _, shards := src.(*source.WebDatasetSource); !shards {
			src = slowFiles{fs, f.readLatency}
		}
	}
	return src, nil
}

// syntheticSet returns the directory of the built-in benchmark set, generating it once
// into dir, or by default into the user's cache directory.
func syntheticSet(dir string, n int, logf func(string, ...any)) (string, error) {
	if n < 10 {
		return "", usagef("--images %d: need at least 10", n)
	}
	const classes = 10
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		dir = filepath.Join(base, "conveyor", fmt.Sprintf("synth-imagenet-v1-%d", n))
	}
	done := filepath.Join(dir, ".complete")
	if _, err := os.Stat(done); err == nil {
		return dir, nil
	}
	logf("conveyor: generating %d synthetic images in %s (once)", n, dir)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if _, err := synth.ImageNetLike(dir, classes, n/classes, 1); err != nil {
		return "", fmt.Errorf("synthetic set: %w", err)
	}
	return dir, os.WriteFile(done, nil, 0o644)
}

// readShardIndex reads the shard sample counts and class names of a shard index (what
// conveyor inspect SHARDS --json prints, or a wids index with class_names added).
func readShardIndex(path string) ([]int, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("--shard-index: %w", err)
	}
	var counts []int
	var classes []string
	var kind struct {
		Kind string `json:"__kind__"`
	}
	if x, err := source.ParseShardIndex(data); err == nil {
		counts, _ = x.Counts()
		classes = x.Classes
	} else if json.Unmarshal(data, &kind) == nil && kind.Kind == source.ShardIndexKind {
		return nil, nil, fmt.Errorf("--shard-index %s: %w", path, err) // a shard index, but a bad one
	} else {
		var idx shardsResult // written before the index's keys were added
		if err := json.Unmarshal(data, &idx); err != nil {
			return nil, nil, fmt.Errorf("--shard-index %s: %w", path, err)
		}
		counts, classes = idx.ShardSamples, idx.ShardIndex.Classes
	}
	if len(counts) == 0 || len(classes) == 0 {
		return nil, nil, fmt.Errorf("--shard-index %s: no shard counts or class_names (write it with conveyor inspect SHARDS --json)", path)
	}
	return counts, classes, nil
}

// slowFiles is a folder whose files each take latency to open: a slow disk or a network
// file system, for --read-latency.
type slowFiles struct {
	pipeline.FileSource
	latency time.Duration
}

func (s slowFiles) Open(i int) (fs.File, error) {
	time.Sleep(s.latency)
	return s.FileSource.Open(i)
}

func (s slowFiles) String() string {
	return fmt.Sprintf("%v with %v per open", s.FileSource, s.latency)
}
