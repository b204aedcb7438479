package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/internal/units"
	"github.com/conveyor-ml/conveyor/objstore"
	"github.com/conveyor-ml/conveyor/pipeline"
	"github.com/conveyor-ml/conveyor/source"
	"golang.org/x/sync/errgroup"
)

// verifyUsage is verify's help, before the flags; %s is the converted dataset's info
// file.
const verifyUsage = `usage: conveyor verify DIR|SHARDS|TREE|MANIFEST [flags]

Checks the cache directory DIR, read-only: every shard's header and index, and every
record, read and decoded, against both its checksums. For a converted dataset it also
checks the directory against the manifest in DIR/%s: every shard it lists present,
of the recorded size and record count, its header and index unchanged.

Prints one line per problem: a damaged record, a damaged shard header or index, a
missing, truncated or changed shard. Exits 1 when there is any, or when the
dataset's conversion did not complete. Bytes after a shard's last whole record (a
writer killed mid-record) are reported, not counted as damage: readers ignore them.
So is a damaged record that a later conversion run stored again, which the dataset
no longer uses.

DIR may be an s3:// or http(s):// prefix holding a converted dataset: its shards
are fetched one by one into a shard cache in the system's temporary directory
(at most 16 GiB at once), checked, and evicted when space is needed.

DIR may also be WebDataset shards: .tar files, a pattern ('DIR/train-*.tar'), or a
brace list, local or remote ('s3://bucket/train-{000000..000099}.tar'). Every sample
is checked: its image member read and decoded whole, its label parsed, its members
grouped by key. Prints one line per bad sample, naming the shard and the sample's
key, and exits 1 when there is any. A folder holding .tar files (and no folders) is
read as its shards.

DIR may also be an ImageFolder tree (DIR/CLASS/*.jpg) or a manifest (.csv, .jsonl):
every file is read and decoded whole. Prints one line per bad file, its path and why,
then a summary line, and exits 1 when there is any.
`

func verify(args []string, stdout, stderr io.Writer) (err error) {
	ctx, stop := commandContext()
	defer stop()
	defer func() { err = interrupted(ctx, err) }()
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), verifyUsage, cache.InfoName)
		fmt.Fprintf(fs.Output(), "\nflags:\n")
		fs.PrintDefaults()
	}
	allowEmpty := fs.Bool(allowEmptyFlag, false, allowEmptyUsage)
	pos, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) > 1 && shardArgs(pos) {
		return verifyShards(ctx, pos, stdout, stderr)
	}
	if err := oneDir(pos); err != nil {
		return err
	}
	ds, err := openRemoteIndex(ctx, pos[0])
	if err != nil {
		return err
	}
	defer ds.close()
	if ds.remote == nil && shardArgs(pos) {
		return verifyShards(ctx, pos, stdout, stderr)
	}
	if ds.remote == nil {
		if err := checkLocal(pos[0]); err != nil {
			return err
		}
		if !cacheDir(pos[0]) {
			return verifySource(ctx, pos[0], *allowEmpty, stdout)
		}
		signalsKill()
	}
	name, dir := pos[0], ds.dir // errors call the dataset by the name the user gave
	if ds.remote != nil {
		stdout = renaming(stdout, dir, name)
		defer func() { fmt.Fprint(stderr, ds.fetched()) }()
	}
	c, info, err := openReadOnly(ds, stderr)
	if err != nil {
		return err
	}
	defer c.Close()
	pl := &problemList{ctx: ctx, stdout: stdout, reported: map[string]bool{}}
	rep, err := c.VerifyDataset(info, pl.add)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	orphaned, err := ds.orphans(ctx, info, pl.reported)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	for _, o := range orphaned {
		fmt.Fprintf(stdout, "orphan %s: %s does not list it (left by an earlier or lost run); readers ignore it: delete it%s\n", o, cache.InfoName, orphanAdvice(name, o))
	}
	fmt.Fprintf(stdout, "conveyor verify shards=%d records=%d bytes=%d damaged=%d unreadable_bytes=%d torn_shards=%d damaged_shards=%d lost_records=%d superseded=%d orphans=%d\n",
		rep.Shards, rep.Records, rep.Bytes, rep.Damaged-rep.Superseded, rep.Unreadable, rep.TornShards, rep.DamagedShards, rep.Lost, rep.Superseded, len(orphaned))
	if rep.TornShards > 0 {
		fmt.Fprintf(stdout, "%s end in %s past their last whole record (a writer stopped mid-record); readers ignore them\n",
			plural(rep.TornShards, "shard"), units.Bytes(rep.Unreadable))
	}
	incomplete := ""
	if info != nil {
		if incomplete = datasetState(dir, info); incomplete != "" {
			fmt.Fprintf(stdout, "incomplete: %s\n", incomplete)
		} else if !info.Manifested() {
			fmt.Fprintf(stdout, "no manifest: %s predates them (version 1), so shards were checked by themselves only; conveyor convert SRC %s again records one\n", cache.InfoName, dir)
		}
	}
	if err := verdict(name, c, info, &rep, pl.damaged); err != nil {
		return err
	}
	if incomplete != "" {
		return fmt.Errorf("%s is incomplete: %s", name, incomplete)
	}
	return nil
}

