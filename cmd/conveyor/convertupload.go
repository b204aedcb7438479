package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/internal/units"
	"github.com/conveyor-ml/conveyor/objstore"
	"github.com/conveyor-ml/conveyor/pipeline"
	"github.com/conveyor-ml/conveyor/source"
)

// uploadTarget is the s3:// DST of a conversion: the bucket, and the lease that marks
// this run as live there.
type uploadTarget struct {
	url    string // DST as given
	bucket *objstore.Bucket
	lease  *source.Lease
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
	spec, err := (&pipeline.ConvertOptions{Decode: f.dopts}).Spec()
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
	// orphans leaves this one's files alone (source.Lease).
	if up.lease, err = source.AcquireLease(ctx, up.bucket, f.part, f.dst); err != nil {
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

// upload sends the staging directory to the bucket, reports orphaned files and, unless
// --staging kept it, removes the staging directory; err is how the conversion ended.
func (f *convertFlags) upload(ctx context.Context, up *uploadTarget, c *cache.Cache, err error, stdout, stderr io.Writer) error {
	sent, uerr := source.UploadConverted(ctx, f.dst, up.bucket, f.part, up.lease)
	fmt.Fprintf(stdout, "conveyor convert uploaded=%d unchanged=%d bytes=%d url=%s\n", sent.Uploaded, sent.Skipped, sent.Bytes, up.url)
	if errors.Is(uerr, source.ErrOtherConversion) {
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
func orphans(ctx context.Context, b *objstore.Bucket, dir, url string, part cache.Part, lease *source.Lease, del bool, stdout, stderr io.Writer) error {
	o, err := source.ConvertedOrphans(ctx, b, dir, part, lease)
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
	if err := o.Delete(ctx, b); errors.Is(err, source.ErrLiveRun) {
		fmt.Fprintf(stderr, "conveyor convert: orphaned files under %s: %v; run again once it has ended to delete them\n", url, err)
		return nil
	} else if err != nil {
		return fmt.Errorf("deleting orphaned files under %s: %w", url, err)
	}
	fmt.Fprintf(stdout, "conveyor convert deleted=%d bytes=%d aborted_uploads=%d url=%s\n", len(o.Objects), o.Bytes(), len(o.Uploads), url)
	return nil
}

func orphanName(o *source.Orphans) string {
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
