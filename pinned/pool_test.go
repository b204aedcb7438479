package pinned

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// testChildren are modes in which the test binary, re-executed with PINNED_TEST_CHILD
// set, runs one function in a fresh process instead of the tests.
var testChildren = map[string]func() int{}

func TestMain(m *testing.M) {
	if mode := os.Getenv("PINNED_TEST_CHILD"); mode != "" {
		os.Exit(testChildren[mode]())
	}
	base := runtime.NumGoroutine()
	code := m.Run()
	// pinned starts no goroutines, and every test must join the ones it starts.
	deadline := time.Now().Add(time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base && code == 0 {
		buf := make([]byte, 1<<16)
		fmt.Fprintf(os.Stderr, "leaked %d goroutines:\n%s\n", n-base, buf[:runtime.Stack(buf, true)])
		code = 1
	}
	os.Exit(code)
}

var (
	yes = func() *bool { b := true; return &b }()
	no  = func() *bool { b := false; return &b }()
)

// newPool returns a pool closed at the end of the test, which must leak nothing.
func newPool(t testing.TB, o *Options) *Pool {
	t.Helper()
	p, err := New(o)
	if err != nil {
		t.Fatalf("New(%v): %v", o, err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

func TestBudgetToBufferCount(t *testing.T) {
	pg := pageSize
	tests := []struct {
		name       string
		bufferSize int
		budget     int64
		want       int
	}{
		{"one page each", pg, 4 * int64(pg), 4},
		{"small buffer rounds to a page", 1, 3 * int64(pg), 3},
		{"remainder is not a buffer", pg, 3*int64(pg) + int64(pg) - 1, 3},
		{"page+1 takes two pages", pg + 1, 5 * int64(pg), 2},
		{"exactly one buffer", 3*pg - 7, 3 * int64(pg), 1},
		{"default budget is 4 buffers", 10000, 0, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPool(t, &Options{BufferSize: tt.bufferSize, Budget: tt.budget, Lock: no})
			st := p.Stats()
			if st.Buffers != tt.want {
				t.Errorf("Buffers = %d, want %d", st.Buffers, tt.want)
			}
			if st.BufferSize != tt.bufferSize {
				t.Errorf("BufferSize = %d, want %d", st.BufferSize, tt.bufferSize)
			}
			stride := int64(roundToPage(tt.bufferSize))
			if st.BytesMapped != int64(tt.want)*stride {
				t.Errorf("BytesMapped = %d, want %d", st.BytesMapped, int64(tt.want)*stride)
			}
			if st.BytesMapped > st.Budget {
				t.Errorf("BytesMapped %d > Budget %d", st.BytesMapped, st.Budget)
			}
			for range tt.want {
				b, ok := p.TryGet()
				if !ok {
					t.Fatal("TryGet failed before the pool was empty")
				}
				if len(b.Bytes()) != tt.bufferSize || cap(b.Bytes()) != tt.bufferSize {
					t.Fatalf("len, cap = %d, %d, want %d", len(b.Bytes()), cap(b.Bytes()), tt.bufferSize)
				}
				defer b.Release()
			}
			if _, ok := p.TryGet(); ok {
				t.Fatal("TryGet succeeded beyond the budget")
			}
		})
	}
}

func TestSlabs(t *testing.T) {
	defer func(old int) { slabBytes = old }(slabBytes)
	slabBytes = 4 * pageSize
	pg := int64(pageSize)
	tests := []struct {
		name       string
		bufferSize int
		budget     int64
		wantSlabs  int
	}{
		{"4 per slab, full slabs", pageSize, 8 * pg, 2},
		{"4 per slab, short last slab", pageSize, 9 * pg, 3},
		{"2 per slab", pageSize + 1, 6 * pg, 2},
		{"buffer bigger than a slab", 5 * pageSize, 10 * pg, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			reg := map[uintptr]int{}
			unreg := map[uintptr]int{}
			var regBytes int64
			count := func(m map[uintptr]int) func([]byte) error {
				return func(b []byte) error {
					mu.Lock()
					defer mu.Unlock()
					m[uintptr(unsafe.Pointer(&b[0]))]++
					return nil
				}
			}
			p, err := New(&Options{BufferSize: tt.bufferSize, Budget: tt.budget, Lock: no,
				Register: func(b []byte) error {
					regBytes += int64(len(b)) // New runs Register on one goroutine
					return count(reg)(b)
				},
				Unregister: count(unreg)})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.slabs) != tt.wantSlabs || len(reg) != tt.wantSlabs {
				t.Errorf("slabs = %d, registered %d distinct, want %d", len(p.slabs), len(reg), tt.wantSlabs)
			}
			if st := p.Stats(); regBytes != st.BytesMapped {
				t.Errorf("registered %d bytes, mapped %d", regBytes, st.BytesMapped)
			}
			if len(unreg) != 0 {
				t.Errorf("Unregister called %d times before Close", len(unreg))
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			for addr, n := range reg {
				if n != 1 || unreg[addr] != 1 {
					t.Errorf("slab %#x: registered %d times, unregistered %d times, want 1 and 1", addr, n, unreg[addr])
				}
			}
			if len(unreg) != len(reg) {
				t.Errorf("unregistered %d slabs, registered %d", len(unreg), len(reg))
			}
			if st := p.Stats(); st.BytesMapped != 0 {
				t.Errorf("BytesMapped after Close = %d", st.BytesMapped)
			}
		})
	}
}

func TestRegisterError(t *testing.T) {
	defer func(old int) { slabBytes = old }(slabBytes)
	slabBytes = pageSize
	errBoom := errors.New("boom")
	var registered, unregistered int
	_, err := New(&Options{BufferSize: pageSize, Budget: 3 * int64(pageSize), Lock: no,
		Register: func([]byte) error {
			if registered == 2 {
				return errBoom
			}
			registered++
			return nil
		},
		Unregister: func([]byte) error { unregistered++; return nil },
	})
	if !errors.Is(err, errBoom) || !strings.Contains(err.Error(), "slab 3 of 3") {
		t.Fatalf("New = %v, want the Register error for slab 3 of 3", err)
	}
	if unregistered != registered {
		t.Errorf("unregistered %d slabs, registered %d", unregistered, registered)
	}
}

// With RegisterOptional a refused registration leaves the pool working on unregistered
// memory: it says why, gives back what it registered, registers none of the buffers it
// maps later and unregisters nothing at Close.
func TestRegisterOptional(t *testing.T) {
	defer func(old int) { slabBytes = old }(slabBytes)
	slabBytes = pageSize
	errRefused := errors.New("refused")
	var registered, unregistered, calls int
	p, err := New(&Options{BufferSize: pageSize, Budget: 4 * int64(pageSize), Initial: 3, Lock: no, RegisterOptional: true,
		Register: func([]byte) error {
			calls++
			if calls == 2 {
				return errRefused
			}
			registered++
			return nil
		},
		Unregister: func([]byte) error { unregistered++; return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	if st.Registered || !strings.Contains(st.RegisterError, "refused") || !strings.Contains(st.RegisterError, "slab 2 of 3") || st.Buffers != 3 {
		t.Errorf("stats after a refused registration: %+v", st)
	}
	if registered != 1 || unregistered != 1 {
		t.Errorf("registered %d, unregistered %d: the one registered slab must be given back", registered, unregistered)
	}
	if n, err := p.Grow(1); n != 1 || err != nil || calls != 2 {
		t.Errorf("Grow: %d, %v, %d Register calls (want none more)", n, err, calls)
	}
	b, err := p.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b.Bytes()[0] = 1
	b.Release()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if unregistered != 1 {
		t.Errorf("Close unregistered slabs that were never registered: %d", unregistered)
	}

	// All registered: Stats says so.
	p, err = New(&Options{BufferSize: pageSize, Lock: no, RegisterOptional: true, Register: func([]byte) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); !st.Registered || st.RegisterError != "" {
		t.Errorf("all registered: %+v", st)
	}
	p.Close()
}

func TestOptionsValidate(t *testing.T) {
	pg := int64(pageSize)
	tests := []struct {
		name string
		o    *Options
		want string // substring of the error; "" for none
	}{
		{"nil", nil, "BufferSize is 0"},
		{"zero buffer", &Options{}, "BufferSize is 0"},
		{"negative buffer", &Options{BufferSize: -1}, "BufferSize is -1"},
		{"huge buffer", &Options{BufferSize: int(^uint(0) >> 1)}, "too large"},
		{"budget below one buffer", &Options{BufferSize: pageSize + 1, Budget: 2*pg - 1}, "less than one buffer"},
		{"negative budget", &Options{BufferSize: 1, Budget: -1}, "less than one buffer"},
		{"defaults", &Options{BufferSize: 1}, ""},
		{"one buffer", &Options{BufferSize: pageSize, Budget: pg}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.o.EnsureDefaults().Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "pinned: ") {
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.want)
			}
			if _, err := New(tt.o); err == nil {
				t.Fatal("New succeeded on invalid options")
			}
		})
	}
}

// Validate reports every invalid field at once, not only the first.
func TestOptionsValidateReportsEveryProblem(t *testing.T) {
	err := (&Options{BufferSize: pageSize + 1, Budget: 1, Initial: -1}).EnsureDefaults().Validate()
	if err == nil {
		t.Fatal("Validate accepted two invalid fields")
	}
	for _, want := range []string{"Budget 1 is less than one buffer", "Initial -1 is negative"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %q, want it to mention %q", err, want)
		}
	}
}

func TestOptionsDefaultsAndString(t *testing.T) {
	o := (&Options{BufferSize: 1 << 20}).EnsureDefaults()
	if o.Budget != 4<<20 || o.Lock == nil || !*o.Lock {
		t.Fatalf("EnsureDefaults = %+v", o)
	}
	got := (&Options{BufferSize: 1 << 20, Lock: no, Register: func([]byte) error { return nil }}).String()
	want := "pinned.Options{BufferSize: 1048576 (1 MiB, 1048576 page-rounded), Budget: 4194304 (4 MiB, 4 buffers), Lock: false, Register: set, Unregister: nil}"
	if got != want {
		t.Errorf("String =\n%s\nwant\n%s", got, want)
	}
	if s := (*Options)(nil).String(); !strings.Contains(s, "BufferSize: 0") {
		t.Errorf("nil String = %s", s)
	}
}

func TestGetBlocksUntilRelease(t *testing.T) {
	p := newPool(t, &Options{BufferSize: 100, Budget: int64(pageSize), Lock: no})
	first, err := p.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *Buffer)
	go func() {
		b, err := p.Get(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	select {
	case <-got:
		t.Fatal("Get returned while the only buffer was out")
	case <-time.After(20 * time.Millisecond):
	}
	first.Release()
	select {
	case b := <-got:
		if b != first {
			t.Error("Get returned a different buffer from a one-buffer pool")
		}
		b.Release()
	case <-time.After(5 * time.Second):
		t.Fatal("Get still blocked after Release")
	}
	st := p.Stats()
	if st.Gets != 2 || st.Waits != 1 || st.PeakInUse != 1 || st.InUse != 0 {
		t.Errorf("Stats = %+v, want Gets 2, Waits 1, PeakInUse 1, InUse 0", st)
	}
}

func TestGetContextDone(t *testing.T) {
	tests := []struct {
		name string
		hold bool // hold the only buffer, so Get blocks
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"cancel while blocked", true, func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(10*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
		{"deadline while blocked", true, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 10*time.Millisecond)
		}, context.DeadlineExceeded},
		{"cancelled with a buffer free", false, func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPool(t, &Options{BufferSize: 1, Budget: int64(pageSize), Lock: no})
			if tt.hold {
				held, _ := p.TryGet()
				defer held.Release()
			}
			ctx, cancel := tt.ctx()
			defer cancel()
			start := time.Now()
			b, err := p.Get(ctx)
			if b != nil || !errors.Is(err, tt.want) {
				t.Fatalf("Get = %v, %v, want nil, %v", b, err, tt.want)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("Get took %v to notice ctx", d)
			}
			if st := p.Stats(); st.Gets != int64(st.InUse) || st.Waits != 0 {
				t.Errorf("a failed Get was counted: %+v", st)
			}
		})
	}
}

func TestTryGet(t *testing.T) {
	p := newPool(t, &Options{BufferSize: 1, Budget: int64(pageSize), Lock: no})
	b, ok := p.TryGet()
	if !ok || b == nil {
		t.Fatal("TryGet on a fresh pool failed")
	}
	if b2, ok := p.TryGet(); ok || b2 != nil {
		t.Fatal("TryGet succeeded on an empty pool")
	}
	b.Release()
	if b, ok = p.TryGet(); !ok {
		t.Fatal("TryGet failed after Release")
	}
	b.Release()
	if st := p.Stats(); st.Gets != 2 || st.Waits != 0 {
		t.Errorf("Stats = %+v, want Gets 2, Waits 0", st)
	}
}

func TestReleasePanics(t *testing.T) {
	p := newPool(t, &Options{BufferSize: 1, Lock: no})
	var nilBuf *Buffer
	nilBuf.Release() // nil-safe

	tests := []struct {
		name string
		buf  func() *Buffer
		want string
	}{
		{"twice", func() *Buffer {
			b, _ := p.TryGet()
			b.Release()
			return b
		}, "pinned: Buffer released twice"},
		{"not from a pool", func() *Buffer { return new(Buffer) }, "did not come from a Pool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.buf()
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, tt.want) {
					t.Fatalf("panic %v, want one containing %q", r, tt.want)
				}
				if st := p.Stats(); st.InUse != 0 {
					t.Errorf("InUse = %d after a bad Release", st.InUse)
				}
			}()
			b.Release()
		})
	}
	if b, ok := p.TryGet(); !ok { // the pool still works, and the lock was not left held
		t.Fatal("pool unusable after a double Release")
	} else {
		b.Release()
	}
}

