package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conveyor-ml/conveyor/gpu/gputest"
	"github.com/conveyor-ml/conveyor/internal/treetest"
)

// A training step that reads a batch's device memory on its own stream for a while
// (the stand-in driver's Read) is never overwritten by a later batch's copy, however
// quickly the consumer releases it, and the CPU never waits for the step: Release, after
// WaitOn or with ReleaseOn, orders the device buffer's reuse after the step on the GPU.
func TestDeviceStepNotOverwritten(t *testing.T) {
	f := gputest.Use(t)
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	step := f.Stream()
	defer f.DestroyStream(step)
	const read = 15 * time.Millisecond
	readOn := func(b *Batch) error { return f.Read(step, uintptr(b.DevicePtr()), b.DeviceBytes(), read) }
	for _, c := range []struct {
		name    string
		convert bool
		step    func(b *Batch) error // waits for the copy and launches the step
		release func(b *Batch)
	}{
		{"WaitOn", false, func(b *Batch) error {
			if err := b.WaitOn(step); err != nil {
				return err
			}
			return readOn(b)
		}, func(b *Batch) { b.Release() }},
		{"WaitOn-convert", true, func(b *Batch) error {
			if err := b.WaitOn(step); err != nil {
				return err
			}
			return readOn(b)
		}, func(b *Batch) { b.Release() }},
		{"Wait-ReleaseOn", false, func(b *Batch) error {
			if err := b.Wait(); err != nil { // the CPU waits for the copy, by choice
				return err
			}
			return readOn(b)
		}, func(b *Batch) { b.ReleaseOn(step) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f.Reset()
			cfg := testConfig(2)
			cfg.Device.Name, cfg.Device.Cast = "cuda:0", c.convert
			ld := newLoader(t, src, cfg)
			var inRelease time.Duration
			n := 0
			for b, err := range ld.Epoch(context.Background(), 0) {
				if err != nil {
					t.Fatal(err)
				}
				if err := c.step(b); err != nil {
					t.Fatal(err)
				}
				t0 := time.Now()
				c.release(b)
				inRelease += time.Since(t0)
				n++
			}
			if n < 4 {
				t.Fatalf("only %d batches: the ring of %d buffers is not reused", n, ld.Stats().Device.Slots)
			}
			if races := f.Races(); races != 0 {
				t.Errorf("a later batch was copied into a device buffer the step still read, %d time(s) in %d batches", races, n)
			}
			// The CPU may wait for a copy (Release does, for the host buffer), never for
			// the step: n steps take n×read on the device.
			if inRelease > time.Duration(n)*read/2 {
				t.Errorf("%d releases took %v: the CPU waited for the steps (%v each)", n, inRelease, read)
			}
		})
	}
}

// A driver that refuses to register host memory (some virtual machines) leaves the loader
// working from unregistered buffers: one log line, Stats.Memory.Pinned.Registered false with the
// driver's reason, and the same batches.
func TestDeviceRegistrationRefused(t *testing.T) {
	f := gputest.Use(t)
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	want := collect(t, newLoader(t, src, testConfig(2)), context.Background(), 1, 0).data
	f.FailRegister(801) // CUDA_ERROR_NOT_SUPPORTED
	checkRegistrationRefused(t, src, want)
	if f.Registered() != 0 {
		t.Errorf("%d ranges registered after the loader's Close", f.Registered())
	}
}

// checkRegistrationRefused runs a loader on cuda:0 whose driver refuses registration and
// checks that it goes on, says so once and delivers want.
func checkRegistrationRefused(t *testing.T, src Source, want []byte) {
	t.Helper()
	var mu sync.Mutex
	var lines []string
	cfg := testConfig(2)
	cfg.Device.Name = "cuda:0"
	cfg.Logf = func(format string, args ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	ld := newLoader(t, src, cfg)
	st := ld.Stats().Memory.Pinned
	if st.Registered || !strings.Contains(st.RegisterError, "CUDA_ERROR_NOT_SUPPORTED") {
		t.Errorf("Stats.Pinned: registered %t, %q", st.Registered, st.RegisterError)
	}
	refused := 0
	for _, l := range lines {
		if strings.Contains(l, "did not register the batch buffers") && strings.Contains(l, "CUDA_ERROR_NOT_SUPPORTED") {
			refused++
		}
	}
	if refused != 1 {
		t.Errorf("%d log lines about the refusal, want 1: %q", refused, lines)
	}
	if got := deviceEpoch(t, ld, 1); !bytes.Equal(got, want) {
		t.Error("batches from unregistered buffers differ from the host loader's")
	}
}

// The stand-in refuses registration for a whole process when
// CONVEYOR_FAKECUDA_REGISTER_FAIL is set (as bench/gpu.sh --dry-run can): this test runs
// itself again with it.
func TestDeviceRegistrationRefusedByEnvironment(t *testing.T) {
	if os.Getenv("CONVEYOR_FAKECUDA_REGISTER_FAIL") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDeviceRegistrationRefusedByEnvironment$", "-test.count=1")
		cmd.Env = append(os.Environ(), "CONVEYOR_FAKECUDA_REGISTER_FAIL=801")
		out, err := cmd.CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("PASS")) {
			t.Fatalf("%v\n%s", err, out)
		}
		if bytes.Contains(out, []byte("SKIP")) {
			t.Skipf("%s", out)
		}
		return
	}
	gputest.Use(t)
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	want := collect(t, newLoader(t, src, testConfig(2)), context.Background(), 1, 0).data
	checkRegistrationRefused(t, src, want)
}
