package source

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/conveyor-ml/conveyor/pipeline"
)

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
		return errors.New("source: index larger than 4 GiB of paths")
	}
	if label < -1 || label > 1<<31-1 { // -1: a multi-label sample without labels
		return fmt.Errorf("source: label %d of %q out of range", label, p)
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
// with an image name is a bad sample, found without opening it. opts nil means the
// defaults.
func ImageFolder(fsys fs.FS, root string, opts *FolderOptions) (pipeline.FileSource, error) {
	o := opts.clone().EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return o.imageFolder(fsTree{fsys, root}, root)
}

// Dir opens the ImageFolder tree at dir on the local file system, as ImageFolder does
// (opts nil: the defaults). It reads the folder with the os package, so every name Linux
// allows works, not only valid UTF-8. Errors name dir as given.
func Dir(dir string, opts *FolderOptions) (pipeline.FileSource, error) {
	o := opts.clone().EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("source: image folder: %w", err)
	}
	return o.imageFolder(osTree{dir}, dir)
}

// FolderOptions configures listing an ImageFolder tree (Dir, ImageFolder). A nil pointer
// means the defaults.
type FolderOptions struct {
	// AllowEmptyClasses accepts class folders without image files: their labels have no
	// samples. Default false: such a folder is an error naming it, as torchvision's
	// ImageFolder refuses one, since it usually means a copy that went wrong.
	AllowEmptyClasses bool
}

func (o *FolderOptions) clone() *FolderOptions {
	if o == nil {
		return &FolderOptions{}
	}
	c := *o
	return &c
}

// EnsureDefaults fills o's zero fields with their defaults and returns o; a nil o
// becomes a new FolderOptions holding the defaults. (Every field's zero value is its
// default.)
func (o *FolderOptions) EnsureDefaults() *FolderOptions {
	if o == nil {
		o = &FolderOptions{}
	}
	return o
}

// Validate reports every invalid field of o joined into one error; nil when all are
// valid, as every FolderOptions is.
func (o *FolderOptions) Validate() error { return nil }

// An EmptyClassError is the error listing an ImageFolder tree returns when class folders
// hold no image files and FolderOptions.AllowEmptyClasses is false. A program with a
// setting of its own for AllowEmptyClasses (a command-line flag) names it in its message.
type EmptyClassError struct {
	Folder  string   // the tree, as given
	Classes []string // the empty class folders, sorted
}

func (e *EmptyClassError) Error() string {
	return e.Message("list with &FolderOptions{AllowEmptyClasses: true}")
}

// Message is the error's text with allow saying how to accept empty class folders
// ("pass --allow-empty-classes").
func (e *EmptyClassError) Message(allow string) string {
	return fmt.Sprintf("source: image folder %s: class folder %q holds no image files (%s)%s; remove it, or %s",
		e.Folder, e.Classes[0], strings.Join(imageExts, " "), more(len(e.Classes)-1, "other empty class folder"), allow)
}

// folderLayout is what an error about an ImageFolder tree tells the user to give.
const folderLayout = "expected an ImageFolder tree DIR/CLASS/*.jpg (one folder per class)"

// imageFolder lists the ImageFolder tree t, naming it name in errors.
func (o *FolderOptions) imageFolder(t tree, name string) (pipeline.FileSource, error) {
	ents, err := t.readDir(".")
	if err != nil {
		return nil, fmt.Errorf("source: image folder %s: %w", name, err)
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
		return nil, fmt.Errorf("source: image folder %s: no class folders, only %d images directly inside; %s", name, images, folderLayout)
	}
	if len(s.classes) == 0 {
		return nil, fmt.Errorf("source: image folder %s: no class folders; %s", name, folderLayout)
	}
	var empty []string
	for label, c := range s.classes {
		n := s.Len()
		if err := s.walk(c, label); err != nil {
			return nil, fmt.Errorf("source: image folder %s: %w", name, err)
		}
		if s.Len() == n {
			empty = append(empty, c)
		}
	}
	if s.Len() == 0 {
		return nil, fmt.Errorf("source: image folder %s: no image files in its %d class folders (%s); %s", name, len(s.classes), strings.Join(imageExts, " "), folderLayout)
	}
	if len(empty) > 0 && !o.AllowEmptyClasses {
		return nil, &EmptyClassError{Folder: name, Classes: empty}
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