// problemList prints the problems a dataset's verification finds, one line each, and
// keeps what the verdict names.
type problemList struct {
	ctx      context.Context
	stdout   io.Writer
	damaged  []string        // the damaged records and shards, as the verdict names them
	reported map[string]bool // shards with a problem of their own, named already
}

// add prints one problem.
func (pl *problemList) add(p cache.Problem) {
	if pl.ctx.Err() != nil {
		return // the shard cache closed: every read fails, saying so
	}
	if p.Kind == cache.KindMissing && errors.Is(p.Err, objstore.ErrChanged) {
		// Fetched, but not the shard the manifest recorded (the shard cache
		// expects its size and CRC-32C, as training's does): refused whole.
		p.Kind = cache.KindChanged
	}
	if p.Kind != cache.KindRecord {
		pl.reported[filepath.Base(p.Shard)] = true
		fmt.Fprintf(pl.stdout, "%s %s: %v%s\n", problemKind(p.Kind), p.File(), p.Err, ofPart(p.File()))
		pl.damaged = append(pl.damaged, fmt.Sprintf("%s %s%s", p.Kind, filepath.Base(p.File()), ofPart(p.File())))
		return
	}
	path := p.Path
	if path == "" {
		path = "(unknown source)"
	}
	// The error names the record again; say it once.
	msg := strings.TrimPrefix(p.Err.Error(), fmt.Sprintf("cache: %s at %s+%d: ", p.Path, filepath.Base(p.Shard), p.Offset))
	if p.Superseded {
		fmt.Fprintf(pl.stdout, "superseded %s+%d %s: %s (stored again later; the dataset reads the later copy)\n", p.Shard, p.Offset, path, msg)
		return
	}
	fmt.Fprintf(pl.stdout, "damaged %s+%d %s: %s%s\n", p.Shard, p.Offset, path, msg, ofPart(p.Shard))
	pl.damaged = append(pl.damaged, path+ofPart(p.Shard))
}

