package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/objstore"
)

// UploadReport counts what UploadConverted did.
type UploadReport struct {
	Uploaded int   // files uploaded
	Skipped  int   // files already stored with the same size
	Bytes    int64 // bytes uploaded
}

// UploadConverted uploads the converted dataset in the local directory dir (or, for a
// part, the files of part p: its shards and indexes, its part record, its report) to b
// with Bucket.Put, resumably: a shard or index already stored with the same size is
// skipped (a shard only grows, and its index is rewritten with it; conveyor verify
// checks every record's checksum), while the records and the conversion reports, small
// and rewritten by every run, are always uploaded. The records go last, so that a
// reader never sees a part, or the dataset, as finished before its shards are there:
// first the shards and indexes, then the part record, then dataset.json. A part instead
// creates dataset.json before its record, and only when it is absent, with a conditional
// PUT (Bucket.Create, If-None-Match: *), so that of parts finishing at once one writes it
// and the others leave it; each then reads back what is stored and fails, naming its URL,
// when it describes another conversion (other --size, --codec, part count or source)
// than the part's, before the part's record is added to a dataset it does not belong
// to. With lease (the run's, nil: none), the records are uploaded only when it has not
// lapsed since it was taken (Lease.Check): files uploaded before may have been deleted
// meanwhile by another run, as a killed run's orphans, and a rerun uploads them again.
// Errors name the URL.
func UploadConverted(ctx context.Context, dir string, b *objstore.Bucket, p cache.Part, lease *Lease) (UploadReport, error) {
	var rep UploadReport
	ents, err := os.ReadDir(dir)
	if err != nil {
		return rep, fmt.Errorf("source: %w", err)
	}
	var files, records []string
	for _, e := range ents {
		n := e.Name()
		if !e.Type().IsRegular() || !datasetFile(n) {
			continue
		}
		if !p.Whole() {
			if sp, ok := cache.ShardPart(n); !(ok && sp == p) && n != p.PartInfoName() && n != cache.InfoName && !strings.Contains(n, "."+strings.TrimSuffix(p.ShardPrefix(), "-")+".") {
				continue
			}
		}
		switch {
		case n == cache.InfoName:
		case strings.HasPrefix(n, "dataset.") && strings.HasSuffix(n, ".json"), strings.HasPrefix(n, "convert-report"):
			records = append(records, n)
		default:
			files = append(files, n)
		}
	}
	put := func(n string, always bool) error {
		f, err := os.Open(dir + string(os.PathSeparator) + n)
		if err != nil {
			return fmt.Errorf("source: %w", err)
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return fmt.Errorf("source: %w", err)
		}
		if !always {
			if ob, err := b.Stat(ctx, n); err == nil && ob.Size == fi.Size() {
				rep.Skipped++
				return nil
			}
		}
		if err := b.Put(ctx, n, f, fi.Size()); err != nil {
			return fmt.Errorf("source: uploading %s: %w", n, err)
		}
		rep.Uploaded++
		rep.Bytes += fi.Size()
		return nil
	}
	for _, n := range files {
		if err := put(n, false); err != nil {
			return rep, err
		}
	}
	if _, err := os.Stat(dir + string(os.PathSeparator) + cache.InfoName); err != nil {
		return rep, fmt.Errorf("source: %s: no %s to upload: %w", dir, cache.InfoName, err)
	}
	if err := lease.Check(ctx); err != nil {
		return rep, err
	}
	if !p.Whole() {
		// Before the part's record, so that a part that converted otherwise than the
		// dataset.json stored adds no record to it (which would make it unopenable).
		if err := createPartedInfo(ctx, dir, b, p, &rep); err != nil {
			return rep, err
		}
	}
	for _, n := range records {
		if err := put(n, true); err != nil {
			return rep, err
		}
	}
	if p.Whole() {
		return rep, put(cache.InfoName, true)
	}
	return rep, nil
}

// createPartedInfo creates the dataset.json of a conversion in parts in b from the one in
// dir, unless b holds one (Bucket.Create); when it does (another part created it first),
// it reads it back and checks that it describes the conversion this part made: two parts
// started at once with different flags each created a dataset.json in their own staging
// directory, and only one can be stored. The error names the URL.
func createPartedInfo(ctx context.Context, dir string, b *objstore.Bucket, p cache.Part, rep *UploadReport) error {
	data, err := os.ReadFile(dir + string(os.PathSeparator) + cache.InfoName)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	err = b.Create(ctx, cache.InfoName, bytes.NewReader(data), int64(len(data)))
	switch {
	case errors.Is(err, fs.ErrExist):
		rep.Skipped++
	case err != nil:
		return fmt.Errorf("source: uploading %s: %w", cache.InfoName, err)
	default:
		rep.Uploaded++
		rep.Bytes += int64(len(data))
	}
	// Read back even when created: a store that ignores If-None-Match lets a racing
	// part overwrite it, which shows here at least for the later of the two.
	mine, err := cache.ReadInfoFile(dir + string(os.PathSeparator) + cache.InfoName)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	tmp, err := os.MkdirTemp("", "conveyor-info-*")
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := objstore.Mirror(ctx, b, []objstore.Object{{Name: cache.InfoName, Size: cache.MaxInfoBytes}}, tmp, 1); err != nil {
		return fetchError(err)
	}
	url := b.URL(cache.InfoName)
	stored, err := cache.ReadInfoFile(tmp + string(os.PathSeparator) + cache.InfoName)
	if err != nil {
		return fmt.Errorf("source: %w", &renamedError{msg: strings.ReplaceAll(err.Error(), tmp+string(os.PathSeparator)+cache.InfoName, url), err: err})
	}
	if err := cache.SamePartedInfo(url, stored, mine); err != nil {
		return &otherConversionError{fmt.Errorf("source: part %v: %w (created by another part first); this part's shards were uploaded but not its record %s, so the dataset does not count them: convert part %v again as the others did, from a new staging directory, with --delete-orphans to delete what this run uploaded", p, err, b.URL(p.PartInfoName()), p)}
	}
	return nil
}

type otherConversionError struct{ err error }

func (e *otherConversionError) Error() string        { return e.err.Error() }
func (e *otherConversionError) Unwrap() error        { return e.err }
func (e *otherConversionError) Is(target error) bool { return target == ErrOtherConversion }

// ErrOtherConversion matches the error of UploadConverted when the destination's
// dataset.json describes another conversion than the part uploaded: running the same
// command again cannot succeed.
var ErrOtherConversion = errors.New("source: the destination holds another conversion")
