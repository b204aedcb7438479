package pipeline

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/internal/treetest"
)

// The engine's tests read ImageFolder trees through this fixture: the real listing is
// package source's, which imports this package, so these tests cannot use it. It lists
// as source.ImageFolder does for the trees treetest writes: a class per first-level
// folder, sorted, and the image files below each in lexical order.

// folder is an ImageFolder tree listed for a test.
type folder struct {
	fsys    fs.FS
	paths   []string
	labels  []int
	classes []string
	desc    string
}

func (f *folder) Len() int                    { return len(f.paths) }
func (f *folder) Label(i int) int             { return f.labels[i] }
func (f *folder) Path(i int) string           { return f.paths[i] }
func (f *folder) Classes() []string           { return f.classes }
func (f *folder) Open(i int) (fs.File, error) { return f.fsys.Open(f.paths[i]) }
func (f *folder) String() string              { return f.desc }

// Dir lists the ImageFolder tree at dir.
func Dir(dir string) (FileSource, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, err
	}
	return ImageFolder(os.DirFS(dir), ".")
}

// ImageFolder lists the ImageFolder tree at root in fsys.
func ImageFolder(fsys fs.FS, root string) (FileSource, error) {
	sub, err := fs.Sub(fsys, root)
	if err != nil {
		return nil, err
	}
	ents, err := fs.ReadDir(sub, ".")
	if err != nil {
		return nil, err
	}
	f := &folder{fsys: sub, desc: "test folder " + root}
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			f.classes = append(f.classes, e.Name())
		}
	}
	slices.Sort(f.classes)
	for label, c := range f.classes {
		err := fs.WalkDir(sub, c, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			switch strings.ToLower(path.Ext(p)) {
			case ".jpg", ".jpeg", ".png", ".gif", ".bmp", ".tif", ".tiff", ".webp":
				f.paths, f.labels = append(f.paths, p), append(f.labels, label)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if len(f.paths) == 0 {
		return nil, fmt.Errorf("no images in %s", root)
	}
	return f, nil
}

func quiet(string, ...any) {}

// stored serves the records a Convert stored in c under spec, in c's order: what
// source.OpenConverted opens.
type stored struct {
	c       *cache.Cache
	refs    []cache.Ref
	classes []string
}

func storedOf(c *cache.Cache, spec string, classes []string) *stored {
	return &stored{c: c, refs: c.Records(spec), classes: classes}
}

func (s *stored) Len() int          { return len(s.refs) }
func (s *stored) Label(i int) int   { return int(s.refs[i].Label) }
func (s *stored) Path(i int) string { return s.refs[i].Path }
func (s *stored) Classes() []string { return s.classes }
func (s *stored) Stored(i int) (*cache.Cache, cache.Ref, bool) {
	return s.c, s.refs[i], true
}

// multiFolder is a folder whose samples carry label lists.
type multiFolder struct {
	*folder
	lists [][]int
}

func (m *multiFolder) MultiLabel() bool { return true }
func (m *multiFolder) Labels(dst []int, i int) []int {
	return append(dst, m.lists[i]...)
}

// multiLabelTree is a fresh tree of 18 images labelled with lists of the classes a, b,
// c and d (some with several), as a manifest of label lists gives them.
func multiLabelTree(t *testing.T) (Source, [][]int) {
	src, err := Dir(treetest.New(t, 2, 9))
	if err != nil {
		t.Fatal(err)
	}
	f := src.(*folder)
	ids := [][]int{{0, 2}, {1}, {0, 1, 2, 3}, {3}, {0, 2}}
	m := &multiFolder{folder: f}
	for k := range f.paths {
		m.lists = append(m.lists, ids[k%5])
		f.labels[k] = ids[k%5][0]
	}
	f.classes = []string{"a", "b", "c", "d"}
	return m, m.lists
}
