package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/conveyor-ml/conveyor/source"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/objstore"
	"github.com/conveyor-ml/conveyor/pipeline"
)

// pathError returns err about the path the user typed, as "PATH: reason": the reason of
// an *fs.PathError alone, since its own path may be another spelling of the same place.
func pathError(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("%s: %w", path, err)
}

// checkDir reports, naming dir as typed, when dir does not exist or is not a directory.
func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return pathError(dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s: not a directory", dir)
	}
	return nil
}

// allowEmptyFlag is the flag of the commands that list an ImageFolder tree which
// accepts class folders without images (source.FolderOptions.AllowEmptyClasses).
const allowEmptyFlag = "allow-empty-classes"

// allowEmptyUsage is allowEmptyFlag's help.
const allowEmptyUsage = "accept class folders that hold no images in an ImageFolder tree (their labels get no samples) instead of refusing them"

// openImageFolder opens the ImageFolder tree dir (source.Dir). Its errors name dir as the
// user typed it and, when dir has no class folders or they hold no images, say what layout
// is expected; an empty class folder's names --allow-empty-classes.
func openImageFolder(dir string, allowEmpty bool) (pipeline.Source, error) {
	if err := checkDir(dir); err != nil {
		return nil, err
	}
	src, err := source.Dir(dir, &source.FolderOptions{AllowEmptyClasses: allowEmpty})
	return src, cliError(err)
}

// cliError rewrites the errors of package source whose advice names a Go setting so that
// they name the command's flag instead: an empty class folder's, --allow-empty-classes.
func cliError(err error) error {
	var ee *source.EmptyClassError
	if errors.As(err, &ee) {
		return errors.New(ee.Message("pass --" + allowEmptyFlag))
	}
	return err
}

// openDataset opens the dataset arg names, one argument of a command, as source.Open
// does (an ImageFolder tree, a converted dataset, a manifest, a folder of shards, a shard
// pattern or a URL), with errors rewritten for the command line (cliError).
func openDataset(ctx context.Context, arg string, o *source.OpenOptions) (*source.Dataset, error) {
	ds, err := source.Open(ctx, arg, o)
	return ds, cliError(err)
}

// checkLocal reports, naming arg as typed, when the local dataset arg does not exist or
// is a file other than a manifest or a shard.
func checkLocal(arg string) error {
	fi, err := os.Stat(arg)
	if err != nil {
		return pathError(arg, err)
	}
	if !fi.IsDir() && !manifestArg(arg) && !strings.EqualFold(path.Ext(arg), ".tar") {
		return fmt.Errorf("%s: not a folder, a manifest (.csv, .jsonl, .ndjson) or a .tar shard", arg)
	}
	return nil
}

// manifestArg reports whether arg names a manifest (source.Manifest) by its extension.
func manifestArg(arg string) bool {
	switch strings.ToLower(path.Ext(arg)) {
	case ".csv", ".jsonl", ".ndjson":
		return true
	}
	return false
}

// cacheDir reports whether the local dir is a cache directory: a converted dataset (it
// holds dataset.json) or a loader's cache (it holds .shard files), which inspect and
// verify read with the cache package rather than as a source.
func cacheDir(dir string) bool {
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return false // a manifest or a shard
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return true // the cache's own errors name it
	}
	for _, e := range ents {
		if e.Name() == cache.InfoName || strings.HasSuffix(e.Name(), ".shard") {
			return true
		}
	}
	return false
}

// shardArgs reports whether args name WebDataset shards rather than a folder: every one
// ends in .tar, or the only one is a pattern ("DIR/train-*.tar" or a brace list
// "DIR/train-{000..099}.tar", quoted so that conveyor expands it rather than the shell)
// or a remote URL (s3://, http://, https://).
func shardArgs(args []string) bool {
	if datasetURL(args) {
		return true
	}
	for _, a := range args {
		if !strings.HasSuffix(strings.ToLower(a), ".tar") {
			return false
		}
	}
	return len(args) > 0
}

// datasetURL reports whether args are one dataset URL that source.Open opens:
// a remote URL, a local shard pattern, or a shard index (.json).
func datasetURL(args []string) bool {
	return len(args) == 1 && (objstore.IsRemote(args[0]) || strings.ContainsAny(args[0], "*?[{") || shardIndexArg(args[0]))
}

// shardIndexArg reports whether arg names a WebDataset shard index (source.ShardIndex).
func shardIndexArg(arg string) bool { return strings.EqualFold(path.Ext(arg), ".json") }