func TestClose(t *testing.T) {
	tests := []struct {
		name   string
		out    int
		wantIn string // substring of Close's error; "" for nil
	}{
		{"nothing out", 0, ""},
		{"two leaked", 2, "2 of 4 buffers still out"},
		{"all leaked", 4, "4 of 4 buffers still out"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func(old int) { slabBytes = old }(slabBytes)
			slabBytes = 2 * pageSize // 2 slabs of 2 buffers
			var unreg int
			p, err := New(&Options{BufferSize: pageSize, Lock: no,
				Unregister: func([]byte) error { unreg++; return nil }})
			if err != nil {
				t.Fatal(err)
			}
			var out []*Buffer
			for range tt.out {
				b, err := p.Get(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, b)
			}
			err = p.Close()
			if tt.wantIn == "" && err != nil || tt.wantIn != "" && (err == nil || !strings.Contains(err.Error(), tt.wantIn)) {
				t.Fatalf("Close = %v, want an error containing %q", err, tt.wantIn)
			}
			if err := p.Close(); !errors.Is(err, ErrClosed) {
				t.Errorf("second Close = %v, want ErrClosed", err)
			}
			if b, err := p.Get(context.Background()); b != nil || !errors.Is(err, ErrClosed) {
				t.Errorf("Get after Close = %v, %v, want ErrClosed", b, err)
			}
			if b, ok := p.TryGet(); ok || b != nil {
				t.Error("TryGet after Close succeeded")
			}
			stride := int64(pageSize)
			// Slabs with a buffer out stay mapped, and writing to a leaked buffer is safe.
			slabsOut := (tt.out + 1) / 2
			if st := p.Stats(); st.BytesMapped != int64(2*slabsOut)*stride || unreg != 2-slabsOut {
				t.Errorf("after Close: BytesMapped %d, %d unregistered; want %d, %d",
					st.BytesMapped, unreg, int64(2*slabsOut)*stride, 2-slabsOut)
			}
			for _, b := range out {
				clear(b.Bytes())
				b.Release()
			}
			if st := p.Stats(); st.BytesMapped != 0 || st.InUse != 0 || unreg != 2 {
				t.Errorf("after releasing leaks: BytesMapped %d, InUse %d, %d unregistered; want 0, 0, 2",
					st.BytesMapped, st.InUse, unreg)
			}
		})
	}
}

