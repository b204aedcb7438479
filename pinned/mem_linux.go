//go:build linux

package pinned

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/conveyor-ml/conveyor/internal/units"
)

// lockFunc and unlockFunc are swapped by tests to simulate a kernel that refuses mlock.
var (
	lockFunc   = syscall.Mlock
	unlockFunc = syscall.Munlock
)

// mapSlab maps size bytes of page-aligned anonymous memory. MAP_POPULATE faults every
// page in now, so the budget is committed, and a shortage surfaces, in New rather than
// in the middle of an epoch.
func mapSlab(size int) ([]byte, error) {
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|syscall.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("pinned: mmap %s slab: %w", units.Bytes(int64(size)), err)
	}
	return b, nil
}

// unmapSlab returns a slab from mapSlab to the kernel; munmap also drops any mlock.
func unmapSlab(b []byte) error {
	if err := syscall.Munmap(b); err != nil {
		return fmt.Errorf("pinned: munmap %s slab: %w", units.Bytes(int64(len(b))), err)
	}
	return nil
}

// lockSlabs mlocks every slab or, if the kernel refuses any of them, none: a half-locked
// pool would make Stats.Locked a lie. It returns why locking was refused.
func lockSlabs(slabs []*slab) error {
	for i := range slabs {
		if err := lockFunc(slabs[i].mem); err != nil {
			for j := range slabs[:i] {
				_ = unlockFunc(slabs[j].mem)
			}
			var total int64
			for j := range slabs {
				total += int64(len(slabs[j].mem))
			}
			msg := fmt.Sprintf("pinned: mlock slab %d of %d (%s; %s in all): %v",
				i+1, len(slabs), units.Bytes(int64(len(slabs[i].mem))), units.Bytes(total), err)
			if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOMEM) {
				msg += "; RLIMIT_MEMLOCK is " + memlockLimit() + " (raise it with ulimit -l or grant CAP_IPC_LOCK)"
			}
			return errors.New(msg)
		}
	}
	return nil
}

// memlockLimit describes the soft RLIMIT_MEMLOCK for an error message.
func memlockLimit() string {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(rlimitMemlock, &rl); err != nil {
		return "unknown (" + err.Error() + ")"
	}
	if rl.Cur == ^uint64(0) {
		return "unlimited"
	}
	return units.Bytes(int64(rl.Cur))
}
