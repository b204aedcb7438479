package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/conveyor-ml/conveyor/cache"
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
func openRemoteConverted(ctx context.Context, url string, store *objstore.Dataset, o *OpenOptions) (*Dataset, error) {
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
				return fmt.Errorf("source: %s: shard %s holds %d bytes, more than the shard cache's limit of %d bytes (OpenOptions.Cache.MaxBytes, --shard-cache-max-bytes); raise the limit", name, b.URL(m.Name), m.Bytes, limit)
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
	desc := fmt.Sprintf("converted:%s (%d samples in %d shards, read through a shard cache of %d bytes)", name, c.Len(), len(c.info.Shards), limit)
	return &Dataset{Source: c, Store: store, closer: closer, desc: desc}, nil
}

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
	return openRemoteConverted(ctx, url, &objstore.Dataset{Bucket: b, FS: c, Cache: c}, o)
}

// renamedError is an error with its message rewritten (a local path replaced by the URL
// it was fetched from), unwrapping to the original.
type renamedError struct {
	msg string
	err error
}

func (e *renamedError) Error() string { return e.msg }
func (e *renamedError) Unwrap() error { return e.err }

// Orphans are files under a converted dataset's prefix that its conversion did not
// write: shards and indexes (and unfinished multipart uploads of them) left by a run
// whose staging directory was lost, since a rerun from a new staging directory names
// its shards anew. Readers never see them (the manifest names the shards); they only
// take space.
type Orphans struct {
	Objects []objstore.Object
	Uploads []objstore.Upload
	// Unlisted, when not nil, says why unfinished uploads could not be looked for: the
	// store does not list them (it wraps objstore.ErrNoUploadList), so Uploads is empty.
	Unlisted error
	// Live, when not empty, names the live leases of other runs converting the same
	// part: orphans were not looked for (Objects and Uploads are empty), since that
	// run's files are in neither this run's staging directory nor the part's record.
	Live []string

	part  cache.Part // whose orphans these are
	lease *Lease     // the lease ConvertedOrphans was given
}

// orphansListed, when set (by tests), runs between ConvertedOrphans' listing of the
// prefix and its look at the leases.
var orphansListed func()

// ErrLiveRun reports that Orphans.Delete deleted nothing: another run of the part took a
// lease since the orphans were listed, and may use files of theirs (a run resuming from
// a lost run's staging directory uploads only what is not stored).
var ErrLiveRun = errors.New("another run of the part is live")

// Bytes is the orphan objects' total size (uploads' parts are not counted).
func (o *Orphans) Bytes() int64 {
	var n int64
	for _, ob := range o.Objects {
		n += ob.Size
	}
	return n
}

// Len is how many orphans there are.
func (o *Orphans) Len() int { return len(o.Objects) + len(o.Uploads) }

// ConvertedOrphans lists the orphans of part p (the zero Part: of a conversion in one
// process) under b: shard and index files of p's naming (cache.ShardPart), and
// unfinished uploads of such files, that are neither in dir, the conversion's local
// staging directory (which holds every file it uploaded; it may be absent), nor named
// by the manifest of p's record stored in b (dataset.json for the zero Part, else p's
// part record), read now. Run it after UploadConverted, holding lease (AcquireLease);
// while another run of p holds a live lease, nothing is listed and Orphans.Live names
// that run, whose files would otherwise look orphaned. A store that does not list
// uploads is taken to have none, and Orphans.Unlisted says so.
func ConvertedOrphans(ctx context.Context, b *objstore.Bucket, dir string, p cache.Part, lease *Lease) (*Orphans, error) {
	o := &Orphans{part: p, lease: lease}
	// The prefix is listed before the leases are: a run's lease is stored before any
	// of its files, so a run whose files this listing holds has a lease the next one
	// sees. (Leases listed first miss a run that started between the two listings.)
	objs, err := b.List(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	ups, uerr := b.Uploads(ctx, "")
	if errors.Is(uerr, objstore.ErrNoUploadList) {
		o.Unlisted, uerr = uerr, nil
	}
	if uerr != nil {
		return nil, fmt.Errorf("source: %w", uerr)
	}
	if orphansListed != nil {
		orphansListed()
	}
	live, err := otherLeases(ctx, b, p, lease)
	if err != nil {
		return nil, err
	}
	if len(live) > 0 {
		o.Live, o.Unlisted = live, nil
		return o, nil
	}
	keep := map[string]bool{}
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("source: %w", err)
	}
	for _, e := range ents {
		keep[e.Name()] = true
	}
	stored, err := storedManifest(ctx, b, p)
	if err != nil {
		return nil, err
	}
	for _, n := range stored {
		keep[n] = true
		keep[strings.TrimSuffix(n, ".shard")+".idx"] = true
	}
	orphan := func(name string) bool {
		if keep[name] || !datasetFile(name) || !(strings.HasSuffix(name, ".shard") || strings.HasSuffix(name, ".idx")) {
			return false
		}
		sp, parted := cache.ShardPart(name)
		if p.Whole() {
			return !parted
		}
		return parted && sp == p
	}
	for _, ob := range objs {
		if orphan(ob.Name) {
			o.Objects = append(o.Objects, ob)
		}
	}
	for _, u := range ups {
		if orphan(u.Name) {
			o.Uploads = append(o.Uploads, u)
		}
	}
	return o, nil
}

// storedManifest names the shards that the record of part p stored in b lists
// (dataset.json for the zero Part); none when there is no record.
func storedManifest(ctx context.Context, b *objstore.Bucket, p cache.Part) ([]string, error) {
	name := cache.InfoName
	if !p.Whole() {
		name = p.PartInfoName()
	}
	tmp, err := os.MkdirTemp("", "conveyor-record-*")
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	defer os.RemoveAll(tmp)
	err = objstore.Mirror(ctx, b, []objstore.Object{{Name: name, Size: cache.MaxInfoBytes}}, tmp, 1)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fetchError(err)
	}
	path := filepath.Join(tmp, name)
	info, err := cache.ReadInfoFile(path)
	if err != nil {
		return nil, fmt.Errorf("source: %w", &renamedError{msg: strings.ReplaceAll(err.Error(), path, b.URL(name)), err: err})
	}
	names := make([]string, len(info.Shards))
	for i, m := range info.Shards {
		names[i] = m.Name
	}
	return names, nil
}

// Delete deletes the orphans from b, and aborts their uploads, unless another run of
// the part holds a live lease now (ErrLiveRun, naming it): one may have started since
// ConvertedOrphans listed them.
func (o *Orphans) Delete(ctx context.Context, b *objstore.Bucket) error {
	if o.Len() > 0 {
		live, err := otherLeases(ctx, b, o.part, o.lease)
		if err != nil {
			return err
		}
		if len(live) > 0 {
			return fmt.Errorf("source: nothing deleted: %w since the orphans were listed: %s", ErrLiveRun, strings.Join(live, "; "))
		}
	}
	for _, ob := range o.Objects {
		if err := b.Delete(ctx, ob.Name); err != nil {
			return fmt.Errorf("source: %w", err)
		}
	}
	for _, u := range o.Uploads {
		if err := b.AbortUpload(ctx, u); err != nil {
			return fmt.Errorf("source: %w", err)
		}
	}
	return nil
}

// ErrOtherConversion matches the error of UploadConverted when the destination's
// dataset.json describes another conversion than the part uploaded: running the same
// command again cannot succeed.
var ErrOtherConversion = errors.New("source: the destination holds another conversion")
