package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/internal/units"
	"github.com/conveyor-ml/conveyor/objstore"
	"github.com/conveyor-ml/conveyor/pipeline"
)

// reportName is the file, in the destination, that lists the last run's bad files.
const reportName = "convert-report.txt"

// convertUsage is convert's help, before the flags; its %s are the report's and the
// dataset info's file names.
const convertUsage = `usage: conveyor convert SRC DST [flags]

Decodes every image of the ImageFolder tree SRC (SRC/CLASS/*.jpg, one folder per class),
resizes it and stores its pixels in the cache directory DST, which "conveyor bench DST" and
pipeline.OpenConverted read without decoding. A rerun skips the files already stored,
so an interrupted conversion (Ctrl-C) resumes. Files that fail to decode are listed in
DST/%s and do not change the exit status.

DST/%s says whether the conversion completed and, once it ends, lists its shards
with their sizes, record counts and checksums, which bench and verify check DST
against; bench refuses a DST whose conversion did not complete or is still running
(--allow-incomplete trains on it anyway). One conversion writes DST at a time: a
second one started while the first runs exits at once, naming the first's pid.

--part i/N converts only part i (0 ≤ i < N) of SRC's sorted listing, the files
[i·n/N, (i+1)·n/N) of n, so that N processes convert SRC into one DST together (a
Kubernetes Indexed Job, a Slurm array; see examples/convert-parts). Each part writes
only files named after it (part-i-of-N-*.shard, dataset.part-i-of-N.json,
convert-report.part-i-of-N.txt, i padded with zeros to N's width); DST opens once every part has finished, with no
merge step, and holds what one conversion would, in the same order; verify names a
missing part. A rerun of a part resumes it. --part env/N takes i from
$JOB_COMPLETION_INDEX (Kubernetes) or $SLURM_ARRAY_TASK_ID (Slurm: the array numbers
its tasks 0 to N-1, and a rerun of task I, sbatch --array=I, converts part I); bare
--part env takes N from $SLURM_ARRAY_TASK_COUNT, in a full array 0 to N-1 only.

DST may be s3://bucket/prefix: the conversion is written to a local staging directory
(--staging, or one named after DST and the part under the system's temporary
directory, removed once uploaded), then uploaded: shards and indexes, then the part's
record, then dataset.json, which the first part creates. A rerun resumes, uploading
only the shards missing or of another size; one whose staging directory is gone converts
nothing if the upload completed, and is refused otherwise (use --staging, or
--delete-orphans to convert again and delete what the lost run stored). After an
upload, or over a complete one, shards of this conversion that neither its staging
directory nor its stored record names (a lost run's) are reported, and deleted with
--delete-orphans; not while another run of the same part is live (each run keeps a
lease object, convert.*.lease, under DST while it runs). Credentials and endpoint come from the AWS
configuration (AWS_ENDPOINT_URL for S3-compatible stores).

flags:
`

func convert(args []string, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("convert", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), convertUsage, reportName, cache.InfoName)
		fs.PrintDefaults()
	}
	f := newConvertFlags(fs)
	pos, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	if err := f.check(pos); err != nil {
		return err
	}
	src, absSrc, err := f.openSource()
	if err != nil {
		return err
	}

	ctx, stop := commandContext()
	defer stop()
	defer func() { err = interrupted(ctx, err) }()
	var up *uploadTarget
	if f.remote {
		up = &uploadTarget{url: f.dst}
		defer up.close(ctx, stderr)
		done, err := f.prepareUpload(ctx, up, stderr)
		if err != nil {
			return err
		}
		if done {
			fmt.Fprintf(stdout, "conveyor convert: %s already holds this conversion, complete; nothing to convert\n", up.url)
			// The orphans are looked for against the stored record, which names
			// every file the conversion uses: so --delete-orphans, as advised, works
			// from any staging directory.
			return orphans(ctx, up.bucket, f.dst, up.url, f.part, up.lease, f.deleteOrphans, stdout, stderr)
		}
	}

	pr := newProgress(stderr)
	c, err := cache.Open(f.dst, &cache.Options{Codec: f.cd, Quality: f.quality, MaxBytes: int64(f.maxBytes), ShardBytes: int64(f.shardBytes), ShardPrefix: f.part.ShardPrefix(), Logf: pr.logf})
	if err != nil {
		return err
	}
	defer c.Close()
	rep, err := f.run(ctx, src, c, absSrc, up, pr)
	if rep == nil {
		return err
	}
	err = f.report(stdout, rep, c, err)
	if up == nil || err != nil && !errors.Is(err, cache.ErrFull) {
		return err
	}
	// A conversion stopped by --max-bytes is uploaded as it is: its record says so.
	return f.upload(ctx, up, c, err, stdout, stderr)
}

