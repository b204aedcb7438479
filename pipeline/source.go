package pipeline

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/conveyor-ml/conveyor/cache"
)

// Source is an indexed dataset: Len samples, each with a class label and a name. What a
// sample's bytes are is a capability the loader asks for through interfaces, never
// concrete types:
//
//   - FileSource: encoded image files (ImageFolder, Dir, Manifest, over any io/fs.FS),
//     which the loader reads, decodes and resizes first;
//   - PixelSource: pixels stored already decoded and resized (OpenConverted), which the
//     loader reads and unpacks.
//
// A Source must implement at least one of them. Subset, Concat and Split compose sources
// of either kind, and their results implement both, asking the source a sample comes
// from. Implementations must be safe for concurrent use.
type Source interface {
	// Len is the number of samples.
	Len() int
	// Label is sample i's class label, an index into Classes.
	Label(i int) int
	// Path names sample i in messages and cache keys (relative to the source's root).
	Path(i int) string
	// Classes are the class names, index = label.
	Classes() []string
}

// FileSource is a Source of encoded image files.
type FileSource interface {
	Source
	// Open opens sample i's encoded bytes. The loader calls Stat on the result to learn
	// the size before it reserves memory, then reads it whole.
	Open(i int) (fs.File, error)
}

// PixelSource is a Source of stored pixels: records that conveyor convert (or a loader's
// cache) wrote, already decoded and resized first.
type PixelSource interface {
	Source
	// Stored returns the record holding sample i's pixels and the cache it is in; ok is
	// false when sample i is not stored pixels (in a Concat of both kinds), and the loader
	// opens it as a file instead.
	Stored(i int) (c *cache.Cache, ref cache.Ref, ok bool)
}

// ShardedSource is a Source stored in shards: shard k holds the sample indices [ends[k-1], ends[k]) (ends[-1] = 0).
//
// It is a capability, like FileSource: a source whose samples are read a shard at a time
// (a converted dataset's shard files, WebDataset tar shards in object storage) says where
// its shards are, and Config.Order ShardOrder keeps each rank within a few shards at a
// time. ShardEnds is called once, by New; it must be non-decreasing, start at or above 0
// and end at Len() (an empty shard repeats its predecessor's end). Concat and Subset
// views of a ShardedSource are ShardedSources too.
type ShardedSource interface {
	Source
	ShardEnds() []int
}

// An EpochPlanner is a Source that wants to know, before an epoch's first read, which
// samples this rank will read and in what order, so it can bring remote data close
// ahead of need: the WebDataset source turns the plan into shard prefetches in
// first-use order.
//
// As an epoch starts, the loader calls PlanEpoch with its number and the source indices
// this rank reads, in order, from the cursor; right after (once its first batch is
// dispatched) it calls PlanNext with the next epoch's order from its start, so the
// source's look-ahead can run on into the next epoch while this one ends. When that
// epoch starts, PlanEpoch gets the same order again: the source should carry on with
// what it asked for under PlanNext. order is the loader's buffer: neither method may
// keep it, and both must return quickly. A plan is a hint: replacements for bad samples
// read out of plan, the look-ahead past the last epoch is never read, and reads stay
// correct if the plan is ignored. Views (Subset, Concat, Split, Converted.ByShard) are
// EpochPlanners that give each part that plans the plan of its own samples.
type EpochPlanner interface {
	Source
	PlanEpoch(epoch int, order []int32)
	PlanNext(epoch int, order []int32)
}

// planRefuser is the capability of an EpochPlanner that can refuse the epoch it was
// last given (PlanEpoch): one reading more of a shard cache's bytes at once than it holds.
type planRefuser interface {
	planErr() error
}

// readPlanner is the capability of a source that is an EpochPlanner by its type but
// may have nothing to plan: a local converted dataset, local WebDataset shards, a view
// of sources that do not plan. The loader then does not compute plans for it.
type readPlanner interface {
	plansReads() bool
}