func TestCloseWakesBlockedGet(t *testing.T) {
	p, err := New(&Options{BufferSize: 1, Budget: int64(pageSize), Lock: no})
	if err != nil {
		t.Fatal(err)
	}
	held, _ := p.TryGet()
	errc := make(chan error)
	go func() {
		_, err := p.Get(context.Background())
		errc <- err
	}()
	time.Sleep(10 * time.Millisecond)
	if err := p.Close(); err == nil || !strings.Contains(err.Error(), "1 of 1") {
		t.Errorf("Close = %v, want 1 leaked buffer", err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("blocked Get = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake a blocked Get")
	}
	held.Release()
}

func TestAlignment(t *testing.T) {
	for _, size := range []int{1, 3 * 224 * 224, pageSize, pageSize + 1, 1 << 20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			p := newPool(t, &Options{BufferSize: size, Budget: 3 * int64(roundToPage(size)), Lock: no})
			seen := map[uintptr]bool{}
			for {
				b, ok := p.TryGet()
				if !ok {
					break
				}
				defer b.Release()
				addr := uintptr(unsafe.Pointer(unsafe.SliceData(b.Bytes())))
				if addr%uintptr(pageSize) != 0 {
					t.Errorf("buffer at %#x is not aligned to the %d-byte page", addr, pageSize)
				}
				if seen[addr] {
					t.Errorf("buffer at %#x handed out twice", addr)
				}
				seen[addr] = true
			}
			if len(seen) != 3 {
				t.Errorf("got %d buffers, want 3", len(seen))
			}
		})
	}
}