// convertFlags are convert's flags, and what check makes of them.
type convertFlags struct {
	size, quality, workers int
	codec, decoder         string
	maxBytes, shardBytes   byteSize
	partFlag, staging      string
	deleteOrphans          bool

	// Set by check.
	srcDir, dst string // dst: the staging directory once prepareUpload has run
	remote      bool   // dst is an object-store URL
	cd          cache.Codec
	part        cache.Part
	dopts       decode.Options
}

// newConvertFlags defines convert's flags on fs.
func newConvertFlags(fs *flag.FlagSet) *convertFlags {
	f := &convertFlags{}
	fs.IntVar(&f.size, "size", 256, "resize so the shorter side is this many pixels (never enlarging); 0 stores full size")
	fs.StringVar(&f.codec, "codec", string(cache.S2), fmt.Sprintf("how pixels are stored: %v", cache.Codecs))
	fs.IntVar(&f.quality, "quality", 90, "JPEG quality for --codec jpeg, 1 to 100")
	fs.IntVar(&f.workers, "workers", runtime.GOMAXPROCS(0), "files decoded at once")
	fs.Var(&f.maxBytes, "max-bytes", "bound on DST's size, e.g. 200G; conversion stops when full (0: none)")
	fs.Var(&f.shardBytes, "shard-bytes", "size at which a new shard is started, e.g. 256M (at least 64K; 0: 1 GiB). A dataset read from object storage streams a shard at a time: smaller shards let a smaller shard cache hold the shards read at once")
	fs.StringVar(&f.decoder, "decoder", decode.BackendAuto, "JPEG decoder: auto (libjpeg-turbo when it loads), go or turbo")
	fs.StringVar(&f.partFlag, "part", "", "convert part i of N of SRC: i/N, env or env/N (see above); default all of it")
	fs.BoolVar(&f.deleteOrphans, "delete-orphans", false, "for an s3:// DST: once uploaded, delete the shards and indexes of this conversion (or part) that its staging directory does not hold, and abort their unfinished multipart uploads: what a run whose staging directory was lost left behind. It also lets such a run's incomplete conversion be converted again from a new staging directory. Nothing is deleted while another run of the same part is live")
	fs.StringVar(&f.staging, "staging", "", "for an s3:// DST, the local directory the conversion is written to before it is uploaded, and kept; a rerun with it resumes (default: a directory named after DST and the part under the system's temporary directory, removed once uploaded)")
	return f
}

