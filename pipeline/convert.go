package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/decode"
)

// ConvertOptions configures Convert. A nil *ConvertOptions means the defaults.
type ConvertOptions struct {
	// Decode is the spec samples are stored under, usually a resize-first policy such as
	// shorter side 256; default decode's defaults (full size).
	Decode decode.Options
	// Workers is the number of files decoded at once; default GOMAXPROCS.
	Workers int
	// MaxFileBytes bounds a source file's size; larger files are bad. Default 1 GiB.
	MaxFileBytes int64
	// Source names the converted directory in the dataset's Info; default "".
	Source string
	// Progress, when set, is called about ten times a second and once at the end, from
	// one goroutine at a time.
	Progress func(ConvertProgress)
	// Logf receives one line per bad file; default log.Printf.
	Logf func(format string, args ...any)
}

// ConvertProgress counts a conversion's files so far.
type ConvertProgress struct {
	Total    int           // files listed
	Done     int           // files visited: stored, skipped or bad
	Stored   int           // decoded and stored now
	Skipped  int           // already stored by an earlier run, unchanged since and intact
	Repaired int           // stored before but damaged, so decoded and stored again
	Bad      int           // files that could not be read or decoded
	Bytes    int64         // source bytes read
	Elapsed  time.Duration // since Convert started
}

// ConvertReport is the outcome of Convert.
type ConvertReport struct {
	ConvertProgress
	Spec     string        // the spec records were stored under
	BadFiles []SampleError // every bad file, in index order
}

