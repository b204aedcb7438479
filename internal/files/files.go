// Package files holds the checks every reader of samples from a file system makes: a
// sample must be a regular file, and opening one must not block on a named pipe.
package files

import (
	"errors"
	"fmt"
	"io/fs"
)

// ErrNotRegular is a sample that is a named pipe, device, socket or directory.
var ErrNotRegular = errors.New("not a regular file")

// Regular returns nil for a regular file, else an error wrapping ErrNotRegular that says
// what the file is.
func Regular(fi fs.FileInfo) error {
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
	return fmt.Errorf("%w (%s)", ErrNotRegular, kind)
}
