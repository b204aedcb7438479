//go:build unix

package files

import (
	"os"
	"syscall"
)

// OpenNonBlocking opens name read-only without blocking on a named pipe.
func OpenNonBlocking(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