// Convert decodes every sample of src under opts.Decode and stores it in c, which must
// be writable: the offline form of a Loader's cache, read back with OpenConverted. It
// runs opts.Workers files at a time, skips files c already holds unchanged and intact (so
// a rerun resumes, and repairs records whose checksum fails), and records every bad file in the report instead of stopping. It stops with
// an error when ctx is done or c stops accepting records (full, or a write failed); what
// was stored stays, and the dataset's Info says whether it is complete.
func Convert(ctx context.Context, src Source, c *cache.Cache, opts *ConvertOptions) (*ConvertReport, error) {
	var o ConvertOptions
	if opts != nil {
		o = *opts
	}
	o.Decode.EnsureDefaults()
	if err := o.Decode.Validate(); err != nil {
		return nil, fmt.Errorf("pipeline: convert: %w", err)
	}
	if o.Workers == 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.MaxFileBytes == 0 {
		o.MaxFileBytes = 1 << 30
	}
	if o.Logf == nil {
		o.Logf = log.Printf
	}
	if o.Workers < 1 || o.MaxFileBytes < 1 {
		return nil, fmt.Errorf("pipeline: convert: Workers %d and MaxFileBytes %d must be ≥ 1", o.Workers, o.MaxFileBytes)
	}
	if err := checkKind(src); err != nil {
		return nil, fmt.Errorf("pipeline: convert: %w", err)
	}
	files, ok := src.(FileSource)
	if !ok {
		return nil, fmt.Errorf("pipeline: convert: %v holds stored pixels, not image files", src)
	}
	if src.Len() == 0 {
		return nil, errors.New("pipeline: convert: empty source")
	}
	dec, err := decode.NewDecoder(&o.Decode)
	if err != nil {
		return nil, fmt.Errorf("pipeline: convert: %w", err)
	}
	spec := specOf(o.Decode, dec.Backend())
	dec.Close()
	cv := &converter{src: files, c: c, o: &o, spec: spec, start: time.Now(), bad: map[int]SampleError{}}
	info := &cache.Info{FormatVersion: cache.FormatVersion, Spec: cv.spec, Codec: c.Options().Codec, Source: o.Source, Samples: src.Len()}
	info.Classes = src.Classes()
	if old, err := cache.ReadInfo(c.Dir()); err == nil && (old.Spec != info.Spec || old.Codec != info.Codec) {
		o.Logf("pipeline: convert: %s held a dataset of spec %q, codec %s; converting again as %q, codec %s",
			c.Dir(), old.Spec, old.Codec, info.Spec, info.Codec)
	}
	info.Updated = time.Now().UTC()
	if err := cache.WriteInfo(c.Dir(), info); err != nil {
		return nil, err
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	wg.Add(o.Workers)
	for range o.Workers {
		go func() {
			defer wg.Done()
			cv.work(ctx, cancel)
		}()
	}
	wg.Wait()

	rep := &ConvertReport{ConvertProgress: cv.progress(), Spec: cv.spec}
	for i := range src.Len() {
		if e, ok := cv.bad[i]; ok {
			rep.BadFiles = append(rep.BadFiles, e)
		}
	}
	stopErr := context.Cause(ctx)
	if rep.Done == rep.Total {
		stopErr = nil
	}
	info.Complete = stopErr == nil
	info.Stored = len(c.Records(cv.spec))
	info.Bad = rep.Bad
	info.Updated = time.Now().UTC()
	if err := cache.WriteInfo(c.Dir(), info); err != nil && stopErr == nil {
		stopErr = err
	}
	if o.Progress != nil {
		cv.mu.Lock()
		o.Progress(rep.ConvertProgress)
		cv.mu.Unlock()
	}
	if stopErr != nil {
		return rep, fmt.Errorf("pipeline: convert stopped after %d of %d files: %w", rep.Done, rep.Total, stopErr)
	}
	return rep, nil
}

type converter struct {
	src   FileSource
	c     *cache.Cache
	o     *ConvertOptions
	spec  string
	start time.Time
	next  atomic.Int64

	done, stored, skipped, nbad atomic.Int64
	repaired                    atomic.Int64
	bytes                       atomic.Int64

	mu     sync.Mutex // guards bad and serialises Progress
	bad    map[int]SampleError
	lastPr time.Time
}

func (cv *converter) progress() ConvertProgress {
	return ConvertProgress{
		Total: cv.src.Len(), Done: int(cv.done.Load()), Stored: int(cv.stored.Load()), Skipped: int(cv.skipped.Load()), Repaired: int(cv.repaired.Load()),
		Bad: int(cv.nbad.Load()), Bytes: cv.bytes.Load(), Elapsed: time.Since(cv.start),
	}
}

func (cv *converter) work(ctx context.Context, stop context.CancelCauseFunc) {
	dec, _ := decode.NewDecoder(&cv.o.Decode) // validated by Convert
	defer dec.Close()
	coder := cv.c.NewCoder()
	defer coder.Close()
	var img decode.Image
	var buf []byte
	for ctx.Err() == nil {
		i := int(cv.next.Add(1) - 1)
		if i >= cv.src.Len() {
			return
		}
		err := cv.one(i, dec, coder, &img, &buf)
		var stopping *stopError
		switch {
		case errors.As(err, &stopping):
			stop(stopping.err)
			return
		case err != nil:
			e := SampleError{Path: cv.src.Path(i), Index: i, Err: err}
			cv.o.Logf("%v", &e)
			cv.mu.Lock()
			cv.bad[i] = e
			cv.mu.Unlock()
			cv.nbad.Add(1)
		}
		cv.done.Add(1)
		if cv.o.Progress != nil && cv.mu.TryLock() {
			if time.Since(cv.lastPr) >= 100*time.Millisecond {
				cv.lastPr = time.Now()
				cv.o.Progress(cv.progress())
			}
			cv.mu.Unlock()
		}
	}
}

// stopError ends the whole conversion rather than one file.
type stopError struct{ err error }

func (e *stopError) Error() string { return e.err.Error() }

// one converts sample i: a nil error when it was stored or skipped.
func (cv *converter) one(i int, dec *decode.Decoder, coder *cache.Coder, img *decode.Image, buf *[]byte) error {
	f, fi, err := openSample(cv.src, i)
	if err != nil {
		return err
	}
	defer f.Close()
	size := fi.Size()
	if size > cv.o.MaxFileBytes {
		return fmt.Errorf("%w: file of %d bytes exceeds MaxFileBytes %d", decode.ErrTooLarge, size, cv.o.MaxFileBytes)
	}
	key := sampleKey(cv.spec, cv.src, i, fi)
	if ref, ok := cv.c.Lookup(key); ok {
		// Check it before skipping, so a rerun also repairs damaged records: reading
		// costs a fraction of decoding, and a damaged record is forgotten by Read.
		if cap(*buf) < ref.Bytes {
			*buf = make([]byte, ref.Bytes)
		}
		if _, err := cv.c.Read(ref, *buf); err == nil {
			cv.skipped.Add(1)
			return nil
		}
		cv.repaired.Add(1)
	}
	if int64(cap(*buf)) < size+1 {
		*buf = make([]byte, size+1)
	}
	data, err := readWhole(f, size, *buf)
	if err != nil {
		return err
	}
	cv.bytes.Add(int64(len(data)))
	m, err := dec.Decode(img, data)
	if err != nil {
		return err
	}
	if err := coder.Put(key, cv.src.Label(i), m); err != nil {
		if cache.Refused(err) {
			return &stopError{err}
		}
		return err
	}
	cv.stored.Add(1)
	return nil
}