// check takes SRC and DST from pos, parses the flags' values and refuses any out of
// range, naming the flag; the first problem is the one reported.
func (f *convertFlags) check(pos []string) error {
	switch len(pos) {
	case 0:
		return usagef("missing SRC and DST: want conveyor convert SRC DST")
	case 1:
		return usagef("missing DST: want conveyor convert SRC DST")
	case 2:
	default:
		return usagef("want SRC and DST, got %d arguments: %q", len(pos), pos)
	}
	f.srcDir, f.dst = pos[0], pos[1]
	f.remote = objstore.IsRemote(f.dst)
	if f.deleteOrphans && !f.remote {
		return usagef("--delete-orphans is for an s3:// DST; %s is local", f.dst)
	}
	if f.staging != "" && !f.remote {
		return usagef("--staging is for an s3:// DST; %s is local", f.dst)
	}
	var err error
	if f.cd, err = cache.ParseCodec(f.codec); err != nil {
		return usagef("--codec: %v", err)
	}
	switch {
	case f.size < 0:
		return usagef("--size %d < 0", f.size)
	case f.workers < 1:
		return usagef("--workers %d < 1", f.workers)
	case f.quality < 1 || f.quality > 100:
		return usagef("--quality %d not in [1, 100]", f.quality)
	}
	if f.shardBytes != 0 && f.shardBytes < 64<<10 {
		return usagef("--shard-bytes %d: at least 64Ki (65536)", f.shardBytes)
	}
	if f.part, err = parsePart(f.partFlag, os.Getenv); err != nil {
		return usagef("--part: %s", strings.TrimPrefix(err.Error(), "cache: "))
	}
	f.dopts = decode.Options{Backend: f.decoder}
	if f.size > 0 {
		f.dopts.Resize = decode.ResizePolicy{Mode: decode.ResizeShorter, Size: f.size}
	}
	if err := f.dopts.EnsureDefaults().Validate(); err != nil {
		return usagef("--decoder: %v", err)
	}
	return nil
}

// openSource opens the image folder SRC, refusing a local DST inside it; absSrc is its
// absolute path, which the conversion records.
func (f *convertFlags) openSource() (src pipeline.Source, absSrc string, err error) {
	if err := checkDir(f.srcDir); err != nil {
		return nil, "", err
	}
	if absSrc, err = filepath.Abs(f.srcDir); err != nil {
		return nil, "", err
	}
	absDst, err := filepath.Abs(f.dst)
	if err != nil {
		return nil, "", err
	}
	if rel, err := filepath.Rel(absSrc, absDst); !f.remote && err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		// It would be listed as a class of the next run, shifting every label.
		return nil, "", fmt.Errorf("DST %s is inside SRC %s: it would be listed as a class of SRC; choose a DST outside it", f.dst, f.srcDir)
	}
	if src, err = openImageFolder(f.srcDir); err != nil {
		return nil, "", err
	}
	return src, absSrc, nil
}

// uploadTarget is the s3:// DST of a conversion: the bucket, and the lease that marks
// this run as live there.
type uploadTarget struct {
	url    string // DST as given
	bucket *objstore.Bucket
	lease  *pipeline.Lease
}

// close gives the lease back and closes the bucket.
func (up *uploadTarget) close(ctx context.Context, stderr io.Writer) {
	if up.lease != nil {
		if lerr := up.lease.Close(ctx); lerr != nil {
			fmt.Fprintf(stderr, "conveyor convert: %v\n", lerr)
		}
	}
	if up.bucket != nil {
		up.bucket.Close()
	}
}

// prepareUpload opens the destination bucket, sets f.dst to the staging directory,
// checks that the run can resume there and takes the lease; done says the bucket
// already holds this conversion, complete. Otherwise the staging directory is made,
// and for a part filled with the stored dataset record.
func (f *convertFlags) prepareUpload(ctx context.Context, up *uploadTarget, stderr io.Writer) (done bool, err error) {
	if up.bucket, err = openUploadBucket(ctx, up.url); err != nil {
		return false, err
	}
	if f.dst, err = stagingDir(f.staging, up.url, f.part); err != nil {
		return false, err
	}
	var other *otherStagingError
	spec, err := pipeline.ConvertSpec(f.dopts)
	if err != nil {
		return false, err
	}
	done, err = checkResumable(ctx, up.bucket, f.dst, up.url, f.part, spec, f.cd)
	switch {
	case errors.As(err, &other) && f.deleteOrphans:
		fmt.Fprintf(stderr, "conveyor convert: %v; converting again (--delete-orphans: the other run's files are deleted once this one is uploaded)\n", err)
	case err != nil:
		return false, err
	}
	// Marks this run as live, so that another run of this part sweeping for
	// orphans leaves this one's files alone (pipeline.Lease).
	if up.lease, err = pipeline.AcquireLease(ctx, up.bucket, f.part, f.dst); err != nil {
		return false, fmt.Errorf("%s: %w", up.url, err)
	}
	if done {
		return true, nil
	}
	if err := os.MkdirAll(f.dst, 0o755); err != nil {
		return false, fmt.Errorf("--staging: %w", err)
	}
	if !f.part.Whole() {
		if err := fetchRemoteInfo(ctx, up.bucket, f.dst); err != nil {
			return false, err
		}
	}
	return false, nil
}

