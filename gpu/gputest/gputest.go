// Package gputest builds and drives a stand-in for the CUDA driver (src/fakecuda.c) that
// runs on the CPU, so the tests of package gpu's CUDA backend, and of a loader using it,
// run on machines without a GPU. It needs gcc and LLVM's llc (for the conversion
// kernels' bodies); tests that use it skip, saying so, when either is missing. It lives
// beside package gpu because the stand-in runs gpu/kernels' conversion bodies.
package gputest

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/conveyor-ml/conveyor/gpu/kernels"
	"github.com/conveyor-ml/conveyor/internal/dl"
)

//go:embed src/fakecuda.c
var source string

var (
	buildOnce sync.Once
	libPath   string
	buildErr  error
)

// build compiles the library into a folder named by its sources' hash under the
// temporary directory, reusing an earlier build.
func build() (string, error) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" || !dl.Supported {
		return "", fmt.Errorf("the fake driver is built for linux/amd64 only")
	}
	for _, tool := range []string{"gcc", "llc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", fmt.Errorf("%s not found (Debian packages gcc and llvm)", tool)
		}
	}
	h := sha256.Sum256([]byte(source + kernels.Body))
	dir := filepath.Join(os.TempDir(), "conveyor-fakecuda-"+hex.EncodeToString(h[:8]))
	lib := filepath.Join(dir, "libfakecuda.so")
	if _, err := os.Stat(lib); err == nil {
		return lib, nil
	}
	tmp, err := os.MkdirTemp(os.TempDir(), "conveyor-fakecuda-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	files := map[string]string{"fakecuda.c": source, "body.ll": kernels.Body}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(text), 0o644); err != nil {
			return "", err
		}
	}
	steps := [][]string{
		{"llc", "-O2", "-mtriple=x86_64-pc-linux-gnu", "-mattr=+f16c", "-filetype=obj", "-relocation-model=pic", "body.ll", "-o", "body.o"},
		{"gcc", "-O1", "-Wall", "-Werror", "-shared", "-fPIC", "-o", "libfakecuda.so", "fakecuda.c", "body.o", "-lpthread"},
	}
	for _, s := range steps {
		cmd := exec.Command(s[0], s[1:]...)
		cmd.Dir = tmp
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("%v: %v\n%s", s, err, out)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Rename into place so a concurrent test process never loads a half-written file.
	part := filepath.Join(dir, fmt.Sprintf("libfakecuda.so.%d", os.Getpid()))
	data, err := os.ReadFile(filepath.Join(tmp, "libfakecuda.so"))
	if err == nil {
		err = os.WriteFile(part, data, 0o755)
	}
	if err == nil {
		err = os.Rename(part, lib)
	}
	return lib, err
}

// Build compiles the stand-in driver (once per process) and returns the library's path,
// for scripts that point CONVEYOR_LIBCUDA at it (bench/gpu.sh --dry-run).
func Build() (string, error) {
	buildOnce.Do(func() { libPath, buildErr = build() })
	return libPath, buildErr
}

// Driver is the loaded fake driver's test hooks.
type Driver struct {
	Path                                                  string
	fail, delay, allocated, registered, reset, primaryRef uintptr
	setTotal, registerFail, races, stream, streamDestroy  uintptr
	read, ctxCreate, ctxAllocated                         uintptr
}

var (
	libOnce sync.Once
	lib     *Driver
	libErr  error
)

