package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conveyor-ml/conveyor/gpu/gputest"
	"github.com/conveyor-ml/conveyor/internal/treetest"
	"github.com/conveyor-ml/conveyor/pack"
)

// deviceEpoch runs epoch e and returns every batch as read back from the device, with
// the loader's delivered layout and dtype.
func deviceEpoch(t *testing.T, ld *Loader, e int) []byte {
	t.Helper()
	var all []byte
	for b, err := range ld.Epoch(context.Background(), e) {
		if err != nil {
			t.Fatalf("epoch %d: %v", e, err)
		}
		if err := b.Wait(); err != nil {
			t.Fatal(err)
		}
		want := b.Len * 3 * ld.cfg.Pack.Width * ld.cfg.Pack.Height * ld.cfg.Pack.DType.Size()
		if b.DeviceBytes() != want || b.DevicePtr() == 0 {
			t.Fatalf("batch %d: %d device bytes at %#x, want %d", b.Number, b.DeviceBytes(), b.DevicePtr(), want)
		}
		got := make([]byte, want)
		if err := b.slot.Read(got); err != nil {
			t.Fatal(err)
		}
		all = append(all, got...)
		b.Release()
	}
	return all
}

// Batches on the device, copied as packed or converted there from uint8, are exactly the
// host loader's batches, on every dtype and layout.
func TestDeviceBatchesMatchHost(t *testing.T) {
	f := gputest.Use(t)
	t.Cleanup(func() { // after the loaders' Close
		if f.Allocated() != 0 || f.Registered() != 0 || f.PrimaryRefs() != 0 {
			t.Errorf("after Close: %d device bytes, %d registered ranges, %d context references", f.Allocated(), f.Registered(), f.PrimaryRefs())
		}
	})
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dtype  pack.DType
		layout pack.Layout
	}{{pack.Float32, pack.NCHW}, {pack.Float16, pack.NHWC}, {pack.BFloat16, pack.NCHW}} {
		host := testConfig(2)
		host.Pack.DType, host.Pack.Layout = c.dtype, c.layout
		want := collect(t, newLoader(t, src, host), context.Background(), 1, 0).data
		for _, dev := range []string{"cuda:0", "cpu"} {
			for _, convert := range []bool{false, true} {
				name := fmt.Sprintf("%v-%v-%s-convert=%t", c.dtype, c.layout, dev, convert)
				cfg := testConfig(2)
				cfg.Pack.DType, cfg.Pack.Layout = c.dtype, c.layout
				cfg.Device.Name, cfg.Device.Cast = dev, convert
				ld := newLoader(t, src, cfg)
				if got := deviceEpoch(t, ld, 1); !bytes.Equal(got, want) {
					t.Errorf("%s: device batches differ from the host loader's", name)
				}
				st := ld.Stats()
				if st.Device.Copies != int64(ld.Len()) {
					t.Errorf("%s: %d copies for %d batches", name, st.Device.Copies, ld.Len())
				}
				if dev == "cuda:0" {
					per := int64(cfg.Batch.Size * 3 * 24 * 24)
					wantBytes := 2 * per * int64(c.dtype.Size())
					if convert {
						wantBytes += per
					}
					if st.Device.Bytes != wantBytes || !strings.HasPrefix(st.Device.Name, "cuda:0 (conveyor fake GPU") {
						t.Errorf("%s: device %q holds %d bytes, want %d", name, st.Device.Name, st.Device.Bytes, wantBytes)
					}
				}
			}
		}
	}
}

// overlapEpoch runs epoch 0 with a consumer that waits for each batch's copy, then holds
// the batch for step (reading it back from the device after the step when read is set,
// returning the bytes). It counts the batches that were ready to copy at least margin
// before the consumer wanted them (measured) and those of them whose copy the consumer
// still had to wait for (blocked). A batch completed just now (input-bound: the workers
// were slower than the step, as on a busy test machine) cannot have been copied yet.
// Batches are copied in order, so a batch is ready to copy when it and all before it are
// complete. The first two fill the ring at the epoch's start, when the consumer asks for
// them at once, and are not counted.
func overlapEpoch(t *testing.T, ld *Loader, step, margin time.Duration, read bool) (blocked, measured int, data []byte) {
	t.Helper()
	var inOrder int64 // when the batches so far were all complete, Unix ns
	for b, err := range ld.Epoch(context.Background(), 0) {
		if err != nil {
			t.Fatal(err)
		}
		inOrder = max(inOrder, b.completed.Load())
		inputBound := b.Number < 2 || time.Since(time.Unix(0, inOrder)) < margin
		before := ld.Stats().Device.CopyWaits
		if err := b.Wait(); err != nil {
			t.Fatal(err)
		}
		if !inputBound {
			measured++
			if ld.Stats().Device.CopyWaits > before {
				blocked++
			}
		}
		time.Sleep(step) // the training step
		if read {
			buf := make([]byte, b.DeviceBytes())
			if err := b.slot.Read(buf); err != nil {
				t.Fatal(err)
			}
			data = append(data, buf...)
		}
		b.Release()
	}
	return blocked, measured, data
}