// plansReads reports whether src wants epoch plans.
func plansReads(src Source) bool {
	if _, ok := src.(EpochPlanner); !ok {
		return false
	}
	if p, ok := src.(readPlanner); ok {
		return p.plansReads()
	}
	return true
}

// imageExts are the extensions listing accepts (case-insensitive), as torchvision's
// IMG_EXTENSIONS minus the netpbm formats. Decoding sniffs content, so the extension only
// decides what is listed, not how it is decoded.
var imageExts = []string{".jpg", ".jpeg", ".png", ".gif", ".bmp", ".tif", ".tiff", ".webp"}

// IsImageName reports whether name has an image file extension.
func IsImageName(name string) bool {
	ext := strings.ToLower(path.Ext(name))
	return slices.Contains(imageExts, ext)
}

// index stores sample paths and labels compactly: one byte arena of paths, an offset per
// sample and a label per sample, so a 1,000,000-sample manifest costs the path bytes plus
// 8 bytes a sample (see TestIndexBytesPerSample), not a string header and slice of each.
type index struct {
	arena  []byte
	ends   []uint32 // ends[i] is the end of path i in arena; path i starts at ends[i-1]
	labels []int32
}

func (x *index) add(p string, label int) error {
	if len(x.arena)+len(p) > 1<<32-1 {
		return errors.New("pipeline: index larger than 4 GiB of paths")
	}
	if label < -1 || label > 1<<31-1 { // -1: a multi-label sample without labels
		return fmt.Errorf("pipeline: label %d of %q out of range", label, p)
	}
	x.arena = append(x.arena, p...)
	x.ends = append(x.ends, uint32(len(x.arena)))
	x.labels = append(x.labels, int32(label))
	return nil
}

func (x *index) Len() int        { return len(x.ends) }
func (x *index) Label(i int) int { return int(x.labels[i]) }
func (x *index) Path(i int) string {
	var start uint32
	if i > 0 {
		start = x.ends[i-1]
	}
	return string(x.arena[start:x.ends[i]])
}

// trim releases the slack capacity left by appending.
func (x *index) trim() {
	x.arena = slices.Clip(x.arena)
	x.ends = slices.Clip(x.ends)
	x.labels = slices.Clip(x.labels)
}

// bytes is the index's own memory.
func (x *index) bytes() int64 {
	return int64(cap(x.arena)) + 4*int64(cap(x.ends)) + 4*int64(cap(x.labels))
}

// fsSource is an index of paths inside a tree: a folder or a manifest's directory.
type fsSource struct {
	index
	tree    tree
	classes []string
	desc    string
}

func (s *fsSource) Open(i int) (fs.File, error) { return s.tree.open(s.Path(i)) }

func (s *fsSource) Classes() []string { return s.classes }

func (s *fsSource) String() string { return s.desc }

// ImageFolder lists an ImageFolder tree: every first-level directory of root is a class,
// classes are sorted by name and numbered from 0, and every image file below a class
// directory (at any depth, by extension, case-insensitive) is a sample of that class.
// Files directly in root, and folders whose names start with a dot, are ignored. Samples
// are ordered by class, then path.
//
// fsys may be os.DirFS, an embed.FS, a *zip.Reader or any other fs.FS; root is "." for
// the whole file system. Only regular files are samples: a named pipe, device or socket
// with an image name is a bad sample, found without opening it.
func ImageFolder(fsys fs.FS, root string) (FileSource, error) {
	return FolderOptions{}.ImageFolder(fsys, root)
}

// Dir opens the ImageFolder tree at dir on the local file system. It reads the folder
// with the os package, so every name Linux allows works, not only valid UTF-8. Errors
// name dir as given.
func Dir(dir string) (FileSource, error) { return FolderOptions{}.Dir(dir) }

// FolderOptions configures listing an ImageFolder tree: FolderOptions{...}.Dir(path) or
// .ImageFolder(fsys, root). The zero value is what Dir and ImageFolder use.
type FolderOptions struct {
	// AllowEmptyClasses accepts class folders without image files: their labels have no
	// samples. Default false: such a folder is an error naming it, as torchvision's
	// ImageFolder refuses one, since it usually means a copy that went wrong.
	AllowEmptyClasses bool
}

