//go:build !unix

package files

import "os"

// OpenNonBlocking opens name read-only.
func OpenNonBlocking(name string) (*os.File, error) { return os.Open(name) }