// run converts src into c. A nil report means nothing was converted; otherwise err
// says how the conversion ended, worded for the command line.
func (f *convertFlags) run(ctx context.Context, src pipeline.Source, c *cache.Cache, absSrc string, up *uploadTarget, pr *progress) (*pipeline.ConvertReport, error) {
	rep, err := pipeline.Convert(ctx, src, c, &pipeline.ConvertOptions{
		Decode: f.dopts, Workers: f.workers, Source: absSrc, Part: f.part, Progress: func(cp pipeline.ConvertProgress) { pr.update(convertState(cp)) }, Logf: pr.logf,
	})
	pr.finish(true)
	if up != nil && err != nil {
		// dataset.json in the staging directory is a copy of the one stored: name that.
		err = renamedErr(err, filepath.Join(f.dst, cache.InfoName), up.bucket.URL(cache.InfoName))
	}
	if rep == nil {
		return nil, err
	}
	switch {
	case ctx.Err() != nil:
		err = fmt.Errorf("stopped after %d of %d files; run the same command again to resume", rep.Done, rep.Total)
		if !f.part.Whole() {
			err = fmt.Errorf("part %v %w", f.part, err)
		}
	case errors.Is(err, cache.ErrFull):
		err = fmt.Errorf("%w (raise --max-bytes and run again to resume)", err)
	}
	return rep, err
}

// report writes the list of bad files into DST and prints the run's summary line; it
// returns err with any failure to write the list joined.
func (f *convertFlags) report(stdout io.Writer, rep *pipeline.ConvertReport, c *cache.Cache, err error) error {
	reportPath := filepath.Join(f.dst, reportName)
	if !f.part.Whole() {
		reportPath = filepath.Join(f.dst, partReportName(f.part))
	}
	if rerr := writeReport(reportPath, f.srcDir, f.dst, rep); rerr != nil {
		err = errors.Join(err, rerr)
	}
	secs := rep.Elapsed.Seconds()
	fmt.Fprintf(stdout, "conveyor convert stored=%d skipped=%d bad=%d seconds=%.2f images_per_s=%.1f bytes=%d dir=%s",
		rep.Stored, rep.Skipped, rep.Bad, secs, perSecond(rep.Stored, secs), c.Stats().Bytes, f.dst)
	if !f.part.Whole() {
		fmt.Fprintf(stdout, " part=%v", f.part)
	}
	if rep.Bad > 0 {
		fmt.Fprintf(stdout, " report=%s", reportPath)
	}
	fmt.Fprintln(stdout)
	return err
}

// upload sends the staging directory to the bucket, reports orphaned files and, unless
// --staging kept it, removes the staging directory; err is how the conversion ended.
func (f *convertFlags) upload(ctx context.Context, up *uploadTarget, c *cache.Cache, err error, stdout, stderr io.Writer) error {
	sent, uerr := pipeline.UploadConverted(ctx, f.dst, up.bucket, f.part, up.lease)
	fmt.Fprintf(stdout, "conveyor convert uploaded=%d unchanged=%d bytes=%d url=%s\n", sent.Uploaded, sent.Skipped, sent.Bytes, up.url)
	if errors.Is(uerr, pipeline.ErrOtherConversion) {
		return errors.Join(err, uerr) // not resumable: it names what to do
	}
	if uerr != nil {
		return errors.Join(err, fmt.Errorf("uploading %s to %s: %w; run the same command again to resume", f.dst, up.url, uerr))
	}
	if oerr := orphans(ctx, up.bucket, f.dst, up.url, f.part, up.lease, f.deleteOrphans, stdout, stderr); oerr != nil {
		return errors.Join(err, oerr)
	}
	if f.staging == "" && err == nil {
		c.Close()
		if rerr := os.RemoveAll(f.dst); rerr != nil {
			fmt.Fprintf(stderr, "conveyor convert: removing the staging directory: %v\n", rerr)
		}
	}
	return err
}

