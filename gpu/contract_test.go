package gpu

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conveyor-ml/conveyor/gpu/gputest"
	"github.com/conveyor-ml/conveyor/pack"
	"github.com/conveyor-ml/conveyor/pinned"
)

// backend is one device the contract suite runs on.
type backend struct {
	name string
	open func(t *testing.T) (*Device, *gputest.Driver)
}

// realCUDA is the device named by $CONVEYOR_TEST_DEVICE ("cuda:0"), for runs on a GPU.
func realCUDA() string { return os.Getenv("CONVEYOR_TEST_DEVICE") }

func backends() []backend {
	bs := []backend{
		{"host", func(t *testing.T) (*Device, *gputest.Driver) { return openT(t, "cpu"), nil }},
		{"fakecuda", func(t *testing.T) (*Device, *gputest.Driver) {
			f := gputest.Use(t)
			return openT(t, "cuda:0"), f
		}},
	}
	if name := realCUDA(); name != "" {
		bs = append(bs, backend{name, func(t *testing.T) (*Device, *gputest.Driver) { return openT(t, name), nil }})
	}
	return bs
}

func openT(t *testing.T, name string) *Device {
	t.Helper()
	d, err := Open(name, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("device %v", d)
	return d
}

// eachBackend runs test on every backend, checking afterwards that the device gave back
// all it took.
func eachBackend(t *testing.T, test func(t *testing.T, d *Device, f *gputest.Driver)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			d, f := b.open(t)
			test(t, d, f)
			if n := d.Allocated(); n != 0 {
				t.Errorf("%d device bytes still allocated at the end", n)
			}
			if err := d.Close(); err != nil {
				t.Errorf("device close: %v", err)
			}
			if f != nil {
				if n := f.Allocated(); n != 0 {
					t.Errorf("driver reports %d bytes still allocated after Close", n)
				}
				if n := f.PrimaryRefs(); n != 0 {
					t.Errorf("primary context retained %d times after Close", n)
				}
			}
		})
	}
}