// verdict is the error verify ends with when the dataset name is damaged: records,
// shards, or samples its manifest counts that no shard holds; it names up to three of
// the damaged.
func verdict(name string, c *cache.Cache, info *cache.Info, rep *cache.VerifyReport, damaged []string) error {
	var parts []string
	if n := rep.Damaged - rep.Superseded; n > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d records are damaged", n, rep.Records))
	}
	if rep.DamagedShards > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d shards are damaged or missing (%d records lost)", rep.DamagedShards, max(rep.Shards, rep.DamagedShards), rep.Lost))
	}
	if info.Manifested() && rep.DamagedShards == 0 {
		// No shard is damaged, yet the dataset may hold fewer samples than it counts
		// (opening it would refuse it): say so rather than pass it.
		if n := len(c.Records(info.Spec)); n < info.Stored {
			parts = append(parts, fmt.Sprintf("%d of the %d samples %s counts are in none of its shards", info.Stored-n, info.Stored, cache.InfoName))
		}
	}
	if len(parts) == 0 {
		return nil
	}
	const shown = 3
	names := strings.Join(damaged[:min(len(damaged), shown)], ", ")
	if len(damaged) > shown {
		names += fmt.Sprintf(", ... %d more", len(damaged)-shown)
	}
	if names == "" {
		return fmt.Errorf("%s in %s", strings.Join(parts, "; "), name)
	}
	return fmt.Errorf("%s in %s: %s", strings.Join(parts, "; "), name, names)
}

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

// maxVerifyBytes is the largest image member verify reads (the loader refuses one larger
// than its read budget).
const maxVerifyBytes = 1 << 30

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

// ofPart is " (part i/N)" for a file written by a part of a conversion in parts, so
// that whoever reruns it knows which: "" otherwise.
func ofPart(file string) string {
	if p, ok := cache.ShardPart(file); ok {
		return " (part " + p.String() + ")"
	}
	return ""
}

// problemKind is how verify and inspect name a kind of damage to a shard.
func problemKind(k cache.Kind) string {
	switch k {
	case cache.KindHeader, cache.KindIndex:
		return "damaged " + string(k)
	}
	return string(k)
}

// orphans names the shard and index files of the converted dataset whose Info is info
// that its manifest does not list, though the conversion (or the part whose name they
// carry) has finished: files of an earlier or lost run, which readers ignore. Files of
// an unfinished part or conversion are not orphans (it may still record them), nor are
// shards in reported, whose problems are named already. A local dataset's directory is
// read; an s3:// prefix is listed (a web server lists nothing: none are found there).
// Local verify read and counted such shards before, and S3 verify fetched only what the
// manifest names, so both now name them alike, and neither fails for them.
func (d *remoteDataset) orphans(ctx context.Context, info *cache.Info, reported map[string]bool) ([]string, error) {
	if !info.Manifested() {
		return nil, nil
	}
	var names []string
	switch {
	case d.remote == nil:
		ents, err := os.ReadDir(d.dir)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			names = append(names, e.Name())
		}
	case strings.HasPrefix(d.url, "s3://"):
		objs, err := d.bucket.List(ctx, "")
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			names = append(names, o.Name)
		}
	}
	listed := map[string]bool{}
	for _, m := range info.Shards {
		listed[strings.TrimSuffix(m.Name, ".shard")] = true
	}
	unfinished := map[string]bool{}
	for _, p := range info.Unfinished {
		unfinished[p] = true
	}
	var out []string
	for _, n := range names {
		base, ok := strings.CutSuffix(n, ".shard")
		if !ok {
			base, ok = strings.CutSuffix(n, ".idx")
		}
		if !ok || strings.ContainsAny(n, `/\`) || strings.HasPrefix(n, ".") || listed[base] || reported[base+".shard"] {
			continue
		}
		if p, parted := cache.ShardPart(n); parted && p.Count == info.Parts {
			if unfinished[p.String()] {
				continue
			}
		} else if !info.Complete {
			continue
		}
		out = append(out, d.name(filepath.Join(d.dir, n)))
	}
	return out, nil
}

// orphanAdvice says how to delete the orphan file o of the dataset at name: a convert of
// the part that left it, for a dataset converted in parts (its shards' names say which).
func orphanAdvice(name, o string) string {
	if !strings.HasPrefix(name, "s3://") {
		return ""
	}
	part := ""
	if p, ok := cache.ShardPart(path.Base(o)); ok {
		part = " --part " + p.String()
	}
	return " (conveyor convert SRC " + name + part + " --delete-orphans deletes it)"
}
