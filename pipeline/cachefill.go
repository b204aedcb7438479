package pipeline

import (
	"io/fs"
	"time"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/decode"
)

// lookup serves sample it from Config.SampleCache when it holds an intact record for the file
// fi describes, and reports whether it did; otherwise it marks the sample to be stored
// once decoded. it.err is set when the read budget could not be had.
func (r *run) lookup(it *readItem, fi fs.FileInfo, t0 time.Time) bool {
	l, c := r.l, r.l.cfg.SampleCache
	key := sampleKey(l.spec, l.src, it.idx, fi)
	if ref, ok := c.Lookup(key); ok {
		if it.err = r.reserve(it, int64(ref.Bytes)); it.err != nil {
			return false
		}
		payload, err := c.Read(ref, make([]byte, ref.Bytes))
		if err == nil {
			it.data, it.hit, it.cache, it.ref = payload, true, c, ref
			l.stats.read.add(t0, int64(ref.Bytes))
			l.stats.cacheHits.Add(1)
			return true
		}
		// Damaged (the cache counted it and forgot the record): decode the source. (A
		// read abandoned by a stopped run logs nothing: its loader may be closed.)
		if r.ctx.Err() == nil {
			l.cfg.Logf("pipeline: %v; decoding the source instead", err)
		}
		if l.conv != nil {
			l.conv.repaired.Add(1)
		}
		l.read.release(it.size)
		it.size = 0
	}
	it.store, it.key = true, key
	return false
}

// store puts a freshly decoded sample in the cache when the fill share allows, and
// returns the time it finished.
//
// When the loader runs Convert, a cache that refuses records (full, or a write failed)
// ends the run with that error.
func (w *worker) store(l *Loader, it readItem, img *decode.Image, t0 time.Time) (time.Time, error) {
	if !l.fill.Admit() {
		l.stats.cacheDeferred.Add(1)
		return t0, nil
	}
	err := w.coder(l.cfg.SampleCache).Put(it.key, l.src.Label(it.idx), img)
	t1 := time.Now()
	l.fill.Filled(t1.Sub(t0))
	switch {
	case err == nil:
		l.stats.cacheStored.Add(1)
	case cache.Refused(err) && l.conv != nil:
		return t1, &fatalError{err}
	case cache.Refused(err):
		// The cache logged why once; the epoch carries on from the sources.
	case l.conv != nil:
		return t1, err // this file's record could not be written: a bad sample
	default:
		l.cfg.Logf("pipeline: caching %s: %v", it.key.Path, err)
	}
	return t1, nil
}

// filler is how the loader asks whether to store a decoded sample in Config.SampleCache, and
// tells it how the workers spend their time; the policy lives with the cache
// (cache.FillPolicy).
type filler interface {
	Admit() bool
	Worked(time.Duration)
	Idled(time.Duration)
	Filled(time.Duration)
}
