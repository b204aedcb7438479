package gpu

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/conveyor-ml/conveyor/gpu/gputest"
	"github.com/conveyor-ml/conveyor/gpu/kernels"
	"github.com/conveyor-ml/conveyor/pack"
)

// A slot released while the consumer's stream still reads it is not written again until
// that read is done: the ring's stream waits for an event recorded on the consumer's
// stream at Release, on the device, and the host does not wait. Each way of naming the
// consumer's stream: WaitOn a stream, WaitOn the legacy default stream (0), and
// ReleaseOn after a host Wait. The stand-in counts a write into bytes a read still has
// pending as a race.
func TestSlotReuseWaitsForConsumer(t *testing.T) {
	f := gputest.Use(t)
	d := openT(t, "cuda:0")
	defer d.Close()
	const size = 1 << 20
	bufs, done := pinnedBufs(t, d, 2, size)
	defer done()
	step := f.Stream()
	defer f.DestroyStream(step)
	const read = 150 * time.Millisecond
	for _, c := range []struct {
		name string
		use  func(s *Slot) uintptr // makes the consumer's stream wait for the slot; returns it
		done func(s *Slot, stream uintptr)
	}{
		{"WaitOn", func(s *Slot) uintptr { must(t, s.WaitOn(step)); return step }, func(s *Slot, _ uintptr) { s.Release() }},
		{"WaitOn-default-stream", func(s *Slot) uintptr { must(t, s.WaitOn(0)); return 0 }, func(s *Slot, _ uintptr) { s.Release() }},
		{"Wait-ReleaseOn", func(s *Slot) uintptr { must(t, s.Wait()); return step }, func(s *Slot, st uintptr) { s.ReleaseOn(st) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f.Reset()
			r := newRing(t, d, RingOptions{Slots: 1, Bytes: size})
			defer closeRing(t, r)
			s, _ := r.TryAcquire()
			must(t, s.Upload(bufs[0]))
			stream := c.use(s)
			// The training step: a kernel reading the batch for a while.
			must(t, f.Read(stream, uintptr(s.Ptr()), size, read))
			t0 := time.Now()
			c.done(s, stream)
			s2, ok := r.TryAcquire()
			if !ok || s2 != s {
				t.Fatal("the released slot did not come back")
			}
			must(t, s2.Upload(bufs[1]))
			if el := time.Since(t0); el > read/2 {
				t.Errorf("release and the next upload took %v on the host: they must not wait for the step (%v)", el, read)
			}
			got := make([]byte, size)
			must(t, s2.Read(got))
			if !bytes.Equal(got, bufs[1]) {
				t.Error("the slot does not hold the second batch")
			}
			if n := f.Races(); n != 0 {
				t.Errorf("the next upload wrote into the slot %d time(s) while the step still read it", n)
			}
			s2.Release()
		})
	}
}