func TestLockOption(t *testing.T) {
	p := newPool(t, &Options{BufferSize: 1, Lock: no})
	if st := p.Stats(); st.Locked || st.LockError != "" {
		t.Errorf("Lock=false: Locked %v, LockError %q", st.Locked, st.LockError)
	}
	// With Lock on (the default), the pool either locks or says why not.
	p = newPool(t, &Options{BufferSize: 1})
	if st := p.Stats(); st.Locked == (st.LockError != "") {
		t.Errorf("Lock=true: Locked %v, LockError %q", st.Locked, st.LockError)
	}
}

// TestConcurrentBudget hammers a pool from 8 goroutines, each checking that no one else
// writes its buffer while it owns it.
func TestConcurrentBudget(t *testing.T) {
	const workers, iters = 8, 300
	p := newPool(t, &Options{BufferSize: 1000, Budget: 3 * int64(pageSize), Lock: no})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range iters {
				b, err := p.Get(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				mem := b.Bytes()
				mark := byte(w + 1)
				mem[0], mem[len(mem)-1] = mark, mark
				if i%8 == 0 {
					runtime.Gosched()
				}
				if mem[0] != mark || mem[len(mem)-1] != mark {
					t.Errorf("worker %d: buffer written by another owner", w)
				}
				b.Release()
			}
		}()
	}
	wg.Wait()
	st := p.Stats()
	if st.PeakBytesInUse > st.Budget || st.PeakInUse > st.Buffers {
		t.Errorf("PeakBytesInUse %d > Budget %d or PeakInUse %d > Buffers %d",
			st.PeakBytesInUse, st.Budget, st.PeakInUse, st.Buffers)
	}
	if st.Gets != workers*iters || st.InUse != 0 || st.BytesInUse != 0 || st.Waits > st.Gets {
		t.Errorf("Stats = %+v, want Gets %d, InUse 0", st, workers*iters)
	}
}