// pool returns a pinned pool of n buffers of size bytes registered with d.
func pool(t *testing.T, d *Device, n, size int) *pinned.Pool {
	t.Helper()
	lock := false
	p, err := pinned.New(&pinned.Options{BufferSize: size, Budget: int64(n) * int64(roundPage(size)), Lock: &lock, Register: d.Register, Unregister: d.Unregister})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// pinnedBufs returns n buffers of size bytes from a pool registered with d, buffer i
// filled with fill(·, i), and the function that gives them back and closes the pool
// (before d closes).
func pinnedBufs(t *testing.T, d *Device, n, size int) ([][]byte, func()) {
	t.Helper()
	p := pool(t, d, n, size)
	bufs := make([][]byte, n)
	held := make([]*pinned.Buffer, n)
	for i := range bufs {
		b, err := p.Get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		held[i], bufs[i] = b, b.Bytes()
		fill(bufs[i], i)
	}
	return bufs, func() {
		for _, b := range held {
			b.Release()
		}
		closePool(t, p)
	}
}

func closePool(t *testing.T, p *pinned.Pool) {
	t.Helper()
	if err := p.Close(); err != nil {
		t.Errorf("pool close: %v", err)
	}
}

func roundPage(n int) int {
	page := os.Getpagesize()
	return (n + page - 1) / page * page
}

func newRing(t *testing.T, d *Device, o RingOptions) *Ring {
	t.Helper()
	r, err := d.NewRing(&o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func closeRing(t *testing.T, r *Ring) {
	t.Helper()
	if err := r.Close(); err != nil {
		t.Errorf("ring close: %v", err)
	}
}

func fill(b []byte, k int) {
	for i := range b {
		b[i] = byte(i*7 + k*13)
	}
}

// Each slot keeps its own batch while later ones are copied into the others: read back in
// order, every batch is the one uploaded, with the consumer holding one slot at a time
// and the ring running ahead.
func TestContractOrdering(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *Device, f *gputest.Driver) {
		const size, slots, batches = 1<<20 + 123, 3, 24
		p := pool(t, d, slots+1, size)
		r := newRing(t, d, RingOptions{Slots: slots, Bytes: size})
		type held struct {
			s   *Slot
			buf *pinned.Buffer
			k   int
		}
		var q []held
		got := make([]byte, size)
		want := make([]byte, size)
		check := func(h held) {
			if err := h.s.Read(got); err != nil {
				t.Fatal(err)
			}
			fill(want, h.k)
			if !bytes.Equal(got, want) {
				t.Fatalf("batch %d: slot %d holds other bytes", h.k, h.s.Index())
			}
			h.s.Release()
			h.buf.Release()
		}
		for k := range batches {
			if len(q) == slots {
				check(q[0])
				q = q[1:]
			}
			buf, err := p.Get(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			fill(buf.Bytes(), k)
			s, err := r.Acquire(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Upload(buf.Bytes()); err != nil {
				t.Fatal(err)
			}
			if s.Len() != size {
				t.Fatalf("Len %d after an upload of %d", s.Len(), size)
			}
			q = append(q, held{s, buf, k})
		}
		for _, h := range q {
			check(h)
		}
		if st := r.Stats(); st.Uploads != batches || st.Held != 0 {
			t.Errorf("stats %+v", st)
		}
		closeRing(t, r)
		if f != nil && f.Registered() == 0 {
			t.Error("the pool's slabs were not registered with the driver")
		}
		closePool(t, p)
		if f != nil && f.Registered() != 0 {
			t.Error("the pool's slabs are still registered after its Close")
		}
	})
}

// Upload from registered memory returns before the copy is done; Ready says so without
// waiting; Wait blocks until it is, and counts as a blocked wait only then. From memory
// that is not registered the stand-in copies synchronously, as the driver's pageable
// copies are (a GPU may too, so only the stand-in's is checked).
func TestContractReadiness(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *Device, f *gputest.Driver) {
		const size = 256 << 10
		p := pool(t, d, 1, size)
		defer closePool(t, p)
		buf, err := p.Get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer buf.Release()
		host := buf.Bytes()
		fill(host, 1)
		r := newRing(t, d, RingOptions{Slots: 2, Bytes: size})
		defer closeRing(t, r)
		s, _ := r.TryAcquire()
		defer s.Release()
		if ok, err := s.Ready(); !ok || err != nil {
			t.Errorf("a slot with nothing uploaded: Ready %t, %v", ok, err)
		}
		const delay = 50 * time.Millisecond
		if f != nil {
			f.Delay(delay)
		}
		t0 := time.Now()
		if err := s.Upload(host); err != nil {
			t.Fatal(err)
		}
		enqueue := time.Since(t0)
		ready, err := s.Ready()
		if err != nil {
			t.Fatal(err)
		}
		if f != nil && (ready || enqueue >= delay) {
			t.Errorf("Upload took %v and Ready says %t: the copy was not asynchronous", enqueue, ready)
		}
		if err := s.Wait(); err != nil {
			t.Fatal(err)
		}
		if f != nil && time.Since(t0) < delay {
			t.Errorf("Wait returned after %v, before the %v copy could finish", time.Since(t0), delay)
		}
		if ok, err := s.Ready(); !ok || err != nil {
			t.Errorf("after Wait: Ready %t, %v", ok, err)
		}
		if err := s.WaitOn(0); err != nil {
			t.Errorf("WaitOn: %v", err)
		}
		st := r.Stats()
		if f != nil && st.Blocked != 1 {
			t.Errorf("Blocked %d, want 1", st.Blocked)
		}
		if f == nil && d.Kind() == Host && st.Blocked != 0 {
			t.Errorf("host backend blocked %d times", st.Blocked)
		}
		got := make([]byte, size)
		if err := s.Read(got); err != nil || !bytes.Equal(got, host) {
			t.Errorf("read back: %v", err)
		}
		if f != nil {
			pageable := make([]byte, size)
			fill(pageable, 2)
			t0 := time.Now()
			if err := s.Upload(pageable); err != nil {
				t.Fatal(err)
			}
			if el := time.Since(t0); el < delay {
				t.Errorf("an upload from unregistered memory returned after %v, before its %v copy: the stand-in is kinder than the driver", el, delay)
			}
			if err := s.Read(got); err != nil || !bytes.Equal(got, pageable) {
				t.Errorf("read back the unregistered upload: %v", err)
			}
		}
	})
}

// A ring hands out each slot once until it is released; it refuses misuse loudly.
func TestContractRelease(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *Device, _ *gputest.Driver) {
		r := newRing(t, d, RingOptions{Slots: 2, Bytes: 4096})
		defer closeRing(t, r)
		a, ok1 := r.TryAcquire()
		b, ok2 := r.TryAcquire()
		if !ok1 || !ok2 || a == b {
			t.Fatal("two slots not both handed out")
		}
		if _, ok := r.TryAcquire(); ok {
			t.Fatal("a third slot from a ring of two")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		if _, err := r.Acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire with every slot held: %v", err)
		}
		if st := r.Stats(); st.Held != 2 {
			t.Errorf("Held %d", st.Held)
		}
		a.Release()
		c, ok := r.TryAcquire()
		if !ok || c != a {
			t.Fatal("the released slot did not come back")
		}
		if err := c.Upload(make([]byte, 4097)); err == nil {
			t.Error("an upload larger than a slot was accepted")
		}
		c.Release()
		b.Release()
		mustPanic(t, "double release", func() { b.Release() })
		mustPanic(t, "upload to a slot not held", func() { b.Upload(make([]byte, 10)) })
	})
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}

