package pipeline

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/decode"
)

// openSample opens sample i of src and stats it, refusing directories.
func openSample(src Source, i int) (fs.File, fs.FileInfo, error) {
	f, err := src.Open(i)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && fi.IsDir() {
		err = errors.New("is a directory")
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

	hit   bool      // data is the payload of ref
	ref   cache.Ref // the cached record, when hit
	store bool      // a miss to store under key once decoded
	key   cache.Key
}

// reader loads encoded bytes for the workers, replacements first.
func (r *run) reader() {
	defer r.wg.Done()
	tasks := r.tasks
	for {
		var t task
		var ok bool
		select {
		case t = <-r.retry:
		default:
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
		}
		it := r.load(t)
		select {
		case r.decodeQ <- it:
		case <-r.ctx.Done():
			r.l.read.release(it.size)
			return
		}
	}
}

// load reads sample t.idx whole, from the cache when it holds it, charging its size to
// the read budget.
func (r *run) load(t task) readItem {
	l := r.l
	it := readItem{task: t}
	t0 := time.Now()
	if l.conv != nil {
		ref := l.conv.refs[t.idx]
		if it.err = r.reserve(&it, int64(ref.Bytes)); it.err != nil {
			return it
		}
		it.data, it.err = l.conv.cache.Read(ref, nil) // mapped: no copy
		it.hit, it.ref = true, ref
		l.stats.read.add(t0, int64(ref.Bytes))
		return it
	}
	f, fi, err := openSample(l.src, t.idx)
	if err != nil {
		it.err = err
		return it
	}
	defer f.Close()
	size := fi.Size()
	if c := l.cfg.Cache; c != nil && !t.noCache {
		key := sampleKey(l.spec, l.src, t.idx, fi)
		if ref, ok := c.Lookup(key); ok {
			if it.err = r.reserve(&it, int64(ref.Bytes)); it.err != nil {
				return it
			}
			payload, err := c.Read(ref, make([]byte, ref.Bytes))
			if err == nil {
				it.data, it.hit, it.ref = payload, true, ref
				l.stats.read.add(t0, int64(ref.Bytes))
				l.stats.cacheHits.Add(1)
				return it
			}
			// Damaged (the cache counted it and forgot the record): decode the source.
			l.cfg.Logf("pipeline: %v; decoding the source instead", err)
			l.read.release(it.size)
			it.size = 0
		}
		it.store, it.key = true, key
	}
	if it.err = r.reserve(&it, size+1); it.err != nil {
		return it
	}
	data, err := readWhole(f, size, make([]byte, size+1))
	if it.err = err; err == nil {
		it.data = data
	}
	l.stats.read.add(t0, int64(len(data)))
	return it
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