// orphans looks, after an upload, for the files of this conversion (or part) under the
// prefix that the staging directory dir does not hold — left by a run whose staging
// directory was lost — and deletes them when del is set, or says how to.
func orphans(ctx context.Context, b *objstore.Bucket, dir, url string, part cache.Part, lease *pipeline.Lease, del bool, stdout, stderr io.Writer) error {
	o, err := pipeline.ConvertedOrphans(ctx, b, dir, part, lease)
	if err != nil {
		return fmt.Errorf("looking for orphaned files under %s: %w", url, err)
	}
	if len(o.Live) > 0 {
		what := "this conversion"
		if !part.Whole() {
			what = "part " + part.String()
		}
		fmt.Fprintf(stderr, "conveyor convert: another run converts %s into %s (%s): orphaned files are not looked for while it runs, since its files would look orphaned; run again once it has ended to look for them (--delete-orphans to delete them)\n",
			what, url, strings.Join(o.Live, "; "))
		return nil
	}
	if o.Unlisted != nil {
		fmt.Fprintf(stderr, "conveyor convert: %v; taken as none under %s, so uploads a lost run left unfinished are neither reported nor aborted\n", o.Unlisted, url)
	}
	if o.Len() == 0 {
		return nil
	}
	if !del {
		fmt.Fprintf(stderr, "conveyor convert: %s holds %d shard or index files (%s) and %d unfinished uploads of this conversion that it did not write, e.g. %s: left by a run whose staging directory was lost; readers ignore them. Run again with --delete-orphans to delete them\n",
			url, len(o.Objects), units.Bytes(o.Bytes()), len(o.Uploads), orphanName(o))
		return nil
	}
	if err := o.Delete(ctx, b); errors.Is(err, pipeline.ErrLiveRun) {
		fmt.Fprintf(stderr, "conveyor convert: orphaned files under %s: %v; run again once it has ended to delete them\n", url, err)
		return nil
	} else if err != nil {
		return fmt.Errorf("deleting orphaned files under %s: %w", url, err)
	}
	fmt.Fprintf(stdout, "conveyor convert deleted=%d bytes=%d aborted_uploads=%d url=%s\n", len(o.Objects), o.Bytes(), len(o.Uploads), url)
	return nil
}

func orphanName(o *pipeline.Orphans) string {
	if len(o.Objects) > 0 {
		return o.Objects[0].Name
	}
	return o.Uploads[0].Name + " (upload)"
}

// openUploadBucket opens the s3:// destination of a conversion; http(s) is read-only.
func openUploadBucket(ctx context.Context, dst string) (*objstore.Bucket, error) {
	loc, err := objstore.ParseURL(dst)
	if err != nil {
		return nil, err
	}
	if loc.Scheme != "s3" {
		return nil, fmt.Errorf("DST %s: %s is read-only; convert to a local directory or an s3:// prefix", dst, loc.Scheme)
	}
	return objstore.OpenBucket(ctx, strings.TrimSuffix(dst, "/")+"/", nil)
}

// stagingDir returns the local directory an s3:// conversion writes to: flag when
// given, else one under the system's temporary directory named after the URL and part,
// so that a rerun of the same command finds it and resumes.
func stagingDir(flag, url string, part cache.Part) (string, error) {
	dir := flag
	if dir == "" {
		h := sha256.Sum256([]byte(strings.TrimSuffix(url, "/") + "\x00" + part.String()))
		dir = filepath.Join(os.TempDir(), "conveyor-convert-"+hex.EncodeToString(h[:8]))
	}
	return dir, nil
}