// A slot whose consumer stream cannot be waited for (the stream is not the ring's
// context's) refuses its next upload with an error naming the slot, rather than write under
// a running step.
func TestSlotReuseUnorderable(t *testing.T) {
	f := gputest.Use(t)
	d := openT(t, "cuda:0")
	defer d.Close()
	r := newRing(t, d, RingOptions{Slots: 1, Bytes: 4096})
	defer closeRing(t, r)
	s, _ := r.TryAcquire()
	host := make([]byte, 4096)
	must(t, s.Upload(host))
	s.ReleaseOn(0xdead) // not a stream: recording and synchronising both fail
	s, _ = r.TryAcquire()
	err := s.Upload(host)
	if err == nil || !strings.Contains(err.Error(), "slot 0: cannot order its reuse after the consumer's stream 0xdead") {
		t.Errorf("upload after an unorderable release: %v", err)
	}
	s.Release()
	_ = f
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Polling a copy that is still running costs no allocation.
func TestNotReadyPollAllocates(t *testing.T) {
	f := gputest.Use(t)
	d := openT(t, "cuda:0")
	defer d.Close()
	const size = 4096
	bufs, done := pinnedBufs(t, d, 1, size)
	defer done()
	buf := bufs[0]
	r := newRing(t, d, RingOptions{Slots: 1, Bytes: size})
	defer closeRing(t, r)
	s, _ := r.TryAcquire()
	defer s.Release()
	f.Delay(300 * time.Millisecond)
	must(t, s.Upload(buf))
	notReady := 0
	allocs := testing.AllocsPerRun(50, func() {
		if ok, err := s.Ready(); !ok && err == nil {
			notReady++
		}
	})
	if notReady < 50 {
		t.Skipf("the copy finished during the polls (%d of 51 not ready)", notReady)
	}
	if allocs != 0 {
		t.Errorf("a NOT_READY poll allocates %.1f times", allocs)
	}
	must(t, s.Wait())
}

// Every return code of the calls Open makes is checked: a failure names the call and
// gives the context back; a failed context pop is reported too.
func TestDriverReturnCodesChecked(t *testing.T) {
	f := gputest.Use(t)
	for _, op := range []string{"cuDeviceGetName", "cuDeviceTotalMem_v2", "cuDriverGetVersion"} {
		f.Fail(op, 1)
		_, err := Open("cuda:0", nil)
		if err == nil || !strings.Contains(err.Error(), op) {
			t.Errorf("%s failing: Open gave %v", op, err)
		}
		if n := f.PrimaryRefs(); n != 0 {
			t.Errorf("%s failing: primary context retained %d times", op, n)
		}
	}
	d := openT(t, "cuda:0")
	defer d.Close()
	f.Fail("cuCtxPopCurrent_v2", 1)
	_, _, err := d.MemInfo()
	if err == nil || !strings.Contains(err.Error(), "cuCtxPopCurrent_v2") {
		t.Errorf("a failed pop: %v", err)
	}
}

// The driver is searched for in the usual places, in order, the first that loads and
// initialises winning; when none does, the error names every place and why.
func TestDriverDiscovery(t *testing.T) {
	f := gputest.Use(t)
	t.Setenv(libcudaEnv, "")
	defer func(old func() []string) { driverPlaces = old; clearDriverCache() }(driverPlaces)
	clearDriverCache()
	driverPlaces = func() []string { return []string{"/nonexistent/a/libcuda.so.1", "libconveyor-no-cuda.so.1", f.Path} }
	info, err := Driver()
	if err != nil || info.Library != f.Path || info.Version != 13000 {
		t.Fatalf("the third place holds the driver: %+v, %v", info, err)
	}
	clearDriverCache()
	driverPlaces = func() []string { return []string{"/nonexistent/a/libcuda.so.1", "libconveyor-no-cuda.so.1"} }
	_, err = Open("cuda:0", nil)
	for _, want := range []string{"cannot load the CUDA driver", "$CONVEYOR_LIBCUDA", "/nonexistent/a/libcuda.so.1: not there", "libconveyor-no-cuda.so.1: cannot open shared object file"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("no driver anywhere: %v\nlacks %q", err, want)
		}
	}
	// $CONVEYOR_LIBCUDA, when set, is the only place tried.
	clearDriverCache()
	driverPlaces = func() []string { return []string{f.Path} }
	t.Setenv(libcudaEnv, "/nonexistent/b/libcuda.so.1")
	_, err = Driver()
	if err == nil || !strings.Contains(err.Error(), "tried only it") || strings.Contains(err.Error(), f.Path) {
		t.Errorf("a wrong $CONVEYOR_LIBCUDA: %v", err)
	}
}

func clearDriverCache() {
	cudaMu.Lock()
	clear(cudaLibs)
	cudaMu.Unlock()
}

// Kernels are compiled with the JIT's logs: a PTX the driver refuses is reported with
// the JIT's error log, which says what it refused. Runs on the stand-in and on a GPU.
func TestJITLog(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *Device, _ *gputest.Driver) {
		c, ok := d.drv.(*cudaDriver)
		if !ok {
			t.Skip("the host backend compiles nothing")
		}
		mod, info, err := c.loadModule(kernels.PTX)
		if err != nil {
			t.Fatalf("the conversion kernels: %v", err)
		}
		t.Logf("JIT info log: %s", info)
		must(t, c.call("cuModuleUnload", c.l.moduleUnload, mod))
		bad := strings.Replace(kernels.PTX, ".version ", ".version 99.0 // ", 1)
		_, _, err = c.loadModule(bad)
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(err.Error(), "JIT log:") || !strings.Contains(err.Error(), "99.0") {
			t.Errorf("PTX of ISA 99.0: %v", err)
		}
	})
}

