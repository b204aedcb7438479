package pipeline

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime/debug"
	"sync"
	"time"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/decode"
	"github.com/conveyor-ml/conveyor/internal/files"
)

// openSample opens sample i of src and stats it, refusing what is not a regular file.
func openSample(src FileSource, i int) (fs.File, fs.FileInfo, error) {
	f, err := src.Open(i)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = files.Regular(fi)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// readWhole reads f, of size bytes when opened, into buf, which must hold size+1 bytes:
// the spare byte detects a file that grew since Stat. It returns what was read, also
// alongside an error.
func readWhole(f io.Reader, size int64, buf []byte) ([]byte, error) {
	n, err := io.ReadFull(f, buf[:size+1])
	switch {
	case err == nil:
		return buf[:n], fmt.Errorf("file grew beyond the %d bytes it had when opened", size)
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return buf[:n], nil
	}
	return buf[:n], err
}

// specOf is the cache spec of decoding with o on backend: every option, with the backend
// that actually runs, since backends differ in their pixels.
func specOf(o decode.Options, backend string) string {
	o.Backend = backend
	return o.String()
}

// sampleKey is the cache key of sample i of src as fi describes it.
func sampleKey(spec string, src Source, i int, fi fs.FileInfo) cache.Key {
	return cache.Key{Spec: spec, Path: src.Path(i), Size: fi.Size(), ModTime: fi.ModTime().UnixNano()}
}

type readItem struct {
	task
	data []byte
	size int64 // bytes charged to the read budget
	err  error

	buf    *[]byte      // the buffer data was read into, from readBufs; put back after decoding
	hit    bool         // data is the payload of ref, in cache
	pixels bool         // ref is the source's own stored pixels, not Config.SampleCache's copy
	cache  *cache.Cache // the cache ref is in
	ref    cache.Ref    // the record, when hit
	store  bool         // a miss to store under key once decoded
	key    cache.Key
}

// reader loads encoded bytes for the workers, replacements first.
func (r *run) reader(i int) {
	defer r.wg.Done()
	tune := r.l.tune
	tasks := r.tasks
	for {
		if wake := tune.parked(i, &tune.io); wake != nil {
			if !r.waitWake(wake) {
				return
			}
			continue
		}
		var t task
		var ok bool
		select {
		case t = <-r.retry:
		default:
			t0 := time.Now()
			select {
			case t = <-r.retry:
			case t, ok = <-tasks:
				if !ok {
					tasks = nil
					continue
				}
			case <-r.quit:
				return
			case <-r.ctx.Done():
				return
			}
			tune.readIdle.Add(int64(time.Since(t0)))
		}
		it, ok := r.fetch(t)
		if !ok {
			return
		}
		select {
		case r.decodeQ <- it:
		case <-r.ctx.Done():
			r.l.read.release(it.size)
			return
		}
	}
}

// fetch loads sample t. A stored record is read here; a file is read by a goroutine of
// its own, which fetch waits for unless the run stops first: a read stuck in the kernel
// (a hung network mount, a device that never answers) cannot be interrupted, so it is
// abandoned rather than joined, and cancellation and Close return at once. The abandoned
// goroutine keeps its file open and its bytes of the read budget until the kernel
// returns, then gives both back and exits. ok is false when the run stopped.
func (r *run) fetch(t task) (it readItem, ok bool) {
	it.task = t
	if r.l.pixels != nil && r.loadGuarded(&it, r.loadStored) {
		return it, true
	}
	var (
		mu        sync.Mutex
		abandoned bool
		done      = make(chan readItem, 1)
	)
	go func() {
		it := readItem{task: t}
		if r.ctx.Err() == nil {
			r.loadGuarded(&it, r.loadFile)
		}
		mu.Lock()
		defer mu.Unlock()
		if abandoned {
			r.l.read.release(it.size)
			return
		}
		done <- it
	}()
	select {
	case it := <-done:
		return it, true
	case <-r.ctx.Done():
		mu.Lock()
		abandoned = true
		mu.Unlock()
		select {
		case it := <-done: // it finished meanwhile
			r.l.read.release(it.size)
		default:
		}
		return it, false
	}
}

// loadGuarded runs load on it, turning a panic in the source into a bad sample that
// carries the stack, with the read budget it held given back. It returns load's result.
func (r *run) loadGuarded(it *readItem, load func(*readItem) bool) (loaded bool) {
	defer func() {
		if v := recover(); v != nil {
			r.l.read.release(it.size)
			it.size, it.data = 0, nil
			it.err = fmt.Errorf("reading: %w", &PanicError{Value: v, Stack: debug.Stack()})
			loaded = true
		}
	}()
	return load(it)
}

// loadStored reads sample it.idx's stored record when the source has one, and reports
// whether it did.
func (r *run) loadStored(it *readItem) bool {
	l := r.l
	c, ref, ok := l.pixels.Stored(it.idx)
	if !ok {
		return false
	}
	t0 := time.Now()
	if it.err = r.reserve(it, int64(ref.Bytes)); it.err != nil {
		return true
	}
	var buf []byte
	if c.Copies(ref) {
		// Read into a buffer used before (a shard in object storage, or not mapped):
		// a new one per record would be a GC cycle every few dozen records.
		it.buf = getReadBuf(ref.Bytes)
		buf = *it.buf
	}
	it.data, it.err = c.Read(ref, buf) // mapped: no copy
	it.hit, it.pixels, it.cache, it.ref = true, true, c, ref
	l.stats.read.add(t0, int64(ref.Bytes))
	return true
}

// loadFile reads sample it.idx's file whole, or its record in Config.SampleCache when that
// holds it, charging the size to the read budget. It always reports true.
func (r *run) loadFile(it *readItem) bool {
	l := r.l
	t := it.task
	t0 := time.Now()
	if l.files == nil {
		it.err = fmt.Errorf("pipeline: %T stores no pixels for this sample and has no files", l.src)
		return true
	}
	f, fi, err := openSample(l.files, t.idx)
	if err != nil {
		it.err = err
		return true
	}
	defer f.Close()
	size := fi.Size()
	if l.conv != nil && size > l.conv.maxFileBytes {
		it.err = fmt.Errorf("%w: file of %d bytes exceeds MaxFileBytes %d", decode.ErrTooLarge, size, l.conv.maxFileBytes)
		return true
	}
	if l.cfg.SampleCache != nil && !t.noCache && r.lookup(it, fi, t0) {
		return true
	}
	if it.err != nil {
		return true
	}
	if it.err = r.reserve(it, size+1); it.err != nil {
		return true
	}
	data, err := readWhole(f, size, make([]byte, size+1))
	if it.err = err; err == nil {
		it.data = data
	}
	if l.conv != nil {
		l.conv.fileBytes.Add(int64(len(data)))
	}
	l.stats.read.add(t0, int64(len(data)))
	return true
}

// reserve charges n bytes to the read budget for it.
func (r *run) reserve(it *readItem, n int64) error {
	if n > r.l.read.size {
		return fmt.Errorf("%w: %d bytes to read exceed the read budget of %d bytes", decode.ErrTooLarge, n, r.l.read.size)
	}
	if err := r.l.read.acquire(r.ctx, n); err != nil {
		return err
	}
	it.size = n
	return nil
}

// readBufs holds buffers that stored records were read into, for reuse.
var readBufs sync.Pool

// getReadBuf returns a buffer of at least n bytes from readBufs.
func getReadBuf(n int) *[]byte {
	if b, ok := readBufs.Get().(*[]byte); ok && cap(*b) >= n {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n)
	return &b
}

// putReadBuf gives it's read buffer back to readBufs once nothing uses its data.
func putReadBuf(it *readItem) {
	if it.buf != nil {
		readBufs.Put(it.buf)
		it.buf, it.data = nil, nil
	}
}
