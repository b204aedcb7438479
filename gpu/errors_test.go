package gpu

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/gpu/gputest"
)

func TestResultNames(t *testing.T) {
	for r, want := range map[Result]string{0: "CUDA_SUCCESS", 2: "CUDA_ERROR_OUT_OF_MEMORY", 700: "CUDA_ERROR_ILLEGAL_ADDRESS", 4242: "CUresult(4242)"} {
		if got := r.Name(); got != want {
			t.Errorf("Result(%d).Name() = %q, want %q", int(r), got, want)
		}
	}
	e := &Error{Device: "cuda:1", Op: "cuMemAlloc_v2", Result: OutOfMemory, Name: OutOfMemory.Name(), Desc: "out of memory", Detail: "ring slot 1 of 2"}
	if !errors.Is(e, OutOfMemory) || errors.Is(e, NoDevice) {
		t.Error("errors.Is does not match the Result")
	}
	want := "gpu: cuda:1: cuMemAlloc_v2 (ring slot 1 of 2): CUDA_ERROR_OUT_OF_MEMORY: out of memory"
	if e.Error() != want {
		t.Errorf("got %q\nwant %q", e.Error(), want)
	}
}

// Without a driver, cuda:N is an error saying what is missing, and auto falls back to
// the host with one log line.
func TestNoDriver(t *testing.T) {
	t.Setenv(libcudaEnv, "/nonexistent/libcuda.so.1")
	_, err := Open("cuda:0", nil)
	if err == nil || !strings.Contains(err.Error(), "gpu: cuda:0: cannot load the CUDA driver") || !strings.Contains(err.Error(), "/nonexistent/libcuda.so.1") {
		t.Fatalf("cuda:0 without a driver: %v", err)
	}
	var lines []string
	d, err := Open("auto", func(format string, args ...any) { lines = append(lines, format) })
	if err != nil || d.Kind() != Host || d.Name() != "cpu" {
		t.Fatalf("auto without a driver: %v, %v", d, err)
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "no usable GPU") {
		t.Errorf("auto logged %q", lines)
	}
	d.Close()
	for _, bad := range []string{"gpu", "cuda:x", "cuda:-1", ""} {
		if _, err := Open(bad, nil); err == nil {
			t.Errorf("Open(%q) succeeded", bad)
		}
	}
}

func TestNoSuchGPU(t *testing.T) {
	gputest.Use(t)
	_, err := Open("cuda:3", nil)
	if err == nil || !strings.Contains(err.Error(), "no such GPU: the driver") || !strings.Contains(err.Error(), "sees 1") {
		t.Fatalf("cuda:3 on a one-GPU driver: %v", err)
	}
}

// An allocation the device cannot satisfy fails NewRing with the bytes asked for and
// the memory free, and leaves nothing allocated.
func TestOutOfMemory(t *testing.T) {
	f := gputest.Use(t)
	d := openT(t, "cuda:0")
	defer d.Close()
	_, err := d.NewRing(&RingOptions{Slots: 2, Bytes: 600 << 20})
	var e *Error
	if !errors.As(err, &e) || e.Result != OutOfMemory || e.Op != "cuMemAlloc_v2" {
		t.Fatalf("two 600 MiB slots on a 1 GiB device: %v", err)
	}
	for _, s := range []string{"ring slot 2 of 2", "600 MiB each", "1.2 GiB for the ring", "free of 1 GiB", "CUDA_ERROR_OUT_OF_MEMORY"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q lacks %q", err, s)
		}
	}
	if d.Allocated() != 0 || f.Allocated() != 0 {
		t.Errorf("a failed NewRing left %d (driver %d) bytes allocated", d.Allocated(), f.Allocated())
	}
}

