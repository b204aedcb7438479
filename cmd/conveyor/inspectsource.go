package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/internal/units"
	"github.com/conveyor-ml/conveyor/source"
)

// shardsResult is what inspect --json prints for WebDataset shards: with the shard
// index's keys (source.ShardIndex: __kind__, wids_version, shardlist, class_names), so
// that the output, kept beside the shards, is a shard index OpenDataset and WebDataset's
// wids read.
type shardsResult struct {
	source.ShardIndex
	Dataset      string    `json:"dataset"`
	Shards       int       `json:"shards"`
	Samples      int       `json:"samples"`
	Classes      int       `json:"classes"`
	Bad          int       `json:"bad"`
	ShardSamples []int     `json:"shard_samples"` // per shard, in order: WebDatasetOptions.ShardSamples
	ObjStore     *objStats `json:"objstore,omitempty"`
}

// inspectShards indexes the WebDataset shards url names and describes them.
func inspectShards(ctx context.Context, url string, jsonOut bool, stdout, stderr io.Writer) error {
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }
	ds, err := source.Open(ctx, url, &source.OpenOptions{WebDataset: &source.WebDatasetOptions{Logf: logf}})
	if err != nil {
		return err
	}
	defer ds.Close()
	return describeShards(ds, url, jsonOut, stdout)
}

// describeShards describes the WebDataset shards ds, which url names.
func describeShards(ds *source.Dataset, url string, jsonOut bool, stdout io.Writer) error {
	w, ok := ds.Source.(*source.WebDatasetSource)
	if !ok {
		return fmt.Errorf("%s: not WebDataset shards", url)
	}
	res := shardsResult{ShardIndex: *w.ShardIndex(), Dataset: url, Shards: len(w.Shards()), Samples: w.Len(), Classes: len(w.Classes()), Bad: w.Bad(), ShardSamples: w.ShardSamples()}
	res.Name = url
	if ds.Remote() {
		b := benchResult{store: ds}
		b.fillStore()
		res.ObjStore = b.ObjStore
	}
	if jsonOut {
		return json.NewEncoder(stdout).Encode(res)
	}
	fmt.Fprintf(stdout, "dataset        %s\n", res.Dataset)
	fmt.Fprintf(stdout, "shards         %d: %s ... %s\n", res.Shards, w.Shards()[0], w.Shards()[res.Shards-1])
	fmt.Fprintf(stdout, "samples        %d (%d bad), %s\n", res.Samples, res.Bad, plural(res.Classes, "class"))
	lo, hi := slices.Min(res.ShardSamples), slices.Max(res.ShardSamples)
	fmt.Fprintf(stdout, "per shard      %d to %d samples (--json lists them: WebDatasetOptions.ShardSamples)\n", lo, hi)
	if o := res.ObjStore; o != nil {
		fmt.Fprintf(stdout, "object store   %d requests, %s fetched, %d retries\n", o.Requests, units.Bytes(o.BytesFetched), o.Retries)
	}
	return nil
}

// openLocalSource opens the local dataset arg that is not a cache directory: an
// ImageFolder tree, a manifest or a folder of shards (source.Open).
func openLocalSource(ctx context.Context, arg string, allowEmpty bool, logf func(string, ...any)) (*source.Dataset, error) {
	ds, err := source.Open(ctx, arg, &source.OpenOptions{
		WebDataset: &source.WebDatasetOptions{Logf: logf},
		Folder:     &source.FolderOptions{AllowEmptyClasses: allowEmpty},
	})
	if err != nil {
		var ee *source.EmptyClassError
		if fi, serr := os.Stat(arg); serr == nil && fi.IsDir() && !errors.As(err, &ee) {
			err = fmt.Errorf("%w%s", err, notCacheHint) // not a tree: perhaps a dataset lost
		}
		return nil, cliError(err)
	}
	return ds, nil
}