// Use builds the fake driver (once per process), points the gpu package at it through
// CONVEYOR_LIBCUDA for the rest of t, clears its sticky error and hooks, and returns
// the hooks. It skips t when the fake cannot be built here.
func Use(t testing.TB) *Driver {
	t.Helper()
	if _, err := Build(); err != nil {
		t.Skipf("fake CUDA driver unavailable: %v", err)
	}
	libOnce.Do(func() {
		l := &Driver{Path: libPath}
		libErr = dl.Bind("fakecuda", libPath, map[string]*uintptr{
			"fake_fail": &l.fail, "fake_delay_us": &l.delay, "fake_allocated": &l.allocated,
			"fake_registered": &l.registered, "fake_reset": &l.reset, "fake_primary_refs": &l.primaryRef,
			"fake_set_total": &l.setTotal, "fake_register_fail": &l.registerFail, "fake_races": &l.races,
			"fake_stream": &l.stream, "fake_stream_destroy": &l.streamDestroy, "fake_read": &l.read,
			"fake_ctx_create": &l.ctxCreate, "fake_ctx_allocated": &l.ctxAllocated,
		})
		lib = l
	})
	if libErr != nil {
		t.Fatal(libErr)
	}
	if s, ok := t.(interface{ Setenv(k, v string) }); ok {
		s.Setenv("CONVEYOR_LIBCUDA", libPath)
	} else {
		t.Fatal("gputest.Use needs a *testing.T or *testing.B")
	}
	lib.Reset()
	return lib
}

// Fail makes the n-th later call of the driver function op (1: the next) fail with
// CUDA_ERROR_ILLEGAL_ADDRESS; for cuMemcpyHtoDAsync_v2 and cuLaunchKernel the failure
// happens on the stream, asynchronously, and sticks, as a fault on a GPU does.
func (l *Driver) Fail(op string, n int) {
	b := append([]byte(op), 0)
	dl.Call(l.fail, uintptr(unsafe.Pointer(&b[0])), uintptr(n))
}

// Delay makes every copy take at least d.
func (l *Driver) Delay(d time.Duration) { dl.Call(l.delay, uintptr(d.Microseconds())) }

// Allocated returns the device bytes allocated and not freed.
func (l *Driver) Allocated() int64 { return int64(dl.Call(l.allocated)) }

// Registered returns the number of host ranges registered and not unregistered.
func (l *Driver) Registered() int { return int(int32(dl.Call(l.registered))) }

// PrimaryRefs returns the primary context's retain count.
func (l *Driver) PrimaryRefs() int { return int(int32(dl.Call(l.primaryRef))) }

// SetTotal sets the device memory size, until Reset (default 1 GiB).
func (l *Driver) SetTotal(n int64) { dl.Call(l.setTotal, uintptr(n)) }

// FailRegister makes every later cuMemHostRegister_v2 fail with code (0: succeed again),
// as a virtual machine that refuses to page-lock memory does. The environment variable
// CONVEYOR_FAKECUDA_REGISTER_FAIL does the same for a whole process (read at cuInit).
func (l *Driver) FailRegister(code int) { dl.Call(l.registerFail, uintptr(code)) }

// Races returns how many times a copy or kernel wrote into device bytes that a Read
// still had pending.
func (l *Driver) Races() int { return int(int32(dl.Call(l.races))) }

// Stream makes a stream (a CUstream) in the primary context, standing in for a training
// step's; DestroyStream ends it after its work.
func (l *Driver) Stream() uintptr { return dl.Call(l.stream) }

// DestroyStream ends a stream made by Stream once its queued work is done.
func (l *Driver) DestroyStream(s uintptr) { dl.Call(l.streamDestroy, s) }

// Read enqueues on stream s (0: the primary context's legacy default stream) a kernel that
// reads the n device bytes at p for d, as a training step does with a batch. A write into
// them before it finishes counts in Races.
func (l *Driver) Read(s uintptr, p uintptr, n int, d time.Duration) error {
	if r := int32(dl.Call(l.read, s, p, uintptr(n), uintptr(d.Microseconds()))); r != 0 {
		return fmt.Errorf("gputest: read on stream %#x: CUresult %d", s, r)
	}
	return nil
}

// NewContext makes a context (a CUcontext) on the one device without making it current,
// as a library with its own contexts would; ContextAllocated reports its memory.
func (l *Driver) NewContext() uintptr { return dl.Call(l.ctxCreate) }

// ContextAllocated returns the device bytes allocated in context ctx and not freed.
func (l *Driver) ContextAllocated(ctx uintptr) int64 { return int64(dl.Call(l.ctxAllocated, ctx)) }

// Reset clears the sticky error, the failure hooks, the delay and the race count, and
// restores the memory size.
func (l *Driver) Reset() { dl.Call(l.reset) }