// Dir is the package's Dir with these options.
func (o FolderOptions) Dir(dir string) (FileSource, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("pipeline: image folder: %w", err)
	}
	return o.imageFolder(osTree{dir}, dir)
}

// ImageFolder is the package's ImageFolder with these options.
func (o FolderOptions) ImageFolder(fsys fs.FS, root string) (FileSource, error) {
	return o.imageFolder(fsTree{fsys, root}, root)
}

// folderLayout is what an error about an ImageFolder tree tells the user to give.
const folderLayout = "expected an ImageFolder tree DIR/CLASS/*.jpg (one folder per class)"

// imageFolder lists the ImageFolder tree t, naming it name in errors.
func (o FolderOptions) imageFolder(t tree, name string) (FileSource, error) {
	ents, err := t.readDir(".")
	if err != nil {
		return nil, fmt.Errorf("pipeline: image folder %s: %w", name, err)
	}
	s := &fsSource{tree: t, desc: "imagefolder:" + name}
	images := 0 // image files directly in the root, for the message below
	for _, e := range ents {
		switch {
		case isDir(t, e) && !strings.HasPrefix(e.Name(), "."):
			s.classes = append(s.classes, e.Name())
		case IsImageName(e.Name()):
			images++
		}
	}
	slices.Sort(s.classes)
	if len(s.classes) == 0 && images > 0 {
		return nil, fmt.Errorf("pipeline: image folder %s: no class folders, only %d images directly inside; %s", name, images, folderLayout)
	}
	if len(s.classes) == 0 {
		return nil, fmt.Errorf("pipeline: image folder %s: no class folders; %s", name, folderLayout)
	}
	var empty []string
	for label, c := range s.classes {
		n := s.Len()
		if err := s.walk(c, label); err != nil {
			return nil, fmt.Errorf("pipeline: image folder %s: %w", name, err)
		}
		if s.Len() == n {
			empty = append(empty, c)
		}
	}
	if s.Len() == 0 {
		return nil, fmt.Errorf("pipeline: image folder %s: no image files in its %d class folders (%s); %s", name, len(s.classes), strings.Join(imageExts, " "), folderLayout)
	}
	if len(empty) > 0 && !o.AllowEmptyClasses {
		return nil, fmt.Errorf("pipeline: image folder %s: class folder %q holds no image files (%s)%s; remove it, or list with FolderOptions{AllowEmptyClasses: true}",
			name, empty[0], strings.Join(imageExts, " "), more(len(empty)-1, "other empty class folder"))
	}
	s.trim()
	return s, nil
}

// walk adds the image files below dir, in lexical order at every level as fs.WalkDir
// visits them: a subfolder's files where the subfolder's name sorts. Folders whose names
// start with a dot are skipped; symbolic links below a class folder are not followed into
// folders (a link to a file is a sample).
func (s *fsSource) walk(dir string, label int) error {
	ents, err := s.tree.readDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := dir + "/" + e.Name()
		switch {
		case e.IsDir() && strings.HasPrefix(e.Name(), "."):
		case e.IsDir():
			if err := s.walk(p, label); err != nil {
				return err
			}
		case IsImageName(p):
			if err := s.add(p, label); err != nil {
				return err
			}
		}
	}
	return nil
}

// isDir follows a symbolic link to a directory, as torchvision's os.scandir walk does.
func isDir(t tree, e fs.DirEntry) bool {
	if e.IsDir() {
		return true
	}
	if e.Type()&fs.ModeSymlink == 0 {
		return false
	}
	fi, err := t.stat(e.Name())
	return err == nil && fi.IsDir()
}

// more says ", and n more things" when n > 0.
func more(n int, what string) string {
	switch n {
	case 0:
		return ""
	case 1:
		return ", and 1 " + what
	}
	return fmt.Sprintf(", and %d %ss", n, what)
}