func TestGetReleaseAllocs(t *testing.T) {
	p := newPool(t, &Options{BufferSize: 1, Lock: no})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	allocs := testing.AllocsPerRun(100, func() {
		b, err := p.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b.Release()
		b, _ = p.TryGet()
		b.Release()
		_ = p.Stats()
	})
	if allocs != 0 {
		t.Errorf("Get/TryGet/Release/Stats allocate %v times per run, want 0", allocs)
	}
}

func TestPoisonSwitch(t *testing.T) {
	p := newPool(t, &Options{BufferSize: 100, Budget: int64(pageSize), Lock: no})
	b, _ := p.TryGet()
	mem := b.Bytes()
	clear(mem)
	b.Release()
	want := byte(0)
	if poisonReleased {
		want = poisonByte
	}
	for i, c := range mem { // only a test may look after Release
		if c != want {
			t.Fatalf("byte %d after Release = %#x, want %#x (poisonReleased %v)", i, c, want, poisonReleased)
		}
	}
}

func TestPoison(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 1000, 4096} {
		b := make([]byte, n)
		poison(b)
		for i, c := range b {
			if c != poisonByte {
				t.Fatalf("len %d: byte %d = %#x", n, i, c)
			}
		}
	}
}

func BenchmarkGetRelease(b *testing.B) {
	b.Run("serial", func(b *testing.B) { benchGetRelease(b, 1<<20, false) })
	b.Run("parallel", func(b *testing.B) { benchGetRelease(b, 1<<20, true) })
}