// A copy that fails on the device surfaces at the slot's next Ready or Wait, names the
// driver call and code, sticks for later uploads, and Close still frees everything.
func TestAsyncFailure(t *testing.T) {
	f := gputest.Use(t)
	d := openT(t, "cuda:0")
	r := newRing(t, d, RingOptions{Slots: 2, Bytes: 1024})
	a, _ := r.TryAcquire()
	if err := a.Upload(make([]byte, 1024)); err != nil {
		t.Fatal(err)
	}
	if err := a.Wait(); err != nil {
		t.Fatal(err)
	}
	f.Fail("cuMemcpyHtoDAsync_v2", 1)
	b, _ := r.TryAcquire()
	// As on a GPU, the fault may already show when the event is recorded, or only later.
	err := b.Upload(make([]byte, 1024))
	if err == nil {
		err = b.Wait()
	}
	if !errors.Is(err, Result(700)) || !strings.Contains(err.Error(), "an illegal memory access was encountered") {
		t.Fatalf("failed copy: %v", err)
	}
	if err := b.Wait(); !errors.Is(err, Result(700)) {
		t.Errorf("Wait again: %v", err)
	}
	if _, err := b.Ready(); err == nil {
		t.Error("Ready after a failed copy reports no error")
	}
	b.Release()
	c, _ := r.TryAcquire()
	if err := c.Upload(make([]byte, 10)); !errors.Is(err, Result(700)) {
		t.Errorf("upload after the fault: %v", err)
	}
	c.Release()
	a.Release()
	if err := r.Close(); err == nil {
		t.Error("close after a device fault reports nothing")
	}
	if err := d.Close(); err != nil {
		t.Errorf("device close: %v", err)
	}
	if f.Allocated() != 0 || f.PrimaryRefs() != 0 {
		t.Errorf("after close: %d bytes, %d primary references", f.Allocated(), f.PrimaryRefs())
	}
}

// A host device with a fault hook fails the operation it names, with the driver's code.
func TestHostFault(t *testing.T) {
	d := NewHost(&HostOptions{Fault: func(op string) Result {
		if op == "cuLaunchKernel" {
			return 719
		}
		return Success
	}})
	defer d.Close()
	conv, _ := NewCaster(packOptions())
	r := newRing(t, d, RingOptions{Slots: 1, Bytes: conv.InBytes(1), Cast: conv})
	defer closeRing(t, r)
	s, _ := r.Acquire(context.Background())
	defer s.Release()
	err := s.Upload(make([]byte, conv.InBytes(1)))
	if !errors.Is(err, Result(719)) || !strings.Contains(err.Error(), "gpu: cpu: cuLaunchKernel: CUDA_ERROR_LAUNCH_FAILED") {
		t.Fatalf("faulted launch: %v", err)
	}
	if err := s.Wait(); !errors.Is(err, Result(719)) {
		t.Errorf("Wait after a failed upload: %v", err)
	}
}

// NewRing reports every invalid field of its options at once, before allocating anything;
// nil options are the zero RingOptions, which lack the required Slots and Bytes.
func TestRingOptionsValidate(t *testing.T) {
	d := NewHost(nil)
	defer d.Close()
	conv, err := NewCaster(packOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		o    *RingOptions
		want []string
	}{
		{"nil", nil, []string{"Slots 0 must be ≥ 1", "Bytes 0 must be ≥ 1"}},
		{"negative", &RingOptions{Slots: -1, Bytes: -2}, []string{"Slots -1 must be ≥ 1", "Bytes -2 must be ≥ 1"}},
		{"partial sample", &RingOptions{Slots: 0, Bytes: conv.InBytes(1) + 1, Cast: conv}, []string{"Slots 0 must be ≥ 1", "not a whole number of 8x6 uint8 samples"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			verr := c.o.EnsureDefaults().Validate()
			r, err := d.NewRing(c.o)
			if err == nil {
				r.Close()
				t.Fatal("NewRing accepted invalid options")
			}
			for _, want := range c.want {
				if !strings.Contains(err.Error(), want) || verr == nil || !strings.Contains(verr.Error(), want) {
					t.Errorf("NewRing: %v; Validate: %v; want both to mention %q", err, verr, want)
				}
			}
		})
	}
	if d.Allocated() != 0 {
		t.Errorf("refused rings left %d bytes allocated", d.Allocated())
	}
}
