//go:build unix

package pipeline

import (
	"os"
	"syscall"
)

func openNonBlocking(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