// sourceResult is what inspect --json prints for an ImageFolder tree or a manifest.
type sourceResult struct {
	Dataset string         `json:"dataset"`
	Samples int            `json:"samples"`
	Classes []classCount   `json:"classes"`
	Formats map[string]int `json:"formats"` // samples per file extension, lower case
}

// inspectSource describes the local dataset arg that is not a cache directory: an
// ImageFolder tree or a manifest (samples, classes, file formats), or a folder of
// WebDataset shards as inspectShards does.
func inspectSource(ctx context.Context, arg string, allowEmpty, jsonOut bool, stdout, stderr io.Writer) error {
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }
	ds, err := openLocalSource(ctx, arg, allowEmpty, logf)
	if err != nil {
		return err
	}
	defer ds.Close()
	if _, ok := ds.Source.(*source.WebDatasetSource); ok {
		return describeShards(ds, arg, jsonOut, stdout)
	}
	src := ds.Source
	res := sourceResult{Dataset: ds.String(), Samples: src.Len(), Formats: map[string]int{}}
	counts := make([]int, len(src.Classes()))
	for i := range src.Len() {
		if l := src.Label(i); l >= 0 && l < len(counts) {
			counts[l]++
		}
		res.Formats[strings.ToLower(filepath.Ext(src.Path(i)))]++
	}
	for k, name := range src.Classes() {
		res.Classes = append(res.Classes, classCount{Name: name, Samples: counts[k]})
	}
	if jsonOut {
		return json.NewEncoder(stdout).Encode(res)
	}
	line := func(k, format string, a ...any) { fmt.Fprintf(stdout, "%-13s %s\n", k, fmt.Sprintf(format, a...)) }
	line("dataset", "%s", res.Dataset)
	line("samples", "%d (files, not read: conveyor verify decodes them)", res.Samples)
	line("classes", "%s", classSummary(res.Classes))
	var formats []string
	for _, ext := range slices.Sorted(maps.Keys(res.Formats)) {
		formats = append(formats, fmt.Sprintf("%s %d", ext, res.Formats[ext]))
	}
	line("formats", "%s", strings.Join(formats, ", "))
	return nil
}

// pruneSpecs deletes the shards, and their indexes, of the local converted dataset in
// c that hold records of other specs than info's (the dataset's), and says what it
// deleted. Nothing is deleted while a conversion runs into the directory.
func pruneSpecs(c *cache.Cache, info *cache.Info, stdout io.Writer) error {
	dir := c.Dir()
	if info == nil {
		return fmt.Errorf("%s: --prune applies to a converted dataset; this is a loader's cache (no %s), whose specs are all in use", dir, cache.InfoName)
	}
	if holder, running := cache.Converting(dir); running {
		return fmt.Errorf("%s: a conversion is running into it (%s); --prune deletes nothing while one runs", dir, holder)
	}
	specs := c.ShardSpecs()
	var names []string
	for _, name := range slices.Sorted(maps.Keys(specs)) {
		if specs[name] != info.Spec {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		fmt.Fprintf(stdout, "conveyor inspect: %s holds no shards of other specs than %q; nothing to prune\n", dir, info.Spec)
		return nil
	}
	var bytes int64
	pruned := map[string]int{}
	for _, name := range names {
		for _, file := range []string{name, strings.TrimSuffix(name, ".shard") + ".idx"} {
			p := filepath.Join(dir, file)
			fi, err := os.Lstat(p) // a link is removed, not its target: count the link
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err == nil {
				err = os.Remove(p)
			}
			if err != nil {
				return fmt.Errorf("--prune: %w", err)
			}
			bytes += fi.Size()
		}
		pruned[specs[name]]++
		fmt.Fprintf(stdout, "deleted %s (spec %s)\n", filepath.Join(dir, name), specs[name])
	}
	fmt.Fprintf(stdout, "conveyor inspect: pruned %s (%s with their indexes) of %s from %s; its dataset's spec %q stays\n",
		plural(len(names), "shard"), units.Bytes(bytes), plural(len(pruned), "other spec"), dir, info.Spec)
	return nil
}
