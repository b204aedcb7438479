package source

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/conveyor-ml/conveyor/internal/files"
)

// tree is where a folder or manifest source lists and opens its files: names are
// slash-separated and relative to the tree's root ("." is the root).
type tree interface {
	readDir(name string) ([]fs.DirEntry, error)
	stat(name string) (fs.FileInfo, error) // follows symbolic links
	// open opens a regular file. A named pipe, device or socket is an error found by
	// stat before opening, so a sample never blocks in open.
	open(name string) (fs.File, error)
}

// fsTree is a directory inside an fs.FS.
type fsTree struct {
	fsys fs.FS
	root string
}

func (t fsTree) join(name string) string { return path.Join(t.root, name) }

func (t fsTree) readDir(name string) ([]fs.DirEntry, error) { return fs.ReadDir(t.fsys, t.join(name)) }
func (t fsTree) stat(name string) (fs.FileInfo, error)      { return fs.Stat(t.fsys, t.join(name)) }

func (t fsTree) open(name string) (fs.File, error) {
	p := t.join(name)
	fi, err := fs.Stat(t.fsys, p)
	if err != nil {
		return nil, err
	}
	if err := files.Regular(fi); err != nil {
		return nil, err
	}
	return t.fsys.Open(p)
}

// osTree is a directory of the local file system, read with the os package rather than
// os.DirFS: io/fs refuses names that are not valid UTF-8, which Linux allows (any bytes
// but '/' and NUL), so a folder of such names would not open or its files would fail.
type osTree struct{ root string }

func (t osTree) join(name string) string { return filepath.Join(t.root, filepath.FromSlash(name)) }

func (t osTree) readDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(t.join(name)) }
func (t osTree) stat(name string) (fs.FileInfo, error)      { return os.Stat(t.join(name)) }

func (t osTree) open(name string) (fs.File, error) {
	p := t.join(name)
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if err := files.Regular(fi); err != nil {
		return nil, err
	}
	// Non-blocking, in case the file was replaced by a named pipe since stat: open then
	// returns at once, and the check below refuses it. Regular files read as usual.
	f, err := files.OpenNonBlocking(p)
	if err != nil {
		return nil, err
	}
	if fi, err = f.Stat(); err == nil {
		err = files.Regular(fi)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
