package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// localBackend reads and writes the local file system; keys are paths.
type localBackend struct{}

func (localBackend) url(key string) string { return key }

func (localBackend) get(ctx context.Context, key string, off int64) (io.ReadCloser, getResult, error) {
	f, err := os.Open(key)
	if err != nil {
		return nil, getResult{}, localErr("GET", key, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, getResult{}, localErr("GET", key, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, getResult{}, &Error{Op: "GET", URL: key, Err: fmt.Errorf("not a regular file")}
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		f.Close()
		return nil, getResult{}, localErr("GET", key, err)
	}
	return f, getResult{start: off, length: fi.Size() - off, size: fi.Size(), modTime: fi.ModTime()}, nil
}

func (localBackend) stat(ctx context.Context, key string) (Object, error) {
	fi, err := os.Stat(key)
	if err != nil {
		return Object{}, localErr("HEAD", key, err)
	}
	return Object{Name: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// listEach lists without a deadline: a walk of a local directory cannot stall the way a
// connection can, and a large one may take longer than AttemptTimeout.
func (l localBackend) listEach(ctx context.Context, prefix string, _ func(context.Context, func(context.Context) error) error) ([]Object, error) {
	return l.list(ctx, prefix)
}

// list walks the directory part of prefix and keeps the regular files, and the symbolic
// links but those to directories, whose paths start with prefix.
func (localBackend) list(ctx context.Context, prefix string) ([]Object, error) {
	dir := prefix
	if !strings.HasSuffix(dir, "/") {
		dir = filepath.Dir(prefix) + "/"
		if dir == "./" && !strings.HasPrefix(prefix, "./") {
			dir = "."
		}
	}
	var out []Object
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !d.Type().IsRegular() && d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		if dir == "." {
			p = filepath.ToSlash(p)
		}
		if !strings.HasPrefix(p, prefix) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			// Shards kept by git-annex or DVC are links to files elsewhere: follow them.
			// A link to nothing (content not fetched) is listed, so that reading it
			// fails naming it rather than the dataset silently lacking it; a link to a
			// directory is not walked.
			switch target, err := os.Stat(p); {
			case err == nil && !target.Mode().IsRegular():
				return nil
			case err == nil:
				fi = target
			}
		}
		out = append(out, Object{Name: p, Size: fi.Size(), ModTime: fi.ModTime()})
		return nil
	})
	if err != nil {
		return nil, localErr("LIST", dir, err)
	}
	return out, nil
}

func (localBackend) put(ctx context.Context, key string, r io.ReaderAt, size int64, c *counters) error {
	return writeLocal(key, r, size, c, os.Rename)
}

// writeLocal writes size bytes of r to a temporary file beside key, then moves it to key
// with place: Rename replaces key, Link fails if key exists.
func writeLocal(key string, r io.ReaderAt, size int64, c *counters, place func(tmp, key string) error) error {
	if err := os.MkdirAll(filepath.Dir(key), 0o755); err != nil {
		return localErr("PUT", key, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(key), "."+filepath.Base(key)+".part-*")
	if err != nil {
		return localErr("PUT", key, err)
	}
	defer os.Remove(tmp.Name())
	n, err := io.Copy(tmp, io.NewSectionReader(r, 0, size))
	c.uploaded.Add(n)
	if err == nil && n != size {
		err = fmt.Errorf("source gave %d of %d bytes", n, size)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = place(tmp.Name(), key)
		if errors.Is(err, fs.ErrExist) {
			return &Error{Op: "PUT", URL: key, Status: http.StatusPreconditionFailed, Err: err}
		}
	}
	if err != nil {
		return localErr("PUT", key, err)
	}
	return nil
}

// localErr gives local failures the statuses the retry logic and errors.Is expect.
func localErr(op, key string, err error) error {
	e := &Error{Op: op, URL: key, Err: err}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// Not a failure of the file system: say what happened, with no status.
		e.Err = fmt.Errorf("stopped: %w", err)
	case os.IsNotExist(err):
		e.Status = 404
	case os.IsPermission(err):
		e.Status = 403
	default:
		e.Status = 400 // a local failure other than those is not worth retrying
	}
	return e
}

// create writes a temporary file and links it to key, which fails if key exists.
func (localBackend) create(ctx context.Context, key string, r io.ReaderAt, size int64, c *counters) error {
	return writeLocal(key, r, size, c, os.Link)
}

func (localBackend) delete(ctx context.Context, key string) error {
	if err := os.Remove(key); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return localErr("DELETE", key, err)
	}
	return nil
}