// checkResumable checks an s3:// destination that already holds the record of this
// conversion (dataset.json, or the part's record) when the staging directory dir does
// not: done when the record says the conversion (or part) completed with this spec and
// codec, an error when it completed with others, and an error otherwise, since shard names are unique to the run that made them and a new
// conversion would add a second copy of every sample beside the first.
func checkResumable(ctx context.Context, b *objstore.Bucket, dir, url string, part cache.Part, spec string, codec cache.Codec) (done bool, err error) {
	name := cache.InfoName
	if !part.Whole() {
		name = part.PartInfoName()
	}
	if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
		return false, nil
	}
	tmp, err := os.CreateTemp("", "conveyor-record-*")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	_, err = b.DownloadMax(ctx, name, tmp, cache.MaxInfoBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	}
	data, err := os.ReadFile(tmp.Name())
	if err != nil {
		return false, err
	}
	var info cache.Info
	if err := json.Unmarshal(data, &info); err != nil {
		return false, fmt.Errorf("%s: %w", b.URL(name), err)
	}
	if info.Complete && (info.Spec != spec || info.Codec != codec) {
		// Not this conversion: "nothing to do" would leave the user believing it is.
		return false, fmt.Errorf("%s holds a complete conversion (%s) of spec %q, codec %s, but this run converts as %q, codec %s: convert into another prefix, or run with the flags that made it", url, b.URL(name), info.Spec, info.Codec, spec, codec)
	}
	if info.Complete {
		return true, nil
	}
	what := "a converted dataset"
	if !part.Whole() {
		what = "part " + part.String() + " of a converted dataset"
	}
	return false, &otherStagingError{fmt.Sprintf("%s already holds %s (%s), incomplete, converted through another staging directory than %s: rerun with --staging naming the directory that made it to resume, or with --delete-orphans to convert again and delete what that run stored", url, what, b.URL(name), dir)}
}

// renamedErr is err with each from in its message replaced by to (a staging copy's path
// by the URL it was fetched from); errors.Is and errors.As still see err.
func renamedErr(err error, from, to string) error {
	msg := err.Error()
	if !strings.Contains(msg, from) {
		return err
	}
	return &renamedError{msg: strings.ReplaceAll(msg, from, to), err: err}
}

type renamedError struct {
	msg string
	err error
}

func (e *renamedError) Error() string { return e.msg }
func (e *renamedError) Unwrap() error { return e.err }

// otherStagingError is checkResumable's refusal of an incomplete conversion made through
// another staging directory.
type otherStagingError struct{ msg string }

func (e *otherStagingError) Error() string { return e.msg }

// fetchRemoteInfo copies the dataset.json already stored in b into a part's staging
// directory dir, when dir has none, so that the conversion checks that this part
// converts as the others did (cache.CreatePartedInfo).
func fetchRemoteInfo(ctx context.Context, b *objstore.Bucket, dir string) error {
	path := filepath.Join(dir, cache.InfoName)
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if _, err := b.Stat(ctx, cache.InfoName); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	return objstore.Mirror(ctx, b, []objstore.Object{{Name: cache.InfoName, Size: cache.MaxInfoBytes}}, dir, 1)
}

// writeReport replaces path with the list of rep's bad files: a header line, then one
// "path<TAB>error" line per file, the path joined to srcDir.
func writeReport(path, srcDir, dst string, rep *pipeline.ConvertReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# conveyor convert %s %s at %s: %d files, %d done, %d stored, %d skipped, %d bad\n",
		srcDir, dst, time.Now().UTC().Format(time.RFC3339), rep.Total, rep.Done, rep.Stored, rep.Skipped, rep.Bad)
	clean := strings.NewReplacer("\t", " ", "\n", " ", "\r", " ")
	for _, e := range rep.BadFiles {
		msg := "unknown error"
		if e.Err != nil {
			msg = e.Err.Error()
		}
		fmt.Fprintf(&b, "%s\t%s\n", filepath.Join(srcDir, filepath.FromSlash(e.Path)), clean.Replace(msg))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	return nil
}