// A context the caller made (OpenContext) is where the ring's memory goes; the primary
// context is not touched.
func TestOpenContextUsesThatContext(t *testing.T) {
	f := gputest.Use(t)
	ctx := f.NewContext()
	d, err := OpenContext(0, ctx)
	must(t, err)
	r := newRing(t, d, RingOptions{Slots: 2, Bytes: 8192})
	if got := f.ContextAllocated(ctx); got != 2*8192 {
		t.Errorf("%d bytes in the caller's context, want %d", got, 2*8192)
	}
	if f.PrimaryRefs() != 0 {
		t.Error("OpenContext retained the primary context")
	}
	s, _ := r.TryAcquire()
	host := make([]byte, 8192)
	fill(host, 3)
	must(t, s.Upload(host))
	got := make([]byte, 8192)
	must(t, s.Read(got))
	if !bytes.Equal(got, host) {
		t.Error("read back differs")
	}
	// A stream of the primary context is not this context's.
	other := f.Stream()
	defer f.DestroyStream(other)
	if err := s.WaitOn(other); err == nil {
		t.Error("WaitOn a stream of another context succeeded")
	}
	s.Release()
	closeRing(t, r)
	must(t, d.Close())
	if got := f.ContextAllocated(ctx); got != 0 {
		t.Errorf("%d bytes left in the caller's context", got)
	}
}

// The ordering holds for real kernels too, on every CUDA backend (the stand-in and a GPU):
// a consumer stream runs the conversion kernel over the slot's bytes several times after
// WaitOn, the slot is released and the next batch uploaded into it at once; the last
// kernel's output must be the first batch's conversion, never the second's.
func TestSlotReuseKernelOrder(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *Device, _ *gputest.Driver) {
		c, ok := d.drv.(*cudaDriver)
		if !ok {
			t.Skip("the host backend runs nothing asynchronously")
		}
		conv, err := NewCaster(&pack.Options{Width: 224, Height: 224, Normalize: true})
		must(t, err)
		const samples = 64
		in := conv.InBytes(samples)
		bufs, done := pinnedBufs(t, d, 2, in)
		defer done()
		a, b := bufs[0], bufs[1]
		must(t, c.loadConverter())
		out, err := d.alloc(int64(conv.OutBytes(samples)), "test output")
		must(t, err)
		defer d.free(out, int64(conv.OutBytes(samples)))
		step, err := c.newStream()
		must(t, err)
		defer c.destroyStream(step)
		r := newRing(t, d, RingOptions{Slots: 1, Bytes: in})
		defer closeRing(t, r)
		s, _ := r.TryAcquire()
		must(t, s.Upload(a))
		must(t, s.WaitOn(step))
		plane := int64(224 * 224)
		for range 20 { // the step: kernels reading the slot for a while
			must(t, c.convert(&launch{dst: out, src: s.Ptr(), pixels: samples * plane, plane: plane, conv: conv}, step))
		}
		s.Release()
		s, _ = r.TryAcquire()
		must(t, s.Upload(b))
		must(t, c.syncStream(step))
		got := make([]byte, conv.OutBytes(samples))
		must(t, c.copyDtoH(got, out))
		want := make([]byte, len(got))
		must(t, conv.Host(want, a))
		if i := firstDiff(got, want); i >= 0 {
			t.Errorf("the step's output differs from the first batch's conversion at byte %d: the next upload wrote under it", i)
		}
		must(t, s.Wait())
		s.Release()
	})
}

// Close racing with Acquire and Release neither hangs nor loses a slot's memory.
func TestRingCloseRacesAcquire(t *testing.T) {
	d := openT(t, "cpu")
	defer d.Close()
	for i := range 30000 {
		r := newRing(t, d, RingOptions{Slots: 1, Bytes: 64, Cast: nil})
		done := make(chan struct{})
		go func() {
			defer close(done)
			if s, err := r.Acquire(context.Background()); err == nil {
				s.Release()
			}
		}()
		closed := make(chan error, 1)
		go func() { closed <- r.Close() }()
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatalf("iteration %d: Close hung", i)
		}
		<-done
	}
}

// A ring closed (or a slot released after Close) while a step still reads a slot frees its
// memory only after the step.
func TestCloseWaitsForConsumer(t *testing.T) {
	f := gputest.Use(t)
	d := openT(t, "cuda:0")
	defer d.Close()
	step := f.Stream()
	defer f.DestroyStream(step)
	host := make([]byte, 4096)
	for _, held := range []bool{false, true} {
		f.Reset()
		r := newRing(t, d, RingOptions{Slots: 1, Bytes: 4096})
		s, _ := r.TryAcquire()
		must(t, s.Upload(host))
		must(t, s.WaitOn(step))
		must(t, f.Read(step, uintptr(s.Ptr()), 4096, 100*time.Millisecond))
		if held {
			r.Close() // reports the held slot
			s.Release()
		} else {
			s.Release()
			must(t, r.Close())
		}
		if n := f.Races(); n != 0 {
			t.Errorf("held=%t: the slot was freed while the step read it", held)
		}
	}
}