// With copies that take 3 ms and a training step of 40 ms (20 ms of margin for a loaded
// machine to schedule a copy), the consumer never finds a batch still being copied: each
// is copied while the previous one is in use.
func TestDeviceCopiesOverlapTheStep(t *testing.T) {
	f := gputest.Use(t)
	f.Delay(3 * time.Millisecond)
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(2)
	cfg.Device.Name = "cuda:0"
	cfg.Augment = cfg.Augment[:2] // crop and flip: keep the workers ahead of the step
	ld := newLoader(t, src, cfg)
	blocked, measured, _ := overlapEpoch(t, ld, 40*time.Millisecond, 20*time.Millisecond, false)
	st := ld.Stats()
	t.Logf("%d batches, %d waits on a copy (%v), device buffers waited %v for release", st.Batches, st.Device.CopyWaits, st.Device.CopyWaitTime, st.Device.SlotWait)
	if measured < 3 {
		t.Skipf("only %d of %d batches were complete a copy's time before the consumer asked; the machine is too busy to tell", measured, st.Batches)
	}
	// Without overlap every one of them waits. A loaded 2-core test machine can delay
	// the copy's thread past the margin now and then, so a minority is tolerated here;
	// TestGPUConsumerNeverWaits on a GPU allows none.
	t.Logf("the consumer waited on %d of the %d copies of batches that were ready in time", blocked, measured)
	if 2*blocked > measured {
		t.Errorf("the consumer waited on %d of the %d copies of batches that were ready in time: copies do not run ahead", blocked, measured)
	}
}

// A copy that fails on the device ends the epoch with an error naming the batch, and
// Close still frees every device byte, registration and context reference.
func TestDeviceFailureNamesBatch(t *testing.T) {
	f := gputest.Use(t)
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(2)
	cfg.Device.Name = "cuda:0"
	ld, err := New(src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.Fail("cuMemcpyHtoDAsync_v2", 3)
	var got error
	n := 0
	for b, err := range ld.Epoch(context.Background(), 0) {
		if err != nil {
			got = err
			break
		}
		if err := b.Wait(); err != nil {
			got = err
			b.Release()
			break
		}
		n++
		b.Release()
	}
	// The third copy (batch 2) faults. As on a GPU, the fault is sticky: the first batch
	// delivered after it happened reports it, which is batch 1 or 2 depending on how far
	// ahead the copies ran.
	if got == nil || !regexp.MustCompile(`^pipeline: batch [12] of epoch 0: copy to the device: gpu: cuda:0: \w+: CUDA_ERROR_ILLEGAL_ADDRESS`).MatchString(got.Error()) {
		t.Errorf("after %d batches: %v", n, got)
	}
	if err := ld.Close(); err == nil || !strings.Contains(err.Error(), "ILLEGAL_ADDRESS") {
		t.Logf("close: %v", err)
	}
	if f.Allocated() != 0 || f.Registered() != 0 || f.PrimaryRefs() != 0 {
		t.Errorf("after Close: %d device bytes, %d registered ranges, %d context references", f.Allocated(), f.Registered(), f.PrimaryRefs())
	}
}

// Device memory is taken in New: too much fails there, naming the bytes.
func TestDeviceOutOfMemoryAtNew(t *testing.T) {
	f := gputest.Use(t)
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(1)
	cfg.Device.Name = "cuda:0"
	f.SetTotal(20 << 20)
	cfg.Batch.Size = 64
	if err := ApplyRecipe(cfg, "train", 128); err != nil { // 12 MiB batches
		t.Fatal(err)
	}
	_, err = New(src, cfg)
	if err == nil || !strings.Contains(err.Error(), "CUDA_ERROR_OUT_OF_MEMORY") || !strings.Contains(err.Error(), "ring slot 2 of 2, 12 MiB each, 24 MiB for the ring") {
		t.Fatalf("a 24 MiB ring on a 20 MiB device: %v", err)
	}
	if f.Allocated() != 0 || f.Registered() != 0 || f.PrimaryRefs() != 0 {
		t.Errorf("after the failed New: %d device bytes, %d registered ranges, %d context references", f.Allocated(), f.Registered(), f.PrimaryRefs())
	}
}

func TestDeviceOptions(t *testing.T) {
	t.Setenv("CONVEYOR_LIBCUDA", "/nonexistent/libcuda.so.1")
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(1)
	cfg.Device.Name = "cuda:0"
	if _, err := New(src, cfg); err == nil || !strings.Contains(err.Error(), "cannot load the CUDA driver") {
		t.Errorf("cuda:0 without a driver: %v", err)
	}
	var mu sync.Mutex
	var lines []string
	cfg.Device.Name = "auto"
	cfg.Logf = func(format string, args ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	ld := newLoader(t, src, cfg)
	if st := ld.Stats(); st.Device.Name != "cpu (host memory)" || len(lines) != 1 || !strings.Contains(lines[0], "no usable GPU") {
		t.Errorf("auto without a driver: device %q, log %q", st.Device.Name, lines)
	}
	cfg.Device.Name = "tpu"
	if _, err := New(src, cfg); err == nil {
		t.Error("device tpu accepted")
	}
	cfg.Device.Name, cfg.Device.Cast, cfg.Pack.DType, cfg.Pack.Normalize = "cpu", true, pack.Uint8, false
	if _, err := New(src, cfg); err == nil || !strings.Contains(err.Error(), "Device.Cast needs a float") {
		t.Errorf("Device.Cast to uint8: %v", err)
	}
}

// On a GPU the consumer may hold as many batches as the ring has buffers; holding all
// of them is reported, not a hang.
func TestDeviceHoldingEveryBuffer(t *testing.T) {
	gputest.Use(t)
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(2)
	cfg.Device.Name = "cuda:0"
	ld := newLoader(t, src, cfg)
	var held []*Batch
	var got error
	for b, err := range ld.Epoch(context.Background(), 0) {
		if err != nil {
			got = err
			break
		}
		held = append(held, b)
	}
	if !errors.Is(got, ErrHeld) || len(held) != 2 {
		t.Errorf("holding every device buffer: %v after %d batches", got, len(held))
	}
	for _, b := range held {
		b.Release()
	}
}