// Closing a ring with a slot held reports it and frees everything else; the held slot's
// memory stays valid until its release, which frees it.
func TestContractLeak(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *Device, f *gputest.Driver) {
		const size = 64 << 10
		r := newRing(t, d, RingOptions{Slots: 3, Bytes: size})
		s, _ := r.TryAcquire()
		host := make([]byte, size)
		fill(host, 5)
		if err := s.Upload(host); err != nil {
			t.Fatal(err)
		}
		err := r.Close()
		if err == nil || !strings.Contains(err.Error(), "1 of 3 slots held") {
			t.Fatalf("close with a slot held: %v", err)
		}
		if d.Kind() != Host {
			if n := d.Allocated(); n != s.Size() {
				t.Errorf("after close, %d bytes allocated, want the held slot's %d", n, s.Size())
			}
		}
		got := make([]byte, size)
		if err := s.Read(got); err != nil || !bytes.Equal(got, host) {
			t.Errorf("held slot after close: %v", err)
		}
		if _, ok := r.TryAcquire(); ok {
			t.Error("TryAcquire after close")
		}
		if _, err := r.Acquire(context.Background()); !errors.Is(err, ErrClosed) {
			t.Errorf("Acquire after close: %v", err)
		}
		s.Release()
		if n := d.Allocated(); n != 0 {
			t.Errorf("%d bytes allocated after the last release", n)
		}
		if f != nil && f.Allocated() != 0 {
			t.Errorf("driver: %d bytes allocated after the last release", f.Allocated())
		}
		if err := r.Close(); err != nil {
			t.Errorf("second close: %v", err)
		}
	})
}

// A consumer blocked in Acquire leaves when its context is cancelled or the ring closes.
func TestContractCancellation(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *Device, _ *gputest.Driver) {
		r := newRing(t, d, RingOptions{Slots: 1, Bytes: 4096})
		s, _ := r.TryAcquire()
		ctx, cancel := context.WithCancelCause(context.Background())
		stop := errors.New("stop")
		var wg sync.WaitGroup
		errs := make([]error, 2)
		wg.Add(2)
		go func() { defer wg.Done(); _, errs[0] = r.Acquire(ctx) }()
		go func() { defer wg.Done(); _, errs[1] = r.Acquire(context.Background()) }()
		time.Sleep(20 * time.Millisecond)
		cancel(stop)
		time.Sleep(20 * time.Millisecond)
		if err := r.Close(); err == nil {
			t.Error("close with the slot held reported nothing")
		}
		wg.Wait()
		if !errors.Is(errs[0], stop) {
			t.Errorf("cancelled Acquire: %v", errs[0])
		}
		if !errors.Is(errs[1], ErrClosed) {
			t.Errorf("Acquire during Close: %v", errs[1])
		}
		if err := s.Upload(make([]byte, 10)); !errors.Is(err, ErrClosed) {
			t.Errorf("Upload after close: %v", err)
		}
		s.Release()
	})
}