// benchGetRelease measures a Get/Release round trip; bytes/s counts buffer bytes handed
// out, and buffers/s the round trips.
func benchGetRelease(b *testing.B, size int, parallel bool) {
	p := newPool(b, &Options{BufferSize: size, Budget: int64(runtime.GOMAXPROCS(0)+1) * int64(roundToPage(size))})
	ctx := context.Background()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	if parallel {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				buf, err := p.Get(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				buf.Release()
			}
		})
	} else {
		for range b.N {
			buf, err := p.Get(ctx)
			if err != nil {
				b.Fatal(err)
			}
			buf.Release()
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "buffers/s")
}

func TestGrow(t *testing.T) {
	defer func(old int) { slabBytes = old }(slabBytes)
	slabBytes = 2 * pageSize
	pg := int64(pageSize)
	var mu sync.Mutex
	registered, unregistered := 0, 0
	p := newPool(t, &Options{BufferSize: pageSize, Budget: 7 * pg, Initial: 2, Lock: no,
		Register:   func([]byte) error { mu.Lock(); registered++; mu.Unlock(); return nil },
		Unregister: func([]byte) error { mu.Lock(); unregistered++; mu.Unlock(); return nil }})
	if st := p.Stats(); st.Buffers != 2 || st.MaxBuffers != 7 || st.BytesMapped != 2*pg {
		t.Fatalf("after New: %d buffers of %d, %d bytes mapped; want 2 of 7, %d", st.Buffers, st.MaxBuffers, st.BytesMapped, 2*pg)
	}
	// Two out: a third Get would block until Grow adds one.
	a, _ := p.TryGet()
	b, _ := p.TryGet()
	if _, ok := p.TryGet(); ok {
		t.Fatal("TryGet found a third buffer in a pool of 2")
	}
	got := make(chan *Buffer)
	go func() {
		c, err := p.Get(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	if n, err := p.Grow(3); n != 3 || err != nil {
		t.Fatalf("Grow(3) = %d, %v", n, err)
	}
	c := <-got
	seen := map[*byte]bool{&a.Bytes()[0]: true, &b.Bytes()[0]: true}
	if seen[&c.Bytes()[0]] || len(c.Bytes()) != pageSize {
		t.Fatal("Grow's buffer overlaps one already out")
	}
	if n, err := p.Grow(10); n != 2 || err != nil {
		t.Fatalf("Grow(10) with 2 left in the budget = %d, %v; want 2", n, err)
	}
	if n, err := p.Grow(1); n != 0 || err != nil {
		t.Fatalf("Grow past the budget = %d, %v; want 0", n, err)
	}
	st := p.Stats()
	if st.Buffers != 7 || st.BytesMapped != 7*pg || st.InUse != 3 {
		t.Fatalf("after growing: %d buffers, %d bytes mapped, %d in use; want 7, %d, 3", st.Buffers, st.BytesMapped, st.InUse, 7*pg)
	}
	// Every buffer is distinct and usable.
	var held []*Buffer
	for {
		d, ok := p.TryGet()
		if !ok {
			break
		}
		if seen[&d.Bytes()[0]] {
			t.Fatal("a buffer handed out twice")
		}
		seen[&d.Bytes()[0]] = true
		d.Bytes()[pageSize-1] = 1
		held = append(held, d)
	}
	if len(held) != 4 {
		t.Fatalf("%d buffers free after growing, want 4", len(held))
	}
	for _, d := range append(held, a, b, c) {
		d.Release()
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Grow(1); !errors.Is(err, ErrClosed) {
		t.Errorf("Grow after Close = %v, want ErrClosed", err)
	}
	// 2 buffers per slab: 1 slab at New, then 2 (3 buffers), then 1 (2 buffers).
	if registered != 4 || unregistered != 4 {
		t.Errorf("registered %d slabs, unregistered %d; want 4 and 4", registered, unregistered)
	}
}
