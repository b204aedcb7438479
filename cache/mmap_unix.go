//go:build unix

package cache

import "syscall"

// mapShard maps the first size bytes of sh read-only.
func mapShard(sh *shard, size int64) ([]byte, error) {
	return syscall.Mmap(int(sh.f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
}

// mapFile maps the first size bytes of the open file fd read-only.
func mapFile(fd uintptr, size int64) ([]byte, error) {
	return syscall.Mmap(int(fd), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
}

func unmap(b []byte) error { return syscall.Munmap(b) }
