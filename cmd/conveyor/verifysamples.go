package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"

	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/internal/units"
	"github.com/conveyor-ml/conveyor/pipeline"
	"github.com/conveyor-ml/conveyor/source"
	"golang.org/x/sync/errgroup"
)

// verifyShards checks every sample of the WebDataset shards args name: what indexing
// found bad (a missing image member, an unreadable label, a truncated shard), and each
// image read and decoded whole, on as many goroutines as Go may run, in shard order so
// that remote shards are fetched about once more after indexing.
func verifyShards(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	name := strings.Join(args, " ")
	sh, err := openVerifiedShards(ctx, args)
	if err != nil {
		return err
	}
	defer sh.close()
	return checkShards(ctx, name, sh, stdout, stderr)
}

// checkShards checks every sample of the opened shards sh, which name names, and lists
// the bad ones (see verifyShards).
func checkShards(ctx context.Context, name string, sh *verifiedShards, stdout, stderr io.Writer) error {
	src := sh.src
	problems, err := checkSamples(ctx, src)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: checking its samples: %w", name, err)
	}
	var bad []string
	ends, shards := src.ShardEnds(), src.Shards()
	for i, p := range problems {
		if p != "" {
			k := sort.SearchInts(ends, i+1)
			s := sh.where(k) + " " + strings.TrimPrefix(src.Path(i), shards[k]+"/")
			fmt.Fprintf(stdout, "bad %s: %s\n", s, p)
			bad = append(bad, s)
		}
	}
	n := src.Len()
	fmt.Fprintf(stdout, "conveyor verify shards=%d samples=%d classes=%d bad=%d\n", len(src.Shards()), n, len(src.Classes()), len(bad))
	if ds := sh.ds; ds != nil && ds.Remote() {
		b := benchResult{store: ds}
		b.fillStore()
		if o := b.ObjStore; o != nil {
			fmt.Fprintf(stderr, "conveyor: read %s: %d requests, %s fetched, %d retries\n", name, o.Requests, units.Bytes(o.BytesFetched), o.Retries)
		}
	}
	return badVerdict(bad, n, "samples", name)
}

// badVerdict is the error verify ends with when bad of n samples (or files: what) of
// the dataset name are bad, naming up to three; nil when none is.
func badVerdict(bad []string, n int, what, name string) error {
	if len(bad) == 0 {
		return nil
	}
	const shown = 3
	names := strings.Join(bad[:min(len(bad), shown)], ", ")
	if len(bad) > shown {
		names += fmt.Sprintf(", ... %d more", len(bad)-shown)
	}
	return fmt.Errorf("%d of %d %s are bad in %s: %s", len(bad), n, what, name, names)
}

// verifySource checks the local dataset arg that is not a cache directory: every file
// of an ImageFolder tree or a manifest read and decoded whole, on as many goroutines as
// Go may run, the bad ones listed with why; a folder of WebDataset shards as
// verifyShards checks shards.
func verifySource(ctx context.Context, arg string, allowEmpty bool, stdout io.Writer) error {
	ds, err := openLocalSource(ctx, arg, allowEmpty, func(string, ...any) {})
	if err != nil {
		return err
	}
	defer ds.Close()
	if w, ok := ds.Source.(*source.WebDatasetSource); ok {
		return checkShards(ctx, arg, verifiedOf(ds, w), stdout, io.Discard)
	}
	src, ok := ds.Source.(pipeline.FileSource)
	if !ok {
		return fmt.Errorf("%s: %v holds no files to check", arg, ds)
	}
	problems, err := checkSamples(ctx, src)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: checking its files: %w", arg, err)
	}
	base := arg // a manifest's paths are relative to its folder
	if fi, err := os.Stat(arg); err == nil && !fi.IsDir() {
		base = filepath.Dir(arg)
	}
	var bad []string
	for i, p := range problems {
		if p != "" {
			f := filepath.Join(base, filepath.FromSlash(src.Path(i)))
			fmt.Fprintf(stdout, "bad %s: %s\n", f, p)
			bad = append(bad, f)
		}
	}
	fmt.Fprintf(stdout, "conveyor verify files=%d classes=%d bad=%d\n", src.Len(), len(src.Classes()), len(bad))
	return badVerdict(bad, src.Len(), "files", arg)
}