// partReportName is the file, in the destination, that lists part p's bad files.
func partReportName(p cache.Part) string {
	return "convert-report." + strings.TrimSuffix(p.ShardPrefix(), "-") + ".txt"
}

// parsePart parses --part: "" (the whole of SRC), "i/N", "env" or "env/N". env takes i
// from JOB_COMPLETION_INDEX (a Kubernetes Indexed Job) or SLURM_ARRAY_TASK_ID (a Slurm
// array, which must number its tasks 0 to N-1). With env/N, i is the task ID as it is,
// so rerunning one task (sbatch --array=I) converts part I. Bare env takes N from
// SLURM_ARRAY_TASK_COUNT (Kubernetes sets no variable for it) and only from a full
// array, 0 to COUNT-1: in a rerun of some tasks the count is not the number of parts.
func parsePart(s string, getenv func(string) string) (cache.Part, error) {
	if s == "" {
		return cache.Part{}, nil
	}
	env, count, ok := strings.Cut(s, "/")
	if env != "env" {
		return cache.ParsePart(s)
	}
	atoi := func(name string) (int, error) {
		v, err := strconv.Atoi(getenv(name))
		if err != nil {
			return 0, fmt.Errorf("%s: $%s is %q, not an integer", s, name, getenv(name))
		}
		return v, nil
	}
	var index int
	var err error
	switch {
	case getenv("JOB_COMPLETION_INDEX") != "":
		index, err = atoi("JOB_COMPLETION_INDEX")
	case getenv("SLURM_ARRAY_TASK_ID") != "":
		index, err = atoi("SLURM_ARRAY_TASK_ID")
		if err != nil || ok {
			break
		}
		if getenv("SLURM_ARRAY_TASK_COUNT") == "" {
			return cache.Part{}, fmt.Errorf("%s: $SLURM_ARRAY_TASK_COUNT is not set; give the number of parts as env/N", s)
		}
		var lo, n, hi int
		if lo, err = atoi("SLURM_ARRAY_TASK_MIN"); err != nil {
			break
		}
		if n, err = atoi("SLURM_ARRAY_TASK_COUNT"); err != nil {
			break
		}
		hi = lo + n - 1
		if getenv("SLURM_ARRAY_TASK_MAX") != "" {
			if hi, err = atoi("SLURM_ARRAY_TASK_MAX"); err != nil {
				break
			}
		}
		if lo != 0 || hi != n-1 {
			return cache.Part{}, fmt.Errorf("%s: the Slurm array runs tasks %d to %d, %d of them, not all the parts 0 to COUNT-1 (a rerun of some tasks?): give the number of parts as env/N; the array must number its tasks 0 to N-1", s, lo, hi, n)
		}
		count = strconv.Itoa(n)
	default:
		return cache.Part{}, fmt.Errorf("%s: neither $JOB_COMPLETION_INDEX (a Kubernetes Indexed Job) nor $SLURM_ARRAY_TASK_ID (a Slurm array) is set; give the part as i/N", s)
	}
	if err != nil {
		return cache.Part{}, err
	}
	if !ok && count == "" {
		return cache.Part{}, fmt.Errorf("%s: $SLURM_ARRAY_TASK_COUNT is not set; give the number of parts as env/N", s)
	}
	return cache.ParsePart(fmt.Sprintf("%d/%s", index, count))
}

func perSecond(n int, secs float64) float64 {
	if secs <= 0 {
		return 0
	}
	return float64(n) / secs
}

// convertState is what convert's progress bar shows. Its rate counts files decoded
// (stored or bad), not ones skipped as already stored, so the ETA assumes the files left
// go at that rate.
func convertState(p pipeline.ConvertProgress) progressState {
	return progressState{Done: p.Done, Total: p.Total, Rate: perSecond(p.Stored+p.Bad, p.Elapsed.Seconds()), Bad: p.Bad, ShowBad: true}
}
