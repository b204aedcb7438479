package gpu

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conveyor-ml/conveyor/pack"
)

// TestGPUReport measures, on the GPU named by $CONVEYOR_TEST_DEVICE, the bandwidth of a
// plain synchronous cuMemcpyHtoD from pinned memory and of the ring's asynchronous
// uploads of the same size (a batch of 64 float32 224×224 samples), and of uploads
// converted on the device from uint8, and says which driver and JIT libraries the
// process loaded and what the JIT said of the kernels. It logs the figures and writes them
// to $CONVEYOR_OUT/gpu-report.json when set; it asserts no speed.
func TestGPUReport(t *testing.T) {
	name := realCUDA()
	if name == "" {
		t.Skip("set CONVEYOR_TEST_DEVICE=cuda:N on a machine with a GPU")
	}
	d := openT(t, name)
	defer d.Close()
	drv := d.drv.(*cudaDriver)
	const batch = 64
	conv, err := NewCaster(&pack.Options{Width: 224, Height: 224, Normalize: true})
	if err != nil {
		t.Fatal(err)
	}
	size := conv.OutBytes(batch)
	bufs, done := pinnedBufs(t, d, 3, size)
	defer done()
	const reps = 30
	gbps := func(bytes int, d time.Duration) float64 { return float64(bytes) / d.Seconds() / 1e9 }

	dst, err := d.alloc(int64(size), "plain copy target")
	if err != nil {
		t.Fatal(err)
	}
	var plain []float64
	for i := range reps + 3 {
		t0 := time.Now()
		if err := drv.copyHtoDSync(dst, bufs[i%3]); err != nil {
			t.Fatal(err)
		}
		if i >= 3 { // warm-up
			plain = append(plain, gbps(size, time.Since(t0)))
		}
	}
	if err := d.free(dst, int64(size)); err != nil {
		t.Fatal(err)
	}

	// ring runs reps uploads through a ring of two slots, holding each slot until the
	// next upload is enqueued, as the loader does, and returns the aggregate GB/s of the
	// delivered (output) bytes.
	ring := func(o RingOptions, in func(i int) []byte) float64 {
		r := newRing(t, d, o)
		defer closeRing(t, r)
		var held []*Slot
		var t0 time.Time
		for i := range reps + 2 {
			if i == 2 {
				for _, s := range held {
					s.Wait()
				}
				t0 = time.Now()
			}
			if len(held) == 2 {
				if err := held[0].Wait(); err != nil {
					t.Fatal(err)
				}
				held[0].Release()
				held = held[1:]
			}
			s, err := r.Acquire(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Upload(in(i)); err != nil {
				t.Fatal(err)
			}
			held = append(held, s)
		}
		for _, s := range held {
			if err := s.Wait(); err != nil {
				t.Fatal(err)
			}
			s.Release()
		}
		return gbps(reps*size, time.Since(t0))
	}
	ringGBps := ring(RingOptions{Slots: 2, Bytes: size}, func(i int) []byte { return bufs[i%3] })
	convGBps := ring(RingOptions{Slots: 2, Bytes: conv.InBytes(batch), Cast: conv}, func(i int) []byte { return bufs[i%3][:conv.InBytes(batch)] })
	slices.Sort(plain)
	info, err := Driver()
	if err != nil {
		t.Fatal(err)
	}
	rep := map[string]any{
		"device": d.String(), "bytes": size, "reps": reps,
		"driver_library": info.Library, "jit_library_beside_it": info.JIT, "driver_version": info.Version,
		"jit_info_log": drv.jitLog, "mapped_libraries": mappedLibraries("libcuda", "ptxjit", "nvvm"),
		"plain_htod_gbps_median":        plain[len(plain)/2],
		"ring_async_gbps":               ringGBps,
		"ring_vs_plain":                 ringGBps / plain[len(plain)/2],
		"convert_u8_to_f32_output_gbps": convGBps,
	}
	for k, v := range rep {
		t.Logf("%s: %v", k, v)
	}
	if out := os.Getenv("CONVEYOR_OUT"); out != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(filepath.Join(out, "gpu-report.json"), b, 0o644); err != nil {
			t.Error(err)
		}
	}
}

// mappedLibraries lists the files mapped into this process whose names contain one of
// parts: which driver and JIT libraries the dynamic loader really opened.
func mappedLibraries(parts ...string) []string {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return []string{err.Error()}
	}
	var libs []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		for _, p := range parts {
			if strings.Contains(f[5], p) && !slices.Contains(libs, f[5]) {
				libs = append(libs, f[5])
			}
		}
	}
	return libs
}
