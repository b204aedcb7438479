package pipeline

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
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
	if err := regular(fi); err != nil {
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
	if err := regular(fi); err != nil {
		return nil, err
	}
	// Non-blocking, in case the file was replaced by a named pipe since stat: open then
	// returns at once, and the check below refuses it. Regular files read as usual.
	f, err := openNonBlocking(p)
	if err != nil {
		return nil, err
	}
	if fi, err = f.Stat(); err == nil {
		err = regular(fi)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// errNotRegular is a sample that is a named pipe, device, socket or directory.
var errNotRegular = errors.New("not a regular file")

func regular(fi fs.FileInfo) error {
	if fi.Mode().IsRegular() {
		return nil
	}
	kind := "directory"
	switch m := fi.Mode(); {
	case m&fs.ModeNamedPipe != 0:
		kind = "named pipe"
	case m&fs.ModeSocket != 0:
		kind = "socket"
	case m&fs.ModeDevice != 0:
		kind = "device"
	case !m.IsDir():
		kind = m.Type().String()
	}
	return fmt.Errorf("%w (%s)", errNotRegular, kind)
}
