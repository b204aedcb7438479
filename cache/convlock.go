package cache

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// convertLockName is the file, in a cache directory, that a conversion holds locked
// (flock) while it runs. It is never deleted: deleting a lock file races with the next
// process opening it.
const convertLockName = "convert.lock"

// holderLen is the size of what a holder writes in the lock file.
const holderLen = 128

// ErrLocked reports that another conversion is writing the directory.
var ErrLocked = errors.New("another conversion is writing this directory")

// LockConversion takes the directory's conversion lock, which a conversion holds for its
// whole run so that two never write one dataset at once (each would store every sample
// again). It does not wait: when another process, or another Cache of this one, holds the
// lock, it returns an error wrapping ErrLocked that says who. release releases it.
//
// Without flock (non-unix systems) the lock always succeeds and protects nothing.
func (c *Cache) LockConversion() (release func(), err error) {
	return c.lockConversion(convertLockName)
}

// lockConversion takes the conversion lock in file name.
func (c *Cache) lockConversion(name string) (release func(), err error) {
	if c.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	f, err := os.OpenFile(filepath.Join(c.dir, name), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	ok, err := tryLock(f)
	if !ok {
		holder := lockHolder(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("cache: locking %s: %w", f.Name(), err)
		}
		return nil, fmt.Errorf("cache: %s: %w (%s)", c.dir, ErrLocked, holder)
	}
	// Who holds it, for the message of whoever finds it locked: one write of a fixed
	// size, so that a reader sees this holder or the last one, never an empty file.
	holder := fmt.Sprintf("pid %d, since %s", os.Getpid(), time.Now().Format(time.DateTime))
	f.WriteAt(fmt.Appendf(nil, "%-*s\n", holderLen-1, holder), 0)
	return func() {
		unlock(f)
		f.Close()
	}, nil
}

// Converting reports whether a conversion holds dir's conversion lock now, or the lock of
// one of its parts (see Part), and who: "pid N, since TIME", or "part i/N: pid N, since
// TIME" (the first part found running).
func Converting(dir string) (holder string, running bool) {
	if holder, running := converting(dir, convertLockName); running {
		return holder, true
	}
	for _, name := range partLocks(dir) {
		if holder, running := converting(dir, name); running {
			var p Part
			if _, err := fmt.Sscanf(name, "convert.part-%d-of-%d.lock", &p.Index, &p.Count); err == nil {
				holder = "part " + p.String() + ": " + holder
			}
			return holder, true
		}
	}
	return "", false
}

// converting reports whether a conversion holds the lock in dir/name, and who.
func converting(dir, name string) (holder string, running bool) {
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return "", false
	}
	defer f.Close()
	if ok, _ := tryLock(f); ok {
		unlock(f)
		return "", false
	}
	return lockHolder(f), true
}

// lockHolder reads who holds the conversion lock f, waiting a little for a holder that
// has just taken it to say.
func lockHolder(f *os.File) string {
	for range 20 {
		b, _ := io.ReadAll(io.NewSectionReader(f, 0, holderLen))
		if s := strings.TrimSpace(string(b)); s != "" {
			return s
		}
		time.Sleep(5 * time.Millisecond)
	}
	return "a process that has not said who it is"
}
