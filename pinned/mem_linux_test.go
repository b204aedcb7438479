//go:build linux

package pinned

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

func TestLockRefusedHook(t *testing.T) {
	defer func(old int) { slabBytes = old }(slabBytes)
	slabBytes = pageSize
	defer func(l, u func([]byte) error) { lockFunc, unlockFunc = l, u }(lockFunc, unlockFunc)

	tests := []struct {
		name      string
		failAt    int // the lockFunc call that fails, 0-based
		err       error
		wantInMsg []string
	}{
		{"ENOMEM on the first slab", 0, syscall.ENOMEM, []string{"slab 1 of 3", "cannot allocate memory", "RLIMIT_MEMLOCK is "}},
		{"EPERM on the last slab", 2, syscall.EPERM, []string{"slab 3 of 3", "operation not permitted", "ulimit -l"}},
		{"other error", 1, syscall.EAGAIN, []string{"slab 2 of 3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls int
			locked := map[uintptr]bool{}
			lockFunc = func(b []byte) error {
				defer func() { calls++ }()
				if calls == tt.failAt {
					return tt.err
				}
				locked[uintptr(unsafe.Pointer(&b[0]))] = true
				return nil
			}
			unlockFunc = func(b []byte) error {
				delete(locked, uintptr(unsafe.Pointer(&b[0])))
				return nil
			}
			p := newPool(t, &Options{BufferSize: pageSize, Budget: 3 * int64(pageSize)})
			st := p.Stats()
			if st.Locked {
				t.Error("Locked = true after a refused mlock")
			}
			for _, s := range tt.wantInMsg {
				if !strings.Contains(st.LockError, s) {
					t.Errorf("LockError %q does not contain %q", st.LockError, s)
				}
			}
			if len(locked) != 0 {
				t.Errorf("%d slabs left locked after the fallback", len(locked))
			}
			if b, ok := p.TryGet(); !ok { // unlocked memory still works
				t.Fatal("TryGet failed")
			} else {
				clear(b.Bytes())
				b.Release()
			}
		})
	}
}

// TestLockRefusedByRlimit runs New in a child process whose RLIMIT_MEMLOCK is 0 and,
// if it runs as root, whose main thread has dropped CAP_IPC_LOCK, so the real kernel
// refuses the mlock.
func TestLockRefusedByRlimit(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// GORACE: a -race binary otherwise sleeps a second at exit.
	cmd.Env = append(os.Environ(), "PINNED_TEST_CHILD=memlock", "GORACE=atexit_sleep_ms=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	got := strings.TrimSpace(string(out))
	if strings.HasPrefix(got, "skip: ") {
		t.Skip(got)
	}
	if !strings.HasPrefix(got, "locked=false ") || !strings.Contains(got, "RLIMIT_MEMLOCK is 0 B") {
		t.Fatalf("child reported %q, want locked=false and RLIMIT_MEMLOCK is 0 B", got)
	}
}

func init() { testChildren["memlock"] = memlockChild }

func memlockChild() int {
	// Capabilities are per thread: drop CAP_IPC_LOCK on this one and stay on it.
	runtime.LockOSThread()
	if err := syscall.Setrlimit(rlimitMemlock, &syscall.Rlimit{}); err != nil {
		fmt.Println("skip: setrlimit:", err)
		return 0
	}
	if err := dropCapIPCLock(); err != nil {
		fmt.Println("skip: capset:", err)
		return 0
	}
	p, err := New(&Options{BufferSize: 1 << 16})
	if err != nil {
		fmt.Println("New:", err)
		return 1
	}
	defer p.Close()
	st := p.Stats()
	fmt.Printf("locked=%t %s\n", st.Locked, st.LockError)
	return 0
}

// dropCapIPCLock clears CAP_IPC_LOCK from the calling thread's effective set, which
// would otherwise let root mlock past RLIMIT_MEMLOCK.
func dropCapIPCLock() error {
	const capIPCLock = 14
	hdr := struct {
		version uint32
		pid     int32
	}{version: 0x20080522} // _LINUX_CAPABILITY_VERSION_3
	var data [2]struct{ effective, permitted, inheritable uint32 }
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return e
	}
	if data[0].effective&(1<<capIPCLock) == 0 {
		return nil
	}
	data[0].effective &^= 1 << capIPCLock
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return errors.New(e.Error())
	}
	return nil
}

// TestGrowLockRefused: a locked pool whose new slab the kernel refuses to lock does not
// grow (a half-locked pool would make Stats.Locked a lie), says why, and stays usable.
func TestGrowLockRefused(t *testing.T) {
	defer func(old int) { slabBytes = old }(slabBytes)
	slabBytes = pageSize
	defer func(l, u func([]byte) error) { lockFunc, unlockFunc = l, u }(lockFunc, unlockFunc)
	var calls int
	lockFunc = func([]byte) error {
		defer func() { calls++ }()
		if calls >= 2 { // New's two slabs lock; Grow's do not
			return syscall.ENOMEM
		}
		return nil
	}
	unlockFunc = func([]byte) error { return nil }
	p := newPool(t, &Options{BufferSize: pageSize, Budget: 4 * int64(pageSize), Initial: 2})
	if st := p.Stats(); !st.Locked || st.Buffers != 2 {
		t.Fatalf("after New: locked %t, %d buffers; want locked, 2", st.Locked, st.Buffers)
	}
	n, err := p.Grow(2)
	if n != 0 || err == nil || !strings.Contains(err.Error(), "RLIMIT_MEMLOCK") {
		t.Fatalf("Grow with mlock refused = %d, %v; want 0 and the mlock error", n, err)
	}
	st := p.Stats()
	if !st.Locked || st.Buffers != 2 || st.BytesMapped != 2*int64(pageSize) {
		t.Errorf("after a refused Grow: locked %t, %d buffers, %d bytes mapped; want locked, 2, %d", st.Locked, st.Buffers, st.BytesMapped, 2*pageSize)
	}
	a, okA := p.TryGet()
	b, okB := p.TryGet()
	if !okA || !okB {
		t.Fatal("the pool's own buffers are gone")
	}
	a.Release()
	b.Release()
}