// The ring takes its memory once, reports it, never takes more, and refuses a size over
// its limit before allocating anything.
func TestContractBudget(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *Device, f *gputest.Driver) {
		conv, err := NewCaster(&pack.Options{Width: 32, Height: 24, Normalize: true})
		if err != nil {
			t.Fatal(err)
		}
		in := conv.InBytes(4)
		o := RingOptions{Slots: 3, Bytes: in, Cast: conv, MaxBytes: 1000}
		if _, err := d.NewRing(&o); err == nil || !strings.Contains(err.Error(), "more than its limit of 1000") {
			t.Fatalf("ring over its limit: %v", err)
		}
		if d.Allocated() != 0 {
			t.Fatal("a refused ring allocated memory")
		}
		o.MaxBytes = 0
		r := newRing(t, d, o)
		want := int64(3*conv.OutBytes(4) + in)
		st := r.Stats()
		if st.DeviceBytes != want || d.Allocated() != want || st.SlotBytes != int64(conv.OutBytes(4)) {
			t.Fatalf("stats %+v, allocated %d, want %d", st, d.Allocated(), want)
		}
		var before int64
		if f != nil {
			before = f.Allocated()
		}
		host := make([]byte, in)
		for k := range 30 {
			s, err := r.Acquire(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			fill(host, k)
			if err := s.Upload(host[:conv.InBytes(1+k%4)]); err != nil {
				t.Fatal(err)
			}
			if err := s.Wait(); err != nil {
				t.Fatal(err)
			}
			s.Release()
		}
		if d.Allocated() != want || r.Stats().DeviceBytes != want {
			t.Errorf("allocation changed while running: %d", d.Allocated())
		}
		if f != nil && f.Allocated() != before {
			t.Errorf("driver allocation changed while running: %d -> %d", before, f.Allocated())
		}
		closeRing(t, r)
		if _, err := NewCaster(&pack.Options{Width: 4, Height: 4, DType: pack.Uint8}); err == nil {
			t.Error("a uint8 converter was accepted")
		}
		if _, err := d.NewRing(&RingOptions{Slots: 1, Bytes: in + 1, Cast: conv}); err == nil {
			t.Error("a converting ring of partial samples was accepted")
		}
	})
}

// Converting on the device gives exactly what pack.Packer gives on the host.
func TestContractConversion(t *testing.T) {
	eachBackend(t, func(t *testing.T, d *Device, _ *gputest.Driver) {
		rng := rand.New(rand.NewPCG(1, 2))
		for _, dt := range []pack.DType{pack.Float32, pack.Float16, pack.BFloat16} {
			for _, layout := range []pack.Layout{pack.NCHW, pack.NHWC} {
				for _, c := range []struct {
					norm bool
					w, h int
				}{{false, 7, 5}, {true, 7, 5}, {true, 16, 16}} {
					norm := c.norm
					o := pack.Options{Width: c.w, Height: c.h, Layout: layout, DType: dt, Normalize: norm}
					if norm && dt == pack.Float16 {
						o.Mean, o.Std = [3]float32{0.5, 0.25, 0.125}, [3]float32{0.01, 0.3, 3} // large values, subnormal steps
					}
					conv, err := NewCaster(&o)
					if err != nil {
						t.Fatal(err)
					}
					const n = 3
					in := make([]byte, conv.InBytes(n))
					for i := range in {
						in[i] = byte(rng.UintN(256))
					}
					if c.w*c.h >= 256 {
						for i := range 256 { // every value in every channel
							in[3*i], in[3*i+1], in[3*i+2] = byte(i), byte(255-i), byte(i*37)
						}
					}
					r := newRing(t, d, RingOptions{Slots: 1, Bytes: len(in), Cast: conv})
					s, _ := r.TryAcquire()
					if err := s.Upload(in); err != nil {
						t.Fatal(err)
					}
					got := make([]byte, conv.OutBytes(n))
					if err := s.Read(got); err != nil {
						t.Fatal(err)
					}
					want := make([]byte, conv.OutBytes(n))
					if err := conv.Host(want, in); err != nil {
						t.Fatal(err)
					}
					if i := firstDiff(got, want); i >= 0 {
						t.Errorf("%v %v normalize=%t: byte %d differs (device % x, host % x)", dt, layout, norm, i, got[i&^3:i&^3+4], want[i&^3:i&^3+4])
					}
					s.Release()
					closeRing(t, r)
				}
			}
		}
	})
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

func packOptions() *pack.Options {
	return &pack.Options{Width: 8, Height: 6, Normalize: true}
}