// openShards opens the WebDataset shards args name (see shardArgs) as local files.
func openShards(args []string, logf func(string, ...any)) (pipeline.Source, error) {
	o := &source.WebDatasetOptions{Logf: logf}
	for _, a := range args {
		if _, err := os.Stat(a); err != nil {
			return nil, pathError(a, err)
		}
	}
	return source.WebDatasetFiles(args, o)
}

// remoteDataset is a converted dataset in object storage opened for reading: its
// descriptions fetched into dir, its shards read through remote, fetched when first read.
type remoteDataset struct {
	url    string
	dir    string
	remote *objstore.ShardCache // nil for a local dataset
	bucket *objstore.Bucket     // the prefix remote reads from
	close  func()
}

// openRemoteIndex returns arg itself (remote nil) when it is not an s3:// or http(s)://
// prefix holding a converted dataset (dataset.json). When it is, it fetches the
// dataset's descriptions but not its shards into a new temporary directory
// (source.FetchConvertedIndex) and returns it with a shard cache of the prefix (the
// objstore defaults: the system's temporary directory, at most 16 GiB), through which
// a cache opened with cache.Options.Remote reads the shards. close removes both. The
// shard cache is closed when ctx ends, failing the reads that wait for it.
func openRemoteIndex(ctx context.Context, arg string) (*remoteDataset, error) {
	local := &remoteDataset{url: arg, dir: arg, close: func() {}}
	if !objstore.IsRemote(arg) || strings.ContainsAny(arg, "*?[{") || strings.EqualFold(path.Ext(arg), ".tar") || shardIndexArg(arg) {
		return local, nil
	}
	b, err := objstore.OpenBucket(ctx, strings.TrimSuffix(arg, "/")+"/", nil)
	if err != nil {
		return nil, err
	}
	if _, err := b.Stat(ctx, cache.InfoName); err != nil {
		b.Close()
		if errors.Is(err, fs.ErrNotExist) {
			return local, nil
		}
		return nil, err
	}
	sc, err := objstore.NewShardCache(b, nil)
	if err != nil {
		b.Close()
		return nil, err
	}
	unwatch := closeOnCancel(ctx, sc)
	dir, err := os.MkdirTemp("", "conveyor-converted-*")
	if err == nil {
		err = source.FetchConvertedIndex(ctx, b, dir, sc.Options().Concurrency)
	}
	closeAll := func() {
		unwatch()
		if dir != "" {
			os.RemoveAll(dir)
		}
		sc.Close()
		b.Close()
	}
	if err != nil {
		closeAll()
		return nil, err
	}
	// As training does (source.Open): the shard cache refuses a shard that is
	// not the one the manifest recorded, by name, before it is read at the index's
	// offsets. A dataset whose records do not read is reported when it is opened.
	if info, err := cache.ReadInfo(dir); err == nil {
		for _, m := range info.Shards {
			sc.Expect(m.Name, objstore.Identity{Size: m.Bytes, CRC32C: m.CRC32C})
		}
	}
	return &remoteDataset{url: arg, dir: dir, remote: sc, bucket: b, close: closeAll}, nil
}

// name is file, a path under the dataset's directory, as the user knows it: under the
// URL for a remote dataset.
func (d *remoteDataset) name(file string) string {
	if d.remote == nil {
		return file
	}
	return strings.Replace(file, d.dir, strings.TrimSuffix(d.url, "/"), 1)
}

// fetched says what the shard cache of a remote dataset fetched: "" for a local one.
func (d *remoteDataset) fetched() string {
	if d.remote == nil {
		return ""
	}
	return fmt.Sprintf("conveyor: read %s through a shard cache (%v)\n", d.url, d.remote.Stats())
}

// renaming returns a writer that writes to w with every occurrence of the local
// directory dir (a fetched copy) replaced by url, so that what verify prints names
// the objects. Each Write is rewritten by itself: callers write whole lines.
func renaming(w io.Writer, dir, url string) io.Writer {
	return &renameWriter{w: w, r: strings.NewReplacer(dir+string(os.PathSeparator), strings.TrimSuffix(url, "/")+"/", dir, strings.TrimSuffix(url, "/"))}
}

type renameWriter struct {
	w io.Writer
	r *strings.Replacer
}

func (rw *renameWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(rw.w, rw.r.Replace(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