// verifiedShards are the WebDataset shards verify checks, opened.
type verifiedShards struct {
	src   *source.WebDatasetSource
	ds    *source.Dataset    // the dataset a URL opened; nil for shard files
	where func(k int) string // shard k as the user knows it: its path or URL
	close func()             // releases what opening took
}

// openVerifiedShards opens the shards args name, a dataset URL or shard files, with bad
// samples left for verify to list.
func openVerifiedShards(ctx context.Context, args []string) (*verifiedShards, error) {
	logf := func(string, ...any) {} // bad samples are listed by verify, once each
	if !datasetURL(args) {
		s, err := openShards(args, logf)
		if err != nil {
			return nil, err
		}
		return &verifiedShards{src: s.(*source.WebDatasetSource), where: func(k int) string { return args[k] }, close: func() {}}, nil
	}
	d, err := source.Open(ctx, args[0], &source.OpenOptions{WebDataset: &source.WebDatasetOptions{Logf: logf}})
	if err != nil {
		return nil, err
	}
	stop := func() bool { return false }
	if d.Store != nil {
		stop = closeOnCancel(ctx, d.Store.Cache)
	}
	closeAll := func() { stop(); d.Close() }
	w, ok := d.Source.(*source.WebDatasetSource)
	if !ok {
		closeAll()
		return nil, fmt.Errorf("%s: not WebDataset shards", args[0])
	}
	sh := verifiedOf(d, w)
	sh.close = closeAll
	return sh, nil
}

// verifiedOf is the WebDataset shards w of the dataset d, for verify: each shard named by
// its path or URL. Its close does nothing: d's opener closes d.
func verifiedOf(d *source.Dataset, w *source.WebDatasetSource) *verifiedShards {
	where := func(k int) string {
		if dir, ok := d.Store.Bucket.Local(); ok {
			return filepath.Join(dir, filepath.FromSlash(w.Shards()[k]))
		}
		return d.Store.Bucket.URL(w.Shards()[k])
	}
	return &verifiedShards{src: w, ds: d, where: where, close: func() {}}
}

// sampleChecker is one goroutine's decoder and buffers for checkSample.
type sampleChecker struct {
	dec *decode.Decoder
	buf []byte
	img *decode.Image
}

// checkSamples checks every sample of src on as many goroutines as Go may run, each
// with a decoder of its own, and returns each sample's problem ("" when good) in
// sample order. Cancelling ctx stops it starting more.
func checkSamples(ctx context.Context, src pipeline.FileSource) ([]string, error) {
	n := src.Len()
	problems := make([]string, n)
	// A buffered channel of checkers is both their free-list and the limit.
	free := make(chan *sampleChecker, runtime.GOMAXPROCS(0))
	defer func() {
		close(free)
		for c := range free {
			c.dec.Close()
		}
	}()
	for range cap(free) {
		dec, err := decode.NewDecoder(&decode.Options{})
		if err != nil {
			return nil, err
		}
		free <- &sampleChecker{dec: dec}
	}
	var g errgroup.Group
	g.SetLimit(cap(free))
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			c := <-free
			c.buf, c.img, problems[i] = checkSample(src, c.dec, i, c.buf, c.img)
			free <- c
			return nil
		})
	}
	g.Wait()
	return problems, nil
}

// checkSample reads and decodes sample i of src: "" when it is good, else why not.
func checkSample(src pipeline.FileSource, dec *decode.Decoder, i int, buf []byte, img *decode.Image) ([]byte, *decode.Image, string) {
	f, err := src.Open(i)
	if err != nil {
		return buf, img, err.Error()
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return buf, img, err.Error()
	}
	if st.Size() > maxVerifyBytes {
		return buf, img, fmt.Sprintf("image of %s, more than the %s verify reads", units.Bytes(st.Size()), units.Bytes(maxVerifyBytes))
	}
	buf = slices.Grow(buf[:0], int(st.Size()))[:st.Size()]
	if _, err := io.ReadFull(f, buf); err != nil {
		return buf, img, err.Error()
	}
	out, err := dec.Decode(img, buf)
	if err != nil {
		return buf, img, err.Error()
	}
	return buf, out, ""
}
