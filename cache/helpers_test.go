package cache

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/conveyor-ml/conveyor/decode"
)

// TestMain checks that no test leaves a goroutine behind: the package starts none, so
// every Coder and Cache a test opens must release what its codecs started.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 && os.Getenv(helperEnv) == "" {
		var left []string
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if left = leftGoroutines(); len(left) == 0 || time.Now().After(deadline) {
				break
			}
		}
		if len(left) > 0 {
			fmt.Fprintf(os.Stderr, "cache: %d goroutines leaked:\n%s\n", len(left), strings.Join(left, "\n\n"))
			code = 1
		}
	}
	os.Exit(code)
}

// leftGoroutines returns the stacks of goroutines other than this one and those the
// runtime and the testing package keep (the fuzzer's signal handler).
func leftGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var left []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 || strings.Contains(g, "os/signal.signal_recv") || strings.TrimSpace(g) == "" {
			continue
		}
		left = append(left, g)
	}
	return left
}

const testSpec = "max_pixels=178956970 orientation=exif resize=shorter(32) backend=go"

// testImage returns a deterministic w×h image for seed: smooth gradients, plus per-pixel
// noise when noisy (which s2 and zstd cannot shrink much, so records keep their size).
func testImage(seed uint64, w, h int, noisy bool) *decode.Image {
	img := &decode.Image{}
	img.Reset(w, h)
	x0 := splitmix(seed)
	for y := range h {
		row := img.Row(y)
		for x := range w {
			for c := range 3 {
				// Slow waves, whatever the size: smooth enough for JPEG to keep them.
				fx, fy := float64(x)/(9+float64(c)), float64(y)/(11-float64(c))
				v := int(x0>>(8*c)&0x3f) + 100 + int(60*math.Sin(fx+float64(seed%7))*math.Cos(fy))
				if noisy {
					v += int(splitmix(seed^uint64(y*w+x)<<2^uint64(c)) & 0x3f)
				}
				row[3*x+c] = uint8(min(v, 255))
			}
		}
	}
	return img
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// testKey is the key of sample i of testSpec.
func testKey(i int) Key {
	return Key{Spec: testSpec, Path: fmt.Sprintf("class%d/img%05d.jpg", i%3, i), Size: int64(1000 + i), ModTime: 1_700_000_000_000_000_000 + int64(i)}
}

// samePixels reports how got differs from want, "" when they are equal.
func samePixels(got, want *decode.Image) string {
	if got.Width != want.Width || got.Height != want.Height {
		return fmt.Sprintf("size %dx%d, want %dx%d", got.Width, got.Height, want.Width, want.Height)
	}
	for y := range want.Height {
		if g, w := got.Row(y), want.Row(y); !bytes.Equal(g, w) {
			x := 0
			for g[x] == w[x] {
				x++
			}
			return fmt.Sprintf("row %d differs first at byte %d: %d, want %d", y, x, g[x], w[x])
		}
	}
	return ""
}

// meanAbsDiff is the mean absolute difference per channel of two same-sized images.
func meanAbsDiff(a, b *decode.Image) float64 {
	var sum int
	for y := range a.Height {
		ra, rb := a.Row(y), b.Row(y)
		for i := range ra {
			d := int(ra[i]) - int(rb[i])
			sum += max(d, -d)
		}
	}
	return float64(sum) / float64(3*a.Width*a.Height)
}

// logTo returns a Logf that writes to t's log and counts its calls in *n.
func logTo(t testing.TB, n *int) func(string, ...any) {
	return func(format string, args ...any) {
		t.Helper()
		if n != nil {
			*n++
		}
		t.Logf(format, args...)
	}
}

// open opens dir with opts (Logf defaulting to t.Logf) and closes it at the end of the test.
func open(t testing.TB, dir string, opts Options) *Cache {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = logTo(t, nil)
	}
	c, err := Open(dir, &opts)
	if err != nil {
		t.Fatalf("Open(%s, %v): %v", dir, &opts, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// newCoder returns a Coder for c, closed at the end of the test.
func newCoder(t testing.TB, c *Cache) *Coder {
	d := c.NewCoder()
	t.Cleanup(d.Close)
	return d
}

// put stores testImage(seed) under k, failing the test on error.
func put(t testing.TB, d *Coder, k Key, label int, img *decode.Image) {
	t.Helper()
	// Put compacts its argument in place; store a copy so img stays the reference.
	cp := *img
	cp.Pix = bytes.Clone(img.Pix)
	if err := d.Put(k, label, &cp); err != nil {
		t.Fatalf("Put(%s): %v", k.Path, err)
	}
}

// mustLoad looks k up and loads it, failing the test on a miss or an error.
func mustLoad(t testing.TB, c *Cache, d *Coder, k Key) (*decode.Image, Ref) {
	t.Helper()
	r, ok := c.Lookup(k)
	if !ok {
		t.Fatalf("Lookup(%s): miss", k.Path)
	}
	img, err := d.Load(new(decode.Image), r)
	if err != nil {
		t.Fatalf("Load(%s): %v", k.Path, err)
	}
	return img, r
}

// files lists dir's files ending in ext.
func files(t testing.TB, dir, ext string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+ext))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// diskBytes sums the sizes of dir's shards and indexes, what MaxBytes bounds.
func diskBytes(t testing.TB, dir string) int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), shardExt) || strings.HasSuffix(e.Name(), indexExt) {
			fi, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			n += fi.Size()
		}
	}
	return n
}

// flipByte inverts one bit of the byte at off in file.
func flipByte(t testing.TB, file string, off int64) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}
