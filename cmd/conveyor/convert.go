package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
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
source.OpenConverted read without decoding. A rerun skips the files already stored,
so an interrupted conversion (Ctrl-C) resumes. Files that fail to decode are listed in
DST/%s and do not change the exit status. A DST holding a dataset of another spec or
codec (another --size, --codec or decoder) is refused: --replace deletes that dataset's
files and converts anew (conveyor inspect DST --prune deletes the shards of other specs
that earlier conversions left).

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

	if !f.remote {
		if err := f.checkSpec(stderr); err != nil {
			return err
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
	allowEmpty             bool // --allow-empty-classes
	replace                bool // --replace

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
	f.size, f.quality, f.workers = 256, 90, runtime.GOMAXPROCS(0)
	fs.Var(intFlag{&f.size, "a whole number of pixels, e.g. 256 (0: full size)"}, "size", "resize so the shorter side is this many pixels (never enlarging); 0 stores full size")
	fs.StringVar(&f.codec, "codec", string(cache.S2), fmt.Sprintf("how pixels are stored: %v", cache.Codecs))
	fs.Var(intFlag{&f.quality, "a whole number from 1 to 100, e.g. 90"}, "quality", "JPEG quality for --codec jpeg, 1 to 100")
	fs.Var(intFlag{&f.workers, "a whole number of workers, e.g. 4"}, "workers", "files decoded at once")
	fs.BoolVar(&f.allowEmpty, allowEmptyFlag, false, allowEmptyUsage)
	fs.BoolVar(&f.replace, "replace", false, "when DST holds a dataset of another spec or codec (another --size, --codec or decoder), delete its shards, indexes and records and convert SRC anew; without it such a DST is refused")
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
	if f.replace && f.remote {
		return usagef("--replace is for a local DST; convert into another prefix than %s", f.dst)
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
	if src, err = openImageFolder(f.srcDir, f.allowEmpty); err != nil {
		return nil, "", err
	}
	return src, absSrc, nil
}

// checkSpec refuses a local DST holding a dataset, converted whole, of another spec or
// codec than this whole conversion's, which converting into would switch to the new spec and leave the old one's
// files in place; with --replace it deletes that dataset's files instead, so the run
// converts SRC anew.
func (f *convertFlags) checkSpec(stderr io.Writer) error {
	if !f.part.Whole() {
		return nil // the parts' record refuses another spec (cache.SamePartedInfo)
	}
	info, err := cache.ReadInfo(f.dst)
	if errors.Is(err, fs.ErrNotExist) {
		// Shards without dataset.json are a loader's decoded-sample cache (bench --cache,
		// Config.SampleCache): a conversion writes dataset.json before its first shard.
		if shards, _ := filepath.Glob(filepath.Join(f.dst, "*.shard")); len(shards) > 0 {
			return fmt.Errorf("%s holds a loader's sample cache (%s, no %s), not a converted dataset: convert into another directory", f.dst, plural(len(shards), "shard"), cache.InfoName)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if info.Parts > 0 {
		return nil // converting it whole is refused, naming its parts
	}
	spec, err := (&pipeline.ConvertOptions{Decode: f.dopts}).Spec()
	if err != nil {
		return err
	}
	if info.Spec == spec && info.Codec == f.cd {
		return nil
	}
	if !f.replace {
		return fmt.Errorf("%s holds a dataset of spec %q, codec %s, but this run converts as %q, codec %s: run with the flags that made it to resume it, convert into another DST, or pass --replace to delete it and convert anew",
			f.dst, info.Spec, info.Codec, spec, f.cd)
	}
	if holder, running := cache.Converting(f.dst); running {
		return fmt.Errorf("%s: a conversion is running into it (%s); --replace deletes nothing while one runs", f.dst, holder)
	}
	removed, bytes, err := removeDataset(f.dst)
	fmt.Fprintf(stderr, "conveyor convert: --replace: deleted %s (%s) of %s's dataset of spec %q, codec %s\n", plural(removed, "file"), units.Bytes(bytes), f.dst, info.Spec, info.Codec)
	return err
}

// removeDataset deletes the files of the converted dataset in dir, and only those: the
// shards the cache package recognises (cache.Cache.ShardSpecs) with their indexes,
// dataset.json and the conversion's report. Other files stay, whatever their names
// (another tool's .idx, a user's notes). Symbolic links are removed, not their targets,
// and counted by their own size.
func removeDataset(dir string) (removed int, bytes int64, err error) {
	c, err := cache.Open(dir, &cache.Options{ReadOnly: true, Logf: func(string, ...any) {}})
	if err != nil {
		return 0, 0, err
	}
	var names []string
	for shard := range c.ShardSpecs() {
		names = append(names, shard, strings.TrimSuffix(shard, ".shard")+".idx")
	}
	c.Close()
	slices.Sort(names)
	names = append(names, reportName, cache.InfoName) // dataset.json last: the dataset reads as gone only when its shards are
	for _, n := range names {
		p := filepath.Join(dir, n)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return removed, bytes, err
		}
		if fi.IsDir() {
			continue
		}
		if err := os.Remove(p); err != nil {
			return removed, bytes, err
		}
		removed++
		bytes += fi.Size()
	}
	return removed, bytes, nil
}

// intFlag is an integer flag whose parse error says what is wanted.
type intFlag struct {
	p    *int
	want string
}

func (f intFlag) String() string {
	if f.p == nil {
		return "0"
	}
	return strconv.Itoa(*f.p)
}

func (f intFlag) Set(s string) error {
	v, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("want %s", f.want)
	}
	*f.p = v
	return nil
}

func (f intFlag) Get() any { return *f.p }

// run converts src into c. A nil report means nothing was converted; otherwise err
// says how the conversion ended, worded for the command line.
func (f *convertFlags) run(ctx context.Context, src pipeline.Source, c *cache.Cache, absSrc string, up *uploadTarget, pr *progress) (*pipeline.ConvertReport, error) {
	rep, err := pipeline.Convert(ctx, src, c, &pipeline.ConvertOptions{
		Decode: f.dopts, Workers: f.workers, Source: absSrc, Part: f.part, Progress: func(cp pipeline.ConvertReport) { pr.update(convertState(cp)) }, Logf: pr.logf,
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
func convertState(p pipeline.ConvertReport) progressState {
	return progressState{Done: p.Done, Total: p.Total, Rate: perSecond(p.Stored+p.Bad, p.Elapsed.Seconds()), Bad: p.Bad, ShowBad: true}
}
