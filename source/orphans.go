package source

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/objstore"
)

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
