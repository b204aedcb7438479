//go:build !unix

package cache

import "os"

// Without flock, sharing a directory between processes is not protected; a single
// process is still safe.
func tryLock(*os.File) (bool, error) { return true, nil }
func lock(*os.File) error            { return nil }
func unlock(*os.File) error          { return nil }
func isNoSpace(error) bool           { return false }
